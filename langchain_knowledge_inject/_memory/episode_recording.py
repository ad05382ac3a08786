"""Recording episodes for :class:`~.episodic.EpisodicMemory`: record, record_turn, flush.

What a turn records (:meth:`~RecordingMixin.record_turn`), the journal entry
of an episode with the question it answers (``context_turn``), the hand-off to
the background writer (:mod:`~.episode_journal`) and the write into the
knowledge base, the bulk import (``add_episodes``, ``import_legacy``), and a
search's wait for the same user's pending writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_knowledge_inject._memory.episode_store import (
    EpisodeRecord,
    prepare,
    question_answered,
    text_of,
    to_document,
    user_key,
    with_stored_context,
)
from langchain_knowledge_inject._turn.blocks import config_user_id
from langchain_knowledge_inject._turn.placement import (
    current_user_index,
    query_text,
    strip_injected,
)
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    import threading
    from pathlib import Path

    from langchain_core.runnables import RunnableConfig

    from langchain_knowledge_inject._memory.episode_fields import EpisodeFields
    from langchain_knowledge_inject._memory.episode_journal import EpisodeWriter
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

# the logger of the class it is part of: log records keep the name they had
logger = logging.getLogger("langchain_knowledge_inject._memory.episodic")

_PREVIOUS_CAP = 10_000
"""Threads whose last turn is remembered (the context of the next turn's indexed text)."""


class RecordingMixin:
    """The recording side of ``EpisodicMemory`` (a part of its class, not used alone)."""

    if TYPE_CHECKING:  # what it uses of the facade
        path: Path
        auto_record: bool
        context_turn: bool
        speaker_in_text: bool
        user_id_key: str
        flush_timeout_s: float
        _writer: EpisodeWriter | None
        _fields: EpisodeFields
        _last_seq: dict[str, int]
        _speakers: dict[str, set[str]]
        _previous: dict[tuple[str, str], tuple[str, str]]
        _previous_lock: threading.Lock

        @property
        def knowledge_base(self) -> KnowledgeBase: ...

    def record(
        self,
        text: str,
        *,
        user_id: str,
        speaker: str | None = None,
        reply: str = "",
        reply_speaker: str | None = None,
        thread_id: str | None = None,
        episode_id: str | None = None,
        turn: str | int | None = None,
        date: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
        kind: Literal["exchange", "turn", "memory"] | None = None,
    ) -> str | None:
        """Record one episode: a single turn (of any speaker), or an exchange with ``reply``.

        Returns at once with the episode id (``episode_id`` when given, else one
        derived from the content; ``None`` for an empty text); the write happens
        in the background (see :meth:`flush`). Recording the same id again replaces it.

        Raises:
            ConfigurationError: An argument has a value that is not allowed.
        """
        record = EpisodeRecord(text=text, speaker=speaker, reply=reply, reply_speaker=reply_speaker,
                               thread_id=thread_id, episode_id=episode_id, turn=turn, date=date,
                               metadata=metadata, kind=kind)  # fmt: skip
        entry = self._prepare(record, user_id=user_id)
        if entry is None:
            return None
        self._submit([entry])
        return str(entry["meta"]["ep_id"])

    async def arecord(self, text: str, **kwargs: Any) -> str | None:
        """Async twin of :meth:`record` (it does not block either way)."""
        return self.record(text, **kwargs)

    def record_exchange(
        self,
        user_message: str,
        assistant_reply: str = "",
        *,
        user_id: str,
        thread_id: str | None = None,
        turn: str | int | None = None,
        date: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str | None:
        """Record a user message and the assistant's reply (see :meth:`record`)."""
        return self.record(user_message, user_id=user_id, speaker="user", reply=assistant_reply,
                           reply_speaker="assistant" if assistant_reply.strip() else None,
                           thread_id=thread_id, turn=turn, date=date, metadata=metadata,
                           kind="exchange")  # fmt: skip

    async def arecord_exchange(
        self, user_message: str, assistant_reply: str = "", **kwargs: Any
    ) -> str | None:
        """Async twin of :meth:`record_exchange`."""
        return self.record_exchange(user_message, assistant_reply, **kwargs)

    def remember(
        self,
        content: str,
        *,
        user_id: str,
        thread_id: str | None = None,
        date: datetime | None = None,
    ) -> str | None:
        """Store a note worth keeping (what the ``store_memory`` tool calls)."""
        return self.record(content, user_id=user_id, thread_id=thread_id, date=date, kind="memory")

    async def aremember(self, content: str, **kwargs: Any) -> str | None:
        """Async twin of :meth:`remember`."""
        return self.remember(content, **kwargs)

    def add_episodes(
        self, episodes: Sequence[EpisodeRecord | Mapping[str, Any]], *, user_id: str
    ) -> list[str]:
        """Write many episodes now, in batches (importing old conversations).

        Args:
            episodes: :class:`EpisodeRecord` objects, or mappings of its fields.
            user_id: Whose memory they go to.

        Returns:
            The episode id of each episode, in order (empty texts are skipped).
        """
        entries = []
        for item in episodes:
            if isinstance(item, Mapping):
                fields = dict(item)
                try:
                    item = EpisodeRecord(**fields)
                except TypeError as exc:
                    msg = f"an episode takes the fields of EpisodeRecord: {exc}"
                    raise ConfigurationError(msg, option="episodes", value=fields) from exc
            entry = self._prepare(item, user_id=user_id)
            if entry is not None:
                entries.append(entry)
        self.flush()
        for start in range(0, len(entries), 512):
            self._apply(entries[start : start + 512])
        return [str(e["meta"]["ep_id"]) for e in entries]

    async def aadd_episodes(
        self, episodes: Sequence[EpisodeRecord | Mapping[str, Any]], *, user_id: str
    ) -> list[str]:
        """Async twin of :meth:`add_episodes` (runs in a worker thread)."""
        return await asyncio.to_thread(self.add_episodes, episodes, user_id=user_id)

    def record_turn(
        self,
        messages: Sequence[BaseMessage],
        *,
        config: RunnableConfig | None = None,
        user_id: str | None = None,
        thread_id: str | None = None,
        date: datetime | None = None,
    ) -> str | None:
        """Record the finished turn at the end of ``messages`` (returns at once).

        The turn is the current user message (the last ``HumanMessage`` that is
        not an injection) and the last text reply after it that is not a tool
        call, injected content stripped. User and thread ids default to
        ``config["configurable"]`` (``user_id_key``, ``thread_id``).

        Returns:
            The episode id, or ``None``: recording is off, there is no user id,
            or the turn has no final reply yet.
        """
        turn = self._turn(messages, config, user_id, thread_id)
        if turn is None:
            return None
        return self.record_exchange(turn[0], turn[1], user_id=turn[2], thread_id=turn[3],
                                    turn=turn[4], date=date)  # fmt: skip

    async def arecord_turn(self, messages: Sequence[BaseMessage], **kwargs: Any) -> str | None:
        """Async twin of :meth:`record_turn`."""
        return self.record_turn(messages, **kwargs)

    def flush(self, *, timeout: float | None = None) -> None:
        """Wait until every recorded episode is written.

        Raises:
            MemoryWriteError: They could not be written within ``timeout``
                (default ``flush_timeout_s``); they stay journalled and queued.
        """
        if self._writer is not None:
            self._writer.flush(timeout=self.flush_timeout_s if timeout is None else timeout)

    async def aflush(self, *, timeout: float | None = None) -> None:
        """Async twin of :meth:`flush`."""
        await asyncio.to_thread(self.flush, timeout=timeout)

    def import_legacy(self, *, prefix: str = "kinject-episodes") -> int:
        """Import the episodes of the store used before 0.2 (``<store>/episodes/chroma.sqlite3``).

        Earlier versions kept one Chroma collection per user named
        ``<prefix>-<hash>``; this copies their exchanges and notes (texts,
        dates, threads, ids) into this memory. Idempotent; the old store is
        left as it is, for you to delete.

        Returns:
            How many episodes were imported (0 when there is no old store).
        """
        legacy = self.path / "chroma.sqlite3"
        if not legacy.is_file():
            return 0
        import chromadb

        client = chromadb.PersistentClient(path=str(self.path))
        total = 0
        for collection in client.list_collections():
            name = getattr(collection, "name", collection)
            if not str(name).startswith(f"{prefix}-"):
                continue
            legacy_where: Any = {"rec": {"$in": ["x", "m"]}}
            got = client.get_collection(str(name)).get(where=legacy_where, include=["metadatas"])
            by_user: dict[str, list[EpisodeRecord]] = {}
            for found in got["metadatas"] or []:
                meta: dict[str, Any] = dict(found)
                kind: Literal["memory", "exchange"] = (
                    "memory" if meta.get("kind") == "memory" else "exchange"
                )
                by_user.setdefault(str(meta["user_id"]), []).append(
                    EpisodeRecord(
                        text=str(meta.get("user_message", "")),
                        speaker=None if kind == "memory" else "user",
                        reply=str(meta.get("assistant_reply", "")),
                        reply_speaker="assistant" if meta.get("assistant_reply") else None,
                        thread_id=meta.get("thread_id") or None,
                        episode_id=str(meta["episode_id"]),
                        date=datetime.fromtimestamp(float(meta["ts"]), timezone.utc),
                        kind=kind,
                    )
                )
            for user, records in by_user.items():
                total += len(self.add_episodes(records, user_id=user))
        return total

    def _prepare(self, record: EpisodeRecord, *, user_id: str) -> dict[str, Any] | None:
        """The journal entry of ``record``; with ``context_turn``, the question it answers.

        The context is the previous single turn of the same thread when that
        turn is a question of another speaker ("How was the holiday?" before
        "Just got back from Porto"). The first turn of a thread in this
        process is marked, and its context looked up in the store when it is
        written (``episode_store.with_stored_context``), off the caller's thread.
        """
        key = (user_key(user_id), record.thread_id or "")
        single = record.kind in (None, "turn") and not (record.reply or "").strip()
        with self._previous_lock:
            previous = self._previous.get(key)
            looked_up = self.context_turn and bool(key[1]) and single
            context = question_answered(previous, record.speaker) if looked_up else ""
            entry = prepare(record, user_id=user_id, context=context,
                            speaker_in_text=self.speaker_in_text)  # fmt: skip
            if entry is not None and key[1] and single:
                if looked_up and previous is None:
                    entry["context_from_store"] = True
                if len(self._previous) >= _PREVIOUS_CAP and key not in self._previous:
                    self._previous.pop(next(iter(self._previous)))
                self._previous[key] = (record.speaker or "", str(entry["meta"]["ep_text"]))
            return entry

    def _submit(self, entries: list[dict[str, Any]]) -> None:
        if self._writer is None:
            self._apply(entries)
            return
        seq = self._writer.submit(entries)
        for entry in entries:
            self._last_seq[entry["user"]] = seq

    def _apply(self, entries: Sequence[dict[str, Any]]) -> None:
        by_user: dict[str, dict[str, dict[str, Any]]] = {}
        earlier: dict[tuple[str, str], tuple[str, str]] = {}  # single turns of this batch
        for entry in entries:  # the last write of an episode wins
            entry = with_stored_context(entry, earlier, self.knowledge_base)
            by_user.setdefault(entry["user"], {})[entry["meta"]["ep_id"]] = entry
        kb = self.knowledge_base
        for user, items in by_user.items():
            speakers = {e["meta"].get("ep_speaker") or "" for e in items.values()} - {""}
            self._speakers.setdefault(user, set()).update(speakers)
            kb.add_documents([to_document(e) for e in items.values()], tenant_id=user)
            self._fields.forget(user, items)  # after the write: a search reads them again

    def _wait_for(self, user: str) -> None:
        if self._writer is None:
            return
        seq = max(self._last_seq.get(user, 0), self._writer.replayed)
        if not seq:
            return
        if not self._writer.wait(seq, timeout=self.flush_timeout_s):
            logger.warning("episodic memory: searching without %d pending episodes",
                           self._writer.pending)  # fmt: skip

    def _turn(
        self,
        messages: Sequence[BaseMessage],
        config: RunnableConfig | None,
        user_id: str | None,
        thread_id: str | None,
    ) -> tuple[str, str, str, str | None, str] | None:
        switch = ((config or {}).get("configurable") or {}).get("episodic_record")
        if not (self.auto_record if switch is None else bool(switch)):
            return None
        user_id = user_id or config_user_id(config, key=self.user_id_key)
        thread_id = thread_id or config_user_id(config, key="thread_id")
        clean = strip_injected(messages)
        index = current_user_index(clean)
        if not user_id or index is None:
            return None
        human = clean[index]
        replies = [
            text_of(m) for m in clean[index + 1 :]
            if isinstance(m, AIMessage) and not m.tool_calls and text_of(m)
        ]  # fmt: skip
        user_text = query_text(human)
        if not replies or not user_text:
            return None
        turn = human.id or str(sum(isinstance(m, HumanMessage) for m in clean[: index + 1]))
        return user_text, replies[-1], user_id, thread_id, turn
