"""knowledge_base_search with the real embedding model: the langchain-tests suite and retrieval."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests

from langchain_knowledge_inject import (
    build_sample_knowledge_base,
    create_knowledge_base_search_tool,
)
from langchain_knowledge_inject.sample_data import SAMPLE_QUESTIONS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sample_kb(tmp_path_factory, real_embeddings):
    kb = build_sample_knowledge_base(
        path=tmp_path_factory.mktemp("sample"), embeddings=real_embeddings
    )
    yield kb
    kb.close()


class TestKnowledgeBaseSearchToolIntegration(ToolsIntegrationTests):
    @pytest.fixture(autouse=True)
    def _bind_kb(self, sample_kb) -> None:
        self._kb = sample_kb

    @property
    def tool_constructor(self) -> BaseTool:
        return create_knowledge_base_search_tool(self._kb, k=2)

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"query": "How many days of annual leave do I get?", "k": 2}


@pytest.mark.parametrize("sample", SAMPLE_QUESTIONS, ids=lambda s: s.expected_source)
def test_each_sample_question_finds_its_policy(sample_kb, sample):
    tool = create_knowledge_base_search_tool(sample_kb, k=3)
    message = tool.invoke(
        {"name": tool.name, "args": {"query": sample.question}, "id": "1", "type": "tool_call"}
    )
    assert sample.expected_source in [d.metadata["source"] for d in message.artifact]
    assert f"Source: {sample.expected_source}" in message.content
