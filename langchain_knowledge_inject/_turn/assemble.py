"""The dynamic_context of one turn, assembled by plain functions over plain data.

:func:`assemble_context` takes what the earlier steps produced (the retrieved
chunks, or in restricted mode the :class:`RestrictedKnowledge` block that replaces
them, the rendered context blocks, the blocks around them) and the budget, and
returns an :class:`AssembledContext`: the text and what it holds.
Placement and the manifest are the pipeline's. Nothing here holds a surface or
calls a model.

The injected message is a list of named blocks joined by a blank line, in a
fixed order: ``kb_meta`` (the bound knowledge bases), then the content blocks
in :data:`~langchain_knowledge_inject._turn.blocks.BLOCK_ORDER` (``procedure``,
``knowledge``: the ``[Retrieved Knowledge]`` block or the safe summary in
restricted mode, ``episodic``, ``facts``, then blocks of other names), then
``extra`` blocks. ``kb_meta`` and ``extra`` accompany content: with no content
block left there is no message at all.

One token budget covers the whole message
(:func:`~langchain_knowledge_inject._turn.blocks.assemble_blocks`: a cap per block,
then the lowest priority is cut first); the knowledge block is cut at chunk
boundaries. With knowledge alone it is fitted with
:func:`~langchain_knowledge_inject._turn.tokens.fit_to_budget` (one count in the common
case). In restricted mode the safe summary is cut after every other block and
never dropped: it carries the refusal of a fail-closed turn.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._turn.blocks import (
    BLOCK_SEPARATOR,
    BlockText,
    assemble_blocks,
    block_names,
    block_rank,
    join_blocks,
    surviving_blocks,
)
from langchain_knowledge_inject._turn.formatting import (
    KnowledgeBlockTemplate,
    assemble_knowledge_block,
    render_chunks,
    unique_citation_ids,
)
from langchain_knowledge_inject._turn.tokens import (
    TokenCounter,
    fit_to_budget,
)

if TYPE_CHECKING:
    from langchain_core.documents import Document

logger = logging.getLogger("langchain_knowledge_inject")

PINNED_PRIORITY = 1_000_000
"""Restricted mode: the safe summary's priority, so it is cut after every other block."""

Parts = list[tuple[str, str | None]]
"""Named blocks ``(name, text)`` in message order (``None`` or blank: left out)."""


@dataclass
class RestrictedKnowledge:
    """Restricted mode: what replaces the knowledge block (never raw chunks)."""

    text: str | None
    """The block shown to the main model (a safe summary or a refusal), or ``None``."""
    decision: str | None = None
    """``"answer"`` or ``"refuse"``."""
    reason: str | None = None
    """Machine-readable reason (``answerable``, ``summarizer_error``, ...)."""


@dataclass
class AssembledContext:
    """The assembled dynamic_context of one turn, and what it holds."""

    text: str | None = None
    """The injected text, or ``None`` when there is nothing to inject."""
    used: list[Document] = field(default_factory=list)
    """The chunks shown as raw text (none in restricted mode)."""
    reported: list[Document] = field(default_factory=list)
    """The chunks the manifest reports (restricted mode: every summarized chunk)."""
    citation_ids: list[str] = field(default_factory=list)
    tokens: int = 0
    dropped: list[dict[str, Any]] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    decision: str | None = None
    reason: str | None = None


def chunk_id(doc: Document) -> str:
    """A chunk's id: the document id, else its ``chunk_id`` metadata."""
    return str(doc.id or doc.metadata.get("chunk_id", ""))


def _dropped(documents: Sequence[Document], reason: str) -> list[dict[str, Any]]:
    return [
        {
            "chunk_id": chunk_id(d),
            "score": float(d.metadata.get("score", 0.0)),
            "source": str(d.metadata.get("source", "")),
            "reason": reason,
        }
        for d in documents
    ]


def has_content(
    documents: Sequence[Document], restricted: RestrictedKnowledge | None, blocks: Parts
) -> bool:
    """Whether a turn has anything to inject (``kb_meta`` and ``extra`` only accompany content)."""
    if any(text and text.strip() for _, text in blocks):
        return True
    return bool(restricted.text) if restricted is not None else bool(documents)


def knowledge_block(
    documents: Sequence[Document],
    *,
    template: KnowledgeBlockTemplate,
    max_tokens: int,
    counter: TokenCounter,
    before: Parts,
    after: Parts,
    knowledge_max_tokens: int | None = None,
    separator: str = BLOCK_SEPARATOR,
) -> tuple[
    BlockText | None, list[Document], list[str], list[dict[str, Any]], tuple[str, int] | None
]:
    """The knowledge block, first fitted with the blocks that are cut after it.

    With ``knowledge_max_tokens`` the block alone is first fitted to its own cap
    (chunks left out: reason ``"knowledge_cap"``), then with the others to ``max_tokens``.

    Returns the block (a :class:`BlockText` of the kept chunks), the kept
    chunks, their citation ids, the chunks left out, and the fitted message
    ``(text, tokens)`` of knowledge alone (``None`` when nothing fits).
    """
    ids = unique_citation_ids(documents)
    chunks = render_chunks(template, documents, ids)

    def block(docs: Sequence[Document]) -> str:
        return assemble_knowledge_block(template, chunks[: len(docs)])

    def render(docs: Sequence[Document]) -> str:
        return join_blocks([*before, ("knowledge", block(docs)), *after], separator)

    capped: Sequence[Document] = documents
    dropped: list[dict[str, Any]] = []
    if knowledge_max_tokens is not None:  # the knowledge block's own cap first
        capped, _ = fit_to_budget(documents, max_tokens=knowledge_max_tokens, counter=counter,
                                  render=block)  # fmt: skip
        dropped = _dropped(documents[len(capped) :], "knowledge_cap")
    kept, tokens = fit_to_budget(capped, max_tokens=max_tokens, counter=counter, render=render)
    dropped = _dropped(capped[len(kept) :], "token_budget") + dropped
    fitted = (render(kept), tokens) if kept else None
    return BlockText.build(kept, block), list(kept), ids[: len(kept)], dropped, fitted


