"""Any LangChain retrieval as a source, and retrieval as a retriever run in traces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_knowledge_inject import (
    ConfigurationError,
    KnowledgeBase,
    KnowledgeInjector,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
)
from langchain_knowledge_inject._turn.retrieval import (
    ChromaSource,
    RetrieverSource,
    SearchSpec,
    VectorStoreSource,
    as_sources,
    merge_results,
)
from tests.unit_tests.fakes import CallbackRecorder, WordHashEmbedding
from tests.unit_tests.restricted_fixtures import make_summarizer

TEXTS = {
    "leave.md": "Employees receive 25 days of annual leave per calendar year.",
    "sick.md": "Sick leave requires a doctor's note after three consecutive days.",
    "expenses.md": "Expenses above 50 euros need a receipt and manager approval.",
}
DOCS = [
    Document(text, metadata={"source": source, "category": source.split(".")[0]})
    for source, text in TEXTS.items()
]


class ScoredStore(InMemoryVectorStore):
    """An in-memory store that offers relevance scores (cosine similarity mapped to [0, 1])."""

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda similarity: (similarity + 1) / 2


class UnscoredStore(InMemoryVectorStore):
    """A store that gives no scores at all (no relevance function, unknown score meaning)."""

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        raise NotImplementedError


class OddScoredStore(InMemoryVectorStore):
    """Relevance scores outside [0, 1]: LangChain warns, with the documents' text."""

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda similarity: similarity * 5


def _store(cls: type[InMemoryVectorStore] = InMemoryVectorStore) -> InMemoryVectorStore:
    store = cls(DeterministicFakeEmbedding(size=32))
    store.add_documents([d.model_copy() for d in DOCS])
    return store


