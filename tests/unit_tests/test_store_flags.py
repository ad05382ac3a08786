"""Restriction travels with the data: flags in Chroma's collection metadata, raw reads refused."""

from __future__ import annotations

import ast
import asyncio
import logging
import threading
from pathlib import Path

import chromadb
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import ConfigurationError, KnowledgeBase
from langchain_knowledge_inject._store import chroma as chroma_module
from langchain_knowledge_inject._store.flags import RestrictionFlags, raw_access, read_flags
from langchain_knowledge_inject.errors import RestrictedKnowledgeError, RetrievalError

STORE = Path(__file__).resolve().parents[2] / "langchain_knowledge_inject" / "_store"
SECRET = "The merger code is amber-walrus-pilot."
DOCS = [
    Document(SECRET, metadata={"source": "deal.md"}),
    Document("Staff get 25 days of annual leave.", metadata={"source": "leave.md"}),
]


@pytest.fixture
def emb() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=16)


def _restricted(tmp_path, emb, **given) -> KnowledgeBase:
    flags = RestrictionFlags(restricted=True, **given)
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb, restricted=flags)
    kb.add_documents(DOCS)
    kb.add_documents(DOCS[:1], tenant_id="acme")
    return kb


def test_flags_live_in_every_partition_collection(tmp_path, emb):
    kb = _restricted(tmp_path, emb, sensitive_sources=True, routing_keywords=["merger"])
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    collections = [c for c in client.list_collections() if c.name.startswith(f"kinject-{kb.id}-")]
    assert len(collections) == 2  # the shared partition and tenant acme
    for collection in collections:
        flags = read_flags(collection.metadata)
        assert flags == RestrictionFlags(True, True, "", ("merger",))
    assert kb.restriction == RestrictionFlags(True, True, "", ("merger",))


def test_a_plain_langchain_chroma_on_the_collection_sees_the_flag(tmp_path, emb):
    from langchain_chroma import Chroma

    kb = _restricted(tmp_path, emb)
    kb.close()
    name, folder = f"kinject-{kb.id}-shared", str(tmp_path / "chroma")
    plain = Chroma(name, embedding_function=emb, persist_directory=folder)
    assert read_flags(plain._collection.metadata).restricted is True
    assert read_flags({}).restricted is False  # a collection of another package
    assert read_flags({"kinject:restricted": "no"}).restricted is True  # unreadable: on


def test_the_constructor_never_turns_restriction_off(tmp_path, emb):
    _restricted(tmp_path, emb, sensitive_sources=True).close()
    for given in (False, RestrictionFlags(), RestrictionFlags(restricted=True)):
        with pytest.raises(ConfigurationError, match=r"kb\.unrestrict\(\)"):
            KnowledgeBase("deal", path=tmp_path, embeddings=emb, restricted=given)
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb)
    assert kb.restriction.restricted and kb.restriction.sensitive_sources


def test_restricted_true_keeps_the_stored_flags_and_a_record_stores_all_four(tmp_path, emb):
    _restricted(tmp_path, emb, sensitive_sources=True, routing_hint="Deals.").close()
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb, restricted=True)
    assert kb.restriction == RestrictionFlags(True, True, "Deals.", ())
    kb.close()
    record = RestrictionFlags(True, True, "Mergers only.", ["merger", "price"])
    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb, restricted=record)
    assert kb.restriction == RestrictionFlags(True, True, "Mergers only.", ("merger", "price"))
    assert kb.info.routing_keywords == ["merger", "price"]


@pytest.mark.parametrize("given", ["yes", 1, {"restricted": True}])
def test_restricted_must_be_a_bool_none_or_the_flags(tmp_path, emb, given):
    with pytest.raises(ConfigurationError, match=r"True, False, None or RestrictionFlags") as err:
        KnowledgeBase("deal", path=tmp_path, embeddings=emb, restricted=given)
    assert err.value.option == "restricted"


@pytest.mark.parametrize(
    "given",
    [RestrictionFlags(sensitive_sources=True), RestrictionFlags(routing_keywords=["merger"])],
)
def test_flags_of_restricted_mode_given_with_it_off_are_refused(tmp_path, emb, given):
    with pytest.raises(ConfigurationError, match="with it off: add True") as err:
        KnowledgeBase("deal", path=tmp_path, embeddings=emb, restricted=given)
    assert err.value.option == "restricted"
    assert KnowledgeBase.list(path=tmp_path) == []  # nothing was created


@pytest.mark.parametrize(
    ("fields", "option"),
    [
        ({"restricted": "yes"}, "restricted"),
        ({"sensitive_sources": 1}, "sensitive_sources"),
        ({"routing_hint": None}, "routing_hint"),
        ({"routing_keywords": "merger"}, "routing_keywords"),
        ({"routing_keywords": ["merger", 7]}, "routing_keywords"),
    ],
)
def test_restriction_flags_check_their_fields(fields, option):
    with pytest.raises(ConfigurationError, match="routing_keywords a list of strings") as err:
        RestrictionFlags(**fields)
    assert err.value.option == option


