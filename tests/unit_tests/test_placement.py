"""Placement of the dynamic context, the injection marker, strip_injected, the query text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_knowledge_inject._turn.placement import (
    INJECTED_KEY,
    PLACEMENTS,
    current_user_index,
    injection_index,
    is_injected,
    place_context,
    query_text,
    strip_injected,
)
from langchain_knowledge_inject.errors import ConfigurationError

CTX = "[Retrieved Knowledge]\nfacts"


def _conversation() -> list[BaseMessage]:
    return [
        SystemMessage("You are helpful."),
        HumanMessage("How many days of leave?", id="h1"),
        AIMessage("25 days.", id="a1"),
        HumanMessage("And sick leave?", id="h2", additional_kwargs={"custom": 1}),
    ]


def _dump(messages):
    return [m.model_dump() for m in messages]


def test_dynamic_context_is_a_user_message_right_before_the_current_one():
    msgs = _conversation()
    out = place_context(msgs, CTX, placement="dynamic_context")
    assert out[:3] == msgs[:3] and out[4] is msgs[3]
    assert isinstance(out[3], HumanMessage) and out[3].content == CTX
    assert out[3].additional_kwargs[INJECTED_KEY]["placement"] == "dynamic_context"
    assert is_injected(out[3]) and not is_injected(out[4])


def test_postfix_is_appended_to_the_current_user_message():
    msgs = _conversation()
    out = place_context(msgs, CTX, placement="postfix")
    assert len(out) == 4 and out[:3] == msgs[:3]
    assert out[3].content == f"And sick leave?\n\n{CTX}"
    assert out[3].id == "h2" and out[3].additional_kwargs["custom"] == 1
    assert is_injected(out[3])


def test_system_placement_goes_right_after_the_system_prompt():
    msgs = _conversation()
    out = place_context(msgs, CTX, placement="system")
    assert out[0] is msgs[0]
    assert isinstance(out[1], SystemMessage) and out[1].content == CTX and is_injected(out[1])
    assert out[2:] == msgs[1:]


def test_system_placement_after_several_system_messages_and_without_one():
    msgs = [SystemMessage("a"), SystemMessage("b"), HumanMessage("q")]
    assert place_context(msgs, CTX, placement="system")[2].content == CTX
    out = place_context([HumanMessage("q")], CTX, placement="system")
    assert out[0].content == CTX and out[1].content == "q"


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_input_is_never_mutated_and_strip_restores_it(placement):
    msgs = _conversation()
    before = _dump(msgs)
    out = place_context(msgs, CTX, placement=placement)
    assert _dump(msgs) == before
    assert out is not msgs
    restored = strip_injected(out)
    assert restored == msgs
    assert _dump(restored) == before


def test_postfix_on_multimodal_content_adds_a_text_part():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    msgs = [HumanMessage([{"type": "text", "text": "What is this?"}, image])]
    out = place_context(msgs, CTX, placement="postfix")
    assert out[0].content[-1] == {"type": "text", "text": CTX}
    assert len(msgs[0].content) == 2
    assert strip_injected(out) == msgs


def test_postfix_on_empty_content():
    msgs = [HumanMessage("")]
    out = place_context(msgs, CTX, placement="postfix")
    assert out[0].content == CTX
    assert strip_injected(out) == msgs


def test_without_a_user_message_the_context_goes_last():
    msgs = [SystemMessage("s")]
    for placement in ("dynamic_context", "postfix"):
        out = place_context(msgs, CTX, placement=placement)
        assert out[-1].content == CTX and is_injected(out[-1])
        assert strip_injected(out) == msgs


def test_strip_injected_keeps_other_messages_as_they_are():
    msgs = _conversation()
    out = place_context(
        place_context(msgs, "a", placement="system"), "b", placement="dynamic_context"
    )
    stripped = strip_injected(out)
    assert stripped == msgs
    assert all(s is m for s, m in zip(stripped, msgs, strict=True))


def test_invalid_placement():
    with pytest.raises(ConfigurationError) as info:
        place_context(_conversation(), CTX, placement="top")  # type: ignore[arg-type]
    assert info.value.option == "placement" and "dynamic_context" in str(info.value)


def test_current_user_index_in_a_tool_loop_is_the_last_human_turn():
    msgs = [
        SystemMessage("s"),
        HumanMessage("first"),
        AIMessage("ok"),
        HumanMessage("what is the leave policy?"),
        AIMessage(
            "", tool_calls=[{"name": "knowledge_base_search", "args": {"query": "x"}, "id": "t1"}]
        ),
        ToolMessage("tool result", tool_call_id="t1"),
    ]
    assert current_user_index(msgs) == 3
    assert current_user_index([SystemMessage("s"), AIMessage("x")]) is None
    assert current_user_index([]) is None


def test_current_user_index_skips_injected_messages_but_not_postfix():
    msgs = [HumanMessage("q")]
    dynamic = place_context(msgs, CTX, placement="dynamic_context")
    assert current_user_index(dynamic) == 1
    # an injection placed last (no user message) is not a user message
    assert (
        current_user_index(place_context([SystemMessage("s")], CTX, placement="dynamic_context"))
        is None
    )
    assert current_user_index(place_context(msgs, CTX, placement="postfix")) == 0


def test_injection_index_is_the_stable_prefix_length():
    msgs = _conversation()
    assert injection_index(msgs, placement="dynamic_context") == 3
    assert injection_index(msgs, placement="postfix") == 3
    assert injection_index(msgs, placement="system") == 1


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("  How many days?  ", "How many days?"),
        ("", None),
        ("   \n", None),
        (
            [
                {"type": "text", "text": "Describe"},
                {"type": "image_url", "image_url": {"url": "u"}},
                {"type": "text", "text": "this chart"},
            ],
            "Describe\nthis chart",
        ),
        ([{"type": "image_url", "image_url": {"url": "u"}}], None),
        (["plain string part"], "plain string part"),
        (
            [{"type": "image", "source_type": "base64", "data": "AAAA", "mime_type": "image/png"}],
            None,
        ),
    ],
)
def test_query_text(content, expected):
    assert query_text(HumanMessage(content)) == expected


def test_query_text_of_none():
    assert query_text(None) is None


_message = st.one_of(
    st.builds(SystemMessage, st.text(max_size=10)),
    st.builds(HumanMessage, st.text(max_size=10)),
    st.builds(AIMessage, st.text(max_size=10)),
    st.builds(lambda t: HumanMessage([{"type": "text", "text": t}]), st.text(max_size=10)),
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_message, max_size=8), st.sampled_from(PLACEMENTS), st.text(min_size=1, max_size=20)
)
def test_strip_is_the_inverse_of_place(messages, placement, content):
    before = _dump(messages)
    out = place_context(messages, content, placement=placement)
    assert _dump(messages) == before
    assert sum(is_injected(m) for m in out) == 1
    assert strip_injected(out) == messages
    prefix = injection_index(messages, placement=placement)
    assert out[:prefix] == messages[:prefix]
