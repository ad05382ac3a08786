"""The memory blocks wired into the injector, the graph and the middleware.

One dynamic_context message in the order procedure, knowledge, past-conversation
snippets, user facts; one token budget with its cut list in the manifest; every
block optional; restricted mode; automatic recording over several turns; the
memory tools in agent loops.
"""

from __future__ import annotations

import tempfile
import uuid
from types import SimpleNamespace
from typing import Any

import chromadb
import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langchain_knowledge_inject import (
    ConfigurationError,
    EpisodicMemory,
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    ProcedureLibrary,
    RetrievalError,
    UserFacts,
    create_knowledge_graph,
    create_memory_tools,
    strip_injected,
)
from langchain_knowledge_inject._memory.procedures import Procedure
from langchain_knowledge_inject._restricted.boundary import chunk_ref
from langchain_knowledge_inject._turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
from langchain_knowledge_inject._turn.placement import add_knowledge_prompt, is_injected
from langchain_knowledge_inject._turn.tokens import approximate_token_count
from tests.unit_tests.fakes import EXPENSES, LEAVE, SICK, FakeKB, NumberedChatModel, injected_text
from tests.unit_tests.fakes import user_config as cfg

ASK = "How do I request leave?"
HEADERS = [
    "[Procedure]",
    "[Retrieved Knowledge]",
    "[Past Conversation Snippets]",
    "[User Facts]",
]


def _prompted(msgs):
    """The input as the injector returns it with nothing to inject: the knowledge prompt added."""
    return add_knowledge_prompt(msgs, KNOWLEDGE_SYSTEM_PROMPT)


def _doc(text: str, i: int, score: float) -> Document:
    return Document(text, id=f"c{i}", metadata={"source": f"f{i}.md", "score": score})


def _call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


@pytest.fixture
def emb() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=32)


@pytest.fixture
def kb() -> FakeKB:
    return FakeKB([_doc(LEAVE, 0, 0.9), _doc(SICK, 1, 0.7), _doc(EXPENSES, 2, 0.5)])


@pytest.fixture
def procedures(emb) -> ProcedureLibrary:
    leave = Procedure(
        "Request leave", "How to ask for paid leave",
        ["Open the HR portal", "Pick the dates", "Submit for approval"], examples=[ASK],
    )  # fmt: skip
    return ProcedureLibrary([leave], embeddings=emb, threshold=0.99)  # matches ASK exactly


@pytest.fixture
def memory(emb) -> EpisodicMemory:
    return EpisodicMemory(client=chromadb.EphemeralClient(), path=tempfile.mkdtemp(),
                          embeddings=emb, min_score=-1.0,
                          collection_prefix=f"wire-{uuid.uuid4().hex[:10]}")  # fmt: skip


@pytest.fixture
def facts() -> UserFacts:
    return UserFacts(InMemoryStore())


@pytest.fixture
def blocks(procedures, memory, facts) -> list[Any]:
    memory.record_exchange("My manager is Dana.", "Noted, Dana is your manager.", user_id="u1")
    facts.set("u1", "team", "Payroll")
    return [facts, memory, procedures]  # any order: the message order is fixed


def _history(question: str = ASK) -> list[BaseMessage]:
    return [
        SystemMessage("You are the HR assistant."),
        HumanMessage("Hi"),
        AIMessage("Hello! How can I help?"),
        HumanMessage(question),
    ]


def _positions(text: str) -> list[int]:
    return [text.index(h) for h in HEADERS]


# -- the layout ------------------------------------------------------------------------------


