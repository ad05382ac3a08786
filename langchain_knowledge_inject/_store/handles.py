"""The SQLite side of one knowledge base: catalog, keyword index, and their one transaction.

A knowledge base keeps two derived records of its chunks in one SQLite file
(``catalog.sqlite3``): the registry (``catalog.Catalog``) and the keyword
index (``keyword.KeywordIndex``). :class:`StoreHandles` owns the connection,
the lock and both, and is the narrow interface through which the store's
helpers (``writes``, ``sync``, ``recovery``, ``consistency``, ``opening``)
touch them: none of them reaches into ``KnowledgeBase``.

Every change to the registry and the keyword index goes through
:meth:`StoreHandles.write_rows`, one transaction: a crash leaves both at the
old state or both at the new one.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

from langchain_knowledge_inject._store.catalog import Catalog, ChunkRow
from langchain_knowledge_inject._store.documents import DocumentIndex
from langchain_knowledge_inject._store.keyword import KeywordIndex
from langchain_knowledge_inject._store.storage import (
    MIN_FREE_ENV,
    free_bytes,
    min_free_bytes,
    open_store_dir,
    set_aside_damaged,
    store_error,
)
from langchain_knowledge_inject._store.write_plan import group_by_partition
from langchain_knowledge_inject.errors import KnowledgeInjectError, StoreError

__all__ = ["KEYWORD_PAGE", "SourceUpdate", "StoreHandles"]

KEYWORD_PAGE = 1000
"""Most chunks handed to the keyword index per call within one transaction."""

SourceUpdate = Literal["unchanged", "register"] | Mapping[tuple[str, str], "str | None"]
"""What :meth:`StoreHandles.write_rows` does to the sources table.

