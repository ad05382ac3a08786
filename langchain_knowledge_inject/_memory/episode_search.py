"""The parts of an episode search: its filter, its candidates' fields, their ranking.

The knowledge base gives ``(chunk id, score, cosine)`` hits (``search_hits(...,
with_dense=True)``); the fields they are ranked by are read once per chunk and
kept per user (:class:`EpisodeFields`), so only returned episodes are read whole.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from langchain_knowledge_inject._memory import require
from langchain_knowledge_inject._memory.episodes import utc
from langchain_knowledge_inject._store.keyword import STOPWORDS
from langchain_knowledge_inject._turn.query import FUNCTION_WORDS

if TYPE_CHECKING:
    from langchain_core.documents import Document

    from langchain_knowledge_inject._memory.episodic import EpisodicOptions

QUESTION_STOPWORDS = STOPWORDS | FUNCTION_WORDS
"""What the keyword side of an episode search leaves out: Lucene's 33 and the function words.

Short dialogue turns are full of "what", "did", "you": matched as keywords,
they rank "What did you do?" above the answer. The question's vector keeps them.
"""
MAX_KEPT = 200_000
"""Most chunks whose fields are kept, over all users (then all are dropped and read again)."""


class Candidate(NamedTuple):
    """One hit of an episode search, with the fields it is ranked by."""

    chunk_id: str
    episode_id: str
    similarity: float
    """The knowledge base's (hybrid) score for the query, in [0, 1]."""
    ts: float
    """When the episode was said (epoch seconds)."""
    speaker: str
    dense: float = 0.0
    """The dense side's score alone (the cosine)."""
    thread: str = ""
    """The conversation (session) it belongs to."""
    kind: str = ""
    """``"turn"``, ``"exchange"`` or ``"memory"``."""

    @property
    def evidence(self) -> float:
        """What ``min_score`` is judged on: the better of the hybrid score and the cosine.

        A paraphrase without a word of the question keeps only 0.75 of its cosine in
        the hybrid score (``0.75 * cosine + 0.25 * keyword``).
        """
        return max(self.similarity, self.dense)


_Fields = tuple[str, float, str, str, str]  # episode id, ts, speaker, thread, kind


class EpisodeFields:
    """Episode id, date, speaker, thread and kind per chunk, and the speakers seen, kept per user.

    :meth:`wrote` (after each write) drops what is kept of the episodes written;
    a read that overlaps a write of the same user is used but not kept, so a
    kept field is never older than the last write.

    Args:
        read: Reads chunks back: ``read(chunk_ids, user)`` (``KnowledgeBase.get_by_ids``).
        max_kept: Most chunks kept over all users.
    """

    def __init__(
        self, read: Callable[[Sequence[str], str], list[Document]], *, max_kept: int = MAX_KEPT
    ) -> None:
        self._read, self._max_kept = read, max_kept
        self._lock = threading.Lock()
        self._fields: dict[str, dict[str, _Fields]] = {}  # user -> chunk id -> fields
        self._writes: dict[str, int] = {}  # user -> writes so far (older reads are not kept)
        self._speakers: dict[str, set[str]] = {}
        self._kept = 0

    def speakers(self, user: str) -> frozenset[str]:
        """The speakers of ``user``'s episodes written or read so far."""
        with self._lock:
            return frozenset(self._speakers.get(user, ()))

    def candidates(self, hits: Iterable[tuple[str, float, float]], user: str) -> list[Candidate]:
        """The ``(chunk id, score, cosine)`` hits with their fields (chunks gone are left out)."""
        hits = list(hits)
        with self._lock:
            kept = self._fields.get(user, {})
            got = {cid: kept[cid] for cid, _, _ in hits if cid in kept}
            writes = self._writes.get(user, 0)
        if missing := [cid for cid, _, _ in hits if cid not in got]:
            read = {str(d.id): _fields_of(d) for d in self._read(missing, user) if d.id}
            got.update(read)
            self._keep(user, read, writes)
        return [
            Candidate(cid, fields[0], float(score), fields[1], fields[2], float(dense), *fields[3:])
            for cid, score, dense in hits
            if (fields := got.get(cid)) is not None
        ]

    def wrote(
        self, user: str, episode_ids: Iterable[str] | None = None, speakers: Iterable[str] = ()
    ) -> None:
        """Episodes of ``user`` were written (with ``None``: all of the user's were deleted)."""
        with self._lock:
            self._writes[user] = self._writes.get(user, 0) + 1
            if episode_ids is None:
                self._kept -= len(self._fields.pop(user, {}))
                self._speakers.pop(user, None)
                return
            self._speakers.setdefault(user, set()).update(s for s in speakers if s)
            written, kept = set(episode_ids), self._fields.get(user, {})
            for cid in [cid for cid, fields in kept.items() if fields[0] in written]:
                del kept[cid]
                self._kept -= 1

    def _keep(self, user: str, read: dict[str, _Fields], writes: int) -> None:
        with self._lock:
            self._speakers.setdefault(user, set()).update(f[2] for f in read.values() if f[2])
            if self._writes.get(user, 0) != writes:  # written meanwhile: maybe older than that
                return
            if self._kept + len(read) > self._max_kept:
                self._fields.clear()
                self._kept = 0
            kept = self._fields.setdefault(user, {})
            self._kept += len(read.keys() - kept.keys())
            kept.update(read)


