"""The in-memory BM25 copy of large keyword partitions ranks exactly like FTS5 and stays in step."""

from __future__ import annotations

import random
import sqlite3

import pytest

from langchain_knowledge_inject._store import keyword, keyword_mirror
from langchain_knowledge_inject._store.keyword import TOKENIZER, KeywordIndex
from langchain_knowledge_inject._store.keyword_postings import PostingsIndex
from langchain_knowledge_inject._store.keyword_tokens import Fts5Tokenizer

WORDS = [f"w{i}" for i in range(200)] + [
    "running",
    "runs",
    "ran",
    "Café",
    "cafe",
    "naïve",
    "leave",
    "leaves",
    "parental",
    "vitamin",
    "d",
    "x-ray",
    "e.g.",
    "(approval)",
    "Überprüfung",
    "42",
    "3.14",
]


def _text(rng: random.Random, n: int = 25) -> str:
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return " ".join(rng.choices(WORDS, weights, k=rng.randint(0, n)))


def _corpus(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(f"c{i}", _text(rng)) for i in range(n)]


QUERIES = [
    "w0 w1 w150",
    "running leave",
    "cafe naive parental leaves",
    "vitamin d x ray",
    "w3 w3 w4 w199 w120",
    "Überprüfung 42 approval",
    "nothing matches zzz",
    "w0",
]


def _pair(conn: sqlite3.Connection) -> tuple[KeywordIndex, KeywordIndex]:
    """The same tables searched through the copy (fast) and through FTS5 only (plain)."""
    fast = KeywordIndex(conn, postings_above=0, background_build=False)
    plain = KeywordIndex(conn, postings_above=10**12)
    return fast, plain


def _assert_same(fast: KeywordIndex, plain: KeywordIndex, partition: str = "", k: int = 500):
    for query in QUERIES:
        got = fast.search("kb", partition, query, k=k)
        want = plain.search("kb", partition, query, k=k)
        assert len(got) == len(want), query
        assert dict(got) == pytest.approx(dict(want), rel=1e-9, abs=1e-12), query
        # same order up to ties
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9, abs=1e-12)


def test_copy_is_used_and_ranks_exactly_like_fts5():
    conn = sqlite3.connect(":memory:")
    fast, plain = _pair(conn)
    fast.add("kb", "", _corpus(600, 1))
    conn.commit()
    _assert_same(fast, plain)
    table = fast._table("kb", "")
    assert table in fast._mirror._copies
    assert table not in plain._mirror._copies
    # a small k keeps the best rows
    top = fast.search("kb", "", "w0 w1 w150", k=5)
    assert [s for _, s in top] == pytest.approx(
        [s for _, s in plain.search("kb", "", "w0 w1 w150", k=5)]
    )


def test_deletes_replacements_and_readds_reach_the_copy():
    conn = sqlite3.connect(":memory:")
    fast, plain = _pair(conn)
    corpus = _corpus(400, 2)
    fast.add("kb", "", corpus)
    conn.commit()
    _assert_same(fast, plain)  # builds the copy
    fast.delete("kb", "", [cid for cid, _ in corpus[::3]])
    fast.add("kb", "", [("c1", "vitamin d leave leave"), ("new", "parental running")])
    conn.commit()
    _assert_same(fast, plain)
    assert fast.search("kb", "", "parental running", k=1)[0][0] in {"new", "c1"}
    # delete most rows: the copy compacts itself and stays exact
    fast.delete("kb", "", [cid for cid, _ in corpus[1::3]])
    conn.commit()
    copy = fast._mirror._copies[fast._table("kb", "")].index
    _assert_same(fast, plain)
    assert copy._dead == 0 or copy._dead <= copy._slots // 4
    assert copy.count == plain.count("kb", "")


