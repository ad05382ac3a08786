"""The catalog: one SQLite file per store directory.

It holds, for every knowledge base in the directory, its metadata (name, id,
description, topics, embedding model, restriction settings), and a registry of
every chunk (id, partition, source, text, metadata) and of every ingested
source with its fingerprint. The keyword index (``keyword.py``) lives in the
same file, so the registry and the keyword side change in one transaction.

Why not ``langchain_core.indexing.index`` with a record manager: the registry
here already is a record of every chunk per source, and it must change in the
same SQLite transaction as the keyword index. A separate record manager would
be a third store to keep in step with Chroma and the keyword index, and
``index()`` writes through the ``VectorStore`` interface, which cannot update
our keyword index atomically. The registry gives the same guarantees (ids from
source and content, unchanged chunks skipped, stale chunks of a changed source
removed) with one store fewer.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_knowledge_inject.errors import KnowledgeBaseOpenError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kbs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    topics TEXT NOT NULL DEFAULT '[]',
    embedding_model TEXT NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    kb_id TEXT NOT NULL,
    partition TEXT NOT NULL,
    chunk_id TEXT NOT NULL,
    source TEXT NOT NULL,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,
    PRIMARY KEY (kb_id, partition, chunk_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS chunks_by_source ON chunks (kb_id, partition, source);
CREATE TABLE IF NOT EXISTS partitions (
    kb_id TEXT NOT NULL,
    partition TEXT NOT NULL,
    PRIMARY KEY (kb_id, partition)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sources (
    kb_id TEXT NOT NULL,
    partition TEXT NOT NULL,
    source TEXT NOT NULL,
    fingerprint TEXT,
    updated_at REAL NOT NULL,
    PRIMARY KEY (kb_id, partition, source)
) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class ChunkRow:
    """One chunk as the registry stores it."""

    chunk_id: str
    """Stable id derived from partition, source and content."""
    partition: str
    """Tenant partition ("" for the shared partition)."""
    source: str
    """Where the chunk came from ("" when unknown)."""
    text: str
    """The chunk text."""
    metadata: dict[str, Any]
    """The metadata stored with the chunk."""


class CatalogConnection(sqlite3.Connection):
    """A catalog connection that knows whether it was opened read-only."""

    read_only: bool = False


def open_connection(path: Path | str, *, read_only: bool = False) -> sqlite3.Connection:
    """Open (creating if needed) the catalog database at ``path``.

    Args:
        path: The catalog file.
        read_only: Open it read-only (a store on a read-only file system); the
            schema is then neither created nor migrated.

    Raises:
        KnowledgeBaseOpenError: The file cannot be opened as a SQLite database;
            the sqlite3 error is its ``__cause__``.
    """
    try:
        if read_only:
            uri = Path(path).resolve().as_uri() + "?immutable=1"
            conn = sqlite3.connect(
                uri, uri=True, check_same_thread=False, timeout=30.0, factory=CatalogConnection
            )
            conn.read_only = True
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return conn
        conn = sqlite3.connect(
            str(path), check_same_thread=False, timeout=30.0, factory=CatalogConnection
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
        _migrate(conn)
        conn.commit()
        _quick_check(conn, Path(path))
    except sqlite3.DatabaseError as exc:
        msg = f"The catalog {path} cannot be opened as a SQLite database ({exc})"
        raise KnowledgeBaseOpenError(msg) from exc
    return conn


QUICK_CHECK_MAX_BYTES = 64 << 20
"""Catalogs up to this size are checked page by page (``PRAGMA quick_check``) when opened.

