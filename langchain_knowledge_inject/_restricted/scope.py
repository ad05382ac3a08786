"""Whether a turn is restricted: read from the data, found through any wrapper.

Restriction is a property of the stored data: a restricted knowledge base keeps
its flag in the metadata of its Chroma collections. :func:`source_flags` finds that
flag behind whatever a surface was given: a ``KnowledgeBase``, its retriever or
vector store, a plain ``langchain_chroma.Chroma`` opened on its collection, and any
LangChain wrapper around those (a ``VectorStoreRetriever``, a
``ContextualCompressionRetriever``, an ``EnsembleRetriever``, a
``MultiQueryRetriever``...), by walking the wrapper's fields. A flag that cannot be
read counts as restricted, and the error (its class and the knowledge base) is
reported in the turn's manifest. The walk lets a restricted turn search once; a
store it misses still gives sealed text, which restricts the turn (the pipeline).

:func:`resolve_restricted` takes the flags, the surface's own ``restricted`` and
the request's: any "on" wins, and no request turns it off.

A restricted graph or agent also runs its tools restricted: while it runs a tool it
sets :func:`restricted_host`, which lends the tool the host's summarizer and its
``sensitive_sources``, wherever the tool was built.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_knowledge_inject.errors import ConfigurationError

logger = logging.getLogger("langchain_knowledge_inject.restriction")

_MAX_DEPTH = 4
_WRAPPED_FIELDS = (
    "knowledge_base",
    "vectorstore",
    "retriever",
    "base_retriever",
    "retrievers",
    "store",
    "docstore",
    "base_compressor",
)


@dataclass(frozen=True)
class SourceFlags:
    """What the stored flags of one source say (several stores behind a wrapper: any "on")."""

    restricted: bool = False
    sensitive_sources: bool = False
    routing_hint: str = ""
    routing_keywords: tuple[str, ...] = ()
    errors: tuple[dict[str, str], ...] = field(default=())
    """One ``{"stage": "flags", "error": <class>, "source": <name>}`` per flag that could
    not be read (the source then counts as restricted)."""


def resolve_restricted(
    *, stored: bool = False, surface: bool = False, request: object = None
) -> bool:
    """Whether a turn is restricted: any "on" wins, and a request cannot turn it off.

    Raises:
        ConfigurationError: ``request`` is neither a bool nor ``None``.

    Example:
        >>> resolve_restricted(stored=True, request=False)
        True
        >>> resolve_restricted()
        False
    """
    if request is not None and not isinstance(request, bool):
        msg = f"the per-request 'restricted' must be True, False or None, got {request!r}"
        raise ConfigurationError(msg, option="restricted", value=request)
    on = request is True or surface is True or stored is True
    if request is False and on:
        logger.debug("ignoring restricted=False for this request: restricted mode stays on")
    return on


def _stores(obj: Any, depth: int = 0, seen: set[int] | None = None) -> Iterator[Any]:
    """The objects behind ``obj`` that carry stored flags: knowledge bases, Chroma stores."""
    seen = set() if seen is None else seen
    if obj is None or id(obj) in seen or depth > _MAX_DEPTH:
        return
    seen.add(id(obj))
    if _flagged(obj) or _collection(obj) is not None:
        yield obj
        return
    if isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _stores(item, depth + 1, seen)
        return
    for name in _WRAPPED_FIELDS:
        inner = getattr(obj, name, None)
        if inner is not None and not isinstance(inner, (str, bytes, int, float)):
            yield from _stores(inner, depth + 1, seen)


def _flagged(obj: Any) -> bool:
    """A knowledge base (``restriction``), or a source object describing itself (``info``)."""
    return hasattr(type(obj), "restriction") or (
        callable(getattr(obj, "search", None)) and hasattr(obj, "info")
    )


def _collection(obj: Any) -> Any:
    """The Chroma collection of a ``langchain_chroma.Chroma`` (or subclass), else ``None``."""
    collection = getattr(obj, "_collection", None)
    if collection is None or not hasattr(collection, "metadata"):
        return None
    return collection


def _read(store: Any) -> Any:
    """The stored flags of one knowledge base or Chroma store (fresh from the store)."""
    if hasattr(type(store), "restriction"):
        return store.restriction
    if _collection(store) is None:  # a source object with its own ``info``
        return store.info
    from langchain_knowledge_inject._store.flags import read_flags

    collection = _collection(store)
    client = getattr(store, "_client", None)
    name = getattr(collection, "name", None)
    if client is not None and name is not None:  # the collection object caches its metadata
        collection = client.get_collection(name)
    return read_flags(collection.metadata)


def _name(store: Any) -> str:
    name = getattr(store, "name", None)
    if isinstance(name, str):
        return name
    collection = _collection(store)
    return str(getattr(collection, "name", type(store).__name__))


def _cause(exc: BaseException) -> str:
    """The error's class and its causes' classes (``"RetrievalError <- ConnectError"``).

    Class names only: an exception's message may quote a store's text.
    """
    names = [type(exc).__name__]
    while (exc := exc.__cause__ or exc.__context__) is not None and len(names) < 4:  # type: ignore[assignment]
        names.append(type(exc).__name__)
    return " <- ".join(names)


def source_flags(source: Any) -> SourceFlags:
    """The stored flags behind ``source``, read now (blocking I/O: call it off the event loop).

    A flag that cannot be read counts as "on" (restricted, sensitive sources), with the
    error's class recorded; nothing is raised.
    """
    restricted = sensitive = False
    hints: list[str] = []
    keywords: list[str] = []
    errors: list[dict[str, str]] = []
    for store in _stores(source):
        try:
            flags = _read(store)
        except Exception as exc:
            cause = _cause(exc)
            logger.warning(
                "restriction flag of %r unreadable (%s): treating it as restricted",
                _name(store),
                cause,
            )
            errors.append({"stage": "flags", "error": cause, "source": _name(store)})
            restricted = sensitive = True
            continue
        restricted = restricted or getattr(flags, "restricted", False) is True
        sensitive = sensitive or getattr(flags, "sensitive_sources", False) is True
        hints += [flags.routing_hint] if getattr(flags, "routing_hint", "") else []
        keywords += list(getattr(flags, "routing_keywords", ()) or ())
    return SourceFlags(restricted, sensitive, " ".join(hints), tuple(keywords), tuple(errors))


def combine(flags: Sequence[SourceFlags]) -> SourceFlags:
    """Several sources' flags as one: any "on" wins; errors and routing data are joined."""
    return SourceFlags(
        restricted=any(f.restricted for f in flags),
        sensitive_sources=any(f.sensitive_sources for f in flags),
        routing_hint=" ".join(f.routing_hint for f in flags if f.routing_hint),
        routing_keywords=tuple(k for f in flags for k in f.routing_keywords),
        errors=tuple(e for f in flags for e in f.errors),
    )


