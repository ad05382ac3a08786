"""How dense and keyword rankings become one score, and how chunks become results.

Every search mode returns ``metadata["score"]`` in [0, 1], higher is better,
and ``min_score`` has one meaning in every mode: results scoring below it are
dropped. What the number measures depends on the mode:

* ``dense``: the cosine similarity of query and chunk embeddings
  (:func:`dense_score`; a negative similarity counts as 0). Absolute: an
  unrelated query scores low.
* ``keyword``: the BM25 score relative to the query's best hit
  (:func:`keyword_unit_scores`), blended with its document's where the
  document index answers. Raw BM25 has no fixed scale, so a relative score is
  the only one that behaves the same in every knowledge base; ``min_score``
  trims the tail but cannot tell that a whole query is unrelated.
* ``hybrid`` (the default): ``w * cosine + (1 - w) * keyword`` (:func:`fuse`,
  ``w`` = :data:`DENSE_WEIGHT`), each chunk's score blended with its
  document's (:func:`fuse_with_documents`). The cosine carries the absolute
  part: an unrelated query scores low.

A chunk found by one side only gets, for the other side, the lowest cosine of
the dense list (its cosine cannot be higher) or a keyword score of 0. The
convex combination and its weights were chosen on the SciFact train queries
against rank fusion, normalizations and learned models; the figures are in
docs/performance.md ("Retrieval quality").

A search then returns documents, not chunks (:func:`group_by_document`,
:func:`merge_chunks`): the chunks of one document become one result holding
its best chunks in document order, scored by its best chunk, so ``k=10``
means ten documents.

Example:
    >>> [chunk_id for chunk_id, _ in fuse([("a", 0.8), ("b", 0.5)], [("b", 12.0), ("c", 6.0)])]
    ['b', 'a', 'c']
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Literal

from langchain_core.documents import Document

CANDIDATE_DEPTH = 100
"""Candidate chunks fetched from each side for a search (at least ``k``)."""

DENSE_DEPTH = 4
"""Candidate chunks per result asked first in dense mode (:data:`CANDIDATE_DEPTH` when too few)."""

DENSE_WEIGHT = 0.75
"""Weight ``w`` of the cosine in a hybrid score; the keyword side gets ``1 - w``."""

DOCUMENT_WEIGHT = 0.75
"""Share of a chunk's hybrid score that comes from its whole document (:func:`fuse_with_documents`).

0 scores each chunk alone. Chosen on SciFact train (docs/performance.md).
"""

DocumentKeyword = Literal["index", "pool"]
"""Where a document's keyword score comes from: a BM25 index of whole documents, or its chunks."""

DOCUMENT_KEYWORD: DocumentKeyword = "index"
"""Source of a document's keyword score in hybrid search: the one switch for the document index.

``"index"``: BM25 over the document's whole text, from the document-level
keyword index; a document it has not indexed, or any document in a search
with a metadata filter, is pooled. ``"pool"``: the best BM25 among its chunks.
"""

MERGED_CHUNKS = 3
"""Most chunks one merged result holds (:func:`group_by_document`): its best, in document order."""

MIN_OVERLAP = 8
"""Shortest run of characters taken as two consecutive chunks' overlap (:func:`join_chunks`)."""

DEFAULT_MIN_SCORE = 0.40
"""Default ``min_score``, chosen on typed questions (``benchmarks/threshold_calibration.py``)."""


def dense_score(distance: float) -> float:
    """The cosine similarity, clipped to [0, 1], from Chroma's cosine distance (``1 - cosine``).

    Example:
        >>> dense_score(0.25), dense_score(1.4)
        (0.75, 0.0)
    """
    return min(1.0, max(0.0, 1.0 - float(distance)))