def test_all_blocks_share_one_message_in_the_documented_order(kb, blocks) -> None:
    msgs = _history()

    turn = KnowledgeInjector(kb, blocks=blocks).prepare(msgs, cfg())

    injected = [m for m in turn.messages if is_injected(m)]
    assert len(injected) == 1 and turn.messages[-1] is injected[0]  # with the question
    text = injected_text(turn.messages)
    assert text == turn.dynamic_context
    assert _positions(text) == sorted(_positions(text)) and text.startswith("[Procedure]")
    assert "1. Open the HR portal" in text and LEAVE in text
    assert "user: My manager is Dana. · assistant: Noted, Dana is your manager." in text
    assert text.endswith("[User Facts]\nteam=Payroll")
    assert turn.manifest.blocks == ["procedure", "knowledge", "episodic", "facts"]
    assert turn.manifest.chunk_ids == ["c0", "c1", "c2"] and turn.manifest.dropped == []
    assert turn.manifest.tokens_used > 0
    assert strip_injected(turn.messages) == _prompted(msgs)


def test_kb_meta_comes_first_and_extra_blocks_last(kb, blocks) -> None:
    injector = KnowledgeInjector(kb, blocks=blocks, include_kb_meta=True, extra_blocks=["[Note]"])

    turn = injector.prepare(_history(), cfg())

    assert turn.manifest.blocks == [
        "kb_meta", "procedure", "knowledge", "episodic", "facts", "extra",
    ]  # fmt: skip
    assert turn.manifest.errors == []
    assert turn.dynamic_context.startswith("[Knowledge Bases]")
    assert turn.dynamic_context.endswith("[User Facts]\nteam=Payroll\n\n[Note]")


async def test_the_async_path_gives_the_same_message(kb, blocks) -> None:
    injector = KnowledgeInjector(kb, blocks=blocks)

    sync_turn = injector.prepare(_history(), cfg())
    async_turn = await injector.aprepare(_history(), cfg())

    assert async_turn.messages == sync_turn.messages
    assert async_turn.manifest.blocks == sync_turn.manifest.blocks


def test_placement_applies_to_the_whole_message(kb, blocks) -> None:
    turn = KnowledgeInjector(kb, blocks=blocks, placement="postfix").prepare(_history(), cfg())

    last = turn.messages[-1]
    assert is_injected(last) and last.content.startswith(ASK + "\n\n[Procedure]")
    assert last.content.endswith("team=Payroll")


# -- every block optional --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["procedure", "episodic", "facts"])
def test_each_block_alone_is_injected_even_with_nothing_retrieved(name, blocks) -> None:
    [block] = [b for b in blocks if b.name == name]
    msgs = _history()

    turn = KnowledgeInjector(FakeKB([]), blocks=[block]).prepare(msgs, cfg())

    assert turn.manifest.injected and turn.manifest.blocks == [name]
    header = HEADERS[["procedure", "knowledge", "episodic", "facts"].index(name)]
    assert turn.dynamic_context.startswith(header)
    assert "[Retrieved Knowledge]" not in turn.dynamic_context
    assert turn.manifest.chunk_ids == [] and strip_injected(turn.messages) == _prompted(msgs)


def test_knowledge_alone_is_the_default(kb) -> None:
    injector = KnowledgeInjector(kb)
    assert KnowledgeInjector(kb, blocks=None).pipeline.blocks == ()

    turn = injector.prepare(_history(), cfg())

    assert injector.pipeline.blocks == () and not injector.records_turns
    assert turn.manifest.blocks == ["knowledge"]


def test_no_blocks_and_nothing_retrieved_leaves_the_input_exactly_as_it_was() -> None:
    msgs = _history()
    injector = KnowledgeInjector(FakeKB([]), include_kb_meta=True, extra_blocks=["[Note]"])

    assert injector.invoke(msgs, cfg()) == _prompted(msgs)


def test_blocks_with_nothing_to_say_leave_the_input_as_it_was(procedures, memory, facts) -> None:
    msgs = _history("What is the weather like?")  # no procedure; no episode; no fact
    injector = KnowledgeInjector(FakeKB([]), blocks=[procedures, memory, facts],
                                 extra_blocks=["[Note]"])  # fmt: skip

    turn = injector.prepare(msgs, cfg())

    assert turn.messages == _prompted(msgs) and not turn.manifest.injected


