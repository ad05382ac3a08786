"""Trimming the conversation history to a token budget (optional, off by default).

A conversation grows without limit; :func:`trim_history` cuts its oldest turns
so that the messages sent to the model fit ``max_tokens``. It is built on
:func:`langchain_core.messages.trim_messages` (``strategy="last"``) and keeps
three things whatever the budget:

- the system prompt: the leading system message(s);
- the current turn: the current user message and everything after it (an
  agent's tool calls and tool results of this turn);
- a valid history: what is kept of the earlier turns starts on a user message,
  so no tool result is left without the call that produced it.

When the system prompt and the current turn alone are over the budget, every
earlier turn is cut and :attr:`TrimmedHistory.over_budget` says so: the
current question is never dropped. The result lists what was cut, for the
turn's manifest (:meth:`TrimmedHistory.to_dict`).

Trim the history as stored, before the knowledge is injected (the injected
message has its own budget, ``max_tokens`` of the injector); an injected
message found in it is counted like any other.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import BaseMessage, SystemMessage, trim_messages

from langchain_knowledge_inject._turn.placement import current_user_index, query_text
from langchain_knowledge_inject._turn.tokens import TokenCounter, approximate_token_count
from langchain_knowledge_inject.errors import ConfigurationError

logger = logging.getLogger("langchain_knowledge_inject.history")

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens added per message by a text counter, for the role and the chat-template framing."""


@dataclass(frozen=True)
class TrimmedHistory:
    """What :func:`trim_history` kept and cut.

    Attributes:
        messages: The messages to send, in order (the input when nothing was cut).
        removed: The messages cut, oldest first.
        tokens_before: Tokens of the input messages.
        tokens_after: Tokens of :attr:`messages`.
        max_tokens: The budget, or ``None`` when trimming is off.
    """

    messages: list[BaseMessage]
    removed: list[BaseMessage] = field(default_factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    max_tokens: int | None = None

    @property
    def trimmed(self) -> bool:
        """Whether any message was cut."""
        return bool(self.removed)

    @property
    def over_budget(self) -> bool:
        """Whether the kept messages (system prompt and current turn) exceed the budget."""
        return self.max_tokens is not None and self.tokens_after > self.max_tokens

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable summary for a turn's manifest.

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> TrimmedHistory([HumanMessage("hi")]).to_dict()["messages_removed"]
            0
        """
        return {
            "max_tokens": self.max_tokens,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "messages_removed": len(self.removed),
            "removed_ids": [m.id for m in self.removed if m.id],
            "removed_types": [m.type for m in self.removed],
            "over_budget": self.over_budget,
        }


def trim_history(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int | None = None,
    token_counter: TokenCounter | BaseLanguageModel[Any] = approximate_token_count,
) -> TrimmedHistory:
    """Cut the oldest turns so that ``messages`` fit ``max_tokens``.

    Args:
        messages: The conversation: system prompt, history, current user message
            (and, inside an agent's tool loop, this turn's tool calls and results).
        max_tokens: The budget of all messages together; ``None`` (the default)
            switches trimming off and returns the messages unchanged.
        token_counter: Counts tokens: a text counter (``str -> int``, like the
            package's other budgets; :data:`MESSAGE_OVERHEAD_TOKENS` is added per
            message) or a chat model (its ``get_num_tokens_from_messages``).

    Returns:
        The kept messages, what was cut and the token counts.

    Raises:
        ConfigurationError: ``max_tokens`` is not a positive integer or ``None``,
            or ``token_counter`` is neither a text counter nor a language model.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
        >>> chat = [SystemMessage("You are HR."), HumanMessage("Leave? " * 30),
        ...         AIMessage("25 days. " * 30), HumanMessage("And sick leave?")]
        >>> result = trim_history(chat, max_tokens=40)
        >>> [m.type for m in result.messages], len(result.removed)
        (['system', 'human'], 2)
    """
    _check(max_tokens, token_counter)
    count = _list_counter(token_counter)
    messages = list(messages)
    before = count(messages) if messages else 0
    if max_tokens is None or before <= max_tokens:
        return TrimmedHistory(messages, [], before, before, max_tokens)
    current = current_user_index(messages)
    if current is None:  # no current turn to anchor the history on: leave it whole
        logger.warning(
            "history over max_tokens=%d but has no user message; not trimmed", max_tokens
        )
        return TrimmedHistory(messages, [], before, before, max_tokens)
    lead = 0
    while lead < current and isinstance(messages[lead], SystemMessage):
        lead += 1
    system, history, turn = messages[:lead], messages[lead:current], messages[current:]
    room = max_tokens - count([*system, *turn])
    kept = _keep_last(history, room, count) if room > 0 else []
    removed = history[: len(history) - len(kept)]
    result = [*system, *kept, *turn]
    after = count(result)
    if after > max_tokens:
        logger.warning(
            "system prompt and current turn use %d tokens > max_tokens=%d; kept them whole",
            after,
            max_tokens,
        )
    return TrimmedHistory(result, removed, before, after, max_tokens)


def _keep_last(history: list[BaseMessage], room: int, count: Any) -> list[BaseMessage]:
    """The newest messages of ``history`` within ``room`` tokens, starting on a user message."""
    kept = trim_messages(
        history,
        max_tokens=room,
        token_counter=count,
        strategy="last",
        start_on="human",
        allow_partial=False,
    )
    # trim_messages keeps a suffix; align on identity so ``removed`` is exact
    tail = history[len(history) - len(kept) :] if kept else []
    if [m.id for m in tail] != [m.id for m in kept] or [m.content for m in tail] != [
        m.content for m in kept
    ]:  # pragma: no cover - a change of trim_messages' contract
        msg = "trim_messages did not keep a suffix of the history"
        raise RuntimeError(msg)
    return tail


def _check(max_tokens: Any, token_counter: Any) -> None:
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        msg = f"max_tokens must be a positive integer or None (no trimming), got {max_tokens!r}"
        raise ConfigurationError(msg, option="max_tokens", value=max_tokens)
    if not (isinstance(token_counter, BaseLanguageModel) or callable(token_counter)):
        msg = (
            "token_counter must be a text counter (str -> int) or a language model, "
            f"got {type(token_counter).__name__}"
        )
        raise ConfigurationError(msg, option="token_counter", value=token_counter)


def _list_counter(token_counter: TokenCounter | BaseLanguageModel[Any]) -> Any:
    """A ``list[BaseMessage] -> int`` counter, the form ``trim_messages`` accepts."""
    if isinstance(token_counter, BaseLanguageModel):
        model = token_counter

        def count_with_model(messages: list[BaseMessage]) -> int:
            return model.get_num_tokens_from_messages(messages) if messages else 0

        return count_with_model
    text_counter = token_counter

    def count_text(messages: list[BaseMessage]) -> int:
        return sum(text_counter(_message_text(m)) + MESSAGE_OVERHEAD_TOKENS for m in messages)

    return count_text


def _message_text(message: BaseMessage) -> str:
    """The text a model reads of a message: its text parts and its tool calls."""
    text = query_text(message) or ""
    calls = getattr(message, "tool_calls", None)
    if calls:
        text += "\n" + json.dumps([{"name": c["name"], "args": c["args"]} for c in calls])
    return text
