"""The keyword side of hybrid search: BM25 over a tantivy index, and how queries become terms.

The engine is tantivy (the Rust library, through PyPI ``tantivy``): persistent,
incremental, and fast enough to search a large partition without a copy in
Python (figures in docs/performance.md). BM25 is tantivy's own (k1 1.2, b 0.75).

Text is split into Unicode words (runs of letters and digits), words longer
than 40 characters are dropped, the rest lowercased, folded to ASCII
(diacritics removed) and stemmed (English Snowball). A query is built here from
terms, never passed to a query parser, so no input can inject query syntax: its
words are lowercased, :data:`STOPWORDS` (or the caller's set) dropped, at most
:data:`MAX_QUERY_TERMS` kept and analyzed like the text, and matched with OR;
each pair of adjacent query words found as a phrase adds :data:`PHRASE_WEIGHT`
times the phrase's own BM25 score (a light sequential dependence model).

Example:
    >>> index = KeywordIndex(None)
    >>> index.add([("c1", "Parental leave lasts sixteen weeks.", "a.md"),
    ...            ("c2", "Expenses are reimbursed monthly.", "b.md")])
    >>> [(row_id, source) for row_id, _, source in index.search("how long is leave?", k=5)]
    [('c1', 'a.md')]
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

MAX_QUERY_TERMS = 64
"""Most distinct terms (and, separately, phrases) kept from one query; the rest are ignored."""
PHRASE_WEIGHT = 0.3
"""Weight of the adjacent-word-pair phrases in the score (tuned on SciFact train)."""
WRITE_WAIT_S = 30.0
"""Longest wait for the index's one writer, held by another thread or process."""

_MAX_QUERY_CHARS = 20_000
_MAX_TERM_CHARS = 64
_WORD = re.compile(r"[^\W_]+")

STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their"  # noqa: SIM905
    " then there these they this to was will with".split()
)
"""Words dropped from queries (the classic Lucene English stop set)."""


def _words(query: str) -> Iterator[str]:
    for match in _WORD.finditer(query[:_MAX_QUERY_CHARS]):
        yield match.group().casefold()[:_MAX_TERM_CHARS]


def query_terms(query: str, stopwords: AbstractSet[str] = STOPWORDS) -> list[str]:
    """Split a query into the distinct, lowercased, non-stopword words searched for.

    Example:
        >>> query_terms('What is the "leave" policy? leave!')
        ['what', 'leave', 'policy']
    """
    terms: dict[str, None] = {}
    for word in _words(query):
        if word not in stopwords:
            terms[word] = None
            if len(terms) >= MAX_QUERY_TERMS:
                break
    return list(terms)


def query_phrases(query: str, stopwords: AbstractSet[str] = STOPWORDS) -> list[str]:
    """The distinct pairs of adjacent non-stopword words of a query (a stopword breaks a pair).

    Example:
        >>> query_phrases("Does parental leave affect the annual leave?")
        ['does parental', 'parental leave', 'leave affect', 'annual leave']
    """
    phrases: dict[str, None] = {}
    previous = ""
    for word in _words(query):
        if word in stopwords:
            previous = ""
            continue
        if previous:
            phrases[f"{previous} {word}"] = None
            if len(phrases) >= MAX_QUERY_TERMS:
                break
        previous = word
    return list(phrases)


@functools.cache
def _analyzer() -> Any:
    import tantivy

    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


@functools.lru_cache(maxsize=65_536)
def _tokens(word: str) -> tuple[str, ...]:
    return tuple(_analyzer().analyze(word))