def test_without_a_user_id_no_episode_and_no_fact_is_shown(kb, blocks) -> None:
    turn = KnowledgeInjector(kb, blocks=blocks).prepare(_history(), cfg(user_id=None))

    assert turn.manifest.blocks == ["procedure", "knowledge"]
    assert "Dana" not in turn.dynamic_context and "Payroll" not in turn.dynamic_context


def test_another_user_sees_neither_my_snippets_nor_my_facts(kb, blocks) -> None:
    turn = KnowledgeInjector(kb, blocks=blocks).prepare(_history(), cfg(user_id="u2"))

    assert "Dana" not in turn.dynamic_context and "Payroll" not in turn.dynamic_context


def test_the_off_switch_turns_every_block_off(kb, blocks) -> None:
    msgs = _history()
    off = cfg(knowledge_enabled=False)

    assert KnowledgeInjector(kb, blocks=blocks).invoke(msgs, off) == msgs


def test_a_message_without_text_renders_no_block(blocks) -> None:
    msgs = [HumanMessage([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}])]

    assert KnowledgeInjector(FakeKB([]), blocks=blocks).invoke(msgs, cfg()) == _prompted(msgs)


# -- one budget, caps, priorities, the cut list -----------------------------------------------


def _tokens(kb, blocks, **kwargs: Any) -> int:
    return (
        KnowledgeInjector(kb, blocks=blocks, **kwargs)
        .prepare(_history(), cfg())
        .manifest.tokens_used
    )


def test_over_budget_the_snippets_go_first_and_are_listed_as_cut(kb, blocks, memory) -> None:
    memory.record_exchange("I work in Lisbon.", "Good to know.", user_id="u1")
    full = _tokens(kb, blocks)

    turn = KnowledgeInjector(kb, blocks=blocks, max_tokens=full - 5).prepare(_history(), cfg())

    assert turn.manifest.tokens_used <= full - 5
    assert turn.manifest.dropped == [
        {"block": "episodic", "reason": "token_budget", "removed": 1, "kept": 1, "dropped": False}
    ]
    assert turn.dynamic_context.count("\n- ") == 1  # one snippet left
    assert turn.manifest.chunk_ids == ["c0", "c1", "c2"]
    assert turn.manifest.blocks == ["procedure", "knowledge", "episodic", "facts"]


def test_a_tight_budget_cuts_by_priority_and_knowledge_at_chunk_boundaries(kb, blocks) -> None:
    # Knowledge with one chunk plus the facts line: what a budget that tight should keep.
    target = _tokens(FakeKB([_doc(LEAVE, 0, 0.9)]), [b for b in blocks if b.name == "facts"])

    turn = KnowledgeInjector(kb, blocks=blocks, max_tokens=target).prepare(_history(), cfg())

    m = turn.manifest
    assert m.tokens_used <= target
    assert m.blocks == ["knowledge", "facts"]
    assert m.chunk_ids == ["c0"] and m.citation_ids and len(m.citation_ids) == 1
    assert LEAVE in turn.dynamic_context and SICK not in turn.dynamic_context
    assert turn.dynamic_context.endswith("[User Facts]\nteam=Payroll")
    cuts = {d.get("block") or d["chunk_id"]: d for d in m.dropped}
    assert cuts["episodic"]["dropped"] and cuts["procedure"]["dropped"]
    assert cuts["c1"]["reason"] == cuts["c2"]["reason"] == "token_budget"
    assert [d.get("chunk_id") for d in m.dropped if "chunk_id" in d] == ["c1", "c2"]


