"""An in-memory BM25 inverted index that ranks exactly like SQLite FTS5's ``bm25()``.

FTS5 scores an ``OR`` query by visiting every posting of every query term and
calling ``bm25()`` on each matching row: at a million chunks a query holding a
frequent word costs hundreds of milliseconds. This index holds the same
postings as numpy arrays (per term: the rows holding it, sorted, and the
term's frequency in each) and scores a query with a few vectorized passes:
the same formula, the same statistics, so the same scores (to the last few
bits of a double) at a fraction of the cost.

It is a derived copy, never the record: the FTS5 table stays the persistent,
transactional source of truth, and :mod:`keyword_mirror` keeps this copy in step
with it. Text is tokenized by FTS5 itself (:class:`Fts5Tokenizer`, an
in-memory FTS5 table with the same tokenizer), so terms, stems and document
lengths agree with the FTS5 table exactly (:mod:`keyword_tokens`).

Layout: rows get *slots* in arrival order. Postings live in a few immutable
*segments* (term ids sorted; per term a run of slots and frequencies); each
added batch becomes a segment and neighbouring segments of similar size are
merged up to 4M postings each (a merge's memory stays bounded), so a million
60-word chunks make about fifteen. A delete only clears the slot's
``alive`` flag; document frequencies then count live slots, and the index
compacts itself when a quarter of its slots are dead.

Example:
    >>> index = PostingsIndex(Fts5Tokenizer("unicode61"))
    >>> index.add([(1, "red apples"), (2, "green apples and red pears"), (3, "pears")])
    >>> terms = index.tokenizer.term_ids(["red pears"])[0]
    >>> [row for row, _ in index.search(terms, limit=2)]
    [2, 3]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from langchain_knowledge_inject._store.keyword_tokens import Fts5Tokenizer

__all__ = ["BM25_B", "BM25_K1", "PostingsIndex"]

BM25_K1 = 1.2
"""FTS5's ``bm25()`` term-frequency saturation (fixed in SQLite)."""

BM25_B = 0.75
"""FTS5's ``bm25()`` length normalization (fixed in SQLite)."""

_DEAD_COMPACT = 0.25
_SCORE_ALL_BELOW = 100_000  # postings: a query holding fewer scores all of them at once
_SELECT_BUDGET = 50_000  # postings that the terms selecting MaxScore's candidates start with
_SEGMENT_MAX = 4_000_000  # postings; bounds the memory a merge needs (about 30 bytes each)


class _Segment:
    """Immutable postings: ``terms`` sorted; term ``terms[i]`` owns ``starts[i]:starts[i+1]``.

    Per term it also keeps the largest frequency and the shortest row holding
    it, from which a query bounds the term's best possible score.
    """

    __slots__ = ("docs", "freqs", "max_freq", "min_length", "starts", "terms")

    def __init__(
        self, term_of: np.ndarray, docs: np.ndarray, freqs: np.ndarray, lengths: np.ndarray
    ) -> None:
        # term_of and docs are sorted by (term, doc); lengths: slot -> tokens
        self.terms, first = np.unique(term_of, return_index=True)
        self.starts = np.append(first, len(term_of)).astype(np.int64)
        self.docs = docs.astype(np.int32, copy=False)
        self.freqs = freqs.astype(np.uint16 if freqs.size == 0 or freqs.max() < 65536 else np.int32)
        if self.docs.size:
            self.max_freq = np.maximum.reduceat(self.freqs, first).astype(np.int32)
            self.min_length = np.minimum.reduceat(lengths[self.docs], first).astype(np.int32)
        else:
            self.max_freq = self.min_length = np.zeros(0, dtype=np.int32)

    @property
    def size(self) -> int:
        return int(self.docs.size)

    def find(self, term: int) -> int:
        """Position of ``term`` in :attr:`terms`, -1 when absent."""
        i = int(np.searchsorted(self.terms, term))
        return i if i < self.terms.size and self.terms[i] == term else -1

    def term_of(self) -> np.ndarray:
        return np.repeat(self.terms, np.diff(self.starts))

    @classmethod
    def from_pairs(cls, term_of: np.ndarray, docs: np.ndarray, lengths: np.ndarray) -> _Segment:
        """A segment from one (term, doc) pair per token occurrence, in any order."""
        keys = (term_of.astype(np.int64) << 32) | docs.astype(np.int64)
        keys, freqs = np.unique(keys, return_counts=True)
        return cls(keys >> 32, keys & 0xFFFFFFFF, freqs, lengths)

    @classmethod
    def merged(
        cls, parts: Sequence[_Segment], lengths: np.ndarray, keep: np.ndarray | None = None
    ) -> _Segment:
        """One segment from ``parts``; ``keep`` maps old slots to new ones (-1: dropped)."""
        term_of = np.concatenate([p.term_of() for p in parts])
        docs = np.concatenate([p.docs for p in parts]).astype(np.int64)
        freqs = np.concatenate([p.freqs.astype(np.int32) for p in parts])
        if keep is not None:
            docs = keep[docs]
            mask = docs >= 0
            term_of, docs, freqs = term_of[mask], docs[mask], freqs[mask]
        # each part is sorted by (term, doc) and holds later slots than the one before:
        # a stable sort by term (a merge of sorted runs) leaves every term's slots sorted
        order = np.argsort(term_of, kind="stable")
        return cls(term_of[order], docs[order], freqs[order], lengths)


