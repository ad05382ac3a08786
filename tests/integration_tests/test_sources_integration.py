"""A real ``langchain_chroma.Chroma`` and real retrievers as sources, with the real embedding model.

The vector store lives on a real ``chroma run`` server (and, for one test, in a local
persistent client); the retrievers are ``Chroma.as_retriever()`` and the package's
own ``KnowledgeBase.as_retriever()``. Every surface is driven end to end.
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