def test_a_block_cap_shortens_that_block_alone(kb, blocks, memory) -> None:
    memory.record_exchange("I work in Lisbon.", "Good to know.", user_id="u1")
    both = memory.render(query=ASK, messages=_history(), config=cfg())
    memory.max_tokens = approximate_token_count(both.keep(1))  # the header and one snippet

    turn = KnowledgeInjector(kb, blocks=blocks).prepare(_history(), cfg())

    assert turn.manifest.dropped == [
        {"block": "episodic", "reason": "block_cap", "removed": 1, "kept": 1, "dropped": False}
    ]
    assert turn.manifest.chunk_ids == ["c0", "c1", "c2"]


def test_priorities_can_be_changed_per_block(kb, blocks, memory, procedures) -> None:
    memory.priority = 99  # snippets now outrank everything else but kb_meta/extra
    full = _tokens(kb, blocks)

    turn = KnowledgeInjector(kb, blocks=blocks, max_tokens=full - 5).prepare(_history(), cfg())

    assert [d.get("block") or "chunk" for d in turn.manifest.dropped] == ["procedure"]
    assert "Dana" in turn.dynamic_context


def test_a_failing_block_is_left_out_and_reported(kb, blocks, caplog) -> None:
    class Broken:
        name, priority, max_tokens = "broken", 10, None

        def render(self, **kwargs: Any) -> str:
            raise ConnectionError("store down")

        async def arender(self, **kwargs: Any) -> str:
            raise ConnectionError("store down")

    injector = KnowledgeInjector(kb, blocks=[*blocks, Broken()])

    turn = injector.prepare(_history(), cfg())

    assert turn.manifest.blocks == ["procedure", "knowledge", "episodic", "facts"]
    assert turn.manifest.dropped == [
        {"block": "broken", "reason": "error", "error": "ConnectionError: store down"}
    ]
    assert "store down" in caplog.text
    raising = KnowledgeInjector(kb, blocks=[Broken()], on_error="raise")
    with pytest.raises(RetrievalError, match="broken"):
        raising.prepare(_history(), cfg())


async def test_a_failing_block_is_left_out_on_the_async_path_too(kb, facts) -> None:
    class Broken:
        name, priority, max_tokens = "broken", 10, None

        def render(self, **kwargs: Any) -> str:
            raise AssertionError("the async path must not call render")

        async def arender(self, **kwargs: Any) -> str:
            raise ConnectionError("store down")

    facts.set("u1", "team", "Payroll")

    turn = await KnowledgeInjector(kb, blocks=[Broken(), facts]).aprepare(_history(), cfg())

    assert turn.manifest.blocks == ["knowledge", "facts"]
    assert turn.manifest.dropped[0]["reason"] == "error"


def test_a_custom_block_comes_after_the_named_ones(kb, facts) -> None:
    class Weather:
        name, priority, max_tokens = "weather", 20, None

        def render(self, **kwargs: Any) -> str:
            return "[Weather]\nsunny"

        async def arender(self, **kwargs: Any) -> str:
            return self.render(**kwargs)

    facts.set("u1", "team", "Payroll")

    turn = KnowledgeInjector(kb, blocks=[Weather(), facts]).prepare(_history(), cfg())

    assert turn.manifest.blocks == ["knowledge", "facts", "weather"]
    assert turn.dynamic_context.endswith("team=Payroll\n\n[Weather]\nsunny")


@pytest.mark.parametrize(
    "bad",
    [
        "facts",
        [object()],
        [SimpleNamespace(name="knowledge", priority=1, max_tokens=None, render=id, arender=id)],
        [SimpleNamespace(name="x", priority=1, max_tokens=None, render=id, arender=id)] * 2,
    ],
)
def test_invalid_blocks_fail_at_construction(kb, bad) -> None:
    with pytest.raises(ConfigurationError) as info:
        KnowledgeInjector(kb, blocks=bad)
    assert info.value.option == "blocks"


# -- restricted mode --------------------------------------------------------------------------


