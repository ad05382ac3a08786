"""Presets: each reference design's defaults, block format, placement and switches.

Three designs this package learned from (``../shared/designs/``), each as one
:class:`Preset`: a :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`
plus what a surface needs beside it (the knowledge-block template, the block order
and separator, the facts style)::

    preset = portal()
    agent = create_agent(model, middleware=[KnowledgeInjectionMiddleware(preset.injector(kb))])

:func:`portal` (Portal Community), :func:`shepherd` (Shepherd) and :func:`wegent`
(Wegent) are described in docs/presets.md, with how each design's score
threshold is mapped onto our hybrid score (``benchmarks/score_scales.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_knowledge_inject._turn.blocks import BLOCK_SEPARATOR
from langchain_knowledge_inject._turn.formatting import KnowledgeBlockTemplate
from langchain_knowledge_inject.settings import KnowledgeSettings, build_settings

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from langchain_knowledge_inject._memory.facts import UserFacts
    from langchain_knowledge_inject._surfaces.runnable import KnowledgeInjector
    from langchain_knowledge_inject._turn.blocks import ContextBlock

__all__ = [
    "PORTAL_CITATION_PROMPT",
    "PORTAL_MIN_SCORE",
    "PORTAL_TEMPLATE",
    "SHEPHERD_MIN_SCORE",
    "SHEPHERD_TEMPLATE",
    "WEGENT_DATETIME_SUFFIX",
    "Preset",
    "portal",
    "shepherd",
    "wegent",
]

PORTAL_MIN_SCORE = 0.74
"""Portal's ``SemanticMinScore = 0.7`` (a cosine) on the hybrid scale (``score_scales.py``)."""
SHEPHERD_MIN_SCORE = 0.36
"""Shepherd's ``rag_relevance_threshold = 0.3`` on the hybrid scale (``score_scales.py``)."""

PORTAL_TEMPLATE = KnowledgeBlockTemplate(
    header="[Retrieved Knowledge]",
    intro=(
        "The following information is relevant to answering the user's question.\n"
        "Use this information in your response. Cite sources when appropriate.\n"
    ),
    chunk="Source: {source}\n{category_line}Relevance Score: {score:.2f}\n{content}",
    category_line="Category: {category}\n",
    separator="---",
    closing="If the answer is not in the above information, say so honestly.",
)
"""Portal's ``FormatForContext``: header, two intro lines and a blank line, then per record
``Source:``, ``Category:`` (when set), ``Relevance Score: {F2}``, the content and ``---``,
then the closing line."""

PORTAL_CITATION_PROMPT = (
    "When you use information from the [Retrieved Knowledge] section to answer a question,\n"
    "cite the source document at the end of your answer using this format:\n"
    "(Source: <filename>)\n"
    "If your answer combines information from multiple sources, cite all of them.\n"
    "If you cannot find the answer in the retrieved knowledge, say:\n"
    '"I don\'t have specific information on that in my knowledge base."\n'
    "Do not invent information not present in the retrieved knowledge."
)
"""Portal's system-prompt addition for automatic citations, verbatim."""

SHEPHERD_TEMPLATE = KnowledgeBlockTemplate(
    header="[context: ",
    intro="",
    chunk="{content}",
    category_line="",
    separator=" | ",
    closing="]",
    inline=True,
)
"""Shepherd's ``[context: a | b]``: the results on one line, pipe-separated."""

WEGENT_DATETIME_SUFFIX = "\n\n[Current time: %Y-%m-%d %H:%M %Z]"
"""The datetime suffix of the current user message (Wegent names it, without a format)."""


@dataclass(frozen=True)
class Preset:
    """One design's settings and what a surface needs beside them.

    Attributes:
        name: ``"portal"``, ``"shepherd"`` or ``"wegent"``.
        settings: The settings (any surface takes them as ``settings=``).
        template: The knowledge-block template (``None``: the package's).
        block_order: The order of the content blocks (``None``: the package's).
        block_separator: What joins two blocks.
        facts_style: How :meth:`user_facts` renders facts.
    """

    name: Literal["portal", "shepherd", "wegent"]
    settings: KnowledgeSettings
    template: KnowledgeBlockTemplate | None = None
    block_order: tuple[str, ...] | None = None
    block_separator: str = BLOCK_SEPARATOR
    facts_style: Literal["block", "inline"] = "block"

    def injector(
        self,
        knowledge_base: Any,
        *,
        blocks: Sequence[ContextBlock] = (),
        summarizer_model: Any = None,
        **options: Any,
    ) -> KnowledgeInjector:
        """The preset's :class:`KnowledgeInjector`; pass it to any surface as its knowledge base.

        Args:
            knowledge_base: The knowledge source(s).
            blocks: Context blocks (procedure, episodic memory, :meth:`user_facts`).
            summarizer_model: Restricted mode: the secondary model.
            **options: Settings fields that override the preset's (``top_k=8``) and the
                injector's other keyword arguments (``token_counter=...``).

        Raises:
            ConfigurationError: An option names no setting or has a value not allowed.
        """
        from langchain_knowledge_inject._surfaces.runnable import KnowledgeInjector

        extra = {k: options.pop(k) for k in ("token_counter", "extra_blocks") if k in options}
        settings = build_settings(self.settings, **options)
        return KnowledgeInjector(
            knowledge_base, settings=settings, template=self.template, blocks=blocks,
            summarizer_model=summarizer_model, block_order=self.block_order,
            block_separator=self.block_separator, **extra,
        )  # fmt: skip

    def user_facts(self, store: BaseStore, **options: Any) -> UserFacts:
        """A :class:`~langchain_knowledge_inject._memory.facts.UserFacts` in the preset's style."""
        from langchain_knowledge_inject._memory.facts import UserFacts

        return UserFacts(store, style=self.facts_style, **options)


