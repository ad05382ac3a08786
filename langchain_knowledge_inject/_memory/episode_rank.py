"""How the candidates of one episode search are scored and ordered (used by :mod:`~.episodic`).

A candidate's score is its hybrid similarity from the knowledge base, plus:

- ``date_weight`` when it lies inside a date named in the question;
- ``speaker_weight`` when its speaker is named in the question;
- ``session_weight`` times its session's score (the mean similarity of the
  session's two best candidates): in a long dialogue, the turns around an
  answer share its topic, so a session that matches the question as a whole
  lifts its turns;
- a recency bonus that halves every ``half_life_days`` before ``now``.

Ties go to the newer episode, then to the smaller id, so the order never
depends on ``k``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from langchain_knowledge_inject._memory.episode_fields import Candidate

__all__ = ["rank", "session_scores"]


def rank(
    found: Sequence[Candidate],
    in_range: Sequence[Candidate] | None,
    *,
    span: tuple[float, float] | None,
    now: datetime | None,
    recency_weight: float,
    half_life_days: float,
    date_weight: float,
    named: frozenset[str] = frozenset(),
    speaker_weight: float = 0.0,
    session_weight: float = 0.0,
) -> list[tuple[float, Candidate]]:
    """Score and order the candidates of one search, best first: ``(score, candidate)`` pairs.

    ``found`` is the knowledge base's hybrid search; ``in_range`` the same
    search restricted to the date range ``span`` (epoch seconds) named in the
    question, whose episodes get ``date_weight`` on top of their best hybrid
    score. With ``now``, newer episodes get up to ``recency_weight`` (halving
    every ``half_life_days`` before ``now``); episodes of a speaker named in
    the question (``named``, casefolded) get ``speaker_weight``. With
    ``session_weight``, each episode also gets that share of its session's
    score: the mean hybrid score of the session's two best candidates (a
    session that matches the question as a whole lifts its turns). Ties: newer
    first, then by id, so the order never depends on ``k``. Episodes are read
    back later, only for what is returned.
    """
    best: dict[str, Candidate] = {}
    for candidate in [*found, *(in_range or ())]:
        kept = best.get(candidate.episode_id)
        if kept is None or candidate.similarity > kept.similarity:
            best[candidate.episode_id] = candidate
    reference = now.timestamp() if now is not None and recency_weight else None
    sessions = session_scores(best.values()) if session_weight else {}
    rows = []
    for episode_id, candidate in best.items():
        ts, score = candidate.ts, candidate.similarity
        if sessions:
            score += session_weight * sessions.get(candidate.thread, 0.0)
        if span is not None and span[0] <= ts < span[1]:
            score += date_weight
        if named and candidate.speaker.casefold() in named:
            score += speaker_weight
        if reference is not None:
            age_days = max(0.0, (reference - ts) / 86400)
            score += recency_weight * 0.5 ** (age_days / half_life_days)
        rows.append((-round(score, 6), -ts, episode_id, candidate))
    rows.sort(key=lambda row: row[:3])
    return [(-row[0], row[3]) for row in rows]


def session_scores(candidates: Iterable[Candidate]) -> dict[str, float]:
    """Per thread (session) among the candidates: the mean score of its two best episodes."""
    top: dict[str, list[float]] = {}  # thread -> its two best scores
    for candidate in candidates:
        if not candidate.thread:
            continue
        pair = top.setdefault(candidate.thread, [0.0, 0.0])
        if candidate.similarity > pair[0]:
            pair[0], pair[1] = candidate.similarity, pair[0]
        elif candidate.similarity > pair[1]:
            pair[1] = candidate.similarity
    return {thread: (a + b) / 2 for thread, (a, b) in top.items()}