def keyword_unit_scores(hits: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """``(id, bm25)`` hits as ``(id, bm25 / best)``, best first; the first of repeated ids counts.

    Hits scoring 0 or less are dropped.

    Example:
        >>> keyword_unit_scores([("a", 8.0), ("b", 2.0), ("c", 0.0)])
        [('a', 1.0), ('b', 0.25)]
    """
    scores: dict[str, float] = {}
    for chunk_id, score in hits:
        if score > 0:
            scores.setdefault(chunk_id, float(score))
    best = max(scores.values(), default=1.0)
    ranked = sorted(scores.items(), key=lambda item: -item[1])
    return [(chunk_id, score / best) for chunk_id, score in ranked]


def dense_cosines(dense: Sequence[tuple[str, float]]) -> tuple[dict[str, float], float]:
    """Each chunk's cosine in the dense list (its first, in [0, 1]) and the list's lowest.

    The lowest is what :func:`fuse` counts for a chunk the keyword side alone found.

    Example:
        >>> dense_cosines([("a", 0.6), ("b", 0.4), ("a", 0.2)])
        ({'a': 0.6, 'b': 0.4}, 0.4)
    """
    cosines: dict[str, float] = {}
    for chunk_id, score in dense:
        cosines.setdefault(chunk_id, min(1.0, max(0.0, float(score))))
    return cosines, min(cosines.values(), default=0.0)


def fuse(
    dense: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    *,
    dense_weight: float = DENSE_WEIGHT,
) -> list[tuple[str, float]]:
    """Fuse a dense and a keyword ranking into one, best first.

    Args:
        dense: ``(chunk_id, cosine in [0, 1])`` pairs, best first.
        keyword: ``(chunk_id, raw BM25)`` pairs, best first.
        dense_weight: Weight ``w`` of the cosine, in [0, 1].

    Returns:
        ``(chunk_id, w * cosine + (1 - w) * bm25 / best_bm25)`` over the union
        of both lists, best first (ties keep dense-list order). A chunk missing
        from the dense list gets that list's lowest cosine; one missing from
        the keyword list gets 0 on that side.

    Example:
        >>> fuse([("a", 0.6)], [("a", 10.0), ("b", 5.0)])
        [('a', 0.7), ('b', 0.575)]
    """
    cosines, floor = dense_cosines(dense)
    relevance = dict(keyword_unit_scores(keyword))
    fused = {
        chunk_id: dense_weight * cosines.get(chunk_id, floor)
        + (1.0 - dense_weight) * relevance.get(chunk_id, 0.0)
        for chunk_id in [*cosines, *relevance]
    }
    order = {chunk_id: position for position, chunk_id in enumerate(fused)}
    return sorted(fused.items(), key=lambda item: (-item[1], order[item[0]]))


def fuse_with_documents(
    dense: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    parents: Mapping[str, str],
    *,
    dense_weight: float | None = None,
    document_weight: float | None = None,
    document_keyword: Sequence[tuple[str, float]] = (),
    indexed: Collection[str] = (),
) -> list[tuple[str, float]]:
    """Fuse chunk rankings, scoring each chunk by its own evidence and its document's.

    A document is what ``parents`` maps chunk ids to (the ``source`` of a
    chunk); a chunk without a parent is a document of its own. A document's
    cosine is the best cosine among its chunks; its keyword score is its best
    chunk's BM25, or its whole text's where ``indexed``, relative to the best
    document's. Each chunk then scores ``document_weight * document_score +
    (1 - document_weight) * chunk_score``, both parts fused as :func:`fuse`
    does, so a chunk of a document that matches the query as a whole rises
    even when the words are spread over several chunks.

    Args:
        dense: ``(chunk_id, cosine score in [0, 1])`` pairs, best first.
        keyword: ``(chunk_id, raw BM25)`` pairs, best first.
        parents: Chunk id to document id.
        dense_weight: Weight ``w`` of the cosine, in [0, 1]. None: :data:`DENSE_WEIGHT`.
        document_weight: Share of the document's score in a chunk's, in [0, 1];
            0 gives :func:`fuse`. None: :data:`DOCUMENT_WEIGHT`.
        document_keyword: ``(document id, raw BM25)`` pairs, best first, from
            a BM25 index over whole documents.
        indexed: Documents whose keyword score comes from ``document_keyword``
            (relative to its best hit; 0 when not in it) instead of their
            best chunk's.

    Returns:
        ``(chunk_id, score in [0, 1])`` pairs over the union of both lists,
        best first (ties keep :func:`fuse` order).

    Example:
        >>> parents = {"a1": "A", "a2": "A", "b1": "B"}
        >>> ranked = fuse_with_documents(
        ...     [("b1", 0.5), ("a1", 0.5), ("a2", 0.5)], [("b1", 8.0), ("a1", 5.0), ("a2", 5.0)],
        ...     parents, document_weight=1.0, document_keyword=[("A", 12.0), ("B", 8.0)],
        ...     indexed={"A", "B"})
        >>> [chunk_id for chunk_id, _ in ranked]
        ['a1', 'a2', 'b1']
    """
    dense_weight = DENSE_WEIGHT if dense_weight is None else dense_weight
    document_weight = DOCUMENT_WEIGHT if document_weight is None else document_weight
    if document_weight <= 0:
        return fuse(dense, keyword, dense_weight=dense_weight)
    cosines, floor = dense_cosines(dense)
    relevance = dict(keyword_unit_scores(keyword))
    chunks = list(dict.fromkeys([*cosines, *relevance]))
    parent = {chunk_id: _document_of(parents, chunk_id) for chunk_id in chunks}
    best_cosine: dict[str, float] = {}
    for chunk_id, cosine in cosines.items():
        best_cosine[parent[chunk_id]] = max(best_cosine.get(parent[chunk_id], 0.0), cosine)
    best_keyword: dict[str, float] = {}
    for chunk_id, score in relevance.items():
        best_keyword.setdefault(parent[chunk_id], score)
    if indexed:
        whole = dict(keyword_unit_scores(document_keyword))
        best_keyword.update({doc: whole.get(doc, 0.0) for doc in indexed})
    document_floor = min(best_cosine.values(), default=0.0)
    document_scores: dict[str, float] = {}
    mixed = []
    for position, chunk_id in enumerate(chunks):
        chunk = dense_weight * cosines.get(chunk_id, floor)
        chunk += (1.0 - dense_weight) * relevance.get(chunk_id, 0.0)
        doc = parent[chunk_id]
        if doc not in document_scores:
            document_scores[doc] = dense_weight * best_cosine.get(doc, document_floor) + (
                1.0 - dense_weight
            ) * best_keyword.get(doc, 0.0)
        score = document_weight * document_scores[doc] + (1.0 - document_weight) * chunk
        mixed.append((-score, -chunk, position, chunk_id))
    mixed.sort()
    return [(chunk_id, -score) for score, _, _, chunk_id in mixed]


def group_by_document(
    ranked: Sequence[tuple[str, float]],
    parents: Mapping[str, str],
    k: int,
    *,
    max_chunks: int | None = None,
) -> list[tuple[float, list[str]]]:
    """The ``k`` best documents of a chunk ranking, each with its best chunks.

    Args:
        ranked: ``(chunk_id, score)`` pairs, best first (the fused candidates).
        parents: Chunk id to document id (its ``source``); a chunk without one
            is a document of its own.
        k: Most documents returned.
        max_chunks: Most chunks kept per document, its best. None:
            :data:`MERGED_CHUNKS`.

    Returns:
        ``(score, chunk ids)`` per document, best first: the score is its best
        chunk's, the ids best first.

    Example:
        >>> group_by_document([("a1", 0.9), ("b1", 0.8), ("a2", 0.7)], {"a1": "A", "a2": "A"}, 2)
        [(0.9, ['a1', 'a2']), (0.8, ['b1'])]
    """
    limit = MERGED_CHUNKS if max_chunks is None else max(1, max_chunks)
    groups: dict[str, tuple[float, list[str]]] = {}
    for chunk_id, score in ranked:
        doc = _document_of(parents, chunk_id)
        if doc not in groups:
            if len(groups) < k:
                groups[doc] = (score, [chunk_id])
        elif len(groups[doc][1]) < limit and chunk_id not in groups[doc][1]:
            groups[doc][1].append(chunk_id)
    return list(groups.values())


def _document_of(parents: Mapping[str, str], chunk_id: str) -> str:
    """The chunk's document: its parent, or the chunk itself where it has none."""
    return parents.get(chunk_id) or f"\x00{chunk_id}"


def merge_chunks(chunks: Sequence[Document], score: float) -> Document:
    """One result from chunks of one document, best first: their text in document order.

    Chunks are put in document order by ``metadata["chunk_index"]``;
    neighbouring chunks are joined by :func:`join_chunks`, others with a line
    ``[...]`` between them.

    Args:
        chunks: The document's chunks, best first, each with its chunk id as ``id``.
        score: The result's score (the best chunk's).

    Returns:
        A Document with the best chunk's id and metadata, ``score`` and
        ``chunk_ids`` (the merged chunk ids, in document order).

    Example:
        >>> merged = merge_chunks([
        ...     Document("sixteen weeks at full pay", id="b", metadata={"chunk_index": 1}),
        ...     Document("Leave lasts sixteen weeks", id="a"),
        ... ], 0.8)
        >>> merged.page_content, merged.metadata["chunk_ids"], merged.id
        ('Leave lasts sixteen weeks at full pay', ['a', 'b'], 'b')
    """
    ordered = sorted(chunks, key=lambda doc: doc.metadata.get("chunk_index", 0))
    runs: list[list[str]] = []
    previous = None
    for doc in ordered:
        index = doc.metadata.get("chunk_index", 0)
        if runs and previous is not None and index == previous + 1:
            runs[-1].append(doc.page_content)
        else:
            runs.append([doc.page_content])
        previous = index
    metadata = {**chunks[0].metadata, "score": score}
    metadata["chunk_ids"] = [doc.id for doc in ordered]
    return Document("\n[...]\n".join(map(join_chunks, runs)), id=chunks[0].id, metadata=metadata)


def join_chunks(texts: Sequence[str]) -> str:
    """Join consecutive chunks of one document, saying the text each repeats of the last once.

    A splitter with overlap starts a chunk with the end of the previous one; a
    shared run of at least :data:`MIN_OVERLAP` characters is kept once, so its
    words are neither shown nor counted twice. Chunks that do not overlap are
    joined with a line break: the splitter cut there, often between paragraphs,
    and a heading or list item that opens the next chunk stays on its own line.

    Example:
        >>> print(join_chunks(["Leave lasts sixteen", "lasts sixteen weeks.", "## Pay"]))
        Leave lasts sixteen weeks.
        ## Pay
    """
    parts: list[str] = []
    keep, tail = max(map(len, texts), default=0), ""  # an overlap lies in the last chunk's length
    for text in texts:
        shared = _overlap(tail, text)
        parts.append(text[shared:] if shared or not parts else f"\n{text}")
        tail = (tail + parts[-1])[-keep:]
    return "".join(parts)


def _overlap(before: str, after: str) -> int:
    """Length of the longest start of ``after`` that ``before`` ends with; 0 below the minimum."""
    if min(len(before), len(after)) < MIN_OVERLAP:
        return 0
    probe = after[:MIN_OVERLAP]
    position = before.find(probe, max(0, len(before) - len(after)))
    while position != -1:  # the first match is the longest overlap
        if after.startswith(before[position:]):
            return len(before) - position
        position = before.find(probe, position + 1)
    return 0