def test_restricted_mode_summarizes_knowledge_and_keeps_the_user_blocks(kb, blocks) -> None:
    turn = KnowledgeInjector(kb, blocks=blocks, restricted=True).prepare(_history(), cfg())

    text = turn.dynamic_context
    assert LEAVE not in text and SICK not in text  # never raw chunks
    assert "[Restricted Knowledge Summary]" in text
    assert turn.manifest.summary_reason == "summarizer_error"  # no summarizer: fails closed
    assert "[Procedure]" in text and "Dana" in text and "team=Payroll" in text
    assert turn.manifest.blocks == ["procedure", "knowledge", "episodic", "facts"]
    assert turn.manifest.chunk_ids == [chunk_ref(f"c{i}") for i in range(3)]
    assert turn.manifest.citation_ids == []


def test_restricted_summary_is_never_cut_by_the_budget(kb, blocks) -> None:
    turn = KnowledgeInjector(kb, blocks=blocks, restricted=True, max_tokens=5).prepare(
        _history(), cfg()
    )

    assert turn.manifest.blocks == ["knowledge"]
    assert turn.dynamic_context.startswith("[Restricted Knowledge Summary]")
    assert {d["block"] for d in turn.manifest.dropped} == {"procedure", "episodic", "facts"}


async def test_restricted_mode_with_nothing_retrieved_still_shows_the_user_blocks(blocks) -> None:
    turn = await KnowledgeInjector(FakeKB([]), blocks=blocks, restricted=True).aprepare(
        _history(), cfg()
    )

    assert turn.manifest.blocks == ["procedure", "episodic", "facts"]
    assert turn.manifest.summary_decision is None


# -- recording ---------------------------------------------------------------------------------


def test_record_turn_stores_the_finished_exchange_without_injection(kb, memory) -> None:
    injector = KnowledgeInjector(kb, blocks=[memory])
    sent = injector.invoke(_history("My badge number is 4471."), cfg(thread_id="t9"))
    finished = [*sent, AIMessage("Thanks, noted.")]

    ids = injector.record_turn(finished, cfg(thread_id="t9"))

    assert len(ids) == 1 and injector.records_turns
    [episode] = memory.search("My badge number is 4471.", user_id="u1")
    assert (episode.user_message, episode.assistant_reply) == (
        "My badge number is 4471.", "Thanks, noted.",
    )  # fmt: skip
    assert "[Retrieved Knowledge]" not in episode.user_message and episode.thread_id == "t9"
    assert injector.record_turn(finished, cfg(user_id=None)) == []
    assert injector.record_turn(finished, cfg(episodic_record=False)) == []


