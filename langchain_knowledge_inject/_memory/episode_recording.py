"""Recording episodes off the turn's critical path: a recorder, a journal, a worker thread.

:class:`EpisodeRecorder` turns an :class:`~.episodes.EpisodeRecord` into a
journal entry (with ``context_turn``, indexed with the question it answers:
what the previous turn of its thread asked, kept per thread in this process)
and writes it at once or hands it to :class:`EpisodeWriter`,
which appends it to a local journal (one JSON line, one ``os.write`` on an
``O_APPEND`` file: microseconds, and what a crash of the process cannot lose)
and queues it for a worker thread that writes batches into the knowledge base.
The journal is emptied when all is written, and replayed on the next open if
the process died (writing an episode is idempotent). Each journal is
``flock``-ed by its process; a second process gets its own, and journals of
dead processes are replayed and removed. A failing write is logged and retried
with a growing pause; nothing is dropped.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._memory.episodes import (
    Entry,
    EpisodeRecord,
    prepare,
    question_answered,
    statement_documents,
    statements_partition,
    to_document,
)
from langchain_knowledge_inject.errors import MemoryWriteError

if TYPE_CHECKING:
    from pathlib import Path

    from langchain_knowledge_inject._memory.episode_search import EpisodeFields
    from langchain_knowledge_inject._memory.episodic import EpisodicOptions
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)

BULK_BATCH = 512
"""Episodes per knowledge-base write of a bulk import."""
THREADS_KEPT = 10_000
"""Threads whose last turn is kept (the question the next turn answers); the oldest go first."""


class EpisodeRecorder:
    """Writes a memory's episodes: in a worker thread behind a journal, or at once.

    ``store`` opens the memory's knowledge base; ``fields`` is told about each
    write; of ``options``, ``context_turn``, ``statement_weight`` (0: statements
    are not indexed), ``background``, ``journal_fsync`` and ``flush_timeout_s``.
    """

    def __init__(
        self,
        store: Callable[[], KnowledgeBase],
        fields: EpisodeFields,
        options: EpisodicOptions,
        *,
        journal_dir: Path,
        name: str,
    ) -> None:
        self._store, self._fields, self._timeout = store, fields, options.flush_timeout_s
        self._context, self._statements = options.context_turn, options.statement_weight > 0
        self._last_turn: dict[tuple[str, str, str], tuple[str, str]] = {}  # (speaker, text)
        self._lock = threading.Lock()
        self._last_seq: dict[str, int] = {}
        self.writer: EpisodeWriter | None = None
        if options.background:
            self.writer = EpisodeWriter(
                self._apply, journal_dir=journal_dir, name=name, fsync=options.journal_fsync
            )

    def record(self, record: EpisodeRecord, *, user_id: str) -> str | None:
        """Journal and queue one episode (or write it at once); its id, ``None`` if empty."""
        entry = self._prepare(record, user_id)
        if entry is None:
            return None
        if self.writer is None:
            self._apply([entry])
        else:
            self._last_seq[entry["user"]] = self.writer.submit(entry)
        return str(entry["meta"]["ep_id"])

    def write_now(self, records: Sequence[EpisodeRecord], *, user_id: str) -> list[str]:
        """Write ``records`` now, in batches, after what is queued; their ids (empty skipped)."""
        entries = [e for r in records if (e := self._prepare(r, user_id)) is not None]
        self.flush()
        for start in range(0, len(entries), BULK_BATCH):
            self._apply(entries[start : start + BULK_BATCH])
        return [str(e["meta"]["ep_id"]) for e in entries]

    def _prepare(self, record: EpisodeRecord, user_id: str) -> Entry | None:
        """The entry of ``record``; with ``context_turn``, indexed with the question it answers.

        The previous episode of its thread and kind (turn or exchange) is kept,
        as said last (an exchange's reply), in the order episodes are recorded;
        the first episode of a thread in this process answers nothing.
        """
        entry = prepare(record, user_id=user_id)
        meta = entry["meta"] if entry is not None else {}
        if (
            entry is None
            or not (self._context and meta["ep_thread"])
            or meta["ep_kind"] == "memory"
        ):
            return entry
        key = (entry["user"], meta["ep_thread"], meta["ep_kind"])
        last = ("ep_reply_speaker", "ep_reply") if meta["ep_reply"] else ("ep_speaker", "ep_text")
        with self._lock:
            previous = self._last_turn.pop(key, None)
            if len(self._last_turn) >= THREADS_KEPT:
                self._last_turn.pop(next(iter(self._last_turn)))
            self._last_turn[key] = (meta[last[0]], meta[last[1]])
        if asked := question_answered(previous, meta["ep_speaker"]):
            entry["text"] += f"\n{asked}"
        return entry

    def wait_for(self, user: str) -> None:
        """Wait (up to ``flush_timeout_s``) for ``user``'s pending writes and a journal replay."""
        if self.writer is None:
            return
        seq = max(self._last_seq.get(user, 0), self.writer.replayed)
        if seq and not self.writer.wait(seq, timeout=self._timeout):
            logger.warning("episodic memory: searching without %d pending episodes",
                           self.writer.pending)  # fmt: skip

    def flush(self, *, timeout: float | None = None) -> None:
        """Wait until every recorded episode is written (see ``EpisodeWriter.flush``)."""
        if self.writer is not None:
            self.writer.flush(timeout=self._timeout if timeout is None else timeout)

    def close(self) -> None:
        """Flush and stop the writer (what is not written stays in the journal)."""
        if self.writer is not None:
            self.writer.close(timeout=self._timeout)

    def _apply(self, entries: Sequence[Entry]) -> None:
        """Write a batch into the knowledge base (idempotent: the writer may retry it)."""
        by_user: dict[str, dict[str, Entry]] = {}
        for entry in entries:  # the last write of an episode wins
            by_user.setdefault(entry["user"], {})[entry["meta"]["ep_id"]] = entry
        kb = self._store()
        for user, items in by_user.items():
            kb.add_documents([to_document(e) for e in items.values()], tenant_id=user)
            speakers = (e["meta"].get("ep_speaker") or "" for e in items.values())
            self._fields.wrote(user, items, speakers)  # after the write: a search reads them again
            said = [d for e in items.values() for d in statement_documents(e)]
            if self._statements and said:
                kb.add_documents(said, tenant_id=statements_partition(user))
                self._fields.wrote(statements_partition(user), items)


_BATCH = 64
_MAX_PAUSE_S = 30.0


def _lock(handle: Any) -> bool:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: one process per store, documented
        return True
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def read_journal(path: Path) -> list[Entry]:
    """The entries of a journal file; a torn line (a crash mid-write) is skipped."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError:  # gone since it was listed
        return []
    entries = []
    for line in lines:
        try:
            entries.append(dict(json.loads(line)))
        except (ValueError, TypeError):
            logger.warning("episodic memory: skipped a torn journal line in %s", path)
    return entries


class EpisodeWriter:
    """A journal plus a worker thread that ``apply``-s queued episodes in batches.

    ``apply`` raises on failure and must be idempotent (a batch may be retried).
    """

    def __init__(
        self,
        apply: Callable[[Sequence[Entry]], None],
        *,
        journal_dir: Path,
        name: str,
        fsync: bool = False,
    ) -> None:
        self._apply, self._fsync = apply, fsync
        self._cond = threading.Condition()
        self._queue: deque[Entry] = deque()  # entry n of the queue has number applied + n + 1
        self._submitted = self._applied = 0
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._orphans: list[tuple[Path, Any]] = []
        self.path, self._handle = self._lock_journal(journal_dir, name)
        replay = [*read_journal(self.path)]
        for other in sorted(journal_dir.glob(f"{name}.*.jsonl")):
            handle = other.open("ab") if other != self.path else None
            if handle is not None and _lock(handle):  # its process is gone: take over its work
                replay += read_journal(other)
                self._orphans.append((other, handle))
            elif handle is not None:
                handle.close()
        self._queue.extend(replay)
        self._submitted = self.replayed = len(replay)
        """Number of the last entry replayed from a journal (0: none)."""
        if replay:
            logger.info("episodic memory: replaying %d journalled episodes", len(replay))
            self._start()

    @staticmethod
    def _lock_journal(directory: Path, name: str) -> tuple[Path, Any]:
        """The journal this process locks: the shared one, else one of its own."""
        directory.mkdir(parents=True, exist_ok=True)
        for path in (directory / f"{name}.jsonl", directory / f"{name}.{os.getpid()}.jsonl"):
            handle = path.open("ab")
            if _lock(handle):
                return path, handle
            handle.close()
        msg = f"episodic memory: cannot lock a journal in {directory}"
        raise MemoryWriteError(msg)

    def submit(self, entry: Entry) -> int:
        """Journal and queue ``entry``; returns its number (see :meth:`wait`)."""
        with self._cond:
            if self._closed:
                msg = "episodic memory is closed; nothing more can be recorded"
                raise MemoryWriteError(msg)
            os.write(
                self._handle.fileno(), json.dumps(entry, separators=(",", ":")).encode() + b"\n"
            )
            if self._fsync:
                os.fsync(self._handle.fileno())
            self._queue.append(entry)
            self._submitted += 1
            seq = self._submitted
            self._cond.notify_all()
        self._start()  # after a fork, the child starts its own worker
        return seq

    @property
    def pending(self) -> int:
        """Entries queued and not yet written."""
        with self._cond:
            return self._submitted - self._applied

    def wait(self, seq: int | None = None, *, timeout: float | None = None) -> bool:
        """Wait until entry ``seq`` (default: every entry so far) is written; False on timeout."""
        with self._cond:
            target = self._submitted if seq is None else seq
            return self._cond.wait_for(lambda: self._applied >= target, timeout)

    def flush(self, *, timeout: float | None = None) -> None:
        """Write everything queued so far.

        Raises:
            MemoryWriteError: Not written in ``timeout`` seconds (they stay journalled and queued).
        """
        if not self.wait(timeout=timeout):
            msg = f"episodic memory: {self.pending} episodes are not written yet"
            if (failure := self._failure) is not None:
                msg += f" (last error: {type(failure).__name__}: {failure})"
            raise MemoryWriteError(msg)

    def close(self, *, timeout: float | None = None) -> None:
        """Flush, then stop the worker and close the journal (entries not written stay in it)."""
        try:
            self.flush(timeout=timeout)
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            if self._thread is not None and self._thread is not threading.current_thread():
                self._thread.join(timeout=1.0)
            self._handle.close()

    def _start(self) -> None:
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="kinject-episodic-writer",
                                                daemon=True)  # fmt: skip
                self._thread.start()

    def _run(self) -> None:
        pause = 0.0
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closed)
                if not self._queue:
                    return
                batch = list(itertools.islice(self._queue, _BATCH))
            try:
                self._apply(batch)
            except Exception as exc:
                pause = min(_MAX_PAUSE_S, max(0.05, pause * 2))
                logger.warning(
                    "episodic memory: writing %d episodes failed (%s: %s); kept in the "
                    "journal, retrying in %.2f s", len(batch), type(exc).__name__, exc, pause,
                )  # fmt: skip
                with self._cond:
                    self._failure = exc
                    if not self._cond.wait_for(lambda: self._closed, pause):
                        continue
                    return
            pause = 0.0
            with self._cond:
                for _ in batch:
                    self._queue.popleft()
                self._applied += len(batch)
                self._failure = None
                if self._applied == self._submitted:  # all written: empty the journals
                    if not self._handle.closed:
                        os.ftruncate(self._handle.fileno(), 0)
                    for path, handle in self._orphans:
                        with contextlib.suppress(OSError):
                            path.unlink()
                        handle.close()
                    self._orphans.clear()
                self._cond.notify_all()
