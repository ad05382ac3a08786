"""Drift between registry, keyword index and Chroma: a crash half way, detection, repair."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase

DOCS = [
    Document(
        f"Policy paragraph {i}: rules about topic {i} and its exceptions.",
        metadata={"source": f"p{i % 3}.md"},
    )
    for i in range(9)
]


@pytest.fixture
def kb(tmp_path):
    return KnowledgeBase("drift", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=16))


class _Crash(Exception):
    pass


def test_crash_between_chroma_and_sqlite_converges(kb, monkeypatch):
    real_commit = kb._conn.commit

    def crash() -> None:
        raise _Crash("killed")

    monkeypatch.setattr(kb, "_conn", _ConnProxy(kb._conn, crash))
    with pytest.raises(_Crash):
        kb.add_documents(DOCS)
    monkeypatch.undo()
    assert kb._conn.commit == real_commit
    report = kb.check()
    assert not report.clean
    assert len(report.partitions[0].chroma_extra) == len(DOCS)
    assert report.partitions[0].registry == 0
    # running the same ingest again finishes with no duplicate and no missing chunk
    result = kb.add_documents(DOCS)
    assert result.added == len(DOCS)
    assert kb.check().clean
    assert kb.info.chunk_count == len(DOCS)


def test_keyword_drift_is_reported_and_repaired(kb):
    result = kb.add_documents(DOCS)
    kb._keyword.delete(kb.id, "", result.ids[:2])
    kb._conn.commit()
    kb._collection("", create=False).delete(ids=result.ids[2:3])
    report = kb.check()
    assert sorted(report.partitions[0].keyword_missing) == sorted(result.ids[:2])
    assert report.partitions[0].chroma_missing == [result.ids[2]]
    assert "DRIFT" in report.summary()
    repaired = kb.check(repair=True)
    assert repaired.repaired
    assert kb.check().clean
    hits = kb.search(DOCS[0].page_content, k=1, mode="keyword", min_score=0.0)
    assert hits[0].id == result.ids[0]


def test_clean_knowledge_base_reports_clean(kb):
    kb.add_documents(DOCS, tenant_id="acme")
    report = kb.check()
    assert report.clean
    assert [p.partition for p in report.partitions] == ["acme"]
    assert "consistent" in report.summary()


class _ConnProxy:
    """The SQLite connection with a commit that fails, as if the process died there."""

    def __init__(self, conn, commit) -> None:
        self._conn = conn
        self.commit = commit

    def rollback(self) -> None:
        self._conn.rollback()

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_with_an_external_client_repair_adopts_records_written_elsewhere(tmp_path):
    """Two machines share a Chroma server, each with its own catalog: repair must not delete."""
    import chromadb

    client = chromadb.EphemeralClient()
    emb = DeterministicFakeEmbedding(size=16)
    first = KnowledgeBase("shared", path=tmp_path / "a", client=client, embeddings=emb)
    written = first.add_documents(DOCS[:3]).ids
    second = KnowledgeBase("shared", path=tmp_path / "b", client=client, embeddings=emb)
    assert second.id == first.id  # the same knowledge base on the server
    # the dense side already finds the other machine's chunks
    dense = second.search(DOCS[0].page_content, k=1, mode="dense", min_score=0.0)
    assert dense[0].id == written[0]
    # its empty catalog was rebuilt from the server when it opened
    report = second.check(repair=True)
    assert report.clean and second.info.chunk_count == len(written)
    server_ids = client.get_collection(f"kinject-{first.id}-shared").get(include=[])["ids"]
    assert set(server_ids) == set(written)  # nothing deleted
    hits = second.search(DOCS[0].page_content, k=1, mode="keyword", min_score=0.0)
    assert hits[0].id == written[0]  # adopted into the keyword index
