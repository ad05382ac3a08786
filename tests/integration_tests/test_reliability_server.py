"""The whole API against a real ``chroma run`` server, and what happens when it dies.

The knowledge base, retriever, injector, graph, tool and agent middleware all
run over ``chromadb.HttpClient`` with the real embedding model. Then the server
is killed (SIGKILL) in the middle of a conversation: by default every turn goes
on without knowledge (a warning is logged, the manifest's ``retrieval_error``
says why), a graph never crashes, and ``on_error="raise"`` raises
``RetrievalError`` instead. The server is restarted on the same path and port,
and the next turn injects again over the same client.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_knowledge_inject import (
    KnowledgeBase,
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    RetrievalError,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
)
from langchain_knowledge_inject._ingest.sample_data import SAMPLE_DOCUMENTS, SAMPLE_QUESTIONS
from langchain_knowledge_inject._turn.placement import is_injected
from tests.unit_tests.fakes import RecordingChatModel

pytestmark = pytest.mark.integration

LEAVE = SAMPLE_QUESTIONS[0]
SICK = SAMPLE_QUESTIONS[1]


def _search_call(query: str, call_id: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": "knowledge_base_search", "args": {"query": query}, "id": call_id}]
    )


@pytest.fixture(scope="module")
def server_kb(chroma_server, tmp_path_factory, real_embeddings):
    kb = KnowledgeBase(
        "hr-server",
        path=tmp_path_factory.mktemp("server-catalog"),
        client=chroma_server.client(),
        embeddings=real_embeddings,
    )
    kb.add_documents(SAMPLE_DOCUMENTS)
    yield kb
    kb.drop()
    kb.close()


@contextmanager
def server_down(server) -> Iterator[None]:
    """SIGKILL the Chroma server; restart it on the same path and port afterwards."""
    assert server.process is not None
    server.process.kill()
    server.process.wait(timeout=30)
    server.process = None
    try:
        yield
    finally:
        server.start()


def _sources(docs) -> list[str]:
    return [d.metadata["source"] for d in docs]


def test_full_api_against_a_chroma_server(server_kb, chroma_server):
    for sample in SAMPLE_QUESTIONS:
        for mode in ("dense", "hybrid"):
            assert sample.expected_source in _sources(
                server_kb.search(sample.question, k=3, mode=mode)
            )
    assert _sources(server_kb.search("doctor's note sick", k=1, mode="keyword", min_score=0.0)) == [
        SICK.expected_source
    ]
    assert LEAVE.expected_source in _sources(server_kb.as_retriever(k=3).invoke(LEAVE.question))

    turn = KnowledgeInjector(server_kb).prepare([HumanMessage(LEAVE.question)])
    assert turn.manifest.injected and LEAVE.expected_source in turn.manifest.sources

    model = RecordingChatModel()
    graph = create_knowledge_graph(
        model, server_kb, checkpointer=InMemorySaver(), keep_manifest=True
    )
    state = graph.invoke(
        {"messages": [HumanMessage(SICK.question)]}, {"configurable": {"thread_id": "api"}}
    )
    assert SICK.expected_source in state["knowledge_manifest"]["sources"]
    assert any(is_injected(m) for m in model.received[-1])

    tool = create_knowledge_base_search_tool(server_kb, top_k=3)
    message = tool.invoke(
        {"type": "tool_call", "name": tool.name, "args": {"query": LEAVE.question}, "id": "1"}
    )
    assert LEAVE.expected_source in _sources(message.artifact)

    agent_model = RecordingChatModel(
        script=[_search_call("carry over leave", "c1"), AIMessage("done")]
    )
    agent = create_agent(
        agent_model,
        tools=[],
        middleware=[KnowledgeInjectionMiddleware(server_kb, search_tool=True, keep_manifest=True)],
        checkpointer=InMemorySaver(),
    )
    result = agent.invoke(
        {"messages": [HumanMessage(LEAVE.question)]}, {"configurable": {"thread_id": "a"}}
    )
    assert LEAVE.expected_source in result["knowledge_manifest"]["sources"]
    assert (
        isinstance(result["messages"][2], ToolMessage) and result["messages"][-1].content == "done"
    )

    # a second client (another process would do the same) sees the same collection
    reopened = KnowledgeBase("hr-server", path=server_kb.path, client=chroma_server.client(),
                             embeddings=server_kb.embeddings, create=False)  # fmt: skip
    assert _sources(reopened.search(LEAVE.question, k=1)) == _sources(
        server_kb.search(LEAVE.question, k=1)
    )
    assert reopened.check().clean
    reopened.close()


async def test_server_killed_mid_conversation_degrades_then_recovers(
    server_kb, chroma_server, caplog
):
    caplog.set_level(logging.WARNING, logger="langchain_knowledge_inject")
    graph_model = RecordingChatModel()
    graph = create_knowledge_graph(
        graph_model, server_kb, checkpointer=InMemorySaver(), keep_manifest=True
    )
    tool = create_knowledge_base_search_tool(server_kb)
    tools_model = RecordingChatModel()
    graph_with_tools = create_knowledge_graph(tools_model, server_kb, tools=[tool])
    agent_model = RecordingChatModel()
    agent = create_agent(
        agent_model,
        tools=[],
        middleware=[KnowledgeInjectionMiddleware(server_kb, search_tool=True, keep_manifest=True)],
        checkpointer=InMemorySaver(),
    )
    injector = KnowledgeInjector(server_kb)
    thread = {"configurable": {"thread_id": "outage"}}

    # turn 1: the server is up
    state = graph.invoke({"messages": [HumanMessage(LEAVE.question)]}, thread)
    manifest = state["knowledge_manifest"]
    assert manifest["injected"] and manifest["retrieval_error"] is None
    assert agent.invoke({"messages": [HumanMessage(LEAVE.question)]}, thread)["knowledge_manifest"][
        "injected"
    ]

    with server_down(chroma_server):
        caplog.clear()
        # turn 2: no knowledge, but an answer; the manifest says why
        state = graph.invoke({"messages": [HumanMessage(SICK.question)]}, thread)
        assert state["messages"][-1].content == "ok"
        assert state["dynamic_context"] is None
        assert state["knowledge_manifest"]["retrieval_error"]
        assert state["knowledge_manifest"]["injected"] is False
        assert not any(is_injected(m) for m in graph_model.received[-1])
        assert [m.type for m in state["messages"]] == ["human", "ai", "human", "ai"]
        assert "'hr-server' failed" in caplog.text

        state = await graph.ainvoke({"messages": [HumanMessage("And part-time staff?")]}, thread)
        assert state["messages"][-1].content == "ok"
        assert state["knowledge_manifest"]["retrieval_error"]

        result = agent.invoke({"messages": [HumanMessage(SICK.question)]}, thread)
        assert result["messages"][-1].content == "ok"
        assert result["knowledge_manifest"]["retrieval_error"]
        assert not any(is_injected(m) for m in agent_model.received[-1])

        turn = injector.prepare([HumanMessage(SICK.question)])
        assert [m.type for m in turn.messages] == ["system", "human"]  # the knowledge prompt
        assert turn.messages[-1] == HumanMessage(SICK.question)
        assert not any(is_injected(m) for m in turn.messages)
        assert turn.manifest.retrieval_error and "RetrievalError" in turn.manifest.retrieval_error

        # the model calls the search tool during the outage: the graph still answers
        tools_model.script = [_search_call("sick note", "t1"), AIMessage("sorry, search is down")]
        state = graph_with_tools.invoke({"messages": [HumanMessage(SICK.question)]})
        tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
        assert tool_message.status == "error" or "could not" in str(tool_message.content).lower()
        assert state["messages"][-1].content == "sorry, search is down"

        # on_error="raise": the caller asked to see the failure
        with pytest.raises(RetrievalError):
            KnowledgeInjector(server_kb, on_error="raise").invoke([HumanMessage(SICK.question)])
        strict_graph = create_knowledge_graph(RecordingChatModel(), server_kb, on_error="raise")
        with pytest.raises(RetrievalError):
            await strict_graph.ainvoke({"messages": [HumanMessage(SICK.question)]})
        strict_agent = create_agent(
            RecordingChatModel(),
            tools=[],
            middleware=[KnowledgeInjectionMiddleware(server_kb, on_error="raise")],
        )
        with pytest.raises(RetrievalError):
            strict_agent.invoke({"messages": [HumanMessage(SICK.question)]})

    # the server is back (same path, same port): the next turn injects again, same client
    state = graph.invoke({"messages": [HumanMessage(SICK.question)]}, thread)
    assert state["knowledge_manifest"]["retrieval_error"] is None
    assert SICK.expected_source in state["knowledge_manifest"]["sources"]
    assert any(is_injected(m) for m in graph_model.received[-1])
    stored = graph.get_state(thread).values["messages"]
    assert len(stored) == 8 and not any(is_injected(m) for m in stored)
    result = agent.invoke({"messages": [HumanMessage(LEAVE.question)]}, thread)
    assert (
        result["knowledge_manifest"]["injected"]
        and not result["knowledge_manifest"]["retrieval_error"]
    )
    assert injector.prepare([HumanMessage(LEAVE.question)]).manifest.injected
    message = tool.invoke(
        {"type": "tool_call", "name": tool.name, "args": {"query": SICK.question}, "id": "2"}
    )
    assert SICK.expected_source in _sources(message.artifact)
    assert server_kb.check().clean  # nothing was lost while the server was down


async def test_every_public_call_raises_a_package_error_when_the_server_is_stopped(
    server_kb, chroma_server, tmp_path
):
    """A stopped server is the package's error, its cause kept: never a raw ``httpx`` one."""
    import httpx
    from langchain_core.documents import Document

    from langchain_knowledge_inject.errors import KnowledgeInjectError, StoreError

    doc = Document("Interns get 10 days of leave.", metadata={"source": "interns.md"})
    calls = {
        "search": lambda: server_kb.search(LEAVE.question),
        "search keyword": lambda: server_kb.search(LEAVE.question, mode="keyword"),
        "search_hits": lambda: server_kb.search_hits(LEAVE.question),
        "add_documents": lambda: server_kb.add_documents([doc]),
        "upsert_records": lambda: server_kb.upsert_records([("x", "text", {"source": "x"})]),
        "delete": lambda: server_kb.delete(["x"]),
        "delete_source": lambda: server_kb.delete_source("interns.md"),
        "count": server_kb.count,
        "info": lambda: server_kb.info,
        "check": server_kb.check,
        "restriction": lambda: server_kb.restriction,
        "restrict": server_kb.restrict,
        "get_by_ids": lambda: server_kb.get_by_ids(["x"]),
        "get_source_fingerprint": lambda: server_kb.get_source_fingerprint("interns.md"),
        "warm": server_kb.warm,
        "list": lambda: KnowledgeBase.list(tmp_path, client=server_kb._chroma.client),
    }
    with server_down(chroma_server):
        for name, call in calls.items():
            with pytest.raises(KnowledgeInjectError) as info:
                call()
            chain, cause = [], info.value
            while cause is not None:
                chain.append(cause)
                cause = cause.__cause__
            assert any(isinstance(e, httpx.TransportError) for e in chain), (
                name
            )  # kept for the owner
            assert any(isinstance(e, StoreError) and e.reason == "unreachable" for e in chain), name
        with pytest.raises(KnowledgeInjectError):
            await server_kb.asearch(LEAVE.question)
        with pytest.raises(KnowledgeInjectError):
            await server_kb.aadd_documents([doc])
    assert server_kb.count() == len(server_kb.vectorstore().get()["ids"])  # back, nothing written
    assert server_kb.check().clean
