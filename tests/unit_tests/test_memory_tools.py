"""The memory tools: store_memory, set_user_fact, forget_user_fact; hidden user id; create_agent."""

from __future__ import annotations

import doctest
import tempfile
import uuid
from typing import Any

import chromadb
import pytest
from langchain.agents import create_agent
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_tests.unit_tests import ToolsUnitTests
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langchain_knowledge_inject._memory import tools as memory_tools_module
from langchain_knowledge_inject._memory.episodic import EpisodicMemory
from langchain_knowledge_inject._memory.facts import UserFacts
from langchain_knowledge_inject._memory.tools import (
    create_memory_tools,
    create_store_memory_tool,
    create_user_fact_tools,
)
from tests.unit_tests.fakes import RecordingChatModel
from tests.unit_tests.fakes import user_config as cfg


def new_memory() -> EpisodicMemory:
    return EpisodicMemory(client=chromadb.EphemeralClient(), path=tempfile.mkdtemp(),
                          min_score=-1.0, collection_prefix=f"tools-{uuid.uuid4().hex[:10]}",
                          embeddings=DeterministicFakeEmbedding(size=32))  # fmt: skip


@pytest.fixture
def facts() -> UserFacts:
    return UserFacts(InMemoryStore())


class TestStoreMemoryToolStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return create_store_memory_tool(new_memory())

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"content": "The user prefers aisle seats."}


class TestSetUserFactToolStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return create_user_fact_tools(UserFacts(InMemoryStore()))[0]

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"key": "home_city", "value": "Lisbon"}


class TestForgetUserFactToolStandard(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return create_user_fact_tools(UserFacts(InMemoryStore()))[1]

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"key": "home_city"}


def test_the_model_sees_no_user_or_config_argument(facts) -> None:
    set_tool, forget_tool = create_user_fact_tools(facts)
    store_tool = create_store_memory_tool(new_memory())

    assert set(set_tool.tool_call_schema.model_json_schema()["properties"]) == {"key", "value"}
    assert set(forget_tool.tool_call_schema.model_json_schema()["properties"]) == {"key"}
    assert set(store_tool.tool_call_schema.model_json_schema()["properties"]) == {"content"}
    assert [t.name for t in (store_tool, set_tool, forget_tool)] == [
        "store_memory", "set_user_fact", "forget_user_fact",
    ]  # fmt: skip


def test_store_memory_saves_a_note_for_the_configured_user_and_thread() -> None:
    memory = new_memory()
    tool = create_store_memory_tool(memory)

    out = tool.invoke({"content": "Prefers aisle seats."}, config=cfg(thread_id="t1"))

    assert out == "Saved to memory."
    [ep] = memory.search("Prefers aisle seats.", user_id="u1")
    assert (ep.kind, ep.user_message, ep.thread_id) == ("memory", "Prefers aisle seats.", "t1")
    assert memory.count("u2") == 0


def test_without_a_user_id_nothing_is_stored_and_the_model_is_told() -> None:
    memory = new_memory()
    tool = create_store_memory_tool(memory)

    out = tool.invoke({"content": "x"}, config=cfg(None))

    assert "No user id" in out
    assert memory.count("u1") == 0


def test_set_and_forget_user_facts(facts) -> None:
    set_tool, forget_tool = create_user_fact_tools(facts)

    assert set_tool.invoke({"key": "Home City", "value": "Lisbon"}, config=cfg()) == (
        "Saved: home_city=Lisbon"
    )
    assert facts.get_all("u1") == {"home_city": "Lisbon"}
    assert facts.get_all("u2") == {}
    assert forget_tool.invoke({"key": "home_city"}, config=cfg()) == "Forgot home_city."
    assert forget_tool.invoke({"key": "home_city"}, config=cfg()) == (
        "There was no fact named home_city."
    )
    assert facts.get_all("u1") == {}


def test_invalid_facts_come_back_to_the_model_as_text(facts) -> None:
    set_tool, forget_tool = create_user_fact_tools(facts)

    assert "at least one letter" in set_tool.invoke({"key": "!!", "value": "v"}, config=cfg())
    assert "non-empty text" in set_tool.invoke({"key": "k", "value": " "}, config=cfg())
    assert "No user id" in forget_tool.invoke({"key": "k"}, config=cfg(None))
    assert facts.get_all("u1") == {}


def test_a_tool_call_returns_a_tool_message(facts) -> None:
    set_tool, _ = create_user_fact_tools(facts)
    call = {"type": "tool_call", "name": "set_user_fact", "id": "c1",
            "args": {"key": "diet", "value": "vegetarian"}}  # fmt: skip

    message = set_tool.invoke(call, config=cfg())

    assert isinstance(message, ToolMessage) and message.tool_call_id == "c1"
    assert message.content == "Saved: diet=vegetarian"


async def test_async_tools(facts) -> None:
    memory = new_memory()
    store_tool = create_store_memory_tool(memory)
    set_tool, forget_tool = create_user_fact_tools(facts)

    assert await store_tool.ainvoke({"content": "Likes jazz."}, config=cfg()) == "Saved to memory."
    assert await set_tool.ainvoke({"key": "pet", "value": "cat"}, config=cfg()) == "Saved: pet=cat"
    assert await forget_tool.ainvoke({"key": "nothing"}, config=cfg()) == (
        "There was no fact named nothing."
    )
    assert "No user id" in await set_tool.ainvoke({"key": "a", "value": "b"}, config=cfg(None))
    assert memory.count("u1") == 1 and facts.get_all("u1") == {"pet": "cat"}


def test_create_memory_tools_returns_the_tools_for_the_given_stores(facts) -> None:
    assert [t.name for t in create_memory_tools(memory=new_memory(), facts=facts)] == [
        "store_memory", "set_user_fact", "forget_user_fact",
    ]  # fmt: skip
    assert [t.name for t in create_memory_tools(facts=facts)] == [
        "set_user_fact", "forget_user_fact",
    ]  # fmt: skip


# --- end to end through create_agent ---------------------------------------------------------


def test_an_agent_sets_a_fact_and_saves_a_note_for_the_user_of_the_run(facts) -> None:
    memory = new_memory()
    calls = [
        {"name": "set_user_fact", "args": {"key": "city", "value": "Porto"}, "id": "1"},
        {"name": "store_memory", "args": {"content": "Moving in June."}, "id": "2"},
    ]
    model = RecordingChatModel(script=[AIMessage("", tool_calls=calls), AIMessage("Noted!")])
    agent = create_agent(model, tools=create_memory_tools(memory=memory, facts=facts),
                         checkpointer=InMemorySaver())  # fmt: skip

    out = agent.invoke({"messages": [HumanMessage("I'm moving to Porto in June.")]},
                       config=cfg("alice", thread_id="t1"))  # fmt: skip

    assert out["messages"][-1].content == "Noted!"
    assert facts.get_all("alice") == {"city": "Porto"}
    assert [e.user_message for e in memory.search("Moving in June.", user_id="alice")] == [
        "Moving in June."
    ]
    assert facts.get_all("u1") == {} and memory.count("u1") == 0


def test_docstring_examples() -> None:
    result = doctest.testmod(memory_tools_module)
    assert result.attempted > 0 and result.failed == 0