class ListRetriever(BaseRetriever):
    """A retriever returning fixed documents (some with a score), in order."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return [d.model_copy() for d in self.docs]


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    base = KnowledgeBase("hr", path=tmp_path_factory.mktemp("src"), embeddings=WordHashEmbedding())
    base.add_documents([d.model_copy() for d in DOCS])
    yield base
    base.close()


# --- accepting sources ---


def test_every_kind_and_a_mix_is_accepted(kb):
    from langchain_chroma import Chroma

    store, retriever = _store(), ListRetriever(docs=DOCS)
    assert as_sources(kb)[0].kb is kb
    assert isinstance(as_sources(store)[0], VectorStoreSource)
    assert isinstance(as_sources(retriever)[0], RetrieverSource)
    assert isinstance(as_sources(Chroma("chroma-x", WordHashEmbedding()))[0], ChromaSource)
    over_store = as_sources(store.as_retriever())[0]  # searched through its store's scores
    assert isinstance(over_store, VectorStoreSource) and over_store.store is store
    kinds = [type(s).__name__ for s in as_sources([kb, store, retriever])]
    assert kinds == ["KnowledgeBaseSource", "VectorStoreSource", "RetrieverSource"]


@pytest.mark.parametrize("bad", [object(), [], ["text"], "a string", None])
def test_anything_else_is_a_clear_error(bad):
    with pytest.raises(ConfigurationError) as info:
        KnowledgeInjector(bad)
    assert info.value.option == "knowledge_base"
    assert "BaseRetriever" in str(info.value) and "VectorStore" in str(info.value)


# --- vector stores ---


def test_a_store_without_scores_is_searched_and_says_once_that_min_score_cannot_apply(caplog):
    source = VectorStoreSource(_store(UnscoredStore))
    with caplog.at_level("WARNING"):
        docs = source.search("annual leave", SearchSpec(k=2, min_score=0.99))
        source.search("annual leave", SearchSpec(k=2, min_score=0.99))
    assert len(docs) == 2 and all("score" not in d.metadata for d in docs)
    assert all(d.id and d.metadata["chunk_id"] == d.id for d in docs)
    assert {d.metadata["kb_name"] for d in docs} == {"UnscoredStore"}
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "min_score=0.99 is not applied to 'UnscoredStore'" in warned[0]
    assert not any(text in warned[0] for text in TEXTS.values())


async def test_an_in_memory_store_is_scored_by_its_cosine_and_min_score_applies():
    source = VectorStoreSource(InMemoryVectorStore(WordHashEmbedding()))
    source.store.add_documents([d.model_copy() for d in DOCS])
    every = source.search("annual leave days", SearchSpec(k=3))
    scores = [d.metadata["score"] for d in every]
    assert len(every) == 3 and scores == sorted(scores, reverse=True) and scores[0] > 0.2
    assert every[0].metadata["source"] == "leave.md"
    kept = source.search("annual leave days", SearchSpec(k=3, min_score=scores[1]))
    assert [d.metadata["score"] for d in kept] == scores[:2]
    assert [d.id for d in await source.asearch("annual leave days", SearchSpec(k=3))] == [
        d.id for d in every
    ]


async def test_a_store_with_relevance_scores_applies_min_score():
    source = VectorStoreSource(_store(ScoredStore))
    every = source.search("annual leave", SearchSpec(k=3))
    scores = [d.metadata["score"] for d in every]
    assert len(every) == 3 and all(0.0 <= s <= 1.0 for s in scores)
    floor = sorted(scores)[1]
    kept = source.search("annual leave", SearchSpec(k=3, min_score=floor))
    assert [d.metadata["score"] for d in kept] == [s for s in scores if s >= floor]
    assert [d.id for d in await source.asearch("annual leave", SearchSpec(k=3))] == [
        d.id for d in every
    ]


@pytest.mark.parametrize("space", [None, "l2", "ip", "cosine"])
def test_a_chroma_store_of_any_distance_is_scored_by_cosine(space, recwarn):
    from langchain_chroma import Chroma

    configuration = {"hnsw": {"space": space}} if space else None
    store = Chroma(f"chroma-{space}", WordHashEmbedding(), collection_configuration=configuration)
    store.add_documents([d.model_copy() for d in DOCS])
    source = as_sources(store)[0]
    docs = source.search("annual leave days", SearchSpec(k=3))
    assert docs[0].metadata["source"] == "leave.md" and docs[0].metadata["score"] > 0.2
    assert docs[-1].metadata["score"] < docs[0].metadata["score"]
    off = source.search("parking garage opening hours", SearchSpec(k=3, min_score=0.3))
    assert off == []  # unrelated: low cosine, dropped (never 0.00 for everything)
    injected = KnowledgeInjector(store, min_score=0.3).prepare([HumanMessage("annual leave days?")])
    assert (
        injected.manifest.sources[0] == "leave.md"
        and "expenses.md" not in injected.manifest.sources
    )
    assert not recwarn.list  # no warning, so none with the documents' text


def test_odd_relevance_scores_warn_nothing(recwarn):
    for restricted in (True, False):
        injector = KnowledgeInjector(
            _store(OddScoredStore),
            restricted=restricted,
            summarizer_model=make_summarizer("honest"),
        )
        turn = injector.prepare([HumanMessage("annual leave?")])
        assert turn.manifest.chunk_ids and all(0.0 <= s <= 1.0 for s in turn.manifest.scores)
    assert not recwarn.list


def test_a_filter_is_applied_to_the_metadata_of_foreign_results():
    for source in (VectorStoreSource(_store()), RetrieverSource(_store().as_retriever())):
        docs = source.search("x", SearchSpec(k=3, filter={"category": "sick"}))
        assert [d.metadata["source"] for d in docs] == ["sick.md"]


@pytest.mark.parametrize("make", [lambda: _store(), lambda: _store().as_retriever()])
def test_a_source_without_tenants_refuses_a_tenant(make):
    injector = KnowledgeInjector(make(), tenant_id="acme")  # on_error="degrade" still raises
    with pytest.raises(ConfigurationError) as info:
        injector.invoke([HumanMessage("leave?")])
    assert info.value.option == "tenant_id"
    injector = KnowledgeInjector(make())
    with pytest.raises(ConfigurationError):
        injector.invoke([HumanMessage("leave?")], {"configurable": {"tenant_id": "acme"}})


# --- retrievers ---


def test_a_retriever_is_cut_to_top_k_and_min_score_applies_where_scored():
    docs = [
        Document("a", id="a", metadata={"score": 0.9}),
        Document("b", id="b", metadata={"score": 0.1}),
        Document("c", id="c"),
    ]
    source = RetrieverSource(ListRetriever(docs=docs))
    assert [d.id for d in source.search("q", SearchSpec(k=2))] == ["a", "b"]
    assert [d.id for d in source.search("q", SearchSpec(k=3, min_score=0.5))] == ["a", "c"]
    relevance = [Document("r", id="r", metadata={"relevance_score": 0.7})]  # a reranker's key
    assert (
        RetrieverSource(ListRetriever(docs=relevance))
        .search("q", SearchSpec(k=1))[0]
        .metadata["score"]
        == 0.7
    )


# --- several sources ---


def test_results_merge_by_score_else_rank_by_rank_without_repeats():
    a = [
        Document("1", id="a1", metadata={"score": 0.5}),
        Document("2", id="a2", metadata={"score": 0.4}),
    ]
    b = [
        Document("3", id="b1", metadata={"score": 0.9}),
        Document("1", id="a1", metadata={"score": 0.5}),
    ]
    assert [d.id for d in merge_results([a, b], 3)] == ["b1", "a1", "a2"]
    unscored = [Document("4", id="u1"), Document("5", id="u2")]
    assert [d.id for d in merge_results([a, unscored], 4)] == ["a1", "u1", "a2", "u2"]


def test_a_mix_of_sources_feeds_one_injection(kb):
    store = _store()
    retriever = ListRetriever(docs=[Document("Parking is free on weekends.", id="p1")])
    turn = KnowledgeInjector([kb, store, retriever], top_k=6, min_score=0.0).prepare(
        [HumanMessage("annual leave days?")]
    )
    assert "Parking is free on weekends." in turn.dynamic_context
    assert "25 days of annual leave" in turn.dynamic_context
    assert len(turn.manifest.chunk_ids) == len(set(turn.manifest.chunk_ids))


def test_the_tool_searches_a_vector_store_and_a_retriever():
    store = _store()  # the same chunk found through both is returned once
    tool = create_knowledge_base_search_tool([store, store.as_retriever()], top_k=3)
    message = tool.invoke(
        {
            "name": tool.name,
            "args": {"query": "leave", "category": "leave"},
            "id": "1",
            "type": "tool_call",
        }
    )
    assert [d.metadata["source"] for d in message.artifact] == ["leave.md"]
    assert "25 days of annual leave" in message.content


# --- traces ---


async def test_retrieval_is_a_retriever_run_with_its_documents(kb):
    mmr = _store().as_retriever(search_type="mmr")  # a retriever that runs itself
    injector = KnowledgeInjector([kb, mmr], top_k=3, min_score=0.0)
    events = [
        e async for e in injector.astream_events([HumanMessage("annual leave?")], version="v2")
    ]
    names = [(e["event"], e["name"]) for e in events if "retriever" in e["event"]]
    assert ("on_retriever_start", "knowledge_retrieval") in names
    assert ("on_retriever_start", "VectorStoreRetriever") in names  # the wrapped one, nested
    ends = [
        e for e in events if e["event"] == "on_retriever_end" and e["name"] == "knowledge_retrieval"
    ]
    assert len(ends) == 2
    texts = [d.page_content for e in ends for d in e["data"]["output"]]
    assert TEXTS["leave.md"] in texts
    handler = CallbackRecorder()
    injector.invoke([HumanMessage("annual leave?")], {"callbacks": [handler]})
    assert handler.retriever_queries[0] == "annual leave?" and any(handler.retriever_results)


@pytest.mark.parametrize("surface", ["injector", "graph", "tool"])
async def test_restricted_retriever_runs_carry_ids_and_scores_never_text(kb, surface):
    sources = [kb, _store().as_retriever(), _store()]
    summarizer = make_summarizer("honest")
    options: dict[str, Any] = {"top_k": 6, "min_score": 0.0, "restricted": True}
    if surface == "injector":
        runnable: Any = KnowledgeInjector(sources, summarizer_model=summarizer, **options)
        arg: Any = [HumanMessage("annual leave?")]
    elif surface == "graph":
        model = GenericFakeChatModel(messages=iter([AIMessage("ok")]))
        runnable = create_knowledge_graph(model, sources, summarizer_model=summarizer, **options)
        arg = {"messages": [HumanMessage("annual leave?")]}
    else:
        runnable = create_knowledge_base_search_tool(
            sources, summarizer_model=summarizer, **options
        )
        arg = {"query": "annual leave?"}
    events = [e async for e in runnable.astream_events(arg, version="v2")]
    ends = [e for e in events if e["event"] == "on_retriever_end"]
    assert ends and {e["name"] for e in ends} == {"knowledge_retrieval"}  # nothing nested
    stubs = [d for e in ends for d in e["data"]["output"]]
    assert stubs and all(d.page_content == "" for d in stubs)
    assert all(
        set(d.metadata) <= {"chunk_id", "score", "redacted"} and d.metadata["chunk_id"]
        for d in stubs
    )
    retriever_events = repr([e for e in events if "retriever" in e["event"]])
    for text in TEXTS.values():
        assert text not in retriever_events
