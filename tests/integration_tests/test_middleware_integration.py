"""KnowledgeInjectionMiddleware in create_agent over the sample knowledge base (real embeddings)."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_knowledge_inject import KnowledgeInjectionMiddleware
from langchain_knowledge_inject._ingest.sample_data import SAMPLE_QUESTIONS
from langchain_knowledge_inject._turn.placement import is_injected
from tests.unit_tests.fakes import RecordingChatModel

pytestmark = pytest.mark.integration


def _search(query: str, call_id: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": "knowledge_base_search", "args": {"query": query}, "id": call_id}]
    )


def test_agent_over_the_sample_knowledge_base(sample_kb):
    questions = SAMPLE_QUESTIONS[:3]
    script: list[AIMessage] = []
    for i, sample in enumerate(questions):
        script += [_search(sample.question, f"s{i}"), AIMessage(f"answer {i}")]
    model = RecordingChatModel(script=script)
    agent = create_agent(
        model,
        tools=[],
        system_prompt="You are the HR assistant.",
        middleware=[KnowledgeInjectionMiddleware(sample_kb, search_tool=True, keep_manifest=True)],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    for sample in questions:
        state = agent.invoke({"messages": [HumanMessage(sample.question)]}, config)
        assert sample.expected_source in state["knowledge_manifest"]["sources"]
        injected_ids = set(state["knowledge_manifest"]["chunk_ids"])
        tool_message = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
        assert not injected_ids & {d.id for d in tool_message.artifact}  # never repeated

    # two model calls per turn; the injection travels with the user message of its turn
    assert len(model.received) == 2 * len(questions)
    for call in model.received:
        (index,) = [i for i, m in enumerate(call) if is_injected(m)]
        humans = [i for i, m in enumerate(call) if isinstance(m, HumanMessage)]
        assert index == humans[-1]
    stored = agent.get_state(config).values["messages"]
    assert not any(is_injected(m) for m in stored)
    assert len(stored) == 4 * len(questions)
