"""What a turn does to the conversation around the knowledge: query, history, datetime suffix.

Plain functions shared by every surface through the pipeline: :func:`query_for` (the
retrieval query: the current message, the follow-up heuristic of ``query_window`` or
the ``query_model`` condenser, with how it was made) and :func:`shape_turn` (history
trimmed under ``history_max_tokens``, the knowledge placed, Wegent's datetime suffix,
in that order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from langchain_knowledge_inject._store.knowledge_base import MAX_QUERY_CHARS
from langchain_knowledge_inject._turn.history import TrimmedHistory, trim_history
from langchain_knowledge_inject._turn.placement import (
    Placement,
    append_suffix,
    current_user_index,
    place_context,
    query_text,
    strip_injected,
)
from langchain_knowledge_inject._turn.query import followup_query
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from langchain_knowledge_inject._turn.tokens import TokenCounter

_NOSTREAM = "nostream"  # LangGraph's tag: the condenser's tokens never reach stream_mode="messages"


@dataclass(frozen=True)
class TurnQuery:
    """The retrieval query of a turn and how it was made.

    Attributes:
        query: The query, or ``None`` (no user text).
        source: ``"message"``, ``"heuristic"``, ``"model"``, ``"cache"`` or ``None``.
        model_calls: Query-model calls made (0 or 1).
        seconds: Time spent in the query model.
        error: Why the query model was not used (its fallback), else ``None``.
    """

    query: str | None
    source: str | None
    model_calls: int = 0
    seconds: float = 0.0
    error: str | None = None


def _quiet(config: RunnableConfig | None) -> RunnableConfig:
    """``config`` with the ``nostream`` tag: the condenser's reply is not the answer."""
    base: dict[str, Any] = dict(config or {})
    base["tags"] = [*(base.get("tags") or []), _NOSTREAM]
    return base  # type: ignore[return-value]


def _plan(messages: Sequence[BaseMessage], settings: Any, headers: Sequence[str]) -> Any:
    """The clean history and the condenser, or the finished query when no model is asked."""
    if not settings.enabled:
        return TurnQuery(None, None), None, None
    clean = strip_injected(messages, headers=headers)
    condenser = settings.query_model if settings.retrieval != "tool" else None
    if condenser is not None:
        return None, clean, condenser
    index = current_user_index(clean)
    current = query_text(clean[index]) if index is not None else None
    window = settings.query_window if settings.retrieval != "tool" else 0  # tool: no search
    query = followup_query(clean, max_turns=window) if window > 0 else current
    if query is None:
        return TurnQuery(None, None), None, None
    return _cut(TurnQuery(query, "message" if query == current else "heuristic")), None, None


def _condensed(result: Any) -> TurnQuery:
    source = {"none": None}.get(result.how, result.how)
    return _cut(TurnQuery(result.query, source, result.model_calls, result.seconds, result.error))


def _cut(how: TurnQuery) -> TurnQuery:
    """Cut as the knowledge base cuts it: state, manifest and events stay small."""
    if how.query is None or len(how.query) <= MAX_QUERY_CHARS:
        return how
    return TurnQuery(how.query[:MAX_QUERY_CHARS], how.source, how.model_calls, how.seconds,
                     how.error)  # fmt: skip


def query_for(
    messages: Sequence[BaseMessage],
    settings: Any,
    *,
    config: RunnableConfig | None = None,
    headers: Sequence[str] = (),
) -> TurnQuery:
    """The query of a turn under its settings; ``TurnQuery(None, None)`` when switched off.

    Reads ``enabled``, ``retrieval``, ``query_window`` and ``query_model`` of a
    ``KnowledgeSettings``. Injected content (``headers``: a custom template's) is
    stripped first. With a ``query_model`` the model rewrites a follow-up into a
    standalone question (cached; any failure falls back to the heuristic); else
    ``query_window > 0`` adds the salient terms of earlier turns to a follow-up. A
    tool-driven turn searches nothing: its query (for the blocks) is the message.
    The query is cut to what a knowledge base searches.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_knowledge_inject.settings import KnowledgeSettings
        >>> chat = [HumanMessage("Meal allowance at home?"), AIMessage("EUR 45."),
        ...         HumanMessage("and abroad?")]
        >>> query_for(chat, KnowledgeSettings(query_window=0)).source
        'message'
        >>> query_for(chat, KnowledgeSettings()).source
        'heuristic'
    """
    done, clean, condenser = _plan(messages, settings, headers)
    if done is not None:
        return done
    return _condensed(condenser.condense(clean, config=_quiet(config)))


async def aquery_for(
    messages: Sequence[BaseMessage],
    settings: Any,
    *,
    config: RunnableConfig | None = None,
    headers: Sequence[str] = (),
) -> TurnQuery:
    """Async twin of :func:`query_for`."""
    done, clean, condenser = _plan(messages, settings, headers)
    if done is not None:
        return done
    return _condensed(await condenser.acondense(clean, config=_quiet(config)))


def turn_clock(config: RunnableConfig | None) -> datetime:
    """The turn's time: ``configurable["now"]`` (an aware ``datetime``) or now, UTC.

    Raises:
        ConfigurationError: ``configurable["now"]`` is not a timezone-aware ``datetime``.
    """
    now = ((config or {}).get("configurable") or {}).get("now")
    if now is None:
        return datetime.now(timezone.utc)
    if not isinstance(now, datetime) or now.tzinfo is None:
        msg = f"configurable['now'] must be a timezone-aware datetime, got {now!r}"
        raise ConfigurationError(msg, option="now", value=now)
    return now


def shape_turn(
    messages: Sequence[BaseMessage],
    context: str | None,
    *,
    placement: Placement,
    history_max_tokens: int | None = None,
    datetime_suffix: str | None = None,
    token_counter: TokenCounter,
    now: datetime | None = None,
) -> tuple[list[BaseMessage], TrimmedHistory | None]:
    """The messages the model receives: history trimmed, context placed, datetime suffix.

    The one order every surface follows: the injection-free conversation trimmed
    (the system prompt and the current turn are kept), then ``context`` placed at
    ``placement``, then the datetime suffix on the current user message (marked like
    a postfix, so ``strip_injected`` restores the message exactly).

    Args:
        messages: The conversation without injection (system prompt included).
        context: The injected text, or ``None``.
        placement: Where ``context`` goes.
        history_max_tokens: The history budget (``None``: no trimming).
        datetime_suffix: A ``strftime`` format for the suffix (``None``: none).
        token_counter: Counts tokens of a text.
        now: The turn's time (:func:`turn_clock`); needed with ``datetime_suffix``.

    Returns:
        The messages, and the trimming report (``None`` when trimming is off).
    """
    trimmed = None
    if history_max_tokens is not None:
        trimmed = trim_history(messages, max_tokens=history_max_tokens, token_counter=token_counter)
    base = trimmed.messages if trimmed is not None else list(messages)
    out = place_context(base, context, placement=placement) if context else base
    if datetime_suffix:
        out = append_suffix(out, (now or datetime.now(timezone.utc)).strftime(datetime_suffix))
    return out, trimmed
