"""Restricted mode: the one place that decides whether a turn is restricted, and its scope.

Every surface (the injector, the graph's nodes, the agent middleware) and the
``knowledge_base_search`` tool ask :func:`resolve_restricted` whether the turn
in hand is restricted. It takes three inputs:

- the stored flag of every knowledge base involved (``kb.info.restricted``, read
  on every turn; a knowledge base whose info cannot be read counts as restricted);
- the surface's own flag (``restricted=True`` given to the constructor);
- the per-request flag ``config["configurable"]["restricted"]``.

Any "on" wins. Nothing turns restriction off per request: a request asking for
``False`` while a knowledge base or the surface has it on is ignored (a debug
log says so).

A restricted graph or agent also restricts the tools it runs, however they were
built: while it runs a tool it sets ``configurable["restricted"] = True`` in the
tool's config and opens a :func:`restricted_host` scope, which hands the tool
the host's summarizer model and its ``sensitive_sources`` setting. The tool
reads both wherever it is invoked (``ToolNode``, a direct ``tool.invoke(...,
config)``, another node).

What a restricted turn may keep: :func:`redact_documents` turns retrieved chunks
into stubs that keep the chunk id and score (and the source name unless the
sources are sensitive), never the text. :func:`hide_source_names` takes source
names out of model-written text when the sources are sensitive.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, cast

from langchain_core.documents import Document

from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

__all__ = [
    "RestrictedHost",
    "current_host",
    "hide_source_names",
    "knowledge_base_flags",
    "redact_documents",
    "request_flag",
    "resolve_restricted",
    "restricted_config",
    "restricted_host",
    "sensitive_source_flags",
]

logger = logging.getLogger("langchain_knowledge_inject.restriction")

HIDDEN_SOURCE = "a restricted document"
"""What a source name is replaced with in model-written text when sources are sensitive."""


def resolve_restricted(
    *,
    knowledge_bases: Iterable[bool] = (),
    surface: bool = False,
    request: object = None,
) -> bool:
    """Whether a turn is restricted: any "on" wins, and a request cannot turn it off.

    Args:
        knowledge_bases: The stored flag of each knowledge base involved
            (:func:`knowledge_base_flags` reads them lazily, failing closed; they
            are read only when the surface and the request leave it open).
        surface: The surface's own flag (``restricted=`` of the injector, graph,
            middleware or tool).
        request: ``config["configurable"]["restricted"]``: ``True``, ``False`` or
            ``None`` (not set).

    Returns:
        ``True`` when any input is on.

    Raises:
        ConfigurationError: ``request`` is neither a bool nor ``None``.

    Example:
        >>> resolve_restricted(knowledge_bases=[False], surface=False, request=True)
        True
        >>> resolve_restricted(knowledge_bases=[True], request=False)  # cannot switch it off
        True
        >>> resolve_restricted()
        False
    """
    if request is not None and not isinstance(request, bool):
        msg = f"configurable['restricted'] must be True, False or None, got {request!r}"
        raise ConfigurationError(msg, option="restricted", value=request)
    if request is True:
        return True
    by = "the surface" if surface is True else None
    if by is None and any(flag is not False for flag in knowledge_bases):
        by = "the knowledge base"
    if request is False and by is not None:
        logger.debug(
            "ignoring configurable restricted=False: restricted mode stays on (set by %s)", by
        )
    return by is not None


def request_flag(*configs: Mapping[str, Any] | None) -> bool | None:
    """The per-request ``configurable["restricted"]`` of several configs.

    ``True`` when any config sets it to ``True``, else the first value set
    (``None`` when none sets it). A tool reads two: its own invoke config and
    its ``ToolRuntime``'s.
    """
    found: bool | None = None
    for config in configs:
        value = ((config or {}).get("configurable") or {}).get("restricted")
        if value is None:
            continue
        if value is True:
            return True
        if found is None:
            found = value
    return found


def _read_info(kb: Any) -> tuple[bool, Any]:
    """``(readable, flags)``; an object without ``info`` is readable and has none.

    A :class:`~langchain_knowledge_inject._store.knowledge_base.KnowledgeBase` answers
    from its cheap ``restriction`` flags (no chunk count); other objects with an
    ``info`` answer from it.
    """
    attribute = "restriction" if hasattr(type(kb), "restriction") else "info"
    try:
        return True, getattr(kb, attribute)
    except AttributeError:
        if not hasattr(type(kb), attribute):
            return True, None
        return False, None
    except Exception:
        return False, None


def knowledge_base_flags(knowledge_bases: Sequence[Any]) -> Iterator[bool]:
    """The stored restriction flag of each knowledge base, each read when it is asked for.

    Lazy, because reading the flags costs a store round trip: :func:`resolve_restricted`
    stops at the first "on". A knowledge base whose info cannot be read counts as
    restricted (fail closed); an object without ``info`` at all (a plain
    ``search``/``asearch`` object) is not.
    """
    for kb in knowledge_bases:
        readable, info = _read_info(kb)
        if not readable:
            logger.warning("restriction flag of %r unreadable: treating it as restricted", kb)
        yield not readable or getattr(info, "restricted", False) is True


def sensitive_source_flags(knowledge_bases: Sequence[Any]) -> list[bool]:
    """Whether each knowledge base hides its source names (unreadable info: yes)."""
    flags = []
    for kb in knowledge_bases:
        readable, info = _read_info(kb)
        flags.append(not readable or getattr(info, "sensitive_sources", False) is True)
    return flags


# --- tools hosted by a restricted graph or agent --------------------------------------------


@dataclass(frozen=True)
class RestrictedHost:
    """What a restricted graph or agent hands the tools it runs."""

    summarizer_model: Any = None
    """The host's secondary model, used by a tool built without one."""
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


