"""create_knowledge_graph: nodes, checkpointed multi-turn history, overrides, manifest, drawing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from langchain_knowledge_inject import (
    ConfigurationError,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
    strip_injected,
)
from langchain_knowledge_inject._turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
from langchain_knowledge_inject._turn.placement import INJECTED_KEY, is_injected
from tests.unit_tests.fakes import (
    LEAVE,
    PARKING,
    NumberedChatModel,
    dump_messages,
    hr_documents,
    injected_text,
)

SNAPSHOT = Path(__file__).parent / "snapshots" / "knowledge_graph.mmd"
SNAPSHOT_TOOLS = Path(__file__).parent / "snapshots" / "knowledge_graph_tools.mmd"
QUESTIONS = [
    "How many days of annual leave?",
    "What do I need for expenses receipt rules?",
    "Tell me about the parking garage.",
    "Is remote work allowed?",
    "sick leave note?",
    "Thanks, that is all for leave.",
]


@pytest.fixture
def kb(make_kb):
    return make_kb(hr_documents("leave", "sick", "expenses", "remote"))


def _thread(name: str = "t1", **configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": name, **configurable}}


def _human(i: int) -> HumanMessage:
    return HumanMessage(QUESTIONS[i % len(QUESTIONS)], id=f"h{i}")


# --- one turn ---------------------------------------------------------------------------


def test_model_sees_system_prompt_history_and_dynamic_context(kb):
    model = NumberedChatModel()
    graph = create_knowledge_graph(
        model, kb, system_prompt="You are HR.", checkpointer=InMemorySaver(), keep_manifest=True
    )
    state = graph.invoke(
        {"messages": [HumanMessage("How many days of annual leave?", id="h0")]}, _thread()
    )

    sent = model.received[-1]
    assert [m.type for m in sent] == ["system", "human"]  # roles strictly alternate
    assert sent[0].content == f"You are HR.\n\n{KNOWLEDGE_SYSTEM_PROMPT}"
    knowledge, label, question = sent[1].content
    assert label == {"type": "text", "text": "[User Message]"}
    assert label == {"type": "text", "text": "[User Message]"}
    assert is_injected(sent[1]) and knowledge["text"].startswith("[Retrieved Knowledge]")
    assert LEAVE in knowledge["text"] and "Source: leave.md" in knowledge["text"]
    assert question["text"] == "How many days of annual leave?"
    # only the reply is added to the history
    assert [(m.type, m.content) for m in state["messages"]] == [
        ("human", "How many days of annual leave?"),
        ("ai", "reply 1"),
    ]
    assert state["dynamic_context"] == knowledge["text"]
    assert [d.metadata["source"] for d in state["retrieved"]] == ["leave.md"]
    assert state["knowledge_manifest"]["injected"] is True
    assert state["knowledge_manifest"]["sources"] == ["leave.md"]


def test_nothing_retrieved_sends_exactly_system_and_history(kb):
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, system_prompt="You are HR.", keep_manifest=True)
    state = graph.invoke({"messages": [HumanMessage("Tell me about the parking garage.")]})
    assert [m.type for m in model.received[-1]] == ["system", "human"]
    assert not any(is_injected(m) for m in model.received[-1])
    assert state["dynamic_context"] is None
    assert state["knowledge_manifest"]["injected"] is False
    assert state["knowledge_manifest"]["chunk_ids"] == []


def test_leading_system_message_in_history_gets_the_knowledge_prompt(kb):
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb)
    graph.invoke({"messages": [SystemMessage("Be brief."), HumanMessage("annual leave?")]})
    sent = model.received[-1]
    assert sum(isinstance(m, SystemMessage) for m in sent) == 1
    assert sent[0].content == f"Be brief.\n\n{KNOWLEDGE_SYSTEM_PROMPT}"


def test_knowledge_prompt_none_leaves_the_system_prompt_alone(kb):
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, system_prompt="S", knowledge_prompt=None)
    graph.invoke({"messages": [HumanMessage("annual leave?")]})
    assert model.received[-1][0].content == "S"


def test_checkpoints_carry_no_manifest_unless_asked(kb):
    saver = InMemorySaver()
    graph = create_knowledge_graph(NumberedChatModel(), kb, checkpointer=saver)
    state = graph.invoke({"messages": [HumanMessage("annual leave?")]}, _thread())
    assert state["knowledge_manifest"] is None and state["dynamic_context"]
    assert "prefix_hash" not in str(list(saver.list(_thread())))  # a manifest-only field


# --- many turns with a checkpointer -----------------------------------------------------


def _converse(graph, turns: int, config: dict[str, Any]) -> list[BaseMessage]:
    state: dict[str, Any] = {}
    for i in range(turns):
        state = graph.invoke({"messages": [_human(i)]}, config)
    return state["messages"]


def test_checkpointed_history_is_byte_identical_to_a_run_without_injection(kb):
    turns = 12
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, system_prompt="S", checkpointer=InMemorySaver())
    with_knowledge = _converse(graph, turns, _thread("on"))

    plain_model = NumberedChatModel()
    plain = create_knowledge_graph(plain_model, kb, system_prompt="S", checkpointer=InMemorySaver())
    without = _converse(plain, turns, _thread("off", knowledge_enabled=False))

    assert len(with_knowledge) == 2 * turns
    assert dump_messages(with_knowledge) == dump_messages(without)
    assert not any(is_injected(m) or "[Retrieved Knowledge]" in m.text for m in with_knowledge)
    # the model did get knowledge, in exactly one message per call, never accumulated
    injected_per_call = [sum(is_injected(m) for m in call) for call in model.received]
    assert max(injected_per_call) == 1
    assert sum(injected_per_call) >= turns // 2
    assert all(sum(is_injected(m) for m in call) == 0 for call in plain_model.received)
    # what the model saw = system + stored history, the current message carrying the knowledge
    for i, call in enumerate(model.received):
        clean = strip_injected(call)
        assert dump_messages(clean[1:]) == dump_messages(with_knowledge[: 2 * i + 1])


def test_sqlite_checkpointer_keeps_an_injection_free_history(kb, tmp_path):
    turns = 15
    db = tmp_path / "checkpoints.sqlite"
    model = NumberedChatModel()
    with sqlite3.connect(db, check_same_thread=False) as conn:
        graph = create_knowledge_graph(model, kb, system_prompt="S", checkpointer=SqliteSaver(conn),
                                       keep_manifest=True)  # fmt: skip
        _converse(graph, turns, _thread("sql"))
    # a new process would read this: reopen the file with a fresh saver
    with sqlite3.connect(db, check_same_thread=False) as conn:
        reader = create_knowledge_graph(NumberedChatModel(), kb, checkpointer=SqliteSaver(conn))
        stored = reader.get_state(_thread("sql")).values
    plain = create_knowledge_graph(
        NumberedChatModel(), kb, system_prompt="S", checkpointer=InMemorySaver()
    )
    without = _converse(plain, turns, _thread("off", knowledge_enabled=False))

    assert dump_messages(stored["messages"]) == dump_messages(without)
    assert len(stored["messages"]) == 2 * turns
    assert not any(is_injected(m) for m in stored["messages"])
    assert isinstance(stored["knowledge_manifest"], dict)
    assert all(isinstance(d, Document) for d in stored["retrieved"])


async def test_async_multi_turn_matches_sync(kb):
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, system_prompt="S", checkpointer=InMemorySaver())
    for i in range(4):
        state = await graph.ainvoke({"messages": [_human(i)]}, _thread("async"))
    sync = create_knowledge_graph(
        NumberedChatModel(), kb, system_prompt="S", checkpointer=InMemorySaver()
    )
    assert dump_messages(state["messages"]) == dump_messages(_converse(sync, 4, _thread("sync")))
    assert is_injected(model.received[0][1])


def test_per_turn_fields_are_overwritten_not_accumulated(kb):
    graph = create_knowledge_graph(NumberedChatModel(), kb, checkpointer=InMemorySaver(),
                                   keep_manifest=True)  # fmt: skip
    first = graph.invoke({"messages": [HumanMessage("annual leave?")]}, _thread())
    assert first["retrieved"] and first["dynamic_context"]
    second = graph.invoke({"messages": [HumanMessage("parking garage?")]}, _thread())
    assert second["retrieved"] == []
    assert second["dynamic_context"] is None
    assert second["knowledge_manifest"]["injected"] is False
    assert second["knowledge_manifest"]["query"] == "parking garage?"


def test_document_added_between_turns_is_used_on_the_next_turn(kb):
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, checkpointer=InMemorySaver(), keep_manifest=True)
    graph.invoke({"messages": [HumanMessage("When does the parking garage open?")]}, _thread())
    assert not any(is_injected(m) for m in model.received[-1])

    kb.add_documents([Document(PARKING, metadata={"source": "parking.md"})])
    state = graph.invoke(
        {"messages": [HumanMessage("When does the parking garage open?")]}, _thread()
    )
    assert "parking.md" in state["knowledge_manifest"]["sources"]
    assert PARKING in injected_text(model.received[-1])


# --- per-request overrides --------------------------------------------------------------


def test_override_knowledge_enabled_false_skips_retrieval_and_injection(kb, monkeypatch):
    calls = []
    monkeypatch.setattr(kb, "search", lambda *a, **k: calls.append(a) or [])
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, keep_manifest=True)
    state = graph.invoke(
        {"messages": [HumanMessage("annual leave?")]},
        {"configurable": {"knowledge_enabled": False}},
    )
    assert calls == []
    assert not any(is_injected(m) for m in model.received[-1])
    assert state["knowledge_manifest"]["injected"] is False
    assert state["retrieval_query"] is None


def test_override_top_k(kb):
    graph = create_knowledge_graph(NumberedChatModel(), kb, keep_manifest=True)
    msg = {"messages": [HumanMessage("manager approval")]}
    assert len(graph.invoke(msg)["knowledge_manifest"]["chunk_ids"]) == 2
    assert (
        len(graph.invoke(msg, {"configurable": {"top_k": 1}})["knowledge_manifest"]["chunk_ids"])
        == 1
    )


def test_override_min_score(kb):
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, keep_manifest=True)
    state = graph.invoke(
        {"messages": [HumanMessage("annual leave?")]}, {"configurable": {"min_score": 0.99}}
    )
    assert state["knowledge_manifest"]["injected"] is False
    assert not any(is_injected(m) for m in model.received[-1])


def test_override_tenant_id(kb):
    kb.add_documents(
        [Document("Tenant acme: parking garage badges at desk 4.", metadata={"source": "acme.md"})],
        tenant_id="acme",
    )
    graph = create_knowledge_graph(NumberedChatModel(), kb, keep_manifest=True)
    msg = {"messages": [HumanMessage("parking garage badges")]}
    assert "acme.md" not in graph.invoke(msg)["knowledge_manifest"]["sources"]
    tenant = graph.invoke(msg, {"configurable": {"tenant_id": "acme"}})
    assert tenant["knowledge_manifest"]["sources"] == ["acme.md"]


@pytest.mark.parametrize("placement", ["postfix", "system", "dynamic_context"])
def test_override_placement(kb, placement):
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, system_prompt="S", checkpointer=InMemorySaver(),
                                   keep_manifest=True)  # fmt: skip
    state = graph.invoke(
        {"messages": [HumanMessage("annual leave?", id="h")]}, _thread(placement=placement)
    )
    sent = model.received[-1]
    if placement == "postfix":
        assert [m.type for m in sent] == ["system", "human"]
        assert sent[1].content.startswith("annual leave?\n\n[Retrieved Knowledge]")
    elif placement == "dynamic_context":
        assert [m.type for m in sent] == ["system", "human", "human"]
        assert sent[1].additional_kwargs[INJECTED_KEY]["placement"] == "dynamic_context"
    else:
        assert [m.type for m in sent] == ["system", "system", "human"]
        assert sent[1].additional_kwargs[INJECTED_KEY]["placement"] == "system"
    assert state["knowledge_manifest"]["placement"] == placement
    assert state["messages"][0].content == "annual leave?"
    assert state["messages"][0].additional_kwargs == {}


def test_invalid_override_raises_configuration_error(kb):
    graph = create_knowledge_graph(NumberedChatModel(), kb)
    with pytest.raises(ConfigurationError):
        graph.invoke(
            {"messages": [HumanMessage("leave")]}, {"configurable": {"placement": "middle"}}
        )


def test_invalid_constructor_options_raise(kb):
    with pytest.raises(ConfigurationError):
        create_knowledge_graph(NumberedChatModel(), kb, placement="middle")
    with pytest.raises(ConfigurationError):
        create_knowledge_graph(object(), kb)  # type: ignore[arg-type]


# --- the manifest -----------------------------------------------------------------------


def test_manifest_on_custom_stream(kb):
    graph = create_knowledge_graph(NumberedChatModel(), kb)
    chunks = list(graph.stream({"messages": [HumanMessage("annual leave?")]}, stream_mode="custom"))
    assert len(chunks) == 1
    manifest = chunks[0]["knowledge_injection"]
    assert manifest["injected"] is True and manifest["sources"] == ["leave.md"]


async def test_manifest_as_custom_event(kb):
    graph = create_knowledge_graph(NumberedChatModel(), kb)
    events = [
        e
        async for e in graph.astream_events(
            {"messages": [HumanMessage("annual leave?")]}, version="v2"
        )
        if e["event"] == "on_custom_event" and e["name"] == "knowledge_injection"
    ]
    assert len(events) == 1
    assert events[0]["data"]["sources"] == ["leave.md"]


def test_prefix_hash_is_stable_across_turns(kb):
    graph = create_knowledge_graph(
        NumberedChatModel(), kb, system_prompt="S", checkpointer=InMemorySaver(), keep_manifest=True
    )
    first = graph.invoke({"messages": [HumanMessage("annual leave?")]}, _thread())
    from langchain_knowledge_inject._turn.manifest import hash_messages

    second = graph.invoke({"messages": [HumanMessage("sick leave note?")]}, _thread())
    prefix = [SystemMessage(f"S\n\n{KNOWLEDGE_SYSTEM_PROMPT}"), *second["messages"][:-2]]
    assert second["knowledge_manifest"]["prefix_hash"] == hash_messages(prefix)
    assert first["knowledge_manifest"]["prefix_hash"] != second["knowledge_manifest"]["prefix_hash"]


# --- restricted mode --------------------------------------------------------------------

SAFE_REPLY = json.dumps(
    {
        "decision": "answer",
        "reason": "answerable",
        "summary": "Staff get a generous yearly holiday allowance; plan it with your manager.",
        "answer_guidance": "Explain the allowance in general terms.",
        "confidence": 0.8,
    }
)


def test_restricted_graph_summarizes_inside_the_safe_summarize_step(kb):
    model = NumberedChatModel()
    summarizer = GenericFakeChatModel(messages=iter([SAFE_REPLY]))
    graph = create_knowledge_graph(model, kb, restricted=True, summarizer_model=summarizer)
    nodes = [
        next(iter(update))
        for update in graph.stream(
            {"messages": [HumanMessage("annual leave?")]}, stream_mode="updates"
        )
    ]
    assert nodes == ["retrieve", "safe_summarize", "build_context", "call_model"]
    injected = injected_text(model.received[-1])
    assert "[Restricted Knowledge Summary]" in injected
    assert LEAVE not in injected and "25 days" not in injected


def test_restricted_without_summarizer_fails_closed(kb):
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, restricted=True, keep_manifest=True)
    state = graph.invoke({"messages": [HumanMessage("annual leave?")]})
    assert state["safe_summary"]["reason"] == "summarizer_error"
    assert state["knowledge_manifest"]["summary_decision"] == "refuse"
    sent = "\n".join(m.text for m in model.received[-1])
    assert LEAVE not in sent and "25 days" not in sent


def test_restricted_per_request_and_not_otherwise(kb):
    graph = create_knowledge_graph(NumberedChatModel(), kb)
    msg = {"messages": [HumanMessage("annual leave?")]}
    plain = graph.invoke(msg)
    assert plain["safe_summary"] is None and LEAVE in plain["dynamic_context"]
    restricted = graph.invoke(msg, {"configurable": {"restricted": True}})
    assert restricted["safe_summary"]["reason"] == "summarizer_error"
    assert LEAVE not in restricted["dynamic_context"]
    by_context = graph.invoke(msg, context={"restricted": True})  # the runtime context
    assert by_context["safe_summary"] == restricted["safe_summary"]
    assert by_context["dynamic_context"] == restricted["dynamic_context"]


# --- tools, own graphs, drawing ---------------------------------------------------------


def test_tool_loop_keeps_context_next_to_the_user_message_and_tool_skips_injected(kb):
    tool = create_knowledge_base_search_tool(kb, top_k=4)
    model = NumberedChatModel(
        script=[
            AIMessage(
                "",
                id="a1",
                tool_calls=[
                    {"name": "knowledge_base_search", "args": {"query": "annual leave"}, "id": "c1"}
                ],
            ),
            AIMessage("done", id="a2"),
        ]
    )
    graph = create_knowledge_graph(model, kb, tools=[tool], checkpointer=InMemorySaver())
    state = graph.invoke({"messages": [HumanMessage("annual leave?", id="h")]}, _thread())
    assert len(model.received) == 2
    second = model.received[1]
    assert [m.type for m in second] == ["system", "human", "ai", "tool"]
    assert is_injected(second[1]) and strip_injected(second)[1].content == "annual leave?"
    assert second[-1].artifact == []  # leave.md was injected this turn: not repeated
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]


@pytest.mark.parametrize(("snapshot", "with_tools"), [(SNAPSHOT, False), (SNAPSHOT_TOOLS, True)])
def test_mermaid_drawing_matches_snapshot(kb, snapshot, with_tools):
    tools = [create_knowledge_base_search_tool(kb)] if with_tools else None
    drawing = (
        create_knowledge_graph(NumberedChatModel(), kb, tools=tools).get_graph().draw_mermaid()
    )
    assert drawing == snapshot.read_text(encoding="utf-8")
