"""The text of a whole document: its keyword-cache row for the document score of hybrid search.

The row is the source's chunks in order (page, ``chunk_index``, ``chunk_part``)
joined by ``fusion.join_chunks``, after its lead (:func:`lead`), searched by
its words alone (docs/knowledge-base.md). ``fusion.DOCUMENT_KEYWORD = "pool"``
switches the rows off (:func:`enabled`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._store import fusion

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.chroma import Chunk

LEAD_WORDS = 24
"""Most words of a document's lead, indexed once more in front of its text (0: none)."""
MAX_CHARS = 1_000_000
"""Most characters of a document's text in its row: a longer one is scored by its start."""


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


def head(chunks: Sequence[Chunk]) -> list[Chunk]:
    """The first of a source's chunks (in file order) whose text reaches :data:`MAX_CHARS`."""
    ends = itertools.accumulate(len(c.text) for c in chunks)
    return [c for c, end in zip(chunks, ends, strict=True) if end - len(c.text) < MAX_CHARS]


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
    text = fusion.join_chunks([c.text for c in ordered])[:MAX_CHARS]
    title = next((c.metadata["title"] for c in ordered if c.metadata.get("title")), None)
    head = lead(text, title) if text else ""
    return f"{head} {text}" if head else text
