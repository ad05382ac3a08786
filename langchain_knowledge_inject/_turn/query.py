"""History-aware retrieval queries: a follow-up heuristic and an optional condenser model.

"And what about part-timers?" carries almost nothing to search with; the
question it continues does. Two ways to build a standalone query:

:func:`followup_query` (no model, microseconds)
    When the current user message looks like a follow-up
    (:func:`looks_like_follow_up`: short, starting with "and"/"what about",
    a pronoun such as "it" or "there", "too"/"else", few content words), the
    *salient terms* (:func:`salient_terms`: content words, stopwords and
    question words dropped) of the previous user turns are appended to it,
    back to the last turn that did not itself look like a follow-up. A
    self-contained question is searched alone, so a topic switch is not pulled
    back to the old topic.

:class:`QueryCondenser` (a chat model, one call per turn with history)
    The model rewrites the last message into a standalone question from the
    recent conversation, as LangChain's history-aware retriever and
    LlamaIndex's condense-plus-context engine do. The result is cached per
    turn (keyed by the recent history and the message), and any error, empty
    reply or timeout falls back to :func:`followup_query` with a warning on
    the ``langchain_knowledge_inject._turn.query`` logger.

Injected content is stripped (:func:`~langchain_knowledge_inject._turn.placement.strip_injected`)
before either looks at the history. ``benchmarks/followup_query.py`` measures both.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_knowledge_inject._turn.model_call import call_with_timeout
from langchain_knowledge_inject._turn.placement import (
    current_user_index,
    query_text,
    strip_injected,
)
from langchain_knowledge_inject._turn.recent import Recent
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig

logger = logging.getLogger("langchain_knowledge_inject.retrieval_query")

_WORD = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")
FUNCTION_WORDS = frozenset(
    """a about above after again all also am an and any are as at be because been before
    being below between both but by can could did do does doing done during each either else
    few for from further get gets getting give given go going got had has have having he her
    here hers him his how i if in into is it its itself just let many me might more most much must
    my myself no nor not now of off on once one only or other our ours out over own per please
    same she should so some still such tell than thanks that the their theirs them then there
    these they this those through to too under until up us very want was we were what when
    where which while who whom whose why will with within would yes yet you your yours ok okay
    there's what's how's it's i'm i've i'd ll""".split()  # noqa: SIM905
)
"""English function words, question words and pronouns (lowercase): not what a message is about."""
_CONTINUATION = re.compile(
    r"^\W*(?:and|or|but|also|then|so|what about|how about|what if|same for|ok(?:ay)?|"
    r"in that case|if so)\b",
    re.IGNORECASE,
)
_REFERENCE = re.compile(
    r"\b(?:it|its|they|them|their|that|those|these|this|there|then|one|ones|same|such|"
    r"too|else|elsewhere|also|instead|either|former|latter|him|her|he|she)\b",
    re.IGNORECASE,
)
SHORT_MESSAGE_WORDS = 4
"""A message of at most this many words counts as a follow-up."""
REFERENCE_MAX_WORDS = 10
"""A message of at most this many words with a reference word ("it", "there") is a follow-up."""
MAX_TERMS = 12
"""Most salient terms appended from earlier turns."""


def salient_terms(text: str) -> list[str]:
    """The content words of a text, lowercased, in order, without repeats.

    Stopwords, question words and pronouns are dropped (English); numbers stay.

    Example:
        >>> salient_terms("How many days of annual leave do I get after five years?")
        ['days', 'annual', 'leave', 'five', 'years']
    """
    words = (w for w in _WORD.findall(text.lower()) if len(w) > 1 or w.isdigit())
    return list(dict.fromkeys(w for w in words if w not in FUNCTION_WORDS))


def looks_like_follow_up(text: str) -> bool:
    """Whether a user message looks like it continues the previous turn (English).

    True for a message that starts with a continuation ("and", "but", "what about",
    "then", ...), one of at most :data:`SHORT_MESSAGE_WORDS` words with at most one
    content word ("In June?"), or one of at most :data:`REFERENCE_MAX_WORDS` words
    with a word that refers back ("it", "that", "there", "them", "too", "else", ...).
    A short question with a subject of its own ("parking garage?") is not: a topic
    switch is searched alone.

    Example:
        >>> looks_like_follow_up("is all of it paid in full?")
        True
        >>> looks_like_follow_up("What should I do if my laptop is stolen?")
        False
        >>> looks_like_follow_up("parking garage?"), looks_like_follow_up("In June?")
        (False, True)
    """
    words = text.split()
    if _CONTINUATION.match(text):
        return True
    if len(words) <= SHORT_MESSAGE_WORDS and len(salient_terms(text)) <= 1:
        return True  # "In June?", "why?": too little to search with
    return len(words) <= REFERENCE_MAX_WORDS and bool(_REFERENCE.search(text))