async def test_arecord_turn_and_failures_degrade(kb, memory, caplog) -> None:
    injector = KnowledgeInjector(kb, blocks=[memory])
    finished = [HumanMessage("I moved to Porto."), AIMessage("Noted.")]

    assert len(await injector.arecord_turn(finished, cfg())) == 1

    def broken(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("chroma down")

    memory.record_turn = broken  # type: ignore[method-assign]
    assert injector.record_turn(finished, cfg()) == [] and "chroma down" in caplog.text
    with pytest.raises(RetrievalError):
        KnowledgeInjector(kb, blocks=[memory], on_error="raise").record_turn(finished, cfg())


# -- the graph -----------------------------------------------------------------------------------


def _injected_text(messages: list[BaseMessage]) -> str:
    return injected_text(messages) or ""


def test_graph_records_each_turn_and_recalls_it_in_a_later_session(kb, memory, facts) -> None:
    store = InMemoryStore()
    facts = UserFacts(store)
    model = NumberedChatModel()
    graph = create_knowledge_graph(
        model, kb, blocks=[memory, facts], checkpointer=InMemorySaver(), store=store
    )
    assert "record_memory" in graph.get_graph().nodes
    t1, t2 = cfg(thread_id="t1"), cfg(thread_id="t2")

    graph.invoke({"messages": [("user", "My manager is Dana.")]}, t1)
    graph.invoke({"messages": [("user", "I work from the Lisbon office.")]}, t1)
    facts.set("u1", "team", "Payroll")
    state = graph.invoke({"messages": [("user", "Any news on my leave?")]}, t1)

    assert memory.count("u1") == 3  # one episode per finished turn
    # Within the session, earlier turns are visible: never injected again as snippets.
    assert all("[Past Conversation Snippets]" not in _injected_text(r) for r in model.received)
    assert "[User Facts]\nteam=Payroll" in _injected_text(model.received[2])
    assert not any(is_injected(m) for m in state["messages"])
    assert [m.type for m in state["messages"]] == ["human", "ai"] * 3

    graph.invoke({"messages": [("user", "Who is my manager again?")]}, t2)

    later = _injected_text(model.received[3])
    assert "[Past Conversation Snippets]" in later
    assert "user: My manager is Dana. · assistant: reply 1" in later
    assert later.index("[Retrieved Knowledge]") < later.index("[Past Conversation Snippets]")
    assert later.index("[Past Conversation Snippets]") < later.index("[User Facts]")
    assert memory.count("u1") == 4


async def test_graph_async_records_and_a_second_user_is_kept_apart(kb, memory) -> None:
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, blocks=[memory], checkpointer=InMemorySaver())

    await graph.ainvoke({"messages": [("user", "My dog is called Rex.")]}, cfg(thread_id="a"))
    await graph.ainvoke({"messages": [("user", "What is my dog called?")]},
                        cfg(user_id="u2", thread_id="b"))  # fmt: skip
    await graph.ainvoke({"messages": [("user", "What is my dog called?")]}, cfg(thread_id="c"))

    assert memory.count("u1") == 2 and memory.count("u2") == 1
    assert "Rex" not in _injected_text(model.received[1])
    assert "user: My dog is called Rex." in _injected_text(model.received[2])


async def test_graph_restricted_mode_summarizes_knowledge_and_keeps_user_blocks(
    kb, memory, facts
) -> None:
    memory.record_exchange("My manager is Dana.", "Noted.", user_id="u1")
    facts.set("u1", "team", "Payroll")
    model = NumberedChatModel()
    graph = create_knowledge_graph(model, kb, blocks=[memory, facts], restricted=True,
                                   keep_manifest=True)  # fmt: skip

    state = await graph.ainvoke({"messages": [("user", "Who approves my leave?")]}, cfg())

    text = _injected_text(model.received[0])
    assert LEAVE not in text and SICK not in text
    assert "[Restricted Knowledge Summary]" in text and "Dana" in text and "team=Payroll" in text
    assert state["knowledge_manifest"]["blocks"] == ["knowledge", "episodic", "facts"]
    assert state["knowledge_manifest"]["summary_reason"] == "summarizer_error"


def test_graph_without_episodic_memory_has_no_record_node(kb, facts) -> None:
    graph = create_knowledge_graph(NumberedChatModel(), kb, blocks=[facts])

    assert "record_memory" not in graph.get_graph().nodes


