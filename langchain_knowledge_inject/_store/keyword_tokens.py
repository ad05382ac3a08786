"""FTS5's own tokenizer, usable outside an FTS5 table.

The in-memory keyword copy (:mod:`keyword_postings`) must see exactly the
tokens that its FTS5 table indexes: the same word splitting, case and
diacritic folding and Porter stems. Rather than re-implement them, each
distinct whitespace-separated piece of text is tokenized once by a private
in-memory FTS5 table with the same ``tokenize`` option, and its tokens are
cached as integer term ids.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from itertools import chain, repeat

import numpy as np

__all__ = ["Fts5Tokenizer"]

_CACHE_MAX = 500_000
_STEM_BATCH = 20_000


class Fts5Tokenizer:
    """Tokenizes text exactly as an FTS5 table with the given ``tokenize`` option does.

    Text is split at whitespace (a separator for every FTS5 tokenizer) and each
    distinct piece is tokenized once by a private in-memory FTS5 table; the
    pieces' tokens are cached as integer term ids (:attr:`vocab`), shared by
    every index that uses this tokenizer.

    Args:
        tokenize: The FTS5 ``tokenize`` option, e.g. ``"porter unicode61"``.

    Example:
        >>> Fts5Tokenizer("porter unicode61").tokens(["Running dogs!"])
        [['run', 'dog']]
    """

    def __init__(self, tokenize: str) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        quoted = tokenize.replace("'", "''")
        self._conn.execute(f"CREATE VIRTUAL TABLE tok USING fts5(text, tokenize = '{quoted}')")
        self._conn.execute("CREATE VIRTUAL TABLE tok_v USING fts5vocab(tok, 'instance')")
        self.vocab: dict[str, int] = {}
        """Term -> term id."""
        self._names: list[str] = []  # term id -> term
        self._pieces: dict[str, int] = {}  # whitespace-separated piece -> piece number
        self._piece_start = np.zeros(1024, dtype=np.int64)  # piece -> first of its term ids
        self._piece_len = np.zeros(1024, dtype=np.int64)  # piece -> number of tokens
        self._piece_terms = np.zeros(4096, dtype=np.int64)
        self._terms_used = 0

    def tokens(self, texts: Sequence[str]) -> list[list[str]]:
        """The tokens of each text, in order, as FTS5 would index them.

        Args:
            texts: Texts to tokenize.
        """
        names = self._names
        return [[names[t] for t in ids] for ids in self.term_ids(texts)]

    def term_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The term ids of each text's tokens, in order.

        Args:
            texts: Texts to tokenize.
        """
        term_ids, lengths = self.encode(texts)
        bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
        flat = term_ids.tolist()
        return [flat[bounds[i] : bounds[i + 1]] for i in range(len(texts))]

    def lookup(self, terms: Sequence[str]) -> list[list[int]]:
        """Each query term's token ids, -1 for a token never indexed; learns nothing.

        Args:
            terms: Query terms (each usually one token).
        """
        found: list[list[tuple[int, str]]] = [[] for _ in terms]
        with self._conn:
            self._conn.executemany("INSERT INTO tok (rowid, text) VALUES (?, ?)", enumerate(terms))
            for doc, offset, term in self._conn.execute("SELECT doc, offset, term FROM tok_v"):
                found[doc].append((offset, term))
            self._conn.execute("DELETE FROM tok")
        return [[self.vocab.get(term, -1) for _, term in sorted(tokens)] for tokens in found]

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Term ids of all tokens of ``texts`` (concatenated) and each text's token count.

        Args:
            texts: Texts to tokenize.
        """
        split = [text.split() for text in texts]
        words = list(chain.from_iterable(split))
        pieces = self._pieces
        numbers = np.fromiter(map(pieces.get, words, repeat(-1)), dtype=np.int64, count=len(words))
        missing = np.flatnonzero(numbers < 0)
        if missing.size:
            if len(pieces) + missing.size > _CACHE_MAX:
                self._forget()
                missing = np.arange(len(words))
            self._learn([words[i] for i in missing])
            numbers[missing] = [pieces[words[i]] for i in missing]
        word_counts = np.fromiter(map(len, split), dtype=np.int64, count=len(split))
        lens = self._piece_len[numbers]
        starts = self._piece_start[numbers]
        if lens.size and lens.min() == 1 and lens.max() == 1:
            term_ids = self._piece_terms[starts]
        else:
            total = int(lens.sum())
            first = np.repeat(np.cumsum(lens) - lens, lens)
            term_ids = self._piece_terms[np.repeat(starts, lens) + np.arange(total) - first]
        ends = np.cumsum(word_counts)
        tokens_before = np.concatenate([[0], np.cumsum(lens)])
        lengths = tokens_before[ends] - tokens_before[ends - word_counts]
        return term_ids, lengths.astype(np.int32)

    def _forget(self) -> None:
        self._pieces.clear()
        self._terms_used = 0

    def release(self) -> None:
        """Drop the cache of tokenized pieces (after a bulk build; it refills as needed)."""
        self._forget()
        self._piece_start = np.zeros(1024, dtype=np.int64)
        self._piece_len = np.zeros(1024, dtype=np.int64)
        self._piece_terms = np.zeros(4096, dtype=np.int64)

    def _learn(self, words: Sequence[str]) -> None:
        unknown = list(dict.fromkeys(words))
        for start in range(0, len(unknown), _STEM_BATCH):
            batch = unknown[start : start + _STEM_BATCH]
            with self._conn:
                self._conn.executemany(
                    "INSERT INTO tok (rowid, text) VALUES (?, ?)", enumerate(batch)
                )
                found = self._conn.execute("SELECT doc, offset, term FROM tok_v").fetchall()
                self._conn.execute("DELETE FROM tok")
            found.sort()
            counts = np.bincount(
                np.fromiter((doc for doc, _, _ in found), dtype=np.int64, count=len(found)),
                minlength=len(batch),
            )
            self._store(batch, counts, [self._term_id(term) for _, _, term in found])

    def _term_id(self, term: str) -> int:
        term_id = self.vocab.get(term)
        if term_id is None:
            term_id = self.vocab[term] = len(self._names)
            self._names.append(term)
        return term_id

    def _store(self, words: list[str], counts: np.ndarray, term_ids: list[int]) -> None:
        """Record ``words[i]``'s ``counts[i]`` tokens, whose ids follow in order in ``term_ids``."""
        first = len(self._pieces)
        need = first + len(words)
        if need > self._piece_len.size:
            size = max(need, 2 * self._piece_len.size)
            self._piece_len = np.resize(self._piece_len, size)
            self._piece_start = np.resize(self._piece_start, size)
        used = self._terms_used
        if used + len(term_ids) > self._piece_terms.size:
            self._piece_terms = np.resize(
                self._piece_terms, max(used + len(term_ids), 2 * self._piece_terms.size)
            )
        self._piece_terms[used : used + len(term_ids)] = term_ids
        self._piece_len[first:need] = counts
        self._piece_start[first:need] = used + np.cumsum(counts) - counts
        self._terms_used = used + len(term_ids)
        self._pieces.update(zip(words, range(first, need), strict=True))
