"""The document-level keyword index: one row per source, rebuilt with every write and catch-up."""

from __future__ import annotations

import chromadb
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store import documents, fusion
from langchain_knowledge_inject._store.documents import LEAD_WORDS, document_text, lead
from langchain_knowledge_inject._store.fusion import fuse_with_documents, join_chunks

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
    """The document row's text (without its lead) when the cache holds a row for ``source``."""
    if source not in kb._cache._part(partition).documents.sources([source]):
        return None
    chunks = kb._chroma.of_sources(partition, [source], fields="all")
    return join_chunks([c.text for c in sorted(chunks, key=documents._order)])


def _doc_hits(kb: KnowledgeBase, query: str, partition: str = ""):
    return kb._cache.search_documents(partition, query, k=5)


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
    assert join_chunks(["Pay is full.", "Leave lapses."]) == "Pay is full.\nLeave lapses."
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
    assert [s for s, _ in _doc_hits(kb, "parental leave weeks")] == ["leave.md"]
    kb.close()


def test_changing_and_deleting_a_source_rebuilds_or_removes_its_row(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([Document(LEAVE, metadata={"source": "leave.md"})])
    kb.add_documents(
        [Document("Parental leave is now twenty weeks.", metadata={"source": "leave.md"})]
    )
    assert _row(kb, "leave.md") == "Parental leave is now twenty weeks."
    assert kb.delete_source("leave.md") == 1
    assert _row(kb, "leave.md") is None
    assert _doc_hits(kb, "parental leave") == []
    kb.close()


def test_another_processs_write_reaches_the_document_row_on_catch_up(tmp_path):
    client = chromadb.EphemeralClient()
    emb = DeterministicFakeEmbedding(size=16)
    reader = KnowledgeBase("docs", path=tmp_path / "a", client=client, embeddings=emb,
                           text_splitter=None, sync_interval=0)  # fmt: skip
    writer = KnowledgeBase("docs", path=tmp_path / "b", client=client, embeddings=emb,
                           text_splitter=None)  # fmt: skip
    writer.add_documents([Document(MONEY, metadata={"source": "money.md"})])
    assert reader.search("receipts", k=2, min_score=0.0)
    writer.upsert_records(
        [("x1", "Receipts older than ninety days are refused.", {"source": "money.md"})]
    )
    assert _doc_hits(reader, "ninety days") == []  # not caught up yet
    reader.search("receipts refused", k=2, min_score=0.0)  # catches up first
    assert [s for s, _ in _doc_hits(reader, "ninety days")] == ["money.md"]
    assert "ninety days" in _row(reader, "money.md")


def test_tenants_have_their_own_document_rows(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([Document(LEAVE, metadata={"source": "leave.md"})], tenant_id="acme")
    kb.add_documents([Document(MONEY, metadata={"source": "money.md"})])
    assert _row(kb, "leave.md", "acme") is not None and _row(kb, "leave.md") is None
    assert _doc_hits(kb, "parental leave") == []
    tenant = kb.search("parental leave", k=3, min_score=0.0, tenant_id="acme")
    assert {d.metadata["source"] for d in tenant} == {"leave.md", "money.md"}  # + the shared
    alone = kb.search("parental leave", k=3, min_score=0.0, tenant_id="acme", include_shared=False)
    assert {d.metadata["source"] for d in alone} == {"leave.md"}
    kb.close()


def test_a_filtered_search_pools_and_never_asks_the_document_index(tmp_path, monkeypatch):
    kb = _kb(tmp_path)
    kb.add_documents([Document(LEAVE, metadata={"source": "leave.md", "team": "hr"})])

    def refuse(*args, **kwargs):
        raise AssertionError("the document index was asked")

    monkeypatch.setattr(kb._cache, "search_documents", refuse)
    found = kb.search("parental leave", k=2, min_score=0.0, filter={"team": "hr"})
    assert found and all(d.metadata["team"] == "hr" for d in found)
    monkeypatch.setattr(fusion, "DOCUMENT_KEYWORD", "pool")
    assert kb.search("parental leave", k=2, min_score=0.0)
    kb.close()


def test_drop_removes_document_rows(tmp_path):
    kb = _kb(tmp_path)
    kb.add_documents([Document(LEAVE, metadata={"source": "leave.md"})])
    folder = tmp_path / "keyword" / kb.id
    assert any(folder.rglob("documents"))
    kb.drop()
    assert not folder.exists()


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


def test_a_damaged_document_index_is_rebuilt_and_the_search_goes_on(tmp_path, monkeypatch):
    kb = _kb(tmp_path)
    kb.add_documents([Document(LEAVE, metadata={"source": "leave.md"})])
    part = kb._cache._part("")

    def damaged(*args, **kwargs):
        raise ValueError("Data corrupted")

    monkeypatch.setattr(part.documents, "search", damaged)
    found = kb.search("parental leave weeks", k=2, min_score=0.0)
    assert found and found[0].metadata["source"] == "leave.md"
    assert _row(kb, "leave.md").split() == LEAVE.split()
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

    def indexed(source: str) -> str:
        return document_text(kb._chroma.of_sources("", [source], fields="all"))

    assert _row(kb, "a") == "Pension contributions\nThe employer adds 5%."
    assert indexed("a").split()[:2] == ["Pension", "contributions"]
    assert indexed("a").count("Pension") == 2
    assert indexed("c").startswith("Pension contributions Trains")
    hits = _doc_hits(kb, "pension")
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
    stored = [c.metadata for c in kb._chroma.of_sources("", ["leave.md"], fields="meta")]
    assert len(stored) > 2 and {m["chunk_index"] for m in stored} == {0, 1}
    assert {m["chunk_part"] for m in stored} >= {0, 1}  # each half was cut again
    assert _row(kb, "leave.md").split() == LEAVE.split()  # pieces joined in document order
    kb.close()


def test_a_cache_of_another_format_is_rebuilt(tmp_path):
    kb = _kb(tmp_path, text_splitter=None)
    kb.add_documents(
        [Document("Pension contributions\nThe employer adds 5%.", metadata={"source": "a"})]
    )
    kb.close()
    state = tmp_path / "keyword" / kb.id / "shared" / "state.json"
    old = state.read_text().replace('"format": 1', '"format": 0')
    state.write_text(old)
    (tmp_path / "keyword" / kb.id / "shared" / "documents").rename(tmp_path / "gone")
    kb = _kb(tmp_path, text_splitter=None)
    assert kb.search("pension", k=1, min_score=0.0)[0].metadata["source"] == "a"
    assert _row(kb, "a") is not None and '"format": 1' in state.read_text()
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