def test_uncommitted_writes_are_searched_through_fts5_and_rollbacks_never_reach_the_copy():
    conn = sqlite3.connect(":memory:")
    fast, plain = _pair(conn)
    fast.add("kb", "", _corpus(300, 3))
    conn.commit()
    _assert_same(fast, plain)
    fast.add("kb", "", [("pending", "zzzunique parental")])
    assert fast.search("kb", "", "zzzunique", k=3)[0][0] == "pending"  # FTS5 sees its own writes
    conn.rollback()
    assert fast.search("kb", "", "zzzunique", k=3) == []
    _assert_same(fast, plain)
    fast.add("kb", "", [("kept", "zzzunique")])
    conn.commit()
    assert fast.search("kb", "", "zzzunique", k=3)[0][0] == "kept"
    _assert_same(fast, plain)


def test_partitions_have_their_own_copy_and_statistics():
    conn = sqlite3.connect(":memory:")
    fast, plain = _pair(conn)
    fast.add("kb", "", _corpus(300, 4))
    fast.add("kb", "tenant-a", _corpus(200, 5))
    fast.add("other", "", [("o1", "w0 w1 w150")])
    conn.commit()
    _assert_same(fast, plain, "")
    _assert_same(fast, plain, "tenant-a")
    ids_a = {cid for cid, _ in fast.search("kb", "tenant-a", "w0 w1", k=1000)}
    assert ids_a <= fast.ids("kb", "tenant-a")
    assert "o1" not in ids_a
    assert fast.search("kb", "tenant-b", "w0", k=5) == []


def test_another_connection_writes_and_drops_reach_the_copy(tmp_path):
    path = tmp_path / "catalog.sqlite3"
    writer_conn = sqlite3.connect(path)
    writer = KeywordIndex(writer_conn)
    writer.add("kb", "", _corpus(300, 6))
    writer_conn.commit()
    reader_conn = sqlite3.connect(path)
    fast, plain = _pair(reader_conn)
    _assert_same(fast, plain)
    writer.delete("kb", "", [f"c{i}" for i in range(0, 300, 2)])
    writer.add("kb", "", [("late", "zzzlate vitamin")])
    writer_conn.commit()
    assert fast.search("kb", "", "zzzlate", k=1)[0][0] == "late"
    _assert_same(fast, plain)
    writer.delete_kb("kb")
    writer.add("kb", "", [("again", "w0 again")])  # same table name, fresh rows
    writer_conn.commit()
    assert [cid for cid, _ in fast.search("kb", "", "w0", k=5)] == ["again"]
    _assert_same(fast, plain)


def test_a_restart_rebuilds_the_copy_from_the_database(tmp_path):
    path = tmp_path / "catalog.sqlite3"
    conn = sqlite3.connect(path)
    KeywordIndex(conn).add("kb", "", _corpus(300, 7))
    conn.commit()
    conn.close()
    conn = sqlite3.connect(path)
    fast, plain = _pair(conn)
    _assert_same(fast, plain)


def test_background_build_serves_fts5_until_ready(tmp_path):
    path = tmp_path / "catalog.sqlite3"
    conn = sqlite3.connect(path, check_same_thread=False)
    fast = KeywordIndex(conn, postings_above=0, background_build=True)
    plain = KeywordIndex(conn, postings_above=10**12)
    fast.add("kb", "", _corpus(300, 8))
    conn.commit()
    first = fast.search("kb", "", "w0 w1 w150", k=50)  # starts the build, FTS5 answers
    assert [s for _, s in first] == pytest.approx(
        [s for _, s in plain.search("kb", "", "w0 w1 w150", k=50)]
    )
    fast._mirror.wait(timeout=60)
    fast.add("kb", "", [("after", "zzzafter")])  # written while (or after) the copy was built
    conn.commit()
    _assert_same(fast, plain)
    assert fast._table("kb", "") in fast._mirror._copies


def test_a_copy_behind_the_trimmed_log_is_rebuilt(monkeypatch):
    monkeypatch.setattr(keyword_mirror, "LOG_KEEP", 10)
    conn = sqlite3.connect(":memory:")
    fast, plain = _pair(conn)
    fast.add("kb", "", _corpus(200, 9))
    conn.commit()
    _assert_same(fast, plain)
    table = fast._table("kb", "")
    old = fast._mirror._copies[table]
    reader = KeywordIndex(conn, postings_above=0, background_build=False)
    _assert_same(reader, plain)
    for i in range(30):
        fast.add("kb", "", [(f"n{i}", f"zzztrim w{i}")])
    fast._mirror.trim(table)
    conn.commit()
    assert (
        conn.execute("SELECT count(*) FROM kw_log WHERE fts_table = ?", (table,)).fetchone()[0]
        <= 10
    )
    _assert_same(reader, plain)  # behind the floor: rebuilt
    assert reader._mirror._copies[table] is not old
    assert len(reader.search("kb", "", "zzztrim", k=100)) == 30


