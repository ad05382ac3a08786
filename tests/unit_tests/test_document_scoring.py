"""Document-aware hybrid scoring and the default splitter that fits the model's window."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store import fusion
from langchain_knowledge_inject._store.fusion import fuse, fuse_with_documents
from tests.unit_tests.fakes import ranked_hits

ids = st.sampled_from([f"c{i}" for i in range(10)])
dense_lists = ranked_hits(ids, low=0, high=1, max_size=10)
keyword_lists = ranked_hits(ids, low=0.01, high=1e4, max_size=10)
parent_maps = st.dictionaries(ids, st.sampled_from(["A", "B", "C", ""]), max_size=10)


@given(dense_lists, keyword_lists, parent_maps)
def test_scores_stay_in_unit_interval_over_the_union(dense, keyword, parents):
    ranked = fuse_with_documents(dense, keyword, parents)
    assert {c for c, _ in ranked} == {c for c, _ in dense} | {c for c, _ in keyword}
    assert all(0.0 <= s <= 1.0 + 1e-9 for _, s in ranked)
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)


@given(dense_lists, keyword_lists, parent_maps)
def test_document_weight_zero_is_plain_fusion(dense, keyword, parents):
    assert fuse_with_documents(dense, keyword, parents, document_weight=0.0) == fuse(dense, keyword)


@given(dense_lists, keyword_lists)
def test_chunks_without_parents_are_their_own_documents(dense, keyword):
    # every chunk its own document: the document part equals the chunk part
    ranked = fuse_with_documents(dense, keyword, {})
    plain = dict(fuse(dense, keyword))
    for chunk_id, score in ranked:
        assert score == pytest.approx(plain[chunk_id])


def test_a_document_scores_by_its_best_chunk():
    parents = {"a1": "A", "a2": "A", "b1": "B"}
    dense = [("b1", 0.5), ("a2", 0.6), ("a1", 0.2)]
    keyword = [("b1", 8.0), ("a1", 4.0), ("a2", 2.0)]
    ranked = dict(fuse_with_documents(dense, keyword, parents, document_weight=1.0))
    # A's cosine is a2's (0.6), its keyword score a1's (4 / 8): both chunks score A's
    assert ranked["a1"] == pytest.approx(ranked["a2"])
    assert ranked["a1"] == pytest.approx(0.75 * 0.6 + 0.25 * 0.5)
    assert ranked["b1"] == pytest.approx(0.75 * 0.5 + 0.25 * 1.0)


def test_module_defaults_are_read_at_call_time(monkeypatch):
    parents = {"a1": "A", "a2": "A", "b1": "B"}
    dense = [("b1", 0.5), ("a1", 0.5), ("a2", 0.5)]
    keyword = [("b1", 8.0), ("a1", 5.0), ("a2", 5.0)]
    monkeypatch.setattr(fusion, "DOCUMENT_WEIGHT", 0.0)
    assert fuse_with_documents(dense, keyword, parents) == fuse(dense, keyword)


def test_hybrid_search_ranks_by_document_and_keeps_chunks(tmp_path):
    emb = DeterministicFakeEmbedding(size=16)
    kb = KnowledgeBase("docs", path=tmp_path, embeddings=emb, text_splitter=None)
    kb.add_documents(
        [
            Document("Parental leave lasts sixteen weeks.", metadata={"source": "leave.md"}),
            Document("Parental leave can be split.", metadata={"source": "leave.md"}),
            Document("Expenses are reimbursed monthly.", metadata={"source": "money.md"}),
        ]
    )
    hits = kb.search_hits("parental leave weeks", k=3, min_score=0.0)
    chunks = {d.id: d for d in kb.get_by_ids([cid for cid, _ in hits])}
    assert [chunks[cid].metadata["source"] for cid, _ in hits[:2]] == ["leave.md", "leave.md"]
    found = kb.search("parental leave weeks", k=3, min_score=0.0)  # one result per document
    assert [d.metadata["source"] for d in found] == ["leave.md", "money.md"]
    assert found[0].metadata["chunk_ids"] == [cid for cid, _ in hits[:2]]
    assert "sixteen weeks" in found[0].page_content and "be split" in found[0].page_content
    assert all(d.metadata["chunk_id"] == d.id for d in found)
    kb.close()


def test_default_splitter_with_another_model_counts_characters(tmp_path, caplog):
    kb = KnowledgeBase("chars", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=8))
    with caplog.at_level("INFO"):
        assert kb.text_splitter._chunk_size == 1000
        assert kb.text_splitter._chunk_overlap == 150
    assert "cannot be read" in caplog.text
    kb.close()


class _Client:
    """What HuggingFaceEmbeddings wraps: a sentence-transformers model with a window."""

    def __init__(self, window: int) -> None:
        from langchain_knowledge_inject._store.embeddings import default_embeddings

        self.max_seq_length = window
        self.tokenizer = default_embeddings().tokenizer


class _Wrapped(DeterministicFakeEmbedding):
    _client: _Client | None = None


@pytest.mark.parametrize("window", [256, 512])
def test_default_splitter_follows_the_models_window(tmp_path, window):
    from langchain_knowledge_inject._store.embeddings import DefaultEmbeddings, model_window

    default = DefaultEmbeddings()  # unloaded (the shared one may be loaded by now)
    kb = KnowledgeBase("window", path=tmp_path, embeddings=default, text_splitter=None)
    assert kb.info.embedding_model == "sentence-transformers/all-MiniLM-L6-v2"
    assert default._model is None  # opening and info load no model
    wrapped = _Wrapped(size=8)
    wrapped._client = _Client(window)  # any wrapper: the same window, the same chunks
    for embeddings in ([default] if window == 256 else []) + [wrapped]:
        splitter = KnowledgeBase(
            f"w{window}", path=tmp_path / str(id(embeddings)), embeddings=embeddings
        ).text_splitter
        assert (splitter._chunk_size, splitter._chunk_overlap) == (window // 2, window // 8)
        count = model_window(embeddings)[1]
        text = " ".join(f"word{i} immunohistochemistry" for i in range(400))
        pieces = splitter.split_text(text)
        assert len(pieces) > 1 and all(count(p) <= window // 2 for p in pieces)
        assert {w for piece in pieces for w in piece.split()} == set(text.split())  # nothing lost
        assert max(count(piece) for piece in pieces) > window // 2 - 28  # chunks use their size
    assert default._model is None
    kb.close()
