"""A real ``langchain_chroma.Chroma`` and real retrievers as sources, with the real embedding model.

The vector store lives on a real ``chroma run`` server (and, for one test, in a local
persistent client); the retrievers are ``Chroma.as_retriever()``, LangChain's
``BM25Retriever`` and the package's own ``KnowledgeBase.as_retriever()``. Every surface
is driven end to end; a knowledge base with a tenant shows the shared documents too.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_chroma import Chroma
from langchain_core.messages import HumanMessage
from langgraph.graph import START, MessagesState, StateGraph

from langchain_knowledge_inject import (
    ConfigurationError,
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
    create_knowledge_node,
)
from langchain_knowledge_inject._ingest.loading import split_documents
from langchain_knowledge_inject._ingest.sample_data import SAMPLE_DOCUMENTS, SAMPLE_QUESTIONS
from tests.unit_tests.fakes import RecordingChatModel

pytestmark = pytest.mark.integration

LEAVE = SAMPLE_QUESTIONS[0]
UNRELATED = "What is the capital of France?"


@pytest.fixture(scope="module")
def server_chroma(chroma_server, real_embeddings):
    store = Chroma(
        collection_name=f"user-{uuid.uuid4().hex[:8]}",
        embedding_function=real_embeddings,
        client=chroma_server.client(),
        collection_metadata={"hnsw:space": "cosine"},
    )
    store.add_documents(split_documents(SAMPLE_DOCUMENTS, file_type="markdown"))
    return store


@pytest.mark.parametrize("sample", SAMPLE_QUESTIONS, ids=lambda s: s.expected_source)
def test_a_chroma_store_answers_each_sample_question_with_relevance_scores(server_chroma, sample):
    turn = KnowledgeInjector(server_chroma, top_k=3).prepare([HumanMessage(sample.question)])
    assert sample.expected_source in turn.manifest.sources
    assert sample.answer in turn.dynamic_context
    assert all(0.0 <= s <= 1.0 for s in turn.manifest.scores) and max(turn.manifest.scores) > 0.3


async def test_min_score_applies_to_chroma_relevance_scores(server_chroma):
    injector = KnowledgeInjector(server_chroma, top_k=5)
    every = (await injector.aprepare([HumanMessage(LEAVE.question)])).manifest.scores
    floor = sorted(every)[len(every) // 2]
    kept = injector.prepare(
        [HumanMessage(LEAVE.question)], {"configurable": {"min_score": floor}}
    ).manifest.scores
    assert kept == [s for s in every if s >= floor] and len(kept) < len(every)


def _seen(surface: str, source: Any, **options: Any) -> str:
    if surface == "tool":
        return str(create_knowledge_base_search_tool(source, **options).invoke(LEAVE.question))
    model = RecordingChatModel()
    turn = {"messages": [HumanMessage(LEAVE.question)]}
    if surface == "graph":
        create_knowledge_graph(model, source, **options).invoke(turn)
    elif surface == "middleware":
        create_agent(model, middleware=[KnowledgeInjectionMiddleware(source, **options)]).invoke(
            turn
        )
    else:
        builder = StateGraph(MessagesState)
        builder.add_node("model", create_knowledge_node(model, source, **options))
        builder.add_edge(START, "model")
        assert len(builder.compile().invoke(turn)["messages"]) == 2
    (received,) = model.received
    return "\n".join(m.text for m in received)


@pytest.mark.parametrize("surface", ["graph", "middleware", "tool", "node"])
@pytest.mark.parametrize("kind", ["chroma_retriever", "kb_retriever", "mix"])
def test_real_retrievers_feed_every_surface(server_chroma, sample_kb, surface, kind):
    sources = {
        "chroma_retriever": server_chroma.as_retriever(search_kwargs={"k": 3}),
        "kb_retriever": sample_kb.as_retriever(k=3),
        "mix": [sample_kb, server_chroma.as_retriever(search_kwargs={"k": 3}), server_chroma],
    }
    seen = _seen(surface, sources[kind], top_k=4)
    assert LEAVE.answer in seen and LEAVE.expected_source in seen


def test_a_local_chroma_store_and_its_tenant_refusal(tmp_path, real_embeddings):
    store = Chroma(
        collection_name="local", embedding_function=real_embeddings,
        persist_directory=str(tmp_path / "chroma"),
    )  # fmt: skip
    store.add_documents(split_documents(SAMPLE_DOCUMENTS, file_type="markdown"))
    turn = KnowledgeInjector(store, top_k=2).prepare([HumanMessage(LEAVE.question)])
    assert turn.manifest.sources[0] == LEAVE.expected_source
    with pytest.raises(ConfigurationError, match="tenant"):
        KnowledgeInjector(store, tenant_id="acme").invoke([HumanMessage(LEAVE.question)])


async def test_restricted_traces_of_a_real_retriever_carry_no_text(server_chroma):
    from tests.unit_tests.restricted_fixtures import make_summarizer

    injector = KnowledgeInjector(
        server_chroma.as_retriever(search_kwargs={"k": 3}), restricted=True,
        summarizer_model=make_summarizer("honest"),
    )  # fmt: skip
    events = [
        e async for e in injector.astream_events([HumanMessage(LEAVE.question)], version="v2")
    ]
    ends = [e for e in events if e["event"] == "on_retriever_end"]
    assert [e["name"] for e in ends] == ["knowledge_retrieval"]
    stubs = ends[0]["data"]["output"]
    assert len(stubs) == 3 and all(d.page_content == "" for d in stubs)
    assert LEAVE.answer not in repr([e for e in events if "retriever" in e["event"]])


def test_chroma_as_retriever_scores_on_the_one_scale_and_min_score_holds(server_chroma):
    retriever = server_chroma.as_retriever()
    related = KnowledgeInjector(retriever, min_score=0.5).prepare([HumanMessage(LEAVE.question)])
    assert (
        LEAVE.answer in related.dynamic_context
        and LEAVE.expected_source in related.manifest.sources
    )
    assert "Relevance Score: 0.00" not in related.dynamic_context
    assert all(0.5 <= s <= 1.0 for s in related.manifest.scores)
    unrelated = KnowledgeInjector(retriever, min_score=0.5).prepare([HumanMessage(UNRELATED)])
    assert unrelated.dynamic_context is None and unrelated.manifest.injected is False


async def test_bm25_is_scored_on_the_one_scale_and_a_chunk_of_two_sources_shown_once(
    server_chroma, sample_kb
):
    from langchain_community.retrievers import BM25Retriever

    chunks = split_documents(SAMPLE_DOCUMENTS, file_type="markdown")  # the store's chunks
    bm25 = BM25Retriever.from_documents(chunks, k=3)
    sources = [bm25, server_chroma.as_retriever(search_kwargs={"k": 3})]
    turn = await KnowledgeInjector(sources, min_score=0.5, top_k=6).aprepare(
        [HumanMessage(LEAVE.question)]
    )
    block = turn.dynamic_context
    assert LEAVE.answer in block and "Relevance Score: 0.00" not in block
    assert all(block.count(c.page_content) <= 1 for c in chunks)  # found by both: shown once
    assert all(s >= 0.5 for s in turn.manifest.scores)
    with_kb = KnowledgeInjector([sample_kb, bm25], min_score=0.5)  # scored by the KB's model
    assert with_kb.prepare([HumanMessage(UNRELATED)]).dynamic_context is None
    assert LEAVE.answer in with_kb.prepare([HumanMessage(LEAVE.question)]).dynamic_context


def test_a_tenant_sees_its_own_and_the_shared_documents(tmp_path, real_embeddings):
    from langchain_core.documents import Document

    from langchain_knowledge_inject import KnowledgeBase

    kb = KnowledgeBase("tenants", path=tmp_path, embeddings=real_embeddings)
    try:
        kb.add_documents(split_documents(SAMPLE_DOCUMENTS, file_type="markdown"))
        kb.add_documents(
            [Document("Acme staff get 30 days of annual leave.", metadata={"source": "acme.md"})],
            tenant_id="acme",
        )
        turn = KnowledgeInjector(kb, tenant_id="acme", top_k=4).prepare(
            [HumanMessage(LEAVE.question)]
        )
        assert {"acme.md", LEAVE.expected_source} <= set(turn.manifest.sources)
        alone = KnowledgeInjector(kb, tenant_id="acme", include_shared=False).prepare(
            [HumanMessage(LEAVE.question)]
        )
        assert alone.manifest.sources == ["acme.md"]
        tool = create_knowledge_base_search_tool(kb, tenant_id="acme")
        assert LEAVE.answer in str(tool.invoke(SAMPLE_QUESTIONS[0].question))
    finally:
        kb.close()
