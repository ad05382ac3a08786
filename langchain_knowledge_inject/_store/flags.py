"""A knowledge base's settings and restriction flags, kept in its Chroma collections' metadata.

Chroma is the one record: the settings live in the collection metadata of every
partition collection of the knowledge base, under keys prefixed ``kinject:``
(:data:`KEYS`), so any process, any wrapper and a plain ``langchain_chroma.Chroma``
opened on a collection see them (``read_flags(store._collection.metadata)``).

Restricted knowledge is read raw only by its owner (``kb.search``) and inside
:func:`raw_access`, the one context of all work on raw text of a restricted turn
(:func:`inside`: a source's search and its keyword rebuild, the reranker, the
summarizer). Everything else derived from a restricted knowledge base
(``kb.as_retriever()``, ``kb.vectorstore()``) calls :func:`check_raw_read`, which
raises :class:`~langchain_knowledge_inject.errors.RestrictedKnowledgeError`.

Example:
    >>> flags = read_flags({"kinject:restricted": True, "kinject:routing_keywords": '["pay"]'})
    >>> flags.restricted, flags.sensitive_sources, flags.routing_keywords
    (True, False, ('pay',))
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_knowledge_inject.errors import (
    ConfigurationError,
    ForkedProcessError,
    RestrictedKnowledgeError,
)

T = TypeVar("T")

PREFIX = "kinject:"
"""Prefix of the package's keys in collection metadata."""
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
"""The ``model`` setting of a knowledge base embedded with the default model."""
FORMAT = 2
"""The store format written by this version (1: the SQLite catalog and record collection)."""

KEYS = (
    "kb",
    "kb_id",
    "partition",
    "format",
    "model",
    "description",
    "topics",
    "restricted",
    "sensitive_sources",
    "routing_hint",
    "routing_keywords",
    "key_id",
)
"""The settings kept in every partition collection's metadata (prefixed with :data:`PREFIX`)."""
_LISTS = ("topics", "routing_keywords")  # stored as JSON strings: metadata values are scalars
FLAGS = ("restricted", "sensitive_sources")
"""The boolean restriction flags: only ``unrestrict()`` turns them off."""


@dataclass(frozen=True)
class RestrictionFlags:
    """A knowledge base's restriction flags (``kb.restriction``; ``KnowledgeBase(restricted=)``)."""

    restricted: bool = False
    """Whether restricted mode is on for this knowledge base."""
    sensitive_sources: bool = False
    """Whether source names must be hidden from the main model in restricted mode."""
    routing_hint: str = ""
    """Restricted mode: one line telling the main model what to ask this knowledge base."""
    routing_keywords: tuple[str, ...] = ()
    """Restricted mode: keywords that route questions to this knowledge base."""

    def __post_init__(self) -> None:
        keywords = self.routing_keywords
        for option, ok in (
            ("restricted", isinstance(self.restricted, bool)),
            ("sensitive_sources", isinstance(self.sensitive_sources, bool)),
            ("routing_hint", isinstance(self.routing_hint, str)),
            ("routing_keywords", isinstance(keywords, (list, tuple))
             and all(isinstance(k, str) for k in keywords)),
        ):  # fmt: skip
            if not ok:
                msg = (
                    f"RestrictionFlags: {option}={getattr(self, option)!r}; the flags are True or "
                    "False, routing_hint a string, routing_keywords a list of strings"
                )
                raise ConfigurationError(msg, option=option, value=getattr(self, option))
        object.__setattr__(self, "routing_keywords", tuple(keywords))

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> RestrictionFlags:
        """The flags among settings read by :func:`read_settings`."""
        return cls(
            restricted=settings["restricted"],
            sensitive_sources=settings["sensitive_sources"],
            routing_hint=settings["routing_hint"],
            routing_keywords=tuple(settings["routing_keywords"]),
        )


def _flag(value: Any) -> bool:
    """A stored flag: off only when absent or exactly False (anything unreadable is on)."""
    return value is not None and value is not False


