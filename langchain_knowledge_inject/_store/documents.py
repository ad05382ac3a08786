"""The text of a whole document, for the document-level keyword score of hybrid search.

Hybrid search scores a chunk by its own match and by its document's
(:func:`~langchain_knowledge_inject._store.fusion.fuse_with_documents`); the
document's keyword side is BM25 over one row per source in the keyword cache
(:mod:`~.keyword_cache`). That row is built here: the source's chunks in order
(page, ``chunk_index``, ``chunk_part``), joined with the overlap of consecutive
chunks removed, after the document's lead (:func:`lead`: its ``title``, else its
first line), so the words that name what a document is about count once more,
as a title field would. They are searched by their words alone: the word-pair
phrases of the chunk index gave nothing here on SciFact train (docs/performance.md).
Switched off with ``fusion.DOCUMENT_KEYWORD = "pool"``
(:func:`enabled`): the rows are then neither built nor searched.

Example:
    >>> join_chunks(["Leave lasts sixteen", "lasts sixteen weeks.", "Pay is full."])
    'Leave lasts sixteen weeks. Pay is full.'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._store import fusion

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.chroma import Chunk

LEAD_WORDS = 24
"""Most words of a document's lead, indexed once more in front of its text (0: none)."""
_MIN_OVERLAP = 8
"""Shortest shared run of characters taken as the overlap of two consecutive chunks."""


def enabled() -> bool:
    """Whether hybrid search scores documents from their whole text (the one switch)."""
    return fusion.DOCUMENT_KEYWORD == "index" and fusion.DOCUMENT_WEIGHT > 0


def lead(text: str, title: object = None) -> str:
    r"""The lead of a document: its title when it has one, else its first non-blank line.

    At most :data:`LEAD_WORDS` words, whitespace normalized.

    Example:
        >>> lead("Parental leave\n\nLeave lasts sixteen weeks.")
        'Parental leave'
        >>> lead("Leave lasts sixteen weeks.", title="  Leave   policy ")
        'Leave policy'
    """
    if LEAD_WORDS <= 0:
        return ""
    head = str(title) if title is not None and str(title).strip() else ""
    if not head:
        head = next((line for line in text.splitlines() if line.strip()), "")
    return " ".join(head.split()[:LEAD_WORDS])


def join_chunks(texts: Sequence[str]) -> str:
    """Join consecutive chunks of one document, dropping the text each repeats of the last."""
    joined = ""
    for text in texts:
        if not joined:
            joined = text
            continue
        shared = _overlap(joined, text)
        joined = joined + text[shared:] if shared else f"{joined} {text}"
    return joined


def _overlap(before: str, after: str) -> int:
    """Length of the longest prefix of ``after`` that ``before`` ends with (0 below the minimum)."""
    if len(after) < _MIN_OVERLAP or len(before) < _MIN_OVERLAP:
        return 0
    probe = after[:_MIN_OVERLAP]
    position = before.find(probe, max(0, len(before) - len(after)))
    while position != -1:  # the first match leaves the longest overlap
        if after.startswith(before[position:]):
            return len(before) - position
        position = before.find(probe, position + 1)
    return 0


def _order(chunk: Chunk) -> tuple[Any, ...]:
    meta = chunk.metadata

    def number(key: str) -> float:
        value = meta.get(key)
        return float(value) if isinstance(value, (int, float)) else -1.0

    return (number("page"), number("chunk_index"), number("chunk_part"), chunk.chunk_id)


def document_text(chunks: Iterable[Chunk]) -> str:
    """What the document row of a source holds: its :func:`lead`, then its chunks joined.

    Example:
        >>> from langchain_knowledge_inject._store.chroma import Chunk
        >>> document_text([Chunk("b", "", "a.md", "leave lasts sixteen weeks.", {"chunk_index": 1}),
        ...                Chunk("a", "", "a.md", "Parental leave lasts", {"chunk_index": 0})])
        'Parental leave lasts sixteen weeks. Parental leave lasts sixteen weeks.'
    """
    ordered = sorted(chunks, key=_order)
    text = join_chunks([c.text for c in ordered])
    title = next((c.metadata["title"] for c in ordered if c.metadata.get("title")), None)
    head = lead(text, title) if text else ""
    return f"{head} {text}" if head else text
