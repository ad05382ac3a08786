"""The first step of a turn: its input messages, its query, and the search of every source.

Plain functions over plain data: :func:`coerce_messages` reads the turn's input,
:func:`turn_query` works out what to search for, :func:`retrieve` /
:func:`aretrieve` search the sources side by side and return a
:class:`RetrievalOutcome`. What they need of the settings is named by
:class:`SearchSettings` (``KnowledgeSettings`` has it all).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.messages import BaseMessage, HumanMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue

from langchain_knowledge_inject._store.knowledge_base import MAX_QUERY_CHARS
from langchain_knowledge_inject._turn.query import retrieval_query
from langchain_knowledge_inject._turn.sources import (
    TracedSearch,
    asearch_one,
    merge_results,
    search_one,
)
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    ForkedProcessError,
    RetrievalError,
)

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableConfig

__all__ = [
    "RetrievalOutcome",
    "SearchSettings",
    "aretrieve",
    "asearch_query",
    "coerce_messages",
    "retrieve",
    "search_kwargs",
    "search_query",
    "turn_query",
]

logger = logging.getLogger("langchain_knowledge_inject")


@dataclass
class RetrievalOutcome:
    """What retrieval produced for one turn."""

    query: str | None
    """The query sent to the knowledge base(s); ``None`` when retrieval did not run."""
    documents: list[Document] = field(default_factory=list)
    """Retrieved chunks, best first."""
    error: str | None = None
    """Error text when retrieval failed and ``on_error="degrade"``."""
    query_source: str | None = None
    """How the query was made (``"message"``, ``"heuristic"``, ``"model"``, ``"cache"``)."""


class SearchSettings(Protocol):
    """The settings one retrieval reads (a ``KnowledgeSettings`` has them all)."""

    @property
    def enabled(self) -> bool: ...
    @property
    def query_window(self) -> int: ...
    @property
    def top_k(self) -> int: ...
    @property
    def min_score(self) -> float | None: ...
    @property
    def mode(self) -> str: ...
    @property
    def tenant_id(self) -> str | None: ...
    @property
    def on_error(self) -> str: ...
    @property
    def restricted(self) -> bool: ...


def coerce_messages(value: Any) -> list[BaseMessage]:
    """The turn's input as messages: a list, a ``{"messages": [...]}`` dict, a string, a prompt.

    Raises:
        ConfigurationError: Anything else (``None``, ``[None]``, a dict without ``messages``).
    """
    if isinstance(value, dict):
        if "messages" not in value:
            msg = "a dict input must have a 'messages' key"
            raise ConfigurationError(msg, option="input", value=sorted(value))
        value = value["messages"]
    if isinstance(value, str):
        return [HumanMessage(value)]
    if isinstance(value, PromptValue):
        return value.to_messages()
    try:
        return convert_to_messages(value)
    except (TypeError, ValueError, NotImplementedError) as exc:  # None, [None], ...
        msg = (
            "input must be a list of messages, a {'messages': [...]} dict, a string or a "
            f"PromptValue; got {type(value).__name__} ({exc})"
        )
        raise ConfigurationError(msg, option="input", value=value) from exc


def turn_query(messages: Any, settings: SearchSettings) -> str | None:
    """The turn's retrieval query, cut as the knowledge base cuts it (``None``: no retrieval).

    Cut here too, so that the manifest, the graph state and the custom event
    never carry a megabyte-long message.
    """
    if not settings.enabled:
        return None
    query = retrieval_query(coerce_messages(messages), window=settings.query_window)
    return query[:MAX_QUERY_CHARS] if query is not None else None


def search_kwargs(settings: SearchSettings) -> dict[str, Any]:
    """The search arguments every source gets."""
    return {"k": settings.top_k, "min_score": settings.min_score,
            "mode": settings.mode, "tenant_id": settings.tenant_id}  # fmt: skip


def retrieve(
    searches: Sequence[TracedSearch],
    messages: Any,
    settings: SearchSettings,
    config: RunnableConfig | None = None,
) -> RetrievalOutcome:
    """Search every source with the turn's query, side by side; merge the results.

    Each source's search is a retriever run under ``config`` (its documents are
    visible to callbacks; in restricted mode only their ids and scores).

    Raises:
        RetrievalError: A search failed and ``settings.on_error == "raise"``.
        ConfigurationError: A search was refused for a wrong setting.
    """
    query = turn_query(messages, settings)
    if query is None:
        return RetrievalOutcome(query=None)
    return search_query(searches, query, settings, config)


def search_query(
    searches: Sequence[TracedSearch],
    query: str,
    settings: SearchSettings,
    config: RunnableConfig | None = None,
    *,
    query_source: str | None = None,
) -> RetrievalOutcome:
    """Search every source with ``query`` (worked out beforehand), side by side; merge.

    ``query_source`` (how the query was made) is recorded in the outcome.

    Raises:
        RetrievalError: A search failed and ``settings.on_error == "raise"``.
        ConfigurationError: A search was refused for a wrong setting.
    """
    kwargs, restricted = search_kwargs(settings), bool(settings.restricted)

    def search(traced: TracedSearch) -> list[Document] | Exception:
        try:  # a retriever run under ``config`` (stubs only in restricted mode)
            return search_one(traced, query, kwargs, config=config, restricted=restricted)
        except Exception as exc:  # degraded or raised in _failed
            return exc

    if len(searches) == 1:
        results = [search(searches[0])]
    else:  # side by side: a slow or frozen store does not delay the others
        workers = len(searches)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kinject") as pool:
            results = list(pool.map(search, searches))
    found = [r for r in results if not isinstance(r, Exception)]
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        return _failed(query, failed, settings, found, query_source)
    documents = merge_results(found, settings.top_k)
    return RetrievalOutcome(query=query, documents=documents, query_source=query_source)


async def aretrieve(
    searches: Sequence[TracedSearch],
    messages: Any,
    settings: SearchSettings,
    config: RunnableConfig | None = None,
) -> RetrievalOutcome:
    """Async twin of :func:`retrieve` (uses ``asearch``)."""
    query = turn_query(messages, settings)
    if query is None:
        return RetrievalOutcome(query=None)
    return await asearch_query(searches, query, settings, config)


async def asearch_query(
    searches: Sequence[TracedSearch],
    query: str,
    settings: SearchSettings,
    config: RunnableConfig | None = None,
    *,
    query_source: str | None = None,
) -> RetrievalOutcome:
    """Async twin of :func:`search_query` (uses ``asearch``)."""
    kwargs, restricted = search_kwargs(settings), bool(settings.restricted)
    results = await asyncio.gather(
        *(
            asearch_one(traced, query, kwargs, config=config, restricted=restricted)
            for traced in searches
        ),
        return_exceptions=True,
    )
    found = [r for r in results if not isinstance(r, BaseException)]
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, Exception):
            raise result  # cancellation, KeyboardInterrupt
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        return _failed(query, failed, settings, found, query_source)
    documents = merge_results(found, settings.top_k)
    return RetrievalOutcome(query=query, documents=documents, query_source=query_source)


def _failed(
    query: str,
    failed: Sequence[Exception],
    settings: SearchSettings,
    found: list[list[Document]],
    query_source: str | None = None,
) -> RetrievalOutcome:
    """Raise, or go on with the knowledge bases that answered (``on_error="degrade"``)."""
    for exc in failed:  # a wrong setting or a forked process is the caller's to fix
        if isinstance(exc, (ConfigurationError, ForkedProcessError)):
            raise exc
    exc = failed[0]
    if settings.on_error == "raise":
        if isinstance(exc, RetrievalError):
            raise exc
        msg = f"Knowledge retrieval failed: {exc}"
        raise RetrievalError(msg) from exc
    logger.warning("knowledge retrieval failed, continuing without it: %s", exc)
    return RetrievalOutcome(
        query=query, documents=merge_results(found, settings.top_k) if found else [],
        error=f"{type(exc).__name__}: {exc}", query_source=query_source,
    )  # fmt: skip
