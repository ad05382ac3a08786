"""``KnowledgeInjector``: the Runnable that puts retrieved knowledge in front of the model.

Each turn: resolve the settings (constructor values, then per-request overrides
from ``config["configurable"]``), retrieve with the text of the current user
message, render the context blocks (procedure, past-conversation snippets, user
facts), build the dynamic_context text (all blocks under one token budget, the
knowledge block cut at chunk boundaries), place it, and emit the manifest. The
input messages are never changed; ``strip_injected(output) == input``.

Settings: one :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`
(``settings=``, or its fields as keyword arguments), with per-request overrides
from ``config["configurable"]`` parsed by ``KnowledgeSettings.with_overrides``
(see :mod:`~langchain_knowledge_inject.settings` for the keys). The sources: a
``KnowledgeBase``, a LangChain retriever or vector store, or a mix (see
:mod:`~langchain_knowledge_inject.turn.sources`); each search runs as a retriever run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from typing_extensions import Unpack

from langchain_knowledge_inject.errors import (
    ConfigurationError,
    ForkedProcessError,
    RetrievalError,
)
from langchain_knowledge_inject.restricted.scope import (
    knowledge_base_flags,
    redact_documents,
    resolve_restricted,
)
from langchain_knowledge_inject.settings import KnowledgeSettings, SettingsOptions, build_settings
from langchain_knowledge_inject.store.knowledge_base import MAX_QUERY_CHARS
from langchain_knowledge_inject.turn.assemble import (
    BuiltContext,
    ContextParts,
    RestrictedContext,
    RetrievalOutcome,
    TurnContext,
    _chunk_id,
    _coerce_messages,
)
from langchain_knowledge_inject.turn.blocks import (
    ContextBlock,
    _arecord_turn,
    _check_blocks,
    _record_turn,
)
from langchain_knowledge_inject.turn.formatting import KnowledgeBlockTemplate
from langchain_knowledge_inject.turn.manifest import (
    InjectionManifest,
    aemit_manifest,
    emit_manifest,
    error_record,
    hash_messages,
)
from langchain_knowledge_inject.turn.placement import (
    add_knowledge_prompt,
    injection_index,
    place_context,
    retrieval_query,
    strip_injected,
)
from langchain_knowledge_inject.turn.sources import (
    TracedSearch,
    as_sources,
    asearch_one,
    merge_results,
    search_one,
)
from langchain_knowledge_inject.turn.sources import traced as traced_searches
from langchain_knowledge_inject.turn.tokens import TokenCounter, approximate_token_count

if TYPE_CHECKING:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForChainRun,
        CallbackManagerForChainRun,
    )
    from langchain_core.documents import Document
    from langchain_core.runnables.utils import ConfigurableFieldSpec

__all__ = [
    "InjectionConfig",
    "KnowledgeInjector",
    "KnowledgeSettings",
    "RestrictedContext",
    "RetrievalOutcome",
    "TurnContext",
]

logger = logging.getLogger("langchain_knowledge_inject")

ExtraBlock = str | Callable[[RunnableConfig], str | None]
InjectionConfig = KnowledgeSettings
"""Former name of :class:`~langchain_knowledge_inject.settings.KnowledgeSettings` (an alias)."""


class KnowledgeInjector(Runnable[Any, list[BaseMessage]]):
    r"""Retrieve for the current user message and return the messages to send.

    Input: a list of messages (or message-like tuples/dicts), a ``{"messages":
    [...]}`` dict, or a chat ``PromptValue``. Output: the list of messages with
    the dynamic_context injected, so ``prompt | injector | model`` works.
    The system message gets ``knowledge_prompt`` (default
    :data:`KNOWLEDGE_SYSTEM_PROMPT`, the same as the graph and the middleware:
    how to use and cite the knowledge), once, on every turn with injection on, so
    the prefix stays byte-identical; ``knowledge_prompt=None`` leaves it out. When
    nothing relevant is retrieved and no block has anything to add, only that
    prompt is added. Injections of earlier turns found in the input are removed
    first, so they never pile up. In a ``StateGraph(MessagesState)`` of your own,
    use :func:`~langchain_knowledge_inject.integrations.node.create_knowledge_node` rather than
    ``injector | model`` as a node (a node must return a state update).

    Context blocks (``blocks=``; knowledge alone is on by default): a
    ``ProcedureLibrary``, an ``EpisodicMemory``, a ``UserFacts`` (or any
    :class:`~langchain_knowledge_inject.turn.blocks.ContextBlock`) add their blocks to
    the same message, in the order ``[Procedure]``, ``[Retrieved Knowledge]``,
    ``[Past Conversation Snippets]``, ``[User Facts]`` whatever the list order,
    on every turn with a query, retrieval hit or not. Each renders from the query,
    the visible history without injection and the run's config (user id:
    ``configurable["user_id"]``). One ``max_tokens`` budget covers the message:
    caps per block first, then the lowest ``priority`` is cut first (see
    :mod:`~langchain_knowledge_inject.turn.blocks`), snippets and chunks one by one.
    The manifest's ``dropped`` lists each cut chunk (``chunk_id``, ``score``,
    ``source``, ``reason``) and each other shortened block (``block``, ``reason``
    ``"block_cap"``/``"token_budget"``, ``removed``, ``kept``, ``dropped``); a
    failed block is ``{"block", "reason": "error", "error"}`` (raised with
    ``on_error="raise"``). :meth:`record_turn` stores a finished turn in the
    episodic memory; the graph and the middleware call it after the answer.

    Restricted mode (the safe default): knowledge goes through the safe summary,
    never as raw chunks; the summary is cut after every other block and never
    dropped. The procedure (the application's own text), the past-conversation
    snippets and the facts of the same user (their own data) are injected as
    usual. Leave a block out of ``blocks`` where even that is too much.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> from langchain_knowledge_inject.turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
        >>> class TinyKB:  # a KnowledgeBase in real use
        ...     def search(self, query, **kwargs):
        ...         return [Document("Staff get 25 days of leave.", id="c1",
        ...                          metadata={"source": "leave.md", "score": 0.9})]
        ...     async def asearch(self, query, **kwargs):
        ...         return self.search(query, **kwargs)
        >>> injector = KnowledgeInjector(TinyKB(), top_k=3, max_tokens=1500)
        >>> messages = [SystemMessage(KNOWLEDGE_SYSTEM_PROMPT), HumanMessage("Leave days?")]
        >>> out = injector.invoke(messages)
        >>> [m.type for m in out], out[1].content.splitlines()[0]
        (['system', 'human', 'human'], '[Retrieved Knowledge]')
        >>> injector.invoke(messages, {"configurable": {"knowledge_enabled": False}}) == messages
        True
        >>> turn = injector.prepare(messages)  # the same, plus documents and manifest
        >>> turn.manifest.chunk_ids, turn.manifest.sources
        (['c1'], ['leave.md'])
        >>> model = GenericFakeChatModel(messages=iter(["25 days (Source: leave.md)."]))
        >>> (injector | model).invoke(messages).content
        '25 days (Source: leave.md).'

        With user facts (``EpisodicMemory`` and ``ProcedureLibrary`` plug in the same way):

        >>> from langgraph.store.memory import InMemoryStore
        >>> from langchain_knowledge_inject import UserFacts
        >>> facts = UserFacts(InMemoryStore())
        >>> _ = facts.set("u1", "team", "Payroll")
        >>> with_facts = KnowledgeInjector(TinyKB(), blocks=[facts])
        >>> out = with_facts.invoke(messages, {"configurable": {"user_id": "u1"}})
        >>> out[1].content.split("\n\n")[-1]
        '[User Facts]\nteam=Payroll'

    Args:
        knowledge_base: The knowledge source(s): a ``KnowledgeBase``, a LangChain
            ``BaseRetriever`` or ``VectorStore``, or a sequence mixing these (see
            :mod:`~langchain_knowledge_inject.turn.sources`); results of several are merged.
        settings: The :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`
            (``top_k``, ``min_score``, ``mode``, ``tenant_id``, ``placement``,
            ``max_tokens``, ``restricted``, ``on_error``, ``include_kb_meta``,
            ``query_window``, ``knowledge_prompt``). ``restricted`` is also on when a
            bound knowledge base's info says so.
        **options: Fields of ``settings`` given directly (``top_k=3``); they
            override those of ``settings``.
        token_counter: Counts tokens; :func:`approximate_token_count` by default.
        template: The knowledge block template.
        extra_blocks: Blocks added after the other blocks in the same message:
            strings, or callables ``(config) -> str | None`` run every turn
            (user or permission context). They accompany content: with nothing
            retrieved and no other block there is no message at all.
        blocks: Context blocks (:class:`~langchain_knowledge_inject.turn.blocks.ContextBlock`):
            ``ProcedureLibrary``, ``EpisodicMemory``, ``UserFacts`` or your own;
            at most one per name (see above).
        summarizer_model: Restricted mode: the secondary chat model that writes the
            safe summary. Without one, restricted turns fail closed (``refuse`` /
            ``summarizer_error``).

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
        **options: Unpack[SettingsOptions],
    ) -> None:
        self.knowledge_bases: tuple[Any, ...] = as_sources(knowledge_base)
        self._searches = traced_searches(self.knowledge_bases)
        resolved = build_settings(settings, **options)
        self._surface_restricted = resolved.restricted is True
        restricted = resolve_restricted(
            knowledge_bases=knowledge_base_flags(self.knowledge_bases), surface=resolved.restricted
        )
        if restricted != resolved.restricted:
            resolved = resolved.replace(restricted=restricted)
        self.settings: KnowledgeSettings = resolved
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
        self.template = template
        self.extra_blocks: tuple[ExtraBlock, ...] = tuple(extra_blocks)
        self.summarizer_model = summarizer_model
        self.blocks: tuple[ContextBlock, ...] = _check_blocks(blocks)
        self._parts = ContextParts(self)
        self._warned_node = False

    def __repr__(self) -> str:
        names = ", ".join(str(getattr(kb, "name", kb)) for kb in self.knowledge_bases)
        return f"KnowledgeInjector([{names}], {self.config!r})"

    # -- settings and retrieval -------------------------------------------------------
    @property
    def config(self) -> KnowledgeSettings:
        """The constructor's settings (an alias of :attr:`settings`)."""
        return self.settings

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The per-request settings, declared as configurable fields (defaults: the settings)."""
        return self.settings.config_specs()

    def resolve(self, config: RunnableConfig | None) -> KnowledgeSettings:
        """The settings for one request: constructor values plus ``configurable`` overrides.

        The overrides are parsed by ``KnowledgeSettings.with_overrides`` (the one
        parser). Whether the turn is restricted is decided by
        :func:`~langchain_knowledge_inject.restricted.scope.resolve_restricted` from
        the knowledge bases' stored flags (read now), the injector's own flag and
        ``configurable["restricted"]``: any "on" wins.
        """
        settings = self.settings.with_overrides(config)
        restricted = resolve_restricted(
            knowledge_bases=knowledge_base_flags(self.knowledge_bases),
            surface=self._surface_restricted,
            request=((config or {}).get("configurable") or {}).get("restricted"),
        )
        if restricted != settings.restricted:
            settings = settings.model_copy(update={"restricted": restricted})
        return settings

    @staticmethod
    def _search_kwargs(settings: KnowledgeSettings) -> dict[str, Any]:
        return {"k": settings.top_k, "min_score": settings.min_score,
                "mode": settings.mode, "tenant_id": settings.tenant_id}  # fmt: skip

    def retrieve(
        self, messages: Any, settings: KnowledgeSettings, config: RunnableConfig | None = None
    ) -> RetrievalOutcome:
        """Search the knowledge source(s) with the current user message.

        Each source's search is a retriever run under ``config`` (its documents
        are visible to callbacks; in restricted mode only their ids and scores).

        Raises:
            RetrievalError: The search failed and ``settings.on_error == "raise"``.
        """
        query = self._query(messages, settings)
        if query is None:
            return RetrievalOutcome(query=None)
        kwargs = self._search_kwargs(settings)

        restricted = settings.restricted

        def search(traced: TracedSearch) -> list[Document] | Exception:
            try:  # a retriever run under ``config`` (stubs only in restricted mode)
                return search_one(traced, query, kwargs, config=config, restricted=restricted)
            except Exception as exc:  # degraded or raised in _failed
                return exc

        searches = self._searches
        if len(searches) == 1:
            results = [search(searches[0])]
        else:  # side by side: a slow or frozen store does not delay the others
            workers = len(searches)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kinject") as pool:
                results = list(pool.map(search, searches))
        found = [r for r in results if not isinstance(r, Exception)]
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            return self._failed(query, failed, settings, found)
        return RetrievalOutcome(query=query, documents=merge_results(found, settings.top_k))

    async def aretrieve(
        self, messages: Any, settings: KnowledgeSettings, config: RunnableConfig | None = None
    ) -> RetrievalOutcome:
        """Async twin of :meth:`retrieve` (uses ``asearch``)."""
        query = self._query(messages, settings)
        if query is None:
            return RetrievalOutcome(query=None)
        kwargs, restricted = self._search_kwargs(settings), settings.restricted
        results = await asyncio.gather(
            *(
                asearch_one(traced, query, kwargs, config=config, restricted=restricted)
                for traced in self._searches
            ),
            return_exceptions=True,
        )
        found = [r for r in results if not isinstance(r, BaseException)]
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # cancellation, KeyboardInterrupt
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            return self._failed(query, failed, settings, found)
        return RetrievalOutcome(query=query, documents=merge_results(found, settings.top_k))

    @staticmethod
    def _query(messages: Any, settings: KnowledgeSettings) -> str | None:
        """The turn's retrieval query, cut as the knowledge base cuts it (None: no retrieval).

        Cut here too, so that the manifest, the graph state and the custom event
        never carry a megabyte-long message.
        """
        if not settings.enabled:
            return None
        query = retrieval_query(_coerce_messages(messages), window=settings.query_window)
        return query[:MAX_QUERY_CHARS] if query is not None else None

    def _failed(
        self,
        query: str,
        failed: Sequence[Exception],
        settings: KnowledgeSettings,
        found: list[list[Document]],
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
            error=f"{type(exc).__name__}: {exc}",
        )  # fmt: skip

    # -- building the context ------------------------------------------------------------
    def build_context(
        self,
        documents: Sequence[Document],
        settings: KnowledgeSettings,
        *,
        config: RunnableConfig | None = None,
        query: str | None = None,
        messages: Sequence[BaseMessage] = (),
    ) -> tuple[str | None, list[Document], int]:
        """The dynamic_context text for these documents (and the context blocks).

        Args:
            documents: The retrieved chunks, best first.
            settings: This request's settings (:meth:`resolve`).
            config: The run's config (user id for the blocks).
            query: The retrieval query; the blocks render only when it is set.
            messages: The visible history without injection, current message included.

        Returns:
            ``(text, documents shown raw, tokens)``; ``(None, [], 0)`` when
            there is nothing to inject.
        """
        built = self._parts.build(
            documents, settings, config=config, query=query, messages=messages
        )
        return built.text, built.used, built.tokens

    async def abuild_context(
        self,
        documents: Sequence[Document],
        settings: KnowledgeSettings,
        *,
        config: RunnableConfig | None = None,
        query: str | None = None,
        messages: Sequence[BaseMessage] = (),
    ) -> tuple[str | None, list[Document], int]:
        """Async twin of :meth:`build_context` (summary and blocks are awaited)."""
        built = await self._parts.abuild(
            documents, settings, config=config, query=query, messages=messages
        )
        return built.text, built.used, built.tokens

    def safe_summary(
        self,
        query: str | None,
        documents: Sequence[Document],
        config: RunnableConfig | None = None,
    ) -> RestrictedContext:
        """Restricted mode: the safe-summary block shown instead of raw chunks.

        Calls :func:`~langchain_knowledge_inject.restricted.summary.summarize_chunks` with
        ``summarizer_model``; fails closed (a ``refuse`` / ``summarizer_error``
        block) without a model or on any error, never returning raw chunks.
        """
        return self._parts.restricted(query, documents, config)

    async def asafe_summary(
        self,
        query: str | None,
        documents: Sequence[Document],
        config: RunnableConfig | None = None,
    ) -> RestrictedContext:
        """Async twin of :meth:`safe_summary`."""
        return await self._parts.arestricted(query, documents, config)

    def finish_turn(
        self,
        messages: Sequence[BaseMessage],
        settings: KnowledgeSettings,
        outcome: RetrievalOutcome,
        *,
        restricted: RestrictedContext | None = None,
        config: RunnableConfig | None = None,
    ) -> TurnContext:
        """Build and place the context of a turn whose retrieval already ran.

        For graphs that run retrieval (and the safe summary) in nodes of their
        own. ``messages`` is the visible history without injection (the context
        blocks read it). ``restricted`` is the safe summary of a restricted turn;
        with it no raw chunk is formatted. No manifest event is emitted: the
        caller does.
        """
        clean = list(messages)
        built = self._parts.build(outcome.documents, settings, config=config, query=outcome.query,
                                  messages=clean, restricted=restricted)  # fmt: skip
        return self._turn(clean, settings, outcome, built)

    async def afinish_turn(
        self,
        messages: Sequence[BaseMessage],
        settings: KnowledgeSettings,
        outcome: RetrievalOutcome,
        *,
        restricted: RestrictedContext | None = None,
        config: RunnableConfig | None = None,
    ) -> TurnContext:
        """Async twin of :meth:`finish_turn` (the blocks render concurrently)."""
        clean = list(messages)
        built = await self._parts.abuild(outcome.documents, settings, config=config,
                                         query=outcome.query, messages=clean,
                                         restricted=restricted)  # fmt: skip
        return self._turn(clean, settings, outcome, built)

    # -- recording the finished turn ------------------------------------------------------
    @property
    def records_turns(self) -> bool:
        """Whether a block records finished turns (an ``EpisodicMemory``)."""
        return any(callable(getattr(b, "record_turn", None)) for b in self.blocks)

    def record_turn(
        self, messages: Sequence[BaseMessage], config: RunnableConfig | None = None
    ) -> list[str]:
        """Store the finished turn at the end of ``messages`` in every block that records.

        Calls ``record_turn(messages, config=config)`` of each block that has one
        (an :class:`~langchain_knowledge_inject.memory.episodic.EpisodicMemory`, which
        records when its ``auto_record`` is on, or per request
        ``configurable["episodic_record"]``, and a user id is set). Injected
        content is stripped first. A failure is logged (``on_error="degrade"``)
        or raised as :class:`RetrievalError` (``on_error="raise"``).

        Returns:
            The ids of the stored episodes.
        """
        settings = self.resolve(config)
        clean = strip_injected(_coerce_messages(messages))
        return _record_turn(self.blocks, clean, config=config, on_error=settings.on_error)

    async def arecord_turn(
        self, messages: Sequence[BaseMessage], config: RunnableConfig | None = None
    ) -> list[str]:
        """Async twin of :meth:`record_turn` (uses the blocks' ``arecord_turn``)."""
        settings = self.resolve(config)
        clean = strip_injected(_coerce_messages(messages))
        return await _arecord_turn(self.blocks, clean, config=config, on_error=settings.on_error)

    # -- one turn -----------------------------------------------------------------------
    def prepare(self, messages: Any, config: RunnableConfig | None = None) -> TurnContext:
        """Run one turn: resolve, retrieve, build the context, place it, emit the manifest."""
        settings = self.resolve(config)
        clean = self._with_prompt(strip_injected(_coerce_messages(messages)), settings)
        outcome = self.retrieve(clean, settings, config)
        built = self._parts.build(
            outcome.documents, settings, config=config, query=outcome.query, messages=clean
        )
        turn = self._turn(clean, settings, outcome, built)
        emit_manifest(turn.manifest, config)
        return turn

    async def aprepare(self, messages: Any, config: RunnableConfig | None = None) -> TurnContext:
        """Async twin of :meth:`prepare`."""
        settings = self.resolve(config)
        clean = self._with_prompt(strip_injected(_coerce_messages(messages)), settings)
        outcome = await self.aretrieve(clean, settings, config)
        built = await self._parts.abuild(
            outcome.documents, settings, config=config, query=outcome.query, messages=clean
        )
        turn = self._turn(clean, settings, outcome, built)
        await aemit_manifest(turn.manifest, config)
        return turn

    @staticmethod
    def _with_prompt(messages: list[BaseMessage], settings: KnowledgeSettings) -> list[BaseMessage]:
        """Add ``knowledge_prompt`` to the system message (once; not when injection is off)."""
        if not settings.enabled or not messages:
            return messages
        return add_knowledge_prompt(messages, settings.knowledge_prompt)

    def _turn(
        self,
        clean: list[BaseMessage],
        settings: KnowledgeSettings,
        outcome: RetrievalOutcome,
        built: BuiltContext,
    ) -> TurnContext:
        placement = settings.placement
        prefix = clean[: injection_index(clean, placement=placement)]
        out = place_context(clean, built.text, placement=placement) if built.text else clean
        retrieved = list(outcome.documents)
        sources = [str(d.metadata.get("source", "")) for d in built.reported]
        if settings.restricted:  # ids and scores only; no source names when they are sensitive
            hidden = self._parts.sensitive_sources()
            retrieved = redact_documents(retrieved, sensitive_sources=hidden)
            sources = [] if hidden else sources
        manifest = InjectionManifest(
            injected=built.text is not None,
            chunk_ids=[_chunk_id(d) for d in built.reported],
            scores=[float(d.metadata.get("score", 0.0)) for d in built.reported],
            citation_ids=list(built.citation_ids),
            sources=sources,
            tokens_used=built.tokens,
            placement=placement,
            query=outcome.query,
            prefix_hash=hash_messages(prefix),
            retrieval_error=outcome.error,
            dropped=built.dropped,
            restricted=settings.restricted,
            summary_decision=built.decision,
            summary_reason=built.reason,
            blocks=list(built.blocks),
            errors=_turn_errors(outcome, built),
        )
        return TurnContext(
            messages=out, query=outcome.query, documents=list(built.used),
            dynamic_context=built.text, manifest=manifest, retrieved=retrieved,
        )  # fmt: skip

    # -- Runnable ----------------------------------------------------------------------
    def _warn_if_graph_node(self, input: Any, config: RunnableConfig) -> None:
        """``injector | model`` as a graph node returns a bare message that LangGraph drops."""
        node = (config.get("metadata") or {}).get("langgraph_node")
        if node is None or not isinstance(input, dict) or self._warned_node:
            return
        self._warned_node = True
        logger.warning(
            "KnowledgeInjector got the graph state of node %r as input: if `injector | model` "
            "is the node, its reply is a bare message that LangGraph drops and never reaches "
            "'messages'; use create_knowledge_node(model, knowledge_base) as the node instead",
            node,
        )

    def _messages_out(
        self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> list[BaseMessage]:
        self._warn_if_graph_node(input, config)
        return self.prepare(input, config).messages

    async def _amessages_out(
        self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> list[BaseMessage]:
        self._warn_if_graph_node(input, config)
        return (await self.aprepare(input, config)).messages

    def invoke(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> list[BaseMessage]:
        """Return the messages to send for this turn (traced as a ``KnowledgeInjector`` run)."""
        return self._call_with_config(self._messages_out, input, ensure_config(config))

    async def ainvoke(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> list[BaseMessage]:
        """Async twin of :meth:`invoke`."""
        return await self._acall_with_config(self._amessages_out, input, ensure_config(config))


def _turn_errors(outcome: RetrievalOutcome, built: BuiltContext) -> list[dict[str, str]]:
    """The manifest's ``errors``: what failed and was gone on without, by class only."""
    errors = [error_record("retrieval", outcome.error)] if outcome.error else []
    errors += [
        error_record("block", str(item.get("error", "")), block=str(item.get("block", "")))
        for item in built.dropped
        if item.get("reason") == "error" and "block" in item
    ]
    return errors


def injector_for(
    knowledge_base: Any,
    *,
    settings: KnowledgeSettings | None = None,
    summarizer_model: Any = None,
    blocks: Sequence[ContextBlock] = (),
    options: dict[str, Any] | None = None,
) -> KnowledgeInjector:
    """The injector of a surface (graph, middleware, node): built, or the one given.

    Raises:
        ConfigurationError: ``knowledge_base`` is a ready injector and settings,
            options, a summarizer or blocks are given besides (they belong on it).
    """
    options = options or {}
    if isinstance(knowledge_base, KnowledgeInjector):
        given = [n for n, v in (("settings", settings), ("summarizer_model", summarizer_model),
                                ("blocks", tuple(blocks) or None)) if v is not None]  # fmt: skip
        given += sorted(options)
        if given:
            msg = (
                f"{given[0]!r} cannot be given with a ready KnowledgeInjector: set it on the "
                "injector itself"
            )
            raise ConfigurationError(msg, option=given[0])
        return knowledge_base
    return KnowledgeInjector(
        knowledge_base,
        settings=settings,
        summarizer_model=summarizer_model,
        blocks=blocks,
        **options,
    )
