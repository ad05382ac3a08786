"""KnowledgeInjector over the sample knowledge base with the real embedding model."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_knowledge_inject import KnowledgeInjector, strip_injected
from langchain_knowledge_inject._ingest.sample_data import (
    SAMPLE_QUESTIONS,
    build_sample_knowledge_base,
)
from langchain_knowledge_inject._turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
from langchain_knowledge_inject._turn.manifest import hash_messages
from langchain_knowledge_inject._turn.placement import is_injected

pytestmark = pytest.mark.integration

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "followup_query.py"


@pytest.fixture
def kb(tmp_path, real_embeddings):
    base = build_sample_knowledge_base(path=tmp_path, embeddings=real_embeddings)
    yield base
    base.close()


@pytest.fixture(scope="module")
def followup():
    spec = importlib.util.spec_from_file_location("followup_query", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules["followup_query"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("followup_query", None)


@pytest.mark.parametrize("sample", SAMPLE_QUESTIONS, ids=lambda s: s.expected_source)
def test_each_sample_question_injects_its_policy_first(kb, sample):
    turn = KnowledgeInjector(kb).prepare(
        [SystemMessage(KNOWLEDGE_SYSTEM_PROMPT), HumanMessage(sample.question)]
    )
    assert turn.manifest.injected
    assert turn.manifest.sources[0] == sample.expected_source
    assert sample.answer in " ".join(turn.dynamic_context.split())
    assert turn.manifest.tokens_used <= 2000


def test_unrelated_question_injects_nothing(kb):
    msgs = [SystemMessage("s"), HumanMessage("Write a haiku about the ocean at dawn.")]
    turn = KnowledgeInjector(kb, min_score=0.6, knowledge_prompt=None).prepare(msgs)
    assert turn.messages == msgs and not turn.manifest.injected


def test_multi_turn_history_stays_clean_and_the_prefix_stable(kb):
    injector = KnowledgeInjector(kb)
    history = [SystemMessage(KNOWLEDGE_SYSTEM_PROMPT)]
    hashes = []
    for sample in SAMPLE_QUESTIONS:
        history.append(HumanMessage(sample.question))
        turn = injector.prepare(history)
        assert sum(is_injected(m) for m in turn.messages) == 1
        assert turn.messages[: len(history) - 1] == history[:-1]  # everything before is reused
        assert strip_injected(turn.messages) == history
        hashes.append(turn.manifest.prefix_hash)
        history.append(AIMessage(f"Answer to: {sample.question}"))
    # the stored history holds no injected text at all
    assert not any("[Retrieved Knowledge]" in str(m.content) for m in history[1:])
    assert hashes[1] == hash_messages(history[:3])


def test_a_document_added_between_turns_is_used_on_the_next(kb):
    injector = KnowledgeInjector(kb, top_k=2)
    question = [HumanMessage("Is there a bicycle commuting allowance?")]
    assert "bike-to-work" not in (injector.prepare(question).dynamic_context or "")
    kb.add_documents(
        [Document("Bicycle commuting: the bike-to-work allowance is EUR 20 per month.",
                  metadata={"source": "bicycle_policy.md"})]
    )  # fmt: skip
    turn = injector.prepare(question)
    assert turn.manifest.sources[0] == "bicycle_policy.md"
    assert "bike-to-work allowance is EUR 20" in turn.dynamic_context


async def test_async_path_matches_sync(kb):
    msgs = [HumanMessage(SAMPLE_QUESTIONS[0].question)]
    injector = KnowledgeInjector(kb)
    assert await injector.ainvoke(msgs) == injector.invoke(msgs)


def test_follow_up_query_window_helps_on_the_held_out_set(kb, followup):
    rows = {
        (name, kind): (h1, hk) for name, kind, _, h1, hk in followup.evaluate(kb, followup.HELD_OUT)
    }
    current = "current turn only (query_window=0)"
    gated = "window 1, follow-ups only (query_window=1)"
    # measured (window-fitting chunks, document scoring): follow-ups hit@4 0.33 -> 0.92,
    # hit@1 0.25 -> 0.92; switches hit@4 1.00 -> 0.88 (one of 8 switches judged a follow-up
    # drops out of the top 4; it stayed in with one chunk per policy paragraph)
    assert rows[(gated, "followup")][1] >= rows[(current, "followup")][1] + 0.25
    assert rows[(gated, "followup")][0] > rows[(current, "followup")][0]
    assert rows[(gated, "switch")][1] >= rows[(current, "switch")][1] - 1 / 8
    # the gate matters: a window on every query hurts topic switches more
    assert rows[("window 1, every query", "switch")][0] <= rows[(gated, "switch")][0]


def test_follow_up_example(kb):
    msgs = [
        HumanMessage("What is the daily meal allowance when travelling in my home country?"),
        AIMessage("EUR 45 per day."),
        HumanMessage("and abroad?"),
    ]
    turn = KnowledgeInjector(kb, query_window=1).prepare(msgs)
    assert turn.query == "and abroad? daily meal allowance travelling home country"
    assert "EUR 70 per day abroad" in " ".join(turn.dynamic_context.split())
