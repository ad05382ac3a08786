"""Server mode: each process's keyword index catches up with other processes' writes.

The model: **Chroma is the record; the registry and keyword index of each
process are a derived cache.** Several app processes (LangGraph workers, several
machines) share one Chroma server, and each keeps its own ``catalog.sqlite3``
(registry + BM25 index). A process learns about the others' writes from Chroma:

* every chunk written to a server carries :data:`WRITE_MARK` in its Chroma
  metadata: the writer's clock (``time.time()``) when the write was sent;
* before a keyword or hybrid search, when the partition was last caught up more
  than ``sync_interval`` seconds ago (default :data:`DEFAULT_SYNC_INTERVAL`),
  the process asks Chroma for the metadata of the chunks marked since its
  previous catch-up began, and fetches the text of those it lacks or holds in
  another version. A write is marked before it is sent and may commit up to
  the writer's ``timeout`` later, and machines' clocks differ: so the ids (only
  the ids) of the chunks marked in the overlap before that (the knowledge
  base's ``timeout`` plus :data:`CLOCK_SKEW_S`) are checked again. New chunks
  go to the registry and keyword index, and the new mark to the catalog (table
  ``kinject_sync``). The cost is proportional to what was written since, not
  to the collection;
* it then compares the collection's ``count()`` with its registry. A difference
  means something the marks cannot show: a delete by another process, a write
  committed by a server that was frozen past the writer's timeout, a write from
  an older version without the mark. Only then it reconciles the partition
  with an ids-only scan: local chunks Chroma lacks are dropped, Chroma chunks
  it lacks are adopted.

A write made by another process is therefore searchable here by keyword (and
so by hybrid search) at most ``sync_interval`` seconds later, plus the time of
one catch-up; dense search reads Chroma directly and sees it at once. The
catch-up runs on the searching thread before the search, each of its calls
bounded by the knowledge base's ``timeout`` (a frozen server fails it, and so
the search, within one timeout); when another thread of the process is already
catching up, a search does not wait for it. The first catch-up of a process
that lacks a large partition adopts it on that search. A search in
``mode="dense"`` never catches up.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._store.catalog import ChunkRow
from langchain_knowledge_inject._store.storage import (
    WRITE_MARK,
    chroma_metadata,
    strip_mark,
    write_mark,
)
from langchain_knowledge_inject._store.write_plan import source_key
from langchain_knowledge_inject.errors import RetrievalError

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.handles import StoreHandles

__all__ = [
    "CLOCK_SKEW_S",
    "DEFAULT_SYNC_INTERVAL",
    "WRITE_MARK",
    "KeywordSync",
    "strip_mark",
    "write_mark",
]

logger = logging.getLogger(__name__)

DEFAULT_SYNC_INTERVAL = 5.0
"""Default bound, in seconds, on how stale a process's keyword index may be in server mode."""

CLOCK_SKEW_S = 10.0
"""Allowed difference between the clocks of the machines that write to one server."""
_UNBOUNDED_WRITE_S = 60.0  # how long a write may take when the knowledge base has no timeout

_PAGE = 2000  # records per Chroma get()


