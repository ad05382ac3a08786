"""Recording episodes for :class:`~.episodic.EpisodicMemory`: prepare, hand off, write.

:class:`EpisodeRecorder` turns an :class:`~.episodes.EpisodeRecord` into a
journal entry (with ``context_turn``, the question a single turn answers),
hands it to the background writer (:mod:`~.episode_journal`), or writes it at
once, and writes batches into the memory's knowledge base. A search waits for
the same user's pending writes (:meth:`EpisodeRecorder.wait_for`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from langchain_knowledge_inject._memory.episode_journal import EpisodeWriter
from langchain_knowledge_inject._memory.episodes import (
    Entry,
    EpisodeRecord,
    prepare,
    question_answered,
    to_document,
    user_key,
    with_stored_context,
)

if TYPE_CHECKING:
    from pathlib import Path

    from langchain_knowledge_inject._memory.episode_search import EpisodeFields
    from langchain_knowledge_inject._memory.episodic import EpisodicOptions
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)

PREVIOUS_CAP = 10_000
"""Threads whose last turn is remembered (the context of the next turn's indexed text)."""
BULK_BATCH = 512
"""Episodes per knowledge-base write of a bulk import."""


class EpisodeRecorder:
    """Writes a memory's episodes: in a worker thread behind a journal, or at once.

    Args:
        store: Opens the memory's knowledge base (on first use).
        fields: The memory's kept fields, told about each write.
        options: The memory's options (``context_turn``, ``background``,
            ``journal_fsync``, ``flush_timeout_s``).
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
        self._store, self._fields, self._options = store, fields, options
        self._previous: dict[tuple[str, str], tuple[str, str]] = {}  # (user, thread): last turn
        self._lock = threading.Lock()
        self._last_seq: dict[str, int] = {}
        self.writer: EpisodeWriter | None = None
        if options.background:
            self.writer = EpisodeWriter(
                self._apply, journal_dir=journal_dir, name=name, fsync=options.journal_fsync
            )

    def record(self, record: EpisodeRecord, *, user_id: str) -> str | None:
        """Journal and queue one episode (or write it at once); its id, ``None`` if empty."""
        entry = self._prepare(record, user_id=user_id)
        if entry is None:
            return None
        if self.writer is None:
            self._apply([entry])
        else:
            self._last_seq[entry["user"]] = self.writer.submit([entry])
        return str(entry["meta"]["ep_id"])

    def write_now(self, records: Sequence[EpisodeRecord], *, user_id: str) -> list[str]:
        """Write ``records`` now, in batches, after what is queued; their ids (empty skipped)."""
        entries = [e for r in records if (e := self._prepare(r, user_id=user_id)) is not None]
        self.flush()
        for start in range(0, len(entries), BULK_BATCH):
            self._apply(entries[start : start + BULK_BATCH])
        return [str(e["meta"]["ep_id"]) for e in entries]

    def wait_for(self, user: str) -> None:
        """Wait (up to ``flush_timeout_s``) for ``user``'s pending writes and a journal replay."""
        if self.writer is None:
            return
        seq = max(self._last_seq.get(user, 0), self.writer.replayed)
        if seq and not self.writer.wait(seq, timeout=self._options.flush_timeout_s):
            logger.warning("episodic memory: searching without %d pending episodes",
                           self.writer.pending)  # fmt: skip

    def flush(self, *, timeout: float | None = None) -> None:
        """Wait until every recorded episode is written (see ``EpisodeWriter.flush``)."""
        if self.writer is not None:
            self.writer.flush(timeout=self._options.flush_timeout_s if timeout is None else timeout)

    def close(self) -> None:
        """Flush and stop the writer (what is not written stays in the journal)."""
        if self.writer is not None:
            self.writer.close(timeout=self._options.flush_timeout_s)

    def _prepare(self, record: EpisodeRecord, *, user_id: str) -> Entry | None:
        """The journal entry of ``record``; with ``context_turn``, the question it answers.

        The context is the previous single turn of the same thread when that
        turn is a question of another speaker ("How was the holiday?" before
        "Just got back from Porto"). The first turn of a thread in this
        process is marked, and its context looked up in the store when it is
        written (``episodes.with_stored_context``), off the caller's thread.
        """
        key = (user_key(user_id), record.thread_id or "")
        tracked = bool(key[1]) and record.single
        looked_up = tracked and self._options.context_turn
        with self._lock:
            previous = self._previous.get(key)
            context = question_answered(previous, record.speaker) if looked_up else ""
            entry = prepare(record, user_id=user_id, context=context)
            if entry is not None and tracked:
                if looked_up and previous is None:
                    entry["context_from_store"] = True
                if len(self._previous) >= PREVIOUS_CAP and key not in self._previous:
                    self._previous.pop(next(iter(self._previous)))
                self._previous[key] = (record.speaker or "", str(entry["meta"]["ep_text"]))
            return entry

    def _apply(self, entries: Sequence[Entry]) -> None:
        """Write a batch into the knowledge base (idempotent: the writer may retry it)."""
        kb = self._store()
        by_user: dict[str, dict[str, Entry]] = {}
        earlier: dict[tuple[str, str], tuple[str, str]] = {}  # single turns of this batch
        for entry in entries:  # the last write of an episode wins
            entry = with_stored_context(entry, earlier, kb)
            by_user.setdefault(entry["user"], {})[entry["meta"]["ep_id"]] = entry
        for user, items in by_user.items():
            kb.add_documents([to_document(e) for e in items.values()], tenant_id=user)
            speakers = (e["meta"].get("ep_speaker") or "" for e in items.values())
            self._fields.wrote(user, items, speakers)  # after the write: a search reads them again
