"""Recording episodes off the turn's critical path: a recorder, a journal, a worker thread.

:class:`EpisodeRecorder` turns an :class:`~.episodes.EpisodeRecord` into a
journal entry and writes it at once or hands it to :class:`EpisodeWriter`,
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
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._memory.episodes import Entry, EpisodeRecord, prepare, to_document
from langchain_knowledge_inject.errors import MemoryWriteError

if TYPE_CHECKING:
    from pathlib import Path

    from langchain_knowledge_inject._memory.episode_search import EpisodeFields
    from langchain_knowledge_inject._memory.episodic import EpisodicOptions
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)

BULK_BATCH = 512
"""Episodes per knowledge-base write of a bulk import."""


class EpisodeRecorder:
    """Writes a memory's episodes: in a worker thread behind a journal, or at once.

    Args:
        store: Opens the memory's knowledge base (on first use).
        fields: The memory's kept fields, told about each write.
        options: The memory's options (``background``, ``journal_fsync``, ``flush_timeout_s``).
        journal_dir: Where the journal lives.
        name: Base name of the journal file.
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
        self._last_seq: dict[str, int] = {}
        self.writer: EpisodeWriter | None = None
        if options.background:
            self.writer = EpisodeWriter(
                self._apply, journal_dir=journal_dir, name=name, fsync=options.journal_fsync
            )

    def record(self, record: EpisodeRecord, *, user_id: str) -> str | None:
        """Journal and queue one episode (or write it at once); its id, ``None`` if empty."""
        entry = prepare(record, user_id=user_id)
        if entry is None:
            return None
        if self.writer is None:
            self._apply([entry])
        else:
            self._last_seq[entry["user"]] = self.writer.submit([entry])
        return str(entry["meta"]["ep_id"])

    def write_now(self, records: Sequence[EpisodeRecord], *, user_id: str) -> list[str]:
        """Write ``records`` now, in batches, after what is queued; their ids (empty skipped)."""
        entries = [e for r in records if (e := prepare(r, user_id=user_id)) is not None]
        self.flush()
        for start in range(0, len(entries), BULK_BATCH):
            self._apply(entries[start : start + BULK_BATCH])
        return [str(e["meta"]["ep_id"]) for e in entries]

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
    """A journal plus a worker thread that applies queued episodes in batches.

    Args:
        apply: Writes a batch of entries (raises on failure; must be idempotent).
        journal_dir: Where the journal lives.
        name: Base name of the journal file.
        fsync: ``fsync`` the journal after each append.
    """

    def __init__(
        self,
        apply: Callable[[Sequence[Entry]], None],
        *,
        journal_dir: Path,
        name: str,
        fsync: bool = False,
    ) -> None:
        self._apply = apply
        self._fsync = fsync
        self._cond = threading.Condition()
        self._queue: deque[tuple[int, Entry]] = deque()
        self._submitted = 0
        self._applied = 0
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._handle: Any = None
        self._orphans: list[tuple[Path, Any]] = []
        self.replayed = 0
        """Sequence number of the last entry replayed from a journal (0: none)."""
        self.path = self._open_journal(journal_dir, name)

    # -- the journal ---------------------------------------------------------------------------
    def _open_journal(self, directory: Path, name: str) -> Path:
        """Lock a journal of this process (the shared one, else one per pid) and replay."""
        directory.mkdir(parents=True, exist_ok=True)
        for mine in (directory / f"{name}.jsonl", directory / f"{name}.{os.getpid()}.jsonl"):
            handle = mine.open("ab")
            if _lock(handle):
                self._handle = handle
                break
            handle.close()
        else:
            msg = f"episodic memory: cannot lock a journal in {directory}"
            raise MemoryWriteError(msg)
        replay = read_journal(mine)
        for other in sorted(directory.glob(f"{name}.*.jsonl")):
            if other == mine:
                continue
            handle = other.open("ab")
            if _lock(handle):  # its process is gone: take over what it left
                replay += read_journal(other)
                self._orphans.append((other, handle))
            else:
                handle.close()
        if replay:
            logger.info("episodic memory: replaying %d journalled episodes", len(replay))
            with self._cond:
                for entry in replay:
                    self._submitted += 1
                    self._queue.append((self._submitted, entry))
                self.replayed = self._submitted
            self._start()
        return mine

    def _append(self, entry: Entry) -> None:
        fd = self._handle.fileno()
        os.write(fd, json.dumps(entry, separators=(",", ":")).encode() + b"\n")
        if self._fsync:
            os.fsync(fd)

    def _truncate_if_idle(self) -> None:
        # Called with self._cond held: nothing can be appended meanwhile.
        if self._applied == self._submitted and not self._queue:
            if not self._handle.closed and os.fstat(self._handle.fileno()).st_size:
                os.ftruncate(self._handle.fileno(), 0)
            for path, handle in self._orphans:
                with contextlib.suppress(OSError):
                    path.unlink()
                handle.close()
            self._orphans.clear()

    # -- submitting and waiting ----------------------------------------------------------------
    def submit(self, entries: Sequence[Entry]) -> int:
        """Journal and queue ``entries``; returns the sequence number of the last one."""
        with self._cond:
            if self._closed:
                msg = "episodic memory is closed; nothing more can be recorded"
                raise MemoryWriteError(msg)
            for entry in entries:
                self._append(entry)
                self._submitted += 1
                self._queue.append((self._submitted, entry))
            self._cond.notify_all()
            seq = self._submitted
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
            MemoryWriteError: It could not be written in ``timeout`` seconds
                (the entries stay journalled and queued).
        """
        if not self.wait(timeout=timeout):
            failure = self._failure
            msg = f"episodic memory: {self.pending} episodes are not written yet"
            if failure is not None:
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
            if self._thread not in (None, threading.current_thread()):
                self._thread.join(timeout=1.0)
            self._handle.close()

    # -- the worker ----------------------------------------------------------------------------
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
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                batch = [self._queue[i] for i in range(min(_BATCH, len(self._queue)))]
            try:
                self._apply([entry for _, entry in batch])
            except Exception as exc:
                pause = min(_MAX_PAUSE_S, max(0.05, pause * 2))
                logger.warning(
                    "episodic memory: writing %d episodes failed (%s: %s); kept in the "
                    "journal, retrying in %.2f s", len(batch), type(exc).__name__, exc, pause,
                )  # fmt: skip
                with self._cond:
                    self._failure = exc
                    if self._closed:
                        return
                    self._cond.wait(pause)
                continue
            pause = 0.0
            with self._cond:
                for _ in batch:
                    self._queue.popleft()
                self._applied = batch[-1][0]
                self._failure = None
                self._truncate_if_idle()
                self._cond.notify_all()
