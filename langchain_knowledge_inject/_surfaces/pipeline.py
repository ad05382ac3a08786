"""The one turn pipeline every surface runs: request, query, search, release, blocks, placement.

:class:`KnowledgePipeline` holds what a surface was configured with (the sources,
the settings, the context blocks, the summarizer, the template and token counter)
and runs one turn in a fixed order, each step once:

1. :meth:`~KnowledgePipeline.request`: the request's settings (``configurable`` and the
   runtime context, parsed once) and whether it is restricted, from the flags stored
   with each source's data (read off the event loop on the async path), the surface's
   own flag, a restricted host, and the request;
2. the retrieval query (the current message, the follow-up heuristic or the query
   model), computed once;
3. every source searched side by side, degrading per source
   (:mod:`~langchain_knowledge_inject._turn.retrieval`), then the reranker;
4. a restricted turn's chunks go through the one boundary
   (:func:`~langchain_knowledge_inject._restricted.boundary.release`), with the
   summaries already released in the same thread, and only its typed fields go on;
5. the context blocks, one token budget, the text
   (:func:`~langchain_knowledge_inject._turn.assemble.assemble_context`);
6. placement, history trimming and the datetime suffix, once
   (:func:`~langchain_knowledge_inject._turn.conversation.shape_turn`), and the manifest.

The ``knowledge_base_search`` tool runs steps 1, 3 and 4 through :meth:`search`. Sync
and async share every step but the I/O, which is written twice; one store deadline a turn.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, HumanMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableConfig, ensure_config

from langchain_knowledge_inject._restricted.boundary import (
    Released,
    SafeSummary,
    arelease,
    chunk_ref,
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
from langchain_knowledge_inject._store.flags import raw_access
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
    underlying,
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
_LEDGER_TURNS = 32
_LEDGER_THREADS = 4096


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
class _Context:
    """Steps 2-5 of a turn: what placement and the manifest need."""

    query: TurnQuery
    retrieved: Retrieved
    retrieval_scores: list[float]
    released: Released | None
    assembled: AssembledContext
    request: Request


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


_RECENT = Recent(_LEDGER_THREADS)


def released_earlier(thread: str | None) -> list[SafeSummary]:
    """The summaries released earlier in ``thread`` (at most the last 32)."""
    return list(_RECENT.get(f"released:{thread}" if thread else None, ()))


def remember_released(thread: str | None, released: Released | None) -> None:
    """Add an ``answer`` to what ``thread`` has released."""
    if thread is None or released is None or released.summary.decision != "answer":
        return
    earlier = released_earlier(thread)[-(_LEDGER_TURNS - 1) :]
    _RECENT.put(f"released:{thread}", (*earlier, released.summary))


def _turn_key(config: RunnableConfig | None, messages: Sequence[BaseMessage]) -> str | None:
    """One user turn of one conversation: its thread and its current user message."""
    thread = thread_key(config, messages)
    index = current_user_index(messages)
    if thread is None or index is None:
        return None
    current = messages[index]
    text = str(current.id or current.content)
    return f"shown:{thread}#" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def remember_shown(
    config: RunnableConfig | None, messages: Sequence[BaseMessage], ids: Sequence[str]
) -> None:
    """Remember the chunk ids injected this turn (the search tool skips them)."""
    _RECENT.put(_turn_key(config, messages), frozenset(ids))


def shown_this_turn(
    config: RunnableConfig | None, messages: Sequence[BaseMessage]
) -> frozenset[str]:
    """The chunk ids injected this turn in this process (see :func:`remember_shown`)."""
    return _RECENT.get(_turn_key(config, messages), frozenset())


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
        self.knowledge_bases = tuple(underlying(s) for s in self.sources)
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
        timeouts = [getattr(kb, "timeout", None) for kb in self.knowledge_bases]
        self.timeout = max((t for t in timeouts if isinstance(t, (int, float))), default=None)

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

    def request(self, config: RunnableConfig | None = None, *, context: Any = None) -> Request:
        """Resolve one request: settings, and whether it is restricted (reads stored flags).

        Args:
            config: The run's config (``configurable`` overrides).
            context: The runtime context (default: the running graph's ``runtime.context``).

        Raises:
            ConfigurationError: An override is not allowed.
        """
        deadline = None if self.timeout is None else Deadline(self.timeout)
        with within(deadline):
            return self._request(config, context, self._flags(), deadline)

    async def arequest(
        self, config: RunnableConfig | None = None, *, context: Any = None
    ) -> Request:
        """Async twin of :meth:`request`: the stored flags are read in a worker thread."""
        if context is None:
            context = _runtime_context()  # read here: the worker thread has no runtime
        deadline = None if self.timeout is None else Deadline(self.timeout)
        with within(deadline):
            return self._request(config, context, await asyncio.to_thread(self._flags), deadline)

    def turn_deadline(self, request: Request) -> AbstractContextManager[Deadline | None]:
        """The turn's one deadline (the largest ``timeout``): enter it in each step on the store."""
        return within(request.deadline)

    # -- steps 2-5 -----------------------------------------------------------------------------
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
        return SearchSpec(fetch, s.min_score, filter, s.mode, s.tenant_id)

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
        settings = request.settings
        with raw_access() if request.restricted else nullcontext():
            found = search_sources(self.sources, query, spec, **self._search_args(request))
            failure: Exception | None = None
            try:
                found.documents = rerank(settings.reranker, query, found.documents)
            except Exception as exc:
                failure = exc
        if failure is not None:  # raised outside the handler: no __context__ to carry raw text
            _rerank_failed(failure, found, settings.on_error, restricted=request.restricted)
        return found

    async def _asearch(self, query: str, request: Request, spec: SearchSpec) -> Retrieved:
        settings = request.settings
        with raw_access() if request.restricted else nullcontext():
            found = await asearch_sources(self.sources, query, spec, **self._search_args(request))
            failure: Exception | None = None
            try:
                found.documents = await arerank(settings.reranker, query, found.documents)
            except Exception as exc:
                failure = exc
        if failure is not None:  # raised outside the handler: no __context__ to carry raw text
            _rerank_failed(failure, found, settings.on_error, restricted=request.restricted)
        return found

    def _released_args(self, request: Request, thread: str | None) -> dict[str, Any]:
        host = current_host()
        model = self.summarizer_model or (host.summarizer_model if host else None)
        return {
            "model": model,
            "sensitive_sources": request.sensitive_sources,
            "earlier": released_earlier(thread),
            "max_tokens": request.settings.max_tokens,
            "counter": self.token_counter,
            "config": request.config,
        }

    def _top(self, found: Retrieved, k: int) -> tuple[list[Document], list[float]]:
        """The best ``k`` after reranking, and their retrieval scores (with a reranker)."""
        docs = found.documents[:k]
        if not any("retrieval_score" in d.metadata for d in docs):
            return docs, []
        return docs, [float(d.metadata.get("retrieval_score") or 0.0) for d in docs]

    def _query(self, clean: list[BaseMessage], request: Request) -> TurnQuery:
        return query_for(clean, request.settings, config=request.config, headers=self.strip_headers)

    def _context(self, clean: list[BaseMessage], request: Request) -> _Context:
        settings = request.settings
        how = self._query(clean, request)
        found, released, scores = Retrieved(), None, list[float]()
        if how.query is not None and settings.retrieval != "tool":
            found = self._search(how.query, request, self._spec(request))
            found.documents, scores = self._top(found, settings.top_k)
            if request.restricted and found.documents:
                thread = thread_key(request.config, clean)
                released = release(
                    how.query, found.documents, **self._released_args(request, thread)
                )
                remember_released(thread, released)
        rendered = self._render(settings, how.query, clean, request.config)
        return self._assemble(how, found, scores, released, rendered, request)

    async def _acontext(self, clean: list[BaseMessage], request: Request) -> _Context:
        settings = request.settings
        if settings.include_kb_meta and settings.restricted not in self._kb_meta:
            # the first read of the knowledge bases' info is I/O: off the event loop
            await asyncio.to_thread(
                self.kb_meta, restricted=settings.restricted, flags=request.flags
            )
        how = await aquery_for(clean, settings, config=request.config, headers=self.strip_headers)
        found, released, scores = Retrieved(), None, list[float]()
        rendering = functools.partial(self._arender, settings, how.query, clean, request.config)
        if how.query is not None and settings.retrieval != "tool":
            found = await self._asearch(how.query, request, self._spec(request))
            found.documents, scores = self._top(found, settings.top_k)
            if request.restricted and found.documents:
                thread = thread_key(request.config, clean)
                summary = arelease(
                    how.query, found.documents, **self._released_args(request, thread)
                )
                released, rendered = await asyncio.gather(summary, rendering())
                remember_released(thread, released)
                return self._assemble(how, found, scores, released, rendered, request)
        return self._assemble(how, found, scores, released, await rendering(), request)

    def _render(
        self,
        settings: KnowledgeSettings,
        query: str | None,
        messages: Sequence[BaseMessage],
        config: RunnableConfig | None,
    ) -> tuple[list[tuple[str, str | None]], list[dict[str, Any]]]:
        if not self.blocks or not settings.enabled or query is None:
            return [], []
        return render_blocks(
            self.blocks, query=query, messages=messages, config=config, on_error=settings.on_error
        )

    async def _arender(
        self,
        settings: KnowledgeSettings,
        query: str | None,
        messages: Sequence[BaseMessage],
        config: RunnableConfig | None,
    ) -> tuple[list[tuple[str, str | None]], list[dict[str, Any]]]:
        if not self.blocks or not settings.enabled or query is None:
            return [], []
        return await arender_blocks(
            self.blocks, query=query, messages=messages, config=config, on_error=settings.on_error
        )

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

    def _assemble(
        self,
        how: TurnQuery,
        found: Retrieved,
        scores: list[float],
        released: Released | None,
        rendered: tuple[list[tuple[str, str | None]], list[dict[str, Any]]],
        request: Request,
    ) -> _Context:
        settings = request.settings
        blocks, errors = rendered
        restricted = (
            RestrictedKnowledge(released.text, released.summary.decision, released.summary.reason)
            if released is not None
            else None
        )
        docs = [] if request.restricted else found.documents
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
        return _Context(how, found, scores, released, assembled, request)

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
        self, ctx: _Context, sent: Sequence[BaseMessage], trimmed: TrimmedHistory | None
    ) -> InjectionManifest:
        settings, assembled, released = ctx.request.settings, ctx.assembled, ctx.released
        prefix = list(sent[: injection_index(sent, placement=settings.placement)])
        errors = [*ctx.request.flags.errors, *ctx.retrieved.errors]
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
            query=ctx.query.query,
            prefix_hash=hash_messages(prefix),
            restricted=settings.restricted,
            blocks=list(assembled.blocks),
            errors=errors,
            query_source=ctx.query.source,
            history=trimmed.to_dict() if trimmed is not None else None,
        )
        if released is not None or settings.restricted:  # only the released fields
            manifest.chunk_ids = list(released.refs) if released else []
            manifest.scores = list(released.scores) if released else []
            hidden = ctx.request.sensitive_sources
            manifest.sources = [] if hidden else list(released.summary.sources if released else ())
            manifest.dropped = [d for d in assembled.dropped if "block" in d]
            manifest.retrieval_error = (
                ctx.retrieved.errors[0]["error"] if ctx.retrieved.errors else None
            )
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
        manifest.retrieval_scores = ctx.retrieval_scores[: len(reported)]
        manifest.dropped = list(assembled.dropped)
        manifest.retrieval_error = ctx.retrieved.error
        return manifest

    def _turn(self, clean: list[BaseMessage], ctx: _Context) -> PreparedTurn:
        sent, trimmed = self.shape(clean, ctx.assembled.text, ctx.request)
        manifest = self._manifest(ctx, sent, trimmed)
        shown = ctx.retrieved.documents if ctx.request.restricted else ctx.assembled.used
        remember_shown(ctx.request.config, clean, sorted(shown_keys(shown, ctx.request.restricted)))
        if ctx.request.restricted:
            retrieved = ctx.released.stubs() if ctx.released is not None else []
        else:
            retrieved = list(ctx.retrieved.documents)
        return PreparedTurn(
            messages=sent,
            query=ctx.query.query,
            documents=list(ctx.assembled.used),
            dynamic_context=ctx.assembled.text,
            manifest=manifest,
            retrieved=retrieved,
            safe_summary=ctx.released.summary if ctx.released is not None else None,
        )

    # -- one whole turn ------------------------------------------------------------------------
    def prepare(
        self,
        messages: Sequence[BaseMessage],
        request: Request,
        *,
        surface: str = "injector",
        emit: bool = True,
    ) -> PreparedTurn:
        """Run one turn: query, search, release, blocks, placement, manifest (emitted, logged)."""
        start = time.perf_counter()
        clean = self.clean(messages, request)
        with self.turn_deadline(request):
            turn = self._turn(clean, self._context(clean, request))
        if emit:
            emit_manifest(turn.manifest, request.config)
        log_turn(turn.manifest, surface=surface, seconds=time.perf_counter() - start)
        return turn

    async def aprepare(
        self,
        messages: Sequence[BaseMessage],
        request: Request,
        *,
        surface: str = "injector",
        emit: bool = True,
    ) -> PreparedTurn:
        """Async twin of :meth:`prepare`."""
        start = time.perf_counter()
        clean = self.clean(messages, request)
        with self.turn_deadline(request):
            turn = self._turn(clean, await self._acontext(clean, request))
        if emit:
            await aemit_manifest(turn.manifest, request.config)
        log_turn(turn.manifest, surface=surface, seconds=time.perf_counter() - start)
        return turn

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
        with self.turn_deadline(request):
            found = self._search(query, request, self._spec(request, wanted + len(skip), filter))
        docs = _fresh(found.documents, set(skip), wanted, request.restricted)
        released = None
        if request.restricted:
            released = release(query, docs, **self._released_args(request, thread))
            remember_released(thread, released)
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
        with self.turn_deadline(request):
            spec = self._spec(request, wanted + len(skip), filter)
            found = await self._asearch(query, request, spec)
        docs = _fresh(found.documents, set(skip), wanted, request.restricted)
        released = None
        if request.restricted:
            released = await arelease(query, docs, **self._released_args(request, thread))
            remember_released(thread, released)
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
