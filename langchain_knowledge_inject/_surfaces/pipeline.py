"""The one turn pipeline every surface runs: request, query, search, release, blocks, placement.

:class:`KnowledgePipeline` holds what a surface was configured with (the sources,
the settings, the context blocks, the summarizer, the template and token counter)
and runs one turn in a fixed order, each step once:

1. :meth:`~KnowledgePipeline.request`: the request's settings (``configurable`` and the
   runtime context, parsed once) and whether it is restricted, from the flags stored
   with each source's data (read off the event loop on the async path), the surface's
   own flag, a restricted host, and the request;
2. :meth:`~KnowledgePipeline.retrieve`: the retrieval query (the current message, the
   follow-up heuristic or the query model), then, on an open turn, every source
   searched side by side, degrading per source
   (:mod:`~langchain_knowledge_inject._turn.retrieval`), then the reranker;
3. :meth:`~KnowledgePipeline.summarize`, restricted turns only: the search, and the
   chunks through the one boundary
   (:func:`~langchain_knowledge_inject._restricted.boundary.release`), with the
   summaries already released in the same thread, in one step: only its typed fields go on;
4. :meth:`~KnowledgePipeline.build_context`: the context blocks, one token budget, the
   text (:func:`~langchain_knowledge_inject._turn.assemble.assemble_context`), placement,
   history trimming and the datetime suffix, once
   (:func:`~langchain_knowledge_inject._turn.conversation.shape_turn`), and the manifest.

:meth:`~KnowledgePipeline.prepare` runs the four in one call (the injector, the node,
the middleware); the graph runs each as a node of its own, passing a :class:`Retrieval`
through its state. The ``knowledge_base_search`` tool runs steps 1 and 3 through
:meth:`~KnowledgePipeline.search`. Sync and async share every step but the I/O, which
is written twice. One turn has one deadline on the store (:attr:`Request.deadline`), shared
by its flag read and its searches.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_messages,
)
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableConfig, ensure_config
from pydantic import ValidationError

from langchain_knowledge_inject._restricted.boundary import (
    Released,
    SafeSummary,
    arelease,
    chunk_ref,
    format_block,
    refused,
    release,
    stub,
)
from langchain_knowledge_inject._restricted.scope import (
    SourceFlags,
    combine,
    current_host,
    resolve_restricted,
    safe_kb_meta,
    source_flags,
)
from langchain_knowledge_inject._store.calls import Deadline, within
from langchain_knowledge_inject._turn.assemble import (
    AssembledContext,
    RestrictedKnowledge,
    assemble_context,
    chunk_id,
    has_content,
    meta_alone,
)
from langchain_knowledge_inject._turn.blocks import (
    BLOCK_SEPARATOR,
    ContextBlock,
    arecord_blocks_turn,
    arender_blocks,
    check_blocks,
    check_layout,
    record_blocks_turn,
    render_blocks,
)
from langchain_knowledge_inject._turn.conversation import (
    TurnQuery,
    aquery_for,
    query_for,
    shape_turn,
    turn_clock,
)
from langchain_knowledge_inject._turn.formatting import (
    DEFAULT_KNOWLEDGE_TEMPLATE,
    KnowledgeBlockTemplate,
    format_kb_meta,
)
from langchain_knowledge_inject._turn.history import TrimmedHistory
from langchain_knowledge_inject._turn.logs import log_turn
from langchain_knowledge_inject._turn.manifest import (
    InjectionManifest,
    aemit_manifest,
    emit_manifest,
    error_record,
    hash_messages,
)
from langchain_knowledge_inject._turn.placement import (
    add_knowledge_prompt,
    current_user_index,
    injection_index,
    strip_injected,
)
from langchain_knowledge_inject._turn.recent import Recent
from langchain_knowledge_inject._turn.retrieval import (
    Retrieved,
    SearchSpec,
    arerank,
    as_sources,
    asearch_sources,
    rerank,
    search_sources,
)
from langchain_knowledge_inject._turn.tokens import TokenCounter, approximate_token_count
from langchain_knowledge_inject.errors import ConfigurationError, RetrievalError
from langchain_knowledge_inject.settings import (
    KnowledgeSettings,
    SettingsOptions,
    build_settings,
    context_values,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

logger = logging.getLogger("langchain_knowledge_inject")

ExtraBlock = str | Callable[[RunnableConfig], str | None]
"""A block added after the others: a string, or a callable ``(config) -> str | None``."""

_RERANK_FETCH = 4


@dataclass(frozen=True)
class Request:
    """One request, resolved once: its settings and whether it is restricted."""

    settings: KnowledgeSettings
    """The settings with ``configurable`` and the runtime context applied."""
    config: RunnableConfig | None
    """The run's config (with the context's ``user_id`` in ``configurable``)."""
    flags: SourceFlags
    """What the sources' stored flags say (and which could not be read)."""
    sensitive_sources: bool = False
    """Whether source names are hidden from the main model."""
    deadline: Deadline | None = None
    """The turn's one deadline on the store, started by its flag reads."""

    @property
    def restricted(self) -> bool:
        """Whether the request is restricted."""
        return self.settings.restricted


