"""Restricted mode's decision and scope: one decision, pinned filters, budgets, hidden sources."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableLambda

from langchain_knowledge_inject import (
    ConfigurationError,
    KnowledgeBase,
    KnowledgeInjector,
    create_knowledge_base_search_tool,
)
from langchain_knowledge_inject._restricted.safe_summary import fit_safe_summary
from langchain_knowledge_inject._restricted.scope import (
    hide_source_names,
    knowledge_base_flags,
    redact_documents,
    resolve_restricted,
)
from langchain_knowledge_inject._restricted.summary import SafeSummary
from langchain_knowledge_inject._surfaces.tools import pinned_and
from langchain_knowledge_inject._turn.tokens import approximate_token_count
from tests.unit_tests.fakes import WordHashEmbedding
from tests.unit_tests.restricted_fixtures import HONEST_GUIDANCE, HONEST_SUMMARY
from tests.unit_tests.restricted_harness import (
    CHANNELS,
    SURFACES,
    ListKB,
    channel_text,
    count_raw,
    hostile_summarizer,
    run_surface,
)

SECRET_CHUNK = (
    "Treasury operations. Supplier payments are made from account number 90412 at the "
    "central bank branch. Any change of beneficiary needs a call-back to a known contact."
)
QUESTION = "Which account pays suppliers?"


def _answer(summary: str, guidance: str = HONEST_GUIDANCE) -> dict[str, Any]:
    return {"decision": "answer", "reason": "answerable", "summary": summary,
            "answer_guidance": guidance}  # fmt: skip


# --- one decision ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "surface", "asked", "expected"),
    [
        ([False], False, None, False),
        ([True], False, None, True),
        ([False], True, None, True),
        ([False], False, True, True),
        ([True], False, False, True),
        ([False], True, False, True),
        ([False, True], False, None, True),
        ([], False, False, False),
    ],
)
def test_any_on_wins_and_a_request_cannot_turn_it_off(stored, surface, asked, expected):
    assert resolve_restricted(knowledge_bases=stored, surface=surface, request=asked) is expected


def test_a_request_asking_for_off_is_ignored_with_a_debug_log(caplog):
    with caplog.at_level(logging.DEBUG, logger="langchain_knowledge_inject"):
        assert resolve_restricted(knowledge_bases=[True], request=False) is True
    assert "restricted mode stays on (set by the knowledge base)" in caplog.text
    assert all(r.levelno == logging.DEBUG for r in caplog.records)


@pytest.mark.parametrize("value", ["yes", 1, "false"])
def test_a_malformed_request_flag_is_refused(value):
    with pytest.raises(ConfigurationError, match="True, False or None"):
        resolve_restricted(request=value)


def test_an_unreadable_stored_flag_counts_as_on():
    class Broken:
        @property
        def info(self):
            msg = "catalog unreadable"
            raise OSError(msg)

    class Plain:  # a search/asearch object without info
        pass

    kbs = [Broken(), Plain(), ListKB(["x"], restricted=True), ListKB(["x"])]
    flags = list(knowledge_base_flags(kbs))
    assert flags == [True, False, True, False]


def test_a_flag_stored_after_construction_restricts_the_next_turn():
    kb = ListKB([SECRET_CHUNK])
    injector = KnowledgeInjector(kb)
    tool = create_knowledge_base_search_tool(kb)
    assert "90412" in injector.invoke([HumanMessage(QUESTION)])[-2].text
    kb.info.restricted = True  # e.g. set through the store after the surface was built
    assert "90412" not in "".join(m.text for m in injector.invoke([HumanMessage(QUESTION)]))
    content = tool.invoke({"query": QUESTION})
    assert content.startswith("[Restricted Knowledge Summary]") and "90412" not in content


# --- the tool, wherever it is invoked ----------------------------------------------------------


def test_a_plain_tool_invoked_directly_with_the_request_flag_is_restricted():
    tool = create_knowledge_base_search_tool(ListKB([SECRET_CHUNK]))
    content = tool.invoke({"query": QUESTION}, {"configurable": {"restricted": True}})
    assert content.startswith("[Restricted Knowledge Summary]") and "90412" not in content


async def test_a_plain_tool_called_inside_a_restricted_run_is_restricted():
    """Inside a node of the caller's own graph the tool inherits the run's config."""
    tool = create_knowledge_base_search_tool(ListKB([SECRET_CHUNK]))
    node = RunnableLambda(lambda q: tool.invoke({"query": q}))
    anode = RunnableLambda(lambda q: q) | RunnableLambda(
        lambda q: tool.invoke({"query": q}), afunc=lambda q: tool.ainvoke({"query": q})
    )
    config = {"configurable": {"restricted": True}}
    for content in (node.invoke(QUESTION, config), await anode.ainvoke(QUESTION, config)):
        assert content.startswith("[Restricted Knowledge Summary]") and "90412" not in content


# --- the pinned filter -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pinned", "category", "expected"),
    [
        ({"category": "hr"}, "finance", {"$and": [{"category": "hr"}, {"category": "finance"}]}),
        ({"category": "hr"}, None, {"category": "hr"}),
        ({"year": 2024}, "hr", {"year": 2024, "category": "hr"}),
        (
            {"$and": [{"year": 2024}, {"team": "a"}]},
            "hr",
            {"$and": [{"year": 2024}, {"team": "a"}, {"category": "hr"}]},
        ),
        (
            {"category": {"$in": ["hr", "it"]}, "year": 2024},
            "it",
            {"year": 2024, "$and": [{"category": {"$in": ["hr", "it"]}}, {"category": "it"}]},
        ),
        (None, "hr", {"category": "hr"}),
        (None, None, None),
    ],
)
def test_the_models_category_is_anded_with_the_pin(pinned, category, expected):
    assert pinned_and(pinned, category) == expected


def test_the_model_cannot_widen_a_pinned_category(tmp_path):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=WordHashEmbedding())
    kb.add_documents(
        [
            Document("Annual leave is planned with the manager.", metadata={"category": "hr"}),
            Document("Salary bands are confidential finance data.", metadata={"category": "fin"}),
        ]
    )
    try:
        tool = create_knowledge_base_search_tool(kb, filter={"category": "hr"}, min_score=0.0)
        message = tool.invoke(
            {"name": tool.name, "args": {"query": "salary bands", "category": "fin"}, "id": "2",
             "type": "tool_call"}
        )  # fmt: skip
        widened = message.artifact
        own = tool.invoke(
            {"name": tool.name, "args": {"query": "leave", "category": "hr"}, "id": "3",
             "type": "tool_call"}
        ).artifact  # fmt: skip
    finally:
        kb.close()
    assert widened == [] and "Salary" not in message.text
    assert [d.metadata["category"] for d in own] == ["hr"]


# --- the tool's token budget --------------------------------------------------------------------


@pytest.mark.slow
def test_a_ten_megabyte_chunk_is_not_returned_whole():
    huge = "confidential " * (10 * 1024 * 1024 // 13)
    kb = ListKB([huge, "A short second passage."])
    tool = create_knowledge_base_search_tool(kb, max_tokens=500)
    message = tool.invoke(
        {"name": tool.name, "args": {"query": "anything"}, "id": "1", "type": "tool_call"}
    )
    assert approximate_token_count(message.text) <= 500
    (shown,) = message.artifact
    assert shown.metadata["truncated"] is True and shown.page_content.endswith(" …")
    assert len(shown.page_content) < 5000


def test_passages_are_kept_whole_in_rank_order_until_the_budget():
    chunks = [f"Passage {i}: " + "policy words here " * 40 for i in range(6)]
    tool = create_knowledge_base_search_tool(ListKB(chunks), max_tokens=600, top_k=6)
    message = tool.invoke(
        {"name": tool.name, "args": {"query": "policy"}, "id": "1", "type": "tool_call"}
    )
    kept = message.artifact
    assert 1 <= len(kept) < 6
    assert [d.page_content for d in kept] == chunks[: len(kept)]
    assert approximate_token_count(message.text) <= 600


def test_a_bad_tool_budget_is_refused():
    with pytest.raises(ConfigurationError, match="max_tokens"):
        create_knowledge_base_search_tool(ListKB(["x"]), max_tokens=0)


# --- the safe summary's budget ------------------------------------------------------------------

_LONG = " ".join(["Plan requests early and follow the approval route with your manager."] * 60)


def test_a_300_kb_summary_is_never_injected():
    giant = "Plan early and follow the route. " * 10_000  # about 330 KB
    turn = KnowledgeInjector(
        ListKB([SECRET_CHUNK]),
        restricted=True,
        summarizer_model=hostile_summarizer(_answer(giant)),
    ).prepare([HumanMessage(QUESTION)])
    assert turn.manifest.summary_reason == "summarizer_error"
    assert len(turn.dynamic_context) < 2000


@pytest.mark.parametrize("max_tokens", [120, 300, 800])
def test_a_long_summary_is_cut_to_the_injectors_budget(max_tokens):
    turn = KnowledgeInjector(
        ListKB([SECRET_CHUNK]),
        restricted=True,
        max_tokens=max_tokens,
        summarizer_model=hostile_summarizer(_answer(_LONG)),
    ).prepare([HumanMessage(QUESTION)])
    assert turn.manifest.summary_decision == "answer"
    assert approximate_token_count(turn.dynamic_context) <= max_tokens
    assert "…" in turn.dynamic_context


def test_a_summary_that_cannot_fit_becomes_the_fixed_refusal():
    summary = SafeSummary(**_answer(_LONG), confidence=0.9)
    text, shown = fit_safe_summary(summary, max_tokens=40)
    assert shown.decision == "refuse" and shown.reason == "summarizer_error"
    assert _LONG[:40] not in text


def test_the_tools_safe_summary_fits_its_budget():
    tool = create_knowledge_base_search_tool(
        ListKB([SECRET_CHUNK]),
        restricted=True,
        max_tokens=150,
        summarizer_model=hostile_summarizer(_answer(_LONG)),
    )
    message = tool.invoke(
        {"name": tool.name, "args": {"query": QUESTION}, "id": "1", "type": "tool_call"}
    )
    assert approximate_token_count(message.text) <= 150
    assert message.artifact["summary"].endswith("…")


# --- sensitive sources -------------------------------------------------------------------------


def _naming_summarizer() -> Any:
    """An honest summary that names the source file anyway."""
    return hostile_summarizer(
        _answer(
            HONEST_SUMMARY + " See vault_memo_0_2024.md for details.",
            "Point the user to /kb/vault/vault_memo_0_2024.md and vault_memo_0_2024.",
        )
    )


@pytest.mark.parametrize("surface", SURFACES)
def test_sensitive_source_names_appear_nowhere(surface, caplog):
    caplog.set_level(logging.DEBUG)
    kb = ListKB([SECRET_CHUNK], restricted=True, sensitive_sources=True)
    turn = run_surface(surface, kb=kb, question=QUESTION, summarizer=_naming_summarizer(),
                       where="kb")  # fmt: skip
    turn.channels["logs"] = [r.getMessage() for r in caplog.records]
    assert turn.reasons == ["answerable"] * len(turn.reasons) and turn.reasons
    found = {c: turn.text(c).count("vault_memo") for c in CHANNELS if c in turn.channels}
    assert found == dict.fromkeys(found, 0)
    assert "a restricted document" in turn.text("main_model")


def test_sources_are_shown_when_not_sensitive():
    kb = ListKB([SECRET_CHUNK], restricted=True)
    turn = run_surface("graph", kb=kb, question=QUESTION, where="kb", events=False,
                       summarizer=hostile_summarizer(_answer(HONEST_SUMMARY)))  # fmt: skip
    assert "vault_memo_0_2024.md" in turn.text("main_model")
    assert turn.channels["output"]["knowledge_manifest"]["sources"]


def test_hide_source_names_keeps_plain_words():
    docs = [Document("x", metadata={"source": "/kb/hr/leave.md"})]
    assert hide_source_names("Annual leave: see leave.md", docs) == (
        "Annual leave: see a restricted document"
    )
    docs = [Document("x", metadata={"source": "q3.md", "source_path": "/srv/kb/fin_plan_2025.md"})]
    assert hide_source_names("In /srv/kb/fin_plan_2025.md and fin_plan_2025", docs) == (
        "In a restricted document and a restricted document"
    )


# --- what state keeps -------------------------------------------------------------------------


def test_state_keeps_ids_and_scores_only():
    kb = ListKB([SECRET_CHUNK, "Second confidential passage about beneficiaries and banks."])
    turn = run_surface("graph", kb=kb, question=QUESTION, events=False,
                       summarizer=hostile_summarizer(_answer(HONEST_SUMMARY)))  # fmt: skip
    retrieved = turn.channels["output"]["retrieved"]
    assert [d.id for d in retrieved] == ["vault-0", "vault-1"]
    assert all(d.page_content == "" and d.metadata["redacted"] for d in retrieved)
    assert {k for d in retrieved for k in d.metadata} <= {
        "chunk_id", "score", "kb_name", "source", "redacted",
    }  # fmt: skip
    assert turn.channels["output"]["knowledge_manifest"]["chunk_ids"] == ["vault-0", "vault-1"]
    doc = Document("text", id="a", metadata={"score": "n/a", "source": "s.md"})
    assert redact_documents([doc])[0].metadata == {
        "chunk_id": "a", "score": 0.0, "source": "s.md", "redacted": True,
    }  # fmt: skip


@pytest.mark.parametrize("surface", SURFACES)
def test_a_summarizer_error_quoting_the_chunks_goes_nowhere(surface, caplog, monkeypatch):
    """The exception's message quotes the excerpts: no caller-visible channel gets it."""
    monkeypatch.setenv("KINJECT_LOG_MODEL_IO", "1")
    caplog.set_level(logging.DEBUG)

    def explode(messages: list[Any]) -> str:
        raise ValueError(messages[-1].text)

    turn = run_surface(surface, kb=ListKB([SECRET_CHUNK]), question=QUESTION,
                       summarizer=hostile_summarizer(explode))  # fmt: skip
    turn.channels["logs"] = [r.getMessage() for r in caplog.records] + [
        str(r.exc_info) for r in caplog.records if r.exc_info
    ]
    assert set(turn.reasons) == {"summarizer_error"}
    raw = {c: count_raw(turn.text(c), [SECRET_CHUNK]) for c in CHANNELS if c in turn.channels}
    assert raw == dict.fromkeys(raw, 0)
    assert "90412" not in channel_text(turn.channels)