def test_graph_memory_tools_loop_records_once_per_user_turn(kb, memory, facts) -> None:
    model = NumberedChatModel(
        script=[
            _call("set_user_fact", {"key": "home city", "value": "Porto"}, "c1"),
            _call("store_memory", {"content": "Prefers aisle seats on flights."}, "c2"),
            AIMessage("Noted both."),
        ]
    )
    graph = create_knowledge_graph(
        model, kb, blocks=[memory, facts], tools=create_memory_tools(memory=memory, facts=facts),
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    config = cfg(thread_id="t1")

    graph.invoke({"messages": [("user", "I live in Porto and like aisle seats.")]}, config)
    graph.invoke({"messages": [("user", "Book me a trip.")]}, config)

    assert facts.get_all("u1") == {"home_city": "Porto"}
    assert memory.count("u1") == 3  # the saved note + one exchange per user turn
    second = _injected_text(model.received[-1])
    assert "[User Facts]\nhome_city=Porto" in second
    # The note sits in the visible history (the tool call), so it is not repeated.
    assert "Prefers aisle seats" not in second


# -- the middleware ---------------------------------------------------------------------------


def test_middleware_injects_the_blocks_and_records_after_the_agent(kb, memory, facts) -> None:
    model = NumberedChatModel()
    middleware = KnowledgeInjectionMiddleware(kb, blocks=[memory, facts])
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    facts.set("u1", "team", "Payroll")

    agent.invoke({"messages": [("user", "My manager is Dana.")]}, cfg(thread_id="t1"))
    state = agent.invoke({"messages": [("user", "Any news?")]}, cfg(thread_id="t1"))
    agent.invoke({"messages": [("user", "Who is my manager?")]}, cfg(thread_id="t2"))

    assert memory.count("u1") == 3
    assert not any(is_injected(m) for m in state["messages"])
    same_session = _injected_text(model.received[1])
    assert "[User Facts]\nteam=Payroll" in same_session
    assert "[Past Conversation Snippets]" not in same_session  # turn 1 is visible
    later = _injected_text(model.received[2])
    assert "user: My manager is Dana." in later
    assert later.index("[Retrieved Knowledge]") < later.index("[Past Conversation Snippets]")


def test_middleware_memory_tools_in_an_agent_loop(kb, memory, facts) -> None:
    memory.k = 5  # fake embeddings rank arbitrarily: inject every episode of the user
    model = NumberedChatModel(
        script=[
            _call("set_user_fact", {"key": "home_city", "value": "Porto"}, "c1"),
            _call("store_memory", {"content": "Prefers aisle seats on flights."}, "c2"),
            AIMessage("Noted."),
            AIMessage("You live in Porto."),
            _call("forget_user_fact", {"key": "home_city"}, "c3"),
            AIMessage("Forgotten."),
            AIMessage("Anything else?"),
        ]
    )
    middleware = KnowledgeInjectionMiddleware(kb, blocks=[memory, facts], memory_tools=True)
    assert sorted(t.name for t in middleware.tools) == [
        "forget_user_fact", "set_user_fact", "store_memory",
    ]  # fmt: skip
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())

    agent.invoke(
        {"messages": [("user", "I live in Porto; I like aisle seats.")]}, cfg(thread_id="t1")
    )
    # Tool loop of turn 1: the context stays the one computed for that user turn.
    assert all("[User Facts]" not in _injected_text(r) for r in model.received[:3])
    agent.invoke({"messages": [("user", "Where do I live?")]}, cfg(thread_id="t1"))
    assert "[User Facts]\nhome_city=Porto" in _injected_text(model.received[3])
    agent.invoke({"messages": [("user", "Forget where I live.")]}, cfg(thread_id="t1"))
    agent.invoke({"messages": [("user", "Plan a trip for me.")]}, cfg(thread_id="t2"))

    assert facts.get_all("u1") == {}
    last = _injected_text(model.received[-1])
    assert "[User Facts]" not in last
    assert "noted: Prefers aisle seats on flights." in last  # a new session: the note is recalled
    assert memory.count("u1") == 5  # the note + four finished turns


async def test_middleware_async_records_via_aafter_agent(kb, memory) -> None:
    model = NumberedChatModel()
    agent = create_agent(model, middleware=[KnowledgeInjectionMiddleware(kb, blocks=[memory])],
                         checkpointer=InMemorySaver())  # fmt: skip

    await agent.ainvoke({"messages": [("user", "My dog is called Rex.")]}, cfg(thread_id="t1"))
    await agent.ainvoke({"messages": [("user", "What's my dog's name?")]}, cfg(thread_id="t2"))

    assert memory.count("u1") == 2
    assert "user: My dog is called Rex." in _injected_text(model.received[1])


def test_middleware_memory_tools_need_a_memory_block(kb) -> None:
    with pytest.raises(ConfigurationError) as info:
        KnowledgeInjectionMiddleware(kb, memory_tools=True)
    assert info.value.option == "memory_tools"
