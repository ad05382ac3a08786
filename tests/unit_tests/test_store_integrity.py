"""Store integrity: a lost or damaged keyword cache, repair that never deletes, a replaced
collection, Chroma unreachable, disk full and a read-only store (issues 9.5, 10, 12 and 22)."""

from __future__ import annotations

import errno
import json
import os
import shutil

import chromadb
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase, RestrictionFlags, StoreError
from langchain_knowledge_inject._store import knowledge_base
from langchain_knowledge_inject._store.keyword import KeywordIndex
from langchain_knowledge_inject._store.storage import StoreLock
from langchain_knowledge_inject._surfaces.cli import main
from langchain_knowledge_inject.errors import KnowledgeBaseOpenError, RetrievalError
from tests.unit_tests.fakes import CountingEmbedding

SECRET = "The merger code is amber-walrus-pilot and the price is 7,350,000 euros."
DOCS = [
    Document(SECRET, metadata={"source": "deal.md"}),
    Document("Staff get 25 days of annual leave.", metadata={"source": "leave.md"}),
    Document("Expenses are reimbursed monthly.", metadata={"source": "expenses.md"}),
]
FILLER = [
    Document(f"Filler paragraph {i} about topic {i}. " * 25, metadata={"source": f"f{i}.md"})
    for i in range(60)
]


@pytest.fixture
def emb():
    return DeterministicFakeEmbedding(size=16)


def _restricted_kb(tmp_path, emb) -> list[str]:
    flags = RestrictionFlags(restricted=True, sensitive_sources=True)
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb, restricted=flags)
    ids = kb.add_documents(DOCS).ids
    kb.add_documents(FILLER)  # an index of many segments' worth, so damage lands inside it
    assert kb.search("amber walrus pilot", k=1, mode="keyword", min_score=0.0)[0].id == ids[0]
    kb.close()
    return ids


def _chroma_count(tmp_path) -> int:
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    return sum(c.count() for c in client.list_collections() if c.name.endswith("-shared"))


def _cache_files(path):
    return [p for p in (path / "keyword").rglob("*") if p.is_file() and p.name != "lock"]


def _truncate(path) -> None:
    for file in _cache_files(path):
        file.write_bytes(b"")


def _empty(path) -> None:
    for folder in (path / "keyword").rglob("chunks"):
        KeywordIndex(folder).clear()  # a valid index that lost its rows


def _delete(path) -> None:
    shutil.rmtree(path / "keyword")


def _random_bytes(path) -> None:
    for file in _cache_files(path):
        file.write_bytes(os.urandom(max(64, file.stat().st_size)))


def _overwrite_at(fraction: float):
    def damage(path) -> None:
        for file in _cache_files(path):
            size = file.stat().st_size
            with file.open("r+b") as handle:
                handle.seek(max(0, min(int(size * fraction), size - 64)))
                handle.write(os.urandom(64))

    damage.__name__ = f"overwrite_at_{fraction}"
    return damage


@pytest.mark.parametrize(
    "lose",
    [_truncate, _empty, _delete, _random_bytes, _overwrite_at(0.5), _overwrite_at(1.0)],
)
def test_losing_the_keyword_cache_keeps_restriction_and_every_chunk(tmp_path, emb, lose):
    ids = _restricted_kb(tmp_path, emb)
    lose(tmp_path)
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb)
    info = kb.info
    assert info.restricted is True and info.sensitive_sources is True
    assert info.chunk_count == len(DOCS) + len(FILLER)
    # rebuilt from Chroma: the keyword side finds every chunk again
    hits = kb.search("amber walrus pilot", k=1, mode="keyword", min_score=0.0)
    assert hits[0].id == ids[0]
    for i in range(0, len(FILLER), 7):
        assert kb.search(f"paragraph {i} topic", k=1, mode="keyword", min_score=0.0)
    assert kb.check().clean
    kb.close()
    assert _chroma_count(tmp_path) == len(DOCS) + len(FILLER)  # nothing deleted


