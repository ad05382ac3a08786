"""How dense and keyword rankings become one score, and what a score means.

Every search mode returns ``metadata["score"]`` in [0, 1], higher is better,
and ``min_score`` has one meaning in every mode: chunks scoring below it are
dropped. What the number measures depends on the mode:

* ``dense``: the cosine similarity of query and chunk embeddings
  (:func:`dense_score`; a negative similarity counts as 0). Absolute: an
  unrelated query scores low.
* ``keyword``: the BM25 score relative to the query's best hit
  (:func:`keyword_unit_scores`): the best hit scores 1. With the document
  index answering (no metadata filter), each chunk's relative BM25 is first
  blended with its document's, as in hybrid search with no dense side
  (:data:`DOCUMENT_WEIGHT`), and the result divided by the best: SciFact
  train keyword nDCG@10 0.7013 against 0.6704 for chunks of 128 word pieces
  scored alone (0.6893 for the earlier 254). Raw BM25 has no fixed
  scale (it grows with the corpus size and the query length, and FTS5 floors
  the weight of words found in half the chunks or more, which in a knowledge
  base of a few chunks is most words), so a relative score is the only one
  that behaves the same in every knowledge base. ``min_score`` then trims the
  tail, but cannot tell that a whole query is unrelated.
* ``hybrid`` (the default): ``w * cosine + (1 - w) * keyword`` (:func:`fuse`,
  ``w`` = :data:`DENSE_WEIGHT`, keyword as in keyword mode). The cosine carries
  the absolute part: an unrelated query scores low.

The fusion is a convex combination, chosen on the 809 BEIR SciFact train
queries against reciprocal rank fusion, min-max and z-score normalization,
power transforms, logistic regression and dense pseudo-relevance feedback
(none did better than noise on train). A chunk found by one side only gets,
for the other side, the lowest cosine of the dense list (its cosine cannot be
higher) or a keyword score of 0. Hybrid search also scores each chunk's
document (:func:`fuse_with_documents`, its keyword side from BM25 over the
document's whole text). Rechecked on train at the document level through the
default ingest path: min-max, z-score and reciprocal rank fusion, a
rank-fusion term added to the convex score, power transforms of the keyword
score, a second-best-chunk cosine bonus, deeper candidate lists (200),
Rocchio feedback on the query vector and RM3-style keyword expansion: none
beat the convex combination by more than 0.0005 nDCG@10, most scored below it
(reciprocal rank fusion alone by 0.025). ``benchmarks/fusion_lab.py`` and its
``--rescore`` mode (``benchmarks/fusion_rescore.py``) measure these and more
with held-out folds; their figures are in ``benchmarks/retrieval_quality.py``.

:data:`DEFAULT_MIN_SCORE` is the highest threshold that keeps 95% of the
relevant SciFact train documents that the default hybrid search ranks in its
top 10; it drops everything for 11 of 12 clearly off-topic test questions and
for 3% of the SciFact test queries. In dense mode it keeps about 90% of them.

Example:
    >>> [chunk_id for chunk_id, _ in fuse([("a", 0.8), ("b", 0.5)], [("b", 12.0), ("c", 6.0)])]
    ['b', 'a', 'c']
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Literal

__all__ = [
    "CANDIDATE_DEPTH",
    "DEFAULT_MIN_SCORE",
    "DENSE_WEIGHT",
    "DOCUMENT_KEYWORD",
    "DOCUMENT_WEIGHT",
    "DocumentKeyword",
    "KeywordPool",
    "dense_cosines",
    "dense_score",
    "fuse",
    "fuse_with_documents",
    "keyword_unit_scores",
]

KeywordPool = Literal["max", "sum"]
"""How the keyword scores of one document's chunks become the document's keyword score."""

CANDIDATE_DEPTH = 100
"""Candidates fetched from each side for a hybrid search (at least ``k``)."""

DENSE_WEIGHT = 0.75
"""Weight ``w`` of the cosine in a hybrid score; the keyword side gets ``1 - w``."""

DOCUMENT_WEIGHT = 0.75
"""Share of a chunk's hybrid score that comes from its whole document (:func:`fuse_with_documents`).

