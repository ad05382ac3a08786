"""Keeps in-memory BM25 copies of large FTS5 keyword tables in step with them.

The FTS5 tables of :mod:`keyword` are the record: persistent, and written in
the same transaction as the registry. For a partition of at least
:data:`POSTINGS_ABOVE` chunks, searches use a :class:`PostingsIndex` instead,
built from the FTS5 table's own text and kept current through a change log:

* every add and delete of a keyword row also writes ``(table, row, added)`` to
  the table ``kw_log`` (``seq`` AUTOINCREMENT), in the caller's transaction,
  so the log commits or rolls back with the rows it describes, whichever
  connection or process wrote them;
* the copy remembers the last ``seq`` it reflects; before each search it reads
  the committed log entries past it (an indexed range read, nothing when
  nothing changed), re-reads the changed rows' text from FTS5 and applies
  them. While the connection holds uncommitted writes, searches use FTS5,
  which sees them;
* dropping a table (``delete_kb``) clears its log and raises its *floor* in
  ``kw_log_floor``: a copy older than the floor is discarded and rebuilt. The
  log of a table is trimmed the same way when it outgrows
  :data:`LOG_KEEP` entries.

A copy is built from scratch on a background thread reading its own connection
(one read transaction: the rows and the log position agree), so the first
searches of a large partition after a start are served by FTS5 until it is
ready; an in-memory database is built on the searching thread. A crash loses
only the copy, never the record: the next process rebuilds it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass

from langchain_knowledge_inject._store.keyword_postings import PostingsIndex
from langchain_knowledge_inject._store.keyword_tokens import Fts5Tokenizer

__all__ = ["LOG_KEEP", "POSTINGS_ABOVE", "KeywordMirror"]

logger = logging.getLogger(__name__)

POSTINGS_ABOVE = 50_000
"""Partitions with at least this many chunks are searched through an in-memory copy."""

LOG_KEEP = 200_000
"""Change-log entries kept per table; older ones are trimmed (copies behind them rebuild)."""

_BUILD_BATCH = 20_000

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS kw_log ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT, fts_table TEXT NOT NULL,"
    " row_id INTEGER NOT NULL, added INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS kw_log_table ON kw_log (fts_table, seq)",
    "CREATE TABLE IF NOT EXISTS kw_log_floor (fts_table TEXT PRIMARY KEY, floor INTEGER NOT NULL)",
)


@dataclass
class _Copy:
    index: PostingsIndex
    seq: int


class KeywordMirror:
    """The in-memory copies of one connection's large keyword tables.

    Args:
        conn: The keyword index's connection (the caller serializes its use).
        tokenize: The FTS5 tables' ``tokenize`` option.
        above: Partitions with at least this many rows get a copy.
        background: Build copies of file databases on a background thread.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        tokenize: str,
        above: int = POSTINGS_ABOVE,
        background: bool = True,
    ) -> None:
        self._conn = conn
        self._tokenize = tokenize
        self._above = above
        self._background = background
        self._copies: dict[str, _Copy] = {}
        self._building: set[str] = set()
        self._guard = threading.Lock()  # _copies and _building, shared with the builders
        try:
            for statement in _SCHEMA:
                conn.execute(statement)
            self.enabled = True
        except sqlite3.OperationalError:  # a read-only catalog: FTS5 serves every search
            self.enabled = False

    def log(self, table: str, row_ids: list[int], *, added: bool) -> None:
        """Record added or deleted rows of ``table`` (in the caller's transaction)."""
        if not self.enabled or not row_ids:
            return
        self._conn.executemany(
            "INSERT INTO kw_log (fts_table, row_id, added) VALUES (?, ?, ?)",
            [(table, row_id, int(added)) for row_id in row_ids],
        )

    def forget(self, table: str) -> None:
        """``table`` was dropped: clear its log and make every copy of it stale."""
        with self._guard:
            self._copies.pop(table, None)
        if self.enabled:
            self._raise_floor(table)

    def trim(self, table: str) -> None:
        """Trim ``table``'s log to the newest :data:`LOG_KEEP` entries (caller's transaction)."""
        if not self.enabled:
            return
        row = self._conn.execute(
            "SELECT seq FROM kw_log WHERE fts_table = ? ORDER BY seq DESC LIMIT 1 OFFSET ?",
            (table, LOG_KEEP),
        ).fetchone()
        if row is not None:
            self._conn.execute(
                "DELETE FROM kw_log WHERE fts_table = ? AND seq <= ?", (table, row[0])
            )
            self._conn.execute(
                "INSERT INTO kw_log_floor (fts_table, floor) VALUES (?, ?)"
                " ON CONFLICT (fts_table) DO UPDATE SET floor = max(floor, excluded.floor)",
                (table, row[0]),  # a copy at or past it needs only what is kept
            )

    def index(self, table: str, rows: int) -> PostingsIndex | None:
        """The up-to-date copy of ``table``, or None when FTS5 must answer this search.

        Args:
            table: FTS5 table name.
            rows: Rows in the table now (decides whether it deserves a copy).
        """
        if not self.enabled or self._conn.in_transaction:
            return None
        with self._guard:
            copy = self._copies.get(table)
        if copy is None and rows < self._above:
            return None
        floor = self._floor(table)
        if copy is not None and copy.seq < floor:
            with self._guard:
                self._copies.pop(table, None)
            copy = None
        if copy is None:
            copy = self._start_build(table)
            if copy is None:
                return None
        self._catch_up(table, copy)
        return copy.index

    def _floor(self, table: str) -> int:
        row = self._conn.execute(
            "SELECT floor FROM kw_log_floor WHERE fts_table = ?", (table,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def _raise_floor(self, table: str) -> None:
        self._conn.execute("DELETE FROM kw_log WHERE fts_table = ?", (table,))
        top = self._conn.execute("SELECT coalesce(max(seq), 0) FROM kw_log").fetchone()[0]
        seq = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'kw_log'").fetchone()
        floor = max(int(top), int(seq[0]) if seq else 0) + 1
        self._conn.execute(
            "INSERT INTO kw_log_floor (fts_table, floor) VALUES (?, ?)"
            " ON CONFLICT (fts_table) DO UPDATE SET floor = max(floor, excluded.floor)",
            (table, floor),
        )

    def _catch_up(self, table: str, copy: _Copy) -> None:
        changes = self._conn.execute(
            "SELECT seq, row_id, added FROM kw_log WHERE fts_table = ? AND seq > ? ORDER BY seq",
            (table, copy.seq),
        ).fetchall()
        if not changes:
            return
        last: dict[int, int] = {}
        for _, row_id, added in changes:
            last[row_id] = added
        copy.index.delete(last)  # every changed row leaves; those last added come back
        back = [row_id for row_id, added in last.items() if added]
        for start in range(0, len(back), 500):
            batch = back[start : start + 500]
            marks = ",".join("?" * len(batch))
            copy.index.add(
                self._conn.execute(
                    f"SELECT rowid, text FROM {table} WHERE rowid IN ({marks})", batch
                ).fetchall()
            )
        copy.seq = int(changes[-1][0])

    def _start_build(self, table: str) -> _Copy | None:
        path = _database_file(self._conn)
        if not self._background or path is None:
            return self._install(table, _build(self._conn, table, self._tokenize))
        with self._guard:
            if table in self._building:
                return None
            self._building.add(table)
        thread = threading.Thread(
            target=self._build_elsewhere,
            args=(path, table),
            name=f"kinject-kw-{table}",
            daemon=True,
        )
        thread.start()
        return None

    def _build_elsewhere(self, path: str, table: str) -> None:
        try:
            conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            try:
                conn.execute("BEGIN")  # one read snapshot: the rows and the log position agree
                copy = _build(conn, table, self._tokenize)
                conn.execute("COMMIT")
            finally:
                conn.close()
            self._install(table, copy)
        except Exception:  # the copy is an optimization: FTS5 answers meanwhile
            self._background = False  # e.g. a read-only file: build on the searching thread
            logger.warning(
                "Keyword copy of %s could not be built on a background thread; the next "
                "search builds it on its own thread",
                table,
                exc_info=True,
            )
        finally:
            with self._guard:
                self._building.discard(table)

    def _install(self, table: str, copy: _Copy) -> _Copy:
        with self._guard:
            self._copies[table] = copy
        return copy

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the background builds in progress (for tests and benchmarks)."""
        for thread in threading.enumerate():
            if thread.name.startswith("kinject-kw-"):
                thread.join(timeout)


def _build(conn: sqlite3.Connection, table: str, tokenize: str) -> _Copy:
    seq = conn.execute("SELECT coalesce(max(seq), 0) FROM kw_log").fetchone()[0]
    floor_row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'kw_log'").fetchone()
    seq = max(int(seq), int(floor_row[0]) if floor_row else 0)
    index = PostingsIndex(Fts5Tokenizer(tokenize))
    cursor = conn.execute(f"SELECT rowid, text FROM {table}")
    while batch := cursor.fetchmany(_BUILD_BATCH):
        index.add(batch)
    index.tokenizer.release()
    return _Copy(index, seq)


def _database_file(conn: sqlite3.Connection) -> str | None:
    for _, name, file in conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return file or None
    return None
