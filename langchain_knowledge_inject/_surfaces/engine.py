"""The machinery every surface shares: one configured turn pipeline, no surface of its own.

:class:`InjectionEngine` holds what a surface was configured with (the sources,
the settings, the context blocks, the summarizer model, the template and token
counter) and runs the steps of a turn as plain functions over plain data:

1. :meth:`InjectionEngine.resolve`: the request's settings
   (:mod:`~langchain_knowledge_inject.settings`, and whether the turn is restricted:
   :func:`~langchain_knowledge_inject._restricted.scope.resolve_restricted`);
2. :func:`~langchain_knowledge_inject._turn.retrieval.retrieve`: the query and the
   search of every source;
3. restricted mode:
   :func:`~langchain_knowledge_inject._restricted.summary.safe_summary_block`, the one
   fail-closed entry point, gives the :class:`RestrictedKnowledge` shown instead of chunks;
4. :func:`~langchain_knowledge_inject._turn.blocks.render_blocks`: the context blocks;
5. :func:`~langchain_knowledge_inject._turn.assemble.assemble_context`: the text under
   one budget, then :func:`~langchain_knowledge_inject._turn.assemble.prepare_turn`:
   placement and manifest.

The surfaces (``runnable``, ``graph``, ``node``, ``middleware``, ``chat``) import
this module (and :mod:`.hosting`), never each other.
:class:`~.runnable.KnowledgeInjector` is an engine that is also a Runnable.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig, ensure_config
from typing_extensions import Unpack

from langchain_knowledge_inject._restricted.safe_summary import (
    fail_closed_summary,
    format_safe_summary,
)
from langchain_knowledge_inject._restricted.scope import (
    knowledge_base_flags,
    redact_documents,
    resolve_restricted,
    sensitive_source_flags,
)
from langchain_knowledge_inject._restricted.summary import (
    asafe_summary_block,
    safe_kb_meta,
    safe_summary_block,
)
from langchain_knowledge_inject._turn.assemble import (
    AssembledContext,
    Parts,
    PreparedTurn,
    RestrictedKnowledge,
    assemble_context,
    has_content,
    meta_alone,
    prepare_turn,
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
from langchain_knowledge_inject._turn.logs import log_turn
from langchain_knowledge_inject._turn.manifest import aemit_manifest, emit_manifest
from langchain_knowledge_inject._turn.placement import add_knowledge_prompt, strip_injected
from langchain_knowledge_inject._turn.retrieval import (
    RetrievalOutcome,
    asearch_query,
    coerce_messages,
    search_query,
    turn_query,
)
from langchain_knowledge_inject._turn.sources import as_sources, traced
from langchain_knowledge_inject._turn.tokens import TokenCounter, approximate_token_count
from langchain_knowledge_inject.errors import ConfigurationError
from langchain_knowledge_inject.settings import KnowledgeSettings, SettingsOptions, build_settings

if TYPE_CHECKING:
    from langchain_core.documents import Document

__all__ = [
    "ExtraBlock",
    "InjectionEngine",
    "engine_for",
    "fail_closed_knowledge",
]

logger = logging.getLogger("langchain_knowledge_inject")

ExtraBlock = str | Callable[[RunnableConfig], str | None]
"""A block added after the others: a string, or a callable ``(config) -> str | None``."""


def fail_closed_knowledge() -> RestrictedKnowledge:
    """The knowledge block of a restricted turn that has no safe summary: the fixed refusal."""
    refused = fail_closed_summary()
    return RestrictedKnowledge(format_safe_summary(refused), refused.decision, refused.reason)


class InjectionEngine:
    """One configured turn pipeline: sources, settings, blocks, summarizer; no surface.

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
        block_order: The order of the content blocks by name (``"procedure"``,
            ``"knowledge"``, ``"episodic"``, ``"facts"``, your own); ``None``: that
            fixed order. Shepherd's preset puts ``facts`` first.
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
        self.knowledge_bases: tuple[Any, ...] = as_sources(knowledge_base)
        self._searches = traced(self.knowledge_bases)
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
        self.blocks: tuple[ContextBlock, ...] = check_blocks(blocks)
        self._kb_meta: dict[bool, str] = {}
        self.block_order, self.block_separator = check_layout(block_order, block_separator)
        # a custom template's header (and its own second line) is recognized by text too
        custom = template is not None and template != DEFAULT_KNOWLEDGE_TEMPLATE
        header = template.header.strip() if template is not None and not template.inline else ""
        self.strip_headers: tuple[str, ...] = (header,) if custom and header else ()

    def __repr__(self) -> str:
        names = ", ".join(str(getattr(kb, "name", kb)) for kb in self.knowledge_bases)
        return f"{type(self).__name__}([{names}], {self.settings!r})"

    # -- step 1: the request's settings ------------------------------------------------
    def resolve(self, config: RunnableConfig | None) -> KnowledgeSettings:
        """The settings for one request: constructor values plus ``configurable`` overrides.

        The overrides are parsed by ``KnowledgeSettings.with_overrides`` (the one
        parser). Whether the turn is restricted is decided by
        :func:`~langchain_knowledge_inject._restricted.scope.resolve_restricted` from
        the knowledge bases' stored flags (read now), the surface's own flag and
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

    # -- step 2: retrieval --------------------------------------------------------------
    def query(self, messages: Any, settings: KnowledgeSettings) -> str | None:
        """The turn's retrieval query (``None``: injection is off or there is no user text)."""
        return turn_query(messages, settings)

    def retrieve(
        self, messages: Any, settings: KnowledgeSettings, config: RunnableConfig | None = None
    ) -> RetrievalOutcome:
        """Search the knowledge source(s) with the turn's query.

        The query is the current message, the follow-up heuristic (``query_window``) or
        the query model's standalone question (``query_model``). With
        ``retrieval="tool"`` nothing is searched (the model calls the tool).

        Raises:
            RetrievalError: The search failed and ``settings.on_error == "raise"``.
        """
        how = query_for(coerce_messages(messages), settings, config=config,
                        headers=self.strip_headers)  # fmt: skip
        if how.query is None or settings.retrieval == "tool":
            return RetrievalOutcome(query=how.query)
        return search_query(self._searches, how.query, settings, config, query_source=how.source)

    async def aretrieve(
        self, messages: Any, settings: KnowledgeSettings, config: RunnableConfig | None = None
    ) -> RetrievalOutcome:
        """Async twin of :meth:`retrieve` (uses ``asearch``)."""
        how = await aquery_for(coerce_messages(messages), settings, config=config,
                               headers=self.strip_headers)  # fmt: skip
        if how.query is None or settings.retrieval == "tool":
            return RetrievalOutcome(query=how.query)
        return await asearch_query(
            self._searches, how.query, settings, config, query_source=how.source
        )

    # -- step 3: restricted mode's knowledge block --------------------------------------
    def sensitive_sources(self) -> bool:
        """Whether any bound knowledge base hides its source names (unreadable: yes)."""
        return any(sensitive_source_flags(self.knowledge_bases))

    def safe_summary(
        self,
        query: str | None,
        documents: Sequence[Document],
        config: RunnableConfig | None = None,
    ) -> RestrictedKnowledge:
        """Restricted mode: the safe-summary block shown instead of raw chunks.

        Runs :func:`~langchain_knowledge_inject._restricted.summary.safe_summary_block`
        with ``summarizer_model``: a refusal (``refuse`` / ``summarizer_error``)
        without a model or on any error, never raw chunks.
        """
        text, shown = safe_summary_block(
            query or "", documents, model=self.summarizer_model,
            max_tokens=self.settings.max_tokens, counter=self.token_counter,
            sensitive_sources=self.sensitive_sources(), config=config,
        )  # fmt: skip
        return RestrictedKnowledge(text, shown.decision, shown.reason)

    async def asafe_summary(
        self,
        query: str | None,
        documents: Sequence[Document],
        config: RunnableConfig | None = None,
    ) -> RestrictedKnowledge:
        """Async twin of :meth:`safe_summary`."""
        text, shown = await asafe_summary_block(
            query or "", documents, model=self.summarizer_model,
            max_tokens=self.settings.max_tokens, counter=self.token_counter,
            sensitive_sources=self.sensitive_sources(), config=config,
        )  # fmt: skip
        return RestrictedKnowledge(text, shown.decision, shown.reason)

    # -- step 4: the blocks around knowledge -------------------------------------------
    def kb_meta(self, *, restricted: bool) -> str:
        """The knowledge-base list (cached; restricted mode shows routing data only)."""
        if restricted not in self._kb_meta:
            try:
                infos = [kb.info for kb in self.knowledge_bases if hasattr(kb, "info")]
                if restricted:
                    text = safe_kb_meta(infos) if infos else ""
                else:
                    text = format_kb_meta(infos)
            except Exception:
                logger.warning("knowledge-base metadata unavailable; block left out", exc_info=True)
                return ""
            self._kb_meta[restricted] = text
        return self._kb_meta[restricted]

    def _around(
        self, settings: KnowledgeSettings, config: RunnableConfig | None
    ) -> tuple[Parts, Parts]:
        """The blocks before and after the content: ``kb_meta`` and ``extra``."""
        before: Parts = []
        if settings.include_kb_meta:
            before.append(("kb_meta", self.kb_meta(restricted=settings.restricted)))
        run_config = ensure_config(config)
        after: Parts = [
            ("extra", block if isinstance(block, str) else block(run_config))
            for block in self.extra_blocks
        ]
        return before, after

    def _blocks_on(self, settings: KnowledgeSettings, query: str | None) -> bool:
        """Whether the context blocks render this turn: some configured, injection on, a query."""
        return bool(self.blocks) and settings.enabled and query is not None

    def _render(
        self, settings: KnowledgeSettings, query: str | None,
        messages: Sequence[BaseMessage], config: RunnableConfig | None,
    ) -> tuple[Parts, list[dict[str, Any]]]:  # fmt: skip
        if not self._blocks_on(settings, query):
            return [], []
        return render_blocks(self.blocks, query=query or "", messages=messages, config=config,
                             on_error=settings.on_error)  # fmt: skip

    async def _arender(
        self, settings: KnowledgeSettings, query: str | None,
        messages: Sequence[BaseMessage], config: RunnableConfig | None,
    ) -> tuple[Parts, list[dict[str, Any]]]:  # fmt: skip
        if not self._blocks_on(settings, query):
            return [], []
        return await arender_blocks(self.blocks, query=query or "", messages=messages,
                                    config=config, on_error=settings.on_error)  # fmt: skip

    # -- step 5: assembly, placement, manifest ------------------------------------------
    def _assemble(
        self,
        documents: Sequence[Document],
        settings: KnowledgeSettings,
        config: RunnableConfig | None,
        restricted: RestrictedKnowledge | None,
        rendered: tuple[Parts, list[dict[str, Any]]],
    ) -> AssembledContext:
        blocks, errors = rendered
        content = has_content(documents, restricted, blocks)
        if not content and _meta_every_turn(settings):  # Wegent: the list on every turn
            before, _ = self._around(settings, config)
            return meta_alone(before, max_tokens=settings.max_tokens, counter=self.token_counter,
                              separator=self.block_separator, block_errors=errors)  # fmt: skip
        before, after = self._around(settings, config) if content else ([], [])
        return assemble_context(
            documents, restricted=restricted, blocks=blocks, block_errors=errors,
            before=before, after=after, max_tokens=settings.max_tokens,
            counter=self.token_counter, template=self.template or DEFAULT_KNOWLEDGE_TEMPLATE,
            priorities={b.name: b.priority for b in self.blocks},
            caps={b.name: b.max_tokens for b in self.blocks},
            knowledge_max_tokens=settings.knowledge_max_tokens, order=self.block_order,
            separator=self.block_separator,
        )  # fmt: skip

    def assemble(
        self,
        documents: Sequence[Document],
        settings: KnowledgeSettings,
        *,
        config: RunnableConfig | None = None,
        query: str | None = None,
        messages: Sequence[BaseMessage] = (),
        restricted: RestrictedKnowledge | None = None,
    ) -> AssembledContext:
        """The dynamic_context of a turn: knowledge (or its safe summary) and the blocks.

        ``restricted``: a safe summary computed beforehand (the graph's node); without
        one, a restricted turn with chunks computes it here.
        """
        documents = list(documents)
        if restricted is None and settings.restricted and documents:
            restricted = self.safe_summary(query, documents, config)
        rendered = self._render(settings, query, messages, config)
        return self._assemble(documents, settings, config, restricted, rendered)

    async def aassemble(
        self,
        documents: Sequence[Document],
        settings: KnowledgeSettings,
        *,
        config: RunnableConfig | None = None,
        query: str | None = None,
        messages: Sequence[BaseMessage] = (),
        restricted: RestrictedKnowledge | None = None,
    ) -> AssembledContext:
        """Async twin of :meth:`assemble` (the summary and the blocks run concurrently)."""
        documents = list(documents)
        rendering = self._arender(settings, query, messages, config)
        if restricted is None and settings.restricted and documents:
            summary = self.asafe_summary(query, documents, config)
            restricted, rendered = await asyncio.gather(summary, rendering)
        else:
            rendered = await rendering
        return self._assemble(documents, settings, config, restricted, rendered)

    def _prepared(
        self,
        clean: list[BaseMessage],
        settings: KnowledgeSettings,
        outcome: RetrievalOutcome,
        assembled: AssembledContext,
        config: RunnableConfig | None = None,
    ) -> PreparedTurn:
        retrieved = list(outcome.documents)
        sources = [str(d.metadata.get("source", "")) for d in assembled.reported]
        if settings.restricted:  # ids and scores only; no source names when they are sensitive
            hidden = self.sensitive_sources()
            retrieved = redact_documents(retrieved, sensitive_sources=hidden)
            sources = [] if hidden else sources
        return prepare_turn(
            clean, outcome, assembled, placement=settings.placement,
            restricted=settings.restricted, retrieved=retrieved, sources=sources,
            **self._shaping(settings, config),
        )  # fmt: skip

    def _shaping(
        self, settings: KnowledgeSettings, config: RunnableConfig | None
    ) -> dict[str, Any]:
        """History trimming and the datetime suffix of this request (none while switched off)."""
        suffix = settings.datetime_suffix if settings.enabled else None
        return {"history_max_tokens": settings.history_max_tokens, "datetime_suffix": suffix,
                "token_counter": self.token_counter,
                "now": turn_clock(config) if suffix else None}  # fmt: skip

    def shape(
        self,
        messages: Sequence[BaseMessage],
        context: str | None,
        settings: KnowledgeSettings,
        config: RunnableConfig | None,
    ) -> list[BaseMessage]:
        """The messages the model receives: history trimmed, ``context`` placed, datetime suffix.

        The same as a prepared turn's messages, for surfaces that call the model in a
        step of their own (the graph's ``call_model``, the middleware's later calls).
        """
        out, _ = shape_turn(messages, context, placement=settings.placement,
                            **self._shaping(settings, config))  # fmt: skip
        return out

    def finish_turn(
        self,
        messages: Sequence[BaseMessage],
        settings: KnowledgeSettings,
        outcome: RetrievalOutcome,
        *,
        restricted: RestrictedKnowledge | None = None,
        config: RunnableConfig | None = None,
    ) -> PreparedTurn:
        """Build and place the dynamic_context of a turn whose retrieval already ran.

        For graphs that run retrieval (and the safe summary) in nodes of their
        own. ``messages`` is the visible history without injection (the context
        blocks read it). ``restricted`` is the safe summary of a restricted turn;
        with it no raw chunk is formatted. No manifest event is emitted: the
        caller does.
        """
        clean = list(messages)
        assembled = self.assemble(outcome.documents, settings, config=config, query=outcome.query,
                                  messages=clean, restricted=restricted)  # fmt: skip
        return self._prepared(clean, settings, outcome, assembled, config)

    async def afinish_turn(
        self,
        messages: Sequence[BaseMessage],
        settings: KnowledgeSettings,
        outcome: RetrievalOutcome,
        *,
        restricted: RestrictedKnowledge | None = None,
        config: RunnableConfig | None = None,
    ) -> PreparedTurn:
        """Async twin of :meth:`finish_turn` (the blocks render concurrently)."""
        clean = list(messages)
        assembled = await self.aassemble(outcome.documents, settings, config=config,
                                         query=outcome.query, messages=clean,
                                         restricted=restricted)  # fmt: skip
        return self._prepared(clean, settings, outcome, assembled, config)

    # -- one whole turn -------------------------------------------------------------------
    def prepare(
        self, messages: Any, config: RunnableConfig | None = None, *, surface: str = "injector"
    ) -> PreparedTurn:
        """Run one turn: resolve, retrieve, build the context, place it, emit the manifest.

        ``surface`` names the caller in the turn's INFO log line
        (:func:`~langchain_knowledge_inject._turn.logs.log_turn`).
        """
        start = time.perf_counter()
        settings = self.resolve(config)
        clean = self.clean(messages, settings)
        outcome = self.retrieve(clean, settings, config)
        assembled = self.assemble(
            outcome.documents, settings, config=config, query=outcome.query, messages=clean
        )
        turn = self._prepared(clean, settings, outcome, assembled, config)
        emit_manifest(turn.manifest, config)
        log_turn(turn.manifest, surface=surface, seconds=time.perf_counter() - start)
        return turn

    async def aprepare(
        self, messages: Any, config: RunnableConfig | None = None, *, surface: str = "injector"
    ) -> PreparedTurn:
        """Async twin of :meth:`prepare`."""
        start = time.perf_counter()
        settings = self.resolve(config)
        clean = self.clean(messages, settings)
        outcome = await self.aretrieve(clean, settings, config)
        assembled = await self.aassemble(
            outcome.documents, settings, config=config, query=outcome.query, messages=clean
        )
        turn = self._prepared(clean, settings, outcome, assembled, config)
        await aemit_manifest(turn.manifest, config)
        log_turn(turn.manifest, surface=surface, seconds=time.perf_counter() - start)
        return turn

    def clean(self, messages: Any, settings: KnowledgeSettings) -> list[BaseMessage]:
        """The input without earlier injections (custom headers too), with the knowledge prompt."""
        clean = strip_injected(coerce_messages(messages), headers=self.strip_headers)
        return _with_prompt(clean, settings)

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
        (an :class:`~langchain_knowledge_inject._memory.episodic.EpisodicMemory`, which
        records when its ``auto_record`` is on, or per request
        ``configurable["episodic_record"]``, and a user id is set). Injected
        content is stripped first. A failure is logged (``on_error="degrade"``)
        or raised as :class:`RetrievalError` (``on_error="raise"``).

        Returns:
            The ids of the stored episodes.
        """
        settings = self.resolve(config)
        if not settings.enabled:  # knowledge_enabled=False / memory=False: nothing is recorded
            return []
        clean = strip_injected(coerce_messages(messages), headers=self.strip_headers)
        return record_blocks_turn(self.blocks, clean, config=config, on_error=settings.on_error)

    async def arecord_turn(
        self, messages: Sequence[BaseMessage], config: RunnableConfig | None = None
    ) -> list[str]:
        """Async twin of :meth:`record_turn` (uses the blocks' ``arecord_turn``)."""
        settings = self.resolve(config)
        if not settings.enabled:
            return []
        clean = strip_injected(coerce_messages(messages), headers=self.strip_headers)
        return await arecord_blocks_turn(
            self.blocks, clean, config=config, on_error=settings.on_error
        )


def _meta_every_turn(settings: KnowledgeSettings) -> bool:
    """Whether the knowledge-base list goes in on every turn (Wegent), content or not."""
    return settings.enabled and settings.include_kb_meta and settings.kb_meta_every_turn


def _with_prompt(messages: list[BaseMessage], settings: KnowledgeSettings) -> list[BaseMessage]:
    """Add ``knowledge_prompt`` to the system message (once; not when injection is off)."""
    if not settings.enabled or not messages:
        return messages
    return add_knowledge_prompt(messages, settings.knowledge_prompt)


def engine_for(
    knowledge_base: Any,
    *,
    settings: KnowledgeSettings | None = None,
    summarizer_model: Any = None,
    blocks: Sequence[ContextBlock] = (),
    options: dict[str, Any] | None = None,
) -> InjectionEngine:
    """The engine of a surface (graph, middleware, node): built, or the one given.

    ``knowledge_base`` may be a ready engine (a ``KnowledgeInjector`` is one, for
    ``token_counter``, ``template``, ``extra_blocks``); it is used as it is.

    Raises:
        ConfigurationError: ``knowledge_base`` is a ready engine and settings,
            options, a summarizer or blocks are given besides (they belong on it).
    """
    options = options or {}
    if isinstance(knowledge_base, InjectionEngine):
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
    return InjectionEngine(
        knowledge_base, settings=settings, summarizer_model=summarizer_model, blocks=blocks,
        **options,
    )  # fmt: skip