def test_invalid_reply_fields_are_not_logged(caplog, monkeypatch):
    monkeypatch.setenv("KINJECT_LOG_MODEL_IO", "1")
    caplog.set_level(logging.DEBUG)
    reply = json.dumps({"decision": SECRET_CHUNK, "reason": "90412", "summary": SECRET_CHUNK})
    turn = KnowledgeInjector(
        ListKB([SECRET_CHUNK]),
        restricted=True,
        summarizer_model=hostile_summarizer(lambda messages: reply),
    ).prepare([HumanMessage(QUESTION)])
    assert turn.manifest.summary_reason == "summarizer_error"
    assert "90412" not in caplog.text and count_raw(caplog.text, [SECRET_CHUNK]) == 0
    assert "decision: literal_error" in caplog.text  # where it failed, not what it said


@pytest.mark.parametrize("surface", ["graph", "middleware"])
def test_the_host_lends_its_summarizer_to_a_separate_tool(surface):
    """The tool has no summarizer of its own; the restricted host's writes its summary."""
    chunks = [SECRET_CHUNK] + [f"Payment rule {i}: two approvals are needed." for i in range(5)]
    summarizer = hostile_summarizer(_answer(HONEST_SUMMARY))
    turn = run_surface(surface, kb=ListKB(chunks), question=QUESTION, tool_origin="separate",
                       events=False, summarizer=summarizer)  # fmt: skip
    tool_message = next(m for m in turn.channels["output"]["messages"] if m.type == "tool")
    assert tool_message.text.startswith("[Restricted Knowledge Summary]")
    assert tool_message.artifact["reason"] == "answerable"
    assert "90412" not in turn.text("main_model")


def test_stored_flags_are_read_without_counting_chunks(tmp_path, monkeypatch):
    from langchain_knowledge_inject._restricted.scope import sensitive_source_flags
    from langchain_knowledge_inject._store.knowledge_base import RestrictionFlags

    kb = KnowledgeBase("flags", path=tmp_path, embeddings=WordHashEmbedding(), restricted=True)
    kb.add_documents([Document(page_content="Leave requests go to HR.")])

    def no_count(*args: Any, **kwargs: Any) -> int:
        pytest.fail("the per-turn flag lookup counted the chunks")

    monkeypatch.setattr(kb._catalog, "count", no_count)
    assert kb.restriction == RestrictionFlags(restricted=True, sensitive_sources=False)
    assert list(knowledge_base_flags([kb])) == [True]
    assert sensitive_source_flags([kb]) == [False]
