"""What a turn does to the conversation around the knowledge: query, history, datetime suffix.

Plain functions shared by every surface (the injector, the graph, the node, the
agent middleware); each takes the values of the turn's settings, not the
settings object (``turn/`` sits below ``settings.py``):

- :func:`turn_query` / :func:`aturn_query`: the retrieval query of the turn: the
  current message, the follow-up heuristic (``query_window``) or a
  :class:`~langchain_knowledge_inject._turn.query.QueryCondenser` (``query_model``),
  with how it was made, for the manifest and the turn's log line.
- :func:`trim_turn_history`: the messages to send under ``history_max_tokens``
  (:func:`~langchain_knowledge_inject._turn.history.trim_history`), with the report.
- :func:`add_datetime_suffix`: Wegent's datetime suffix on the current user
  message, marked as injected so :func:`~langchain_knowledge_inject._turn.placement.strip_injected`
  removes it on the next turn.
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

    from langchain_knowledge_inject._turn.query import QueryCondenser
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


def _plain(messages: Sequence[BaseMessage], window: int) -> TurnQuery:
    index = current_user_index(messages)
    current = query_text(messages[index]) if index is not None else None
    query = followup_query(messages, max_turns=window) if window > 0 else current
    if query is None:
        return TurnQuery(None, None)
    return TurnQuery(query, "message" if query == current else "heuristic")


def _quiet(config: RunnableConfig | None) -> RunnableConfig:
    """``config`` with the ``nostream`` tag: the condenser's reply is not the answer."""
    base: dict[str, Any] = dict(config or {})
    base["tags"] = [*(base.get("tags") or []), _NOSTREAM]
    return base  # type: ignore[return-value]


def _condensed(result: Any) -> TurnQuery:
    source = {"none": None}.get(result.how, result.how)
    return TurnQuery(result.query, source, result.model_calls, result.seconds, result.error)


def turn_query(
    messages: Sequence[BaseMessage],
    *,
    window: int = 0,
    condenser: QueryCondenser | None = None,
    config: RunnableConfig | None = None,
) -> TurnQuery:
    """The retrieval query of a turn (``messages``: the history without injection).

    With a ``condenser`` (the ``query_model`` setting) the model rewrites a follow-up
    into a standalone question (cached; any failure falls back to the heuristic).
    Without one, ``window > 0`` adds the salient terms of earlier turns to a
    follow-up, and ``window == 0`` searches the current message alone.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> chat = [HumanMessage("Meal allowance at home?"), AIMessage("EUR 45."),
        ...         HumanMessage("and abroad?")]
        >>> turn_query(chat).source, turn_query(chat, window=1).source
        ('message', 'heuristic')
    """
    if condenser is None:
        return _plain(messages, window)
    return _condensed(condenser.condense(messages, config=_quiet(config)))


async def aturn_query(
    messages: Sequence[BaseMessage],
    *,
    window: int = 0,
    condenser: QueryCondenser | None = None,
    config: RunnableConfig | None = None,
) -> TurnQuery:
    """Async twin of :func:`turn_query`."""
    if condenser is None:
        return _plain(messages, window)
    return _condensed(await condenser.acondense(messages, config=_quiet(config)))


def _options(settings: Any) -> dict[str, Any]:
    """Tool-driven turns search nothing: their query (for the blocks) is the message."""
    if settings.retrieval == "tool":
        return {"window": 0, "condenser": None}
    return {"window": settings.query_window, "condenser": settings.query_model}


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
    stripped first; the query is cut to what a knowledge base searches.
    """
    if not settings.enabled:
        return TurnQuery(None, None)
    clean = strip_injected(messages, headers=headers)
    return _cut(turn_query(clean, config=config, **_options(settings)))


async def aquery_for(
    messages: Sequence[BaseMessage],
    settings: Any,
    *,
    config: RunnableConfig | None = None,
    headers: Sequence[str] = (),
) -> TurnQuery:
    """Async twin of :func:`query_for`."""
    if not settings.enabled:
        return TurnQuery(None, None)
    clean = strip_injected(messages, headers=headers)
    return _cut(await aturn_query(clean, config=config, **_options(settings)))


def trim_turn_history(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int | None,
    token_counter: TokenCounter,
) -> TrimmedHistory | None:
    """The history under ``max_tokens`` (``None``: trimming off, returns ``None``).

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> chat = [HumanMessage("a " * 50), AIMessage("b " * 50), HumanMessage("next?")]
        >>> trimmed = trim_turn_history(chat, max_tokens=20, token_counter=len)
        >>> [m.type for m in trimmed.messages], trimmed.to_dict()["messages_removed"]
        (['human'], 2)
    """
    if max_tokens is None:
        return None
    return trim_history(messages, max_tokens=max_tokens, token_counter=token_counter)


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


def add_datetime_suffix(
    messages: Sequence[BaseMessage], fmt: str | None, *, now: datetime
) -> list[BaseMessage]:
    r"""``messages`` with ``now`` formatted by ``fmt`` appended to the current user message.

    The suffix is marked like a postfix (merged with one already there), so
    :func:`~langchain_knowledge_inject._turn.placement.strip_injected` restores the
    message exactly. ``fmt=None`` or no user message: the messages unchanged.

    Example:
        >>> from datetime import datetime, timezone
        >>> from langchain_core.messages import HumanMessage
        >>> out = add_datetime_suffix([HumanMessage("Hi")], "\n\n[Time: %Y-%m-%d]",
        ...                           now=datetime(2025, 3, 14, tzinfo=timezone.utc))
        >>> out[0].content
        'Hi\n\n[Time: 2025-03-14]'
    """
    if not fmt:
        return list(messages)
    return append_suffix(messages, now.strftime(fmt))


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

    The one order every surface follows: :func:`trim_turn_history` on the
    injection-free conversation (the system prompt and the current turn are
    kept), then ``context`` placed at ``placement``, then the datetime suffix on
    the current user message.

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
    trimmed = trim_turn_history(
        messages, max_tokens=history_max_tokens, token_counter=token_counter
    )
    base = trimmed.messages if trimmed is not None else list(messages)
    out = place_context(base, context, placement=placement) if context else base
    if datetime_suffix:
        out = add_datetime_suffix(out, datetime_suffix, now=now or datetime.now(timezone.utc))
    return out, trimmed