@dataclass
class PreparedTurn:
    """Everything one turn decided: the messages to send, the injected text, the manifest."""

    messages: list[BaseMessage]
    """The messages to send to the model."""
    query: str | None
    """The retrieval query, or ``None``."""
    documents: list[Document]
    """The chunks injected as raw text (empty in restricted mode)."""
    dynamic_context: str | None
    """The injected text, or ``None`` when nothing was injected."""
    manifest: InjectionManifest
    """The manifest (also emitted as the ``knowledge_injection`` custom event)."""
    retrieved: list[Document] = field(default_factory=list)
    """Every retrieved chunk (restricted mode: stubs with a keyed reference and a score)."""
    safe_summary: SafeSummary | None = None
    """Restricted mode: what was released of the chunks."""


@dataclass
class Retrieval:
    """A turn between its steps: the query, what was found, the request it runs under.

    :meth:`KnowledgePipeline.retrieve` makes it; on a restricted turn
    :meth:`KnowledgePipeline.summarize` searches and adds :attr:`released`, and
    :attr:`found` keeps the failed sources only, never a chunk's text.
    """

    query: TurnQuery
    """The retrieval query and how it was made."""
    found: Retrieved
    """Open turn: the documents found, best first, and the failed sources. Restricted
    turn: the failed sources only."""
    request: Request
    """The request the rest of the turn runs under: restricted when the request is, or when
    the search found that it must be (then nothing found is kept, and summarize searches)."""
    released: Released | None = None
    """Restricted turn: what the boundary released (``None``: nothing was found)."""
    started: float = field(default_factory=time.time)
    """When the turn started (``time.time()``), for its log line."""

    @property
    def restricted(self) -> bool:
        """Whether the rest of the turn is restricted."""
        return self.request.restricted

    @property
    def kept(self) -> list[Document]:
        """What may be kept of the found chunks: restricted, stubs (keyed ref, score)."""
        if self.restricted:
            return self.released.stubs() if self.released is not None else []
        return list(self.found.documents)


_Rendered = tuple[list[tuple[str, str | None]], list[dict[str, Any]]]
"""Rendered context blocks: ``(name, text)`` pairs, and the blocks that failed."""


def released_from(event: Any) -> Released | None:
    """What :meth:`Released.event` wrote, as a :class:`Released` again (malformed: a refusal)."""
    if not isinstance(event, Mapping):
        return None
    try:
        summary = SafeSummary.model_validate(
            {k: event[k] for k in SafeSummary.model_fields if k in event}
        )
    except ValidationError:
        summary = refused("summarizer_error")
    refs, scores, codes = (tuple(event.get(k) or ()) for k in ("refs", "scores", "codes"))
    return Released(summary, format_block(summary), refs, scores, codes)


def _searches(got: Retrieval) -> bool:
    """Whether the turn searches: a query, and retrieval not left to the tool."""
    return got.query.query is not None and got.request.settings.retrieval != "tool"


def _top(got: Retrieval, found: Retrieved) -> Retrieval:
    """``got`` with ``found`` cut to the best ``top_k``."""
    found.documents = found.documents[: got.request.settings.top_k]
    return replace(got, found=found)


def _opened(got: Retrieval, found: Retrieved) -> Retrieval:
    """An open turn's search: cut to ``top_k``; sealed text found restricts the turn, keeps none."""
    if not found.sealed:
        return _top(got, found)
    return replace(got, found=Retrieved(), request=sealed_turn(got.request, found))


def _remember(clean: list[BaseMessage], got: Retrieval, found: Retrieved) -> str | None:
    """Remember a restricted turn's chunks (the tool skips them); the thread, for the ledger."""
    remember_shown(got.request.config, clean, sorted(shown_keys(found.documents, restricted=True)))
    return thread_key(got.request.config, clean)


def _rerank_failed(exc: Exception, found: Retrieved, on_error: str, *, restricted: bool) -> None:
    """A reranker that raised: raise (``on_error="raise"``), else keep the retrieval order.

    Named by class only, and in restricted mode raised without its cause: the reranker
    saw raw chunks, and its message may quote them.
    """
    if on_error == "raise":
        msg = f"The reranker failed ({type(exc).__name__})"
        if restricted:
            raise RetrievalError(msg) from None
        raise RetrievalError(msg) from exc
    logger.warning("reranker failed (%s): the retrieval order is kept", type(exc).__name__)
    found.errors.append(error_record("rerank", exc))


_RECENT = Recent(4096)


def turn_key(config: RunnableConfig | None, messages: Sequence[BaseMessage]) -> str | None:
    """One user turn of one conversation: its thread and its current user message."""
    thread = thread_key(config, messages)
    index = current_user_index(messages)
    if thread is None or index is None:
        return None
    current = messages[index]
    text = str(current.id or current.content)
    return f"{thread}#" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def remember_shown(
    config: RunnableConfig | None, messages: Sequence[BaseMessage], ids: Sequence[str]
) -> None:
    """Remember the chunk ids injected this turn (the search tool skips them)."""
    key = turn_key(config, messages)
    _RECENT.put(key and f"shown:{key}", frozenset(ids))


