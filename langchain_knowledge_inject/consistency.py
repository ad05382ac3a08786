"""Checking and repairing drift between the three records of a knowledge base.

Every chunk is recorded three times: in the registry (``catalog.py``), in the
keyword index (``keyword.py``) and in its partition's Chroma collection. A write
goes to Chroma first and then to SQLite in one transaction, so a process killed
half way can leave Chroma holding chunks the registry does not know, or (after
a partial delete) missing chunks it does. The registry is the record of truth:

- keyword rows missing or extra: rebuilt from the registry text;
- Chroma records the registry lacks: deleted in the embedded store (only a
  crashed write leaves them there); with a Chroma server (an external
  ``client``), adopted into the registry and the keyword index instead, since
  another machine with its own catalog may have written them;
- registry chunks Chroma lacks: embedded again from the registry text.

``kinject check --kb NAME`` reports drift; ``--repair`` fixes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_knowledge_inject.catalog import ChunkRow
    from langchain_knowledge_inject.knowledge_base import KnowledgeBase


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
        if self.repaired:
            lines.append("  repaired")
        return "\n".join(lines)


def check_knowledge_base(kb: KnowledgeBase, *, repair: bool = False) -> ConsistencyReport:
    """Compare registry, keyword index and Chroma for every partition; optionally repair.

    Args:
        kb: The knowledge base.
        repair: Fix the drift found (see the module docstring for how).

    Returns:
        What was found (before repair).
    """
    partitions = set(kb._catalog.partitions(kb.id))
    partitions.update(_server_partitions(kb))
    report = ConsistencyReport(kb.name, [])
    for partition in sorted(partitions):
        registry = kb._catalog.partition_ids(kb.id, partition)
        keyword = kb._keyword.ids(kb.id, partition)
        collection = kb._collection(partition, create=False)
        chroma = set(collection.get(include=[])["ids"]) if collection is not None else set()
        drift = PartitionDrift(
            partition=partition,
            registry=len(registry),
            keyword_missing=sorted(registry - keyword),
            keyword_extra=sorted(keyword - registry),
            chroma_missing=sorted(registry - chroma),
            chroma_extra=sorted(chroma - registry),
        )
        report.partitions.append(drift)
        if repair and not drift.clean:
            _repair(kb, drift)
    report.repaired = repair and not report.clean
    return report


def _server_partitions(kb: KnowledgeBase) -> set[str]:
    """Partitions whose collections exist in Chroma (another machine may have made them)."""
    prefix = f"kinject-{kb.id}-"
    found = set()
    for collection in kb._client.list_collections():
        metadata = getattr(collection, "metadata", None) or {}
        if collection.name.startswith(prefix) and "kinject_partition" in metadata:
            found.add(str(metadata["kinject_partition"]))
    return found


def _repair(kb: KnowledgeBase, drift: PartitionDrift) -> None:
    partition = drift.partition
    adopted: list[ChunkRow] = []
    with kb._lock:
        if drift.chroma_extra and kb._store_lock is None:  # a server: adopt others' writes
            adopted = list(kb._rows_from_chroma(partition, drift.chroma_extra).values())
        elif drift.chroma_extra:
            kb._collection(partition, create=True).delete(ids=drift.chroma_extra)
        if drift.chroma_missing:
            rows = kb._catalog.get_chunks(kb.id, partition, drift.chroma_missing)
            ordered = list(rows.values())
            vectors = kb.embeddings.embed_documents([r.text for r in ordered])
            from langchain_knowledge_inject.storage import chroma_metadata

            kb._collection(partition, create=True).upsert(
                ids=[r.chunk_id for r in ordered],
                embeddings=[list(v) for v in vectors],
                documents=[r.text for r in ordered],
                metadatas=[chroma_metadata(r.metadata) for r in ordered],
            )
        try:
            if drift.keyword_extra:
                kb._keyword.delete(kb.id, partition, drift.keyword_extra)
            if drift.keyword_missing:
                rows = kb._catalog.get_chunks(kb.id, partition, drift.keyword_missing)
                kb._keyword.add(kb.id, partition, [(r.chunk_id, r.text) for r in rows.values()])
            if adopted:
                kb._catalog.put_chunks(kb.id, adopted)
                kb._keyword.add(kb.id, partition, [(r.chunk_id, r.text) for r in adopted])
            kb._conn.commit()
        except BaseException:
            kb._conn.rollback()
            raise