def _user_texts(messages: Sequence[BaseMessage]) -> tuple[list[str], str | None]:
    """The texts of the earlier user turns and of the current one (injections stripped)."""
    clean = strip_injected(messages)
    index = current_user_index(clean)
    if index is None:
        return [], None
    earlier = [
        text
        for message in clean[:index]
        if isinstance(message, HumanMessage) and (text := query_text(message))
    ]
    return earlier, query_text(clean[index])


def followup_query(messages: Sequence[BaseMessage], *, max_turns: int = 3) -> str | None:
    """The retrieval query of a turn, with the context a follow-up leaves out.

    A current message that :func:`looks_like_follow_up` gets the
    :func:`salient_terms` of earlier user turns appended (at most
    :data:`MAX_TERMS`, none it already has): the previous turn, and the ones
    before it while they look like follow-ups too, at most ``max_turns``.

    Args:
        messages: The conversation.
        max_turns: Most earlier user turns to take terms from (``0``: the
            current message alone).

    Returns:
        The query, or ``None`` when the current user message has no text.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> followup_query([HumanMessage("What is the meal allowance at home?"),
        ...                 AIMessage("EUR 45."), HumanMessage("and abroad?")])
        'and abroad? meal allowance home'
    """
    if max_turns < 0:
        msg = f"max_turns must be 0 or more, got {max_turns!r}"
        raise ConfigurationError(msg, option="max_turns", value=max_turns)
    earlier, current = _user_texts(messages)
    if current is None or max_turns == 0 or not earlier or not looks_like_follow_up(current):
        return current
    taken: list[str] = []
    for text in reversed(earlier[-max_turns:]):
        taken.insert(0, text)
        if not looks_like_follow_up(text):
            break
    own = set(salient_terms(current))
    nearest_first = (term for text in reversed(taken) for term in salient_terms(text))
    terms = list(dict.fromkeys(t for t in nearest_first if t not in own))[:MAX_TERMS]
    return f"{current} {' '.join(terms)}" if terms else current


CONDENSE_PROMPT = (
    "You rewrite the user's last message as one standalone search query for a knowledge "
    "base. Use the conversation only to fill in what the last message leaves out or refers "
    "to (pronouns, 'and ...?', a missing subject). If the last message is already "
    "self-contained or changes the topic, return it unchanged. Do not answer it, do not add "
    "facts, keep its language. Reply with the query only, on one line."
)
"""The condenser's system prompt."""


@dataclass(frozen=True)
class CondensedQuery:
    """The query of one turn and how it was made.

    Attributes:
        query: The retrieval query, or ``None`` when the current message has no text.
        how: ``"model"`` (the condenser model), ``"cache"`` (a cached model
            answer), ``"heuristic"`` (:func:`followup_query`, after a failure
            or when the model was not needed) or ``"none"`` (no user message).
        model_calls: Model calls made for this query (0 or 1).
        seconds: Time spent in the model call (0 without one).
        error: Why the model's answer was not used, or ``None``.
    """

    query: str | None
    how: Literal["model", "cache", "heuristic", "none"]
    model_calls: int = 0
    seconds: float = 0.0
    error: str | None = None


