"""A read-only look into the embedded store, for the commands that do not embed.

``kinject kbs``, the unknown-knowledge-base error and ``kinject check`` read the
collections, their metadata, record counts and ids from Chroma's SQLite file
(``<store>/chroma/chroma.sqlite3``) with ``sqlite3`` (``mode=ro``, one read
transaction), without importing chromadb. Only the exact schema read here is
trusted (:data:`SCHEMA`, Chroma's migrations); each function answers None, and
the caller asks chromadb, whenever anything differs or could be stale: another
process holds the store, a migration is due (Chroma's, or version 1's), a write
sits in ``embeddings_queue`` past the metadata segment's ``max_seq_id``, a value
is not of the form read, a query fails.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_knowledge_inject._store.flags import (
    DEFAULT_MODEL_NAME,
    FORMAT,
    PREFIX,
    read_settings,
)
from langchain_knowledge_inject._store.keyword import KeywordIndex
from langchain_knowledge_inject._store.storage import (
    StoreLock,
    keyword_folder,
    knowledge_base_id,
    store_is_writable,
)
from langchain_knowledge_inject.errors import KnowledgeBaseOpenError

SCHEMA = frozenset(
    [("sysdb", v) for v in range(1, 11)]
    + [("metadb", v) for v in range(1, 7)]
    + [("embeddings_queue", v) for v in range(1, 3)]
)
"""The migrations (directory, version) of the Chroma schema read here (chromadb 1.x)."""
_METADATA_SEGMENT = "urn:chroma:segment/metadata/sqlite"
_DOCUMENT_KEY = "chroma:document"


@dataclass
class PartitionDrift:
    """How one partition's keyword cache differs from its Chroma collection."""

    partition: str
    chunks: int
    """Chunks in Chroma."""
    keyword_missing: list[str] = field(default_factory=list)
    keyword_extra: list[str] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)
    """Chroma records without text: not searchable by keyword, left in place."""

    @property
    def clean(self) -> bool:
        """True when the cache holds exactly Chroma's chunks."""
        return not (self.keyword_missing or self.keyword_extra)


@dataclass
class ConsistencyReport:
    """What ``KnowledgeBase.check`` found: the keyword cache against Chroma, per partition."""

    kb_name: str
    partitions: list[PartitionDrift]
    repaired: bool = False
    """Whether drift was found and those partitions rebuilt from Chroma."""

    @property
    def unexplained(self) -> list[str]:
        """Chroma records left in place because they hold no text, in every partition."""
        return [cid for p in self.partitions for cid in p.unexplained]

    @property
    def clean(self) -> bool:
        """True when every partition's cache agrees with Chroma."""
        return all(p.clean for p in self.partitions)

    def summary(self) -> str:
        """A human-readable report, one line per partition."""
        lines = [f"knowledge base {self.kb_name!r}: {'consistent' if self.clean else 'DRIFT'}"]
        for p in self.partitions:
            name = p.partition or "(shared)"
            lines.append(
                f"  {name}: {p.chunks} chunks in Chroma; keyword missing "
                f"{len(p.keyword_missing)}, extra {len(p.keyword_extra)}"
            )
            if p.unexplained:
                lines.append(
                    f"  {name}: {len(p.unexplained)} Chroma records hold no text and were left "
                    "in place (not searchable by keyword, not deleted)"
                )
        return "\n".join(lines + ["  repaired: rebuilt from Chroma"] * self.repaired)


@dataclass(frozen=True)
class Collection:
    """One Chroma collection as read from the SQLite file (named as chromadb names them)."""

    id: str
    name: str
    metadata: dict[str, Any]
    segment: str  # its metadata segment, which holds its records
    records: int

    def count(self) -> int:
        """How many records it holds, as ``chromadb.Collection.count()``."""
        return self.records


def collections(store: Path) -> list[Collection] | None:
    """The collections of the embedded store in ``store``, or None: ask chromadb.

    Example:
        >>> collections(Path("no-such-store")) is None  # no store: nothing to read
        True
    """
    with _reading(store) as db:
        return _collections(db) if db is not None else None
    return None  # a query failed


