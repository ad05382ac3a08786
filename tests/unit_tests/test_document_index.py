"""The document-level keyword index: rows derived from the chunk registry, kept honest."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store import fusion, knowledge_base, search
from langchain_knowledge_inject._store.catalog import ChunkRow
from langchain_knowledge_inject._store.documents import (
    FORMAT,
    LEAD_WORDS,
    documents_kb_id,
    join_chunks,
    lead,
)
from langchain_knowledge_inject._store.fusion import fuse_with_documents

LEAVE = (
    "Parental leave lasts sixteen weeks at full pay. Either parent may take it, and it "
    "can be split into two blocks. Requests go to the people team eight weeks ahead. "
    "Adoption counts the same as birth. Unused weeks lapse after the child's first birthday."
)
MONEY = "Expenses are reimbursed monthly after a manager approves the receipts."


def _splitter() -> RecursiveCharacterTextSplitter:
    return RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=20)


def _kb(path, **kwargs) -> KnowledgeBase:
    kwargs.setdefault("text_splitter", _splitter())
    return KnowledgeBase(
        "docs", path=path, embeddings=DeterministicFakeEmbedding(size=16), **kwargs
    )


def _row(kb: KnowledgeBase, source: str, partition: str = "") -> str | None:
    rows = kb._conn.execute(
        "SELECT chunk_id FROM kw_rows WHERE kb_id = ? AND partition = ? AND chunk_id = ?",
        (documents_kb_id(kb.id), partition, source),
    ).fetchall()
    return None if not rows else kb._document_index.text(kb.id, partition, source)


def _mark_all_dirty(kb: KnowledgeBase) -> None:
    kb._conn.execute(
        "INSERT OR IGNORE INTO kw_doc_dirty SELECT kb_id, partition, source FROM chunks"
    )


def _dirty(kb: KnowledgeBase) -> set[str]:
    return {
        s for (s,) in kb._conn.execute("SELECT source FROM kw_doc_dirty WHERE kb_id = ?", (kb.id,))
    }


@given(
    st.text(alphabet="ab cd.\n", min_size=0, max_size=400), st.integers(20, 80), st.integers(0, 15)
)
def test_joining_overlapping_chunks_loses_nothing_and_repeats_less(text, size, overlap):
    chunks = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap).split_text(text)
    joined = join_chunks(chunks)
    assert all(chunk in joined for chunk in chunks)  # every chunk survives whole
    assert len(joined) <= sum(len(c) + 1 for c in chunks)


def test_joining_real_prose_removes_the_overlap():
    chunks = _splitter().split_text(LEAVE)
    assert len(chunks) > 3
    assert sum(len(c.split()) for c in chunks) > len(LEAVE.split())  # the splitter repeats words
    assert join_chunks(chunks).split() == LEAVE.split()
    assert join_chunks(["Pay is full.", "Leave lapses."]) == "Pay is full. Leave lapses."
    assert join_chunks([]) == ""


def test_adding_a_split_document_indexes_its_whole_text_once(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents(
        [
            Document(LEAVE, metadata={"source": "leave.md"}),
            Document(MONEY, metadata={"source": "money.md"}),
        ]
    )
    assert kb.count() > 4
    assert _row(kb, "leave.md").split() == LEAVE.split()
    assert _row(kb, "money.md") == MONEY
    assert not _dirty(kb)
    hits, indexed = kb._document_index.search(
        kb.id, "", "parental leave weeks", k=5, sources={"leave.md", "money.md"}
    )
    assert [s for s, _ in hits] == ["leave.md"] and indexed == {"leave.md", "money.md"}
    kb.close()


def test_changing_and_deleting_a_source_rebuilds_or_removes_its_row(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([Document(LEAVE, metadata={"source": "leave.md"})])
    kb.add_documents(
        [Document("Parental leave is now twenty weeks.", metadata={"source": "leave.md"})]
    )
    assert _row(kb, "leave.md") == "Parental leave is now twenty weeks."
    assert kb.delete_source("leave.md") == 1
    assert _row(kb, "leave.md") is None and not _dirty(kb)
    assert (
        kb._document_index.search(kb.id, "", "parental leave", k=5, sources={"leave.md"})[0] == []
    )
    kb.close()


def test_a_write_from_another_path_marks_the_source_until_a_search_rebuilds_it(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([Document(MONEY, metadata={"source": "money.md"})])
    # a catch-up or a recovery writes the registry directly: the trigger marks the source
    kb._catalog.put_chunks(
        kb.id,
        [
            ChunkRow(
                "x1",
                "",
                "money.md",
                "Receipts older than ninety days are refused.",
                {"chunk_index": 1},
            )
        ],
    )
    kb._conn.commit()
    assert _dirty(kb) == {"money.md"}
    hits, indexed = kb._document_index.search(
        kb.id, "", "receipts refused", k=5, sources={"money.md"}
    )
    assert hits == [] and indexed == set()  # a stale row is never scored
    kb.search("receipts refused", k=2, min_score=0.0)  # rebuilds a few dirty documents first
    assert not _dirty(kb)
    assert "ninety days" in _row(kb, "money.md")
    kb.close()


def test_search_rebuilds_at_most_a_bounded_number_of_documents(tmp_path, monkeypatch):
    kb = _kb(tmp_path, text_splitter=None)
    docs = [
        Document(f"Policy number {i} covers leave.", metadata={"source": f"p{i}.md"})
        for i in range(5)
    ]
    kb.add_documents(docs)
    _mark_all_dirty(kb)
    kb._conn.commit()
    monkeypatch.setattr(search, "DOCUMENT_REFRESH", 2)
    kb.search("policy leave", k=5, min_score=0.0)
    assert len(_dirty(kb)) == 3
    kb.add_documents(
        [Document("Another policy.", metadata={"source": "q.md"})]
    )  # a write rebuilds all
    assert not _dirty(kb)
    kb.close()


def _make_old_store(path) -> None:
    """A store as an earlier version left it: no document index tables or triggers."""
    kb = _kb(path)
    kb.add_documents(
        [
            Document(LEAVE, metadata={"source": "leave.md"}),
            Document(MONEY, metadata={"source": "money.md"}),
        ]
    )
    kb._keyword.delete_kb(documents_kb_id(kb.id))
    for name in ("kw_doc_chunk_insert", "kw_doc_chunk_delete", "kw_doc_chunk_update"):
        kb._conn.execute(f"DROP TRIGGER {name}")
    kb._conn.execute("DROP TABLE kw_doc_dirty")
    kb._conn.commit()
    kb.close()


def test_a_store_from_an_earlier_version_is_indexed_after_opening(tmp_path):
    _make_old_store(tmp_path)
    kb = _kb(tmp_path)
    assert _dirty(kb) == {"leave.md", "money.md"}  # every old source waits for a rebuild
    pooled = kb.search("parental leave weeks", k=3, min_score=0.0)
    assert pooled and pooled[0].metadata["source"] == "leave.md"
    assert not _dirty(kb) and _row(kb, "leave.md").split() == LEAVE.split()
    kb.close()


def test_a_read_only_store_from_an_earlier_version_pools_chunk_scores(tmp_path, monkeypatch):
    _make_old_store(tmp_path)
    monkeypatch.setattr(knowledge_base, "store_is_writable", lambda path: False)
    kb = _kb(tmp_path)
    assert kb.read_only and not kb._document_index.available
    found = kb.search("parental leave weeks", k=3, min_score=0.0)
    assert found and found[0].metadata["source"] == "leave.md"
    kb.close()
    conn = sqlite3.connect(tmp_path / "catalog.sqlite3")
    assert not conn.execute("SELECT name FROM sqlite_master WHERE name = 'kw_doc_dirty'").fetchall()
    conn.close()


def test_tenants_have_their_own_document_rows(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([Document(LEAVE, metadata={"source": "leave.md"})], tenant_id="acme")
    kb.add_documents([Document(MONEY, metadata={"source": "money.md"})])
    assert _row(kb, "leave.md", "acme") is not None and _row(kb, "leave.md") is None
    shared = kb._document_index.search(kb.id, "", "parental leave", k=5, sources={"money.md"})
    assert shared[0] == []
    tenant = kb.search("parental leave", k=3, min_score=0.0, tenant_id="acme")
    assert {d.metadata["source"] for d in tenant} == {"leave.md"}
    kb.close()


def test_a_filtered_search_pools_and_never_asks_the_document_index(tmp_path, monkeypatch):
    kb = _kb(tmp_path)
    kb.add_documents([Document(LEAVE, metadata={"source": "leave.md", "team": "hr"})])

    def refuse(*args, **kwargs):
        raise AssertionError("the document index was asked")

    monkeypatch.setattr(kb._document_index, "search", refuse)
    found = kb.search("parental leave", k=2, min_score=0.0, filter={"team": "hr"})
    assert found and all(d.metadata["team"] == "hr" for d in found)
    monkeypatch.setattr(fusion, "DOCUMENT_KEYWORD", "pool")
    assert kb.search("parental leave", k=2, min_score=0.0)
    kb.close()


def test_drop_removes_document_rows_and_marks(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([Document(LEAVE, metadata={"source": "leave.md"})])
    kb_id = kb.id
    kb.drop()
    conn = sqlite3.connect(tmp_path / "catalog.sqlite3")
    for table in ("kw_rows", "kw_partitions", "kw_doc_dirty"):
        assert not conn.execute(
            f"SELECT * FROM {table} WHERE kb_id IN (?, ?)", (kb_id, documents_kb_id(kb_id))
        ).fetchall()
    conn.close()


def test_the_document_index_scores_words_spread_over_chunks():
    parents = {"a1": "A", "a2": "A", "b1": "B"}
    dense = [("b1", 0.5), ("a1", 0.5), ("a2", 0.5)]
    keyword = [("b1", 8.0), ("a1", 5.0), ("a2", 5.0)]  # A's words are spread over two chunks
    pooled = fuse_with_documents(dense, keyword, parents, document_weight=1.0)
    assert pooled[0][0] == "b1"
    whole = [("A", 12.0), ("B", 8.0)]  # over the whole text, A matches more
    ranked = fuse_with_documents(
        dense, keyword, parents, document_weight=1.0, document_keyword=whole, indexed={"A", "B"}
    )
    assert ranked[0][0] in ("a1", "a2")
    # a document not indexed keeps its pooled score, beside indexed ones
    partial = dict(
        fuse_with_documents(
            dense, keyword, parents, document_weight=1.0, document_keyword=whole, indexed={"A"}
        )
    )
    assert partial["b1"] == pytest.approx(0.75 * 0.5 + 0.25 * 1.0)
    assert partial["a1"] == pytest.approx(0.75 * 0.5 + 0.25 * 1.0)


def test_a_search_goes_on_when_rebuilding_dirty_documents_fails(tmp_path, monkeypatch, caplog):
    kb = _kb(tmp_path)
    kb.add_documents([Document(LEAVE, metadata={"source": "leave.md"})])
    _mark_all_dirty(kb)
    kb._conn.commit()

    def full_disk(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(kb._document_index, "refresh", full_disk)
    found = kb.search("parental leave weeks", k=2, min_score=0.0)
    assert found and found[0].metadata["source"] == "leave.md"
    assert _dirty(kb) == {"leave.md"}  # still pooled, rebuilt by a later write or search
    assert "document index not refreshed" in caplog.text
    kb.close()


def test_the_lead_is_the_title_or_the_first_line_capped():
    assert lead("\n\n  Parental   leave \nLeave lasts sixteen weeks.") == "Parental leave"
    assert lead("Leave lasts sixteen weeks.", title="Leave policy") == "Leave policy"
    assert lead("Leave lasts sixteen weeks.", title="   ") == "Leave lasts sixteen weeks."
    assert lead("Body.", title=2024) == "2024"
    long_line = " ".join(f"w{i}" for i in range(100))
    assert lead(long_line).split() == long_line.split()[:LEAD_WORDS]
    assert lead("") == ""


def test_a_documents_lead_counts_once_more_in_the_index(tmp_path):
    kb = _kb(tmp_path, text_splitter=None)
    kb.add_documents(
        [
            # both name pensions once in their text; one of them is about pensions
            Document("Pension contributions\nThe employer adds 5%.", metadata={"source": "a"}),
            Document(
                "Travel rules\nTrains are booked early; pension is elsewhere.",
                metadata={"source": "b"},
            ),
            Document(
                "Trains are booked early; pension is elsewhere.",
                metadata={"source": "c", "title": "Pension contributions"},
            ),
        ]
    )
    index = kb._document_index
    assert index.text(kb.id, "", "a") == "Pension contributions\nThe employer adds 5%."
    assert index.indexed_text(kb.id, "", "a").split()[:2] == ["Pension", "contributions"]
    assert index.indexed_text(kb.id, "", "a").count("Pension") == 2
    assert index.indexed_text(kb.id, "", "c").startswith("Pension contributions Trains")
    hits, _ = index.search(kb.id, "", "pension", k=3, sources={"a", "b", "c"})
    ranked = [source for source, _ in hits]
    assert set(ranked) == {"a", "b", "c"} and ranked[-1] == "b"  # named in a lead, it weighs more
    kb.close()


def test_pieces_of_a_chunk_split_again_keep_their_order(tmp_path):
    kb = _kb(tmp_path)  # the splitter cuts 60 characters: ingest's chunks get cut again
    halves = [LEAVE[:120], LEAVE[120:]]
    kb.add_documents(
        [
            Document(t, metadata={"source": "leave.md", "chunk_index": i})
            for i, t in enumerate(halves)
        ]
    )
    stored = [
        json.loads(meta)
        for (meta,) in kb._conn.execute("SELECT metadata FROM chunks WHERE kb_id = ?", (kb.id,))
    ]
    assert len(stored) > 2 and {m["chunk_index"] for m in stored} == {0, 1}
    assert {m["chunk_part"] for m in stored} >= {0, 1}  # each half was cut again
    assert _row(kb, "leave.md").split() == LEAVE.split()  # pieces joined in document order
    kb.close()


def test_rows_indexed_without_the_lead_are_rebuilt_with_it(tmp_path, monkeypatch):
    kb = _kb(tmp_path, text_splitter=None)
    kb.add_documents(
        [Document("Pension contributions\nThe employer adds 5%.", metadata={"source": "a"})]
    )
    # an earlier version's rows: the joined text alone, format 1
    kb._keyword.add(documents_kb_id(kb.id), "", [("a", kb._document_index.text(kb.id, "", "a"))])
    kb._conn.execute("UPDATE kw_doc_format SET version = 1")
    kb._conn.commit()
    kb.close()
    monkeypatch.setattr(knowledge_base, "store_is_writable", lambda path: False)
    reader = _kb(tmp_path, text_splitter=None)  # read-only: its rows are scored as they are
    assert reader._document_index.available and not _dirty(reader)
    assert reader.search("pension", k=1, min_score=0.0)[0].metadata["source"] == "a"
    reader.close()
    monkeypatch.undo()
    kb = _kb(tmp_path, text_splitter=None)
    assert _dirty(kb) == {"a"}  # opened for writing: marked for a rebuild
    assert kb.search("pension", k=1, min_score=0.0)[0].metadata["source"] == "a"
    assert not _dirty(kb)
    assert kb._conn.execute("SELECT version FROM kw_doc_format").fetchall() == [(FORMAT,)]
    kb.close()
    kb = _kb(tmp_path, text_splitter=None)
    assert not _dirty(kb)  # the current format is not rebuilt again
    kb.close()


def test_keyword_mode_scores_chunks_with_their_document(tmp_path, monkeypatch):
    kb = _kb(tmp_path)  # chunks of 60 characters
    spread = (
        "Parental leave rules apply to every employee here. The paid allowance lasts"
        " sixteen weeks in all."
    )
    repeated = "Sixteen weeks: sixteen weeks, sixteen weeks notice."
    filler = [
        Document(f"Filler note {i} on expenses and travel.", metadata={"source": f"f{i}.md"})
        for i in range(6)
    ]
    kb.add_documents(
        [
            Document(spread, metadata={"source": "spread.md"}),
            Document(repeated, metadata={"source": "repeated.md"}),
            *filler,
        ]
    )
    assert kb.count() == 9  # the spread document is two chunks
    query = "parental leave sixteen weeks"
    # chunk scores alone: the chunk repeating two of the words leads
    monkeypatch.setattr(fusion, "DOCUMENT_KEYWORD", "pool")
    alone = kb.search(query, k=10, min_score=0.0, mode="keyword")
    assert alone[0].metadata["source"] == "repeated.md"
    assert alone[0].metadata["score"] == pytest.approx(1.0)
    monkeypatch.undo()
    # with the document index: the document holding every query word leads
    found = kb.search(query, k=10, min_score=0.0, mode="keyword")
    scores = [d.metadata["score"] for d in found]
    assert found[0].metadata["source"] == "spread.md"
    assert scores[0] == pytest.approx(1.0) and scores == sorted(scores, reverse=True)
    assert all(0.0 <= score <= 1.0 for score in scores)
    # a metadata filter scores chunks alone, as before
    filtered = kb.search(query, k=10, min_score=0.0, mode="keyword", filter={"source": "spread.md"})
    assert {d.metadata["source"] for d in filtered} == {"spread.md"}
    assert filtered[0].metadata["score"] == pytest.approx(1.0)
    kb.close()


@pytest.mark.parametrize("mode", ["hybrid", "keyword"])
def test_a_keyword_table_out_of_step_with_its_rows_degrades_to_pooling(tmp_path, monkeypatch, mode):
    kb = _kb(tmp_path)
    kb.add_documents([Document(LEAVE, metadata={"source": "leave.md"})])
    _mark_all_dirty(kb)
    kb._conn.commit()

    def out_of_step(*args, **kwargs):
        raise sqlite3.IntegrityError("constraint failed")

    monkeypatch.setattr(kb._document_index, "refresh", out_of_step)
    found = kb.search("parental leave weeks", k=2, min_score=0.0, mode=mode)
    assert found and found[0].metadata["source"] == "leave.md"
    assert _dirty(kb) == {"leave.md"}
    kb.close()