def shown_this_turn(
    config: RunnableConfig | None, messages: Sequence[BaseMessage]
) -> frozenset[str]:
    """The chunk ids injected this turn in this process (see :func:`remember_shown`)."""
    key = turn_key(config, messages)
    return _RECENT.get(key and f"shown:{key}", frozenset())


def coerce_messages(value: Any) -> list[BaseMessage]:
    """The input as messages: a list, a string, a prompt, or one under ``messages``/``input``.

    Raises:
        ConfigurationError: Anything else (``None``, ``[None]``, a dict without either key).
    """
    if isinstance(value, dict):
        if not {"messages", "input"} & set(value):
            msg = "a dict input must have a 'messages' or an 'input' key"
            raise ConfigurationError(msg, option="input", value=sorted(value))
        value = value["messages"] if "messages" in value else value["input"]
    if isinstance(value, str):
        return [HumanMessage(value)]
    if isinstance(value, PromptValue):
        return value.to_messages()
    try:
        return convert_to_messages(value)
    except (TypeError, ValueError, NotImplementedError) as exc:  # None, [None], ...
        msg = (
            "input must be a list of messages, a string, a PromptValue, or a dict holding one "
            f"under 'messages' or 'input'; got {type(value).__name__} ({exc})"
        )
        raise ConfigurationError(msg, option="input", value=value) from exc


def thread_key(config: RunnableConfig | None, messages: Sequence[BaseMessage] = ()) -> str | None:
    """The conversation a request belongs to: its ``thread_id``, else its first message."""
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    if thread is not None:
        return f"thread:{thread}"
    first = next((m for m in messages if m.type == "human"), None)
    if first is None:
        return None
    if first.id:
        return f"message:{first.id}"
    return "text:" + hashlib.sha256(str(first.content).encode("utf-8", "replace")).hexdigest()


def _runtime_context() -> Any:
    """The LangGraph runtime context of the running graph, or ``None``."""
    try:
        from langgraph.runtime import get_runtime

        return get_runtime().context
    except Exception:  # outside a graph, or a LangGraph without runtime context
        return None


def _with_user(config: RunnableConfig | None, context: Mapping[str, Any]) -> RunnableConfig | None:
    """``config`` with the runtime context's ``user_id`` (memory blocks read it there)."""
    if "user_id" not in context:
        return config
    copied: dict[str, Any] = dict(config or {})
    copied["configurable"] = {**(copied.get("configurable") or {}), "user_id": context["user_id"]}
    return copied  # type: ignore[return-value]