class QueryCondenser:
    """Rewrites a follow-up into a standalone retrieval query with a chat model.

    Args:
        model: Any chat model; a small, fast one is enough.
        prompt: The system prompt (:data:`CONDENSE_PROMPT`).
        max_turns: Most earlier messages shown to the model (user and assistant).
        max_chars: Each earlier message is clipped to this many characters.
        timeout: Seconds to wait for the model (``None``: no limit); on timeout the
            heuristic query is used.
        only_follow_ups: Call the model only for messages that
            :func:`looks_like_follow_up` (fewer calls); others are searched as they are.
        cache_size: Answers kept (least recently used dropped first); ``0`` disables
            the cache.

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> fake = GenericFakeChatModel(messages=iter([AIMessage("meal allowance abroad")]))
        >>> condenser = QueryCondenser(fake)
        >>> chat = [HumanMessage("Meal allowance at home?"), AIMessage("EUR 45."),
        ...         HumanMessage("and abroad?")]
        >>> result = condenser.condense(chat)
        >>> result.query, result.how, condenser.condense(chat).how
        ('meal allowance abroad', 'model', 'cache')
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        prompt: str = CONDENSE_PROMPT,
        max_turns: int = 6,
        max_chars: int = 500,
        timeout: float | None = 10.0,
        only_follow_ups: bool = False,
        cache_size: int = 256,
    ) -> None:
        if not hasattr(model, "invoke") or not hasattr(model, "ainvoke"):
            msg = f"model must be a chat model (with invoke/ainvoke), got {type(model).__name__}"
            raise ConfigurationError(msg, option="query_model", value=model)
        for name, value, low in (("max_turns", max_turns, 1), ("max_chars", max_chars, 1),
                                 ("cache_size", cache_size, 0)):  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                msg = f"{name} must be an integer >= {low}, got {value!r}"
                raise ConfigurationError(msg, option=name, value=value)
        if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
            msg = f"timeout must be a positive number of seconds or None, got {timeout!r}"
            raise ConfigurationError(msg, option="timeout", value=timeout)
        if not isinstance(prompt, str) or not prompt.strip():
            msg = "prompt must be a non-empty string"
            raise ConfigurationError(msg, option="prompt", value=prompt)
        self.model = model
        self.prompt = prompt
        self.max_turns = max_turns
        self.max_chars = max_chars
        self.timeout = timeout
        self.only_follow_ups = only_follow_ups
        self.cache_size = cache_size
        self._cache = Recent(cache_size)

    # -- the request ----------------------------------------------------------------------
    def _request(
        self, messages: Sequence[BaseMessage]
    ) -> tuple[str | None, str | None, list[BaseMessage] | None]:
        """``(current text, cache key, model request)``; no request when none is needed."""
        clean = strip_injected(messages)
        index = current_user_index(clean)
        if index is None:
            return None, None, None
        current = query_text(clean[index])
        lines = []
        for message in clean[:index]:
            text = query_text(message) if isinstance(message, HumanMessage | AIMessage) else None
            if text and not isinstance(message, SystemMessage):
                role = "User" if isinstance(message, HumanMessage) else "Assistant"
                lines.append(f"{role}: {' '.join(text.split())[: self.max_chars]}")
        lines = lines[-self.max_turns :]
        if current is None or not lines:
            return current, None, None
        if self.only_follow_ups and not looks_like_follow_up(current):
            return current, None, None
        body = "Conversation:\n" + "\n".join(lines) + f"\n\nLast message: {current}"
        key = hashlib.sha256(f"{self.prompt}\x1f{body}".encode()).hexdigest()
        return current, key, [SystemMessage(self.prompt), HumanMessage(body)]

    def _result(
        self, messages: Sequence[BaseMessage], key: str, raw: Any, seconds: float
    ) -> CondensedQuery:
        text = raw.text if isinstance(raw, BaseMessage) else str(raw)
        query = " ".join(text.strip().strip("\"'`").split())
        if not query:
            return self._fallback(messages, "the model returned an empty query", 1, seconds)
        self._cache.put(key, query)
        return CondensedQuery(query, "model", 1, seconds)

    @staticmethod
    def _fallback(
        messages: Sequence[BaseMessage], error: str | None, calls: int, seconds: float
    ) -> CondensedQuery:
        if error is not None:
            logger.warning("query condenser failed (%s); using the follow-up heuristic", error)
        return CondensedQuery(followup_query(messages), "heuristic", calls, seconds, error)

    def _early(
        self, messages: Sequence[BaseMessage]
    ) -> CondensedQuery | tuple[str, list[BaseMessage]]:
        """The answer without a model call (no text, no history, cached), or the request."""
        current, key, request = self._request(messages)
        if current is None:
            return CondensedQuery(None, "none")
        if request is None or key is None:
            return CondensedQuery(followup_query(messages), "heuristic")
        if (hit := self._cache.get(key, None, touch=True)) is not None:
            return CondensedQuery(hit, "cache")
        return key, request

    # -- sync and async -----------------------------------------------------------------
    def condense(
        self, messages: Sequence[BaseMessage], *, config: RunnableConfig | None = None
    ) -> CondensedQuery:
        """The standalone query of the turn (one model call at most; cached).

        Args:
            messages: The conversation (injected content is stripped first).
            config: Passed to the model call (callbacks, tags).

        Returns:
            The query and how it was made; never raises for a model failure.
        """
        early = self._early(messages)
        if isinstance(early, CondensedQuery):
            return early
        key, request = early
        start = time.perf_counter()
        try:
            raw = call_with_timeout(
                lambda: self.model.invoke(request, config=config),
                self.timeout,
                thread_name="kinject-query-condenser",
                waiting_for="the condenser",
            )
        except Exception as exc:
            return self._fallback(messages, _describe(exc), 1, time.perf_counter() - start)
        return self._result(messages, key, raw, time.perf_counter() - start)

    async def acondense(
        self, messages: Sequence[BaseMessage], *, config: RunnableConfig | None = None
    ) -> CondensedQuery:
        """Async twin of :meth:`condense`."""
        early = self._early(messages)
        if isinstance(early, CondensedQuery):
            return early
        key, request = early
        start = time.perf_counter()
        try:
            raw = await asyncio.wait_for(self.model.ainvoke(request, config=config), self.timeout)
        except Exception as exc:
            return self._fallback(messages, _describe(exc), 1, time.perf_counter() - start)
        return self._result(messages, key, raw, time.perf_counter() - start)


def _describe(exc: BaseException) -> str:
    return "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