class KeywordSync:
    """Keeps one knowledge base's registry and keyword index caught up with its Chroma server.

    Args:
        handles: The knowledge base's SQLite side (registry, keyword index, marks).
        collection: Its partition collection (bounded), or None when absent:
            ``collection(partition)``.
        timeout: The knowledge base's timeout (how late a write may commit).
        interval: Most seconds between two catch-ups of a partition; None never
            catches up on its own (``catch_up`` still works).
    """

    def __init__(
        self,
        handles: StoreHandles,
        collection: Callable[[str], Any],
        *,
        timeout: float | None,
        interval: float | None,
    ) -> None:
        self._handles = handles
        self._collection = collection
        self.interval = interval
        self.overlap = (timeout or _UNBOUNDED_WRITE_S) + CLOCK_SKEW_S
        self._checked: dict[str, float] = {}
        self._running = threading.Lock()
        try:
            with handles.transaction() as conn:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS kinject_sync (kb_id TEXT NOT NULL, partition"
                    " TEXT NOT NULL, mark REAL NOT NULL, PRIMARY KEY (kb_id, partition))"
                )
        except sqlite3.Error:  # a read-only or full catalog: search what it holds
            logger.warning(
                "keyword index of %r cannot record catch-ups; other processes' writes reach "
                "it only through `kinject check --repair`", handles.name, exc_info=True,
            )  # fmt: skip
            self.interval = None

    def maybe_catch_up(self, partition: str) -> None:
        """Catch ``partition`` up when its last catch-up is older than the interval."""
        if self.interval is None:
            return
        now = time.monotonic()
        last = self._checked.get(partition)
        if last is not None and now - last < self.interval:
            return
        if not self._running.acquire(blocking=False):
            return  # another thread is catching up: search with what is there
        try:
            self._checked[partition] = now
            self.catch_up(partition)
        except RetrievalError:
            self._checked.pop(partition, None)  # the server did not answer: retry next search
            raise
        except Exception:
            logger.warning(
                "keyword index of %r not caught up with the server; searching what it holds",
                self._handles.name, exc_info=True,
            )  # fmt: skip
        finally:
            self._running.release()

    def catch_up(self, partition: str) -> int:
        """Bring ``partition``'s registry and keyword index up to date with Chroma.

        Returns:
            How many chunks were added, updated or removed locally.
        """
        handles = self._handles
        collection = self._collection(partition)
        if collection is None:
            return 0
        started = write_mark()
        mark = self._mark(partition)
        changed = 0
        if mark is not None:
            changed += self._late(partition, collection, mark - self.overlap, mark)
            changed += self._since(partition, collection, mark)
        if collection.count() != handles.catalog.count(handles.kb_id, partition):
            changed += self._reconcile(partition, collection)
        with handles.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO kinject_sync (kb_id, partition, mark) VALUES (?, ?, ?)",
                (handles.kb_id, partition, started),
            )
        return changed

    def _mark(self, partition: str) -> float | None:
        handles = self._handles
        with handles.lock:
            row = handles.conn.execute(
                "SELECT mark FROM kinject_sync WHERE kb_id = ? AND partition = ?",
                (handles.kb_id, partition),
            ).fetchone()
        return None if row is None else float(row[0])

    def _since(self, partition: str, collection: Any, since: float) -> int:
        """Adopt the chunks marked since ``since`` that this process lacks or holds stale."""
        handles = self._handles
        wanted: list[str] = []
        offset = 0
        while True:
            page = collection.get(
                where={WRITE_MARK: {"$gte": since}},
                include=["metadatas"],
                limit=_PAGE,
                offset=offset,
            )
            ids, metas = page["ids"], page["metadatas"] or []
            if not ids:
                break
            known = handles.catalog.existing(handles.kb_id, partition, ids)
            for cid, meta in zip(ids, metas, strict=True):
                stored = known.get(cid)
                if stored is None or chroma_metadata(json.loads(stored)) != strip_mark(meta):
                    wanted.append(cid)
            if len(ids) < _PAGE:
                break
            offset += len(ids)
        return self._adopt(partition, collection, wanted)

    def _late(self, partition: str, collection: Any, start: float, end: float) -> int:
        """Adopt chunks marked in ``[start, end)`` this process lacks (committed late)."""
        handles = self._handles
        where = {"$and": [{WRITE_MARK: {"$gte": start}}, {WRITE_MARK: {"$lt": end}}]}
        wanted: list[str] = []
        offset = 0
        while True:
            ids = collection.get(where=where, include=[], limit=_PAGE, offset=offset)["ids"]
            known = handles.catalog.existing(handles.kb_id, partition, ids)
            wanted += [cid for cid in ids if cid not in known]
            if len(ids) < _PAGE:
                break
            offset += len(ids)
        return self._adopt(partition, collection, wanted)

    def _reconcile(self, partition: str, collection: Any) -> int:
        """Make the local records hold exactly the partition's Chroma ids (ids-only scan)."""
        handles = self._handles
        remote: set[str] = set()
        offset = 0
        while True:
            ids = collection.get(include=[], limit=_PAGE, offset=offset)["ids"]
            remote.update(ids)
            if len(ids) < _PAGE:
                break
            offset += len(ids)
        local = handles.catalog.partition_ids(handles.kb_id, partition)
        gone = sorted(local - remote)
        if gone:
            handles.write_rows(remove={partition: gone})
        return len(gone) + self._adopt(partition, collection, sorted(remote - local))

    def _adopt(self, partition: str, collection: Any, ids: Sequence[str]) -> int:
        """Copy chunks from Chroma into the registry and keyword index (sources untouched)."""
        for start in range(0, len(ids), _PAGE):
            batch = list(ids[start : start + _PAGE])
            got = collection.get(ids=batch, include=["documents", "metadatas"])
            rows = [
                ChunkRow(
                    cid,
                    partition,
                    source_key(meta or {}),
                    text or "",
                    strip_mark(meta),
                )
                for cid, text, meta in zip(
                    got["ids"], got["documents"], got["metadatas"], strict=True
                )
            ]
            self._handles.write_rows(rows)
        return len(ids)