def _fields_of(doc: Document) -> _Fields:
    meta = doc.metadata
    speaker, thread = str(meta.get("ep_speaker") or ""), str(meta.get("ep_thread") or "")
    return str(meta["ep_id"]), float(meta["ep_ts"]), speaker, thread, str(meta.get("ep_kind", ""))


def rank(
    found: Sequence[Candidate],
    in_range: Sequence[Candidate] | None,
    *,
    options: EpisodicOptions,
    span: tuple[float, float] | None = None,
    now: datetime | None = None,
    recency_weight: float = 0.0,
    named: frozenset[str] = frozenset(),
    stated: Mapping[str, float] | None = None,
) -> list[tuple[float, Candidate]]:
    """Score and order the candidates of one search, best first: ``(score, candidate)`` pairs.

    The score is the similarity, plus ``statement_weight`` times the cosine of
    the episode's best statement (``stated``: episode id to cosine),
    ``date_weight`` inside the ``span`` named in the question (``in_range``: the
    search restricted to it), ``speaker_weight`` for a speaker ``named`` in it,
    ``session_weight`` times its session's score (:func:`session_scores`), and
    with ``now`` a recency bonus halving every ``recency_half_life_days``. Ties:
    newer first, then by id (stable in ``k``).
    """
    best: dict[str, Candidate] = {}
    for candidate in [*found, *(in_range or ())]:
        kept = best.get(candidate.episode_id)
        if kept is None or candidate.similarity > kept.similarity:
            best[candidate.episode_id] = candidate
    reference = now.timestamp() if now is not None and recency_weight else None
    sessions = session_scores(best.values())
    rows = []
    for episode_id, candidate in best.items():
        ts, score = candidate.ts, candidate.similarity
        score += options.statement_weight * (stated or {}).get(episode_id, 0.0)
        score += options.session_weight * sessions.get(candidate.thread, 0.0)
        if span is not None and span[0] <= ts < span[1]:
            score += options.date_weight
        if named and candidate.speaker.casefold() in named:
            score += options.speaker_weight
        if reference is not None:
            age_days = max(0.0, (reference - ts) / 86400)
            score += recency_weight * 0.5 ** (age_days / options.recency_half_life_days)
        rows.append((-round(score, 6), -ts, episode_id, candidate))
    rows.sort(key=lambda row: row[:3])
    return [(-row[0], row[3]) for row in rows]


def session_scores(candidates: Iterable[Candidate]) -> dict[str, float]:
    """Per thread among the candidates, the mean similarity of its two best episodes.

    In a long conversation the turns around an answer share its topic, so a
    session that matches as a whole lifts each of its turns.

    Example:
        >>> hits = [Candidate("c", e, s, 0.0, "", thread=t)
        ...         for e, s, t in [("a", 0.8, "s1"), ("b", 0.4, "s1"), ("c", 0.7, "s2")]]
        >>> session_scores(hits)
        {'s1': 0.6000000000000001, 's2': 0.35}
    """
    best: dict[str, list[float]] = {}
    for candidate in candidates:
        if candidate.thread:
            best[candidate.thread] = sorted([*best.get(candidate.thread, []),
                                             candidate.similarity], reverse=True)[:2]  # fmt: skip
    return {thread: sum(two) / 2 for thread, two in best.items()}


def named(text: str, speakers: Iterable[str]) -> list[str]:
    """The speakers named in ``text`` (whole words, any case), longest first."""
    return sorted(
        (s for s in speakers if re.search(rf"(?<!\w){re.escape(s)}(?!\w)", text, re.IGNORECASE)),
        key=len, reverse=True,
    )  # fmt: skip


def strip_names(text: str, names: Sequence[str]) -> str:
    """``text`` without the speakers' names: they are metadata, matched by ``speaker_weight``."""
    for name in names:
        text = re.sub(
            rf"(?<!\w){re.escape(name)}(?:['\u2019]s)?(?!\w)", " ", text, flags=re.IGNORECASE
        )
    stripped = " ".join(text.split())
    return stripped if re.search(r"\w", stripped) else text


def both(*clauses: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``$and`` of the non-empty filter clauses, or ``None`` when there are none."""
    parts = [dict(c) for c in clauses if c]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def where(
    thread_id: str | Sequence[str] | None,
    since: datetime | None,
    until: datetime | None,
    speaker: str | None,
    filter: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """The Chroma ``where`` filter of one memory search (thread, dates, speaker, metadata)."""
    own = isinstance(filter, Mapping) and not any(
        k == "tenant_id" or k[:3] == "ep_" for k in filter
    )
    threads = [thread_id] if isinstance(thread_id, str) else [str(t) for t in thread_id or ()]
    require([
        ("filter", filter, filter is None or own, "a mapping on your own metadata (Chroma's "
         "where language); use user_id, thread_id, since, until and speaker for the rest"),
        ("thread_id", thread_id, thread_id is None or bool(threads),
         "a thread id, a non-empty list of them, or None"),
    ])  # fmt: skip
    clauses: list[Mapping[str, Any] | None] = [filter]
    if threads:
        clauses.append({"ep_thread": {"$in": threads}})
    if since is not None:
        clauses.append({"ep_ts": {"$gte": utc(since, "since").timestamp()}})
    if until is not None:
        clauses.append({"ep_ts": {"$lt": utc(until, "until").timestamp()}})
    if speaker is not None:
        clauses.append({"ep_speaker": {"$eq": speaker}})
    return both(*clauses)
