"""Episodes as knowledge-base chunks: what is recorded and how it comes back.

An episode is one chunk in its user's tenant partition, with ``source`` = its
episode id (recording the same id again replaces it). The chunk text is what a
search matches: the text, an exchange's reply on a second line, and the
question the episode answers on a last line (:func:`question_answered`:
"Just got back from Porto" is found by "Where did you go on holiday?"); a
search returns the text alone. Each statement of a turn (a sentence that is
not a question, :func:`statements`) is also indexed alone, in a partition of
its own (:func:`statements_partition`), so that "I'm doing kickboxing" is
matched by itself and not through the chat around it. Speaker names are
metadata, not text (in the text, "Rosa: ok!" would match every question
naming her). The memory's own metadata keys start with ``ep_``; the caller's
are kept as given.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_knowledge_inject._memory import require, user_key
from langchain_knowledge_inject._turn.placement import (
    current_user_index,
    query_text,
    strip_injected,
)
from langchain_knowledge_inject.errors import ConfigurationError

EpisodeKind = Literal["exchange", "turn", "memory"]
_KINDS = ("exchange", "turn", "memory")
_KB_KEYS = frozenset(
    {"source", "tenant_id", "chunk_id", "chunk_index", "score", "kb_name", "kb_id"}
)
_PREFIX = "ep_"

Entry = dict[str, Any]
"""A prepared episode: ``{"user", "text" (indexed), "meta"}``, one journal line."""


@dataclass(frozen=True)
class Episode:
    """A recalled episode: one turn, one exchange or one saved note.

    Attributes:
        episode_id: The id given when it was recorded (or a derived one).
        kind: ``"exchange"`` (a message and its reply), ``"turn"`` (one speaker's
            message) or ``"memory"`` (a note saved with ``store_memory``).
        user_message: The text (the first speaker's message, or the note).
        assistant_reply: The reply of an exchange (empty otherwise).
        date: When it was said (UTC).
        user_id: Whose memory it is.
        thread_id: The conversation it came from, if known.
        similarity: The hybrid score for the query, in [0, 1].
        score: The ranking key: ``similarity`` plus the statement, recency, date,
            speaker and session bonuses.
        speaker: Who said ``user_message`` (``"user"`` for a recorded turn).
        reply_speaker: Who said ``assistant_reply``.
        turn: The turn number or id given when recorded, if any.
        metadata: The caller's own metadata, as given.
    """

    episode_id: str
    kind: EpisodeKind
    user_message: str
    assistant_reply: str
    date: datetime
    user_id: str
    thread_id: str | None = None
    similarity: float = 0.0
    score: float = 0.0
    speaker: str | None = None
    reply_speaker: str | None = None
    turn: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The episode's text (same as ``user_message``)."""
        return self.user_message


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode to write (the fields of :meth:`EpisodicMemory.record`).

    Attributes:
        text: What was said (or the note).
        speaker: Who said it (``"Alice"``, ``"user"``...), or ``None``.
        reply: A reply, making it an exchange.
        reply_speaker: Who replied.
        thread_id: The conversation (session) it belongs to.
        episode_id: Your id for it, returned by searches; derived when ``None``.
        turn: A turn number or id, kept and returned.
        date: When it was said (default: now).
        metadata: Your own metadata (scalar values), kept and returned.
        kind: ``"turn"``, ``"exchange"`` or ``"memory"`` (default: ``"exchange"``
            with a reply, else ``"turn"``).
    """

    text: str
    speaker: str | None = None
    reply: str = ""
    reply_speaker: str | None = None
    thread_id: str | None = None
    episode_id: str | None = None
    turn: str | int | None = None
    date: datetime | None = None
    metadata: Mapping[str, Any] | None = None
    kind: EpisodeKind | None = None


def utc(date: datetime, option: str = "date") -> datetime:
    """``date`` in UTC; a naive datetime is taken as UTC."""
    if not isinstance(date, datetime):
        msg = f"{option} must be a datetime, got {type(date).__name__}"
        raise ConfigurationError(msg, option=option, value=date)
    return (date if date.tzinfo else date.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)


def _check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    reserved = f"not starting with {_PREFIX!r} and not one of {', '.join(sorted(_KB_KEYS))}"
    for key, value in (metadata or {}).items():
        ok = isinstance(key, str) and not key.startswith(_PREFIX) and key not in _KB_KEYS
        require([
            ("metadata", key, ok, f"a mapping of string keys {reserved}"),
            ("metadata", value, isinstance(value, (str, int, float, bool, type(None))),
             "a mapping to str, int, float or bool values"),
        ])  # fmt: skip
    return {key: value for key, value in (metadata or {}).items() if value is not None}


_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])\s+|\n+")


def statements(text: str) -> list[str]:
    """The sentences of ``text`` that are not questions: what it tells.

    Example:
        >>> statements("Wow, nice! I'm doing kickboxing now. Have you tried it?")
        ['Wow, nice!', "I'm doing kickboxing now."]
    """
    return [s for s in map(str.strip, _SENTENCE_END.split(text)) if s and not s.endswith("?")]


def statements_partition(user: str) -> str:
    """The tenant partition of ``user``'s statements.

    The user key after a unit separator: no user key starts with one
    (:func:`~langchain_knowledge_inject._memory.user_key` strips it), so no
    user's episodes can share it.
    """
    return f"\x1f{user}"


def question_answered(previous: tuple[str, str] | None, speaker: str) -> str:
    """What the previous turn ``(speaker, text)`` ends by asking, if another speaker said it.

    Its last sentences that end with ``?``; an unknown speaker counts as another.

    Example:
        >>> question_answered(("Ben", "Nice pic! Where was it? Was it cold?"), "Ana")
        'Where was it? Was it cold?'
        >>> question_answered(("Ana", "Where was it?"), "Ana")
        ''
    """
    if previous is None or (previous[0] and previous[0] == speaker):
        return ""
    text = previous[1].strip()
    if not text.endswith("?"):
        return ""
    sentences = _SENTENCE_END.split(text)
    start = len(sentences)
    while start and sentences[start - 1].rstrip().endswith("?"):
        start -= 1
    return " ".join(" ".join(sentences[start:]).split())


def prepare(record: EpisodeRecord, *, user_id: str) -> Entry | None:
    """The journal entry of one episode (``None`` for an empty text).

    Raises:
        ConfigurationError: A field has a value that is not allowed.
    """
    text, reply = (record.text or "").strip(), (record.reply or "").strip()
    if not text:
        return None
    user = user_key(user_id)
    kind = record.kind or ("exchange" if reply else "turn")
    if kind not in _KINDS:
        msg = f"kind must be one of {', '.join(_KINDS)}; got {kind!r}"
        raise ConfigurationError(msg, option="kind", value=kind)
    date = datetime.now(timezone.utc) if record.date is None else utc(record.date)
    turn = "" if record.turn is None else str(record.turn)
    episode_id = record.episode_id
    if episode_id is None:
        parts = [kind, user, record.thread_id or "", turn, record.speaker or "", text, reply]
        episode_id = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]
    elif not isinstance(episode_id, str) or not episode_id.strip():
        msg = f"episode_id must be a non-empty string or None, got {episode_id!r}"
        raise ConfigurationError(msg, option="episode_id", value=episode_id)
    own = {
        "ep_id": episode_id, "ep_kind": kind, "ep_ts": date.timestamp(),
        "ep_thread": record.thread_id or "", "ep_speaker": record.speaker or "",
        "ep_reply_speaker": record.reply_speaker or "", "ep_text": text, "ep_reply": reply,
        "ep_turn": turn,
    }  # fmt: skip
    meta = {**_check_metadata(record.metadata), **own, "source": episode_id}
    return {"user": user, "text": f"{text}\n{reply}" if reply else text, "meta": meta}


def to_document(entry: Entry) -> Document:
    """A journal entry as the knowledge-base document to write."""
    return Document(page_content=entry["text"], metadata=dict(entry["meta"]))


def statement_documents(entry: Entry) -> list[Document]:
    """The statements of a journal entry's turn, one document each.

    Only a single turn is split: in an exchange or a note the people's names
    are not known, and a question naming them matches every sentence that
    greets them ("Thanks, Ana!"); a search reads the statements of turns only.
    Each document has the episode id as its ``source``, so writing them
    replaces the turn's earlier statements; a turn that states nothing gets one
    empty document, which writes nothing and removes the earlier ones.
    """
    meta = entry["meta"]
    if meta["ep_kind"] != "turn":
        return []
    own = {"source": meta["ep_id"], "ep_id": meta["ep_id"], "ep_ts": meta["ep_ts"]}
    said = dict.fromkeys(statements(meta["ep_text"])) or [""]
    return [Document(page_content=text, metadata=dict(own)) for text in said]


def from_document(doc: Document, *, user_id: str, score: float, similarity: float) -> Episode:
    """A knowledge-base chunk as an :class:`Episode`."""
    meta = doc.metadata
    return Episode(
        episode_id=str(meta["ep_id"]),
        kind=meta.get("ep_kind", "turn"),
        user_message=meta.get("ep_text", doc.page_content),
        assistant_reply=meta.get("ep_reply", ""),
        date=datetime.fromtimestamp(float(meta["ep_ts"]), timezone.utc),
        user_id=user_id,
        thread_id=meta.get("ep_thread") or None,
        similarity=round(similarity, 6),
        score=round(score, 6),
        speaker=meta.get("ep_speaker") or None,
        reply_speaker=meta.get("ep_reply_speaker") or None,
        turn=meta.get("ep_turn") or None,
        metadata={k: v for k, v in meta.items() if not k.startswith(_PREFIX) and k not in _KB_KEYS},
    )


def finished_turn(messages: Sequence[BaseMessage]) -> tuple[str, str, str] | None:
    """The finished turn at the end of ``messages``: ``(user text, final reply, turn id)``.

    The current user message and the last text reply after it that is not a
    tool call, injections stripped (``None`` without one); the turn id is the
    message's id, else its position among user messages.
    """
    clean = strip_injected(messages)
    index = current_user_index(clean)
    if index is None:
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
    return user_text, replies[-1], turn


def visible_texts(messages: Sequence[BaseMessage]) -> frozenset[str]:
    """The texts of the visible history and its tool-call arguments (a ``store_memory`` note)."""
    clean = strip_injected(messages)
    args = [a for m in clean if isinstance(m, AIMessage) for c in m.tool_calls
            for a in c["args"].values() if isinstance(a, str)]  # fmt: skip
    return frozenset(norm(t) for t in [*map(text_of, clean), *args] if t)


def is_visible(episode: Episode, visible: frozenset[str]) -> bool:
    """Whether ``episode`` (its text, and its reply if any) is already in ``visible``."""
    reply = norm(episode.assistant_reply)
    return norm(episode.user_message) in visible and (not reply or reply in visible)


def text_of(message: BaseMessage) -> str:
    """The text of a message (text parts of multimodal content), or ``""``."""
    return query_text(message) or ""


def norm(text: str) -> str:
    """Lowercase with whitespace collapsed, for comparing texts."""
    return " ".join(text.lower().split())
