"""Sealed text: restricted chunks are ciphertext to every reader but the boundary.

Built from the classes of issue 31, not from its examples:

* readers: every way to read the collection without the package (a plain
  ``langchain_chroma.Chroma``, its retriever, the raw ``chromadb`` client, ensembles of
  them at any depth, a user's retriever holding a store under a field name nobody
  lists, a ``RunnableLambda``) get no plaintext chunk;
* the same readers as sources, on every surface (injector, graph, node, middleware,
  tool): the turn is restricted (the sealed text says so, whatever the flag walk
  found) and no channel (model input, output, checkpoints, every stream mode, events,
  logs) holds a raw passage; that holds too after the flag is removed or the
  collection dropped and recreated with its chunks;
* a process without the key: its turns refuse with ``key_unavailable``, its owner
  calls raise :class:`SealedKnowledgeError`, its writes are refused;
* ``restrict()`` / ``unrestrict()`` round trip (vectors kept), a store restricted by an
  earlier version sealed on open, a cut ``restrict()`` finished on open;
* the keyword cache stores ids and sources, never text;
* the envelope: bound to its knowledge base and key, tamper-evident, keys checked.
"""

from __future__ import annotations

import logging
import os
import secrets
from typing import Any

import pytest
from langchain_chroma import Chroma
from langchain_core.documents import Document

from langchain_knowledge_inject import (
    ConfigurationError,
    EpisodicMemory,
    KnowledgeBase,
    KnowledgeInjector,
    RestrictedKnowledgeError,
)
from langchain_knowledge_inject._store import sealing
from langchain_knowledge_inject._store.flags import raw_access
from langchain_knowledge_inject._store.storage import collection_name
from langchain_knowledge_inject.errors import SealedKnowledgeError
from tests.unit_tests.fakes import WordHashEmbedding
from tests.unit_tests.restricted_fixtures import RESTRICTED_DOCUMENTS, make_summarizer
from tests.unit_tests.restricted_harness import (
    CHANNELS,
    READERS,
    SURFACES,
    UNSEEN,
    collection_readers,
    count_raw,
    run_surface,
)

QUESTION = "What are the rules on annual leave, support targets and commission?"
CHUNKS = [d.page_content for d in RESTRICTED_DOCUMENTS]
EMB = WordHashEmbedding()


def _documents() -> list[Document]:
    return [d.model_copy(update={"id": None}) for d in RESTRICTED_DOCUMENTS]


def _vault(path: Any, name: str = "vault") -> KnowledgeBase:
    kb = KnowledgeBase(name, path=path, embeddings=EMB)
    kb.add_documents(_documents())
    kb.restrict()
    return kb


def _stored_texts(kb: KnowledgeBase) -> list[str]:
    collection = kb._chroma.client.get_collection(collection_name(kb.id, ""))
    return list(collection.get(include=["documents"])["documents"])


# --- readers of the collection that are not the package ----------------------------------------


def _plain(kb: KnowledgeBase) -> Chroma:
    return Chroma(
        client=kb._chroma.client, collection_name=collection_name(kb.id, ""), embedding_function=EMB
    )


def _raw(kb: KnowledgeBase) -> Any:
    return kb._chroma.client.get_collection(collection_name(kb.id, ""))


def _source(kb: KnowledgeBase, name: str) -> Any:
    """The reader ``name`` of :func:`collection_readers` on the knowledge base's collection."""
    return collection_readers(kb._chroma.client, collection_name(kb.id, ""), EMB)[name]


SOURCES = list(READERS)


def _read(source: Any) -> list[str]:
    """Everything a reader returns for the question, outside the package."""
    if isinstance(source, Chroma):
        found = source.similarity_search(QUESTION, k=8) + [
            Document(t) for t in source.get()["documents"]
        ]
    else:
        found = source.invoke(QUESTION)
    return [d.page_content for d in found]


@pytest.fixture(scope="module")
def vault(tmp_path_factory):
    kb = _vault(tmp_path_factory.mktemp("sealed"))
    yield kb
    kb.close()


def test_every_stored_chunk_is_an_envelope_bound_to_its_knowledge_base(vault):
    stored = _stored_texts(vault)
    assert len(stored) == len(CHUNKS)
    assert all(sealing.sealed_by(t) == (vault.id, vault._sealer.key_id) for t in stored)
    assert count_raw("\n".join(stored), CHUNKS) == 0


