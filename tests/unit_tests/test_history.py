"""trim_history: off by default; system prompt and current turn kept; what was cut reported."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_knowledge_inject._turn.history import TrimmedHistory, trim_history
from langchain_knowledge_inject.errors import ConfigurationError


def words(n: int, word: str = "leave") -> str:
    return " ".join([word] * n)


def _turns(count: int, size: int = 20) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(count):
        out += [HumanMessage(words(size), id=f"h{i}"), AIMessage(words(size), id=f"a{i}")]
    return out


def _chat(count: int = 5) -> list[BaseMessage]:
    return [SystemMessage("You are HR.", id="s"), *_turns(count), HumanMessage("Now?", id="now")]


def test_off_by_default_and_under_budget_nothing_is_cut():
    chat = _chat()
    for result in (trim_history(chat), trim_history(chat, max_tokens=10_000)):
        assert result.messages == chat and result.removed == [] and not result.trimmed
        assert result.tokens_before == result.tokens_after > 0


def test_the_oldest_turns_go_first_and_system_and_current_turn_stay():
    chat = _chat(5)
    full = trim_history(chat).tokens_before
    result = trim_history(chat, max_tokens=full // 2)
    ids = [m.id for m in result.messages]
    assert ids[0] == "s" and ids[-1] == "now"
    assert ids[1].startswith("h")  # the kept history starts on a user message
    assert [m.id for m in result.removed] == [m.id for m in chat[1 : 1 + len(result.removed)]]
    assert result.messages == [chat[0], *chat[1 + len(result.removed) :]]
    assert result.tokens_after <= full // 2 < result.tokens_before
    assert result.trimmed and not result.over_budget


def test_all_leading_system_messages_are_kept():
    chat = [SystemMessage("a"), SystemMessage("b"), *_turns(4), HumanMessage("q")]
    result = trim_history(chat, max_tokens=30)
    assert [m.content for m in result.messages[:2]] == ["a", "b"]
    assert result.messages[-1].content == "q"


def test_the_tool_loop_of_the_current_turn_is_kept_and_no_tool_result_is_orphaned():
    call = {"name": "search", "args": {"q": "leave"}, "id": "c1"}
    old_call = {"name": "search", "args": {"q": "old"}, "id": "c0"}
    chat = [
        SystemMessage("sys"),
        HumanMessage(words(30), id="h0"),
        AIMessage("", tool_calls=[old_call], id="a0"),
        ToolMessage(words(30), tool_call_id="c0", id="t0"),
        AIMessage(words(30), id="a0b"),
        HumanMessage("and sick leave?", id="h1"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage(words(30), tool_call_id="c1", id="t1"),
    ]
    # room for the old tool result and the reply after it, but not for the call before them
    fixed = trim_history([chat[0], *chat[5:]]).tokens_before
    orphan_room = trim_history(chat[3:5]).tokens_before
    result = trim_history(chat, max_tokens=fixed + orphan_room + 5)
    assert [m.id for m in result.messages] == [None, "h1", "a1", "t1"]
    assert [m.id for m in result.removed] == ["h0", "a0", "t0", "a0b"]
    whole = trim_history(chat, max_tokens=trim_history(chat).tokens_before - 1)
    assert [m.id for m in whole.removed] == ["h0", "a0", "t0", "a0b"]


def test_a_current_turn_over_the_budget_is_kept_whole_and_flagged(caplog):
    chat = [SystemMessage("sys"), *_turns(2), HumanMessage(words(400), id="big")]
    with caplog.at_level(logging.WARNING, logger="langchain_knowledge_inject.history"):
        result = trim_history(chat, max_tokens=50)
    assert [m.id for m in result.messages] == [None, "big"]
    assert len(result.removed) == 4 and result.over_budget
    assert "max_tokens=50" in caplog.text


def test_no_user_message_leaves_the_history_whole(caplog):
    chat = [SystemMessage("sys"), AIMessage(words(100))]
    with caplog.at_level(logging.WARNING, logger="langchain_knowledge_inject.history"):
        result = trim_history(chat, max_tokens=10)
    assert result.messages == chat and not result.trimmed
    assert "no user message" in caplog.text


def test_a_chat_model_can_count_the_tokens():
    class CountingModel(GenericFakeChatModel):
        def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Any = None):
            return 10 * len(messages)

    model = CountingModel(messages=iter([]))
    result = trim_history(_chat(5), max_tokens=45, token_counter=model)
    assert result.tokens_before == 120 and result.tokens_after <= 45
    assert len(result.messages) == 4  # system, one turn (2), current


def test_to_dict_reports_what_was_cut_and_is_json():
    result = trim_history(_chat(5), max_tokens=60)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["messages_removed"] == len(result.removed) > 0
    assert data["removed_ids"] == [m.id for m in result.removed]
    assert data["max_tokens"] == 60 and data["over_budget"] is False
    assert data["tokens_before"] > data["tokens_after"]


@pytest.mark.parametrize("bad", [0, -5, True, 2.5, "100"])
def test_a_bad_budget_is_a_clear_error(bad):
    with pytest.raises(ConfigurationError, match="max_tokens must be a positive integer"):
        trim_history(_chat(), max_tokens=bad)


def test_a_bad_counter_is_a_clear_error():
    with pytest.raises(ConfigurationError, match="token_counter must be"):
        trim_history(_chat(), max_tokens=10, token_counter=5)  # type: ignore[arg-type]


_message = st.one_of(
    st.builds(lambda n: HumanMessage(words(n)), st.integers(0, 40)),
    st.builds(lambda n: AIMessage(words(n)), st.integers(0, 40)),
    st.builds(lambda n: SystemMessage(words(n)), st.integers(0, 5)),
)


@settings(max_examples=150, deadline=None)
@given(
    lead=st.integers(0, 2),
    body=st.lists(_message, max_size=12),
    tail=st.integers(1, 60),
    budget=st.integers(1, 400),
)
def test_invariants(lead: int, body: list[BaseMessage], tail: int, budget: int):
    chat = [
        *[SystemMessage(f"s{i}") for i in range(lead)],
        *body,
        HumanMessage(words(tail, "now")),
    ]
    result = trim_history(chat, max_tokens=budget)
    assert isinstance(result, TrimmedHistory)
    assert result.messages[-1] is chat[-1]  # the current turn stays
    system = 0
    while system < len(chat) - 1 and isinstance(chat[system], SystemMessage):
        system += 1
    assert result.messages[:system] == chat[:system]  # the system prompt stays
    kept = result.messages[system:-1]
    history = chat[system:-1]
    assert [*result.removed, *kept] == history  # the cut is a prefix of the history
    if result.removed:
        assert not kept or isinstance(kept[0], HumanMessage)
        assert result.tokens_after <= budget or not kept