def test_chroma_wins_over_what_the_store_noted_last(tmp_path, emb):
    _restricted_kb(tmp_path, emb)
    noted = next((tmp_path / "keyword").rglob("kb.json"))
    noted.write_text(json.dumps({"name": "deal", "restricted": False}))  # a stale note
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb)
    assert kb.info.restricted is True and kb.restriction.sensitive_sources is True


def test_unrestrict_holds_without_the_keyword_cache(tmp_path, emb):
    _restricted_kb(tmp_path, emb)
    with pytest.raises(ValueError, match="unrestrict"):
        KnowledgeBase("deal", path=tmp_path, embeddings=emb, restricted=False)
    KnowledgeBase("deal", path=tmp_path, embeddings=emb).unrestrict()
    _delete(tmp_path)
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb)
    assert kb.info.restricted is False and kb.info.sensitive_sources is False


class _DownClient:
    """A Chroma client whose server does not answer."""

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            raise ConnectionError("Could not connect to a Chroma server")

        return fail


def test_chroma_unreachable_at_open_fails_closed(tmp_path, emb):
    from langchain_core.messages import HumanMessage

    from langchain_knowledge_inject import KnowledgeInjector

    client = chromadb.EphemeralClient()
    kb = KnowledgeBase("srv", path=tmp_path, client=client, embeddings=emb, restricted=True)
    kb.add_documents(DOCS)
    kb.close()
    down = KnowledgeBase("srv", path=tmp_path, client=_DownClient(), embeddings=emb)
    with pytest.raises(RetrievalError, match="does not answer"):
        _ = down.restriction
    with pytest.raises(RetrievalError):
        down.search("merger code", min_score=0.0)
    turn = KnowledgeInjector(down, min_score=0.0).prepare([HumanMessage("merger code amber?")])
    text = " ".join(str(m.content) for m in turn.messages)
    assert "amber-walrus-pilot" not in text and not turn.manifest.injected
    with pytest.raises(KnowledgeBaseOpenError, match="could not be asked"):
        KnowledgeBase("other", path=tmp_path, client=_DownClient(), embeddings=emb)


def test_damage_found_by_a_search_is_healed_from_chroma(tmp_path, emb, monkeypatch):
    ids = _restricted_kb(tmp_path, emb)
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb)
    part = kb._cache._part("")

    def damaged(*args, **kwargs):
        raise ValueError("Data corrupted: the index file is damaged")

    monkeypatch.setattr(part.chunks, "search", damaged)  # the old index object
    hits = kb.search("amber walrus pilot", k=1, mode="keyword", min_score=0.0)
    assert hits[0].id == ids[0]  # answered from the rebuilt cache
    assert kb.info.restricted is True and kb.check().clean


def test_repair_adopts_what_it_can_explain_and_deletes_nothing(tmp_path, emb):
    kb = KnowledgeBase("adopt", path=tmp_path, embeddings=emb)
    kb.add_documents(DOCS[1:])
    collection = kb._chroma.collection("")
    collection.upsert(  # written by another client, with text: explainable
        ids=["foreign-1"],
        embeddings=[emb.embed_query("holiday rota")],
        documents=["The holiday rota is published every January."],
        metadatas=[{"source": "rota.md"}],
    )
    collection.upsert(ids=["vector-only"], embeddings=[emb.embed_query("x")])  # no text
    report = kb.check()  # the counts differ: the catch-up adopts what holds text, no repair
    assert report.clean and report.partitions[0].keyword_missing == []
    assert report.unexplained == ["vector-only"]
    assert "left in place" in report.summary() and not report.repaired
    assert set(collection.get(include=[])["ids"]) >= {"foreign-1", "vector-only"}
    hits = kb.search("holiday rota January", k=1, mode="keyword", min_score=0.0)
    assert hits[0].id == "foreign-1"
    assert kb.check().clean