Chosen on the 809 SciFact train queries through the default ingest path
(then chunks of at most 254 word pieces; ``retrieval_quality.py --split train
--sweep``), and checked again with the chunks of 128 and the document lead
now the default: 0.7450 at 0.5, 0.7508 at 0.75, 0.7500 at 0.9, 0.7527 at 1
(dense weights 0.7 / 0.8: 0.7482 / 0.7501). With the document keyword score from the document index
(:data:`DOCUMENT_KEYWORD` ``"index"``): hybrid nDCG@10 0.7306 at 0, 0.7385 at
0.5, 0.7429 at 0.75, 0.7430 at 1 (0.75 keeps a chunk's own match in its
score, which orders the chunks of one document). Pooled from chunks instead
(``"pool"``): 0.7336 / 0.7352 / 0.7352 with ``"max"``, 0.7233 / 0.7099 /
0.6942 with ``"sum"``. Dense weights 0.65, 0.7 and 0.8 gave 0.7401, 0.7420,
0.7424 against 0.7429 at :data:`DENSE_WEIGHT` 0.75.
"""

DocumentKeyword = Literal["index", "pool"]
"""Where a document's keyword score comes from: a BM25 index of whole documents, or its chunks."""

DOCUMENT_KEYWORD: DocumentKeyword = "index"
"""Default source of a document's keyword score in hybrid search (chosen on SciFact train).

``"index"``: BM25 over the document's whole text
(:class:`~langchain_knowledge_inject._store.documents.DocumentIndex`); a
document not indexed yet, or any document in a search with a metadata
filter, is pooled. ``"pool"``: its chunks' BM25 scores, pooled by
:data:`KEYWORD_POOL`. Train hybrid nDCG@10 0.7429 indexed against 0.7352
pooled (see :data:`DOCUMENT_WEIGHT`).
"""

KEYWORD_POOL: KeywordPool = "max"
"""Default pooling of a document's chunk BM25 scores (chosen on SciFact train, see above)."""

DEFAULT_MIN_SCORE = 0.47
"""Default ``min_score``: keeps 95% of the relevant top-10 hybrid hits on SciFact train."""


def dense_score(distance: float) -> float:
    """Turn a Chroma cosine distance into a score in [0, 1]: the cosine similarity.

    Args:
        distance: Chroma's cosine distance, ``1 - cosine``, in [0, 2].

    Returns:
        ``1 - distance`` clipped to [0, 1].

    Example:
        >>> dense_score(0.25), dense_score(1.4)
        (0.75, 0.0)
    """
    return min(1.0, max(0.0, 1.0 - float(distance)))


