"""Repeated chunk texts are embedded once per write and share the vector (fakes only)."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import Field

from langchain_knowledge_inject import ConfigurationError, KnowledgeBase
from langchain_knowledge_inject._store.writes import embed_distinct
from tests.unit_tests.fakes import EXPENSES, LEAVE, CountingEmbedding


class RecordingEmbedding(CountingEmbedding):
    """Counting fake vectors that also keep each embed_documents call's texts."""

    calls: list[list[str]] = Field(default_factory=list)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls = [*self.calls, list(texts)]
        return super().embed_documents(texts)


class ShortEmbedding(Embeddings):
    """A broken model: one vector fewer than the texts it was given."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts[1:]]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]


def test_each_distinct_text_is_embedded_once_and_copies_share_its_vector() -> None:
    emb = RecordingEmbedding(size=16)
    texts = [LEAVE, EXPENSES, LEAVE, LEAVE, "third"]

    vectors = embed_distinct(emb, texts)

    assert emb.calls == [[LEAVE, EXPENSES, "third"]]  # first occurrence order
    assert len(vectors) == len(texts)
    assert vectors[0] == vectors[2] == vectors[3]
    assert vectors == [emb.embed_query(t) for t in texts]  # what embedding every copy gives


def test_distinct_texts_go_to_the_model_unchanged_in_one_call() -> None:
    emb = RecordingEmbedding(size=16)

    vectors = embed_distinct(emb, [LEAVE, EXPENSES])

    assert emb.calls == [[LEAVE, EXPENSES]]
    assert vectors == emb.embed_documents([LEAVE, EXPENSES])


def test_no_texts_no_model_call() -> None:
    emb = RecordingEmbedding(size=16)

    assert embed_distinct(emb, []) == []
    assert emb.calls == []


def test_a_model_returning_too_few_vectors_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="returned 1 vectors for 2 texts") as info:
        embed_distinct(ShortEmbedding(), ["a", "b", "a"])
    assert info.value.option == "embeddings"


def test_the_same_chunk_under_two_sources_is_embedded_once_and_stored_twice(tmp_path) -> None:
    emb = CountingEmbedding(size=32)
    docs = [
        Document(LEAVE, metadata={"source": "handbook/leave.md"}),
        Document(LEAVE, metadata={"source": "mirror/leave.md"}),
        Document(EXPENSES, metadata={"source": "handbook/expenses.md"}),
    ]
    with KnowledgeBase("hr", path=tmp_path, embeddings=emb, text_splitter=None) as kb:
        result = kb.add_documents(docs)

        assert result.added == 3
        assert emb.documents_embedded == 2
        assert kb.info.chunk_count == 3
        hits = kb.search(LEAVE, k=3, mode="dense", min_score=0.0)
        sources = {d.metadata["source"] for d in hits if d.page_content == LEAVE}
        assert sources == {"handbook/leave.md", "mirror/leave.md"}
        stored = kb._chroma.collection("", create=False).get(
            ids=[d.id for d in hits if d.page_content == LEAVE], include=["embeddings"]
        )
        first, second = stored["embeddings"]
        assert list(first) == list(second)


def test_records_with_the_same_text_are_embedded_once(tmp_path) -> None:
    emb = CountingEmbedding(size=32)
    with KnowledgeBase("hr", path=tmp_path, embeddings=emb) as kb:
        kb.upsert_records([("a", LEAVE, {"source": "a"}), ("b", LEAVE, {"source": "b"})])

        assert emb.documents_embedded == 1
        assert {d.id for d in kb.get_by_ids(["a", "b"])} == {"a", "b"}