def check(store: Path, name: str) -> ConsistencyReport | None:
    """``KnowledgeBase(name).check()``'s report, when it needs no catch-up nor repair; else None.

    That is: every partition's keyword cache holds exactly the ids of Chroma's records
    with text, and opening the knowledge base would write or refuse nothing (its
    format, the default model, the backend, a writable store).
    """
    if os.environ.get("KINJECT_EMBEDDINGS_BACKEND") or not store_is_writable(store):
        return None
    kb_id = knowledge_base_id(name)
    with _reading(store) as db:
        parts = {
            str(c.metadata[PREFIX + "partition"]): c
            for c in (_collections(db) if db is not None else None) or ()
            if c.name.startswith(f"kinject-{kb_id}-") and PREFIX + "partition" in c.metadata
        }
        settings = read_settings(parts[""].metadata if "" in parts else None)
        wanted = {"kb": name, "kb_id": kb_id, "format": FORMAT, "model": DEFAULT_MODEL_NAME}
        if db is None or any(settings[key] != value for key, value in wanted.items()):
            return None
        report = ConsistencyReport(name, [])
        for partition in sorted(parts):
            rows = db.execute(
                "SELECT e.embedding_id, m.string_value FROM embeddings e LEFT JOIN "
                "embedding_metadata m ON m.id = e.id AND m.key = ? WHERE e.segment_id = ?",
                (_DOCUMENT_KEY, parts[partition].segment),
            )
            texts = {cid: bool(text and text.strip()) for cid, text in rows}
            index = keyword_folder(store / "keyword" / kb_id, partition) / "chunks"
            try:  # a missing index would be created: not opened
                cached = KeywordIndex(index).ids() if (index / "meta.json").is_file() else None
            except Exception:  # damaged: the full path reports and rebuilds it
                cached = None
            if cached != {cid for cid, has_text in texts.items() if has_text}:
                return None
            unexplained = sorted(cid for cid, has_text in texts.items() if not has_text)
            report.partitions.append(PartitionDrift(partition, len(texts), [], [], unexplained))
        return report
    return None  # a query failed


@contextlib.contextmanager
def _reading(store: Path) -> Iterator[sqlite3.Connection | None]:
    """One read transaction on the store's Chroma file under a shared store lock, or None.

    A ``sqlite3.Error`` inside the block ends it quietly (the caller returns None).
    """
    path = store / "chroma" / "chroma.sqlite3"
    if (store / "catalog.sqlite3").exists() or not path.is_file():  # version 1: migrate first
        yield None
        return
    try:
        lock = StoreLock(store, read_only=True)  # held by another process: it may be writing
    except (KnowledgeBaseOpenError, OSError):
        yield None
        return
    db = None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=0.5)
        db.execute("BEGIN")
        known = set(db.execute("SELECT dir, version FROM migrations")) == SCHEMA
    except sqlite3.Error:
        known = False
    try:
        yield db if known else None
    except sqlite3.Error:
        pass
    finally:
        if db is not None:
            db.close()
        lock.release()


def _collections(db: sqlite3.Connection) -> list[Collection] | None:
    """The default database's collections; None when one is stale or not of the form read."""
    queued = dict(db.execute("SELECT topic, MAX(seq_id) FROM embeddings_queue GROUP BY topic"))
    latest = {topic.rsplit("/", 1)[-1]: seq for topic, seq in queued.items()}
    applied = {
        collection: (segment, seq)
        for collection, segment, seq in db.execute(
            "SELECT s.collection, s.id, m.seq_id FROM segments s LEFT JOIN max_seq_id m "
            "ON m.segment_id = s.id WHERE s.scope = 'METADATA' AND s.type = ?",
            (_METADATA_SEGMENT,),
        )
    }
    counts = dict(db.execute("SELECT segment_id, COUNT(*) FROM embeddings GROUP BY segment_id"))
    metadata: dict[str, dict[str, Any]] = {}
    for collection, key, *values in db.execute(
        "SELECT collection_id, key, str_value, int_value, float_value, bool_value "
        "FROM collection_metadata"
    ):
        present = [v for v in values if v is not None]
        if len(present) != 1:
            return None
        metadata.setdefault(collection, {})[key] = (
            bool(present[0]) if values[3] is not None else present[0]
        )
    out = []
    for collection, name in db.execute(
        "SELECT c.id, c.name FROM collections c JOIN databases d ON d.id = c.database_id "
        "WHERE d.name = 'default_database' AND d.tenant_id = 'default_tenant'"
    ):
        segment, seq = applied.get(collection, (None, None))
        meta = metadata.get(collection, {})
        if segment is None or (seq is not None and not isinstance(seq, int)):
            return None
        if latest.get(collection, -1) > (seq or 0):
            return None  # a write not applied yet
        if "kinject_partition" in meta or (name.startswith("kinject-") and name.endswith("-kb")):
            return None  # version 1: a partition, a record collection
        out.append(Collection(collection, name, meta, segment, counts.get(segment, 0)))
    return out
