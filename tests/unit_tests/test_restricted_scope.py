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
from langchain_knowledge_inject._restricted.boundary import chunk_ref, release
from langchain_knowledge_inject._restricted.scope import resolve_restricted, source_flags
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
    return {
        "decision": "answer",
        "reason": "answerable",
        "summary": summary,
        "answer_guidance": guidance,
    }


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
    assert resolve_restricted(stored=any(stored), surface=surface, request=asked) is expected


def test_a_request_asking_for_off_is_ignored_with_a_debug_log(caplog):
    with caplog.at_level(logging.DEBUG, logger="langchain_knowledge_inject"):
        assert resolve_restricted(stored=True, request=False) is True
    assert "restricted mode stays on" in caplog.text
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

    class BrokenStore:  # a knowledge base whose stored flag cannot be read
        def search(self, query, **kwargs):
            return []

        @property
        def restriction(self):
            try:
                raise ConnectionError("server at 10.0.0.7 refused")
            except ConnectionError as exc:
                msg = "store unreachable"
                raise OSError(msg) from exc

    kbs = [BrokenStore(), Plain(), ListKB(["x"], restricted=True), ListKB(["x"])]
    flags = [source_flags(kb) for kb in kbs]
    assert [f.restricted for f in flags] == [True, False, True, False]
    # the cause is named by class, never by message (a message may quote a store's text)
    cause = {"stage": "flags", "error": "OSError <- ConnectionError", "source": "BrokenStore"}
    assert flags[0].errors == (cause,)
    # the cause reaches the turn's manifest
    turn = KnowledgeInjector(BrokenStore()).prepare([HumanMessage(QUESTION)])
    assert turn.manifest.restricted and cause in turn.manifest.errors
    assert "10.0.0.7" not in str(turn.manifest.to_dict())


def test_a_flag_stored_after_construction_restricts_the_next_turn():
    kb = ListKB([SECRET_CHUNK])
    injector = KnowledgeInjector(kb)
    tool = create_knowledge_base_search_tool(kb)
    assert "90412" in injector.invoke([HumanMessage(QUESTION)])[-1].text
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
            {
                "name": tool.name,
                "args": {"query": "salary bands", "category": "fin"},
                "id": "2",
                "type": "tool_call",
            }
        )
        widened = message.artifact
        own = tool.invoke(
            {
                "name": tool.name,
                "args": {"query": "leave", "category": "hr"},
                "id": "3",
                "type": "tool_call",
            }
        ).artifact
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
    released = release(
        QUESTION, [Document(SECRET_CHUNK)], max_tokens=40, model=hostile_summarizer(_answer(_LONG))
    )
    assert released.summary.decision == "refuse" and released.summary.reason == "summarizer_error"
    assert _LONG[:40] not in released.text


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
    turn = run_surface(
        surface, kb=kb, question=QUESTION, summarizer=_naming_summarizer(), where="kb"
    )
    turn.channels["logs"] = [r.getMessage() for r in caplog.records]
    assert turn.reasons == ["leak_detected"] * len(turn.reasons) and turn.reasons  # named: refused
    found = {c: turn.text(c).count("vault_memo") for c in CHANNELS if c in turn.channels}
    assert found == dict.fromkeys(found, 0)


@pytest.mark.parametrize("spelling", ["VAULT MEMO 0 2024", "vault-memo-0-2024.MD"])
def test_a_sensitive_source_name_in_another_spelling_is_refused(spelling):
    kb = ListKB([SECRET_CHUNK], restricted=True, sensitive_sources=True)
    summarizer = hostile_summarizer(_answer(HONEST_SUMMARY + f" See {spelling} for details."))
    turn = KnowledgeInjector(kb, summarizer_model=summarizer).prepare([HumanMessage(QUESTION)])
    assert turn.manifest.summary_reason == "leak_detected" and spelling not in turn.dynamic_context


def test_sources_are_shown_when_not_sensitive():
    kb = ListKB([SECRET_CHUNK], restricted=True)
    turn = run_surface(
        "graph",
        kb=kb,
        question=QUESTION,
        where="kb",
        events=False,
        summarizer=hostile_summarizer(_answer(HONEST_SUMMARY)),
    )
    assert "vault_memo_0_2024.md" in turn.text("main_model")
    assert turn.channels["output"]["knowledge_manifest"]["sources"]


# --- what state keeps -------------------------------------------------------------------------