def test_a_replaced_collection_is_noticed_and_rewritten(tmp_path, emb, caplog):
    first = chromadb.PersistentClient(path=str(tmp_path / "server-1"))
    kb = KnowledgeBase("srv", path=tmp_path / "store", client=first, embeddings=emb)
    assert kb.add_documents(DOCS).added == len(DOCS)
    assert kb.search("annual leave", k=2, mode="keyword", min_score=0.0)
    kb.close()
    fresh = chromadb.PersistentClient(path=str(tmp_path / "server-2"))  # a wiped server
    kb = KnowledgeBase("srv", path=tmp_path / "store", client=fresh, embeddings=emb)
    # no text served from the local cache over an empty collection
    assert kb.search("annual leave", k=2, mode="keyword", min_score=0.0) == []
    assert "is gone" in caplog.text
    result = kb.add_documents(DOCS)
    assert result.added == len(DOCS) and result.unchanged == 0
    assert fresh.get_collection(f"kinject-{kb.id}-shared").count() == len(DOCS)
    assert kb.check().clean


def test_a_collection_deleted_under_an_open_kb_is_noticed(tmp_path, emb):
    client = chromadb.PersistentClient(path=str(tmp_path / "server"))
    kb = KnowledgeBase(
        "srv", path=tmp_path / "store", client=client, embeddings=emb, restricted=True
    )
    ids = kb.add_documents(DOCS).ids
    assert kb.search("annual leave", k=1, min_score=0.0)[0].id == ids[1]
    client.delete_collection(f"kinject-{kb.id}-shared")  # the server was wiped and restarted
    assert kb.search("annual leave", k=1, min_score=0.0) == []
    assert kb.add_documents(DOCS).added == len(DOCS)
    assert kb.search("annual leave", k=1, min_score=0.0)[0].id == ids[1]
    assert kb.restriction.restricted is True  # recreated as it was


def _disk_full(*args, **kwargs):
    from chromadb.errors import InternalError

    raise InternalError(
        "Query error: Database error: error returned from database: (code: 13) "
        "database or disk is full"
    )


def test_disk_full_in_chroma_is_a_store_error_and_recovers(tmp_path, emb, monkeypatch):
    """Simulated at the Chroma boundary (scripts/disk_full_probe.py fills a real tmpfs)."""
    kb = KnowledgeBase("full", path=tmp_path, embeddings=emb)
    collection = kb._chroma.collection("", create=True)
    monkeypatch.setattr(type(collection), "upsert", _disk_full)
    with pytest.raises(StoreError) as caught:
        kb.add_documents(DOCS)
    assert caught.value.reason == "disk_full" and "Free disk space" in str(caught.value)
    assert kb.check().clean  # nothing half-written
    monkeypatch.undo()
    assert kb.add_documents(DOCS).added == len(DOCS)  # same process, space back
    assert kb.check().clean


def test_disk_full_in_the_keyword_cache_is_caught_up_once_space_is_back(tmp_path, emb, monkeypatch):
    kb = KnowledgeBase("full", path=tmp_path, embeddings=emb)
    kb.add_documents(DOCS[:1])

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(KeywordIndex, "write", full)
    with pytest.raises(StoreError, match="is full"):
        kb.add_documents(DOCS[1:])
    monkeypatch.undo()
    # Chroma got the chunks first: the cache catches up from it, nothing is embedded again
    hits = kb.search("reimbursed monthly", k=1, mode="keyword", min_score=0.0)
    assert hits and hits[0].metadata["source"] == "expenses.md"
    assert kb.check().clean
    assert kb.add_documents(DOCS).unchanged == len(DOCS)