def read_settings(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The package's settings in a collection's metadata, by key of :data:`KEYS`."""
    meta = metadata or {}
    out: dict[str, Any] = {}
    for key in KEYS:
        value = meta.get(PREFIX + key)
        if key in FLAGS:
            out[key] = _flag(value)
        elif key in _LISTS:
            try:
                out[key] = [str(v) for v in json.loads(value)] if value else []
            except (TypeError, ValueError):
                out[key] = []
        elif key == "format":
            out[key] = value if isinstance(value, int) else 0
        else:
            out[key] = "" if value is None else str(value)
    out["restricted"] = out["restricted"] or bool(out["key_id"])  # its text sealed: restricted
    return out


def read_flags(metadata: Mapping[str, Any] | None) -> RestrictionFlags:
    """The restriction flags in a Chroma collection's metadata.

    Works on any collection: a knowledge base's partition, or the collection
    behind a plain ``langchain_chroma.Chroma`` (``store._collection.metadata``);
    one without the package's keys is unrestricted. A flag whose value is not
    exactly ``False`` counts as on.
    """
    return RestrictionFlags.of(read_settings(metadata))


def settings_metadata(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Collection metadata holding ``settings`` (keys of :data:`KEYS`; lists as JSON)."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key not in KEYS:
            continue
        if key in _LISTS:
            value = json.dumps([str(v) for v in value or []])
        elif key in FLAGS:
            value = bool(value)
        out[PREFIX + key] = value if isinstance(value, (bool, int, float)) else str(value)
    return out


def merged_metadata(
    current: Mapping[str, Any] | None, updates: Mapping[str, Any]
) -> dict[str, Any]:
    """``current`` collection metadata with ``updates`` applied, as ``modify`` takes it.

    Chroma's ``modify`` replaces the metadata and refuses ``hnsw:`` keys (the
    distance is kept in the collection's configuration), so they are left out.
    """
    out = {k: v for k, v in (current or {}).items() if not str(k).startswith("hnsw:")}
    out.update(settings_metadata(updates))
    return out


_RAW = contextvars.ContextVar("kinject_raw_access", default=False)
_UNHEARD = contextvars.ContextVar("kinject_unheard", default=False)
_HUSH_LOCK = threading.Lock()


@contextlib.contextmanager
def raw_access() -> Iterator[None]:
    """Inside, restricted wrappers hand out raw text, :func:`unobserved` and :func:`unheard`."""
    token = _RAW.set(True)
    try:
        with unobserved(), unheard():
            yield
    finally:
        _RAW.reset(token)


def inside(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` inside :func:`raw_access`; an error leaves :func:`withheld`."""
    with raw_access():
        try:
            return call(*args, **kwargs)
        except Exception as exc:
            failure = withheld(exc)
    raise failure  # outside the handler: no __context__ carries the original


async def ainside(call: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Async twin of :func:`inside`."""
    with raw_access():
        try:
            return await call(*args, **kwargs)
        except Exception as exc:
            failure = withheld(exc)
    raise failure


def withheld(exc: Exception) -> Exception:
    """``exc`` as its class only (no message, cause or context); a wrong setup stays whole."""
    if isinstance(exc, (ConfigurationError, ForkedProcessError)):
        exc.__cause__ = exc.__context__ = None
        return exc
    name = type(exc).__name__
    return _reduced(name)(f"{name} raised inside the restricted boundary (message withheld)")


@functools.cache
def _reduced(name: str) -> type[Exception]:
    return type(name, (Exception,), {"__module__": __name__})


def _show_heard(show: Callable[[Any], None], message: Any) -> None:
    if not _UNHEARD.get():
        show(message)


class _Inside:  # a warnings-filter message pattern: matches every warning raised unheard
    def match(self, text: str) -> bool:
        return _UNHEARD.get()


class _Unheard(logging.Filter):  # drops the records emitted unheard
    def filter(self, record: logging.LogRecord) -> bool:
        return not _UNHEARD.get()


_WARNING_FILTER = ("ignore", _Inside(), Warning, None, 0)
_LOG_FILTER = _Unheard()


@contextlib.contextmanager
def unheard() -> Iterator[None]:
    """Inside, warnings and log records are dropped: raised in this context only, any thread.

    Not ``catch_warnings()``, which swaps the process's filter list under other
    threads: an entry first in ``warnings.filters``, the function that shows a
    warning, and a filter on every log handler read a context variable.
    """
    filters: list[Any] = warnings.filters  # type: ignore[assignment]
    if not filters or filters[0] is not _WARNING_FILTER:
        with _HUSH_LOCK:
            while _WARNING_FILTER in filters:
                filters.remove(_WARNING_FILTER)
            filters.insert(0, _WARNING_FILTER)
            show = getattr(warnings, "_showwarnmsg", None)  # behind another thread's filters
            if show is not None and not getattr(show, "unheard", False):
                hushed = functools.partial(_show_heard, show)
                hushed.unheard = True  # type: ignore[attr-defined]
                setattr(warnings, "_showwarnmsg", hushed)  # noqa: B010
    loggers = [logging.root, *logging.Logger.manager.loggerDict.values()]
    handlers = [h for lg in loggers for h in getattr(lg, "handlers", ())]
    for handler in [logging.lastResort, *handlers]:
        if handler is not None and _LOG_FILTER not in handler.filters:
            handler.addFilter(_LOG_FILTER)
    token = _UNHEARD.set(True)
    try:
        yield
    finally:
        _UNHEARD.reset(token)


def raw_allowed() -> bool:
    """Whether the running code is inside :func:`raw_access`."""
    return _RAW.get()


def quiet() -> list[Any]:
    """The callbacks of a run nobody may see: a muted stand-in for ``set_debug``'s printer.

    LangChain adds its console printer to every run when debug is on, unless the run
    already has one: this one prints nothing.
    """
    return [_muted_printer()()]


@functools.cache
def _muted_printer() -> type:
    from langchain_core.tracers.stdout import ConsoleCallbackHandler

    names = ["llm", "chat_model", "chain", "agent", "retriever", "retry", "custom_event"]
    return type("Muted", (ConsoleCallbackHandler,), {f"ignore_{n}": True for n in names})


@contextlib.contextmanager
def unobserved() -> Iterator[None]:
    """Inside, no callback, tracer or run collector sees a run: raw text is handled here.

    ``callbacks=[]`` is not enough: LangChain adds its configure hooks' handlers
    (``collect_runs``, ``tracing_v2_enabled``, LangSmith tracing) to every run, and a
    runnable called without a config inherits the caller's callbacks from the context.
    A run given its config explicitly (the retrieval run's stubs) is still reported.
    """
    from langchain_core.runnables.config import var_child_runnable_config
    from langchain_core.tracers.context import _configure_hooks, tracing_v2_callback_var
    from langsmith.run_helpers import tracing_context

    hooked: list[contextvars.ContextVar[Any]] = [tracing_v2_callback_var]
    hooked += [hook[0] for hook in _configure_hooks]
    tokens = [(var, var.set(None)) for var in hooked]
    tokens.append(
        (var_child_runnable_config, var_child_runnable_config.set({"callbacks": quiet()}))
    )
    try:
        with tracing_context(enabled=False):
            yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def check_raw_read(kb_name: str, flags: RestrictionFlags, *, via: str) -> None:
    """Raise :class:`RestrictedKnowledgeError` when raw text of a restricted base is read.

    Args:
        kb_name: The knowledge base.
        flags: Its restriction flags (fresh).
        via: What reads it, for the message (``"kb.as_retriever()"``).
    """
    if flags.restricted and not _RAW.get():
        msg = (
            f"Knowledge base {kb_name!r} is restricted: {via} would return its raw text. Use "
            "it through the package's surfaces (KnowledgeInjector, the graph, the node, the "
            "middleware or the search tool), which summarize restricted knowledge, or "
            "kb.search() as its owner."
        )
        raise RestrictedKnowledgeError(msg, kb_name=kb_name)