``"unchanged"``: nothing. ``"register"``: every source of the rows written
gets a row (no fingerprint) unless it has a fingerprint already. A mapping
``{(partition, source): fingerprint}``: those rows are written as given.
"""


class StoreHandles:
    """The catalog connection of one knowledge base, its registry and keyword index.

    Args:
        name: The knowledge base's name (for errors).
        path: The store directory holding ``catalog.sqlite3``.
        read_only: Whether the store cannot be written.
    """

    def __init__(self, name: str, path: Path, *, read_only: bool) -> None:
        self.name = name
        self.path = path
        self.read_only = read_only
        self.kb_id = ""
        """The knowledge base's id, set once it is known (see ``opening``)."""
        self.lock = threading.RLock()
        """Held by every user of :attr:`conn`."""
        self.generation = 0
        """Counts committed changes to the chunks (caches derived from them compare it)."""
        self.conn: sqlite3.Connection
        self.catalog: Catalog
        self.keyword: KeywordIndex
        self.documents: DocumentIndex

    # -- the connection ------------------------------------------------------
    def open(self) -> None:
        """Open the catalog (a damaged one is set aside and started anew when writable)."""
        self.conn = open_store_dir(self.path, rebuild_damaged=not self.read_only)
        self.read_only = self.read_only or bool(getattr(self.conn, "read_only", False))
        self.catalog = Catalog(self.conn, self.lock)
        self.keyword = KeywordIndex(self.conn, lock=self.lock)
        self.documents = DocumentIndex(self.conn, lock=self.lock, read_only=self.read_only)

    def set_aside(self) -> Path:
        """Close the damaged catalog, keep it aside and open a fresh one; the name kept."""
        with self.lock:
            self.conn.close()
            kept = set_aside_damaged(self.path / "catalog.sqlite3")
            self.open()
            self.generation += 1
        return kept

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            self.conn.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Hold the lock; commit on success, roll back on any exception."""
        with self.lock:
            try:
                yield self.conn
                self.conn.commit()
            except BaseException:
                self.conn.rollback()
                raise

    # -- errors ----------------------------------------------------------------
    @contextlib.contextmanager
    def errors(self, action: str) -> Iterator[None]:
        """Turn disk-full, read-only and damaged-file errors into :class:`StoreError`."""
        try:
            yield
        except KnowledgeInjectError:
            raise
        except Exception as exc:
            error = store_error(exc, action=action, kb_name=self.name, path=self.path)
            if error is None:
                raise
            raise error from exc

    def refuse_if_read_only(self, action: str) -> None:
        """Raise :class:`StoreError` (``reason="read_only"``) on a read-only store."""
        if self.read_only:
            msg = (
                f"The store of knowledge base {self.name!r} ({self.path}) is read-only: "
                f"{action} was refused. Searching still works; to write, make the store "
                "directory writable or open a writable copy of it."
            )
            raise StoreError(msg, kb_name=self.name, reason="read_only", path=self.path)

    def ensure_room(self, needed: int, action: str) -> None:
        """Refuse a write that would leave less than the reserve free on the store's disk.

        Chroma's local store does not recover in-process from a write that fills the disk
        (its compaction fails, and later calls in the same process may block), so a write
        stops before that point with ``StoreError(reason="disk_full")``, having written
        nothing. The reserve is ``KINJECT_MIN_FREE_MB`` (default 16 MiB; 0 turns it off).

        Args:
            needed: The write's estimated size in bytes
                (:func:`~langchain_knowledge_inject._store.storage.estimated_write_bytes`).
            action: What is being done, for the message ("adding documents").
        """
        reserve = min_free_bytes()
        free = free_bytes(self.path) if reserve else None
        if free is None or free >= needed + reserve:
            return
        msg = (
            f"The disk holding knowledge base {self.name!r} is full: {free >> 20} MiB free, "
            f"and {action} needs about {max(needed >> 20, 1)} MiB plus a reserve of "
            f"{reserve >> 20} MiB. Nothing was written and searches still work. Free disk "
            "space, then run the same call again; no restart is needed (the reserve is "
            f"{MIN_FREE_ENV})."
        )
        raise StoreError(msg, kb_name=self.name, reason="disk_full", path=self.path)

    # -- the one transaction -------------------------------------------------
    def write_rows(
        self,
        rows: Sequence[ChunkRow] = (),
        *,
        indexed: Sequence[ChunkRow] | None = None,
        remove: Mapping[str, Sequence[str]] | None = None,
        clear: Sequence[str] = (),
        sources: SourceUpdate = "unchanged",
        refresh_documents: bool = False,
    ) -> None:
        """Write chunks into the registry and the keyword index in one transaction.

        In order: the partitions in ``clear`` are emptied, ``rows`` are put in
        the registry, ``indexed`` in the keyword index (by pages of
        :data:`KEYWORD_PAGE`), the ``remove`` ids are dropped from both, and
        the sources are updated. All or nothing is committed.

        Args:
            rows: Registry rows to write (an existing chunk id is replaced);
                each names its partition.
            indexed: The rows whose text the keyword index takes (default:
                ``rows``; a metadata-only update passes fewer).
            remove: ``{partition: chunk ids}`` dropped from the registry and
                the keyword index.
            clear: Partitions whose registry rows, sources and keyword rows are
                dropped first (the catalog described another collection).
            sources: See :data:`SourceUpdate`.
            refresh_documents: Rebuild every dirty document row of the document
                index in the same transaction (the knowledge base's own writes);
                otherwise the triggers leave them dirty, and a search rebuilds a
                few before it ranks (catch-up, recovery, repair).
        """
        keyword = list(rows) if indexed is None else list(indexed)
        with self.transaction():
            for partition in clear:
                self.catalog.clear_partition(self.kb_id, partition)
                stale = sorted(self.keyword.ids(self.kb_id, partition))
                self.keyword.delete(self.kb_id, partition, stale)
            if rows:
                self.catalog.put_chunks(self.kb_id, rows)
            for partition, part in group_by_partition(keyword).items():
                for start in range(0, len(part), KEYWORD_PAGE):
                    page = part[start : start + KEYWORD_PAGE]
                    self.keyword.add(self.kb_id, partition, [(r.chunk_id, r.text) for r in page])
            for partition, ids in (remove or {}).items():
                if ids:
                    self.keyword.delete(self.kb_id, partition, list(ids))
                    self.catalog.delete_chunks(self.kb_id, partition, list(ids))
            self._update_sources(rows, sources)
            if refresh_documents:
                self.documents.refresh(self.kb_id)
        if rows or keyword or clear or any(remove.values() if remove else ()):
            self.generation += 1

    def _update_sources(self, rows: Sequence[ChunkRow], sources: SourceUpdate) -> None:
        if sources == "unchanged":
            return
        if sources == "register":
            for partition, source in sorted({(r.partition, r.source) for r in rows if r.source}):
                if self.catalog.get_fingerprint(self.kb_id, partition, source) is None:
                    self.catalog.put_source(self.kb_id, partition, source, None)
            return
        assert not isinstance(sources, str)
        for (partition, source), fingerprint in sources.items():
            if source:
                self.catalog.put_source(self.kb_id, partition, source, fingerprint)