def test_cli_prints_one_line_on_disk_full(tmp_path, monkeypatch, capsys):
    fake = DeterministicFakeEmbedding(size=16)
    monkeypatch.setattr(knowledge_base, "default_embeddings", lambda **_: fake)
    monkeypatch.setattr(chromadb.api.models.Collection.Collection, "upsert", _disk_full)
    doc = tmp_path / "doc.txt"
    doc.write_text("Staff get 25 days of annual leave.")
    code = main(["ingest", str(doc), "--kb", "hr", "--path", str(tmp_path / "store")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and err[0].startswith("kinject: error:") and "is full" in err[0]


def test_read_only_store_is_searchable_and_refuses_writes(tmp_path, emb, monkeypatch):
    """Simulated: tests run as root, which writes through permission bits.

    ``scripts/disk_full_probe.py --read-only`` checks a real read-only bind mount.
    """
    ids = _restricted_kb(tmp_path, emb)
    monkeypatch.setattr(knowledge_base, "store_is_writable", lambda path: False)
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb)
    assert kb.read_only and kb.info.restricted is True
    assert kb.search("annual leave", k=1, min_score=0.0)[0].id == ids[1]
    assert kb.search("amber walrus", k=1, mode="keyword", min_score=0.0)[0].id == ids[0]
    with pytest.raises(StoreError) as caught:
        kb.add_documents(DOCS)
    assert caught.value.reason == "read_only" and "Searching still works" in str(caught.value)
    with pytest.raises(StoreError):
        kb.delete(ids[:1])
    with pytest.raises(StoreError):
        kb.unrestrict()


def test_from_chroma_adopts_a_langchain_chroma_collection_without_re_embedding(tmp_path, emb):
    from langchain_chroma import Chroma

    store = Chroma("handbook", embedding_function=emb, persist_directory=str(tmp_path / "lc"))
    ids = store.add_documents(DOCS)
    counting = CountingEmbedding(size=16)
    kb = KnowledgeBase.from_chroma(
        "handbook",
        persist_directory=tmp_path / "lc",
        embeddings=counting,
        path=tmp_path / "kb",
        restricted=True,
    )
    assert counting.documents_embedded == 3  # the model check only: nothing was re-embedded
    assert kb.info.chunk_count == len(DOCS) and kb.info.restricted is True
    hit = kb.search("amber walrus pilot", k=1, mode="keyword", min_score=0.0)[0]
    assert hit.id == ids[0] and hit.metadata["source"] == "deal.md"
    assert kb.search(SECRET, k=1, mode="dense", min_score=0.0)[0].id == ids[0]
    assert kb.check().clean


def test_from_chroma_refuses_another_embedding_model(tmp_path, emb):
    from langchain_chroma import Chroma

    Chroma(
        "handbook", embedding_function=emb, persist_directory=str(tmp_path / "lc")
    ).add_documents(DOCS)
    other = _ShiftedEmbedding(size=16)
    with pytest.raises(KnowledgeBaseOpenError, match="not embedded with the model given"):
        KnowledgeBase.from_chroma(
            "handbook", persist_directory=tmp_path / "lc", embeddings=other, path=tmp_path / "kb"
        )
    assert KnowledgeBase.list(path=tmp_path / "kb") == []


def test_vectorstore_writes_go_through_the_knowledge_base(tmp_path, emb):
    from langchain_knowledge_inject.errors import KnowledgeBaseError

    kb = KnowledgeBase("vs", path=tmp_path, embeddings=emb)
    kb.add_documents(DOCS)
    store = kb.vectorstore()
    ids = store.add_documents(
        [Document("The holiday rota is published every January.", metadata={"team": "ops"})]
    )
    # found by keyword search too, and no drift for check() to report
    hit = kb.search("holiday rota January", k=1, mode="keyword", min_score=0.0)[0]
    assert hit.id == ids[0] and hit.metadata["team"] == "ops"
    assert kb.check().clean and kb.info.chunk_count == len(DOCS) + 1
    store.update_document(ids[0], Document("The rota moved to February.", metadata={}))
    assert kb.search("rota February", k=1, mode="keyword", min_score=0.0)[0].id == ids[0]
    stale = kb.search("holiday January", k=4, mode="keyword", min_score=0.0)
    assert ids[0] not in [d.id for d in stale]  # the old text left the keyword index
    store.delete(ids)
    assert kb.get_by_ids(ids) == [] and kb.check().clean
    assert kb.check(repair=True).clean and kb.info.chunk_count == len(DOCS)
    with pytest.raises(KnowledgeBaseError, match=r"kb\.drop"):
        store.delete_collection()
    tenant = kb.vectorstore(tenant_id="acme")
    tenant.add_texts(["Acme staff get 30 days."], ids=["acme-1"])
    found = kb.search("Acme staff days", k=1, mode="keyword", min_score=0.0, tenant_id="acme")
    assert found[0].id == "acme-1"
    shared = kb.search("Acme staff days", k=4, mode="keyword", min_score=0.0)
    assert "acme-1" not in [d.id for d in shared]


class _ShiftedEmbedding(DeterministicFakeEmbedding):
    """Same size, other vectors: another model."""

    def embed_documents(self, texts):
        return super().embed_documents([f"other model {t}" for t in texts])

    def embed_query(self, text):
        return super().embed_query(f"other model {text}")


@pytest.mark.parametrize("lose", [_truncate, _empty, _delete, _random_bytes])
def test_an_injector_over_a_kb_with_a_lost_cache_serves_no_raw_chunk(tmp_path, emb, lose):
    from langchain_core.messages import HumanMessage

    from langchain_knowledge_inject import KnowledgeInjector

    _restricted_kb(tmp_path, emb)
    lose(tmp_path)
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb)
    out = KnowledgeInjector(kb, min_score=0.0).invoke(
        [HumanMessage("What is the merger code, amber walrus?")]
    )
    text = " ".join(str(m.content) for m in out)
    assert "amber-walrus-pilot" not in text and "7,350,000" not in text
    assert "Restricted" in text


