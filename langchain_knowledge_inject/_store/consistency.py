"""Checking and repairing drift between the three records of a knowledge base.

Every chunk is recorded three times: in the registry (``catalog.py``), in the
keyword index (``keyword.py``) and in its partition's Chroma collection. A write
goes to Chroma first and then to SQLite in one transaction, so a process killed
half way can leave Chroma holding chunks the registry does not know, or (after
a partial delete) missing chunks it does. The registry is the record of truth:

- keyword rows missing or extra: rebuilt from the registry text;
- Chroma records the registry lacks (a crashed write, another machine on the
  same server, a write through another client): adopted into the registry and
  the keyword index from the text and metadata Chroma holds. Records without
  text cannot be explained: they are reported (``unexplained``) and left in
  place. Repair never deletes a Chroma record;
- registry chunks Chroma lacks: embedded again from the registry text;
- a damaged catalog: kept aside (``catalog.sqlite3.damaged-<time>``) and
  rebuilt from Chroma.

``kinject check --kb NAME`` reports drift; ``--repair`` fixes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langchain_knowledge_inject._store.recovery import (
    adopt_rows,
    chroma_partitions,
    iter_records,
    rows_from_records,
)
from langchain_knowledge_inject._store.storage import chroma_metadata
from langchain_knowledge_inject.errors import StoreError

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from langchain_knowledge_inject._store.catalog import ChunkRow
    from langchain_knowledge_inject._store.chroma import ChromaSide
    from langchain_knowledge_inject._store.handles import StoreHandles

__all__ = ["ConsistencyReport", "PartitionDrift", "check_knowledge_base"]

logger = logging.getLogger(__name__)


@dataclass
class PartitionDrift:
    """Drift found in one tenant partition."""

    partition: str
    """The tenant partition ("" is the shared one)."""
    registry: int
    """Chunks in the registry."""
    keyword_missing: list[str] = field(default_factory=list)
    """Registry chunks the keyword index lacks."""
    keyword_extra: list[str] = field(default_factory=list)
    """Keyword rows the registry does not know."""
    chroma_missing: list[str] = field(default_factory=list)
    """Registry chunks the Chroma collection lacks."""
    chroma_extra: list[str] = field(default_factory=list)
    """Chroma records the registry does not know."""
    unexplained: list[str] = field(default_factory=list)
    """Chroma records without text: repair cannot adopt them and leaves them in place."""

    @property
    def clean(self) -> bool:
        """True when the three records agree."""
        return not (
            self.keyword_missing or self.keyword_extra or self.chroma_missing or self.chroma_extra
        )


@dataclass
class ConsistencyReport:
    """Result of :func:`check_knowledge_base`."""

    kb_name: str
    """The knowledge base checked."""
    partitions: list[PartitionDrift]
    """Per-partition findings."""
    repaired: bool = False
    """Whether the drift found was repaired."""
    catalog_rebuilt: bool = False
    """Whether a damaged catalog was set aside and rebuilt from Chroma."""

    @property
    def unexplained(self) -> list[str]:
        """Chroma records left in place because they hold no text, in every partition."""
        return [cid for p in self.partitions for cid in p.unexplained]

    @property
    def clean(self) -> bool:
        """True when every partition is consistent."""
        return all(p.clean for p in self.partitions)

    def summary(self) -> str:
        """A human-readable report, one line per partition."""
        lines = [f"knowledge base {self.kb_name!r}: {'consistent' if self.clean else 'DRIFT'}"]
        for p in self.partitions:
            name = p.partition or "(shared)"
            lines.append(
                f"  {name}: {p.registry} chunks; keyword missing {len(p.keyword_missing)}, "
                f"extra {len(p.keyword_extra)}; chroma missing {len(p.chroma_missing)}, "
                f"extra {len(p.chroma_extra)}"
            )
            if p.unexplained:
                lines.append(
                    f"  {name}: {len(p.unexplained)} Chroma records hold no text and were left "
                    "in place (not adopted, not deleted)"
                )
        if self.catalog_rebuilt:
            lines.append("  the damaged catalog was kept aside and rebuilt from Chroma")
        if self.repaired:
            lines.append("  repaired")
        return "\n".join(lines)


def check_knowledge_base(
    handles: StoreHandles,
    chroma: ChromaSide,
    embeddings: Embeddings,
    *,
    repair: bool = False,
    rebuild_catalog: Callable[[], None],
) -> ConsistencyReport:
    """Compare registry, keyword index and Chroma for every partition; optionally repair.

    Args:
        handles: The knowledge base's SQLite side.
        chroma: Its Chroma side.
        embeddings: Its embedding model (chunks Chroma lacks are embedded again).
        repair: Fix the drift found (see the module docstring for how).
        rebuild_catalog: Keeps a damaged catalog aside and rebuilds it from Chroma.

    Returns:
        What was found (before repair).

    Raises:
        StoreError: The catalog is damaged and ``repair`` is False, or the
            store is read-only and ``repair`` is True, or the disk is full.
    """
    if repair:
        handles.refuse_if_read_only("repairing")
    try:
        with handles.errors("checking"):
            return _check(handles, chroma, embeddings, repair=repair)
    except StoreError as exc:
        if exc.reason != "damaged" or not repair:
            raise
    rebuild_catalog()
    with handles.errors("checking"):
        report = _check(handles, chroma, embeddings, repair=repair)
    report.catalog_rebuilt = True
    report.repaired = True
    return report


def _check(
    handles: StoreHandles, chroma: ChromaSide, embeddings: Embeddings, *, repair: bool
) -> ConsistencyReport:
    kb_id = handles.kb_id
    chroma.forget()  # look the collections up again: notice replaced ones
    partitions = set(handles.catalog.partitions(kb_id))
    partitions.update(
        chroma.calls.call("list_collections", chroma_partitions, chroma.client, kb_id)
    )
    report = ConsistencyReport(handles.name, [])
    for partition in sorted(partitions):
        collection = chroma.collection(partition, create=False)
        registry = handles.catalog.partition_ids(kb_id, partition)
        keyword = handles.keyword.ids(kb_id, partition)
        chroma_ids = set(collection.get(include=[])["ids"]) if collection is not None else set()
        drift = PartitionDrift(
            partition=partition,
            registry=len(registry),
            keyword_missing=sorted(registry - keyword),
            keyword_extra=sorted(keyword - registry),
            chroma_missing=sorted(registry - chroma_ids),
            chroma_extra=sorted(chroma_ids - registry),
        )
        report.partitions.append(drift)
        if repair and not drift.clean:
            _repair(handles, chroma, embeddings, drift)
    report.repaired = repair and not report.clean
    return report


def _repair(
    handles: StoreHandles, chroma: ChromaSide, embeddings: Embeddings, drift: PartitionDrift
) -> None:
    kb_id, partition = handles.kb_id, drift.partition
    adopted: list[ChunkRow] = []
    with handles.lock:
        if drift.chroma_extra:  # adopt what Chroma can explain; delete nothing
            collection = chroma.collection(partition, create=True)
            adopted, drift.unexplained = rows_from_records(
                iter_records(collection, ids=drift.chroma_extra), partition
            )
        if drift.chroma_missing:
            rows = handles.catalog.get_chunks(kb_id, partition, drift.chroma_missing)
            ordered = list(rows.values())
            vectors = embeddings.embed_documents([r.text for r in ordered])
            chroma.collection(partition, create=True).upsert(
                ids=[r.chunk_id for r in ordered],
                embeddings=[list(v) for v in vectors],
                documents=[r.text for r in ordered],
                metadatas=[chroma_metadata(r.metadata) for r in ordered],
            )
        if drift.keyword_extra or drift.keyword_missing:  # the registry is right: the
            missing = handles.catalog.get_chunks(kb_id, partition, drift.keyword_missing)
            handles.write_rows(  # keyword rows alone change (extra ids are not registered)
                indexed=list(missing.values()), remove={partition: drift.keyword_extra}
            )
    if adopted:
        adopt_rows(handles, partition, adopted, replace=False)
    if drift.unexplained:
        logger.warning(
            "Knowledge base %r, partition %r: %d Chroma records hold no text; repair left "
            "them in place (ids: %s)",
            handles.name,
            partition or "(shared)",
            len(drift.unexplained),
            ", ".join(drift.unexplained[:5]),
        )