Larger ones are not: the check reads every page (measured 0.28 s for a
105 MB catalog of 120k chunks, warm cache). Damage found later is handled
where it shows: a search or ``info`` rebuilds the catalog from Chroma.
"""


def _quick_check(conn: sqlite3.Connection, path: Path) -> None:
    try:
        size = path.stat().st_size
    except OSError:
        return
    if size > QUICK_CHECK_MAX_BYTES:
        return
    result = conn.execute("PRAGMA quick_check(1)").fetchone()
    if result is None or result[0] != "ok":
        detail = result[0] if result else "no answer"
        msg = f"database disk image is malformed (quick_check: {detail})"
        raise sqlite3.DatabaseError(msg)


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a catalog written by an earlier version up to the current schema."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(partitions)")}
    if "collection_id" not in columns:
        conn.execute("ALTER TABLE partitions ADD COLUMN collection_id TEXT")


class Catalog:
    """Knowledge-base metadata and the chunk registry over one SQLite connection.

    Every method takes ``lock``; writes are not committed here unless the
    method says so, so that the knowledge base can group them with the keyword
    index into one transaction.
    """

    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock) -> None:
        self.conn = conn
        self.lock = lock

    # -- knowledge bases ---------------------------------------------------
    def get_kb(self, name: str) -> dict[str, Any] | None:
        """Return the stored row of the knowledge base ``name``, or None."""
        with self.lock:
            cur = self.conn.execute(
                "SELECT id, name, description, topics, embedding_model, settings, created_at,"
                " updated_at FROM kbs WHERE name = ?",
                (name,),
            )
            row = cur.fetchone()
        return _kb_row(row) if row else None

    def list_kbs(self) -> list[dict[str, Any]]:
        """Every knowledge base in this catalog, by name."""
        with self.lock:
            rows = self.conn.execute(
                "SELECT id, name, description, topics, embedding_model, settings, created_at,"
                " updated_at FROM kbs ORDER BY name"
            ).fetchall()
        return [_kb_row(r) for r in rows]

    def create_kb(self, kb_id: str, name: str, **fields: Any) -> None:
        """Insert a knowledge base and commit."""
        now = time.time()
        with self.lock:
            self.conn.execute(
                "INSERT INTO kbs (id, name, description, topics, embedding_model, settings,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    kb_id,
                    name,
                    fields.get("description", ""),
                    json.dumps(fields.get("topics", [])),
                    fields["embedding_model"],
                    json.dumps(fields.get("settings", {})),
                    now,
                    now,
                ),
            )
            self.conn.commit()

    def update_kb(self, kb_id: str, **fields: Any) -> None:
        """Update some fields of a knowledge base and commit."""
        if not fields:
            return
        encoded = {
            k: json.dumps(v) if k in ("topics", "settings") else v for k, v in fields.items()
        }
        assignments = ", ".join(f"{k} = ?" for k in encoded)
        with self.lock:
            self.conn.execute(
                f"UPDATE kbs SET {assignments}, updated_at = ? WHERE id = ?",
                (*encoded.values(), time.time(), kb_id),
            )
            self.conn.commit()

    def delete_kb(self, kb_id: str) -> None:
        """Remove a knowledge base and its registry rows (no commit)."""
        with self.lock:
            for table in ("kbs", "chunks", "sources", "partitions"):
                column = "id" if table == "kbs" else "kb_id"
                self.conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (kb_id,))

    # -- chunks ------------------------------------------------------------
    def chunk_ids_for_source(self, kb_id: str, partition: str, source: str) -> dict[str, str]:
        """Map chunk id to stored metadata JSON for one source."""
        with self.lock:
            rows = self.conn.execute(
                # INDEXED BY: without it SQLite scans the partition by primary key,
                # which made every add O(partition size) (benchmarks/scale.py)
                "SELECT chunk_id, metadata FROM chunks INDEXED BY chunks_by_source"
                " WHERE kb_id = ? AND partition = ? AND source = ?",
                (kb_id, partition, source),
            ).fetchall()
        return dict(rows)

    def existing(self, kb_id: str, partition: str, chunk_ids: Sequence[str]) -> dict[str, str]:
        """Map each of ``chunk_ids`` that exists to its stored metadata JSON."""
        found: dict[str, str] = {}
        with self.lock:
            for batch in _batches(chunk_ids, 500):
                marks = ",".join("?" * len(batch))
                rows = self.conn.execute(
                    f"SELECT chunk_id, metadata FROM chunks WHERE kb_id = ? AND partition = ?"
                    f" AND chunk_id IN ({marks})",
                    (kb_id, partition, *batch),
                ).fetchall()
                found.update(rows)
        return found

    def get_chunks(
        self, kb_id: str, partition: str, chunk_ids: Sequence[str]
    ) -> dict[str, ChunkRow]:
        """Fetch registry rows by id (missing ids are absent from the result)."""
        out: dict[str, ChunkRow] = {}
        with self.lock:
            for batch in _batches(chunk_ids, 500):
                marks = ",".join("?" * len(batch))
                rows = self.conn.execute(
                    f"SELECT chunk_id, source, text, metadata FROM chunks WHERE kb_id = ?"
                    f" AND partition = ? AND chunk_id IN ({marks})",
                    (kb_id, partition, *batch),
                ).fetchall()
                for chunk_id, source, text, meta in rows:
                    out[chunk_id] = ChunkRow(chunk_id, partition, source, text, json.loads(meta))
        return out

    def put_chunks(self, kb_id: str, rows: Iterable[ChunkRow]) -> None:
        """Insert or replace registry rows (no commit)."""
        with self.lock:
            self.conn.executemany(
                "INSERT OR REPLACE INTO chunks (kb_id, partition, chunk_id, source, text, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (kb_id, r.partition, r.chunk_id, r.source, r.text, json.dumps(r.metadata))
                    for r in rows
                ],
            )

    def delete_chunks(self, kb_id: str, partition: str, chunk_ids: Sequence[str]) -> None:
        """Remove registry rows (no commit)."""
        with self.lock:
            self.conn.executemany(
                "DELETE FROM chunks WHERE kb_id = ? AND partition = ? AND chunk_id = ?",
                [(kb_id, partition, c) for c in chunk_ids],
            )

    def partition_ids(self, kb_id: str, partition: str) -> set[str]:
        """Every chunk id of one partition."""
        with self.lock:
            rows = self.conn.execute(
                "SELECT chunk_id FROM chunks WHERE kb_id = ? AND partition = ?", (kb_id, partition)
            ).fetchall()
        return {r[0] for r in rows}

    def add_partition(self, kb_id: str, partition: str) -> None:
        """Record that a partition's collection exists, and commit.

        Called before anything is written to the collection, so that a check
        after a crash knows every collection that may hold chunks.
        """
        with self.lock:
            self.conn.execute(
                "INSERT OR IGNORE INTO partitions (kb_id, partition) VALUES (?, ?)",
                (kb_id, partition),
            )
            self.conn.commit()

    def collection_id(self, kb_id: str, partition: str) -> str | None:
        """The Chroma collection id recorded for a partition, or None."""
        with self.lock:
            row = self.conn.execute(
                "SELECT collection_id FROM partitions WHERE kb_id = ? AND partition = ?",
                (kb_id, partition),
            ).fetchone()
        return row[0] if row else None

    def set_collection_id(self, kb_id: str, partition: str, collection_id: str) -> None:
        """Record the Chroma collection id of a partition, and commit."""
        with self.lock:
            self.conn.execute(
                "INSERT INTO partitions (kb_id, partition, collection_id) VALUES (?, ?, ?)"
                " ON CONFLICT (kb_id, partition)"
                " DO UPDATE SET collection_id = excluded.collection_id",
                (kb_id, partition, collection_id),
            )
            self.conn.commit()

    def clear_partition(self, kb_id: str, partition: str) -> None:
        """Remove a partition's registry rows and sources (no commit)."""
        with self.lock:
            for table in ("chunks", "sources"):
                self.conn.execute(
                    f"DELETE FROM {table} WHERE kb_id = ? AND partition = ?", (kb_id, partition)
                )

    def partitions(self, kb_id: str) -> list[str]:
        """Every partition that has a collection, chunks or sources."""
        with self.lock:
            rows = self.conn.execute(
                "SELECT partition FROM partitions WHERE kb_id = ?"
                " UNION SELECT DISTINCT partition FROM chunks WHERE kb_id = ?"
                " UNION SELECT DISTINCT partition FROM sources WHERE kb_id = ?",
                (kb_id, kb_id, kb_id),
            ).fetchall()
        return sorted(r[0] for r in rows)

    def count(self, kb_id: str, partition: str | None = None) -> int:
        """Number of chunks in a knowledge base, or in one of its partitions."""
        sql = "SELECT COUNT(*) FROM chunks WHERE kb_id = ?"
        args: tuple[str, ...] = (kb_id,)
        if partition is not None:
            sql += " AND partition = ?"
            args = (kb_id, partition)
        with self.lock:
            return int(self.conn.execute(sql, args).fetchone()[0])

    def sample_texts(self, kb_id: str, limit: int) -> list[str]:
        """Up to ``limit`` chunk texts, for deriving topics."""
        with self.lock:
            rows = self.conn.execute(
                "SELECT text FROM chunks WHERE kb_id = ? LIMIT ?", (kb_id, limit)
            ).fetchall()
        return [r[0] for r in rows]

    # -- sources -----------------------------------------------------------
    def get_fingerprint(self, kb_id: str, partition: str, source: str) -> str | None:
        """The fingerprint stored for a source, or None."""
        with self.lock:
            row = self.conn.execute(
                "SELECT fingerprint FROM sources WHERE kb_id = ? AND partition = ? AND source = ?",
                (kb_id, partition, source),
            ).fetchone()
        return row[0] if row else None

    def put_source(self, kb_id: str, partition: str, source: str, fingerprint: str | None) -> None:
        """Record a source and its fingerprint (no commit)."""
        with self.lock:
            self.conn.execute(
                "INSERT OR REPLACE INTO sources (kb_id, partition, source, fingerprint, updated_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (kb_id, partition, source, fingerprint, time.time()),
            )

    def delete_source(self, kb_id: str, partition: str, source: str) -> None:
        """Forget a source (no commit)."""
        with self.lock:
            self.conn.execute(
                "DELETE FROM sources WHERE kb_id = ? AND partition = ? AND source = ?",
                (kb_id, partition, source),
            )


def _kb_row(row: Sequence[Any]) -> dict[str, Any]:
    kb_id, name, description, topics, model, settings, created, updated = row
    return {
        "id": kb_id,
        "name": name,
        "description": description,
        "topics": json.loads(topics),
        "embedding_model": model,
        "settings": json.loads(settings),
        "created_at": created,
        "updated_at": updated,
    }


def _batches(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
