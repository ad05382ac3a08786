"""knowledge_base_search with the real embedding model: the langchain-tests suite and retrieval."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests

from langchain_knowledge_inject import (
    create_knowledge_base_search_tool,
)
from langchain_knowledge_inject._ingest.sample_data import SAMPLE_QUESTIONS

pytestmark = pytest.mark.integration


class TestKnowledgeBaseSearchToolIntegration(ToolsIntegrationTests):
    @pytest.fixture(autouse=True)
    def _bind_kb(self, sample_kb) -> None:
        self._kb = sample_kb

    @property
    def tool_constructor(self) -> BaseTool:
        return create_knowledge_base_search_tool(self._kb, top_k=2)

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"query": "How many days of annual leave do I get?", "k": 2}


@pytest.mark.parametrize("sample", SAMPLE_QUESTIONS, ids=lambda s: s.expected_source)
def test_each_sample_question_finds_its_policy(sample_kb, sample):
    tool = create_knowledge_base_search_tool(sample_kb, top_k=3)
    message = tool.invoke(
        {"name": tool.name, "args": {"query": sample.question}, "id": "1", "type": "tool_call"}
    )
    assert sample.expected_source in [d.metadata["source"] for d in message.artifact]
    assert f"Source: {sample.expected_source}" in message.content


# --- the memory tools: the same suite, on real stores ---------------------------------------------


@pytest.fixture(scope="module")
def real_memory(tmp_path_factory, real_embeddings):
    from langchain_knowledge_inject import EpisodicMemory

    return EpisodicMemory(path=tmp_path_factory.mktemp("episodes"), embeddings=real_embeddings)


@pytest.fixture(scope="module")
def real_facts(tmp_path_factory):
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(tmp_path_factory.mktemp("facts") / "f.db")) as store:
        store.setup()
        from langchain_knowledge_inject import UserFacts

        yield UserFacts(store)


class TestStoreMemoryToolIntegration(ToolsIntegrationTests):
    @pytest.fixture(autouse=True)
    def _bind(self, real_memory) -> None:
        self._memory = real_memory

    @property
    def tool_constructor(self) -> BaseTool:
        from langchain_knowledge_inject._memory.tools import create_store_memory_tool

        return create_store_memory_tool(self._memory)

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"content": "The user prefers aisle seats on long flights."}


class TestSetUserFactToolIntegration(ToolsIntegrationTests):
    @pytest.fixture(autouse=True)
    def _bind(self, real_facts) -> None:
        self._facts = real_facts

    @property
    def tool_constructor(self) -> BaseTool:
        from langchain_knowledge_inject._memory.tools import create_user_fact_tools

        return create_user_fact_tools(self._facts)[0]

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"key": "home_city", "value": "Lisbon"}


class TestForgetUserFactToolIntegration(ToolsIntegrationTests):
    @pytest.fixture(autouse=True)
    def _bind(self, real_facts) -> None:
        self._facts = real_facts

    @property
    def tool_constructor(self) -> BaseTool:
        from langchain_knowledge_inject._memory.tools import create_user_fact_tools

        return create_user_fact_tools(self._facts)[1]

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"key": "home_city"}


def test_memory_tools_store_for_the_configured_user(real_memory, real_facts):
    from langchain_knowledge_inject import create_memory_tools

    store_memory, set_fact, forget_fact = create_memory_tools(memory=real_memory, facts=real_facts)
    config = {"configurable": {"user_id": "u-int"}}
    set_fact.invoke({"key": "home_city", "value": "Lisbon"}, config=config)
    assert real_facts.get_all("u-int") == {"home_city": "Lisbon"}
    forget_fact.invoke({"key": "home_city"}, config=config)
    assert real_facts.get_all("u-int") == {}
    answer = store_memory.invoke({"content": "The user prefers aisle seats."}, config=config)
    assert answer == "Saved to memory." and real_memory.count("u-int") == 1