def restricted_config(config: RunnableConfig | None) -> RunnableConfig:
    """A copy of ``config`` with ``configurable["restricted"] = True``."""
    copied: dict[str, Any] = dict(config or {})
    copied["configurable"] = {**(copied.get("configurable") or {}), "restricted": True}
    return cast("RunnableConfig", copied)


# --- what a restricted turn keeps ------------------------------------------------------------


def redact_documents(
    documents: Sequence[Document], *, sensitive_sources: bool = False
) -> list[Document]:
    """Stubs of ``documents`` that keep ids and scores, never the text.

    Each stub has an empty ``page_content`` and the metadata ``chunk_id``,
    ``score``, ``kb_name`` and ``redacted=True``, plus ``source`` unless the
    sources are sensitive. Stubs already redacted are returned as they are.

    Example:
        >>> doc = Document("secret text", id="c1", metadata={"source": "a.md", "score": 0.5})
        >>> stub = redact_documents([doc], sensitive_sources=True)[0]
        >>> stub.page_content, stub.id, stub.metadata
        ('', 'c1', {'chunk_id': 'c1', 'score': 0.5, 'redacted': True})
    """
    stubs = []
    for doc in documents:
        chunk_id = str(doc.id or doc.metadata.get("chunk_id", "")) or None
        metadata: dict[str, Any] = {"chunk_id": chunk_id or ""}
        try:
            metadata["score"] = float(doc.metadata.get("score", 0.0))
        except (TypeError, ValueError):
            metadata["score"] = 0.0
        if doc.metadata.get("kb_name"):
            metadata["kb_name"] = str(doc.metadata["kb_name"])
        if not sensitive_sources and doc.metadata.get("source"):
            metadata["source"] = str(doc.metadata["source"])
        metadata["redacted"] = True
        stubs.append(Document(page_content="", id=chunk_id, metadata=metadata))
    return stubs


def is_redacted(documents: Sequence[Document]) -> bool:
    """Whether every document is a stub of :func:`redact_documents` (``True`` when empty)."""
    return all(d.metadata.get("redacted") is True and not d.page_content for d in documents)


def _source_forms(documents: Sequence[Document]) -> list[str]:
    forms: set[str] = set()
    names = (
        str(doc.metadata.get(key) or "").strip()
        for doc in documents
        for key in ("source", "source_path")
    )
    for source in names:
        if not source:
            continue
        path = PurePath(source)
        forms.update({source, path.name})
        stem = path.stem
        # a stem that is one plain word ("leave") is a word, not a name; one with digits,
        # separators or several parts ("hr_policy_2024") names the document
        if len(stem) >= 4 and re.search(r"[\d_\-.]", stem):
            forms.add(stem)
    return sorted((f for f in forms if len(f) >= 3), key=len, reverse=True)


def hide_source_names(text: str, documents: Sequence[Document]) -> str:
    """``text`` with the source names of ``documents`` replaced (case-insensitive).

    The ``source`` and ``source_path`` of each document, as full paths, file names
    and distinctive stems (with digits or separators), are replaced by
    ``"a restricted document"``.

    Example:
        >>> docs = [Document("x", metadata={"source": "/kb/hr_policy_2024.md"})]
        >>> hide_source_names("See HR_policy_2024.md and hr_policy_2024.", docs)
        'See a restricted document and a restricted document.'
    """
    for form in _source_forms(documents):
        text = re.sub(re.escape(form), HIDDEN_SOURCE, text, flags=re.IGNORECASE)
    return text


# --- running tools as a restricted host ------------------------------------------------------


def _restricted_request(request: Any) -> Any:
    """The tool-call request with ``configurable["restricted"] = True`` in its runtime config."""
    import dataclasses

    runtime: Any = getattr(request, "runtime", None)
    if runtime is None or not dataclasses.is_dataclass(runtime) or isinstance(runtime, type):
        return request
    config = restricted_config(getattr(runtime, "config", None))
    restricted = dataclasses.replace(runtime, config=config)
    return request.override(runtime=restricted)


def run_tool_restricted(request: Any, handler: Any, host: RestrictedHost) -> Any:
    """Run one tool call (a ``ToolCallRequest`` and its handler) as a restricted host's call.

    Used by the graph's ``ToolNode`` and by the agent middleware's ``wrap_tool_call``:
    the tool sees ``configurable["restricted"] = True`` in its runtime config and
    the host (summarizer model, ``sensitive_sources``) in :func:`current_host`.
    """
    with restricted_host(host):
        return handler(_restricted_request(request))


async def arun_tool_restricted(request: Any, handler: Any, host: RestrictedHost) -> Any:
    """Async twin of :func:`run_tool_restricted`."""
    with restricted_host(host):
        return await handler(_restricted_request(request))
