"""KnowledgeInjectionMiddleware: the hooks called directly, then create_agent end to end."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest, ModelResponse
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_knowledge_inject import (
    ConfigurationError,
    KnowledgeInjectionMiddleware,
)
from langchain_knowledge_inject._turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
from langchain_knowledge_inject._turn.placement import is_injected
from tests.unit_tests.fakes import (
    LEAVE,
    PARKING,
    SICK,
    NumberedChatModel,
    dump_messages,
    hr_documents,
    injected_text,
)


def _call(tool_name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(
        "", id=f"ai-{call_id}", tool_calls=[{"name": tool_name, "args": args, "id": call_id}]
    )


@tool
def clock() -> str:
    """Tell the time."""
    return "12:00"


@pytest.fixture
def kb(make_kb):
    return make_kb(hr_documents("leave", "sick", "expenses"))


@pytest.fixture
def searches(kb, monkeypatch) -> list[str]:
    """Every query the knowledge base receives (sync and async)."""
    seen: list[str] = []
    search = kb.search

    def spy(query, **kwargs):
        seen.append(query)
        return search(query, **kwargs)

    async def aspy(query, **kwargs):
        return spy(query, **kwargs)

    monkeypatch.setattr(kb, "search", spy)
    monkeypatch.setattr(kb, "asearch", aspy)
    return seen


def _request(messages: list[BaseMessage], state: dict[str, Any] | None = None) -> ModelRequest:
    return ModelRequest(
        model=NumberedChatModel(),
        messages=messages,
        system_message=SystemMessage("You are HR."),
        state=state if state is not None else {"messages": messages},
    )


class Capture:
    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return ModelResponse(result=[AIMessage("answer", id="a")])

    async def acall(self, request: ModelRequest) -> ModelResponse:
        return self(request)


# --- the hooks, called directly --------------------------------------------------------------


def test_wrap_model_call_injects_without_touching_the_request(kb):
    middleware = KnowledgeInjectionMiddleware(kb, keep_manifest=True)
    messages = [
        HumanMessage("Hi", id="h0"),
        AIMessage("Hello", id="a0"),
        HumanMessage("annual leave?", id="h1"),
    ]
    request = _request(messages)
    capture = Capture()
    result = middleware.wrap_model_call(request, capture)

    sent = capture.requests[0]
    assert sent.system_message.content == f"You are HR.\n\n{KNOWLEDGE_SYSTEM_PROMPT}"
    assert [m.content for m in sent.messages[:2]] == ["Hi", "Hello"]
    assert is_injected(sent.messages[2]) and LEAVE in sent.messages[2].text
    assert sent.messages[2].text.endswith("annual leave?") and len(sent.messages) == 3
    # the original request and its messages are unchanged
    assert request.messages == messages and request.system_message.content == "You are HR."
    assert isinstance(result, ExtendedModelResponse)
    assert result.model_response.result[0].content == "answer"
    update = result.command.update
    assert set(update) == {"knowledge_manifest", "retrieved"}  # nothing else
    assert update["knowledge_manifest"]["sources"] == ["leave.md"]
    assert [d.metadata["source"] for d in update["retrieved"]] == ["leave.md"]
    assert LEAVE in update["retrieved"][0].page_content
    # without keep_manifest the turn's documents alone go to the state
    plain = KnowledgeInjectionMiddleware(kb).wrap_model_call(request, capture)
    assert isinstance(plain, ExtendedModelResponse) and set(plain.command.update) == {"retrieved"}


async def test_awrap_model_call_matches_the_sync_hook(kb):
    middleware = KnowledgeInjectionMiddleware(kb, keep_manifest=True)
    messages = [HumanMessage("annual leave?", id="h1")]
    sync, async_ = Capture(), Capture()
    middleware.wrap_model_call(_request(messages), sync)
    other = [HumanMessage("annual leave?", id="h2")]  # another turn: not the cached one
    result = await middleware.awrap_model_call(_request(other), async_.acall)
    assert [m.content for m in async_.requests[0].messages] == [
        m.content for m in sync.requests[0].messages
    ]
    assert result.command.update["knowledge_manifest"]["injected"] is True


def test_cached_turn_is_reused_without_retrieving(kb, searches):
    middleware = KnowledgeInjectionMiddleware(kb)
    messages: list[BaseMessage] = [HumanMessage("annual leave?", id="h1")]
    middleware.wrap_model_call(_request(messages), Capture())
    assert searches == ["annual leave?"]
    # the same turn, one tool round later: the injected text is kept in this process
    messages += [_call("clock", {}, "c1"), ToolMessage("12:00", tool_call_id="c1", id="t1")]
    capture = Capture()
    middleware.wrap_model_call(_request(messages), capture)
    assert searches == ["annual leave?"]
    sent = capture.requests[0].messages
    assert [m.type for m in sent] == ["human", "ai", "tool"]
    assert is_injected(sent[0]) and sent[0].text.endswith("annual leave?") and LEAVE in sent[0].text


def test_new_user_message_or_new_settings_retrieve_again(kb, searches):
    middleware = KnowledgeInjectionMiddleware(kb)
    middleware.wrap_model_call(_request([HumanMessage("annual leave?", id="h1")]), Capture())
    messages = [
        HumanMessage("annual leave?", id="h1"),
        AIMessage("25", id="a1"),
        HumanMessage("sick leave note?", id="h2"),
    ]
    middleware.wrap_model_call(_request(messages), Capture())
    assert searches == ["annual leave?", "sick leave note?"]
    middleware.wrap_model_call(_request(messages).override(model_settings={}), Capture())
    assert len(searches) == 2  # cached
    middleware.pipeline.settings = middleware.pipeline.settings.replace(top_k=2)
    middleware.wrap_model_call(_request(messages), Capture())
    assert len(searches) == 3  # other settings: a new retrieval


def test_nothing_retrieved_leaves_messages_as_they_are(kb):
    middleware = KnowledgeInjectionMiddleware(kb, keep_manifest=True)
    messages = [HumanMessage("parking garage?", id="h1")]
    capture = Capture()
    result = middleware.wrap_model_call(_request(messages), capture)
    assert capture.requests[0].messages == messages
    assert result.command.update["knowledge_manifest"]["injected"] is False


def test_knowledge_prompt_none_and_list_system_content(kb):
    capture = Capture()
    KnowledgeInjectionMiddleware(kb, knowledge_prompt=None).wrap_model_call(
        _request([HumanMessage("annual leave?")]), capture
    )
    assert capture.requests[0].system_message.content == "You are HR."

    request = _request([HumanMessage("annual leave?")]).override(
        system_message=SystemMessage([{"type": "text", "text": "You are HR."}])
    )
    KnowledgeInjectionMiddleware(kb).wrap_model_call(request, capture)
    assert capture.requests[1].system_message.content[-1] == {
        "type": "text",
        "text": KNOWLEDGE_SYSTEM_PROMPT,
    }


def test_no_system_message_gets_the_knowledge_prompt_alone(kb):
    capture = Capture()
    request = _request([HumanMessage("annual leave?")]).override(system_message=None)
    KnowledgeInjectionMiddleware(kb, placement="system").wrap_model_call(request, capture)
    sent = capture.requests[0]
    assert sent.system_message.content == KNOWLEDGE_SYSTEM_PROMPT
    assert isinstance(sent.messages[0], SystemMessage) and is_injected(sent.messages[0])


def test_invalid_options_raise_configuration_error(kb):
    with pytest.raises(ConfigurationError):
        KnowledgeInjectionMiddleware(kb, placement="middle")
    with pytest.raises(ConfigurationError):
        KnowledgeInjectionMiddleware(kb, top_k=0)
    with pytest.raises(ConfigurationError) as info:
        KnowledgeInjectionMiddleware(kb, topk=3)  # type: ignore[call-arg]
    assert info.value.option == "topk"
    with pytest.raises(TypeError):
        KnowledgeInjectionMiddleware(kb, 4)  # type: ignore[misc]


# --- end to end through create_agent ---------------------------------------------------------


def _agent(kb, model, *, tools=(clock,), **options):
    return create_agent(
        model,
        tools=list(tools),
        system_prompt="You are HR.",
        middleware=[KnowledgeInjectionMiddleware(kb, **options)],
        checkpointer=InMemorySaver(),
    )


def _script(turn: int) -> list[AIMessage]:
    return [
        _call("clock", {}, f"c{turn}a"),
        _call("clock", {}, f"c{turn}b"),
        AIMessage(f"answer {turn}", id=f"ans{turn}"),
    ]


QUESTIONS = [
    "How many days of annual leave?",
    "sick leave note?",
    "expenses receipt?",
    "parking garage?",
]


def test_agent_tool_loop_keeps_the_injection_next_to_the_last_human_turn(kb, searches):
    model = NumberedChatModel(script=[m for t in range(2) for m in _script(t)])
    agent = _agent(kb, model)
    config = {"configurable": {"thread_id": "t"}}
    for question in QUESTIONS[:2]:
        agent.invoke({"messages": [HumanMessage(question)]}, config)

    assert searches == QUESTIONS[:2]  # one retrieval per user turn, not per model call
    assert len(model.received) == 6
    for call in model.received:
        injected = [i for i, m in enumerate(call) if is_injected(m)]
        humans = [i for i, m in enumerate(call) if isinstance(m, HumanMessage)]
        assert injected == [humans[-1]]  # the current user message carries the knowledge
        assert call[0].content == f"You are HR.\n\n{KNOWLEDGE_SYSTEM_PROMPT}"
    assert LEAVE in injected_text(model.received[2])  # third call of turn 1, after two tools
    assert SICK in injected_text(model.received[5])


def test_agent_checkpointed_history_is_injection_free_and_identical_to_no_injection(kb):
    config = {"configurable": {"thread_id": "t"}}
    on_model = NumberedChatModel(script=[m for t in range(4) for m in _script(t)])
    on = _agent(kb, on_model)
    off_model = NumberedChatModel(script=[m for t in range(4) for m in _script(t)])
    off = _agent(kb, off_model)
    for question in QUESTIONS:
        on.invoke({"messages": [HumanMessage(question, id=question)]}, config)
        off.invoke(
            {"messages": [HumanMessage(question, id=question)]},
            {"configurable": {"thread_id": "t", "knowledge_enabled": False}},
        )

    stored = on.get_state(config).values["messages"]
    assert len(stored) == 4 * 6
    assert not any(is_injected(m) or "[Retrieved Knowledge]" in m.text for m in stored)
    unchanged = off.get_state(config).values["messages"]
    assert dump_messages(stored, tool_ids=False) == dump_messages(unchanged, tool_ids=False)
    assert any(is_injected(m) for call in on_model.received for m in call)
    assert not any(is_injected(m) for call in off_model.received for m in call)


async def test_agent_async_and_document_added_between_turns(kb, searches):
    model = NumberedChatModel()
    agent = _agent(kb, model, keep_manifest=True)
    config = {"configurable": {"thread_id": "t"}}
    await agent.ainvoke({"messages": [HumanMessage("When does the parking garage open?")]}, config)
    assert not any(is_injected(m) for m in model.received[-1])
    kb.add_documents([Document(PARKING, metadata={"source": "parking.md"})])
    state = await agent.ainvoke(
        {"messages": [HumanMessage("When does the parking garage open?")]}, config
    )
    assert PARKING in injected_text(model.received[-1])
    assert state["knowledge_manifest"]["sources"] == ["parking.md"]
    assert len(searches) == 2


async def test_the_turns_documents_come_back_in_the_agents_state(kb):
    """As ``create_retrieval_chain`` gives ``context``: ``retrieved``, overwritten every turn."""
    agent = _agent(kb, NumberedChatModel(), tools=[])
    config = {"configurable": {"thread_id": "docs"}}
    state = agent.invoke({"messages": [HumanMessage("annual leave days?")]}, config)
    assert state["retrieved"][0].metadata["source"] == "leave.md"
    assert LEAVE in state["retrieved"][0].page_content
    state = await agent.ainvoke({"messages": [HumanMessage("doctor's note when sick?")]}, config)
    assert state["retrieved"][0].metadata["source"] == "sick.md"  # this turn's, not the last
    state = agent.invoke({"messages": [HumanMessage("When does the garage open?")]}, config)
    assert state["retrieved"] == []  # nothing found: nothing left from the turn before
    updates = list(
        agent.stream({"messages": [HumanMessage("annual leave?")]}, config, stream_mode="updates")
    )
    assert [d.metadata["source"] for d in updates[0]["model"]["retrieved"]] == ["leave.md"]


def test_restricted_documents_in_the_agents_state_are_keyed_stubs(kb):
    from tests.unit_tests.restricted_fixtures import make_summarizer

    agent = _agent(kb, NumberedChatModel(), tools=[], restricted=True,
                   summarizer_model=make_summarizer("honest"))  # fmt: skip
    state = agent.invoke(
        {"messages": [HumanMessage("annual leave days?")]}, {"configurable": {"thread_id": "r"}}
    )
    assert state["retrieved"] and all(d.page_content == "" for d in state["retrieved"])
    assert all(set(d.metadata) <= {"chunk_id", "score", "redacted"} for d in state["retrieved"])
    assert LEAVE not in repr(state["retrieved"]) and "leave.md" not in repr(state["retrieved"])


def test_agent_overrides_from_configurable(kb, searches):
    model = NumberedChatModel()
    agent = _agent(kb, model, keep_manifest=True)
    agent.invoke(
        {"messages": [HumanMessage("annual leave?")]},
        {"configurable": {"thread_id": "a", "knowledge_enabled": False}},
    )
    assert searches == [] and not any(is_injected(m) for m in model.received[-1])
    agent.invoke(
        {"messages": [HumanMessage("annual leave?")]},
        {"configurable": {"thread_id": "b", "placement": "postfix"}},
    )
    assert model.received[-1][-1].content.startswith("annual leave?\n\n[Retrieved Knowledge]")
    state = agent.invoke(
        {"messages": [HumanMessage("annual leave?")]},
        {"configurable": {"thread_id": "c", "min_score": 0.99}},
    )
    assert state["knowledge_manifest"]["injected"] is False


def test_agent_reads_per_request_settings_from_the_runtime_context(kb, searches):
    from langchain_knowledge_inject.settings import KnowledgeContext

    model = NumberedChatModel()
    agent = create_agent(
        model,
        system_prompt="You are HR.",
        context_schema=KnowledgeContext,
        middleware=[KnowledgeInjectionMiddleware(kb)],
    )
    agent.invoke(
        {"messages": [HumanMessage("annual leave?")]}, context={"knowledge_enabled": False}
    )
    assert searches == [] and not any(is_injected(m) for m in model.received[-1])
    agent.invoke({"messages": [HumanMessage("annual leave?")]}, context={"restricted": True})
    sent = "\n".join(m.text for m in model.received[-1])
    assert "[Restricted Knowledge Summary]" in sent and LEAVE not in sent


def test_no_after_agent_step_without_an_episodic_memory(kb):
    agent = _agent(kb, NumberedChatModel(), tools=[])
    updates = list(
        agent.stream(
            {"messages": [HumanMessage("annual leave?")]},
            {"configurable": {"thread_id": "t"}},
            stream_mode="updates",
        )
    )
    assert [next(iter(u)) for u in updates] == ["model"]
    assert "knowledge_manifest" not in agent.get_state({"configurable": {"thread_id": "t"}}).values


async def test_agent_emits_the_manifest_once_per_turn(kb):
    model = NumberedChatModel(script=_script(0))
    agent = _agent(kb, model)
    events = [
        e
        async for e in agent.astream_events(
            {"messages": [HumanMessage("annual leave?")]},
            {"configurable": {"thread_id": "t"}},
            version="v2",
        )
        if e["event"] == "on_custom_event" and e["name"] == "knowledge_injection"
    ]
    assert len(events) == 1
    assert events[0]["data"]["sources"] == ["leave.md"]


def test_agent_search_tool_skips_chunks_injected_this_turn(kb):
    model = NumberedChatModel(
        script=[
            _call("knowledge_base_search", {"query": "annual leave"}, "s1"),
            _call("knowledge_base_search", {"query": "sick leave note"}, "s2"),
            AIMessage("done", id="done"),
        ]
    )
    agent = _agent(kb, model, tools=[], search_tool=True)
    state = agent.invoke(
        {"messages": [HumanMessage("annual leave?")]}, {"configurable": {"thread_id": "t"}}
    )
    first, second = (m for m in state["messages"] if isinstance(m, ToolMessage))
    assert LEAVE not in first.content  # injected this turn
    assert [d.page_content for d in second.artifact] == [SICK]


def test_agent_restricted_without_summarizer_never_shows_raw_text(kb):
    model = NumberedChatModel(script=_script(0))
    agent = _agent(kb, model, restricted=True, keep_manifest=True)
    state = agent.invoke(
        {"messages": [HumanMessage("annual leave?")]}, {"configurable": {"thread_id": "t"}}
    )
    sent = "\n".join(m.text for call in model.received for m in call)
    assert "[Restricted Knowledge Summary]" in sent
    assert LEAVE not in sent and "25 days" not in sent
    assert state["knowledge_manifest"]["summary_reason"] == "summarizer_error"