class KnowledgePipeline:
    """The configured turn pipeline: sources, settings, blocks, summarizer; no surface.

    Args:
        knowledge_base: The knowledge source(s): a ``KnowledgeBase``, a LangChain
            ``BaseRetriever`` or ``VectorStore``, or a sequence mixing these.
        settings: The :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`.
        **options: Fields of ``settings`` given directly (``top_k=3``).
        token_counter: Counts tokens; the approximate count by default.
        template: The knowledge block template.
        extra_blocks: Blocks added after the others (strings or ``(config) -> str | None``).
        blocks: Context blocks (``ProcedureLibrary``, ``EpisodicMemory``, ``UserFacts``...).
        summarizer_model: Restricted mode: the secondary model writing safe summaries.
        block_order: The order of the content blocks by name; ``None``: the fixed order.
        block_separator: What joins two blocks (a blank line by default).

    Raises:
        ConfigurationError: An option has a value that is not allowed.
    """

    def __init__(
        self,
        knowledge_base: Any,
        *,
        settings: KnowledgeSettings | None = None,
        token_counter: TokenCounter | None = None,
        template: KnowledgeBlockTemplate | None = None,
        extra_blocks: Sequence[ExtraBlock] = (),
        summarizer_model: Any = None,
        blocks: Sequence[ContextBlock] = (),
        block_order: Sequence[str] | None = None,
        block_separator: str = BLOCK_SEPARATOR,
        **options: Unpack[SettingsOptions],
    ) -> None:
        self.sources = as_sources(knowledge_base)
        self.knowledge_bases = tuple(s.given for s in self.sources)  # as the user gave them
        self.settings = build_settings(settings, **options)
        if token_counter is not None and not callable(token_counter):
            msg = "token_counter must be a callable (text) -> int"
            raise ConfigurationError(msg, option="token_counter", value=token_counter)
        if template is not None and not isinstance(template, KnowledgeBlockTemplate):
            msg = "template must be a KnowledgeBlockTemplate"
            raise ConfigurationError(msg, option="template", value=template)
        if isinstance(extra_blocks, str) or not all(
            isinstance(b, str) or callable(b) for b in extra_blocks
        ):
            msg = "extra_blocks must be a sequence of strings or callables (config) -> str | None"
            raise ConfigurationError(msg, option="extra_blocks", value=extra_blocks)
        self.token_counter: TokenCounter = token_counter or approximate_token_count
        self.template = template or DEFAULT_KNOWLEDGE_TEMPLATE
        self.extra_blocks: tuple[ExtraBlock, ...] = tuple(extra_blocks)
        self.summarizer_model = summarizer_model
        self.blocks: tuple[ContextBlock, ...] = check_blocks(blocks)
        self.block_order, self.block_separator = check_layout(block_order, block_separator)
        custom = self.template != DEFAULT_KNOWLEDGE_TEMPLATE and not self.template.inline
        header = self.template.header.strip()
        self.strip_headers: tuple[str, ...] = (header,) if custom and header else ()
        self._kb_meta: dict[bool, str] = {}

    def _deadline(self, left: float | None = None) -> Deadline | None:
        """A turn's one deadline on the store: the largest ``timeout`` of the knowledge bases."""
        timeouts = [getattr(kb, "timeout", None) for kb in self.knowledge_bases]
        timeout = max((t for t in timeouts if isinstance(t, (int, float))), default=None)
        return None if timeout is None else Deadline(timeout if left is None else left)

    def __repr__(self) -> str:
        names = ", ".join(str(getattr(s, "name", s)) for s in self.sources)
        return f"{type(self).__name__}([{names}], {self.settings!r})"

    # -- step 1: the request -------------------------------------------------------------------
    def _flags(self) -> SourceFlags:
        return combine([source_flags(kb) for kb in self.knowledge_bases])

    def _request(self, config: Any, context: Any, flags: SourceFlags, deadline: Any) -> Request:
        values = context_values(context if context is not None else _runtime_context())
        settings = self.settings.with_overrides(config, values)
        host = current_host()
        restricted = resolve_restricted(
            stored=flags.restricted, surface=settings.restricted or host is not None
        )
        if restricted != settings.restricted:
            settings = settings.model_copy(update={"restricted": restricted})
        sensitive = flags.sensitive_sources or bool(host and host.sensitive_sources)
        return Request(settings, _with_user(config, values), flags, sensitive, deadline)

    def request(
        self,
        config: RunnableConfig | None = None,
        *,
        context: Any = None,
        flags: SourceFlags | None = None,
        left: float | None = None,
    ) -> Request:
        """Resolve one request: settings, and whether it is restricted (reads stored flags).

        Args:
            config: The run's config (``configurable`` overrides).
            context: The runtime context (default: the running graph's ``runtime.context``).
            flags: The flags as an earlier step of the same turn decided them (no
                store read; the async twin reads them in a worker thread).
            left: Seconds left of the turn's store deadline, as an earlier step left it.

        Raises:
            ConfigurationError: An override is not allowed.
        """
        with within(deadline := self._deadline(left)):
            return self._request(config, context, flags or self._flags(), deadline)

    async def arequest(
        self, config: RunnableConfig | None = None, *, context: Any = None
    ) -> Request:
        """Async twin of :meth:`request`: the stored flags are read in a worker thread."""
        if context is None:
            context = _runtime_context()  # read here: the worker thread has no runtime
        with within(deadline := self._deadline()):
            return self._request(config, context, await asyncio.to_thread(self._flags), deadline)

    # -- the steps' shared parts ---------------------------------------------------------------
    def history(self, state: Any, system_prompt: str | None) -> list[BaseMessage]:
        """A graph state's conversation, earlier injections stripped, ``system_prompt`` first.

        Raises:
            ConfigurationError: The state has no ``messages`` list.
        """
        if not isinstance(state, dict) or not isinstance(state.get("messages"), list):
            keys = sorted(state) if isinstance(state, dict) else type(state).__name__
            msg = f"the knowledge node needs a graph state with a 'messages' list; got {keys}"
            raise ConfigurationError(msg, option="state", value=keys)
        history = strip_injected(state["messages"], headers=self.strip_headers)
        return [SystemMessage(system_prompt), *history] if system_prompt else history

    def clean(self, messages: Sequence[BaseMessage], request: Request) -> list[BaseMessage]:
        """The input without earlier injections, with the knowledge prompt in the system message."""
        clean = strip_injected(list(messages), headers=self.strip_headers)
        settings = request.settings
        if settings.enabled and clean:
            clean = add_knowledge_prompt(clean, settings.knowledge_prompt)
        return clean

    def _spec(self, request: Request, k: int | None = None, filter: Any = None) -> SearchSpec:
        s = request.settings
        wanted = k or s.top_k
        fetch = min(100, wanted * _RERANK_FETCH) if s.reranker is not None else wanted
        return SearchSpec(fetch, s.min_score, filter, s.mode, s.tenant_id, s.include_shared)

    def _redact(self, request: Request) -> Callable[[Document], Document] | None:
        if not request.restricted:
            return None

        def redact(doc: Document) -> Document:
            score = round(float(doc.metadata.get("score", 0.0) or 0.0), 1)
            return stub(chunk_ref(chunk_id(doc)), score)

        return redact

    def _search_args(self, request: Request) -> dict[str, Any]:
        redact = self._redact(request)
        return {"config": request.config, "redact": redact, "on_error": request.settings.on_error}

    def _search(self, query: str, request: Request, spec: SearchSpec) -> Retrieved:
        settings = request.settings  # restricted: each search and the reranker run inside
        with within(request.deadline):  # what the turn's flag read left of its deadline
            found = search_sources(self.sources, query, spec, **self._search_args(request))
        failure: Exception | None = None
        try:
            found.documents = rerank(
                settings.reranker, query, found.documents, restricted=request.restricted
            )
        except Exception as exc:
            failure = exc
        if failure is not None:  # raised outside the handler: no __context__ to carry raw text
            _rerank_failed(failure, found, settings.on_error, restricted=request.restricted)
        return found

    async def _asearch(self, query: str, request: Request, spec: SearchSpec) -> Retrieved:
        settings = request.settings
        with within(request.deadline):
            found = await asearch_sources(self.sources, query, spec, **self._search_args(request))
        failure: Exception | None = None
        try:
            found.documents = await arerank(
                settings.reranker, query, found.documents, restricted=request.restricted
            )
        except Exception as exc:
            failure = exc
        if failure is not None:  # raised outside the handler: no __context__ to carry raw text
            _rerank_failed(failure, found, settings.on_error, restricted=request.restricted)
        return found

    def _searched(
        self, query: str, request: Request, spec: SearchSpec
    ) -> tuple[Retrieved, Request]:
        """:meth:`_search`; an open turn that found sealed text is restricted, searched again."""
        found = self._search(query, request, spec)
        if not found.sealed or request.restricted:
            return found, request
        request = sealed_turn(request, found)
        return self._search(query, request, spec), request

    async def _asearched(
        self, query: str, request: Request, spec: SearchSpec
    ) -> tuple[Retrieved, Request]:
        """Async twin of :meth:`_searched`."""
        found = await self._asearch(query, request, spec)
        if not found.sealed or request.restricted:
            return found, request
        request = sealed_turn(request, found)
        return await self._asearch(query, request, spec), request

    def _released_args(self, request: Request, thread: str | None) -> dict[str, Any]:
        host = current_host()
        model = self.summarizer_model or (host.summarizer_model if host else None)
        return {
            "model": model,
            "sensitive_sources": request.sensitive_sources,
            "thread": thread,  # the boundary judges and records in the thread's ledger
            "public": " ".join([request.flags.routing_hint, *request.flags.routing_keywords]),
            "max_tokens": request.settings.max_tokens,
            "counter": self.token_counter,
            "config": request.config,
        }

    def _release(
        self, query: str, docs: list[Document], request: Request, thread: str | None
    ) -> Released:
        return release(query, docs, **self._released_args(request, thread))

    async def _arelease(
        self, query: str, docs: list[Document], request: Request, thread: str | None
    ) -> Released:
        return await arelease(query, docs, **self._released_args(request, thread))

    # -- steps 2 and 3: the query and the search; a restricted turn's safe summary -------------
    def retrieve(self, clean: list[BaseMessage], request: Request) -> Retrieval:
        """The retrieval query, then, on an open turn, every source searched and reranked.

        A restricted turn is searched by :meth:`summarize`, so that its chunks never leave it.
        """
        started = time.time()
        got = Retrieval(self._query(clean, request), Retrieved(), request, started=started)
        if request.restricted or not _searches(got):
            return got
        return _opened(got, self._search(got.query.query or "", request, self._spec(request)))

    async def aretrieve(self, clean: list[BaseMessage], request: Request) -> Retrieval:
        """Async twin of :meth:`retrieve`."""
        started, settings = time.time(), request.settings
        how = await aquery_for(clean, settings, config=request.config, headers=self.strip_headers)
        got = Retrieval(how, Retrieved(), request, started=started)
        if request.restricted or not _searches(got):
            return got
        return _opened(got, await self._asearch(how.query or "", request, self._spec(request)))

    def summarize(self, clean: list[BaseMessage], got: Retrieval) -> Retrieval:
        """A restricted turn: search, then release the chunks through the boundary, in one step.

        The raw chunks live only inside this call: the result holds what the boundary
        released and the failed sources. An open turn is returned as it is.
        """
        if not got.restricted or not _searches(got):
            return got
        request, query = got.request, got.query.query or ""
        found = _top(got, self._search(query, request, self._spec(request))).found
        thread, docs = _remember(clean, got, found), found.documents
        released = self._release(query, docs, request, thread) if docs else None
        return replace(got, found=Retrieved(errors=found.errors), released=released)

    async def asummarize(self, clean: list[BaseMessage], got: Retrieval) -> Retrieval:
        """Async twin of :meth:`summarize`."""
        if not got.restricted or not _searches(got):
            return got
        request, query = got.request, got.query.query or ""
        found = _top(got, await self._asearch(query, request, self._spec(request))).found
        thread, docs = _remember(clean, got, found), found.documents
        released = await self._arelease(query, docs, request, thread) if docs else None
        return replace(got, found=Retrieved(errors=found.errors), released=released)

    def _query(self, clean: list[BaseMessage], request: Request) -> TurnQuery:
        return query_for(clean, request.settings, config=request.config, headers=self.strip_headers)

    def _render(self, clean: list[BaseMessage], got: Retrieval) -> _Rendered:
        settings, query = got.request.settings, got.query.query
        if not self.blocks or not settings.enabled or query is None:
            return [], []
        return render_blocks(
            self.blocks, query=query, messages=clean, config=got.request.config,
            on_error=settings.on_error,
        )  # fmt: skip

    async def _arender(self, clean: list[BaseMessage], got: Retrieval) -> _Rendered:
        settings, query = got.request.settings, got.query.query
        if not self.blocks or not settings.enabled or query is None:
            return [], []
        return await arender_blocks(
            self.blocks, query=query, messages=clean, config=got.request.config,
            on_error=settings.on_error,
        )  # fmt: skip

    def kb_meta(self, *, restricted: bool, flags: SourceFlags | None = None) -> str:
        """The knowledge-base list (cached; restricted mode shows names and routing data only)."""
        if restricted not in self._kb_meta:
            try:
                infos = [i for kb in self.knowledge_bases if (i := getattr(kb, "info", None))]
            except Exception as exc:
                logger.warning(
                    "knowledge-base list unavailable (%s); block left out", type(exc).__name__
                )
                return ""
            if restricted:
                infos = [_routing(info, flags) for info in infos]
                self._kb_meta[restricted] = safe_kb_meta(infos) if infos else ""
            else:
                self._kb_meta[restricted] = format_kb_meta(infos)
        return self._kb_meta[restricted]

    def _around(
        self, request: Request
    ) -> tuple[list[tuple[str, str | None]], list[tuple[str, str | None]]]:
        settings = request.settings
        before: list[tuple[str, str | None]] = []
        if settings.include_kb_meta:
            before.append(
                ("kb_meta", self.kb_meta(restricted=settings.restricted, flags=request.flags))
            )
        config = ensure_config(request.config)
        after: list[tuple[str, str | None]] = [
            ("extra", block if isinstance(block, str) else block(config))
            for block in self.extra_blocks
        ]
        return before, after

    def _assemble(self, got: Retrieval, rendered: _Rendered) -> AssembledContext:
        request, released = got.request, got.released
        settings = request.settings
        blocks, errors = rendered
        restricted = (
            RestrictedKnowledge(released.text, released.summary.decision, released.summary.reason)
            if released is not None
            else None
        )
        docs = [] if request.restricted else got.found.documents
        content = has_content(docs, restricted, blocks)
        every_turn = settings.enabled and settings.include_kb_meta and settings.kb_meta_every_turn
        if not content and every_turn:
            before, _ = self._around(request)
            assembled = meta_alone(
                before,
                max_tokens=settings.max_tokens,
                counter=self.token_counter,
                separator=self.block_separator,
                block_errors=errors,
            )
        else:
            before, after = self._around(request) if content else ([], [])
            assembled = assemble_context(
                docs,
                restricted=restricted,
                blocks=blocks,
                block_errors=errors,
                before=before,
                after=after,
                max_tokens=settings.max_tokens,
                counter=self.token_counter,
                template=self.template,
                priorities={b.name: b.priority for b in self.blocks},
                caps={b.name: b.max_tokens for b in self.blocks},
                knowledge_max_tokens=settings.knowledge_max_tokens,
                order=self.block_order,
                separator=self.block_separator,
            )
        return assembled

    # -- step 6: placement and the manifest ----------------------------------------------------
    def shape(
        self, messages: Sequence[BaseMessage], context: str | None, request: Request
    ) -> tuple[list[BaseMessage], TrimmedHistory | None]:
        """The messages the model receives: history trimmed, ``context`` placed, suffix added."""
        settings = request.settings
        suffix = settings.datetime_suffix if settings.enabled else None
        return shape_turn(
            messages,
            context,
            placement=settings.placement,
            history_max_tokens=settings.history_max_tokens,
            datetime_suffix=suffix,
            token_counter=self.token_counter,
            now=turn_clock(request.config) if suffix else None,
        )

    def _manifest(
        self,
        got: Retrieval,
        assembled: AssembledContext,
        sent: Sequence[BaseMessage],
        trimmed: TrimmedHistory | None,
    ) -> InjectionManifest:
        settings, released, found = got.request.settings, got.released, got.found
        prefix = list(sent[: injection_index(sent, placement=settings.placement)])
        errors = [*got.request.flags.errors, *found.errors]
        errors += [
            error_record("block", str(item.get("error", "")), block=str(item.get("block", "")))
            for item in assembled.dropped
            if item.get("reason") == "error" and "block" in item
        ]
        manifest = InjectionManifest(
            injected=assembled.text is not None,
            citation_ids=list(assembled.citation_ids),
            tokens_used=assembled.tokens,
            placement=settings.placement,
            query=got.query.query,
            prefix_hash=hash_messages(prefix),
            restricted=settings.restricted,
            blocks=list(assembled.blocks),
            errors=errors,
            query_source=got.query.source,
            history=trimmed.to_dict() if trimmed is not None else None,
        )
        if released is not None or settings.restricted:  # only the released fields
            manifest.chunk_ids = list(released.refs) if released else []
            manifest.scores = list(released.scores) if released else []
            hidden = got.request.sensitive_sources
            manifest.sources = [] if hidden else list(released.summary.sources if released else ())
            manifest.dropped = [d for d in assembled.dropped if "block" in d]
            manifest.retrieval_error = found.errors[0]["error"] if found.errors else None
            if released is not None:
                manifest.summary_decision = released.summary.decision
                manifest.summary_reason = released.summary.reason
                manifest.summary_confidence = released.summary.confidence
                manifest.summary_codes = list(released.codes)
            return manifest
        reported = assembled.reported
        manifest.chunk_ids = [chunk_id(d) for d in reported]
        manifest.scores = [float(d.metadata.get("score", 0.0) or 0.0) for d in reported]
        manifest.sources = [str(d.metadata.get("source", "")) for d in reported]
        if any("retrieval_score" in d.metadata for d in found.documents):  # a reranker's
            scores = [float(d.metadata.get("retrieval_score") or 0.0) for d in found.documents]
            manifest.retrieval_scores = scores[: len(reported)]
        manifest.dropped = list(assembled.dropped)
        manifest.retrieval_error = found.error
        return manifest

    def _turn(self, clean: list[BaseMessage], got: Retrieval, rendered: _Rendered) -> PreparedTurn:
        assembled = self._assemble(got, rendered)
        sent, trimmed = self.shape(clean, assembled.text, got.request)
        if not got.restricted:  # a restricted turn's chunks are remembered by summarize
            used = shown_keys(assembled.used, restricted=False)
            remember_shown(got.request.config, clean, sorted(used))
        return PreparedTurn(
            messages=sent,
            query=got.query.query,
            documents=list(assembled.used),
            dynamic_context=assembled.text,
            manifest=self._manifest(got, assembled, sent, trimmed),
            retrieved=got.kept,
            safe_summary=got.released.summary if got.released is not None else None,
        )

    def _logged(self, turn: PreparedTurn, got: Retrieval, surface: str) -> PreparedTurn:
        log_turn(turn.manifest, surface=surface, seconds=max(0.0, time.time() - got.started))
        return turn

    # -- step 4: the blocks, the text, placement and the manifest -------------------------------
    def build_context(
        self, clean: list[BaseMessage], got: Retrieval, *, surface: str = "injector"
    ) -> PreparedTurn:
        """The context blocks, the dynamic_context text, placement and the manifest.

        The manifest is emitted as the ``knowledge_injection`` custom event, and the turn
        logged for ``surface``. ``got`` comes from :meth:`retrieve` (restricted: :meth:`summarize`).
        """
        turn = self._turn(clean, got, self._render(clean, got))
        emit_manifest(turn.manifest, got.request.config)
        return self._logged(turn, got, surface)

    async def abuild_context(
        self, clean: list[BaseMessage], got: Retrieval, *, surface: str = "injector"
    ) -> PreparedTurn:
        """Async twin of :meth:`build_context`."""
        return await self._afinish(clean, got, await self._arender(clean, got), surface)

    async def _afinish(
        self, clean: list[BaseMessage], got: Retrieval, rendered: _Rendered, surface: str
    ) -> PreparedTurn:
        settings = got.request.settings
        if settings.include_kb_meta and settings.restricted not in self._kb_meta:
            # the first read of the knowledge bases' info is I/O: off the event loop
            flags = got.request.flags
            await asyncio.to_thread(self.kb_meta, restricted=settings.restricted, flags=flags)
        turn = self._turn(clean, got, rendered)
        await aemit_manifest(turn.manifest, got.request.config)
        return self._logged(turn, got, surface)

    # -- one whole turn ------------------------------------------------------------------------
    def prepare(
        self, messages: Sequence[BaseMessage], request: Request, *, surface: str = "injector"
    ) -> PreparedTurn:
        """Run one turn, every step in one call (emits the manifest, logs the turn)."""
        clean = self.clean(messages, request)
        got = self.retrieve(clean, request)
        if got.restricted:
            got = self.summarize(clean, got)
        return self.build_context(clean, got, surface=surface)

    async def aprepare(
        self, messages: Sequence[BaseMessage], request: Request, *, surface: str = "injector"
    ) -> PreparedTurn:
        """Async twin of :meth:`prepare`: a restricted turn's blocks render while it summarizes."""
        clean = self.clean(messages, request)
        got = await self.aretrieve(clean, request)
        if not got.restricted:
            return await self.abuild_context(clean, got, surface=surface)
        summary, blocks = self.asummarize(clean, got), self._arender(clean, got)
        got, rendered = await asyncio.gather(summary, blocks)
        return await self._afinish(clean, got, rendered, surface)

    # -- the knowledge_base_search tool --------------------------------------------------------
    def search(
        self,
        query: str,
        request: Request,
        *,
        k: int | None = None,
        filter: Any = None,
        skip: Sequence[str] = (),
        thread: str | None = None,
    ) -> Found:
        """The tool's search: every source, the reranker, what was shown skipped, the boundary."""
        wanted = k or request.settings.top_k
        spec = self._spec(request, wanted + len(skip), filter)
        found, request = self._searched(query, request, spec)
        docs = _fresh(found.documents, set(skip), wanted, request.restricted)
        released = self._release(query, docs, request, thread) if request.restricted else None
        return Found(docs, released, found)

    async def asearch(
        self,
        query: str,
        request: Request,
        *,
        k: int | None = None,
        filter: Any = None,
        skip: Sequence[str] = (),
        thread: str | None = None,
    ) -> Found:
        """Async twin of :meth:`search`."""
        wanted = k or request.settings.top_k
        spec = self._spec(request, wanted + len(skip), filter)
        found, request = await self._asearched(query, request, spec)
        docs = _fresh(found.documents, set(skip), wanted, request.restricted)
        released = (
            await self._arelease(query, docs, request, thread) if request.restricted else None
        )
        return Found(docs, released, found)

    # -- recording the finished turn -----------------------------------------------------------
    @property
    def records_turns(self) -> bool:
        """Whether a block records finished turns (an ``EpisodicMemory``)."""
        return any(callable(getattr(b, "record_turn", None)) for b in self.blocks)

    def record_turn(self, messages: Sequence[BaseMessage], request: Request) -> list[str]:
        """Store the finished turn in every block that records (injections stripped first)."""
        if not request.settings.enabled or not self.records_turns:
            return []
        clean = strip_injected(list(messages), headers=self.strip_headers)
        return record_blocks_turn(
            self.blocks, clean, config=request.config, on_error=request.settings.on_error
        )

    async def arecord_turn(self, messages: Sequence[BaseMessage], request: Request) -> list[str]:
        """Async twin of :meth:`record_turn`."""
        if not request.settings.enabled or not self.records_turns:
            return []
        clean = strip_injected(list(messages), headers=self.strip_headers)
        return await arecord_blocks_turn(
            self.blocks, clean, config=request.config, on_error=request.settings.on_error
        )


