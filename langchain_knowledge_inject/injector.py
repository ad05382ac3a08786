"""``KnowledgeInjector``: the Runnable that puts retrieved knowledge in front of the model.

Each turn: resolve the settings (constructor values, then per-request overrides
from ``config["configurable"]``), retrieve with the text of the current user
message, render the context blocks (procedure, past-conversation snippets, user
facts), build the dynamic_context text (all blocks under one token budget, the
knowledge block cut at chunk boundaries), place it, and emit the manifest. The
input messages are never changed; ``strip_injected(output) == input``.

Per-request overrides (``config["configurable"]``; a ``None`` value means no
override, anything invalid raises ``ConfigurationError``):

==================== ===========================================================
``knowledge_enabled`` ``False``: no retrieval and no injection (no block either)
``top_k``             chunks to retrieve (>= 1)
``min_score``         drop chunks scoring below this, in [0, 1]
``tenant_id``         the tenant partition to search
``placement``         ``"dynamic_context"``, ``"postfix"`` or ``"system"``
``restricted``        ``True`` switches restricted mode on; it cannot be switched off
                      per request where the injector or a knowledge base has it on
``query_window``      earlier user turns added to the query of a follow-up (0-10)
==================== ===========================================================
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langchain_knowledge_inject._context import (
    BuiltContext,
    ContextParts,
    RestrictedContext,
    RetrievalOutcome,
    TurnContext,
    _as_knowledge_bases,
    _chunk_id,
    _coerce_messages,
)
from langchain_knowledge_inject.blocks import (
    ContextBlock,
    _arecord_turn,
    _check_blocks,
    _record_turn,
)
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    ForkedProcessError,
    RetrievalError,
)
from langchain_knowledge_inject.formatting import KnowledgeBlockTemplate
from langchain_knowledge_inject.knowledge_base import MAX_QUERY_CHARS
from langchain_knowledge_inject.manifest import (
    InjectionManifest,
    aemit_manifest,
    emit_manifest,
    error_record,
    hash_messages,
)
from langchain_knowledge_inject.placement import (
    Placement,
    injection_index,
    place_context,
    retrieval_query,
    strip_injected,
)
from langchain_knowledge_inject.restricted_scope import (
    knowledge_base_flags,
    redact_documents,
    resolve_restricted,
)
from langchain_knowledge_inject.tokens import TokenCounter, approximate_token_count

if TYPE_CHECKING:
    from langchain_core.documents import Document

__all__ = [
    "InjectionConfig",
    "KnowledgeInjector",
    "RestrictedContext",
    "RetrievalOutcome",
    "TurnContext",
]

logger = logging.getLogger("langchain_knowledge_inject")

ExtraBlock = str | Callable[[RunnableConfig], str | None]
_OVERRIDES = {
    "knowledge_enabled": "enabled",
    "top_k": "top_k",
    "min_score": "min_score",
    "tenant_id": "tenant_id",
    "placement": "placement",
    "restricted": "restricted",
    "query_window": "query_window",
}


class InjectionConfig(BaseModel):
    """Settings of one injection turn, validated (invalid values raise ``ConfigurationError``).

    Example:
        >>> InjectionConfig(top_k=2).with_overrides({"configurable": {"top_k": 6}}).top_k
        6
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    enabled: bool = True
    """``False``: no retrieval, no injection."""
    top_k: int = Field(default=4, ge=1, le=100)
    """Chunks to retrieve per knowledge base."""
    min_score: float | None = Field(default=None, ge=0.0, le=1.0)
    """Drop chunks scoring below this; ``None`` uses the knowledge base's default."""
    mode: Literal["dense", "keyword", "hybrid"] = "hybrid"
    """Search mode."""
    tenant_id: str | None = Field(default=None, min_length=1)
    """Tenant partition to search; ``None``: the shared partition."""
    placement: Placement = "dynamic_context"
    """Where the context goes (see :mod:`~langchain_knowledge_inject.placement`);
    ``"system"`` defeats provider prompt caching of the history."""
    max_tokens: int = Field(default=2000, ge=1)
    """Token budget of the whole injected text; the knowledge block gets what the other
    blocks leave and is cut at chunk boundaries."""
    restricted: bool = False
    """Restricted mode: the model sees a safe summary, never raw chunks."""
    on_error: Literal["degrade", "raise"] = "degrade"
    """On a retrieval error: go on without knowledge (logged, in the manifest) or raise."""
    include_kb_meta: bool = False
    """Add the ``[Knowledge Bases]`` block (name, id, description, topics)."""
    query_window: int = Field(default=0, ge=0, le=10)
    """Earlier user turns added to the query of a follow-up such as "and abroad?"
    (0: the current message only; see ``placement.retrieval_query``)."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            error = exc.errors()[0]
            option = ".".join(str(p) for p in error["loc"]) or None
            msg = f"Invalid injection setting {option}={error.get('input')!r}: {error['msg']}"
            raise ConfigurationError(msg, option=option, value=error.get("input")) from exc

    def with_overrides(self, config: RunnableConfig | None) -> InjectionConfig:
        """These settings with the per-request overrides of ``config["configurable"]`` applied.

        Keys: ``knowledge_enabled``, ``top_k``, ``min_score``, ``tenant_id``,
        ``placement``, ``restricted``, ``query_window`` (see the module docstring). Other keys are
        ignored; a ``None`` value means no override.

        Raises:
            ConfigurationError: An override has a value that is not allowed.
        """
        configurable = (config or {}).get("configurable") or {}
        updates = {
            name: configurable[key]
            for key, name in _OVERRIDES.items()
            if configurable.get(key) is not None
        }
        if not updates:
            return self
        if "restricted" in updates:  # decided in one place: any "on" wins
            updates["restricted"] = resolve_restricted(
                surface=self.restricted, request=updates["restricted"]
            )
        try:
            return InjectionConfig(**{**self.model_dump(), **updates})
        except ConfigurationError as exc:
            key = next((k for k, name in _OVERRIDES.items() if name == exc.option), exc.option)
            msg = f"Invalid configurable[{key!r}]: {exc}"
            raise ConfigurationError(msg, option=key, value=exc.value) from exc


class KnowledgeInjector(Runnable[Any, list[BaseMessage]]):
    r"""Retrieve for the current user message and return the messages to send.

    Input: a list of messages (or message-like tuples/dicts), a ``{"messages":
    [...]}`` dict, or a chat ``PromptValue``. Output: the list of messages with
    the dynamic_context injected, so ``prompt | injector | model`` works.
    When nothing relevant is retrieved and no block has anything to add, the
    output equals the input. Injections of earlier turns found in the input are
    removed first, so they never pile up.

    Context blocks (``blocks=``; knowledge alone is on by default): a
    ``ProcedureLibrary``, an ``EpisodicMemory``, a ``UserFacts`` (or any
    :class:`~langchain_knowledge_inject.blocks.ContextBlock`) add their blocks to
    the same message, in the order ``[Procedure]``, ``[Retrieved Knowledge]``,
    ``[Past Conversation Snippets]``, ``[User Facts]`` whatever the list order,
    on every turn with a query, retrieval hit or not. Each renders from the query,
    the visible history without injection and the run's config (user id:
    ``configurable["user_id"]``). One ``max_tokens`` budget covers the message:
    caps per block first, then the lowest ``priority`` is cut first (see
    :mod:`~langchain_knowledge_inject.blocks`), snippets and chunks one by one.
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
        >>> from langchain_knowledge_inject import KNOWLEDGE_SYSTEM_PROMPT
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
        knowledge_base: A ``KnowledgeBase`` (anything with ``search``/``asearch``
            as in the knowledge-base contract), or a sequence of them; results
            of several are merged by score.
        top_k, min_score, mode, tenant_id, placement, max_tokens, restricted,
            on_error, include_kb_meta, query_window: see :class:`InjectionConfig`.
            ``restricted`` is also on when a bound knowledge base's info says so.
        token_counter: Counts tokens; :func:`approximate_token_count` by default.
        template: The knowledge block template.
        extra_blocks: Blocks added after the other blocks in the same message:
            strings, or callables ``(config) -> str | None`` run every turn
            (user or permission context). They accompany content: with nothing
            retrieved and no other block there is no message at all.
        blocks: Context blocks (:class:`~langchain_knowledge_inject.blocks.ContextBlock`):
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
        top_k: int = 4,
        min_score: float | None = None,
        mode: Literal["dense", "keyword", "hybrid"] = "hybrid",
        tenant_id: str | None = None,
        placement: Placement = "dynamic_context",
        max_tokens: int = 2000,
        token_counter: TokenCounter | None = None,
        template: KnowledgeBlockTemplate | None = None,
        extra_blocks: Sequence[ExtraBlock] = (),
        include_kb_meta: bool = False,
        restricted: bool = False,
        on_error: Literal["degrade", "raise"] = "degrade",
        query_window: int = 0,
        summarizer_model: Any = None,
        blocks: Sequence[ContextBlock] = (),
    ) -> None:
        self.knowledge_bases: tuple[Any, ...] = _as_knowledge_bases(knowledge_base)
        self._surface_restricted = restricted is True
        restricted = resolve_restricted(
            knowledge_bases=knowledge_base_flags(self.knowledge_bases), surface=restricted
        )
        self.config = InjectionConfig(
            top_k=top_k, min_score=min_score, mode=mode, tenant_id=tenant_id,
            placement=placement, max_tokens=max_tokens, restricted=restricted,
            on_error=on_error, include_kb_meta=include_kb_meta, query_window=query_window,
        )  # fmt: skip
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

    def __repr__(self) -> str:
        names = ", ".join(str(getattr(kb, "name", kb)) for kb in self.knowledge_bases)
        return f"KnowledgeInjector([{names}], {self.config!r})"

    # -- settings and retrieval -------------------------------------------------------
    def resolve(self, config: RunnableConfig | None) -> InjectionConfig:
        """The settings for one request: constructor values plus ``configurable`` overrides.

        Whether the turn is restricted is decided by
        :func:`~langchain_knowledge_inject.restricted_scope.resolve_restricted` from
        the knowledge bases' stored flags (read now), the injector's own flag and
        ``configurable["restricted"]``: any "on" wins.
        """
        settings = self.config.with_overrides(config)
        restricted = resolve_restricted(
            knowledge_bases=knowledge_base_flags(self.knowledge_bases),
            surface=self._surface_restricted,
            request=((config or {}).get("configurable") or {}).get("restricted"),
        )
        if restricted != settings.restricted:
            settings = settings.model_copy(update={"restricted": restricted})
        return settings

    def _search_kwargs(self, settings: InjectionConfig) -> dict[str, Any]:
        return {"k": settings.top_k, "min_score": settings.min_score,
                "mode": settings.mode, "tenant_id": settings.tenant_id}  # fmt: skip

    def retrieve(self, messages: Any, settings: InjectionConfig) -> RetrievalOutcome:
        """Search the knowledge base(s) with the current user message.

        Raises:
            RetrievalError: The search failed and ``settings.on_error == "raise"``.
        """
        query = self._query(messages, settings)
        if query is None:
            return RetrievalOutcome(query=None)
        kwargs = self._search_kwargs(settings)

        def search(kb: Any) -> list[Document] | Exception:
            try:
                return kb.search(query, **kwargs)
            except Exception as exc:  # degraded or raised in _failed
                return exc

        kbs = self.knowledge_bases
        if len(kbs) == 1:
            results = [search(kbs[0])]
        else:  # side by side: a slow or frozen store does not delay the others
            with ThreadPoolExecutor(max_workers=len(kbs), thread_name_prefix="kinject") as pool:
                results = list(pool.map(search, kbs))
        found = [r for r in results if not isinstance(r, Exception)]
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            return self._failed(query, failed, settings, found)
        return RetrievalOutcome(query=query, documents=self._merge(found, settings))

    async def aretrieve(self, messages: Any, settings: InjectionConfig) -> RetrievalOutcome:
        """Async twin of :meth:`retrieve` (uses ``asearch``)."""
        query = self._query(messages, settings)
        if query is None:
            return RetrievalOutcome(query=None)
        results = await asyncio.gather(
            *(kb.asearch(query, **self._search_kwargs(settings)) for kb in self.knowledge_bases),
            return_exceptions=True,
        )
        found = [r for r in results if not isinstance(r, BaseException)]
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # cancellation, KeyboardInterrupt
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            return self._failed(query, failed, settings, found)
        return RetrievalOutcome(query=query, documents=self._merge(found, settings))

    @staticmethod
    def _query(messages: Any, settings: InjectionConfig) -> str | None:
        """The turn's retrieval query, cut as the knowledge base cuts it (None: no retrieval).

        Cut here too, so that the manifest, the graph state and the custom event
        never carry a megabyte-long message.
        """
        if not settings.enabled:
            return None
        query = retrieval_query(_coerce_messages(messages), window=settings.query_window)
        return query[:MAX_QUERY_CHARS] if query is not None else None

    def _merge(self, found: list[list[Document]], settings: InjectionConfig) -> list[Document]:
        floor = settings.min_score
        docs = [
            d for ds in found for d in ds
            if floor is None or float(d.metadata.get("score", 1.0)) >= floor
        ]  # fmt: skip
        if len(found) > 1:
            docs.sort(key=lambda d: -float(d.metadata.get("score", 0.0)))
        return docs[: settings.top_k]

    def _failed(
        self,
        query: str,
        failed: Sequence[Exception],
        settings: InjectionConfig,
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
            query=query, documents=self._merge(found, settings) if found else [],
            error=f"{type(exc).__name__}: {exc}",
        )  # fmt: skip

    # -- building the context ------------------------------------------------------------
    def build_context(
        self,
        documents: Sequence[Document],
        settings: InjectionConfig,
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
        settings: InjectionConfig,
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

        Calls :func:`~langchain_knowledge_inject.restriction.summarize_chunks` with
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
        settings: InjectionConfig,
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
        settings: InjectionConfig,
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
        (an :class:`~langchain_knowledge_inject.episodic.EpisodicMemory`, which
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
        clean = strip_injected(_coerce_messages(messages))
        settings = self.resolve(config)
        outcome = self.retrieve(clean, settings)
        built = self._parts.build(
            outcome.documents, settings, config=config, query=outcome.query, messages=clean
        )
        turn = self._turn(clean, settings, outcome, built)
        emit_manifest(turn.manifest, config)
        return turn

    async def aprepare(self, messages: Any, config: RunnableConfig | None = None) -> TurnContext:
        """Async twin of :meth:`prepare`."""
        clean = strip_injected(_coerce_messages(messages))
        settings = self.resolve(config)
        outcome = await self.aretrieve(clean, settings)
        built = await self._parts.abuild(
            outcome.documents, settings, config=config, query=outcome.query, messages=clean
        )
        turn = self._turn(clean, settings, outcome, built)
        await aemit_manifest(turn.manifest, config)
        return turn

    def _turn(
        self,
        clean: list[BaseMessage],
        settings: InjectionConfig,
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
    def _messages_out(self, input: Any, config: RunnableConfig) -> list[BaseMessage]:
        return self.prepare(input, config).messages

    async def _amessages_out(self, input: Any, config: RunnableConfig) -> list[BaseMessage]:
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
