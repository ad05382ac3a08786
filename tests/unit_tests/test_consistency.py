"""The keyword cache against Chroma: a crash half way, detection, repair."""

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
def emb():
    return DeterministicFakeEmbedding(size=16)


@pytest.fixture
def kb(tmp_path, emb):
    return KnowledgeBase("drift", path=tmp_path, embeddings=emb)


class _Crash(Exception):
    pass


def test_crash_between_chroma_and_the_keyword_cache_converges(tmp_path, emb, monkeypatch):
    kb = KnowledgeBase("drift", path=tmp_path, embeddings=emb)
    kb.add_documents(DOCS[:3])

    def crash(*args, **kwargs) -> None:
        raise _Crash("killed")

    monkeypatch.setattr(kb._cache, "apply", crash)  # the process dies after Chroma's write
    with pytest.raises(_Crash):
        kb.add_documents(DOCS)
    kb.close()
    again = KnowledgeBase("drift", path=tmp_path, embeddings=emb)
    # the cache lacks the chunks Chroma got; the first use catches it up, no repair needed
    assert len(again._cache._part("").chunks.ids()) == 3
    report = again.check()
    assert report.clean and report.partitions[0].chunks == len(DOCS)
    # running the same add again: nothing embedded again
    result = again.add_documents(DOCS)
    assert (result.added, result.unchanged) == (0, len(DOCS))
    assert again.check().clean
    assert again.info.chunk_count == len(DOCS)
    for doc in DOCS:
        assert again.search(doc.page_content, k=1, mode="keyword", min_score=0.0)


def test_drift_a_catch_up_settles_is_settled_and_the_rest_reported_and_repaired(kb):
    result = kb.add_documents(DOCS)
    chunks = kb._cache._part("").chunks
    chunks.delete(result.ids[:1])  # the cache lost a row: a catch-up notices the count
    assert kb.check().clean and result.ids[0] in chunks.ids()
    # rows swapped in the cache itself, two for two: the same count, no catch-up sees it
    chunks.write([("ghost-1", "ghost one", ""), ("ghost-2", "ghost two", "")], result.ids[:2])
    report = kb.check()
    assert sorted(report.partitions[0].keyword_missing) == sorted(result.ids[:2])
    assert report.partitions[0].keyword_extra == ["ghost-1", "ghost-2"]
    assert "DRIFT" in report.summary() and "keyword missing 2, extra 2" in report.summary()
    repaired = kb.check(repair=True)
    assert repaired.repaired
    assert kb.check().clean
    hits = kb.search(DOCS[0].page_content, k=1, mode="keyword", min_score=0.0)
    assert hits[0].id == result.ids[0]
    assert "ghost-1" not in chunks.ids()


def test_clean_knowledge_base_reports_clean(kb):
    kb.add_documents(DOCS, tenant_id="acme")
    report = kb.check()
    assert report.clean
    assert [(p.partition, p.chunks) for p in report.partitions] == [("", 0), ("acme", len(DOCS))]
    assert "consistent" in report.summary()


def test_with_an_external_client_a_second_cache_is_built_from_the_server(tmp_path, emb):
    """Two processes share a Chroma server, each with its own keyword cache."""
    import chromadb

    client = chromadb.EphemeralClient()
    first = KnowledgeBase("shared", path=tmp_path / "a", client=client, embeddings=emb)
    written = first.add_documents(DOCS[:3]).ids
    second = KnowledgeBase("shared", path=tmp_path / "b", client=client, embeddings=emb)
    assert second.id == first.id  # the same knowledge base on the server
    dense = second.search(DOCS[0].page_content, k=1, mode="dense", min_score=0.0)
    assert dense[0].id == written[0]
    hits = second.search(DOCS[0].page_content, k=1, mode="keyword", min_score=0.0)
    assert hits[0].id == written[0]  # its cache was built from the server when first used
    report = second.check(repair=True)
    assert report.clean and second.info.chunk_count == len(written)
    server_ids = client.get_collection(f"kinject-{first.id}-shared").get(include=[])["ids"]
    assert set(server_ids) == set(written)  # nothing deleted