def assemble_context(
    documents: Sequence[Document],
    *,
    restricted: RestrictedKnowledge | None,
    blocks: Parts,
    block_errors: Sequence[dict[str, Any]],
    before: Parts,
    after: Parts,
    max_tokens: int,
    counter: TokenCounter,
    template: KnowledgeBlockTemplate,
    priorities: Mapping[str, int],
    caps: Mapping[str, int | None],
    knowledge_max_tokens: int | None = None,
    order: Sequence[str] | None = None,
    separator: str = BLOCK_SEPARATOR,
) -> AssembledContext:
    """The dynamic_context text: one budget over every block, knowledge cut chunk by chunk.

    Args:
        documents: The retrieved chunks, best first (restricted mode: reported only).
        restricted: Restricted mode's knowledge block (the safe summary or a
            refusal); with it no chunk is formatted. ``None``: not restricted.
        blocks: The rendered context blocks ``(name, text)`` (procedure, episodic, ...).
        block_errors: One record per block that failed to render.
        before: The blocks before the content (``kb_meta``).
        after: The blocks after the content (``extra``).
        max_tokens: The budget of the whole message.
        counter: Counts tokens.
        template: The knowledge block template.
        priorities: Each context block's priority (the lowest is cut first).
        caps: Each context block's own token cap (``None``: none).
        knowledge_max_tokens: The knowledge block's own cap inside ``max_tokens``.
        order: The order of the content blocks by name (``None``: the fixed order).
        separator: What joins two blocks.

    Returns:
        The text (``None`` when nothing is left to inject) and what it holds.
    """
    documents = list(documents)
    decision = restricted.decision if restricted else None
    reason = restricted.reason if restricted else None
    errors = list(block_errors)
    has_memory = any(text and text.strip() for _, text in blocks)
    if not has_content(documents, restricted, blocks):
        return AssembledContext(dropped=errors, decision=decision, reason=reason)
    budget = max_tokens
    priorities = dict(priorities)
    caps = dict(caps)
    if knowledge_max_tokens is not None and restricted is None:
        caps["knowledge"] = knowledge_max_tokens
    kept: list[Document] = []
    ids: list[str] = []
    dropped: list[dict[str, Any]] = []
    knowledge: str | None = None
    if restricted is not None:
        knowledge = restricted.text
        if knowledge:  # the safe summary (or refusal) is cut last and never dropped
            priorities["knowledge"] = PINNED_PRIORITY
            if (own := counter(knowledge)) > budget:
                logger.warning("restricted context uses %d tokens > max_tokens=%d", own, budget)
                budget = own
    elif documents:
        knowledge, kept, ids, dropped, fitted = knowledge_block(
            documents, template=template, max_tokens=max_tokens, counter=counter,
            before=before, after=after, knowledge_max_tokens=knowledge_max_tokens,
            separator=separator,
        )  # fmt: skip
        if not has_memory:  # knowledge alone: the fitted block is final
            if fitted is None:
                logger.warning("no retrieved chunk fits in max_tokens=%d", budget)
                return AssembledContext(dropped=dropped + errors)
            return AssembledContext(
                text=fitted[0], used=kept, reported=kept, citation_ids=ids,
                tokens=fitted[1], dropped=dropped + errors,
                blocks=block_names([*before, ("knowledge", knowledge), *after]),
            )  # fmt: skip
    content = sorted([("knowledge", knowledge), *blocks], key=lambda p: block_rank(p[0], order))
    parts = [*before, *content, *after]
    text, cuts = assemble_blocks(
        parts, max_tokens=budget, caps=caps, priorities=priorities, counter=counter,
        separator=separator,
    )  # fmt: skip
    knowledge_cuts = [c for c in cuts if c["block"] == "knowledge"]
    if restricted is None and knowledge_cuts:
        count = min(c["kept"] for c in knowledge_cuts)
        dropped += _dropped(kept[count:], knowledge_cuts[-1]["reason"])
        kept, ids = kept[:count], ids[:count]
    dropped += [c for c in cuts if c["block"] != "knowledge"] + errors
    names = surviving_blocks(parts, cuts)
    if text is None or not {name for name, _ in content} & set(names):
        return AssembledContext(dropped=dropped, decision=decision, reason=reason)
    reported = documents if restricted is not None else kept
    return AssembledContext(
        text=text, used=kept, reported=reported, citation_ids=ids, tokens=counter(text),
        dropped=dropped, blocks=names, decision=decision, reason=reason,
    )  # fmt: skip


def meta_alone(
    before: Parts, *, max_tokens: int, counter: TokenCounter, separator: str = BLOCK_SEPARATOR,
    block_errors: Sequence[dict[str, Any]] = (),
) -> AssembledContext:  # fmt: skip
    """The message of a turn without content: the knowledge-base list alone (every turn)."""
    text, cuts = assemble_blocks(before, max_tokens=max_tokens, counter=counter,
                                 separator=separator)  # fmt: skip
    if not text:
        return AssembledContext(dropped=list(block_errors))
    return AssembledContext(
        text=text, tokens=counter(text), dropped=[*cuts, *block_errors],
        blocks=surviving_blocks(before, cuts),
    )  # fmt: skip