@dataclass
class _Term:
    """One query term: its postings runs, statistics and score bound."""

    parts: list[tuple[np.ndarray, np.ndarray]]  # (slots, frequencies) per segment
    idf: float
    bound: float
    size: int


class PostingsIndex:
    """BM25 over rows identified by integer row ids, scored like FTS5's ``bm25()``.

    Not thread-safe: the caller serializes calls.

    Args:
        tokenizer: Tokenizes added text as the mirrored FTS5 table does.
    """

    def __init__(self, tokenizer: Fts5Tokenizer) -> None:
        self.tokenizer = tokenizer
        """The tokenizer of added text and of query terms."""
        self._segments: list[_Segment] = []
        self._rows = np.zeros(0, dtype=np.int64)  # slot -> row id
        self._lengths = np.zeros(0, dtype=np.int32)  # slot -> tokens
        self._alive = np.zeros(0, dtype=bool)
        self._slots = 0
        self._live = 0
        self._live_tokens = 0
        self._dead = 0
        self._norm: tuple[tuple[int, int, int], np.ndarray] | None = None

    @property
    def count(self) -> int:
        """Live rows."""
        return self._live

    def nbytes(self) -> int:
        """Bytes held by the arrays (postings and per-row data), not the vocabulary."""
        held = self._rows.nbytes + self._lengths.nbytes + self._alive.nbytes
        for s in self._segments:
            held += s.docs.nbytes + s.freqs.nbytes + s.terms.nbytes + s.starts.nbytes
        return held

    def add(self, rows: Sequence[tuple[int, str]]) -> None:
        """Add rows; a row id must not be live already (delete it first).

        Args:
            rows: ``(row_id, text)`` pairs.
        """
        if not rows:
            return
        term_of, lengths = self.tokenizer.encode([text for _, text in rows])
        first = self._slots
        self._grow(first + len(rows))
        slots = np.arange(first, first + len(rows), dtype=np.int64)
        self._rows[slots] = [row for row, _ in rows]
        self._lengths[slots] = lengths
        self._alive[slots] = True
        self._slots += len(rows)
        self._live += len(rows)
        self._live_tokens += int(lengths.sum())
        if term_of.size:
            self._segments.append(
                _Segment.from_pairs(term_of, np.repeat(slots, lengths), self._lengths)
            )
            self._merge_tail()

    def delete(self, row_ids: Iterable[int]) -> None:
        """Remove rows; ids that are not live are ignored.

        Args:
            row_ids: Row ids to remove.
        """
        wanted = np.fromiter(row_ids, dtype=np.int64)
        if wanted.size == 0 or self._live == 0:
            return
        hit = np.flatnonzero(
            self._alive[: self._slots] & np.isin(self._rows[: self._slots], wanted)
        )
        if hit.size == 0:
            return
        self._alive[hit] = False
        self._live -= int(hit.size)
        self._live_tokens -= int(self._lengths[hit].sum())
        self._dead += int(hit.size)
        if self._dead > _DEAD_COMPACT * self._slots:
            self._compact()

    def search(self, terms: Sequence[int], *, limit: int) -> list[tuple[int, float]]:
        """The best rows for the OR of ``terms``, scored as FTS5's ``-bm25()``.

        Exact top-``limit`` by MaxScore: the terms with the highest score bounds
        select candidates, every term scores them (the others by binary search
        in their postings), and terms are added to the selecting ones until the
        remaining terms' bounds together fall below the ``limit``-th score, so
        no row outside the candidates can enter. Small queries score every
        posting at once.

        Args:
            terms: Term ids from the tokenizer's :meth:`Fts5Tokenizer.lookup`; a
                term given twice counts twice, like a phrase repeated in an FTS5 query.
            limit: Most rows returned.

        Returns:
            ``(row_id, score)`` pairs, best first (ties by row id).
        """
        if self._live == 0 or limit <= 0:
            return []
        norm = self._normalizer()
        found = [t for term in terms if (t := self._term(term, norm)) is not None]
        if not found:
            return []
        found.sort(key=lambda t: -t.bound)
        if sum(t.size for t in found) <= _SCORE_ALL_BELOW:
            slots, scores = self._score(found, norm)
        else:
            slots, scores = self._max_score(found, norm, limit)
        if slots.size > limit:
            best = np.argpartition(-scores, limit - 1)[:limit]
            slots, scores = slots[best], scores[best]
        rows = self._rows[slots]
        order = np.lexsort((rows, -scores))
        return [(int(r), float(s)) for r, s in zip(rows[order], scores[order], strict=True)]

    def _max_score(
        self, found: list[_Term], norm: np.ndarray, limit: int
    ) -> tuple[np.ndarray, np.ndarray]:
        selecting = 1
        while (
            selecting < len(found) and sum(t.size for t in found[: selecting + 1]) <= _SELECT_BUDGET
        ):
            selecting += 1
        while True:
            slots, scores = self._score(found[:selecting], norm)
            for term in found[selecting:]:
                scores += self._lookup(term, slots, norm)
            rest = sum(t.bound for t in found[selecting:])
            if selecting == len(found) or (
                slots.size >= limit and np.partition(scores, slots.size - limit)[-limit] > rest
            ):
                return slots, scores
            selecting += 1

    def _term(self, term_id: int, norm: np.ndarray) -> _Term | None:
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        bound = 0.0
        avgdl = self._live_tokens / self._live
        for seg in self._segments:
            i = seg.find(term_id)
            if i < 0:
                continue
            lo, hi = seg.starts[i], seg.starts[i + 1]
            parts.append((seg.docs[lo:hi], seg.freqs[lo:hi]))
            f = float(seg.max_freq[i])
            shortest = BM25_K1 * (1 - BM25_B + BM25_B * float(seg.min_length[i]) / avgdl)
            bound = max(bound, (f * (BM25_K1 + 1.0)) / (f + shortest))
        if not parts:
            return None
        if self._dead:
            rows_with = sum(int(self._alive[docs].sum()) for docs, _ in parts)
        else:
            rows_with = sum(docs.size for docs, _ in parts)
        if rows_with == 0:
            return None
        idf = math.log((self._live - rows_with + 0.5) / (rows_with + 0.5))
        if idf <= 0.0:
            idf = 1e-6
        return _Term(parts, idf, idf * bound * (1 + 1e-9), sum(d.size for d, _ in parts))

    def _score(self, found: Sequence[_Term], norm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every live row holding one of ``found`` (sorted slots) and its score over them."""
        docs_parts: list[np.ndarray] = []
        weight_parts: list[np.ndarray] = []
        for term in found:
            for docs, freqs in term.parts:
                if self._dead:
                    live = self._alive[docs]
                    docs, freqs = docs[live], freqs[live]
                f = freqs.astype(np.float64)
                docs_parts.append(docs)
                weight_parts.append(term.idf * ((f * (BM25_K1 + 1.0)) / (f + norm[docs])))
        docs = np.concatenate(docs_parts)
        weights = np.concatenate(weight_parts)
        if docs.size * 8 < self._slots:
            slots, inverse = np.unique(docs, return_inverse=True)
            return slots, np.bincount(inverse, weights, minlength=slots.size)
        dense = np.bincount(docs, weights, minlength=self._slots)
        slots = np.flatnonzero(dense)
        return slots, dense[slots]

    def _lookup(self, term: _Term, slots: np.ndarray, norm: np.ndarray) -> np.ndarray:
        """``term``'s score in each of ``slots`` (sorted), found by binary search."""
        out = np.zeros(slots.size, dtype=np.float64)
        for docs, freqs in term.parts:
            lo = int(np.searchsorted(slots, docs[0]))
            hi = int(np.searchsorted(slots, docs[-1], side="right"))
            if lo == hi:
                continue
            wanted = slots[lo:hi]
            at = np.searchsorted(docs, wanted)
            hit = docs[at] == wanted
            if not hit.any():
                continue
            f = freqs[at[hit]].astype(np.float64)
            where = wanted[hit]
            out[lo:hi][hit] += term.idf * ((f * (BM25_K1 + 1.0)) / (f + norm[where]))
        return out

    def _normalizer(self) -> np.ndarray:
        """``k1 * (1 - b + b * D / avgdl)`` per slot, for the current statistics."""
        key = (self._slots, self._live, self._live_tokens)
        if self._norm is None or self._norm[0] != key:
            avgdl = self._live_tokens / self._live
            lengths = self._lengths[: self._slots].astype(np.float64)
            norm = BM25_K1 * (1 - BM25_B + BM25_B * lengths / avgdl)
            self._norm = (key, norm)
        return self._norm[1]

    def _grow(self, size: int) -> None:
        if size <= self._rows.size:
            return
        capacity = max(size, int(self._rows.size * 1.5), 1024)
        for name in ("_rows", "_lengths", "_alive"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: old.size] = old
            setattr(self, name, new)

    def _merge_tail(self) -> None:
        segs = self._segments
        while (
            len(segs) > 1
            and segs[-1].size * 4 >= segs[-2].size
            and segs[-1].size + segs[-2].size <= _SEGMENT_MAX
        ):
            tail = _Segment.merged(segs[-2:], self._lengths)
            del segs[-2:]
            segs.append(tail)

    def _compact(self) -> None:
        """Drop dead slots: renumber the live ones (in order) and filter every segment."""
        alive = self._alive[: self._slots]
        keep = np.full(self._slots, -1, dtype=np.int64)
        keep[alive] = np.arange(self._live, dtype=np.int64)
        self._rows = self._rows[: self._slots][alive].copy()
        self._lengths = self._lengths[: self._slots][alive].copy()
        segments = [_Segment.merged([s], self._lengths, keep) for s in self._segments]
        self._segments = [s for s in segments if s.size]
        self._alive = np.ones(self._live, dtype=bool)
        self._slots = self._live
        self._dead = 0
        self._norm = None