@pytest.mark.parametrize("reader", SOURCES)
def test_no_reader_outside_the_package_sees_plaintext(vault, reader):
    texts = _read(_source(vault, reader))
    assert texts, f"{reader} found nothing"
    assert all(sealing.is_sealed(t) for t in texts)
    assert count_raw("\n".join(texts), CHUNKS) == 0


def test_the_owner_reads_plaintext_and_derived_readers_do_not(vault):
    assert {d.page_content for d in vault.search(QUESTION, k=8, min_score=0.0)} <= set(CHUNKS)
    assert (
        vault.get_by_ids([vault.search(QUESTION, k=1, min_score=0.0)[0].id])[0].page_content
        in CHUNKS
    )
    with sealing.kept_sealed():  # what a surface's search, a block and kb.as_retriever() get
        assert all(
            sealing.is_sealed(d.page_content) for d in vault.search(QUESTION, k=8, min_score=0.0)
        )
    with raw_access():  # the boundary: the summarizer's input
        assert {d.page_content for d in vault.as_retriever(k=8).invoke(QUESTION)} <= set(CHUNKS)
        plain = _plain(vault).similarity_search(QUESTION, k=8)  # not the package: ciphertext
        assert all(sealing.is_sealed(d.page_content) for d in plain)
        assert {d.page_content for d in sealing.opened(plain)} <= set(CHUNKS)  # the pipeline's
    assert sealing.opened(plain) == plain  # outside raw_access() nothing opens


def _run(surface: str, source: Any, caplog: Any, monkeypatch: Any) -> Any:
    monkeypatch.setenv("KINJECT_LOG_MODEL_IO", "1")
    caplog.set_level(logging.DEBUG)
    turn = run_surface(
        surface, kb=source, question=QUESTION, summarizer=make_summarizer("copying"),
        where="kb", search={"min_score": 0.0},
    )  # fmt: skip
    turn.channels["logs"] = [r.getMessage() for r in caplog.records]
    return turn


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("source", SOURCES)
def test_every_reader_as_a_source_is_restricted_on_every_surface(
    vault, source, surface, caplog, monkeypatch
):
    """The copying summarizer read plaintext (inside the boundary); nothing raw got out."""
    turn = _run(surface, _source(vault, source), caplog, monkeypatch)
    assert turn.reasons and set(turn.reasons) <= {"leak_detected"}
    raw = {c: count_raw(turn.text(c), CHUNKS) for c in CHANNELS if c in turn.channels}
    assert raw == dict.fromkeys(raw, 0)
    if source in UNSEEN:  # the flag walk found nothing: the sealed text restricted the turn
        assert "returned sealed text" in turn.text("logs")


# --- the flag removed, the collection recreated -------------------------------------------------


def _remove_flags(kb: KnowledgeBase) -> None:
    """Delete every restriction key from the collection's metadata, as a raw client can."""
    collection = _raw(kb)
    kept = {k: v for k, v in collection.metadata.items()
            if k not in ("kinject:restricted", "kinject:key_id", "kinject:sensitive_sources")
            and not k.startswith("hnsw:")}  # fmt: skip
    collection.modify(metadata=kept)


def _recreate(kb: KnowledgeBase) -> None:
    """Drop the shared collection and create it again with its chunks, without our keys."""
    client, name = kb._chroma.client, collection_name(kb.id, "")
    got = client.get_collection(name).get(include=["documents", "metadatas", "embeddings"])
    client.delete_collection(name)
    fresh = client.create_collection(
        name, metadata={"hnsw:space": "cosine"}, embedding_function=None
    )
    fresh.add(ids=got["ids"], documents=got["documents"], metadatas=got["metadatas"],
              embeddings=[list(map(float, v)) for v in got["embeddings"]])  # fmt: skip


TAMPERING = {"flag removed": _remove_flags, "collection recreated": _recreate}


