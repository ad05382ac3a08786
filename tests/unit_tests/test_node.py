"""Knowledge injection in a user's own ``StateGraph(MessagesState)``: one node, clean history."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from langchain_knowledge_inject import ConfigurationError, KnowledgeInjector, create_knowledge_node
from langchain_knowledge_inject._turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
from langchain_knowledge_inject._turn.manifest import MANIFEST_EVENT
from langchain_knowledge_inject._turn.placement import is_injected
from tests.unit_tests.fakes import LEAVE, FakeKB, NumberedChatModel


def _kb() -> FakeKB:
    return FakeKB([Document(LEAVE, id="c1", metadata={"source": "leave.md", "score": 0.9})])


def _graph(node: Any, *, checkpointer: Any = None) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("model", node)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    return builder.compile(checkpointer=checkpointer)


async def test_the_model_gets_the_knowledge_and_the_history_stays_clean():
    model = NumberedChatModel()
    graph = _graph(create_knowledge_node(model, _kb(), system_prompt="You are HR."),
                   checkpointer=InMemorySaver())  # fmt: skip
    config = {"configurable": {"thread_id": "t1"}}
    first = graph.invoke({"messages": [HumanMessage("Leave days?")]}, config)
    second = await graph.ainvoke({"messages": [HumanMessage("And sick leave?")]}, config)
    assert [m.type for m in first["messages"]] == ["human", "ai"]
    assert first["messages"][-1].content == "reply 1"  # the reply lands in messages
    assert [m.type for m in second["messages"]] == ["human", "ai", "human", "ai"]
    assert not any(is_injected(m) for m in second["messages"])  # nothing injected is stored
    stored = graph.get_state(config).values["messages"]
    assert all(LEAVE not in m.text for m in stored)
    for sent in model.received:  # each call: system + knowledge prompt, history, knowledge
        assert isinstance(sent[0], SystemMessage)
        assert sent[0].text == f"You are HR.\n\n{KNOWLEDGE_SYSTEM_PROMPT}"
        assert is_injected(sent[-1]) and LEAVE in sent[-1].text and sent[-1].type == "human"
    assert len(model.received[1]) == 1 + 3  # system, 3 stored messages (the last with knowledge)


def test_the_manifest_is_streamed_on_the_custom_mode():
    graph = _graph(create_knowledge_node(GenericFakeChatModel(messages=iter(["ok"])), _kb()))
    chunks = list(graph.stream({"messages": [HumanMessage("Leave days?")]}, stream_mode="custom"))
    assert chunks[0][MANIFEST_EVENT]["chunk_ids"] == ["c1"]


def test_a_state_without_messages_is_reported_at_the_first_run():
    node = create_knowledge_node(NumberedChatModel(), _kb())
    with pytest.raises(ConfigurationError, match="messages"):
        node.invoke({"history": []})


def test_injector_piped_into_a_model_as_a_node_is_reported(caplog):
    model = GenericFakeChatModel(messages=iter(["ok"]))
    graph = _graph(KnowledgeInjector(_kb()) | model)
    with caplog.at_level(logging.WARNING, logger="langchain_knowledge_inject"):
        state = graph.invoke({"messages": [HumanMessage("Leave days?")]})
    assert [m.type for m in state["messages"]] == ["human"]  # LangGraph dropped the reply...
    assert "create_knowledge_node" in caplog.text  # ...and the package said so


def test_inside_a_tool_loop_the_knowledge_stays_next_to_the_user_message():
    model = NumberedChatModel()
    node = create_knowledge_node(model, _kb())
    state = {"messages": [HumanMessage("Leave days?"), AIMessage("", tool_calls=[
        {"name": "clock", "args": {}, "id": "1"}])]}  # fmt: skip
    out = node.invoke(state)
    assert out["messages"][0].content == "reply 1"
    assert is_injected(model.received[0][-2])  # with the user message, not the tool call
