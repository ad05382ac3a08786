"""A document-level keyword index: each source's whole text, scored by BM25 once.

Hybrid search scores a chunk by its own match and by its document's
(:func:`~langchain_knowledge_inject._store.fusion.fuse_with_documents`). A
document's keyword score pooled from its chunks' BM25 scores misses words
spread over several chunks, and chunk-length statistics are not a document's.
This index holds, per (knowledge base, partition), one row per source: the
text of the source's chunks in order, joined with the overlap of consecutive
chunks removed, after the document's lead (:func:`lead`: its ``title``, else
its first line, at most :data:`LEAD_WORDS` words), so the words that name
what a document is about count once more, as a title field would. On the 809
BEIR SciFact train queries, through the default ingest path, the index lifted
hybrid nDCG@10 from 0.7363 to 0.7426 (chunks of 254 word pieces); its keyword
side alone ranks abstracts at 0.699 against 0.689 for chunks pooled per
abstract. The lead added 0.003 with chunks of 254 word pieces and 0.004 with
the default 128 (0.7470 to 0.7508, ``benchmarks/retrieval_quality.py --split
train``).

The rows are derived from the chunk registry (``chunks`` in the catalog), and
kept honest by SQLite triggers on it: every insert, update or delete of a
chunk marks its source dirty in ``kw_doc_dirty``, in the writer's own
transaction, whatever code path wrote it (an add, a delete, a catch-up from
another process, a recovery). :meth:`DocumentIndex.refresh` rebuilds the dirty
sources' rows from the registry; the knowledge base calls it inside its write
transactions. A dirty source is never scored from its (possibly stale) row:
search reports it as not indexed, and hybrid search falls back to pooling its
chunks' scores, as it did before this index existed. A store written by an
earlier version gets every source marked dirty the first time it is opened for
writing, and the first write rebuilds them; a store opened read-only without
the tables has no document index, and search pools chunk scores throughout.
So does a store whose rows were built without the lead (:data:`FORMAT`
below the current one): opened for writing, its sources are marked dirty and
rebuilt with it; opened read-only, its rows are scored as they are.

The BM25 engine is :class:`~langchain_knowledge_inject._store.keyword.KeywordIndex`
itself, under a derived knowledge-base id (:func:`documents_kb_id`), so the
document rows have their own statistics per partition and any change to the
keyword engine applies to both.

Example:
    >>> import threading
    >>> from langchain_knowledge_inject._store.catalog import Catalog, ChunkRow, open_connection
    >>> conn, lock = open_connection(":memory:"), threading.RLock()
    >>> index = DocumentIndex(conn, lock=lock)
    >>> Catalog(conn, lock).put_chunks("kb1", [
    ...     ChunkRow("c1", "", "a.md", "Parental leave lasts", {"chunk_index": 0}),
    ...     ChunkRow("c2", "", "a.md", "leave lasts sixteen weeks.", {"chunk_index": 1}),
    ... ])
    >>> index.refresh("kb1")
    1
    >>> index.text("kb1", "", "a.md")
    'Parental leave lasts sixteen weeks.'
    >>> index.indexed_text("kb1", "", "a.md")
    'Parental leave lasts sixteen weeks. Parental leave lasts sixteen weeks.'
    >>> hits, indexed = index.search("kb1", "", "sixteen weeks parental", k=5, sources={"a.md"})
    >>> [source for source, _ in hits], sorted(indexed)
    (['a.md'], ['a.md'])
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Sequence
from collections.abc import Set as AbstractSet

from langchain_knowledge_inject._store.keyword import STOPWORDS, KeywordIndex

__all__ = ["FORMAT", "LEAD_WORDS", "DocumentIndex", "documents_kb_id", "join_chunks", "lead"]

LEAD_WORDS = 24
"""Most words of a document's lead, indexed once more in front of its text (0: none).

