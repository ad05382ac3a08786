import sqlite3
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_knowledge_inject._store.keyword import (
    MAX_QUERY_TERMS,
    KeywordIndex,
    query_phrases,
    query_terms,
)

DOCS = [
    ("leave", "Parental leave lasts sixteen weeks and is paid in full."),
    ("expenses", "Travel expenses are reimbursed within thirty days of the claim."),
    ("remote", "Remote work from abroad needs the approval of your manager."),
]


@pytest.fixture
def conn():
    connection = sqlite3.connect(":memory:")
    yield connection
    connection.close()


@pytest.fixture
def index(conn):
    idx = KeywordIndex(conn, lock=threading.RLock())
    idx.add("kb", "", DOCS)
    conn.commit()
    return idx


def test_search_ranks_the_matching_chunk_first(index):
    hits = index.search("kb", "", "How many weeks of parental leave?", k=3)
    assert hits[0][0] == "leave"
    assert all(score > 0 for _, score in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_terms_are_ored_not_anded(index):
    # "leave" matches one chunk, "reimbursed" another: both come back.
    ids = {chunk_id for chunk_id, _ in index.search("kb", "", "leave reimbursed", k=5)}
    assert ids == {"leave", "expenses"}


def test_stemming_matches_inflections(index):
    assert index.search("kb", "", "reimbursing", k=1)[0][0] == "expenses"


def test_k_limits_hits(index):
    assert len(index.search("kb", "", "leave expenses remote", k=2)) == 2
    assert index.search("kb", "", "leave", k=0) == []


@pytest.mark.parametrize("query", ["", "   ", "the and of is", "?!?", "🙂🙂", "*"])
def test_empty_or_stopword_only_query_returns_nothing(index, query):
    assert index.search("kb", "", query, k=5) == []


def test_partitions_are_isolated(conn, index):
    index.add("kb", "tenant-a", [("secret", "Tenant A pays a parental leave bonus.")])
    index.add("other-kb", "", [("foreign", "Parental leave in another knowledge base.")])
    conn.commit()
    shared = {c for c, _ in index.search("kb", "", "parental leave bonus", k=10)}
    tenant = {c for c, _ in index.search("kb", "tenant-a", "parental leave bonus", k=10)}
    assert shared == {"leave"}
    assert tenant == {"secret"}
    assert index.search("kb", "tenant-b", "parental leave", k=10) == []
    assert index.search("missing-kb", "", "parental leave", k=10) == []
    assert index.ids("kb", "tenant-a") == {"secret"}
    assert index.count("kb") == 4
    assert index.count("kb", "") == 3
    assert index.count("kb", "tenant-a") == 1


def test_same_chunk_id_in_two_partitions_is_two_rows(conn, index):
    index.add("kb", "tenant-a", [("leave", "Tenant A leave rules.")])
    index.delete("kb", "tenant-a", ["leave"])
    conn.commit()
    assert index.ids("kb", "") == {"leave", "expenses", "remote"}
    assert index.count("kb", "tenant-a") == 0


def test_delete_removes_chunks_and_ignores_unknown_ids(conn, index):
    index.delete("kb", "", ["leave", "never-added"])
    index.delete("kb", "no-such-partition", ["expenses"])
    index.delete("kb", "", [])
    conn.commit()
    assert index.ids("kb", "") == {"expenses", "remote"}
    assert index.search("kb", "", "parental leave", k=5) == []


def test_add_same_id_replaces_the_text(conn, index):
    index.add("kb", "", [("leave", "Sabbaticals are granted after five years.")])
    conn.commit()
    assert index.count("kb", "") == 3
    assert index.search("kb", "", "parental", k=5) == []
    assert index.search("kb", "", "sabbatical", k=5)[0][0] == "leave"


def test_add_after_the_row_mapping_was_lost_replaces_the_orphans(conn, index, caplog):
    # a damaged catalog: kw_rows emptied while the FTS rows stayed; a fresh kw_rows
    # hands out rowid 1 again, which an orphaned FTS row still holds
    conn.execute("DELETE FROM kw_rows")
    conn.commit()
    assert index.search("kb", "", "parental leave", k=3) == []  # orphans are never returned
    with caplog.at_level("WARNING", logger="langchain_knowledge_inject._store.keyword"):
        index.add("kb", "", [("pension", "The pension plan matches five percent.")])
    conn.commit()
    assert [chunk for chunk, _ in index.search("kb", "", "pension plan", k=3)] == ["pension"]
    assert index.search("kb", "", "parental leave", k=3) == []
    assert index.ids("kb", "") == {"pension"}
    assert "orphaned keyword row" in caplog.text


def test_delete_kb_removes_every_partition(conn, index):
    index.add("kb", "tenant-a", [("secret", "Tenant A text.")])
    index.add("keep", "", [("k1", "Parental leave elsewhere.")])
    index.delete_kb("kb")
    conn.commit()
    assert index.count("kb") == 0
    assert index.search("kb", "", "leave", k=5) == []
    assert index.search("kb", "tenant-a", "tenant", k=5) == []
    assert index.ids("keep", "") == {"k1"}
    # The knowledge base can be filled again after deletion.
    index.add("kb", "", DOCS[:1])
    assert index.ids("kb", "") == {"leave"}


def test_rollback_undoes_an_uncommitted_add(conn, index):
    index.add("kb", "", [("new", "Uncommitted sabbatical text.")])
    index.delete("kb", "", ["remote"])
    conn.rollback()
    assert index.ids("kb", "") == {"leave", "expenses", "remote"}
    assert index.search("kb", "", "sabbatical", k=5) == []


def test_index_survives_reopening_the_database(tmp_path):
    path = tmp_path / "kw.sqlite"
    first = sqlite3.connect(path)
    KeywordIndex(first).add("kb", "t", DOCS)
    first.commit()
    first.close()
    second = sqlite3.connect(path)
    try:
        reopened = KeywordIndex(second)
        assert reopened.count("kb", "t") == 3
        assert reopened.search("kb", "t", "manager approval", k=1)[0][0] == "remote"
    finally:
        second.close()


def test_odd_ids_and_text_are_stored_verbatim(conn):
    index = KeywordIndex(conn)
    kb_id, partition = "kb'; DROP TABLE kw_rows; --", "tenant\x00x"
    odd = [("id with 'quotes' and \"double\"", "naïve café über"), ("ид-1", "قواعد الإجازة")]
    index.add(kb_id, partition, odd)
    conn.commit()
    assert index.ids(kb_id, partition) == {c for c, _ in odd}
    # Diacritics are folded on both sides; right-to-left text is plain text.
    assert index.search(kb_id, partition, "naive CAFE", k=2)[0][0] == odd[0][0]
    assert index.search(kb_id, partition, "الإجازة", k=2)[0][0] == "ид-1"


@pytest.mark.parametrize(
    "query",
    [
        'leave" OR "x',
        "leave AND NOT expenses",
        "NEAR(leave expenses, 2)",
        "text: leave*",
        "^leave + {expenses} - (remote)",
        "'; DROP TABLE kw_rows; --",
        '"unterminated',
        "leave\x00expenses",
        "🙂 leave 👍🏽",
        "إجازة الأبوة leave",
        "עבודה מרחוק",
        "\u202eevael\u202c",
        "a" * 10_000,
    ],
)
def test_fts_syntax_in_queries_is_plain_text(index, query):
    hits = index.search("kb", "", query, k=5)
    assert isinstance(hits, list)
    if "leave" in query.lower():
        assert hits[0][0] == "leave"


def test_a_megabyte_query_is_capped(index):
    query = " ".join(f"word{i}" for i in range(200_000)) + " leave"
    assert len(query) > 1_000_000
    assert len(query_terms(query)) == MAX_QUERY_TERMS
    assert index.search("kb", "", query, k=5) == []  # "leave" is past the cap


def test_query_terms_drop_stopwords_and_duplicates():
    assert query_terms("The LEAVE, the leave; and the policy") == ["leave", "policy"]
    assert query_terms("snake_case IL-6") == ["snake", "case", "il", "6"]


def test_query_phrases_pair_adjacent_words_only():
    # A stopword breaks adjacency: no "effect vitamin" or "d bone".
    assert query_phrases("effect of vitamin D on bone density") == ["vitamin d", "bone density"]
    assert query_phrases("the leave") == []
    assert len(query_phrases(" ".join(f"w{i}" for i in range(500)))) == MAX_QUERY_TERMS


def test_adjacent_words_outrank_the_same_words_scattered(conn):
    index = KeywordIndex(conn)
    index.add(
        "kb",
        "",
        [
            ("scattered", "Leave requests for parental reasons go to HR first."),
            ("phrase", "Parental leave requests for family reasons go to HR first."),
        ],
    )
    hits = index.search("kb", "", "parental leave", k=2)
    assert [c for c, _ in hits] == ["phrase", "scattered"]
    assert hits[0][1] > hits[1][1]


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_any_query_never_raises(query):
    connection = sqlite3.connect(":memory:")
    try:
        idx = KeywordIndex(connection)
        idx.add("kb", "", DOCS)
        hits = idx.search("kb", "", query, k=3)
        assert len(hits) <= 3
        assert {c for c, _ in hits} <= {c for c, _ in DOCS}
    finally:
        connection.close()
