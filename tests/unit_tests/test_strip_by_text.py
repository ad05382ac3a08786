"""strip_injected on histories that lost additional_kwargs: recognition by text and position."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_messages,
    convert_to_openai_messages,
)

from langchain_knowledge_inject import KnowledgeInjector
from langchain_knowledge_inject._memory.episodic import Episode, format_episodes
from langchain_knowledge_inject._memory.facts import format_user_facts
from langchain_knowledge_inject._memory.procedures import Procedure, format_procedure
from langchain_knowledge_inject._restricted.boundary import format_block, refused
from langchain_knowledge_inject._restricted.scope import safe_kb_meta
from langchain_knowledge_inject._turn.formatting import (
    KnowledgeBlockTemplate,
    format_kb_meta,
    format_knowledge_block,
)
from langchain_knowledge_inject._turn.placement import (
    INJECTION_HEADERS,
    PLACEMENTS,
    injection_start,
    place_context,
    strip_injected,
)

LEAVE = Document(
    "Employees receive 25 days of annual leave.",
    id="c1",
    metadata={"source": "leave.md", "score": 0.9, "category": "hr"},
)


def _blocks() -> dict[str, str]:
    """One real block of every kind the package injects, rendered by its own formatter."""
    episode = Episode("e1", "exchange", "My dog is Rex.", "Nice name!",
                      datetime(2024, 5, 2, tzinfo=timezone.utc), "u1")  # fmt: skip
    info = {"name": "hr", "id": "kb1", "description": "HR policies", "topics": ["leave"]}
    return {
        "kb_meta": format_kb_meta([info]),
        "restricted_kb_meta": safe_kb_meta([info]),
        "procedure": format_procedure(Procedure("Reset password", "", ["Open", "Click"])),
        "knowledge": format_knowledge_block([LEAVE]),
        "summary": format_block(refused("summarizer_error")),
        "episodic": format_episodes([episode]) or "",
        "facts": format_user_facts({"city": "Lisbon"}) or "",
    }


def _texts(message: BaseMessage) -> list[str]:
    content = message.content
    return [content] if isinstance(content, str) else [p["text"] for p in content]


def _round_trip(messages: list[BaseMessage]) -> list[BaseMessage]:
    """What an app that stores plain role/content dicts gets back."""
    return convert_to_messages(
        [{"role": m["role"], "content": m["content"]} for m in convert_to_openai_messages(messages)]
    )


def _history() -> list[BaseMessage]:
    return [
        SystemMessage("You are HR."),
        HumanMessage("How many days of leave?"),
        AIMessage("25 days."),
        HumanMessage("And sick leave?"),
    ]


# -- recognition of the package's own blocks ------------------------------------------


def test_every_block_the_package_writes_starts_with_a_known_header():
    for name, block in _blocks().items():
        assert block.split("\n", 1)[0] in INJECTION_HEADERS, name
        assert injection_start(block) == 0, name


def test_blocks_joined_in_order_are_one_injection_and_after_a_question_a_postfix():
    b = _blocks()
    joined = "\n\n".join([b["kb_meta"], b["procedure"], b["knowledge"], b["episodic"], b["facts"]])
    assert injection_start(joined) == 0
    text = f"What about sick leave?\n\n{joined}"
    assert text[: injection_start(text)] == "What about sick leave?\n\n"


@pytest.mark.parametrize(
    "text",
    [
        "[Retrieved Knowledge]",  # a header with nothing after it
        "[Retrieved Knowledge]\nwhat does this header mean?",  # not the block's second line
        "I saw [Retrieved Knowledge]\nThe information below was retrieved from the knowledge base",
        "Quote: [User Facts]\ncity=Lisbon",  # not at a line start after a blank line
        "[retrieved knowledge]\nThe information below was retrieved from the knowledge base",
        "[User Facts]\n no key value here",
        "[Procedure]\nPlease write me a procedure for onboarding.",
    ],
)
def test_a_quoted_header_with_other_text_is_not_injected_content(text):
    assert injection_start(text) is None
    assert injection_start(f"My question:\n\n{text}") is None


def test_out_of_order_blocks_start_at_the_last_in_order_run():
    b = _blocks()
    quoted = f"Why did you show me this?\n\n{b['facts']}\n\n{b['knowledge']}"
    # facts cannot precede knowledge in an injection: only the knowledge block is injected
    assert quoted[injection_start(quoted) :] == b["knowledge"]


def test_a_quoted_block_earlier_in_the_message_is_kept():
    b = _blocks()
    text = f"Earlier I saw:\n\n{b['knowledge']}\n\nIs that right?\n\n{b['knowledge']}"
    start = injection_start(text)
    assert start is not None and text[start:] == b["knowledge"]
    assert text[:start].count("[Retrieved Knowledge]") == 1


def test_custom_headers_are_recognized_when_given():
    template = KnowledgeBlockTemplate(header="[Docs]", intro="")
    block = format_knowledge_block([LEAVE], template=template)
    assert injection_start(block) is None
    assert injection_start(block, headers=["[Docs]"]) == 0


# -- strip_injected after a round trip through plain dicts ------------------------------


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("kind", ["kb_meta", "knowledge", "summary", "episodic", "facts"])
def test_round_tripped_injection_is_stripped_for_every_placement(placement, kind):
    history = _history()
    injected = place_context(history, _blocks()[kind], placement=placement)
    turn = [*_round_trip([*injected, AIMessage("A doctor's note.")]), HumanMessage("Thanks!")]
    assert not any(m.additional_kwargs for m in turn)
    clean = strip_injected(turn)
    assert [(m.type, m.content) for m in clean] == [
        (m.type, m.content)
        for m in [*history, AIMessage("A doctor's note."), HumanMessage("Thanks!")]
    ]


def test_multimodal_postfix_loses_its_text_part_after_a_round_trip():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}
    question = HumanMessage([{"type": "text", "text": "What is on this form?"}, image])
    injected = place_context([question], _blocks()["knowledge"], placement="postfix")
    stored = [HumanMessage(injected[0].content), AIMessage("A leave form."), HumanMessage("Ok")]
    assert strip_injected(stored)[0].content == question.content


def test_a_marked_message_is_restored_exactly_and_not_cut_again():
    b = _blocks()
    own = f"Earlier I saw:\n\n{b['facts']}"  # the user's own text ends like a block
    injected = place_context([HumanMessage(own)], b["knowledge"], placement="postfix")
    assert strip_injected([*injected, AIMessage("ok"), HumanMessage("next")])[0].content == own


def test_the_injector_never_doubles_the_block_over_a_plain_dict_history():
    class KB:
        name = "hr"
        info = SimpleNamespace(name="hr", id="hr-id", description="HR", topics=["leave"])

        def search(self, query: str, **kwargs: Any) -> list[Document]:
            return [LEAVE]

        async def asearch(self, query: str, **kwargs: Any) -> list[Document]:
            return [LEAVE]

    for placement in PLACEMENTS:
        injector = KnowledgeInjector(KB(), placement=placement, include_kb_meta=True)
        stored: list[dict[str, Any]] = [{"role": "system", "content": "You are HR."}]
        for question in ["How many days of leave?", "and part-timers?", "and interns?"]:
            stored.append({"role": "user", "content": question})
            sent = injector.invoke(convert_to_messages(stored))
            text = "\n".join("\n".join(_texts(m)) for m in sent)
            # block headers stand alone on their line (the knowledge prompt names them inline)
            assert len(re.findall(r"^\[Retrieved Knowledge\]$", text, re.M)) == 1, placement
            assert len(re.findall(r"^\[Knowledge Bases\]$", text, re.M)) == 1, placement
            # the app stores what it sent, as plain dicts, and the reply
            stored = [{"role": m["role"], "content": m["content"]}
                      for m in convert_to_openai_messages(sent)]  # fmt: skip
            stored.append({"role": "assistant", "content": "25 days."})


# -- false positives: a user's own messages that quote a marker -----------------------


def test_the_current_message_is_never_stripped_by_its_text():
    b = _blocks()
    for text in [b["knowledge"], f"Explain this:\n\n{b['knowledge']}"]:
        history = [*_history()[:-1], HumanMessage(text)]
        assert strip_injected(history) == history


def test_a_past_message_that_is_a_quoted_block_answered_by_the_model_is_kept():
    quoted = HumanMessage(_blocks()["knowledge"])
    history = [quoted, AIMessage("That is a knowledge block."), HumanMessage("Thanks")]
    assert strip_injected(history) == history


def test_past_messages_that_quote_a_header_with_their_own_text_are_kept():
    history = [
        HumanMessage("[Retrieved Knowledge]\nwhat is this header I keep seeing?"),
        HumanMessage("Also: [User Facts]\ncity=Lisbon - is that stored about me?"),
        HumanMessage("Docs say:\n\n[Procedure]\nPlease add one for onboarding."),
        AIMessage("Let me explain."),
        HumanMessage("ok"),
    ]
    assert strip_injected(history) == history


def test_the_first_system_message_and_later_system_messages_are_kept():
    block = _blocks()["knowledge"]
    history = [SystemMessage(block), HumanMessage("q"), AIMessage("a"), SystemMessage(block),
               HumanMessage("next")]  # fmt: skip
    assert strip_injected(history) == history


def test_untouched_messages_are_the_same_objects():
    history = _history()
    assert all(a is b for a, b in zip(strip_injected(history), history, strict=True))


# -- properties ----------------------------------------------------------------------------

_INTRO = "The information below was retrieved from the knowledge base"
_piece = st.sampled_from(
    ["a", "b", " ", "[", "]", "\n", "=", "-", ":", "[Retrieved Knowledge]", "[User Facts]",
     "\n\n", "Source: ", "x=y", "- hr", _INTRO]
)  # fmt: skip
_text = st.lists(_piece, max_size=12).map("".join)


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(_text, min_size=1, max_size=6),
    placement=st.sampled_from(PLACEMENTS),
    kind=st.sampled_from(["kb_meta", "knowledge", "facts", "episodic"]),
)
def test_round_trip_then_strip_gives_back_the_history(texts, placement, kind):
    assume(all(t.strip() for t in texts))
    assume(all(injection_start(t) is None for t in texts))  # the user's own texts hold no block
    history: list[BaseMessage] = [SystemMessage("sys")]
    for text in texts[:-1]:
        history += [HumanMessage(text), AIMessage("reply")]
    history.append(HumanMessage(texts[-1]))
    injected = place_context(history, _blocks()[kind], placement=placement)
    stored = _round_trip([*injected, AIMessage("answer")])
    clean = strip_injected([*stored, HumanMessage("next")])
    expected = [*history, AIMessage("answer"), HumanMessage("next")]
    assert [(m.type, m.content) for m in clean] == [(m.type, m.content) for m in expected]


@settings(max_examples=200, deadline=None)
@given(history=st.lists(_text, max_size=5), current=_text)
def test_the_current_message_survives_any_text(history, current):
    messages: list[BaseMessage] = []
    for text in history:
        messages += [HumanMessage(text), AIMessage("reply")]
    messages.append(HumanMessage(current))
    assert strip_injected(messages)[-1] is messages[-1]