# --- tools hosted by a restricted graph or agent -----------------------------------------------


@dataclass(frozen=True)
class RestrictedHost:
    """What a restricted graph or agent lends the tools it runs."""

    summarizer_model: Any = None
    """The host's summarizer, used by a tool built without one."""
    sensitive_sources: bool = False
    """Whether the host's knowledge bases hide their source names."""


_HOST: contextvars.ContextVar[RestrictedHost | None] = contextvars.ContextVar(
    "kinject_restricted_host", default=None
)


@contextlib.contextmanager
def restricted_host(host: RestrictedHost) -> Iterator[RestrictedHost]:
    """Run the tools called inside this block as tools of a restricted host."""
    token = _HOST.set(host)
    try:
        yield host
    finally:
        _HOST.reset(token)


def current_host() -> RestrictedHost | None:
    """The restricted host running the current tool call, or ``None``."""
    return _HOST.get()


# --- the knowledge-base list of a restricted turn ---------------------------------------------


def _one_line(text: object) -> str:
    return " ".join(str(text).replace("[", "(").replace("]", ")").split())


def safe_kb_meta(infos: Sequence[Any]) -> str:
    """The ``[Restricted Knowledge Bases]`` block: names and routing data, nothing else.

    Each knowledge base shows its name and id, its routing hint (one line, at most 300
    characters) and its routing keywords (no digits, at most 4 words each, at most
    20): never its description, nor topics derived from its content.

    Example:
        >>> print(safe_kb_meta([{"name": "hr", "id": "kb-1", "routing_hint": "HR policy",
        ...                      "routing_keywords": ["leave", "Q3 target"]}]))
        [Restricted Knowledge Bases]
        Search these with knowledge_base_search; you get a safe summary, never the documents.
        - hr (id: kb-1): HR policy. Keywords: leave
    """
    lines = [
        "[Restricted Knowledge Bases]",
        "Search these with knowledge_base_search; you get a safe summary, never the documents.",
    ]
    for info in infos:

        def get(key: str, item: Any = info) -> Any:
            return item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)

        line = f"- {_one_line(get('name') or 'unnamed')[:100]}"
        if get("id"):
            line += f" (id: {_one_line(get('id'))[:100]})"
        hint = _one_line(get("routing_hint") or "")[:300]
        if hint:
            line += f": {hint.rstrip('.')}."
        keywords = [_one_line(k) for k in get("routing_keywords") or ()]
        keywords = [
            k for k in keywords if k and len(k.split()) <= 4 and not any(c.isdigit() for c in k)
        ]
        if keywords:
            line += f" Keywords: {', '.join(dict.fromkeys(keywords[:20]))}"
        lines.append(line)
    return "\n".join(lines)
