"""The metadata of :class:`~.knowledge_base.KnowledgeBase`: info, restriction, fingerprints.

The catalog row read (a damaged catalog healed once first), the restriction
flags cached until the catalog changes, topics derived once a generation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._store.metadata import (
    KnowledgeBaseInfo,
    RestrictionFlags,
    derive_topics,
    info_from_row,
)
from langchain_knowledge_inject._store.write_plan import partition_of
from langchain_knowledge_inject.errors import KnowledgeBaseNotFoundError, StoreError

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.chroma import ChromaSide
    from langchain_knowledge_inject._store.handles import StoreHandles
    from langchain_knowledge_inject._store.opening import StoredFlags


class MetadataMixin:
    """The metadata of ``KnowledgeBase`` (a part of its class, not used alone)."""

    if TYPE_CHECKING:  # what it uses of the facade
        id: str
        name: str
        _handles: StoreHandles
        _chroma: ChromaSide
        _flags_state: StoredFlags
        _restriction: tuple[tuple[Any, ...], RestrictionFlags] | None
        _topics: tuple[int, list[str]] | None

        def _check_process(self) -> None: ...
        def _heal_damaged_catalog(self, exc: BaseException) -> bool: ...

    @property
    def info(self) -> KnowledgeBaseInfo:
        """Metadata of this knowledge base (read from the store each time).

        ``restricted`` and ``sensitive_sources`` are on when the catalog or the
        record kept in Chroma says so, or when Chroma could not be asked.
        """
        row = self._stored_row()
        info = self._info_from_row(row)
        flags = self._flags(row)
        return dataclasses.replace(
            info, restricted=flags.restricted, sensitive_sources=flags.sensitive_sources
        )

    @property
    def restriction(self) -> RestrictionFlags:
        """The stored restriction flags alone: what :attr:`info` says of them, cheaper.

        Read on every turn by the surfaces (no chunk count, no topics). On when
        the catalog or the record kept in Chroma says so, or when Chroma could
        not be asked. Cached until the catalog changes (a write by this
        connection, or a commit by any other: SQLite's ``data_version``) or
        the flags held in memory change; while the Chroma record is unknown it
        is read again each time, so the flags follow the record once it answers.
        """
        self._check_process()
        cached = self._restriction
        if cached is not None and self._flags_state.known and cached[0] == self._catalog_key():
            return cached[1]
        flags = self._flags(self._stored_row())
        self._restriction = (self._catalog_key(), flags)
        return flags

    def _catalog_key(self) -> tuple[Any, ...]:
        """Changes whenever the catalog or the flags held in memory may have changed."""
        handles = self._handles
        with handles.lock:
            conn = handles.conn
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            return (id(conn), conn.total_changes, version, self._flags_state.version)

    def _stored_row(self) -> Mapping[str, Any]:
        """This knowledge base's catalog row; a damaged catalog is healed once first."""
        self._check_process()
        try:
            with self._handles.errors("reading its metadata"):
                row = self._handles.catalog.get_kb(self.name)
                if row is None:
                    msg = f"Knowledge base {self.name!r} was deleted"
                    raise KnowledgeBaseNotFoundError(msg, kb_name=self.name)
                self._flags_state.refresh(self._handles, self._chroma)
                return row
        except StoreError as exc:
            if not self._heal_damaged_catalog(exc):
                raise
            return self._stored_row()

    def _flags(self, row: Mapping[str, Any]) -> RestrictionFlags:
        settings = row["settings"]
        pinned = self._flags_state.pinned
        return RestrictionFlags(
            restricted=bool(settings.get("restricted", False)) or pinned.get("restricted", False),
            sensitive_sources=bool(settings.get("sensitive_sources", False))
            or pinned.get("sensitive_sources", False),
        )

    def _info_from_row(self, row: Mapping[str, Any]) -> KnowledgeBaseInfo:
        derived: list[str] | None = None
        if not row["topics"]:
            generation = self._handles.generation
            if self._topics is None or self._topics[0] != generation:
                texts = self._handles.catalog.sample_texts(self.id, 500)
                self._topics = (generation, derive_topics(texts))
            derived = self._topics[1]
        count = self._handles.catalog.count(self.id)
        return info_from_row(row, chunk_count=count, derived_topics=derived)

    def get_source_fingerprint(self, source: str, *, tenant_id: str | None = None) -> str | None:
        """The fingerprint stored with ``source`` by the last ``add_documents``, or None."""
        self._check_process()
        return self._handles.catalog.get_fingerprint(self.id, partition_of(tenant_id), source)