@dataclass
class Found:
    """What the tool's search found: the fresh documents, or what was released of them."""

    documents: list[Document]
    released: Released | None
    retrieved: Retrieved


def sealed_turn(request: Request, found: Retrieved) -> Request:
    """An open turn whose sources returned sealed text: restricted, sources hidden (logged)."""
    logger.warning(
        "knowledge source(s) %s returned sealed text in a turn their flags call open: "
        "the turn is restricted", ", ".join(repr(name) for name in found.sealed),
    )  # fmt: skip
    codes = tuple({"stage": "flags", "error": "sealed_text", "source": n} for n in found.sealed)
    flags = combine([request.flags, SourceFlags(True, True, errors=codes)])
    settings = request.settings.model_copy(update={"restricted": True})
    return Request(settings, request.config, flags, True, request.deadline)


def shown_keys(docs: Sequence[Document], restricted: bool) -> set[str]:
    """Every chunk of ``docs`` (a merged result holds several), as the tool compares them.

    Restricted: keyed references, as the manifest and the tool's artifact show them.
    """
    ids = {str(i) for d in docs for i in (d.metadata.get("chunk_ids") or [chunk_id(d)])}
    return {chunk_ref(i) for i in ids} if restricted else ids


def _fresh(
    docs: Sequence[Document], seen: set[str], wanted: int, restricted: bool
) -> list[Document]:
    """The documents none of whose chunks was shown yet this turn."""
    return [d for d in docs if not shown_keys([d], restricted) & seen][:wanted]