def keyword_unit_scores(hits: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Scale raw BM25 scores into [0, 1] relative to the best hit, keeping their order.

    Args:
        hits: ``(chunk_id, bm25)`` pairs, best first, as returned by
            :meth:`~langchain_knowledge_inject._store.keyword.KeywordIndex.search`.

    Returns:
        ``(chunk_id, bm25 / best_bm25)`` pairs, best first (ties and repeated
        chunk ids keep the first seen); hits with a score <= 0 are dropped.

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
        dense: ``(chunk_id, cosine score in [0, 1])`` pairs, best first
            (:func:`dense_score` of Chroma's distances).
        keyword: ``(chunk_id, raw BM25)`` pairs, best first.
        dense_weight: Weight ``w`` of the cosine, in [0, 1].

    Returns:
        ``(chunk_id, w * cosine + (1 - w) * bm25 / best_bm25)`` pairs over the
        union of both lists, best first (ties keep dense-list order). A chunk
        missing from the dense list gets the lowest cosine of that list; one
        missing from the keyword list gets 0 on that side.

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
    keyword_pool: KeywordPool | None = None,
    document_keyword: Sequence[tuple[str, float]] = (),
    indexed: Collection[str] = (),
) -> list[tuple[str, float]]:
    """Fuse chunk rankings, scoring each chunk by its own evidence and its document's.

    A document is what ``parents`` maps chunk ids to (the ``source`` of a
    chunk); a chunk without a parent is a document of its own. A document's
    cosine is the best cosine among its chunks; its keyword score pools its
    chunks' BM25 scores (``"max"``: the best chunk, the default; ``"sum"``:
    evidence spread over several chunks adds up, which overlapping chunks
    overcount), scaled by the best document's. Each chunk then scores ``document_weight *
    document_score + (1 - document_weight) * chunk_score``, both parts fused as
    :func:`fuse` does, so a chunk of a document that matches the query as a
    whole rises even when the words are spread over several chunks.

    Args:
        dense: ``(chunk_id, cosine score in [0, 1])`` pairs, best first.
        keyword: ``(chunk_id, raw BM25)`` pairs, best first.
        parents: Chunk id to document id.
        dense_weight: Weight ``w`` of the cosine, in [0, 1]. None: :data:`DENSE_WEIGHT`.
        document_weight: Share of the document's score in a chunk's, in [0, 1];
            0 gives :func:`fuse`. None: :data:`DOCUMENT_WEIGHT`.
        keyword_pool: ``"sum"`` or ``"max"``. None: :data:`KEYWORD_POOL`.
        document_keyword: ``(document id, raw BM25)`` pairs, best first, from
            a BM25 index over whole documents
            (:class:`~langchain_knowledge_inject._store.documents.DocumentIndex`).
        indexed: Documents whose keyword score comes from ``document_keyword``
            (relative to its best hit; 0 when not in it) instead of pooling
            their chunks' scores. Documents not in it are pooled.

    Returns:
        ``(chunk_id, score in [0, 1])`` pairs over the union of both lists,
        best first (ties keep :func:`fuse` order).

    Example:
        >>> parents = {"a1": "A", "a2": "A", "b1": "B"}
        >>> ranked = fuse_with_documents(
        ...     [("b1", 0.58), ("a1", 0.55), ("a2", 0.5)], [("b1", 7.0), ("a1", 6.0), ("a2", 6.0)],
        ...     parents, document_weight=0.5, keyword_pool="sum")
        >>> [chunk_id for chunk_id, _ in ranked]
        ['a1', 'b1', 'a2']
    """
    if dense_weight is None:
        dense_weight = DENSE_WEIGHT
    if document_weight is None:
        document_weight = DOCUMENT_WEIGHT
    if keyword_pool is None:
        keyword_pool = KEYWORD_POOL
    chunk_scores = fuse(dense, keyword, dense_weight=dense_weight)
    if document_weight <= 0 or not chunk_scores:
        return chunk_scores

    def parent(chunk_id: str) -> str:
        return parents.get(chunk_id) or f"\x00{chunk_id}"

    cosines: dict[str, float] = {}
    for chunk_id, score in dense:
        doc = parent(chunk_id)
        cosines[doc] = max(cosines.get(doc, 0.0), min(1.0, max(0.0, float(score))))
    floor = min(cosines.values(), default=0.0)
    pooled: dict[str, float] = {}
    seen: set[str] = set()
    for chunk_id, score in keyword:
        if score <= 0 or chunk_id in seen:
            continue
        seen.add(chunk_id)
        doc = parent(chunk_id)
        if keyword_pool == "sum":
            pooled[doc] = pooled.get(doc, 0.0) + float(score)
        else:
            pooled[doc] = max(pooled.get(doc, 0.0), float(score))
    best = max(pooled.values(), default=1.0)
    relevance = {doc: score / best for doc, score in pooled.items()}
    if indexed:
        whole = dict(keyword_unit_scores(document_keyword))
        relevance.update({doc: whole.get(doc, 0.0) for doc in indexed})
    documents = {
        doc: dense_weight * cosines.get(doc, floor) + (1.0 - dense_weight) * relevance.get(doc, 0.0)
        for doc in {parent(chunk_id) for chunk_id, _ in chunk_scores}
    }
    order = {chunk_id: position for position, (chunk_id, _) in enumerate(chunk_scores)}
    mixed = [
        (
            chunk_id,
            document_weight * documents[parent(chunk_id)] + (1.0 - document_weight) * score,
        )
        for chunk_id, score in chunk_scores
    ]
    return sorted(mixed, key=lambda item: (-item[1], order[item[0]]))
