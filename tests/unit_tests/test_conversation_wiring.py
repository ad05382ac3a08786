"""Issue 13 wiring: switches, the knowledge cap, history trimming, the query model, logs.

Every surface (the injector, the graph, the node, the agent middleware and the tool)
takes the same settings; these tests check that each switch takes effect on each
surface, and that the per-turn log line and the opt-in model I/O lines appear.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.graph import START, MessagesState, StateGraph

from langchain_knowledge_inject import (
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
    strip_injected,
)
from langchain_knowledge_inject._surfaces.node import create_knowledge_node
from langchain_knowledge_inject._turn.formatting import KnowledgeBlockTemplate
from langchain_knowledge_inject._turn.logs import MODEL_IO_LOGGER, TURN_LOGGER
from langchain_knowledge_inject.settings import KnowledgeSettings
from tests.unit_tests.fakes import RecordingChatModel as MainModel
from tests.unit_tests.restricted_harness import ListKB

LEAVE = "Employees receive 25 days of annual leave per calendar year."
CHUNKS = (LEAVE, "Part-time staff get leave pro rata to their hours.", "Carry-over: 5 days.")
SURFACES = ("injector", "graph", "node", "middleware")


class Recorder:
    """A context block that records finished turns (like an ``EpisodicMemory``)."""

    name = "recorder"
    priority = 10
    max_tokens = None

    def __init__(self) -> None:
        self.recorded: list[list[BaseMessage]] = []

    def render(self, *, query: str, messages: Sequence[BaseMessage], config: Any = None) -> None:
        return None

    async def arender(self, **kwargs: Any) -> None:
        return None

    def record_turn(self, messages: Sequence[BaseMessage], *, config: Any = None) -> str:
        self.recorded.append(list(messages))
        return f"ep-{len(self.recorded)}"

    async def arecord_turn(self, messages: Sequence[BaseMessage], *, config: Any = None) -> str:
        return self.record_turn(messages, config=config)


def _run(
    surface: str,
    kb: Any,
    messages: list[BaseMessage],
    *,
    config: dict[str, Any] | None = None,
    blocks: Sequence[Any] = (),
    **options: Any,
) -> tuple[list[BaseMessage], MainModel]:
    """One turn on ``surface``; returns what the main model received and the model."""
    model = MainModel()
    config = {"configurable": {"thread_id": "t1", **((config or {}).get("configurable") or {})}}
    if surface == "injector":
        injector = KnowledgeInjector(kb, blocks=blocks, **options)
        sent = injector.invoke(messages, config)
        model.invoke(sent)
        if injector.records_turns:
            injector.record_turn([*messages, AIMessage("ok")], config)
    elif surface == "graph":
        graph = create_knowledge_graph(model, kb, blocks=blocks, **options)
        graph.invoke({"messages": messages}, config)
    elif surface == "node":
        builder = StateGraph(MessagesState)
        builder.add_node("answer", create_knowledge_node(model, kb, blocks=blocks, **options))
        builder.add_edge(START, "answer")
        builder.compile().invoke({"messages": messages}, config)
    else:
        middleware = KnowledgeInjectionMiddleware(kb, blocks=blocks, **options)
        agent = create_agent(model, tools=[], middleware=[middleware])
        agent.invoke({"messages": messages}, config)
    return model.received[0], model


def _texts(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(m.text for m in messages)


# --- memory: false, knowledge_enabled, the constructor switch ---------------------------------


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("switch", ["memory", "knowledge_enabled", "constructor"])
def test_switched_off_injects_nothing_and_records_nothing(surface, switch):
    kb, recorder = ListKB(CHUNKS), Recorder()
    options: dict[str, Any] = {"enabled": False} if switch == "constructor" else {}
    config = {"configurable": {switch: False}} if switch != "constructor" else None
    received, _ = _run(
        surface, kb, [HumanMessage("How much annual leave?")], config=config,
        blocks=[recorder], **options,
    )  # fmt: skip
    assert kb.calls == []  # nothing searched
    assert [m.text for m in received] == ["How much annual leave?"]  # no block, no prompt
    assert recorder.recorded == []  # and nothing recorded


@pytest.mark.parametrize("surface", SURFACES)
def test_memory_true_per_request_switches_a_default_off_surface_on_and_records(surface):
    kb, recorder = ListKB(CHUNKS), Recorder()
    received, _ = _run(
        surface, kb, [HumanMessage("How much annual leave?")],
        config={"configurable": {"memory": True}}, blocks=[recorder], enabled=False,
    )  # fmt: skip
    assert LEAVE in _texts(received)
    assert len(recorder.recorded) == 1


def test_the_tool_has_the_same_switch():
    kb = ListKB(CHUNKS)
    off = create_knowledge_base_search_tool(kb, enabled=False)
    assert "switched off" in off.invoke({"query": "leave"})
    assert kb.calls == []
    on = create_knowledge_base_search_tool(kb)
    assert "switched off" in on.invoke({"query": "leave"}, {"configurable": {"memory": False}})
    assert LEAVE in on.invoke({"query": "leave"})
    assert len(kb.calls) == 1


# --- the knowledge cap ---------------------------------------------------------------------------


def test_knowledge_takes_its_own_cap_within_the_shared_budget():
    kb = ListKB(CHUNKS)
    question = [HumanMessage("How much annual leave?")]
    whole = KnowledgeInjector(kb, max_tokens=2000).prepare(question)
    capped = KnowledgeInjector(
        kb, max_tokens=2000, knowledge_max_tokens=whole.manifest.tokens_used - 1
    )
    turn = capped.prepare(question)
    assert len(whole.manifest.chunk_ids) == 3
    assert 0 < len(turn.manifest.chunk_ids) < 3
    assert turn.manifest.tokens_used <= whole.manifest.tokens_used - 1
    assert {d["reason"] for d in turn.manifest.dropped} == {"knowledge_cap"}
    per_request = KnowledgeInjector(kb).prepare(
        question, {"configurable": {"knowledge_max_tokens": whole.manifest.tokens_used - 1}}
    )
    assert per_request.manifest.chunk_ids == turn.manifest.chunk_ids


def test_the_knowledge_cap_applies_beside_other_blocks():
    class Note:
        name, priority, max_tokens = "note", 100, None

        def render(self, **kwargs: Any) -> str:
            return "[Note]\nkeep this"

        async def arender(self, **kwargs: Any) -> str:
            return self.render()

    kb = ListKB(CHUNKS)
    question = [HumanMessage("How much annual leave?")]
    alone = KnowledgeInjector(kb).prepare(question).manifest.tokens_used
    turn = KnowledgeInjector(kb, blocks=[Note()], knowledge_max_tokens=alone - 5).prepare(question)
    assert "[Note]\nkeep this" in turn.dynamic_context
    assert 0 < len(turn.manifest.chunk_ids) < 3


# --- history trimming and the query model on every surface --------------------------------------


def _long_chat() -> list[BaseMessage]:
    chat: list[BaseMessage] = [SystemMessage("You are the HR assistant.")]
    for i in range(6):
        chat += [HumanMessage(f"Old question {i} " + "word " * 60), AIMessage("Answer " * 60)]
    return [*chat, HumanMessage("And for part-timers?")]


@pytest.mark.parametrize("surface", SURFACES)
def test_history_is_trimmed_on_every_surface(surface):
    received, _ = _run(surface, ListKB(CHUNKS), _long_chat(), history_max_tokens=400)
    texts = [m.text for m in received]
    assert any(t.startswith("You are the HR assistant.") for t in texts[:2])  # system prompt kept
    assert texts[-1].endswith("And for part-timers?")
    assert not any(t.startswith("Old question 0") for t in texts)  # the oldest turns went
    assert any(t.startswith("Old question 5") for t in texts)  # the newest stayed
    assert LEAVE in _texts(received)


def test_the_manifest_says_what_trimming_cut_and_which_query_was_used():
    condenser = GenericFakeChatModel(messages=iter(["annual leave for part-time staff"]))
    kb = ListKB(CHUNKS)
    injector = KnowledgeInjector(kb, history_max_tokens=400, query_model=condenser)
    turn = injector.prepare(_long_chat())
    history = turn.manifest.history
    assert history is not None and history["messages_removed"] > 0
    assert history["tokens_after"] <= 400 < history["tokens_before"]
    assert turn.manifest.query == "annual leave for part-time staff"
    assert turn.manifest.query_source == "model"
    assert kb.calls[0]["query"] == "annual leave for part-time staff"
    assert injector.prepare(_long_chat()).manifest.query_source == "cache"
    assert KnowledgeInjector(kb).prepare(_long_chat()).manifest.history is None


@pytest.mark.parametrize("surface", SURFACES)
def test_the_query_model_is_used_on_every_surface(surface):
    condenser = GenericFakeChatModel(messages=iter(["part-time annual leave entitlement"]))
    kb = ListKB(CHUNKS)
    chat = [
        HumanMessage("How much annual leave?"),
        AIMessage("25 days."),
        HumanMessage("And part-timers?"),
    ]
    _run(surface, kb, chat, query_model=condenser)
    assert kb.calls[0]["query"] == "part-time annual leave entitlement"


def test_a_failing_query_model_falls_back_to_the_heuristic(caplog):
    class Broken(GenericFakeChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("provider down")

    kb = ListKB(CHUNKS)
    chat = [
        HumanMessage("Meal allowance at home?"),
        AIMessage("EUR 45."),
        HumanMessage("and abroad?"),
    ]
    with caplog.at_level(logging.WARNING):
        turn = KnowledgeInjector(kb, query_model=Broken(messages=iter([]))).prepare(chat)
    assert turn.manifest.query_source == "heuristic"
    assert turn.manifest.query == "and abroad? meal allowance home"
    assert LEAVE in turn.dynamic_context


# --- the datetime suffix and a custom template's header -----------------------------------------


def test_datetime_suffix_goes_on_the_current_message_and_strips():
    now = datetime(2025, 3, 14, 9, 30, tzinfo=timezone.utc)
    injector = KnowledgeInjector(
        ListKB(CHUNKS), datetime_suffix="\n\n[Current time: %Y-%m-%d %H:%M %Z]"
    )
    question = [HumanMessage("How much annual leave?")]
    out = injector.invoke(question, {"configurable": {"now": now}})
    knowledge, label, asked, suffix = out[-1].content
    assert label == {"type": "text", "text": "[User Message]"}
    assert label == {"type": "text", "text": "[User Message]"}
    assert knowledge["text"].startswith("[Retrieved Knowledge]")
    assert (asked["text"], suffix["text"]) == (
        "How much annual leave?", "\n\n[Current time: 2025-03-14 09:30 UTC]"
    )
    assert [m.content for m in strip_injected(out)][1:] == ["How much annual leave?"]
    off = injector.invoke(question, {"configurable": {"now": now, "memory": False}})
    assert off == question  # switched off: no suffix either


def test_a_custom_template_header_is_stripped_from_plain_dict_histories():
    template = KnowledgeBlockTemplate(header="[Company Docs]")
    injector = KnowledgeInjector(ListKB(CHUNKS), template=template, knowledge_prompt=None)
    first = injector.invoke([HumanMessage("How much annual leave?")])
    plain = [{"role": m.type.replace("human", "user"), "content": m.content} for m in first]
    second = injector.invoke([*plain, {"role": "assistant", "content": "25 days."},
                              {"role": "user", "content": "And part-timers?"}])  # fmt: skip
    assert sum("[Company Docs]" in m.text for m in second) == 1
    assert second[0].text == "How much annual leave?"  # the earlier block is gone


# --- logs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", SURFACES)
def test_one_info_line_per_turn_on_every_surface(surface, caplog):
    caplog.set_level(logging.INFO, logger=TURN_LOGGER)
    kb = ListKB(CHUNKS)
    _run(surface, kb, [HumanMessage("How much annual leave?")])
    lines = [r for r in caplog.records if r.name == TURN_LOGGER]
    assert len(lines) == 1
    text = lines[0].getMessage()
    assert f"surface={surface if surface != 'injector' else 'injector'}" in text
    assert "injected=True" in text and "chunks=vault-0,vault-1,vault-2" in text
    assert "scores=0.900,0.850,0.800" in text and "ms=" in text and "tokens=" in text
    assert "annual leave" not in text  # ids and figures only, never text


@pytest.mark.parametrize("surface", ["graph", "node", "middleware"])
@pytest.mark.parametrize("how", ["setting", "env"])
def test_main_model_request_and_response_are_logged_on_request(surface, how, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger=MODEL_IO_LOGGER)
    options = {"log_model_io": True} if how == "setting" else {}
    if how == "env":
        monkeypatch.setenv("KINJECT_LOG_LLM_REQUESTS", "1")
    _run(surface, ListKB(CHUNKS), [HumanMessage("How much annual leave?")], **options)
    lines = [r.getMessage() for r in caplog.records if r.name == MODEL_IO_LOGGER]
    assert [line.split()[0] for line in lines] == ["LLM_REQUEST", "LLM_RESPONSE"]
    assert LEAVE in lines[0] and "[Retrieved Knowledge]" in lines[0]
    assert lines[1].endswith("ai: ok")


@pytest.mark.parametrize("surface", ["graph", "node", "middleware"])
def test_model_io_logging_is_off_by_default(surface, caplog):
    caplog.set_level(logging.DEBUG)
    _run(surface, ListKB(CHUNKS), [HumanMessage("How much annual leave?")])
    assert not [r for r in caplog.records if r.name == MODEL_IO_LOGGER]


def test_the_settings_object_carries_every_switch_to_every_surface():
    settings = KnowledgeSettings(enabled=False)
    kb = ListKB(CHUNKS)
    for surface in SURFACES:
        received, _ = _run(surface, kb, [HumanMessage("Leave?")], settings=settings)
        assert [m.text for m in received] == ["Leave?"]
    assert kb.calls == []


def test_safe_summary_start_and_finish_lines(caplog):
    from tests.unit_tests.restricted_fixtures import make_summarizer

    caplog.set_level(logging.INFO, logger="langchain_knowledge_inject.restriction")
    injector = KnowledgeInjector(
        ListKB(CHUNKS), restricted=True, summarizer_model=make_summarizer("honest")
    )
    injector.invoke([HumanMessage("How much annual leave?")])
    lines = [r.getMessage() for r in caplog.records if r.name.endswith(".restriction")]
    started = [line for line in lines if line.startswith("safe summary started")]
    finished = [line for line in lines if line.startswith("safe summary completed")]
    assert len(started) == 1 and "3 chunks" in started[0]
    assert len(finished) == 1 and "decision=answer" in finished[0]
    assert all(LEAVE not in line for line in lines)


@pytest.mark.parametrize("surface", ["graph", "node", "middleware"])
def test_restricted_model_io_lines_carry_lengths_and_hashes_only(surface, caplog):
    from tests.unit_tests.restricted_fixtures import make_summarizer

    caplog.set_level(logging.INFO, logger=MODEL_IO_LOGGER)
    question = "How much annual leave?"
    received, _ = _run(
        surface, ListKB(CHUNKS), [HumanMessage(question)], restricted=True,
        summarizer_model=make_summarizer("honest"), log_model_io=True,
    )  # fmt: skip
    lines = [r.getMessage() for r in caplog.records if r.name == MODEL_IO_LOGGER]
    assert [line.split()[0] for line in lines] == ["LLM_REQUEST", "LLM_RESPONSE"]
    assert "restricted=True" in lines[0]
    assert question not in lines[0] and "[Restricted Knowledge Summary]" not in lines[0]
    assert "chars, sha256 " in lines[0] and "chars, sha256 " in lines[1]
    assert any(m.text.startswith("[Restricted Knowledge Summary]") for m in received)