@pytest.mark.parametrize("seed", range(4))
def test_random_operations_keep_the_copy_exact(seed):
    rng = random.Random(seed)
    conn = sqlite3.connect(":memory:")
    fast, plain = _pair(conn)
    live: set[str] = set()
    for step in range(25):
        action = rng.random()
        if action < 0.5 or not live:
            rows = [(f"r{rng.randrange(400)}", _text(rng)) for _ in range(rng.randint(1, 40))]
            fast.add("kb", "", rows)
            live.update(cid for cid, _ in rows)
        elif action < 0.8:
            gone = rng.sample(sorted(live), min(len(live), rng.randint(1, 30)))
            fast.delete("kb", "", gone)
            live.difference_update(gone)
        else:
            fast.delete_kb("kb")
            live.clear()
        if rng.random() < 0.8:
            conn.commit()
        else:
            conn.rollback()
            live = fast.ids("kb", "")
        _assert_same(fast, plain)
        assert fast.ids("kb", "") == live, step


def test_tokenizer_agrees_with_fts5_and_learns_nothing_from_queries():
    tokenizer = Fts5Tokenizer(TOKENIZER)
    assert tokenizer.tokens(["Running naïve CAFÉ x-ray, e.g. (leaves)"]) == [
        ["run", "naiv", "cafe", "x", "rai", "e", "g", "leav"]
    ]
    before = len(tokenizer.vocab)
    assert tokenizer.lookup(["running", "zzzneverseen"]) == [[tokenizer.vocab["run"]], [-1]]
    assert len(tokenizer.vocab) == before


def test_postings_index_handles_empty_rows_and_limits():
    index = PostingsIndex(Fts5Tokenizer("unicode61"))
    index.add([(1, ""), (2, "a b"), (3, "b b b"), (4, "!!!")])
    assert index.count == 4
    terms = [t[0] for t in index.tokenizer.lookup(["b"])]
    hits = index.search(terms, limit=1)
    assert [row for row, _ in hits] == [3]
    index.delete([3, 99])
    assert [row for row, _ in index.search(terms, limit=5)] == [2]
    assert index.search([], limit=5) == []
    assert index.search(terms, limit=0) == []


@pytest.mark.parametrize("budget", [1, 50, 400])
def test_max_score_pruning_returns_the_exact_top_k(monkeypatch, budget):
    from langchain_knowledge_inject._store import keyword_postings

    monkeypatch.setattr(keyword_postings, "_SCORE_ALL_BELOW", 0)  # always prune
    monkeypatch.setattr(keyword_postings, "_SELECT_BUDGET", budget)
    monkeypatch.setattr(keyword_postings, "_SEGMENT_MAX", 3000)  # several segments
    monkeypatch.setattr(keyword, "PHRASE_WEIGHT", 0.0)  # the phrase bonus depends on k
    conn = sqlite3.connect(":memory:")
    fast, plain = _pair(conn)
    corpus = _corpus(1500, 11)
    for start in range(0, 1500, 100):  # each catch-up of the copy adds a segment
        fast.add("kb", "", corpus[start : start + 100])
        conn.commit()
        fast.search("kb", "", "w0", k=1)
    fast.delete("kb", "", [cid for cid, _ in corpus[::7]])  # dead slots in the postings
    conn.commit()
    for k in (1, 10, 100):
        for query in QUERIES:
            got = fast.search("kb", "", query, k=k)
            want = plain.search("kb", "", query, k=k)
            assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9), query
            exact = dict(plain.search("kb", "", query, k=5000))
            for cid, score in got:
                assert score == pytest.approx(exact[cid], rel=1e-9)
    copy = fast._mirror._copies[fast._table("kb", "")].index
    assert len(copy._segments) > 1
