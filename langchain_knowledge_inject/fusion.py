"""How dense and keyword rankings become one score, and what a score means.

Every search mode returns ``metadata["score"]`` in [0, 1], higher is better,
and ``min_score`` has one meaning in every mode: chunks scoring below it are
dropped. What the number measures depends on the mode:

* ``dense``: the cosine similarity of query and chunk embeddings
  (:func:`dense_score`; a negative similarity counts as 0). Absolute: an
  unrelated query scores low.
* ``keyword``: the BM25 score relative to the query's best hit
  (:func:`keyword_unit_scores`): the best hit scores 1. Raw BM25 has no fixed
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
higher) or a keyword score of 0.

:data:`DEFAULT_MIN_SCORE` is the highest threshold that keeps 95% of the
relevant SciFact train documents that the default hybrid search ranks in its
top 10; it drops everything for 11 of 12 clearly off-topic test questions and
for 3% of the SciFact test queries. In dense mode it keeps about 90% of them.

Example:
    >>> [chunk_id for chunk_id, _ in fuse([("a", 0.8), ("b", 0.5)], [("b", 12.0), ("c", 6.0)])]
    ['b', 'a', 'c']
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "CANDIDATE_DEPTH",
    "DEFAULT_MIN_SCORE",
    "DENSE_WEIGHT",
    "dense_score",
    "fuse",
    "keyword_unit_scores",
]

CANDIDATE_DEPTH = 100
"""Candidates fetched from each side for a hybrid search (at least ``k``)."""

DENSE_WEIGHT = 0.75
"""Weight ``w`` of the cosine in a hybrid score; the keyword side gets ``1 - w``."""

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
            :meth:`~langchain_knowledge_inject.keyword.KeywordIndex.search`.

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
    cosines: dict[str, float] = {}
    for chunk_id, score in dense:
        cosines.setdefault(chunk_id, min(1.0, max(0.0, float(score))))
    relevance = dict(keyword_unit_scores(keyword))
    floor = min(cosines.values(), default=0.0)
    fused = {
        chunk_id: dense_weight * cosines.get(chunk_id, floor)
        + (1.0 - dense_weight) * relevance.get(chunk_id, 0.0)
        for chunk_id in [*cosines, *relevance]
    }
    order = {chunk_id: position for position, chunk_id in enumerate(fused)}
    return sorted(fused.items(), key=lambda item: (-item[1], order[item[0]]))