def test_unrestrict_is_one_logged_call_and_restrict_turns_it_back_on(tmp_path, emb, caplog):
    kb = _restricted(tmp_path, emb, sensitive_sources=True)
    with caplog.at_level(logging.WARNING):
        kb.unrestrict()
    assert "turned off by kb.unrestrict()" in caplog.text
    assert kb.restriction == RestrictionFlags(False, False)
    client = kb._chroma.client
    assert not any(read_flags(c.metadata).restricted for c in client.list_collections())
    kb.restrict(sensitive_sources=True)
    assert kb.restriction == RestrictionFlags(True, True)
    assert all(read_flags(c.metadata).restricted for c in client.list_collections())


def test_a_tenant_partition_created_later_copies_the_flag(tmp_path, emb):
    kb = _restricted(tmp_path, emb)
    kb.add_documents(DOCS[1:], tenant_id="globex")
    collection = kb._chroma.collection("globex")
    assert read_flags(collection.metadata).restricted is True


def test_another_objects_restrict_is_seen_on_the_next_read(tmp_path, emb):
    client = chromadb.EphemeralClient()
    reader = KnowledgeBase("flags", path=tmp_path / "a", client=client, embeddings=emb)
    writer = KnowledgeBase("flags", path=tmp_path / "b", client=client, embeddings=emb)
    for _ in range(3):
        assert reader.restriction.restricted is False
    writer.restrict()
    assert reader.restriction.restricted is True  # no cache: not a second later


def test_unreadable_flags_raise_naming_the_cause(tmp_path, emb, monkeypatch):
    kb = KnowledgeBase("flags", path=tmp_path, embeddings=emb)

    def down(partition):
        raise ConnectionError("Could not connect to a Chroma server")

    monkeypatch.setattr(kb._chroma, "_get", down)
    monkeypatch.setattr(chroma_module, "SETTINGS_TTL", 0.0)
    with pytest.raises(RetrievalError, match=r"ConnectionError.*treat it as restricted"):
        _ = kb.restriction
    with pytest.raises(RetrievalError, match="ConnectionError"):
        asyncio.run(kb.arestriction())


async def test_the_flag_read_of_the_async_path_leaves_the_event_loop(tmp_path, emb, monkeypatch):
    kb = KnowledgeBase("flags", path=tmp_path, embeddings=emb)
    kb.add_documents(DOCS)  # sync, on this thread (a write reads whether to seal)
    loop_thread = threading.get_ident()
    threads: list[int] = []
    real = kb._chroma.settings
    monkeypatch.setattr(
        kb._chroma, "settings", lambda **kw: threads.append(threading.get_ident()) or real(**kw)
    )
    assert (await kb.arestriction()).restricted is False
    assert await kb.asearch("annual leave", min_score=0.0)
    await kb.ainfo()
    assert threads and loop_thread not in threads


def test_as_retriever_of_a_restricted_base_refuses_raw_text(tmp_path, emb):
    kb = _restricted(tmp_path, emb)
    retriever = kb.as_retriever(k=2)
    with pytest.raises(RestrictedKnowledgeError, match="restricted") as caught:
        retriever.invoke("merger code")
    assert "amber" not in str(caught.value)
    with pytest.raises(RestrictedKnowledgeError):
        asyncio.run(retriever.ainvoke("merger code"))
    with raw_access():  # what the package's pipeline does while it summarizes
        assert retriever.invoke("merger code")[0].page_content == SECRET
    assert kb.search("merger code", k=1, min_score=0.0)  # the owner's API returns raw text


def test_every_read_of_the_vectorstore_of_a_restricted_base_is_refused(tmp_path, emb):
    kb = _restricted(tmp_path, emb)
    store = kb.vectorstore()
    reads = [
        lambda: store.similarity_search("merger", k=1),
        lambda: store.similarity_search_with_score("merger", k=1),
        lambda: store.similarity_search_with_relevance_scores("merger", k=1),
        lambda: store.max_marginal_relevance_search("merger", k=1, fetch_k=2),
        lambda: store.get(),
        lambda: store.get_by_ids([kb.search("merger", k=1, min_score=0.0)[0].id]),
        lambda: store.as_retriever().invoke("merger"),
        lambda: asyncio.run(store.asimilarity_search("merger", k=1)),
        lambda: store._collection.peek(),
    ]
    for read in reads:
        with pytest.raises(RestrictedKnowledgeError):
            read()
    with raw_access():
        assert store.similarity_search(SECRET, k=1)[0].page_content == SECRET
        assert "kinject_written" not in store.get()["metadatas"][0]
    kb.unrestrict()
    assert store.similarity_search(SECRET, k=1)[0].page_content == SECRET  # not restricted now


