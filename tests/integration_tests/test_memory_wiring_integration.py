"""The memory blocks in the graph and the agent, with the real embedding model.

Sample knowledge base, all-MiniLM-L6-v2, persistent stores (Chroma on disk for
the episodes, SQLite for checkpoints and facts): a fact planted in one session is
recalled in a later one from a paraphrased question, after a restart.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore

from langchain_knowledge_inject import (
    EpisodicMemory,
    KnowledgeInjectionMiddleware,
    ProcedureLibrary,
    UserFacts,
    create_knowledge_graph,
)
from langchain_knowledge_inject._memory.procedures import Procedure
from langchain_knowledge_inject._turn.placement import is_injected
from tests.unit_tests.fakes import NumberedChatModel, injected_text

pytestmark = pytest.mark.integration

HEADERS = ["[Procedure]", "[Retrieved Knowledge]", "[Past Conversation Snippets]", "[User Facts]"]
LEAVE = Procedure(
    "Request leave", "How to request paid annual leave or a holiday",
    ["Open PeoplePortal", "Choose Leave > New request", "Submit for approval"],
)  # fmt: skip
EXPENSES = Procedure(
    "File an expense claim", "How to get a business expense reimbursed",
    ["Photograph the receipt", "Create a claim", "Submit before month end"],
)  # fmt: skip


def _injected(messages: list[BaseMessage]) -> str:
    [message] = [m for m in messages if is_injected(m)]
    return injected_text([message]) or ""


def _sqlite(path) -> sqlite3.Connection:
    return sqlite3.connect(path, check_same_thread=False, isolation_level=None)


def test_graph_recalls_a_planted_fact_in_a_later_session_after_a_restart(
    tmp_path, sample_kb, real_embeddings
) -> None:
    def build(model):
        store = SqliteStore(_sqlite(tmp_path / "facts.sqlite"))
        store.setup()
        memory = EpisodicMemory(path=tmp_path, embeddings=real_embeddings)
        blocks = [
            ProcedureLibrary([LEAVE, EXPENSES], embeddings=real_embeddings),
            memory,
            UserFacts(store),
        ]
        saver = SqliteSaver(_sqlite(tmp_path / "checkpoints.sqlite"))
        graph = create_knowledge_graph(model, sample_kb, blocks=blocks, checkpointer=saver,
                                       store=store, top_k=2, keep_manifest=True)  # fmt: skip
        return graph, memory, blocks[2], store, saver

    model = NumberedChatModel()
    graph, memory, facts, store, saver = build(model)
    session1 = {"configurable": {"thread_id": "s1", "user_id": "ana"}}
    graph.invoke({"messages": [("user", "Next month I'm flying to Japan for two weeks.")]},
                 session1)  # fmt: skip
    graph.invoke({"messages": [("user", "Also, my cat is called Miso.")]}, session1)
    facts.set("ana", "home_office", "Lisbon")
    assert memory.count("ana") == 2
    store.conn.close()
    saver.conn.close()

    model = NumberedChatModel()  # a restart: everything is reopened from disk
    graph, memory, facts, store, saver = build(model)
    session2 = {"configurable": {"thread_id": "s2", "user_id": "ana"}}
    state = graph.invoke({"messages": [("user", "How do I request leave for my holiday abroad?")]},
                         session2)  # fmt: skip

    text = _injected(model.received[0])
    positions = [text.index(h) for h in HEADERS]
    assert positions == sorted(positions)
    assert '"Request leave"' in text and "leave_policy.md" in text
    snippets = text[positions[2] : positions[3]]
    assert "Japan" in snippets
    assert text.endswith("[User Facts]\nhome_office=Lisbon")
    assert state["knowledge_manifest"]["blocks"] == ["procedure", "knowledge", "episodic", "facts"]
    assert not any(is_injected(m) for m in state["messages"])
    assert memory.count("ana") == 3
    store.conn.close()
    saver.conn.close()


def test_agent_with_the_middleware_remembers_across_threads(
    tmp_path, sample_kb, real_embeddings
) -> None:
    memory = EpisodicMemory(path=tmp_path, embeddings=real_embeddings)
    store = SqliteStore(_sqlite(tmp_path / "facts.sqlite"))
    store.setup()
    facts = UserFacts(store)
    memory.record_exchange("I'm allergic to peanuts.", "Noted.", user_id="ana",
                           date=datetime.now(timezone.utc) - timedelta(days=20))  # fmt: skip
    model = NumberedChatModel(
        script=[
            AIMessage("", tool_calls=[{"name": "set_user_fact", "id": "c1",
                                       "args": {"key": "team", "value": "Payroll"}}]),
            AIMessage("Saved."),
        ]
    )  # fmt: skip
    middleware = KnowledgeInjectionMiddleware(sample_kb, blocks=[memory, facts],
                                              memory_tools=True, top_k=2)  # fmt: skip
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "a1", "user_id": "ana"}}

    agent.invoke({"messages": [("user", "I work in the payroll team.")]}, config)
    agent.invoke({"messages": [("user", "Can the team dinner include nuts?")]},
                 {"configurable": {"thread_id": "a2", "user_id": "ana"}})  # fmt: skip

    text = _injected(model.received[-1])
    assert "peanuts" in text and text.endswith("[User Facts]\nteam=Payroll")
    assert memory.count("ana") == 3
    store.conn.close()