@pytest.fixture(scope="module", params=list(TAMPERING))
def tampered(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("tampered")
    kb = _vault(root)
    TAMPERING[request.param](kb)
    kb.close()
    reopened = KnowledgeBase("vault", path=root, embeddings=EMB)  # the owner, after the fact
    yield request.param, reopened
    reopened.close()


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("source", ["kb", "plain Chroma", "a user's retriever, unlisted field"])
def test_tampered_flags_fail_closed_and_are_logged(tampered, source, surface, caplog, monkeypatch):
    how, kb = tampered
    chosen = kb if source == "kb" else _source(kb, source)
    turn = _run(surface, chosen, caplog, monkeypatch)
    assert turn.reasons and set(turn.reasons) <= {"leak_detected"}
    raw = {c: count_raw(turn.text(c), CHUNKS) for c in CHANNELS if c in turn.channels}
    assert raw == dict.fromkeys(raw, 0)
    assert not kb.restriction.restricted, how  # what the flags say now
    assert "returned sealed text" in turn.text("logs")  # the sealed text said otherwise


def test_a_removed_flag_is_logged_on_open_and_still_restricted(tmp_path, caplog):
    kb = _vault(tmp_path)
    _remove_flags_but_key(kb)
    kb.close()
    with caplog.at_level(logging.WARNING):
        again = KnowledgeBase("vault", path=tmp_path, embeddings=EMB)
    assert "restriction flag removed" in caplog.text
    assert again.restriction.restricted  # its stored key id says sealed
    with pytest.raises(RestrictedKnowledgeError):
        again.as_retriever().invoke(QUESTION)
    again.add_documents(
        [Document("Pricing floor: 4,410 euros per seat.", metadata={"source": "p.md"})]
    )
    assert all(sealing.is_sealed(t) for t in _stored_texts(again))  # writes stay sealed
    again.close()


def _remove_flags_but_key(kb: KnowledgeBase) -> None:
    collection = _raw(kb)
    kept = {k: v for k, v in collection.metadata.items()
            if k != "kinject:restricted" and not k.startswith("hnsw:")}  # fmt: skip
    collection.modify(metadata=kept)


# --- a process without the key ------------------------------------------------------------------


@pytest.fixture
def keyless(tmp_path, monkeypatch):
    """The vault opened by a process that never held its key (key file gone, keyring empty)."""
    kb = _vault(tmp_path)
    key_file = kb._sealer.file
    kb.close()
    key_file.rename(tmp_path / "elsewhere.key")
    for entry in [e for e in sealing.KEYRING if e[0] == kb.id]:
        monkeypatch.delitem(sealing.KEYRING, entry)
    again = KnowledgeBase("vault", path=tmp_path, embeddings=EMB)
    yield again
    again.close()


@pytest.mark.parametrize("surface", SURFACES)
def test_without_the_key_every_surface_refuses_with_a_reason(keyless, surface, caplog, monkeypatch):
    turn = _run(surface, keyless, caplog, monkeypatch)
    assert turn.reasons and set(turn.reasons) == {"key_unavailable"}
    raw = {c: count_raw(turn.text(c), CHUNKS) for c in CHANNELS if c in turn.channels}
    assert raw == dict.fromkeys(raw, 0)


def test_without_the_key_the_manifest_says_why(keyless):
    injector = KnowledgeInjector(keyless, summarizer_model=make_summarizer("honest"), min_score=0.0)
    turn = injector.prepare([("human", QUESTION)])
    assert turn.manifest.restricted and turn.manifest.summary_reason == "key_unavailable"
    assert turn.manifest.summary_codes == ["sealed_text"]


@pytest.mark.parametrize(
    "call",
    [
        lambda kb: kb.search(QUESTION, min_score=0.0),
        lambda kb: kb.get_by_ids([_raw(kb).get(limit=1)["ids"][0]]),
        lambda kb: kb.add_documents([Document("New text.", metadata={"source": "n.md"})]),
        lambda kb: kb.unrestrict(),
        lambda kb: kb.restrict(),
    ],
    ids=["search", "get_by_ids", "add_documents", "unrestrict", "restrict"],
)
def test_without_the_key_the_owner_gets_an_error_saying_how_to_give_it(keyless, call):
    with pytest.raises(SealedKnowledgeError) as caught:
        call(keyless)
    assert caught.value.reason == "no_key"
    message = str(caught.value)
    assert "seal_key=" in message and "KINJECT_SEAL_KEY_VAULT" in message and ".key" in message
    assert all(sealing.is_sealed(t) for t in _stored_texts(keyless))  # nothing fell back to raw


def test_the_key_given_by_argument_or_environment_opens_it(keyless, tmp_path, monkeypatch):
    key = (tmp_path / "elsewhere.key").read_text()
    with KnowledgeBase("vault", path=tmp_path, embeddings=EMB, seal_key=key) as by_argument:
        assert {d.page_content for d in by_argument.search(QUESTION, min_score=0.0)} <= set(CHUNKS)
    monkeypatch.setenv("KINJECT_SEAL_KEY_VAULT", key)
    with KnowledgeBase("vault", path=tmp_path, embeddings=EMB) as by_environment:
        assert by_environment.search(QUESTION, min_score=0.0)[0].page_content in CHUNKS


@pytest.mark.parametrize("given", ["short", "!" * 43, b"x" * 31, "A" * 44])
def test_a_malformed_key_is_refused_saying_what_a_key_is(tmp_path, given):
    with pytest.raises(ConfigurationError, match="32 bytes"):
        KnowledgeBase("vault", path=tmp_path, embeddings=EMB, seal_key=given)


def test_another_key_is_refused_as_wrong_key(tmp_path, monkeypatch):
    vault = _vault(tmp_path)
    vault.close()
    monkeypatch.delitem(sealing.KEYRING, (vault.id, vault._sealer.key_id))  # another process
    other = KnowledgeBase(
        "vault", path=tmp_path, embeddings=EMB, seal_key=secrets.token_urlsafe(32)
    )
    for call in (lambda: other.search(QUESTION, min_score=0.0), other.restrict):
        with pytest.raises(SealedKnowledgeError) as caught:
            call()
        assert caught.value.reason == "wrong_key"
    other.close()


# --- restrict / unrestrict, old stores, a cut restrict ------------------------------------------


def test_restrict_and_unrestrict_round_trip_keeps_text_and_vectors(tmp_path, caplog):
    kb = KnowledgeBase("vault", path=tmp_path, embeddings=EMB)
    kb.add_documents(_documents())
    before = _raw(kb).get(include=["documents", "embeddings"])
    kb.restrict()
    sealed = _raw(kb).get(include=["documents", "embeddings"])
    assert all(sealing.is_sealed(t) for t in sealed["documents"])
    assert [list(v) for v in sealed["embeddings"]] == [list(v) for v in before["embeddings"]]
    assert os.stat(kb._sealer.file).st_mode & 0o777 == 0o600
    with caplog.at_level(logging.WARNING):
        kb.unrestrict()
    assert "turned off by kb.unrestrict()" in caplog.text
    after = _raw(kb).get(include=["documents", "embeddings"])
    assert after["documents"] == before["documents"]
    assert [list(v) for v in after["embeddings"]] == [list(v) for v in before["embeddings"]]
    assert kb.restriction.restricted is False and _raw(kb).metadata.get("kinject:key_id") == ""
    kb.close()


def test_a_store_restricted_by_an_earlier_version_is_sealed_when_its_owner_opens_it(tmp_path):
    kb = KnowledgeBase("vault", path=tmp_path, embeddings=EMB)
    kb.add_documents(_documents())
    collection = _raw(kb)  # what the earlier version's restrict() wrote: the flag alone
    meta = {k: v for k, v in collection.metadata.items() if not k.startswith("hnsw:")}
    collection.modify(metadata={**meta, "kinject:restricted": True})
    kb.close()
    assert count_raw("\n".join(_stored_texts(kb)), CHUNKS) == len(CHUNKS)
    again = KnowledgeBase("vault", path=tmp_path, embeddings=EMB)
    assert all(sealing.is_sealed(t) for t in _stored_texts(again))
    assert (tmp_path / "keys" / f"{again.id}.key").is_file()
    assert again.search(QUESTION, k=1, min_score=0.0)[0].page_content in CHUNKS
    again.close()


def test_a_restrict_cut_half_way_is_restricted_and_finished_on_the_next_open(tmp_path, monkeypatch):
    kb = KnowledgeBase("vault", path=tmp_path, embeddings=EMB)
    kb.add_documents(_documents())
    real = type(kb._chroma).reseal

    def crash(self: Any, sealed: bool) -> int:
        raise OSError("killed half way")

    monkeypatch.setattr(type(kb._chroma), "reseal", crash)
    with pytest.raises(Exception, match="killed half way"):
        kb.restrict()
    assert kb.restriction.restricted  # the flag went first
    monkeypatch.setattr(type(kb._chroma), "reseal", real)
    kb.close()
    again = KnowledgeBase("vault", path=tmp_path, embeddings=EMB)
    assert all(sealing.is_sealed(t) for t in _stored_texts(again))
    again.close()


# --- the keyword cache ---------------------------------------------------------------------------


def test_the_keyword_cache_stores_ids_and_sources_never_text(tmp_path):
    kb = _vault(tmp_path)
    kb._cache.drop()  # built again from Chroma: the rebuild opens the sealed text
    assert kb.search("commission quota", k=2, min_score=0.0, mode="keyword")
    for part in kb._cache._open.values():
        for index in (part.chunks, part.documents):
            searcher = index._index.searcher()
            assert searcher.num_docs
            import tantivy

            for _, address in searcher.search(tantivy.Query.all_query(), searcher.num_docs).hits:
                assert set(searcher.doc(address).to_dict()) <= {"id", "source"}
    kb.close()


# --- the envelope -------------------------------------------------------------------------------


def test_an_envelope_opens_only_under_its_knowledge_base_and_unchanged(vault):
    stored = _stored_texts(vault)[0]
    head, _, body = stored.rpartition(":")
    flipped = head + ":" + ("A" if body[0] != "A" else "B") + body[1:]
    other_kb = stored.replace(vault.id, "0" * 12, 1)
    assert sealing.open_sealed(stored) in CHUNKS
    assert sealing.open_sealed(flipped) is None
    assert sealing.open_sealed(other_kb) is None
    assert sealing.open_sealed(stored[: len(stored) // 2]) is None  # cut
    with pytest.raises(SealedKnowledgeError) as caught:
        vault._sealer.open(flipped)
    assert caught.value.reason == "damaged"
    assert vault._sealer.seal(CHUNKS[0]) != vault._sealer.seal(CHUNKS[0])  # a fresh nonce


@pytest.mark.parametrize(
    "wrap",
    [lambda t: t, lambda t: f"Intro line.\n{t}\nOutro.", lambda t: t[:60], lambda t: f"{t} {t}"],
    ids=["whole", "inside other text", "cut", "twice"],
)
def test_sealed_text_is_recognised_however_a_wrapper_placed_it(vault, wrap):
    assert sealing.is_sealed(wrap(_stored_texts(vault)[0]))


# --- episodic memory ----------------------------------------------------------------------------


def test_episodic_memory_in_a_restricted_knowledge_base_is_refused_when_built(vault):
    with pytest.raises(ConfigurationError, match="unrestricted knowledge base"):
        EpisodicMemory(knowledge_base=vault)


@pytest.mark.parametrize("how", ["restricted later", "episodes sealed, flag removed"])
def test_episodic_memory_refuses_at_each_turn_once_its_base_is_restricted(tmp_path, how):
    kb = KnowledgeBase("memory", path=tmp_path / "memory", embeddings=EMB, text_splitter=None)
    memory = EpisodicMemory(knowledge_base=kb, min_score=0)
    memory.record("My locker code is 4471 and my badge is Q-88.", user_id="u1")
    memory.flush()
    assert memory.search("locker code", user_id="u1")
    open_kb = KnowledgeBase("canteen", path=tmp_path / "open", embeddings=EMB)
    open_kb.add_documents([Document("Lunch is served until two.", metadata={"source": "c.md"})])
    injector = KnowledgeInjector(open_kb, blocks=[memory], min_score=0.0)
    config = {"configurable": {"user_id": "u1", "thread_id": "t"}}
    assert (
        "4471" in injector.prepare([("human", "what is my locker code?")], config).dynamic_context
    )
    kb.restrict()
    if how != "restricted later":
        _remove_flags(kb)
        kb._chroma.forget()
        assert not kb.restriction.restricted
    with pytest.raises(RestrictedKnowledgeError):
        memory.search("locker code", user_id="u1")
    turn = injector.prepare([("human", "what is my locker code?")], config)
    assert "4471" not in (turn.dynamic_context or "") and "Q-88" not in (turn.dynamic_context or "")
    assert {"RestrictedKnowledgeError"} <= {e.get("error") for e in turn.manifest.errors}
    memory.close()
    kb.close()
    open_kb.close()
