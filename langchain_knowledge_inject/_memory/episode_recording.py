"""Recording episodes for :class:`~.episodic.EpisodicMemory`: prepare, hand off, write.

:class:`EpisodeRecorder` turns an :class:`~.episodes.EpisodeRecord` into a
journal entry, hands it to the background writer (:mod:`~.episode_journal`)
or writes it at once, and writes batches into the memory's knowledge base. A
search waits for the same user's pending writes (:meth:`EpisodeRecorder.wait_for`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from langchain_knowledge_inject._memory.episode_journal import EpisodeWriter
from langchain_knowledge_inject._memory.episodes import Entry, EpisodeRecord, prepare, to_document

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