@functools.cache
def _schema() -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("source", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("text", stored=False, tokenizer_name="kinject")
    return builder.build()


class KeywordIndex:
    """One BM25 index of ``(id, text, source)`` rows: a tantivy index on disk, or in memory.

    Thread-safe. Writes take the index's one writer for the length of the call
    (tantivy allows one per index directory): another process holding it is
    waited for, up to :data:`WRITE_WAIT_S` seconds.

    Args:
        path: The index directory (created when missing); None keeps it in memory.
    """

    def __init__(self, path: Path | None) -> None:
        import tantivy

        self.path = path
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
        self._index = tantivy.Index(_schema(), path=None if path is None else str(path))
        self._index.register_tokenizer("kinject", _analyzer())
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _writer(self) -> Iterator[Any]:
        with self._lock:
            deadline, pause = time.monotonic() + WRITE_WAIT_S, 0.01
            while True:
                try:
                    writer = self._index.writer(heap_size=32_000_000, num_threads=1)
                    break
                except ValueError as exc:
                    if "LockBusy" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(pause)
                    pause = min(pause * 2, 0.5)
            try:
                yield writer
                writer.commit()
            except BaseException:
                writer.rollback()
                raise
            finally:
                writer.wait_merging_threads()
            self._index.reload()

    def write(self, rows: Iterable[tuple[str, str, str]], delete: Iterable[str] = ()) -> None:
        """Delete rows by id, then add rows (an id present is replaced), in one commit.

        Args:
            rows: ``(id, text, source)`` triples.
            delete: Ids to remove (unknown ones are ignored).
        """
        import tantivy

        with self._writer() as writer:
            for row_id in delete:
                writer.delete_documents_by_term("id", row_id)
            for row_id, text, source in rows:
                writer.delete_documents_by_term("id", row_id)
                writer.add_document(tantivy.Document(id=row_id, text=text, source=source))

    def add(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """Add ``(id, text, source)`` rows; an id present is replaced."""
        self.write(rows)

    def delete(self, ids: Iterable[str]) -> None:
        """Remove rows by id; unknown ids are ignored."""
        self.write((), ids)

    def clear(self) -> None:
        """Remove every row."""
        with self._writer() as writer:
            writer.delete_all_documents()

    def reload(self) -> None:
        """See the last commit of any writer (another process's too)."""
        self._index.reload()

    def search(
        self, query: str, *, k: int, stopwords: AbstractSet[str] = STOPWORDS, phrases: bool = True
    ) -> list[tuple[str, float, str]]:
        """Rank rows by BM25 against a free-text query (``phrases``: with the word-pair bonus).

        Returns:
            ``(id, score, source)`` triples, best first; the score is the raw BM25
            score (positive, not bounded). Empty when no query word is usable.
        """
        built = self._query(query, stopwords, phrases=phrases)
        if built is None or k <= 0:
            return []
        searcher = self._index.searcher()
        hits = [
            (score, searcher.doc(a)) for score, a in searcher.search(built, k, count=False).hits
        ]
        return [(doc["id"][0], float(score), doc["source"][0]) for score, doc in hits]

    def _query(self, query: str, stopwords: AbstractSet[str], *, phrases: bool) -> Any:
        import tantivy

        schema, should = _schema(), tantivy.Occur.Should
        tokens = dict.fromkeys(t for word in query_terms(query, stopwords) for t in _tokens(word))
        if not tokens:
            return None
        clauses = [(should, tantivy.Query.term_query(schema, "text", t)) for t in tokens]
        for phrase_words in query_phrases(query, stopwords) if phrases else ():
            words: list[Any] = [t for word in phrase_words.split(" ") for t in _tokens(word)]
            if len(words) >= 2:
                phrase = tantivy.Query.phrase_query(schema, "text", words)
                clauses.append((should, tantivy.Query.boost_query(phrase, PHRASE_WEIGHT)))
        return tantivy.Query.boolean_query(clauses)

    def sources(self, ids: Sequence[str]) -> dict[str, str]:
        """The source of each of ``ids`` that the index holds."""
        import tantivy

        if not ids:
            return {}
        searcher, schema, should = self._index.searcher(), _schema(), tantivy.Occur.Should
        terms = [(should, tantivy.Query.term_query(schema, "id", i)) for i in dict.fromkeys(ids)]
        hits = searcher.search(tantivy.Query.boolean_query(terms), len(terms), count=False).hits
        return {doc["id"][0]: doc["source"][0] for doc in (searcher.doc(a) for _, a in hits)}

    def ids(self) -> set[str]:
        """Every id the index holds."""
        import tantivy

        searcher = self._index.searcher()
        if not searcher.num_docs:
            return set()
        hits = searcher.search(tantivy.Query.all_query(), searcher.num_docs, count=False).hits
        return {searcher.doc(address)["id"][0] for _, address in hits}

    def count(self) -> int:
        """How many rows the index holds."""
        return int(self._index.searcher().num_docs)
