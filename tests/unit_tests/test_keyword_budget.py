"""Bounded keyword queries on large partitions: rarest terms select, every term scores."""

from __future__ import annotations

import random
import sqlite3

import pytest

from langchain_knowledge_inject._store import keyword
from langchain_knowledge_inject._store.keyword import KeywordIndex, _varint

WORDS = [f"w{i}" for i in range(300)]


def _corpus(n: int = 2000, seed: int = 3) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return [(f"c{i}", " ".join(rng.choices(WORDS, weights, k=30))) for i in range(n)]


@pytest.fixture
def index():
    conn = sqlite3.connect(":memory:")
    idx = KeywordIndex(conn)
    idx.add("kb", "", _corpus())
    conn.commit()
    return idx


def _exact(idx: KeywordIndex, query: str, k: int) -> list[tuple[str, float]]:
    # the plain OR query over every term: what an unbounded search ranks by
    table = idx._table("kb", "")
    ranked = idx._ranked(table, keyword.query_terms(query), k)
    names = idx._chunk_ids([row for row, _ in ranked])
    return [(names[row], score) for row, score in ranked]


@pytest.mark.parametrize("query", ["w0 w1 w150 w299", "w2 w40 w41", "w0 w5 w77 w200 w250"])
def test_bounded_scores_are_exact_bm25(index, monkeypatch, query):
    monkeypatch.setattr(keyword, "PHRASE_WEIGHT", 0.0)
    exact = dict(_exact(index, query, 2000))
    monkeypatch.setattr(keyword, "POSTING_BUDGET", 400)
    monkeypatch.setattr(keyword, "BOUNDED_ABOVE", 1)
    bounded = index.search("kb", "", query, k=50)
    assert bounded
    for chunk_id, score in bounded:
        assert score == pytest.approx(exact[chunk_id], rel=1e-9)
    best = sorted(exact.items(), key=lambda item: -item[1])[:50]
    overlap = {c for c, _ in bounded} & {c for c, _ in best}
    # a budget of 20% of the rows is far tighter than the default; chunks matching only
    # frequent words may drop out, the rest stays
    assert len(overlap) >= 35


def test_small_tables_take_the_plain_query(index, monkeypatch):
    monkeypatch.setattr(keyword, "POSTING_BUDGET", 400)  # 5 x 400 = all 2,000 rows
    calls = []
    original = index._document_frequency
    monkeypatch.setattr(
        index, "_document_frequency", lambda *a: calls.append(a) or original(*a)
    )
    assert index.search("kb", "", "w0 w1 w2", k=5)
    assert calls == []  # 2,000 rows, not above 5 budgets: no frequency lookups at all


def test_absent_words_neither_select_nor_hide_matches(index, monkeypatch):
    monkeypatch.setattr(keyword, "POSTING_BUDGET", 100)
    monkeypatch.setattr(keyword, "BOUNDED_ABOVE", 1)
    found = index.search("kb", "", "zzzunknown w0", k=5)
    assert len(found) == 5  # the frequent word still finds chunks
    assert index.search("kb", "", "zzzunknown qqqabsent", k=5) == []


def test_frequency_cache_refreshes_when_the_table_grows(index, monkeypatch):
    monkeypatch.setattr(keyword, "POSTING_BUDGET", 100)
    table = index._table("kb", "")
    before = index._document_frequency(table, "w299", index._row_total(table))
    index.add("kb", "", [(f"n{i}", "w299 fresh") for i in range(500)])
    index._conn.commit()
    rows = index._row_total(table)
    assert rows == 2500
    assert index._document_frequency(table, "w299", rows) == before + 500


def test_varint_decoding():
    assert _varint(bytes([0x05])) == 5
    assert _varint(bytes([0x81, 0x00])) == 128
    assert _varint(bytes([0x87, 0x68])) == 1000
    assert _varint(bytes([0xFF] * 8 + [0xFF])) == 2**64 - 1