def test_from_chroma_on_a_restricted_collection_gives_a_restricted_base(tmp_path, emb):
    kb = _restricted(tmp_path, emb, sensitive_sources=True, routing_hint="Deals.")
    kb.close()
    adopted = KnowledgeBase.from_chroma(
        f"kinject-{kb.id}-shared",
        name="copy",
        persist_directory=tmp_path / "chroma",
        embeddings=emb,
        path=tmp_path / "other",
    )
    assert adopted.restriction == RestrictionFlags(True, True, "Deals.", ())
    for given in (False, RestrictionFlags(restricted=True)):
        with pytest.raises(ConfigurationError, match="unrestrict"):
            KnowledgeBase.from_chroma(
                f"kinject-{kb.id}-shared", name="copy2", persist_directory=tmp_path / "chroma",
                embeddings=emb, path=tmp_path / "third", restricted=given,
            )  # fmt: skip


def test_from_chroma_on_a_collection_with_any_flag_adopts_it_restricted(tmp_path, emb):
    from langchain_chroma import Chroma

    metadata = {"kinject:sensitive_sources": True, "kinject:routing_hint": "Deals."}
    store = Chroma("deals", embedding_function=emb, persist_directory=str(tmp_path / "lc"),
                   collection_metadata=metadata)  # fmt: skip
    store.add_documents(DOCS)
    with pytest.raises(ConfigurationError, match=r"is sensitive_sources: kb\.unrestrict\(\)"):
        KnowledgeBase.from_chroma("deals", persist_directory=tmp_path / "lc", embeddings=emb,
                                  path=tmp_path / "refused", restricted=False)  # fmt: skip
    adopted = KnowledgeBase.from_chroma(
        "deals", persist_directory=tmp_path / "lc", embeddings=emb, path=tmp_path / "kb"
    )
    assert adopted.restriction == RestrictionFlags(True, True, "Deals.", ())
    with pytest.raises(RestrictedKnowledgeError):
        adopted.as_retriever().invoke("merger code")


# -- layering ---------------------------------------------------------------------------


def _runtime_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    return {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and id(node) not in skip
    }


def test_no_store_helper_imports_the_knowledge_base_module():
    helpers = [p for p in STORE.glob("*.py") if p.stem not in ("knowledge_base", "__init__")]
    assert len(helpers) > 10
    importing = [
        p.name
        for p in helpers
        if "langchain_knowledge_inject._store.knowledge_base" in _runtime_imports(p)
    ]
    assert importing == []


def test_no_store_helper_reaches_into_a_knowledge_base():
    """Helpers get named parts; none touches ``kb._...`` of a KnowledgeBase."""
    offenders = []
    for path in STORE.glob("*.py"):
        if path.stem == "knowledge_base":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in ("kb", "knowledge_base", "base")
            ):
                offenders.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    assert offenders == []


def test_importing_the_store_loads_no_heavy_library():
    import subprocess
    import sys

    code = (
        "import sys, langchain_knowledge_inject._store.knowledge_base as m\n"
        "print(sorted(n for n in ('chromadb', 'torch', 'sentence_transformers', 'tantivy')"
        " if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr[-2000:]


@pytest.mark.parametrize("include_shared", [True, False])
def test_a_restricted_shared_partition_makes_a_tenants_turn_restricted(
    tmp_path, emb, include_shared
):
    """``restrict()`` writes the shared partition first: its flag alone restricts every turn."""
    from langchain_core.messages import HumanMessage

    from langchain_knowledge_inject import KnowledgeInjector
    from langchain_knowledge_inject._store.flags import merged_metadata
    from langchain_knowledge_inject._store.storage import collection_name

    kb = KnowledgeBase("deal", path=tmp_path, embeddings=emb)
    kb.add_documents(DOCS)
    kb.add_documents(DOCS[:1], tenant_id="acme")
    injector = KnowledgeInjector(kb, tenant_id="acme", include_shared=include_shared, min_score=0.0)
    assert injector.prepare([HumanMessage("merger code?")]).manifest.restricted is False
    client = kb._chroma.client
    shared = client.get_collection(collection_name(kb.id, ""))  # as restrict() begins
    shared.modify(metadata=merged_metadata(shared.metadata, {"restricted": True}))
    own = client.get_collection(collection_name(kb.id, "acme"))
    assert read_flags(own.metadata) == RestrictionFlags()  # the tenant's partition: not yet
    turn = injector.prepare([HumanMessage("merger code?")])
    assert turn.manifest.restricted is True and SECRET not in (turn.dynamic_context or "")
    assert turn.documents == [] and all(d.page_content == "" for d in turn.retrieved)
