"""The graph's four steps: drawn, streamed, read once a turn, interrupted and recomposed.

- ``retrieve -> [safe_summarize] -> build_context -> call_model``: the drawing, and the
  updates of an open turn (three nodes) and of a restricted turn (all four).
- A restricted turn on a real Chroma store, restricted by its stored flag: no update,
  no value, no checkpoint (the bytes of a ``SqliteSaver`` file included) and no
  ``astream_events`` event holds a raw chunk, with an honest and a copying summarizer;
  the same check finds the chunk in the open turn's file (the check can fail).
- The stored flags are read once a turn (by ``retrieve``); the later nodes rebuild the
  request from ``knowledge_turn``: a turn restricted when it started stays restricted
  after ``kb.unrestrict()`` mid-turn, a record of another turn is not trusted, and a
  turn that the search finds restricted after all goes through ``safe_summarize``.
- ``create_knowledge_nodes`` in a graph of one's own: a permission check between
  ``retrieve`` and ``build_context``, ``interrupt_before=["call_model"]`` with the
  dynamic_context shown to a person, edited and resumed, across a SQLite restart.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph

from langchain_knowledge_inject import (
    KnowledgeInjector,
    KnowledgeState,
    create_knowledge_graph,
    create_knowledge_nodes,
)
from langchain_knowledge_inject._restricted.scope import SourceFlags
from langchain_knowledge_inject._surfaces.pipeline import KnowledgePipeline
from langchain_knowledge_inject._turn.placement import strip_injected
from langchain_knowledge_inject._turn.retrieval import Retrieved
from tests.unit_tests.fakes import LEAVE, NumberedChatModel, hr_documents, injected_text
from tests.unit_tests.restricted_fixtures import RESTRICTED_DOCUMENTS, make_summarizer
from tests.unit_tests.restricted_harness import channel_text, count_raw

STEPS = ["retrieve", "safe_summarize", "build_context", "call_model"]
OPEN_STEPS = ["retrieve", "build_context", "call_model"]
QUESTION = "What are the rules on annual leave, support targets and commission?"
CHUNKS = [d.page_content for d in RESTRICTED_DOCUMENTS]
OPTIONS: dict[str, Any] = {"min_score": 0.0, "top_k": 4}
MODES = ["updates", "values", "debug", "custom", "messages", "checkpoints", "tasks"]


@pytest.fixture
def hr(make_kb, tmp_path):
    return make_kb(hr_documents("leave", "sick", "expenses", "remote"), path=tmp_path / "hr")


@pytest.fixture
def vault(make_kb, tmp_path):
    docs = [d.model_copy(update={"id": None}) for d in RESTRICTED_DOCUMENTS]
    return make_kb(docs, name="ops", path=tmp_path / "vault", restricted=True)


@pytest.fixture
def flag_reads(monkeypatch) -> list[int]:
    """Counts the reads of the stored restriction flags (``KnowledgePipeline._flags``)."""
    reads: list[int] = []
    read = KnowledgePipeline._flags

    def counted(self: KnowledgePipeline) -> Any:
        reads.append(1)
        return read(self)

    monkeypatch.setattr(KnowledgePipeline, "_flags", counted)
    return reads


def _thread(name: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def _ask(text: str = QUESTION) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def _nodes(updates: list[dict[str, Any]]) -> list[str]:
    return [name for update in updates for name in update]


def _stored_bytes(db: Path) -> str:
    """Every byte SQLite wrote for the checkpoints (main file and write-ahead log)."""
    files = sorted(db.parent.glob(db.name + "*"))
    return "\n".join(f.read_bytes().decode("utf-8", "replace") for f in files)


# --- the drawing and the updates -------------------------------------------------------------


def test_the_drawing_has_the_four_steps_in_order(hr):
    drawn = create_knowledge_graph(NumberedChatModel(), hr).get_graph()
    assert list(drawn.nodes) == ["__start__", *STEPS, "__end__"]
    edges = {(e.source, e.target, e.conditional) for e in drawn.edges}
    assert edges == {
        ("__start__", "retrieve", False),
        ("retrieve", "safe_summarize", True),
        ("retrieve", "build_context", True),
        ("safe_summarize", "build_context", False),
        ("build_context", "call_model", False),
        ("call_model", "__end__", False),
    }


@pytest.mark.parametrize("run", ["sync", "async"])
def test_an_open_turn_streams_retrieve_build_context_and_call_model(hr, run):
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, hr, keep_manifest=True)
    question = _ask("How many days of annual leave?")
    if run == "sync":
        updates = list(graph.stream(question, stream_mode="updates"))
    else:

        async def collect() -> list[dict[str, Any]]:
            return [u async for u in graph.astream(question, stream_mode="updates")]

        updates = asyncio.run(collect())
    assert _nodes(updates) == OPEN_STEPS
    retrieved, built, called = (
        update[name] for update, name in zip(updates, OPEN_STEPS, strict=True)
    )
    assert retrieved["retrieval_query"] == "How many days of annual leave?"
    assert [d.page_content for d in retrieved["retrieved"]] == [LEAVE]
    assert retrieved["knowledge_turn"]["flags"]["restricted"] is False
    assert LEAVE in built["dynamic_context"] and built["knowledge_manifest"]["injected"]
    assert injected_text(model.received[-1]) == built["dynamic_context"]
    assert [m.content for m in called["messages"]] == ["reply 1"]


# --- a restricted turn, channel by channel ---------------------------------------------------


@pytest.mark.parametrize("kind", ["honest", "copying"])
def test_a_restricted_turn_streams_all_four_steps_and_no_channel_holds_a_raw_chunk(
    vault, kind, tmp_path
):
    db = tmp_path / "checkpoints.sqlite"
    model = NumberedChatModel()
    parts: dict[str, list[Any]] = {mode: [] for mode in MODES}
    with sqlite3.connect(db, check_same_thread=False) as conn:
        graph = create_knowledge_graph(
            model, vault, summarizer_model=make_summarizer(kind), checkpointer=SqliteSaver(conn),
            keep_manifest=True, **OPTIONS,
        )  # fmt: skip
        for mode, part in graph.stream(_ask(), _thread(), stream_mode=MODES):
            parts[mode].append(part)
        state = graph.get_state(_thread()).values
        history = list(graph.get_state_history(_thread()))

    async def events() -> list[Any]:
        async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
            graph = create_knowledge_graph(
                model, vault, summarizer_model=make_summarizer(kind), checkpointer=saver, **OPTIONS
            )
            return [e async for e in graph.astream_events(_ask(), _thread("t2"), version="v2")]

    parts["events"] = asyncio.run(events())
    assert _nodes(parts["updates"]) == STEPS
    summarized = parts["updates"][1]["safe_summarize"]
    expected = "answerable" if kind == "honest" else "leak_detected"
    assert summarized["safe_summary"]["reason"] == expected
    assert summarized["retrieved"] and all(d.page_content == "" for d in summarized["retrieved"])
    assert state["knowledge_turn"]["flags"]["restricted"] is True
    assert "[Restricted Knowledge Summary]" in injected_text(model.received[0])
    channels = {**parts, "state": state, "history": history, "main_model": model.received}
    raw = {name: count_raw(channel_text(value), CHUNKS) for name, value in channels.items()}
    raw["sqlite bytes"] = count_raw(_stored_bytes(db), CHUNKS)
    assert raw == dict.fromkeys(raw, 0)
    on_custom = [e for e in parts["events"] if e["event"] == "on_custom_event"]
    assert {e["name"] for e in on_custom} >= {"knowledge_injection", "safe_summary_completed"}


def test_the_sqlite_check_finds_an_open_turns_chunk(make_kb, tmp_path):
    """The control: the same check on an open knowledge base finds the chunks it stored."""
    docs = [d.model_copy(update={"id": None}) for d in RESTRICTED_DOCUMENTS]
    kb = make_kb(docs, name="ops", path=tmp_path / "open")
    db = tmp_path / "open.sqlite"
    with sqlite3.connect(db, check_same_thread=False) as conn:
        graph = create_knowledge_graph(
            NumberedChatModel(), kb, checkpointer=SqliteSaver(conn), **OPTIONS
        )
        graph.invoke(_ask(), _thread())
    assert count_raw(_stored_bytes(db), CHUNKS) > 0


# --- the request: once a turn, fail closed -------------------------------------------------------


@pytest.mark.parametrize("run", ["sync", "async"])
def test_the_stored_flags_are_read_once_a_turn(hr, vault, flag_reads, run):
    for kb in (hr, vault):
        graph = create_knowledge_graph(NumberedChatModel(), kb, checkpointer=InMemorySaver())
        for turn in range(2):
            flag_reads.clear()
            if run == "sync":
                graph.invoke(_ask(), _thread(kb.name))
            else:
                asyncio.run(graph.ainvoke(_ask(), _thread(kb.name)))
            assert len(flag_reads) == 1, (kb.name, turn)


def test_a_turn_restricted_when_it_started_stays_restricted(vault, flag_reads):
    model = NumberedChatModel()
    summarizer = make_summarizer("copying")
    nodes = create_knowledge_nodes(model, vault, summarizer_model=summarizer, **OPTIONS)
    graph = _wired(nodes).compile(checkpointer=InMemorySaver(), interrupt_before=["build_context"])
    graph.invoke(_ask(), _thread())
    assert graph.get_state(_thread()).next == ("build_context",)
    vault.unrestrict()  # mid-turn: the turn was decided restricted when it started
    state = graph.invoke(None, _thread())
    assert len(flag_reads) == 1
    assert state["dynamic_context"].startswith("[Restricted Knowledge Summary]")
    assert count_raw(injected_text(model.received[-1]) or "", CHUNKS) == 0
    graph.invoke(_ask("commission rules?"), _thread())  # the next turn reads them again
    state = graph.invoke(None, _thread())
    assert len(flag_reads) == 2 and state["knowledge_turn"]["flags"]["restricted"] is False
    assert count_raw(state["dynamic_context"], CHUNKS) > 0


def test_a_record_of_another_turn_is_not_trusted(vault):
    """``build_context`` after a retrieval of one's own: an open record left from another
    turn is ignored, the flags are read, and the restricted turn injects no raw chunk."""
    model = NumberedChatModel()
    nodes = create_knowledge_nodes(model, vault, **OPTIONS)
    stale = {"turn": "thread:t1#another-turn", "flags": dataclasses.asdict(SourceFlags())}

    def my_retrieval(state: dict[str, Any]) -> dict[str, Any]:
        docs = [Document(CHUNKS[0], id="x", metadata={"source": "vault.md", "score": 0.9})]
        return {"retrieved": docs, "retrieval_query": QUESTION, "knowledge_turn": stale}

    builder = StateGraph(KnowledgeState)
    builder.add_node("my_retrieval", my_retrieval)
    builder.add_node("build_context", nodes.build_context)
    builder.add_node("call_model", nodes.call_model)
    builder.add_edge(START, "my_retrieval")
    builder.add_edge("my_retrieval", "build_context")
    builder.add_edge("build_context", "call_model")
    state = builder.compile().invoke(_ask(), _thread())
    assert state["dynamic_context"] is None
    assert count_raw("\n".join(m.text for m in model.received[-1]), CHUNKS) == 0
    assert nodes.route_after_retrieve.invoke({"messages": [HumanMessage("q")]}, _thread()) == (
        "safe_summarize"  # no record of this turn: restricted until shown open
    )


@pytest.mark.parametrize("surface", ["graph", "injector"])
def test_a_turn_the_search_finds_restricted_goes_through_safe_summarize(hr, monkeypatch, surface):
    """The retrieval step may say "restricted after all" (what a sealed chunk will make it
    say): the turn is searched again inside the boundary and summarized, nothing raw kept."""
    retrieve = KnowledgePipeline.retrieve

    def restricted_after_all(self, clean, request):
        got = retrieve(self, clean, request)
        if not got.found.documents:
            return got
        settings = request.settings.model_copy(update={"restricted": True})
        return dataclasses.replace(
            got, found=Retrieved(), request=dataclasses.replace(request, settings=settings)
        )

    monkeypatch.setattr(KnowledgePipeline, "retrieve", restricted_after_all)
    summarizer = make_summarizer("honest")
    if surface == "injector":
        turn = KnowledgeInjector(hr, summarizer_model=summarizer).prepare("annual leave?")
        assert turn.documents == [] and turn.safe_summary.reason == "answerable"
        assert turn.manifest.restricted and LEAVE not in turn.dynamic_context
        return
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, hr, summarizer_model=summarizer)
    updates = list(graph.stream(_ask("annual leave?"), stream_mode="updates"))
    assert _nodes(updates) == STEPS
    assert updates[0]["retrieve"]["retrieved"] == []
    assert updates[0]["retrieve"]["knowledge_turn"]["flags"]["restricted"] is True
    assert updates[1]["safe_summarize"]["safe_summary"]["reason"] == "answerable"
    assert LEAVE not in channel_text(updates)
    assert "[Restricted Knowledge Summary]" in injected_text(model.received[-1])


def test_a_malformed_safe_summary_is_shown_as_a_refusal(vault):
    nodes = create_knowledge_nodes(
        NumberedChatModel(), vault, summarizer_model=make_summarizer("honest"), **OPTIONS
    )
    tamper = lambda state: {"safe_summary": {"decision": "answer"}}  # noqa: E731
    state = _wired(nodes, tamper, after="safe_summarize").compile().invoke(_ask())
    assert "Decision: refuse (reason: summarizer_error)" in state["dynamic_context"]


# --- create_knowledge_nodes in a graph of one's own --------------------------------------------


def _wired(nodes: Any, tamper: Any = None, *, after: str = "retrieve") -> StateGraph:
    """The four steps wired as ``create_knowledge_graph`` does, with ``tamper`` after ``after``."""
    builder = StateGraph(KnowledgeState)
    for name in STEPS:
        builder.add_node(name, getattr(nodes, name))
    routed, summarized = "retrieve", "safe_summarize"
    if tamper is not None:
        builder.add_node("tamper", tamper)
        builder.add_edge(after, "tamper")
        routed, summarized = ("tamper", summarized) if after == "retrieve" else (routed, "tamper")
    builder.add_edge(START, "retrieve")
    builder.add_conditional_edges(routed, nodes.route_after_retrieve, STEPS[1:3])
    builder.add_edge(summarized, "build_context")
    builder.add_edge("build_context", "call_model")
    builder.add_edge("call_model", END)
    return builder


def test_a_permission_check_between_retrieve_and_build_context_and_a_human_review(hr, tmp_path):
    model = NumberedChatModel()
    nodes = create_knowledge_nodes(model, hr, system_prompt="You are HR.", **OPTIONS)

    def permission_check(state: dict[str, Any]) -> dict[str, Any]:
        allowed = [d for d in state["retrieved"] if d.metadata["source"] != "sick.md"]
        return {"retrieved": allowed}

    builder = _wired(nodes, permission_check)
    db = tmp_path / "review.sqlite"
    question = _ask("Do I need a note for sick leave, and how much annual leave do I get?")
    with sqlite3.connect(db, check_same_thread=False) as conn:
        graph = builder.compile(checkpointer=SqliteSaver(conn), interrupt_before=["call_model"])
        first = graph.invoke(question, _thread())
        shown = graph.get_state(_thread())
    sources = {d.metadata["source"] for d in first["retrieved"]}
    assert "sick.md" not in sources and "leave.md" in sources
    assert shown.next == ("call_model",) and model.received == []
    assert "leave.md" in shown.values["dynamic_context"]
    assert "sick.md" not in shown.values["dynamic_context"]
    reviewed = shown.values["dynamic_context"] + "\nReviewed by HR: answer for full-time staff."
    # a restart: a new graph on the same file, the person's edit, then the resumed call
    with sqlite3.connect(db, check_same_thread=False) as conn:
        graph = builder.compile(checkpointer=SqliteSaver(conn), interrupt_before=["call_model"])
        graph.update_state(_thread(), {"dynamic_context": reviewed})
        state = graph.invoke(None, _thread())
    assert injected_text(model.received[-1]) == reviewed
    assert [m.type for m in state["messages"]] == ["human", "ai"]
    assert strip_injected(model.received[-1])[1].content == question["messages"][0].content