def portal(
    *,
    semantic_enabled: bool = True,
    top_k: int = 5,
    min_score: float = PORTAL_MIN_SCORE,
    context_max_tokens: int = 2000,
    max_tokens: int = 4000,
    history_max_tokens: int | None = None,
    **options: Any,
) -> Preset:
    """Portal Community: knowledge as a system message between the system prompt and history.

    Args:
        semantic_enabled: Portal's per-agent ``SemanticEnabled`` switch.
        top_k: ``SemanticTopK``.
        min_score: ``SemanticMinScore`` 0.7 mapped to the hybrid scale.
        context_max_tokens: ``SemanticContextMaxTokens``: the knowledge block's own cap.
        max_tokens: The shared budget of the injected message (procedure, knowledge,
            episodic snippets).
        history_max_tokens: "current session messages (pruned to budget)": the history
            budget (``None``: not pruned; Portal gives no figure).
        **options: Other settings fields.

    Example:
        >>> p = portal()
        >>> p.settings.top_k, p.settings.placement, p.settings.knowledge_max_tokens
        (5, 'system', 2000)
    """
    settings = KnowledgeSettings(
        enabled=semantic_enabled, top_k=top_k, min_score=min_score,
        knowledge_max_tokens=context_max_tokens, max_tokens=max(max_tokens, context_max_tokens),
        placement="system", knowledge_prompt=PORTAL_CITATION_PROMPT,
        history_max_tokens=history_max_tokens, **options,
    )  # fmt: skip
    return Preset("portal", settings, template=PORTAL_TEMPLATE)


def shepherd(
    *,
    rag_context_injection: bool = False,
    rag_relevance_threshold: float = SHEPHERD_MIN_SCORE,
    rag_max_results: int = 3,
    **options: Any,
) -> Preset:
    r"""Shepherd: ``content + "\n\n[facts: k=v, k=v]\n[context: a | b]"`` on the user message.

    Args:
        rag_context_injection: Shepherd's switch, off by default (per request:
            ``configurable["memory"] = True`` switches it on, ``False`` off).
        rag_relevance_threshold: 0.3 mapped to the hybrid scale.
        rag_max_results: At most this many results.
        **options: Other settings fields.

    Example:
        >>> s = shepherd()
        >>> s.settings.enabled, s.settings.placement, s.settings.top_k, s.block_order
        (False, 'postfix', 3, ('facts', 'knowledge'))
    """
    settings = KnowledgeSettings(
        enabled=rag_context_injection, top_k=rag_max_results, min_score=rag_relevance_threshold,
        placement="postfix", knowledge_prompt=None, **options,
    )  # fmt: skip
    return Preset(
        "shepherd", settings, template=SHEPHERD_TEMPLATE, block_order=("facts", "knowledge"),
        block_separator="\n", facts_style="inline",
    )  # fmt: skip


def wegent(
    *,
    restricted: bool = False,
    tool_driven: bool | None = None,
    datetime_suffix: str | None = WEGENT_DATETIME_SUFFIX,
    **options: Any,
) -> Preset:
    """Wegent: a dynamic_context message, a datetime suffix, the knowledge bases every turn.

    Args:
        restricted: Restricted mode (the Restricted Analyst): safe metadata only in the
            dynamic context, safe summaries only from the tool.
        tool_driven: Nothing retrieved automatically; the model calls
            ``knowledge_base_search`` (the graph adds it; the middleware registers it).
            ``None``: on in restricted mode, as Wegent's restricted flow is written.
        datetime_suffix: The suffix's ``strftime`` format (``None``: none).
        **options: Other settings fields.

    Example:
        >>> w = wegent(restricted=True)
        >>> w.settings.retrieval, w.settings.kb_meta_every_turn, w.settings.placement
        ('tool', True, 'dynamic_context')
    """
    tool = restricted if tool_driven is None else tool_driven
    settings = KnowledgeSettings(
        placement="dynamic_context", include_kb_meta=True, kb_meta_every_turn=True,
        datetime_suffix=datetime_suffix, restricted=restricted,
        retrieval="tool" if tool else "auto", **options,
    )  # fmt: skip
    return Preset("wegent", settings)
