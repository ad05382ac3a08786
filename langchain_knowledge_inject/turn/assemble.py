"""The context of one turn: its result types and the assembly of the dynamic_context text.

Private to :class:`~langchain_knowledge_inject.integrations.runnable.KnowledgeInjector`, which
re-exports the public types (``RetrievalOutcome``, ``TurnContext``, ``RestrictedContext``).

The injected message is a list of named blocks joined by a blank line, in a
fixed order: ``kb_meta`` (the bound knowledge bases), then the content blocks
in :data:`~langchain_knowledge_inject.turn.blocks.BLOCK_ORDER` (``procedure``,
``knowledge``: the ``[Retrieved Knowledge]`` block or the safe summary in
restricted mode, ``episodic``, ``facts``, then blocks of other names), then
``extra`` blocks. ``kb_meta`` and ``extra`` accompany content: with no content
block left there is no message at all.

One token budget covers the whole message
(:func:`~langchain_knowledge_inject.turn.blocks.assemble_blocks`: a cap per block,
then the lowest priority is cut first); the knowledge block is cut at chunk
boundaries. With knowledge alone it is fitted with
:func:`~langchain_knowledge_inject.turn.tokens.fit_to_budget` (one count in the common
case). In restricted mode the safe summary is cut after every other block and
never dropped: it carries the refusal of a fail-closed turn.

Restricted mode never formats raw chunks: the knowledge block is what
``KnowledgeInjector.safe_summary`` returns, which by default runs
:func:`~langchain_knowledge_inject.restricted.summary.summarize_chunks` with the
injector's ``summarizer_model``, and fails closed (``refuse`` /
``summarizer_error``) without one or on any error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableConfig, ensure_config

from langchain_knowledge_inject.errors import ConfigurationError
from langchain_knowledge_inject.turn.blocks import (
    BlockText,
    _arender_blocks,
    _block_rank,
    _names,
    _render_blocks,
    _surviving,
    assemble_blocks,
)
from langchain_knowledge_inject.turn.formatting import (
    DEFAULT_KNOWLEDGE_TEMPLATE,
    _assemble_block,
    _render_chunk,
    _unique_citation_ids,
    format_kb_meta,
)
from langchain_knowledge_inject.turn.manifest import InjectionManifest
from langchain_knowledge_inject.turn.tokens import fit_to_budget

if TYPE_CHECKING:
    from langchain_core.documents import Document

    from langchain_knowledge_inject.integrations.runnable import InjectionConfig, KnowledgeInjector

logger = logging.getLogger("langchain_knowledge_inject")

BLOCK_SEPARATOR = "\n\n"
_PINNED_PRIORITY = 1_000_000  # restricted mode: the safe summary is cut after every other block


@dataclass
class RestrictedContext:
    """Restricted mode: what replaces the knowledge block (never raw chunks)."""

    text: str | None
    """The block shown to the main model (a safe summary or a refusal), or ``None``."""
    decision: str | None = None
    """``"answer"`` or ``"refuse"``."""
    reason: str | None = None
    """Machine-readable reason (``answerable``, ``summarizer_error``, ...)."""


def _fail_closed() -> RestrictedContext:
    from langchain_knowledge_inject.restricted.summary import (
        fail_closed_summary,
        format_safe_summary,
    )

    return RestrictedContext(
        format_safe_summary(fail_closed_summary()), "refuse", "summarizer_error"
    )


FAIL_CLOSED = _fail_closed()


@dataclass
class BuiltContext:
    """The assembled dynamic_context of one turn."""

    text: str | None = None
    used: list[Document] = field(default_factory=list)
    reported: list[Document] = field(default_factory=list)
    citation_ids: list[str] = field(default_factory=list)
    tokens: int = 0
    dropped: list[dict[str, Any]] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    decision: str | None = None
    reason: str | None = None


@dataclass
class RetrievalOutcome:
    """What retrieval produced for one turn."""

    query: str | None
    """The query sent to the knowledge base(s); ``None`` when retrieval did not run."""
    documents: list[Document] = field(default_factory=list)
    """Retrieved chunks, best first."""
    error: str | None = None
    """Error text when retrieval failed and ``on_error="degrade"``."""


@dataclass
class TurnContext:
    """Everything :meth:`KnowledgeInjector.prepare` decided for one turn."""

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
    """Every retrieved chunk, including those the budget cut."""


def join_blocks(parts: Sequence[tuple[str, str | None]]) -> str:
    """Join the non-empty blocks with a blank line."""
    return BLOCK_SEPARATOR.join(text for _, text in parts if text)


def _dropped(documents: Sequence[Document], reason: str) -> list[dict[str, Any]]:
    return [
        {
            "chunk_id": str(d.id or d.metadata.get("chunk_id", "")),
            "score": float(d.metadata.get("score", 0.0)),
            "source": str(d.metadata.get("source", "")),
            "reason": reason,
        }
        for d in documents
    ]


class ContextParts:
    """Builds the blocks of the injected message for a :class:`KnowledgeInjector`."""

    def __init__(self, injector: KnowledgeInjector) -> None:
        self._injector = injector
        self._kb_meta: dict[bool, str] = {}

    # -- the blocks beside knowledge ---------------------------------------------------
    def kb_meta(self, *, restricted: bool) -> str:
        """The knowledge-base list (cached; restricted mode shows routing data only)."""
        if restricted not in self._kb_meta:
            try:
                infos = [kb.info for kb in self._injector.knowledge_bases if hasattr(kb, "info")]
                if restricted:
                    from langchain_knowledge_inject.restricted.summary import (
                        safe_kb_meta,
                    )

                    text = safe_kb_meta(infos) if infos else ""
                else:
                    text = format_kb_meta(infos)
            except Exception:
                logger.warning("knowledge-base metadata unavailable; block left out", exc_info=True)
                return ""
            self._kb_meta[restricted] = text
        return self._kb_meta[restricted]

    def parts_around(
        self, settings: InjectionConfig, config: RunnableConfig | None
    ) -> tuple[list[tuple[str, str | None]], list[tuple[str, str | None]]]:
        """The blocks before and after the knowledge block, as ``(name, text)``."""
        before: list[tuple[str, str | None]] = []
        if settings.include_kb_meta:
            before.append(("kb_meta", self.kb_meta(restricted=settings.restricted)))
        after: list[tuple[str, str | None]] = []
        run_config = ensure_config(config)
        for block in self._injector.extra_blocks:
            after.append(("extra", block if isinstance(block, str) else block(run_config)))
        return before, after

    # -- assembling -----------------------------------------------------------------------
    def build(
        self,
        documents: Sequence[Document],
        settings: InjectionConfig,
        *,
        config: RunnableConfig | None,
        query: str | None,
        messages: Sequence[BaseMessage] = (),
        restricted: RestrictedContext | None = None,
    ) -> BuiltContext:
        """Assemble the message text (sync): knowledge (or its safe summary) and the blocks.

        ``restricted``: a safe summary computed beforehand (the graph's node); without
        one, restricted mode computes it here.
        """
        documents = list(documents)
        if restricted is None and settings.restricted and documents:
            restricted = self._injector.safe_summary(query, documents, config)
        memory, errors = self.render_blocks(settings, query, messages, config)
        return self._assemble(documents, settings, config, restricted, memory, errors)

    async def abuild(
        self,
        documents: Sequence[Document],
        settings: InjectionConfig,
        *,
        config: RunnableConfig | None,
        query: str | None,
        messages: Sequence[BaseMessage] = (),
        restricted: RestrictedContext | None = None,
    ) -> BuiltContext:
        """Async twin of :meth:`build` (the summary and the blocks run concurrently)."""
        documents = list(documents)
        rendering = self.arender_blocks(settings, query, messages, config)
        if restricted is None and settings.restricted and documents:
            summary = self._injector.asafe_summary(query, documents, config)
            restricted, (memory, errors) = await asyncio.gather(summary, rendering)
        else:
            memory, errors = await rendering
        return self._assemble(documents, settings, config, restricted, memory, errors)

    # -- the context blocks (procedure, episodic, facts, ...) -------------------------------
    def _blocks_on(self, settings: InjectionConfig, query: str | None) -> bool:
        """Whether the blocks render this turn: some configured, injection on, a query."""
        return bool(self._injector.blocks) and settings.enabled and query is not None

    def render_blocks(
        self,
        settings: InjectionConfig,
        query: str | None,
        messages: Sequence[BaseMessage],
        config: RunnableConfig | None,
    ) -> tuple[list[tuple[str, str | None]], list[dict[str, Any]]]:
        """Each block's ``(name, text)`` for this turn, and an error record per failed block."""
        if not self._blocks_on(settings, query):
            return [], []
        return _render_blocks(self._injector.blocks, query=query or "", messages=messages,
                              config=config, on_error=settings.on_error)  # fmt: skip

    async def arender_blocks(
        self,
        settings: InjectionConfig,
        query: str | None,
        messages: Sequence[BaseMessage],
        config: RunnableConfig | None,
    ) -> tuple[list[tuple[str, str | None]], list[dict[str, Any]]]:
        """Async twin of :meth:`render_blocks` (the blocks render concurrently)."""
        if not self._blocks_on(settings, query):
            return [], []
        return await _arender_blocks(self._injector.blocks, query=query or "", messages=messages,
                                     config=config, on_error=settings.on_error)  # fmt: skip

    def _assemble(
        self,
        documents: list[Document],
        settings: InjectionConfig,
        config: RunnableConfig | None,
        restricted: RestrictedContext | None,
        memory: list[tuple[str, str | None]],
        errors: list[dict[str, Any]],
    ) -> BuiltContext:
        """One budget over every block; the knowledge block is cut chunk by chunk."""
        decision = restricted.decision if restricted else None
        reason = restricted.reason if restricted else None
        has_memory = any(text and text.strip() for _, text in memory)
        knowledge_present = restricted.text if restricted is not None else documents
        if not has_memory and not knowledge_present:
            return BuiltContext(dropped=list(errors), decision=decision, reason=reason)
        before, after = self.parts_around(settings, config)
        counter = self._injector.token_counter
        budget = settings.max_tokens
        priorities = {b.name: b.priority for b in self._injector.blocks}
        caps = {b.name: b.max_tokens for b in self._injector.blocks}
        kept: list[Document] = []
        ids: list[str] = []
        dropped: list[dict[str, Any]] = []
        knowledge: str | None = None
        if restricted is not None:
            knowledge = restricted.text
            if knowledge:  # the safe summary (or refusal) is cut last and never dropped
                priorities["knowledge"] = _PINNED_PRIORITY
                if (own := counter(knowledge)) > budget:
                    logger.warning("restricted context uses %d tokens > max_tokens=%d", own, budget)
                    budget = own
        elif documents:
            knowledge, kept, ids, dropped, fitted = self._knowledge(
                documents, settings, before, after
            )
            if not has_memory:  # knowledge alone: the fitted block is final
                if fitted is None:
                    logger.warning("no retrieved chunk fits in max_tokens=%d", budget)
                    return BuiltContext(dropped=dropped + errors)
                return BuiltContext(
                    text=fitted[0], used=kept, reported=kept, citation_ids=ids,
                    tokens=fitted[1], dropped=dropped + errors,
                    blocks=_names([*before, ("knowledge", knowledge), *after]),
                )  # fmt: skip
        content = sorted([("knowledge", knowledge), *memory], key=lambda p: _block_rank(p[0]))
        parts = [*before, *content, *after]
        text, cuts = assemble_blocks(
            parts, max_tokens=budget, caps=caps, priorities=priorities, counter=counter
        )
        knowledge_cuts = [c for c in cuts if c["block"] == "knowledge"]
        if restricted is None and knowledge_cuts:
            count = min(c["kept"] for c in knowledge_cuts)
            dropped += _dropped(kept[count:], knowledge_cuts[-1]["reason"])
            kept, ids = kept[:count], ids[:count]
        dropped += [c for c in cuts if c["block"] != "knowledge"] + errors
        names = _surviving(parts, cuts)
        if text is None or not {name for name, _ in content} & set(names):
            return BuiltContext(dropped=dropped, decision=decision, reason=reason)
        reported = list(documents) if restricted is not None else kept
        return BuiltContext(
            text=text, used=kept, reported=reported, citation_ids=ids, tokens=counter(text),
            dropped=dropped, blocks=names, decision=decision, reason=reason,
        )  # fmt: skip

    def _knowledge(
        self,
        documents: Sequence[Document],
        settings: InjectionConfig,
        before: list[tuple[str, str | None]],
        after: list[tuple[str, str | None]],
    ) -> tuple[
        BlockText | None, list[Document], list[str], list[dict[str, Any]], tuple[str, int] | None
    ]:
        """The knowledge block, first fitted with the blocks that are cut after it.

        Returns the block (a :class:`BlockText` of the kept chunks), the kept
        chunks, their citation ids, the chunks left out, and the fitted message
        ``(text, tokens)`` of knowledge alone (``None`` when nothing fits).
        """
        ids = _unique_citation_ids(documents)
        template = self._injector.template or DEFAULT_KNOWLEDGE_TEMPLATE
        chunks = [
            _render_chunk(template, doc, cid, rank)
            for rank, (doc, cid) in enumerate(zip(documents, ids, strict=True), start=1)
        ]

        def block(docs: Sequence[Document]) -> str:
            return _assemble_block(template, chunks[: len(docs)])

        def render(docs: Sequence[Document]) -> str:
            return join_blocks([*before, ("knowledge", block(docs)), *after])

        kept, tokens = fit_to_budget(
            documents, max_tokens=settings.max_tokens, counter=self._injector.token_counter,
            render=render,
        )  # fmt: skip
        dropped = _dropped(documents[len(kept) :], "token_budget")
        fitted = (render(kept), tokens) if kept else None
        return BlockText.build(kept, block), list(kept), ids[: len(kept)], dropped, fitted

    # -- restricted mode: the default hook ---------------------------------------------
    def sensitive_sources(self) -> bool:
        """Whether any bound knowledge base hides its source names (unreadable: yes)."""
        from langchain_knowledge_inject.restricted.scope import sensitive_source_flags

        return any(sensitive_source_flags(self._injector.knowledge_bases))

    def _released(self, summary: Any) -> RestrictedContext:
        """The block of a released summary, cut to the injector's token budget."""
        from langchain_knowledge_inject.restricted.scope import fit_safe_summary

        text, shown = fit_safe_summary(
            summary,
            max_tokens=self._injector.config.max_tokens,
            counter=self._injector.token_counter,
        )
        return RestrictedContext(text, shown.decision, shown.reason)

    def restricted(
        self, query: str | None, documents: Sequence[Document], config: RunnableConfig | None
    ) -> RestrictedContext:
        """Safe summary of ``documents`` with the injector's summarizer model; fails closed."""
        model = self._injector.summarizer_model
        if model is None:
            return FAIL_CLOSED
        try:
            from langchain_knowledge_inject.restricted.summary import summarize_chunks

            summary = summarize_chunks(
                query or "", documents, model=model,
                sensitive_sources=self.sensitive_sources(), config=config,
            )  # fmt: skip
            return self._released(summary)
        except Exception as exc:  # its message or traceback may quote the chunks: type only
            logger.error("restricted summary failed (%s); refusing", type(exc).__name__)
            return FAIL_CLOSED

    async def arestricted(
        self, query: str | None, documents: Sequence[Document], config: RunnableConfig | None
    ) -> RestrictedContext:
        """Async twin of :meth:`restricted`."""
        model = self._injector.summarizer_model
        if model is None:
            return FAIL_CLOSED
        try:
            from langchain_knowledge_inject.restricted.summary import asummarize_chunks

            summary = await asummarize_chunks(
                query or "", documents, model=model,
                sensitive_sources=self.sensitive_sources(), config=config,
            )  # fmt: skip
            return self._released(summary)
        except Exception as exc:  # its message or traceback may quote the chunks: type only
            logger.error("restricted summary failed (%s); refusing", type(exc).__name__)
            return FAIL_CLOSED


def _chunk_id(doc: Document) -> str:
    return str(doc.id or doc.metadata.get("chunk_id", ""))


def _coerce_messages(value: Any) -> list[BaseMessage]:
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


def _as_knowledge_bases(knowledge_base: Any) -> tuple[Any, ...]:
    kbs = (
        (knowledge_base,)
        if hasattr(knowledge_base, "search") or not isinstance(knowledge_base, Sequence)
        else tuple(knowledge_base)
    )
    if not kbs or not all(hasattr(kb, "search") and hasattr(kb, "asearch") for kb in kbs):
        msg = (
            "knowledge_base must be a KnowledgeBase (with search/asearch) "
            "or a non-empty sequence of them"
        )
        raise ConfigurationError(msg, option="knowledge_base", value=knowledge_base)
    return kbs
