"""Writes stop before the disk is full: Chroma's local store cannot recover in-process."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase, StoreError
from langchain_knowledge_inject._store import storage
from langchain_knowledge_inject._store.storage import estimated_write_bytes, min_free_bytes
from langchain_knowledge_inject.errors import ConfigurationError


def _kb(tmp_path) -> KnowledgeBase:
    return KnowledgeBase("reserve", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=16))


def test_a_write_below_the_reserve_is_refused_and_writes_nothing(tmp_path, monkeypatch):
    kb = _kb(tmp_path)
    kb.add_documents([Document("Staff get 25 days of leave.", metadata={"source": "a.md"})])
    monkeypatch.setattr(storage, "free_bytes", lambda path: 10 << 20)  # 10 MiB free
    with pytest.raises(StoreError, match="is full: 10 MiB free") as caught:
        kb.add_documents([Document("Parking is free on Fridays.", metadata={"source": "b.md"})])
    assert caught.value.reason == "disk_full"
    assert "KINJECT_MIN_FREE_MB" in str(caught.value)
    assert kb.info.chunk_count == 1
    assert kb.check().clean
    assert [d.metadata["source"] for d in kb.search("leave", k=4, min_score=0.0)] == ["a.md"]
    monkeypatch.setattr(storage, "free_bytes", lambda path: 1 << 30)  # space freed
    assert kb.add_documents([Document("Parking is free.", metadata={"source": "b.md"})]).added == 1
    kb.close()


def test_the_vectorstore_write_path_is_guarded_too(tmp_path, monkeypatch):
    kb = _kb(tmp_path)
    monkeypatch.setattr(storage, "free_bytes", lambda path: 0)
    with pytest.raises(StoreError, match="is full"):
        kb.vectorstore().add_texts(["a text"], metadatas=[{"source": "x.md"}], ids=["id-1"])
    assert kb.info.chunk_count == 0
    kb.close()


def test_zero_turns_the_reserve_off(tmp_path, monkeypatch):
    monkeypatch.setenv("KINJECT_MIN_FREE_MB", "0")
    kb = _kb(tmp_path)
    monkeypatch.setattr(storage, "free_bytes", lambda path: 0)
    assert kb.add_documents([Document("text", metadata={"source": "a.md"})]).added == 1
    kb.close()


@pytest.mark.parametrize("raw", ["lots", "-1", "nan"])
def test_a_bad_reserve_is_a_clear_error(raw, monkeypatch):
    monkeypatch.setenv("KINJECT_MIN_FREE_MB", raw)
    with pytest.raises(ConfigurationError, match="must be a number of MiB >= 0"):
        min_free_bytes()


def test_reserve_and_estimate():
    assert min_free_bytes() == 16 << 20
    assert estimated_write_bytes(["ab", "é"], 4) == (2 + 2) * 6 + 2 * 4 * 4 * 3
