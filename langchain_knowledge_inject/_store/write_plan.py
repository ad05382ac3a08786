"""Planning a write: which chunks to embed, update, leave alone or remove.

Chunk ids derive from the tenant partition, the source and the content, so the
same chunk always gets the same id. Against the registry, each chunk of a call
is new (embed it), known with other metadata (update it) or unchanged (skip
it); every source named in the call keeps exactly the chunks given now, so its
other chunks are stale and removed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_knowledge_inject._store.catalog import Catalog, ChunkRow
from langchain_knowledge_inject.errors import ConfigurationError

SOURCE_PATH_KEY = "source_path"
"""Metadata key of the full path of an ingested file: the identity of its source."""


def source_key(metadata: Mapping[str, Any]) -> str:
    """The identity of a chunk's source: ``metadata["source_path"]``, else ``metadata["source"]``.

    ``ingest`` stores a short ``source`` (the path relative to the ingest root,
    what the model cites) and the file's full path in ``source_path``; chunk
    ids, replacement of a changed file and fingerprints key on the full path,
    so two files with the same name in different folders stay apart and a
    store ingested when ``source`` was the full path keeps its chunk ids.
    """
    return str(metadata.get(SOURCE_PATH_KEY) or metadata.get("source") or "")


def chunk_id(partition: str, source: str, text: str) -> str:
    """The stable id of a chunk: derived from its partition, source and content."""
    digest = hashlib.sha256(f"{partition}\x1f{source}\x1f{text}".encode())
    return digest.hexdigest()[:32]


def partition_of(tenant_id: str | None) -> str:
    """The partition of a tenant: the tenant id, or "" for the shared partition."""
    if tenant_id == "":  # "" names the shared partition: it must not be a tenant
        msg = "tenant_id must be a non-empty string, or None for the shared partition"
        raise ConfigurationError(msg, option="tenant_id", value=tenant_id)
    return "" if tenant_id is None else str(tenant_id)


@dataclass
class WritePlan:
    """What one ``add_documents`` call writes: new, updated and stale chunks, per partition."""

    to_embed: list[ChunkRow] = field(default_factory=list)
    to_update: list[ChunkRow] = field(default_factory=list)
    stale: dict[str, set[str]] = field(default_factory=dict)
    sources: set[tuple[str, str]] = field(default_factory=set)
    ids: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: int = 0


def plan_writes(catalog: Catalog, kb_id: str, chunks: Sequence[ChunkRow]) -> WritePlan:
    """Decide, against the registry, what a call of ``add_documents`` must write."""
    plan = WritePlan()
    seen: set[tuple[str, str]] = set()
    fresh: dict[tuple[str, str], set[str]] = {}
    for partition, rows in group_by_partition(chunks).items():
        existing = catalog.existing(kb_id, partition, [r.chunk_id for r in rows])
        for row in rows:
            plan.sources.add((partition, row.source))
            if not row.text.strip():
                plan.skipped += 1
                continue
            plan.ids.append(row.chunk_id)
            fresh.setdefault((partition, row.source), set()).add(row.chunk_id)
            if (partition, row.chunk_id) in seen:
                continue
            seen.add((partition, row.chunk_id))
            stored = existing.get(row.chunk_id)
            if stored is None:
                plan.to_embed.append(row)
            elif json.loads(stored) != json.loads(json.dumps(row.metadata)):
                plan.to_update.append(row)
            else:
                plan.unchanged += 1
    for partition, source in plan.sources:
        if not source:
            continue
        old = set(catalog.chunk_ids_for_source(kb_id, partition, source))
        stale = old - fresh.get((partition, source), set())
        if stale:
            plan.stale.setdefault(partition, set()).update(stale)
    return plan


def group_by_partition(rows: Sequence[ChunkRow]) -> dict[str, list[ChunkRow]]:
    """Group chunk rows by their tenant partition, keeping their order."""
    out: dict[str, list[ChunkRow]] = {}
    for row in rows:
        out.setdefault(row.partition, []).append(row)
    return out
