"""Unit tests of KnowledgeBase with deterministic fake embeddings (offline)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import (
    ConfigurationError,
    KnowledgeBase,
    KnowledgeBaseNotFoundError,
    RetrievalError,
)
from langchain_knowledge_inject._store.keyword import STOPWORDS
from langchain_knowledge_inject._store.writes import chunk_id
from langchain_knowledge_inject.errors import KnowledgeBaseOpenError
from tests.unit_tests.fakes import EXPENSES, LEAVE, SICK, CountingEmbedding, WordHashEmbedding


@pytest.fixture
def emb() -> CountingEmbedding:
    return CountingEmbedding(size=32)


@pytest.fixture
def kb(tmp_path, emb) -> KnowledgeBase:
    return KnowledgeBase("hr", path=tmp_path, embeddings=emb, description="HR policies")


def _docs() -> list[Document]:
    return [
        Document(LEAVE, metadata={"source": "leave.md", "category": "leave"}),
        Document(SICK, metadata={"source": "leave.md", "category": "leave"}),
        Document(
            EXPENSES, metadata={"source": "expenses.md", "category": "finance", "owner": "ops"}
        ),
    ]


def _all_ids(kb: KnowledgeBase, tenant: str = "") -> tuple[set[str], set[str]]:
    """Chunk ids in the keyword cache and in Chroma, for one partition."""
    keyword = kb._cache._part(tenant).chunks.ids()
    collection = kb._chroma.collection(tenant)
    chroma = set(collection.get(include=[])["ids"]) if collection is not None else set()
    return keyword, chroma


def test_add_is_idempotent(kb, emb):
    first = kb.add_documents(_docs())
    assert (first.added, first.unchanged, first.replaced) == (3, 0, 0)
    embedded = emb.documents_embedded
    second = kb.add_documents(_docs())
    assert (second.added, second.unchanged, second.replaced) == (0, 3, 0)
    assert emb.documents_embedded == embedded, "unchanged chunks must not be embedded again"
    assert second.ids == first.ids
    assert kb.info.chunk_count == 3


def test_ids_derive_from_source_and_content(kb):
    result = kb.add_documents([Document(LEAVE, metadata={"source": "leave.md"})])
    assert result.ids == [chunk_id("", "leave.md", LEAVE)]
    other = kb.add_documents([Document(LEAVE, metadata={"source": "copy.md"})])
    assert other.ids != result.ids


def test_changed_document_replaces_its_old_chunks(kb):
    kb.add_documents(_docs())
    new_text = "Employees receive 28 days of annual leave per calendar year."
    result = kb.add_documents([Document(new_text, metadata={"source": "leave.md"})])
    assert (result.added, result.replaced) == (1, 2)
    keyword, chroma = _all_ids(kb)
    assert keyword == chroma
    assert len(chroma) == 2
    hits = kb.search("annual leave days", k=10, mode="keyword", min_score=0.0)
    assert [d.page_content for d in hits if d.metadata["source"] == "leave.md"] == [new_text]


def test_metadata_is_kept_and_updated(kb):
    kb.add_documents(_docs())
    doc = kb.search("receipt manager approval", k=1, mode="keyword", min_score=0.0)[0]
    assert doc.metadata["source"] == "expenses.md"
    assert doc.metadata["category"] == "finance"
    assert doc.metadata["owner"] == "ops"
    assert doc.id == doc.metadata["chunk_id"]
    assert doc.metadata["kb_name"] == "hr"
    changed = Document(EXPENSES, metadata={"source": "expenses.md", "category": "travel"})
    result = kb.add_documents([changed])
    assert (result.added, result.updated) == (0, 1)
    doc = kb.search(EXPENSES, k=1, mode="dense", min_score=0.0)
    assert doc[0].metadata["category"] == "travel"


def test_persistence_across_reopen(tmp_path, emb):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=emb, description="HR", topics=["leave"])
    kb.add_documents(_docs())
    kb_id = kb.id
    kb.close()
    again = KnowledgeBase("hr", path=tmp_path, embeddings=emb, create=False)
    info = again.info
    assert (info.id, info.description, info.topics, info.chunk_count) == (kb_id, "HR", ["leave"], 3)
    found = again.search("annual leave", k=1, mode="keyword", min_score=0.0)[0]
    assert found.page_content == f"{LEAVE}\n[...]\n{SICK}"  # one document: leave.md's chunks
    assert again.add_documents(_docs()).added == 0
    listed = KnowledgeBase.list(tmp_path)
    assert [(i.name, i.chunk_count) for i in listed] == [("hr", 3)]


def test_tenant_isolation(kb):
    kb.add_documents(
        [Document("Acme secret: bonus pool is 7 percent.", metadata={"source": "a"})],
        tenant_id="acme",
    )
    kb.add_documents(
        [Document("Globex bonus pool rules.", metadata={"source": "g", "tenant_id": "globex"})]
    )
    kb.add_documents([Document("General bonus pool policy for all.", metadata={"source": "s"})])
    for mode in ("dense", "keyword", "hybrid"):
        options: dict[str, Any] = {"k": 10, "mode": mode, "min_score": 0.0}
        acme = kb.search("bonus pool", tenant_id="acme", **options)  # its own and the shared
        assert {d.metadata.get("tenant_id") for d in acme} == {"acme", None}
        alone = kb.search("bonus pool", tenant_id="acme", include_shared=False, **options)
        assert alone and {d.metadata["tenant_id"] for d in alone} == {"acme"}
        globex = kb.search("bonus pool", filter={"tenant_id": "globex"}, **options)
        assert {d.metadata.get("tenant_id") for d in globex} == {"globex", None}
        shared = kb.search("bonus pool", **options)
        assert shared and all("tenant_id" not in d.metadata for d in shared)
        assert {d.id for d in kb.search("bonus pool", tenant_id="nobody", **options)} == {
            d.id for d in shared
        }
        assert kb.search("bonus pool", tenant_id="nobody", include_shared=False, **options) == []
    with pytest.raises(ConfigurationError, match="include_shared"):
        kb.search("bonus pool", tenant_id="acme", include_shared="no")  # type: ignore[arg-type]


def test_a_tenants_search_ranks_each_partition_as_alone_merged_by_score(kb):
    """One scale: each result keeps the score a search of its partition alone gives it."""
    big = [Document(f"{EXPENSES} Note {i}.", metadata={"source": f"e{i}.md"}) for i in range(8)]
    kb.add_documents([*big, Document(SICK, metadata={"source": "policy.md"})])
    kb.add_documents([Document(LEAVE, metadata={"source": "policy.md"})], tenant_id="acme")
    for query in ("sick leave doctor", "annual leave days", "leave"):
        for mode in ("dense", "keyword", "hybrid"):
            options: dict[str, Any] = {"k": 10, "mode": mode, "min_score": 0.0}
            both = kb.search(query, tenant_id="acme", **options)
            alone = kb.search(query, tenant_id="acme", include_shared=False, **options)
            shared = kb.search(query, **options)
            expected = {d.page_content: d.metadata["score"] for d in [*alone, *shared]}
            assert {d.page_content: d.metadata["score"] for d in both} == pytest.approx(expected)
            scores = [d.metadata["score"] for d in both]
            assert scores == sorted(scores, reverse=True)
            if mode == "dense":  # every document: one file name in both parts is two results
                assert sum(d.metadata["source"] == "policy.md" for d in both) == 2


def test_tenant_filter_errors(kb):
    with pytest.raises(ConfigurationError, match="one tenant"):
        kb.search("x", filter={"tenant_id": {"$in": ["a", "b"]}})
    with pytest.raises(ConfigurationError, match="disagrees"):
        kb.search("x", filter={"tenant_id": "a"}, tenant_id="b")
    with pytest.raises(ConfigurationError, match="disagrees"):
        kb.add_documents([Document("x", metadata={"tenant_id": "a"})], tenant_id="b")


def test_metadata_filter_both_sides(kb):
    kb.add_documents(_docs())
    for mode in ("dense", "keyword", "hybrid"):
        docs = kb.search(
            "leave receipt", k=10, mode=mode, min_score=0.0, filter={"category": "finance"}
        )
        assert [d.metadata["source"] for d in docs] == ["expenses.md"]
        docs = kb.search(
            "leave receipt", k=10, mode=mode, min_score=0.0, filter={"category": {"$in": ["leave"]}}
        )
        assert docs and {d.metadata["category"] for d in docs} == {"leave"}


def test_delete_by_id_and_by_source(kb):
    result = kb.add_documents(_docs())
    assert kb.delete([result.ids[2]]) == 1
    keyword, chroma = _all_ids(kb)
    assert keyword == chroma == set(result.ids[:2])
    assert kb.delete_source("leave.md") == 2
    assert _all_ids(kb) == (set(), set())
    assert kb.get_source_fingerprint("leave.md") is None


def test_fingerprints_are_stored(kb):
    kb.add_documents(_docs()[:1], fingerprints={"leave.md": "abc"})
    assert kb.get_source_fingerprint("leave.md") == "abc"
    assert kb.get_source_fingerprint("leave.md", tenant_id="acme") is None


def test_scores_and_modes(kb):
    kb.add_documents(_docs())
    for mode in ("dense", "keyword", "hybrid"):
        docs = kb.search("annual leave calendar year", k=3, mode=mode, min_score=0.0)
        scores = [d.metadata["score"] for d in docs]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 <= s <= 1.0 for s in scores)
    exact = kb.search(LEAVE, k=1, mode="dense", min_score=0.0)[0]
    assert exact.page_content.startswith(LEAVE)  # the best chunk first, its document's others after
    assert exact.id == chunk_id("", "leave.md", LEAVE) == exact.metadata["chunk_ids"][0]
    assert exact.metadata["score"] == pytest.approx(1.0, abs=1e-4)
    strict = kb.search("annual leave", k=3, mode="dense", min_score=1.0)
    assert all(d.metadata["score"] >= 1.0 for d in strict)


def test_search_hits_are_the_search_by_chunk_without_reading_chunks_back(kb, monkeypatch):
    kb.add_documents(_docs())
    kb.add_documents([Document(LEAVE, metadata={"source": "t.md"})], tenant_id="acme")
    for mode in ("dense", "keyword", "hybrid"):
        for options in ({"k": 3, "min_score": 0.0}, {"k": 2}, {"k": 3, "tenant_id": "acme"}):
            docs = kb.search("annual leave calendar year", mode=mode, include_shared=False,
                             **options)  # fmt: skip
            hits = dict(kb.search_hits("annual leave calendar year", mode=mode, **options))
            # search groups the chunks by document: each result is led by its best chunk
            for doc in docs:
                assert hits.get(doc.id, doc.metadata["score"]) == doc.metadata["score"]
                assert doc.id in doc.metadata["chunk_ids"]
            assert len({d.metadata["source"] for d in docs}) == len(docs)
            assert [d.id for d in docs[:1]] == list(hits)[:1]
    assert kb.search_hits("   ") == []
    with pytest.raises(ConfigurationError):
        kb.search_hits("leave", k=0)
    read: list[str] = []
    real = kb._searcher.documents
    monkeypatch.setattr(kb._searcher, "documents",
                        lambda *a: read.extend(a[3]) or real(*a))  # fmt: skip
    for mode in ("dense", "keyword", "hybrid"):
        assert kb.search_hits("annual leave calendar year", k=3, min_score=0.0, mode=mode)
    assert read == []  # no chunk was read back


def test_search_hits_can_give_the_dense_score_beside_the_fused_one(kb):
    kb.add_documents(_docs())
    query = "annual leave calendar year"
    dense = dict(kb.search_hits(query, k=50, min_score=0.0, mode="dense"))
    for mode in ("dense", "keyword", "hybrid"):
        for options in ({"k": 3, "min_score": 0.0}, {"k": 2}):
            plain = kb.search_hits(query, mode=mode, **options)
            triples = kb.search_hits(query, mode=mode, with_dense=True, **options)
            assert [(cid, score) for cid, score, _ in triples] == plain  # same hits and order
            for cid, score, cosine in triples:
                if mode == "keyword":
                    assert cosine == 0.0  # no dense side
                else:
                    assert cosine == pytest.approx(dense[cid])
                    if mode == "dense":
                        assert cosine == score
    assert kb.search_hits("   ", with_dense=True) == []


def test_search_hits_can_leave_more_words_out_of_the_keyword_query(kb):
    kb.add_documents([Document("What did you do?", metadata={"source": "q"}),
                      Document("We ate pasta in Rome.", metadata={"source": "a"})])  # fmt: skip
    query = "What did you eat in Rome?"
    plain = kb.search_hits(query, k=5, mode="keyword", min_score=0.0)
    fewer = kb.search_hits(query, k=5, mode="keyword", min_score=0.0,
                           stopwords=STOPWORDS | {"what", "did", "you"})  # fmt: skip

    assert {cid for cid, _ in plain} == {cid for cid, _ in kb.search_hits("x", k=5, min_score=0)}
    assert [kb.get_by_ids([cid])[0].page_content for cid, _ in fewer] == ["We ate pasta in Rome."]
    assert kb.search_hits(query, k=5, mode="keyword", min_score=0.0, stopwords=None) == plain
    with pytest.raises(ConfigurationError, match="stopwords"):
        kb.search_hits(query, stopwords=["what"])  # type: ignore[arg-type]


def test_query_embeddings_are_cached(kb, emb):
    kb.add_documents(_docs())
    kb.search("annual leave", mode="dense", min_score=0.0)
    count = emb.queries_embedded
    kb.search("annual leave", mode="hybrid", min_score=0.0)
    kb.search("annual leave", mode="dense", min_score=0.0, k=2)
    assert emb.queries_embedded == count


def test_blank_query_and_empty_kb(kb):
    assert kb.search("   ") == []
    assert kb.search("anything at all", min_score=0.0) == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": 0}, "k must be an integer >= 1"),
        ({"k": -3}, "k must be an integer >= 1"),
        ({"min_score": 1.5}, r"min_score must be a number in \[0, 1\]"),
        ({"min_score": -0.1}, r"min_score must be a number in \[0, 1\]"),
        ({"mode": "semantic"}, "mode must be one of dense, keyword, hybrid"),
        ({"filter": {"$not": {}}}, "Unknown filter operator"),
    ],
)
def test_invalid_search_arguments(kb, kwargs, match):
    with pytest.raises(ConfigurationError, match=match):
        kb.search("leave", **kwargs)


def test_invalid_name(tmp_path, emb):
    with pytest.raises(ConfigurationError, match="letters, digits"):
        KnowledgeBase("bad name!", path=tmp_path, embeddings=emb)


def test_missing_kb_is_not_created(tmp_path, emb):
    KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    with pytest.raises(KnowledgeBaseNotFoundError, match="existing: hr"):
        KnowledgeBase("nope", path=tmp_path, embeddings=emb, create=False)
    assert [i.name for i in KnowledgeBase.list(tmp_path)] == ["hr"]


def test_other_embedding_model_is_refused(tmp_path, emb):
    KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    with pytest.raises(KnowledgeBaseOpenError, match="built with the embedding model"):
        KnowledgeBase("hr", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=16))


def test_a_corrupt_keyword_cache_is_rebuilt_from_chroma(tmp_path, emb):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    ids = kb.add_documents(_docs()).ids
    kb.close()
    damaged = [p for p in (tmp_path / "keyword").rglob("*") if p.is_file() and p.name != "lock"]
    assert damaged
    for path in damaged:
        path.write_bytes(b"this is not an index" * 100)
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    assert kb.info.chunk_count == 3
    hits = kb.search("receipt manager approval", k=1, mode="keyword", min_score=0.0)
    assert hits[0].id == ids[2]
    assert kb.check().clean


def test_store_path_that_is_a_file(tmp_path, emb):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(KnowledgeBaseOpenError, match="not a directory"):
        KnowledgeBase("hr", path=target, embeddings=emb)


def test_text_splitter_splits_long_documents(tmp_path, emb):
    kb = KnowledgeBase("long", path=tmp_path, embeddings=emb)
    text = "\n\n".join(
        f"Paragraph {i} about travel rules and per diem rates." * 6 for i in range(12)
    )
    result = kb.add_documents([Document(text, metadata={"source": "travel.md"})])
    assert result.added > 1
    hits = kb.search_hits("travel", k=100, mode="keyword", min_score=0.0)
    chunks = kb.get_by_ids([cid for cid, _ in hits])
    assert sorted(d.metadata["chunk_index"] for d in chunks) == list(range(result.added))
    merged = kb.search("travel", k=100, mode="keyword", min_score=0.0)
    assert len(merged) == 1 and len(merged[0].metadata["chunk_ids"]) == min(3, result.added)
    kb_whole = KnowledgeBase("whole", path=tmp_path, embeddings=emb, text_splitter=None)
    assert kb_whole.add_documents([Document(text, metadata={"source": "travel.md"})]).added == 1


def test_a_chunk_repeated_in_one_call_is_stored_once(kb):
    twice = [Document(LEAVE, metadata={"source": "leave.md", "page": 1}),
             Document(LEAVE, metadata={"source": "leave.md", "page": 1})]  # fmt: skip
    first = kb.add_documents(twice)
    assert first.added == 1 and first.ids[0] == first.ids[1]
    assert kb.add_documents(twice).unchanged == 1 and kb.count() == 1


def test_empty_documents_are_skipped(kb):
    result = kb.add_documents([Document("   ", metadata={"source": "blank.md"}), *_docs()[:1]])
    assert (result.added, result.skipped) == (1, 1)


def test_drop_removes_everything(tmp_path, emb):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    kb.add_documents(_docs(), tenant_id="acme")
    kb.drop()
    assert KnowledgeBase.list(tmp_path) == []
    assert kb._chroma.client.list_collections() == []
    assert not (tmp_path / "keyword" / kb.id).exists()


def test_derived_topics(kb):
    kb.add_documents(_docs())
    info = kb.info
    assert info.topics_derived
    assert "leave" in info.topics


async def test_async_twins(kb):
    result = await kb.aadd_documents(_docs())
    assert result.added == 3
    docs = await kb.asearch("annual leave", k=1, mode="keyword", min_score=0.0)
    assert docs[0].page_content == f"{LEAVE}\n[...]\n{SICK}"
    assert await kb.adelete_source("expenses.md") == 1


def test_retriever_k_in_constructor_and_invoke(kb):
    kb.add_documents(_docs())
    retriever = kb.as_retriever(k=1, min_score=0.0)
    assert len(retriever.invoke("leave")) == 1
    assert len(retriever.invoke("leave", k=3)) == 2  # two documents: leave.md and expenses.md
    with pytest.raises(ConfigurationError, match="Unknown retriever options"):
        retriever.invoke("leave", top=2)
    with pytest.raises(ValueError, match="k must be"):
        kb.as_retriever(k=0)


@pytest.mark.slow
def test_second_process_gets_a_clear_error(tmp_path):
    import subprocess
    import sys

    emb = DeterministicFakeEmbedding(size=32)
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    script = (
        "from langchain_core.embeddings import DeterministicFakeEmbedding as E\n"
        "from langchain_knowledge_inject import KnowledgeBase\n"
        "from langchain_knowledge_inject.errors import KnowledgeBaseOpenError\n"
        "try:\n"
        f"    KnowledgeBase('hr', path={str(tmp_path)!r}, embeddings=E(size=32))\n"
        "except KnowledgeBaseOpenError as e:\n"
        "    print('refused:', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert "refused:" in out.stdout and "another process" in out.stdout, out.stderr
    same_process = KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    assert same_process.id == kb.id
    kb.close()
    same_process.close()
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "refused" not in out.stdout, out.stdout + out.stderr


def test_dense_search_goes_deeper_when_one_document_fills_the_first_candidates(tmp_path):
    # Dense search asks for 4 chunks per result first; here one document's 30 chunks are
    # all nearer the query than any other document, so k documents need a deeper query.
    kb = KnowledgeBase("deep", path=tmp_path, embeddings=WordHashEmbedding(), text_splitter=None)
    big = [
        Document(f"zebra quokka habitat note {i}", metadata={"source": "big.md", "chunk_index": i})
        for i in range(30)
    ]
    small = [Document(f"zebra sighting {n}", metadata={"source": f"d{n}.md"}) for n in range(5)]
    kb.add_documents(big + small)
    dense = kb.search_hits("zebra quokka", k=100, mode="dense", min_score=0.0)
    assert {kb.get_by_ids([c])[0].metadata["source"] for c, _ in dense[:12]} == {"big.md"}
    found = kb.search("zebra quokka", k=3, mode="dense", min_score=0.0)
    sources = [d.metadata["source"] for d in found]
    assert len(sources) == 3 and len(set(sources)) == 3
    assert sources[0] == "big.md" and len(found[0].metadata["chunk_ids"]) == 3
    assert set(sources[1:]) <= {f"d{n}.md" for n in range(5)}


def test_hybrid_search_runs_its_dense_side_on_another_thread(tmp_path, emb, monkeypatch):
    # The dense query runs on one of the knowledge base's threads while the keyword cache
    # answers on the caller's; its answer and its errors reach the caller.
    kb = KnowledgeBase("sides", path=tmp_path, embeddings=emb)
    kb.add_documents(_docs())
    collection = kb._chroma.collection("")
    threads: list[str] = []
    query = type(collection).query

    def recording(self, *args, **kwargs):
        threads.append(threading.current_thread().name)
        return query(self, *args, **kwargs)

    monkeypatch.setattr(type(collection), "query", recording)
    hits = kb.search_hits("parental leave weeks", k=2, min_score=0.0, with_dense=True)
    assert threads and all(name.startswith("kinject-dense") for name in threads)
    assert any(cosine > 0 for _, _, cosine in hits)  # the dense side's answer counted

    def broken(self, *args, **kwargs):
        raise RuntimeError("dense side down")

    monkeypatch.setattr(type(collection), "query", broken)
    with pytest.raises(RetrievalError, match="dense side down"):
        kb.search("parental leave weeks", k=2)


def test_as_retriever_takes_search_kwargs_as_vector_stores_do(kb):
    kb.add_documents(_docs())
    retriever = kb.as_retriever(search_kwargs={"k": 1, "min_score": 0.0})
    assert (retriever.k, retriever.min_score) == (1, 0.0)
    assert len(retriever.invoke("leave")) == 1
    assert kb.as_retriever(search_kwargs={"k": 1}, k=2).k == 2  # a keyword argument wins


def test_info_of_a_dropped_knowledge_base_is_a_not_found_error(kb):
    kb.add_documents(_docs())
    kb.drop()
    with pytest.raises(KnowledgeBaseNotFoundError, match="'hr'"):
        kb.info  # noqa: B018
