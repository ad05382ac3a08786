"""A read-only look into the embedded store, for the commands that do not embed.

``kinject kbs``, the error for an unknown knowledge base and ``kinject check``
need the collections of the store, their metadata, how many records each holds
and (to check) the ids of those records: all of it is in Chroma's SQLite file,
``<store>/chroma/chroma.sqlite3``. Read here with the standard library's
``sqlite3`` (opened ``mode=ro``, one read transaction, nothing written), they
cost milliseconds where ``import chromadb`` alone costs seconds.

Chroma's SQLite schema is Chroma's own, so only the exact schema read here is
trusted (:data:`SCHEMA`: the migrations Chroma applied, and the columns read);
every function answers None, and the caller asks chromadb, whenever anything
differs or could be stale: another process holds the store, a migration is due
(Chroma's, or this package's version 1), a write sits in Chroma's queue
(``embeddings_queue``) past what the collection's metadata segment has applied
(``max_seq_id``), a value is not of the form read, or the file cannot be read.

What ``check`` finds, the fast way or through chromadb (``KnowledgeBase.check``),
is a :class:`ConsistencyReport`.
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
_COLUMNS = {
    "databases": {"id", "name", "tenant_id"},
    "collections": {"id", "name", "database_id"},
    "collection_metadata": {"collection_id", "key", "str_value", "int_value", "float_value"},
    "segments": {"id", "type", "scope", "collection"},
    "max_seq_id": {"segment_id", "seq_id"},
    "embeddings": {"id", "segment_id", "embedding_id"},
    "embedding_metadata": {"id", "key", "string_value"},
    "embeddings_queue": {"seq_id", "topic"},
}
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
    segment: str
    """Its metadata segment, which holds its records."""
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
        return None if db is None else _collections(db)


def check(store: Path, name: str) -> ConsistencyReport | None:
    """``KnowledgeBase(name).check()``'s report, when it needs no catch-up nor repair; else None.

    The report is given only when every partition's keyword cache holds exactly
    the ids of Chroma's records with text: a catch-up then changes no id, so the
    full path reports the same. Drift, a cache missing or unreadable, settings
    that opening the knowledge base would write or refuse (another format or
    model), an unreadable store or a read-only one (its cache is rebuilt in
    memory) all answer None.
    """
    if os.environ.get("KINJECT_EMBEDDINGS_BACKEND") or not store_is_writable(store):
        return None  # opening it could refuse the backend
    kb_id = knowledge_base_id(name)
    with _reading(store) as db:
        found = _collections(db) if db is not None else None
        parts = {
            str(c.metadata[PREFIX + "partition"]): c
            for c in found or ()
            if c.name.startswith(f"kinject-{kb_id}-") and PREFIX + "partition" in c.metadata
        }
        settings = read_settings(parts[""].metadata) if "" in parts else {}
        if db is None or settings.get("kb") != name or settings["kb_id"] != kb_id:
            return None
        if settings["format"] != FORMAT or settings["model"] != DEFAULT_MODEL_NAME:
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
            if not (index / "meta.json").is_file():
                return None  # opening a missing index would create it
            try:
                cached = KeywordIndex(index).ids()
            except Exception:  # damaged: the full path reports and rebuilds it
                return None
            if cached != {cid for cid, has_text in texts.items() if has_text}:
                return None
            unexplained = sorted(cid for cid, has_text in texts.items() if not has_text)
            report.partitions.append(PartitionDrift(partition, len(texts), [], [], unexplained))
        return report


@contextlib.contextmanager
def _reading(store: Path) -> Iterator[sqlite3.Connection | None]:
    """One read transaction on the store's Chroma file, under a shared store lock; None: don't.

    None when another process holds the store, a version-1 catalog waits to be
    migrated, or the file is missing, unreadable or of another schema.
    """
    db_file = store / "chroma" / "chroma.sqlite3"
    if (store / "catalog.sqlite3").exists() or not db_file.is_file():
        yield None
        return
    try:
        lock = StoreLock(store, read_only=True)
    except (KnowledgeBaseOpenError, OSError):
        yield None
        return
    db = None
    try:
        db = sqlite3.connect(f"{db_file.resolve().as_uri()}?mode=ro", uri=True, timeout=0.5)
        db.execute("BEGIN")
        ok = _known_schema(db)
    except sqlite3.Error:
        ok = False
    try:
        yield db if ok else None
    finally:
        if db is not None:
            db.close()
        lock.release()


def _known_schema(db: sqlite3.Connection) -> bool:
    """Whether the file holds exactly the schema read here."""
    if set(db.execute("SELECT dir, version FROM migrations")) != SCHEMA:
        return False
    return all(
        needed <= {row[0] for row in db.execute("SELECT name FROM pragma_table_info(?)", (table,))}
        for table, needed in _COLUMNS.items()
    )


def _collections(db: sqlite3.Connection) -> list[Collection] | None:
    """The default database's collections; None when one is stale or not of the form read."""
    try:
        queued = dict(db.execute("SELECT topic, MAX(seq_id) FROM embeddings_queue GROUP BY topic"))
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
            value = _value(*values)
            if value is None:
                return None
            metadata.setdefault(collection, {})[key] = value
        named = db.execute(
            "SELECT c.id, c.name FROM collections c JOIN databases d ON d.id = c.database_id "
            "WHERE d.name = 'default_database' AND d.tenant_id = 'default_tenant'"
        ).fetchall()
    except sqlite3.Error:
        return None
    latest = {topic.rsplit("/", 1)[-1]: seq for topic, seq in queued.items()}
    out = []
    for collection_id, name in named:
        segment, seq = applied.get(collection_id, (None, None))
        meta = metadata.get(collection_id, {})
        if segment is None or (seq is not None and not isinstance(seq, int)):
            return None
        if latest.get(collection_id, -1) > (seq or 0) or "kinject_partition" in meta:
            return None  # a write not applied yet; a version-1 partition
        if name.startswith("kinject-") and name.endswith("-kb"):
            return None  # a version-1 record collection
        out.append(Collection(collection_id, name, meta, segment, counts.get(segment, 0)))
    return out


def _value(text: str | None, integer: int | None, real: float | None, flag: int | None) -> Any:
    """A collection metadata value as chromadb returns it; None unless exactly one is set."""
    present = [v for v in (text, integer, real, flag) if v is not None]
    if len(present) != 1:
        return None
    if flag is not None:
        return bool(flag)
    return present[0]