Chosen on the 809 SciFact train queries through the default ingest path: a
lead of 12, 24 or 40 words gave hybrid nDCG@10 0.7434, 0.7452 and 0.7441
against 0.7422 without (chunks of 254 word pieces); counting it twice more,
0.7437, 0.7460, 0.7450.
"""

FORMAT = 2
"""Version of the indexed document text: 1 was the joined chunks alone, 2 adds the lead."""

_MIN_OVERLAP = 8
"""Shortest shared run of characters taken as the overlap of two consecutive chunks."""

_TRIGGERS = {
    "kw_doc_chunk_insert": "AFTER INSERT ON chunks WHEN NEW.source != '' BEGIN"
    " INSERT OR IGNORE INTO kw_doc_dirty VALUES (NEW.kb_id, NEW.partition, NEW.source); END",
    "kw_doc_chunk_delete": "AFTER DELETE ON chunks WHEN OLD.source != '' BEGIN"
    " INSERT OR IGNORE INTO kw_doc_dirty VALUES (OLD.kb_id, OLD.partition, OLD.source); END",
    "kw_doc_chunk_update": "AFTER UPDATE ON chunks BEGIN"
    " INSERT OR IGNORE INTO kw_doc_dirty SELECT NEW.kb_id, NEW.partition, NEW.source"
    " WHERE NEW.source != '';"
    " INSERT OR IGNORE INTO kw_doc_dirty SELECT OLD.kb_id, OLD.partition, OLD.source"
    " WHERE OLD.source != ''; END",
}


def documents_kb_id(kb_id: str) -> str:
    """The id under which a knowledge base's document rows live in the keyword index.

    Example:
        >>> documents_kb_id("kb1")
        'kb1#documents'
    """
    return f"{kb_id}#documents"


def lead(text: str, title: object = None) -> str:
    r"""The lead of a document: its title when it has one, else its first non-blank line.

    At most :data:`LEAD_WORDS` words, whitespace normalized.

    Args:
        text: The document's text.
        title: Its ``title`` metadata, if any.

    Example:
        >>> lead("Parental leave\n\nLeave lasts sixteen weeks.")
        'Parental leave'
        >>> lead("Leave lasts sixteen weeks.", title="  Leave   policy ")
        'Leave policy'
    """
    if LEAD_WORDS <= 0:
        return ""
    head = str(title) if title is not None and str(title).strip() else ""
    if not head:
        head = next((line for line in text.splitlines() if line.strip()), "")
    return " ".join(head.split()[:LEAD_WORDS])


def join_chunks(texts: Sequence[str]) -> str:
    """Join consecutive chunks of one document, dropping the text each repeats of the last.

    A splitter with overlap starts a chunk with the end of the previous one;
    that run is kept once, so words in it are not counted twice. Chunks that
    do not overlap are joined with a space.

    Args:
        texts: The chunks' texts, in document order.

    Returns:
        One text.

    Example:
        >>> join_chunks(["Leave lasts sixteen", "lasts sixteen weeks.", "Pay is full."])
        'Leave lasts sixteen weeks. Pay is full.'
    """
    joined = ""
    for text in texts:
        if not joined:
            joined = text
            continue
        shared = _overlap(joined, text)
        joined = joined + text[shared:] if shared else f"{joined} {text}"
    return joined


def _overlap(before: str, after: str) -> int:
    """Length of the longest prefix of ``after`` that ``before`` ends with (0 below the minimum)."""
    if len(after) < _MIN_OVERLAP or len(before) < _MIN_OVERLAP:
        return 0
    probe = after[:_MIN_OVERLAP]
    start = max(0, len(before) - len(after))
    position = before.find(probe, start)
    while position != -1:  # the first match leaves the longest overlap
        if after.startswith(before[position:]):
            return len(before) - position
        position = before.find(probe, position + 1)
    return 0


class DocumentIndex:
    """BM25 over whole documents (chunks sharing a source), derived from the chunk registry.

    The caller owns the connection and its transactions (nothing here
    commits), and shares ``lock`` with the connection's other users.

    Args:
        conn: The catalog connection (the ``chunks`` table must exist).
        lock: Lock shared with the connection's other users.
        read_only: Create nothing; without the tables the index is unavailable.
    """

    def __init__(
        self, conn: sqlite3.Connection, *, lock: threading.RLock, read_only: bool = False
    ) -> None:
        self._conn = conn
        self._lock = lock
        with lock:
            self.available = self._install(read_only=read_only)
        self._keyword = KeywordIndex(conn, lock=lock) if self.available else None

    def _install(self, *, read_only: bool) -> bool:
        present = {
            name
            for (name,) in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')"
                " AND name IN ('kw_doc_dirty', 'kw_partitions', 'kw_rows', ?, ?, ?)",
                tuple(_TRIGGERS),
            )
        }
        if {"kw_doc_dirty", "kw_partitions", "kw_rows", *_TRIGGERS} <= present:
            if not read_only and self._format() < FORMAT:
                self._rebuild_all()  # rows built by an earlier version: rebuilt with the lead
            return True
        if read_only:
            return False
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS kw_doc_dirty (kb_id TEXT NOT NULL,"
            " partition TEXT NOT NULL, source TEXT NOT NULL,"
            " PRIMARY KEY (kb_id, partition, source)) WITHOUT ROWID"
        )
        for name, body in _TRIGGERS.items():
            self._conn.execute(f"CREATE TRIGGER IF NOT EXISTS {name} {body}")
        # Chunks written before the triggers existed: their documents are built
        # by the next write (until then, search pools their chunks' scores).
        self._rebuild_all()
        return True

    def _format(self) -> int:
        """The format of the stored rows (0: written before formats were recorded)."""
        if not self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'kw_doc_format'"
        ).fetchone():
            return 0
        row = self._conn.execute("SELECT max(version) FROM kw_doc_format").fetchone()
        return int(row[0] or 0)

    def _rebuild_all(self) -> None:
        """Mark every source dirty and record the current :data:`FORMAT` (commits)."""
        self._conn.execute(
            "INSERT OR IGNORE INTO kw_doc_dirty"
            " SELECT DISTINCT kb_id, partition, source FROM chunks WHERE source != ''"
        )
        self._conn.execute("CREATE TABLE IF NOT EXISTS kw_doc_format (version INTEGER NOT NULL)")
        self._conn.execute("DELETE FROM kw_doc_format")
        self._conn.execute("INSERT INTO kw_doc_format VALUES (?)", (FORMAT,))
        self._conn.commit()

    def refresh(self, kb_id: str, *, limit: int | None = None) -> int:
        """Rebuild the rows of a knowledge base's dirty sources from the registry (no commit).

        Args:
            kb_id: Knowledge-base id.
            limit: Rebuild at most this many sources (the rest stay dirty);
                None rebuilds all.

        Returns:
            How many sources were rebuilt or removed.
        """
        if self._keyword is None:
            return 0
        with self._lock:
            dirty = self._conn.execute(
                "SELECT partition, source FROM kw_doc_dirty WHERE kb_id = ? LIMIT ?",
                (kb_id, -1 if limit is None else limit),
            ).fetchall()
            if not dirty:
                return 0
            by_partition: dict[str, list[str]] = {}
            for partition, source in dirty:
                by_partition.setdefault(partition, []).append(source)
            target = documents_kb_id(kb_id)
            for partition, sources in by_partition.items():
                for start in range(0, len(sources), 200):
                    batch = sources[start : start + 200]
                    texts = {s: self.indexed_text(kb_id, partition, s) for s in batch}
                    self._keyword.delete(target, partition, [s for s, t in texts.items() if not t])
                    self._keyword.add(target, partition, [(s, t) for s, t in texts.items() if t])
                    self._conn.executemany(
                        "DELETE FROM kw_doc_dirty WHERE kb_id = ? AND partition = ? AND source = ?",
                        [(kb_id, partition, source) for source in batch],
                    )
        return len(dirty)

    def text(self, kb_id: str, partition: str, source: str) -> str:
        """The document text of one source, rebuilt from its registered chunks.

        Chunks are ordered by page, ``chunk_index`` and ``chunk_part`` (then by
        id, for chunks without them) and joined by :func:`join_chunks`.
        """
        return self._document(kb_id, partition, source)[0]

    def indexed_text(self, kb_id: str, partition: str, source: str) -> str:
        """What the index holds for one source: its :func:`lead`, then its :meth:`text`."""
        text, title = self._document(kb_id, partition, source)
        head = lead(text, title) if text else ""
        return f"{head} {text}" if head else text

    def _document(self, kb_id: str, partition: str, source: str) -> tuple[str, object]:
        """The joined text of one source and the ``title`` metadata of its first chunk."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT text, json_extract(metadata, '$.title') FROM chunks"
                " INDEXED BY chunks_by_source"
                " WHERE kb_id = ? AND partition = ? AND source = ?"
                " ORDER BY json_extract(metadata, '$.page'),"
                " json_extract(metadata, '$.chunk_index'),"
                " json_extract(metadata, '$.chunk_part'), chunk_id",
                (kb_id, partition, source),
            ).fetchall()
        title = next((t for _, t in rows if t is not None), None)
        return join_chunks([text for text, _ in rows]), title

    def search(
        self,
        kb_id: str,
        partition: str,
        query: str,
        *,
        k: int,
        sources: Collection[str],
        stopwords: AbstractSet[str] = STOPWORDS,
    ) -> tuple[list[tuple[str, float]], set[str]]:
        """Rank a partition's documents by BM25, and tell which candidates are indexed.

        Args:
            kb_id: Knowledge-base id.
            partition: Tenant partition, ``""`` for the shared one.
            query: Free text.
            k: Most documents ranked.
            sources: The documents the caller wants scored (the sources of
                its candidate chunks).
            stopwords: Query words left out (default: the keyword index's).

        Returns:
            ``(source, bm25)`` pairs, best first, of clean documents only, and
            the subset of ``sources`` whose rows are current: a source in it
            and not ranked matched too weakly to be in the top ``k``. Both
            are empty when the index is unavailable.
        """
        if self._keyword is None or not sources:
            return [], set()
        with self._lock:
            hits = self._keyword.search(
                documents_kb_id(kb_id), partition, query, k=k, stopwords=stopwords
            )
            dirty = self._dirty(kb_id, partition, {*sources, *(s for s, _ in hits)})
        clean = [(source, score) for source, score in hits if source not in dirty]
        return clean, {source for source in sources if source not in dirty}

    def _dirty(self, kb_id: str, partition: str, sources: set[str]) -> set[str]:
        """Which of ``sources`` are marked dirty (one indexed probe when none is)."""
        if not self._conn.execute(
            "SELECT 1 FROM kw_doc_dirty WHERE kb_id = ? AND partition = ? LIMIT 1",
            (kb_id, partition),
        ).fetchone():
            return set()
        found: set[str] = set()
        batch = list(sources)
        for start in range(0, len(batch), 500):
            part = batch[start : start + 500]
            marks = ",".join("?" * len(part))
            found.update(
                source
                for (source,) in self._conn.execute(
                    "SELECT source FROM kw_doc_dirty WHERE kb_id = ? AND partition = ?"
                    f" AND source IN ({marks})",
                    (kb_id, partition, *part),
                )
            )
        return found

    def delete_kb(self, kb_id: str) -> None:
        """Remove a knowledge base's document rows and dirty marks (no commit)."""
        if self._keyword is None:
            return
        with self._lock:
            self._keyword.delete_kb(documents_kb_id(kb_id))
            self._conn.execute("DELETE FROM kw_doc_dirty WHERE kb_id = ?", (kb_id,))