def test_kinject_check_rebuilds_a_lost_cache_and_keeps_restriction(
    tmp_path, emb, monkeypatch, capsys
):
    _restricted_kb(tmp_path, emb)
    _truncate(tmp_path)
    monkeypatch.setattr(knowledge_base, "default_embeddings", lambda **_: emb)
    assert main(["check", "--kb", "deal", "--path", str(tmp_path)]) == 0  # rebuilt on the way
    assert "consistent" in capsys.readouterr().out
    assert main(["check", "--kb", "deal", "--path", str(tmp_path), "--repair"]) == 0
    assert "consistent" in capsys.readouterr().out
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb)
    assert kb.info.restricted is True and kb.info.chunk_count == len(DOCS) + len(FILLER)


@pytest.mark.slow
def test_reads_of_more_chunks_than_sqlite_allows_variables_are_paged(tmp_path):
    # chromadb 1.5 fails a get of more than 32,766 ids, or of as many where-matches, at
    # once ("too many SQL variables"): every read of many chunks goes page by page.
    kb = KnowledgeBase("big", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=4))
    kb.add_documents([Document("Staff get 25 days of annual leave.", metadata={"source": "a.md"})])
    collection, n = kb._chroma.collection(""), 33_000
    ids = [f"bulk-{i}" for i in range(n)]
    for start in range(0, n, 5_000):
        part = range(start, min(n, start + 5_000))
        collection.add(
            ids=[ids[i] for i in part],
            embeddings=[[1.0, 0.5, 0.25, (i % 7) / 7] for i in part],
            documents=[f"bulk row {i} about parking permits" for i in part],
            metadatas=[{"source": "bulk.md", "chunk_index": i} for i in part],
        )
    with pytest.raises(Exception, match="too many SQL variables"):
        collection.get(ids=ids, include=[])  # why the reads are paged
    assert len(kb.get_by_ids(ids)) == n
    assert len(kb._chroma.get("", where={"source": "bulk.md"}, fields="meta")) == n
    report = kb.check()  # written behind the cache's back: the catch-up reads them, page by page
    assert report.clean and report.partitions[0].chunks == kb.count() == n + 1
    found = kb.search("parking permits", k=3, mode="keyword", min_score=0.0)
    assert [d.metadata["source"] for d in found] == ["bulk.md"]


def test_a_finalizer_never_waits_for_the_store_lock(tmp_path):
    # The garbage collector runs KnowledgeBase.__del__ inside any allocation, also while
    # this thread holds StoreLock's guard (taking another knowledge base's share): the
    # release is queued for the next share taken or released, never waited for.
    first = KnowledgeBase("one", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=8))
    lock = first._store_lock
    with StoreLock._guard:
        first.__del__()  # waiting here would never end
    assert not lock._released and StoreLock._held[lock.key][1] == 1
    second = KnowledgeBase("two", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=8))
    assert lock._released and StoreLock._held[lock.key][1] == 1  # only the second's share
    second.close()
    assert lock.key not in StoreLock._held
