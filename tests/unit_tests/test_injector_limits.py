"""The injector's query cut and its handling of wrong settings at search time."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage

from langchain_knowledge_inject import ConfigurationError, KnowledgeBase, KnowledgeInjector
from langchain_knowledge_inject._store.knowledge_base import MAX_QUERY_CHARS
from tests.unit_tests.fakes import WordHashEmbedding


@pytest.fixture
def kb(tmp_path):
    base = KnowledgeBase("hr", path=tmp_path, embeddings=WordHashEmbedding())
    base.add_documents([Document("Annual leave is 25 days.", metadata={"source": "leave.md"})])
    yield base
    base.close()


def test_a_huge_message_is_cut_in_the_manifest_too(kb):
    huge = "annual leave days " * 60_000  # about 1 MB
    turn = KnowledgeInjector(kb, min_score=0.0).prepare([HumanMessage(huge)])
    assert turn.manifest.injected
    assert turn.query == huge[:MAX_QUERY_CHARS]
    assert turn.manifest.query == huge[:MAX_QUERY_CHARS]
    assert turn.messages[-1].content[-1]["text"] == huge  # the user's own message is never cut


def test_an_empty_tenant_is_refused_at_construction(kb):
    with pytest.raises(ConfigurationError, match="tenant_id"):
        KnowledgeInjector(kb, tenant_id="")


def test_a_wrong_setting_raises_even_when_degrading(kb):
    injector = KnowledgeInjector(kb, on_error="degrade")
    bad = {"configurable": {"tenant_id": ""}}
    with pytest.raises(ConfigurationError, match="tenant_id"):
        injector.invoke([HumanMessage("annual leave?")], bad)