def _routing(info: Any, flags: SourceFlags | None) -> dict[str, Any]:
    """A knowledge base's name, id and routing data (never its description).

    Routing keywords are the owner's ``routing_keywords``, else the owner's topics
    (never topics derived from the content).
    """
    get = info.get if isinstance(info, Mapping) else lambda k, d=None: getattr(info, k, d)
    topics = () if get("topics_derived") else (get("topics") or ())
    keywords = get("routing_keywords") or (flags.routing_keywords if flags else ()) or topics
    return {
        "name": get("name"),
        "id": get("id"),
        "routing_hint": get("routing_hint") or (flags.routing_hint if flags else ""),
        "routing_keywords": keywords,
    }


def check_system_prompt(system_prompt: Any) -> None:
    """Refuse a ``system_prompt`` that is not a string at construction, not at the first turn."""
    if system_prompt is not None and not isinstance(system_prompt, str):
        msg = f"system_prompt must be a string or None, got {type(system_prompt).__name__}"
        raise ConfigurationError(msg, option="system_prompt", value=system_prompt)


def pipeline_for(
    knowledge_base: Any,
    *,
    settings: KnowledgeSettings | None = None,
    summarizer_model: Any = None,
    blocks: Sequence[ContextBlock] = (),
    options: dict[str, Any] | None = None,
) -> KnowledgePipeline:
    """The pipeline of a surface: built, or the one a ``KnowledgeInjector`` carries.

    Raises:
        ConfigurationError: ``knowledge_base`` is a ready injector and settings, options,
            a summarizer or blocks are given besides (they belong on it).
    """
    options = options or {}
    ready = getattr(knowledge_base, "pipeline", None)
    if isinstance(ready, KnowledgePipeline):
        values = {"settings": settings, "summarizer_model": summarizer_model}
        values["blocks"] = tuple(blocks) or None
        given = [name for name, value in values.items() if value is not None] + sorted(options)
        if given:
            msg = (
                f"{given[0]!r} cannot be given with a ready KnowledgeInjector: set it on the "
                "injector itself"
            )
            raise ConfigurationError(msg, option=given[0])
        return ready
    return KnowledgePipeline(
        knowledge_base,
        settings=settings,
        summarizer_model=summarizer_model,
        blocks=blocks,
        **options,
    )
