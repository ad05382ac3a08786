"""create_knowledge_graph over the sample knowledge base with the real embedding model."""

from __future__ import annotations

import sqlite3

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from langchain_knowledge_inject import (
    KnowledgeBase,
    create_knowledge_graph,
    strip_injected,
)
from langchain_knowledge_inject._ingest.sample_data import SAMPLE_QUESTIONS
from langchain_knowledge_inject._turn.placement import is_injected
from tests.unit_tests.fakes import NumberedChatModel, dump_messages, injected_text

pytestmark = pytest.mark.integration

FOLLOW_UPS = ["Thanks!", "Can you say that more briefly?", "OK, understood."]


def _questions(turns: int) -> list[str]:
    pool = [q.question for q in SAMPLE_QUESTIONS]
    return [
        pool[i // 2 % len(pool)] if i % 2 == 0 else FOLLOW_UPS[i % len(FOLLOW_UPS)]
        for i in range(turns)
    ]


def test_twenty_turns_with_sqlite_history_and_prefix_reuse(sample_kb, tmp_path):
    turns = 20
    model = NumberedChatModel()
    config = {"configurable": {"thread_id": "hr"}}
    manifests = []
    with sqlite3.connect(tmp_path / "cp.sqlite", check_same_thread=False) as conn:
        graph = create_knowledge_graph(
            model,
            sample_kb,
            system_prompt="You are the HR assistant.",
            checkpointer=SqliteSaver(conn),
            keep_manifest=True,
        )
        for question in _questions(turns):
            manifests.append(
                graph.invoke({"messages": [HumanMessage(question)]}, config)["knowledge_manifest"]
            )
        history = graph.get_state(config).values["messages"]

    plain = create_knowledge_graph(
        NumberedChatModel(), sample_kb, system_prompt="You are the HR assistant."
    )
    state: dict = {"messages": []}
    for question in _questions(turns):
        state = plain.invoke(
            {"messages": [*state["messages"], HumanMessage(question)]},
            {"configurable": {"knowledge_enabled": False}},
        )
    assert len(history) == 2 * turns
    assert [(m.type, m.content) for m in history] == [
        (m.type, m.content) for m in state["messages"]
    ]
    assert not any(is_injected(m) for m in history)

    # every sample question gets its expected policy
    for i, question in enumerate(_questions(turns)):
        expected = next(
            (q.expected_source for q in SAMPLE_QUESTIONS if q.question == question), None
        )
        if expected:
            assert expected in manifests[i]["sources"], question
    # prefix reuse: what comes before this turn's user message (which carries the
    # knowledge) is the previous call's input without its injection, plus the reply
    for previous, current in zip(model.received, model.received[1:], strict=False):
        cut = len(current) - 1
        assert dump_messages(current[: cut - 1]) == dump_messages(strip_injected(previous))
        assert current[cut - 1].type == "ai"


def test_graph_over_a_real_chroma_server(tmp_path, real_embeddings, chroma_server):
    kb = KnowledgeBase(
        "hr-server", path=tmp_path, client=chroma_server.client(), embeddings=real_embeddings
    )
    from langchain_knowledge_inject._ingest.sample_data import SAMPLE_DOCUMENTS

    kb.add_documents(SAMPLE_DOCUMENTS)
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, keep_manifest=True)
    state = graph.invoke({"messages": [HumanMessage(SAMPLE_QUESTIONS[0].question)]})
    assert SAMPLE_QUESTIONS[0].expected_source in state["knowledge_manifest"]["sources"]
    assert SAMPLE_QUESTIONS[0].answer in injected_text(model.received[-1])
    kb.close()