def test_state_keeps_ids_and_scores_only():
    kb = ListKB([SECRET_CHUNK, "Second confidential passage about beneficiaries and banks."])
    turn = run_surface(
        "graph",
        kb=kb,
        question=QUESTION,
        events=False,
        summarizer=hostile_summarizer(_answer(HONEST_SUMMARY)),
    )
    retrieved = turn.channels["output"]["retrieved"]
    refs = [chunk_ref("vault-0"), chunk_ref("vault-1")]  # keyed: never the chunk ids
    assert [d.id for d in retrieved] == refs
    assert all(d.page_content == "" and d.metadata["redacted"] for d in retrieved)
    assert {k for d in retrieved for k in d.metadata} <= {"chunk_id", "score", "redacted"}
    assert [d.metadata["score"] for d in retrieved] == [0.9, 0.8]  # one decimal
    assert turn.channels["output"]["knowledge_manifest"]["chunk_ids"] == refs


@pytest.mark.parametrize("surface", SURFACES)
def test_a_summarizer_error_quoting_the_chunks_goes_nowhere(surface, caplog, monkeypatch):
    """The exception's message quotes the excerpts: no caller-visible channel gets it."""
    monkeypatch.setenv("KINJECT_LOG_MODEL_IO", "1")
    caplog.set_level(logging.DEBUG)

    def explode(messages: list[Any]) -> str:
        raise ValueError(messages[-1].text)

    turn = run_surface(
        surface,
        kb=ListKB([SECRET_CHUNK]),
        question=QUESTION,
        summarizer=hostile_summarizer(explode),
    )
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
    assert turn.manifest.summary_codes == ["invalid_reply"]
    assert "90412" not in caplog.text and count_raw(caplog.text, [SECRET_CHUNK]) == 0
    assert "safe summary failed (invalid_reply)" in caplog.text  # a code, never what it said


def test_a_reply_key_named_after_a_chunk_is_never_logged(caplog, monkeypatch):
    monkeypatch.setenv("KINJECT_LOG_MODEL_IO", "1")
    caplog.set_level(logging.DEBUG)
    reply = json.dumps({**_answer(HONEST_SUMMARY), "confidence": 0.5, SECRET_CHUNK: 1})
    turn = KnowledgeInjector(
        ListKB([SECRET_CHUNK]),
        restricted=True,
        summarizer_model=hostile_summarizer(lambda m: reply),
    ).prepare([HumanMessage(QUESTION)])
    assert turn.manifest.summary_reason == "summarizer_error"
    assert "90412" not in caplog.text and "Treasury" not in caplog.text


def test_the_confidence_is_released_as_a_bucket_only():
    reply = json.dumps({**_answer(HONEST_SUMMARY), "confidence": 0.729418})
    turn = KnowledgeInjector(
        ListKB([SECRET_CHUNK]),
        restricted=True,
        summarizer_model=hostile_summarizer(lambda m: reply),
    ).prepare([HumanMessage(QUESTION)])
    assert turn.manifest.summary_confidence == "medium"
    assert "729418" not in json.dumps(turn.manifest.to_dict())
    assert "729418" not in turn.dynamic_context and turn.safe_summary.confidence == "medium"


@pytest.mark.parametrize("surface", ["graph", "middleware"])
def test_the_host_lends_its_summarizer_to_a_separate_tool(surface):
    """The tool has no summarizer of its own; the restricted host's writes its summary."""
    chunks = [SECRET_CHUNK] + [f"Payment rule {i}: two approvals are needed." for i in range(5)]
    summarizer = hostile_summarizer(_answer(HONEST_SUMMARY))
    turn = run_surface(
        surface,
        kb=ListKB(chunks),
        question=QUESTION,
        tool_origin="separate",
        events=False,
        summarizer=summarizer,
    )
    tool_message = next(m for m in turn.channels["output"]["messages"] if m.type == "tool")
    assert tool_message.text.startswith("[Restricted Knowledge Summary]")
    assert tool_message.artifact["reason"] == "answerable"
    assert "90412" not in turn.text("main_model")


def test_stored_flags_are_read_from_the_store(tmp_path):
    kb = KnowledgeBase("flags", path=tmp_path, embeddings=WordHashEmbedding(), restricted=True)
    kb.add_documents([Document(page_content="Leave requests go to HR.")])
    flags = source_flags(kb)
    assert flags.restricted is True and flags.sensitive_sources is False and not flags.errors
    assert source_flags(kb.as_retriever()).restricted is True  # found through the wrapper
