"""History-aware retrieval queries: the follow-up heuristic and the condenser model."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatResult

from langchain_knowledge_inject._turn.placement import place_context
from langchain_knowledge_inject._turn.query import (
    CONDENSE_PROMPT,
    QueryCondenser,
    followup_query,
    looks_like_follow_up,
    salient_terms,
)
from langchain_knowledge_inject.errors import ConfigurationError
from tests.unit_tests.fakes import RecordingChatModel


def chat(*texts: str) -> list[BaseMessage]:
    """User and assistant turns alternating, starting with the user; the last is the user's."""
    return [
        (HumanMessage if i % 2 == 0 else AIMessage)(text)  # type: ignore[operator]
        for i, text in enumerate(texts)
    ]


def recorder(answer: Any = lambda messages: "standalone question") -> RecordingChatModel:
    """A query model that answers ``answer(messages)`` and records every request."""
    return RecordingChatModel(reply=answer)


# -- the heuristic -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["and abroad?", "what about client dinners?", "is all of it paid in full?",
     "Is there a mandatory office day?", "outside the office too?", "How often?",
     "But for contractors, how does that work?"],
)  # fmt: skip
def test_follow_ups_are_detected(text):
    assert looks_like_follow_up(text)


@pytest.mark.parametrize(
    "text",
    ["What should I do if my laptop is stolen?", "How many leave days can I carry over?",
     "When do I need a doctor's note for a sickness absence?",
     "Explain in detail how this company's expense approval process works for travel."],
)  # fmt: skip
def test_self_contained_questions_are_not_follow_ups(text):
    assert not looks_like_follow_up(text)


def test_salient_terms_drop_function_words_and_keep_numbers():
    assert salient_terms("What's the hotel cap in New York for 2 nights?") == [
        "hotel", "cap", "new", "york", "2", "nights",
    ]  # fmt: skip
    assert salient_terms("and what about it?") == []


def test_a_follow_up_gets_the_terms_of_the_question_it_continues():
    msgs = chat(
        "How many weeks of parental leave does the birth parent get?", "26.", "and the partner?"
    )
    assert followup_query(msgs) == "and the partner? weeks parental leave birth parent"


def test_terms_the_message_already_has_are_not_repeated():
    msgs = chat("What is the hotel cap per night?", "EUR 160.", "and the hotel cap in Paris?")
    assert followup_query(msgs) == "and the hotel cap in Paris? night"


def test_a_chain_of_follow_ups_reaches_back_to_the_last_self_contained_turn():
    msgs = chat("I'm travelling to London next month for a client.", "Nice.",
                "Which tool do I book it in?", "Navan.", "and the hotel limit there?")  # fmt: skip
    query = followup_query(msgs)
    assert query is not None and "london" in query and "tool" in query
    assert followup_query(msgs, max_turns=1) == "and the hotel limit there? tool book"


def test_a_topic_switch_and_a_first_turn_are_searched_alone():
    switch = chat(
        "What is the hotel cap per night?", "EUR 160.", "How do I report a stolen laptop?"
    )
    assert followup_query(switch) == "How do I report a stolen laptop?"
    assert followup_query(chat("and abroad?")) == "and abroad?"
    assert followup_query(chat("Leave?", "25 days.", "and abroad?"), max_turns=0) == "and abroad?"
    assert followup_query([SystemMessage("s")]) is None


def test_injected_content_never_reaches_the_query():
    history = chat("What is the meal allowance at home?", "EUR 45.", "and abroad?")
    injected = place_context(history, "[User Facts]\nsecret=value", placement="dynamic_context")
    earlier = place_context(history[:1], "[User Facts]\nsecret=value", placement="postfix")
    for msgs in (injected, [*earlier, *history[1:]]):
        query = followup_query(msgs)
        assert query == "and abroad? meal allowance home" and "secret" not in query


def test_a_negative_window_is_a_clear_error():
    with pytest.raises(ConfigurationError, match="max_turns"):
        followup_query(chat("q"), max_turns=-1)


# -- the condenser -------------------------------------------------------------------------


def test_the_condenser_sends_the_prompt_history_and_message_and_uses_the_answer():
    model = recorder(lambda m: ' "Meal allowance when travelling abroad"\n')
    msgs = [
        SystemMessage("You are HR."),
        *chat("Meal allowance at home?", "EUR 45.", "and abroad?"),
    ]
    result = QueryCondenser(model).condense(msgs)
    assert (result.query, result.how, result.model_calls) == (
        "Meal allowance when travelling abroad", "model", 1,
    )  # fmt: skip
    [request] = model.received
    assert request[0].content == CONDENSE_PROMPT
    assert request[1].content == (
        "Conversation:\nUser: Meal allowance at home?\nAssistant: EUR 45.\n\n"
        "Last message: and abroad?"
    )
    assert "You are HR." not in request[1].content  # the system prompt is not history


def test_the_answer_is_cached_per_turn():
    model = recorder()
    condenser = QueryCondenser(model)
    msgs = chat("Meal allowance at home?", "EUR 45.", "and abroad?")
    assert condenser.condense(msgs).how == "model"
    assert condenser.condense(list(msgs)).how == "cache"
    assert condenser.condense(chat("Hotel cap?", "EUR 160.", "and abroad?")).how == "model"
    assert len(model.received) == 2


def test_the_cache_is_bounded_and_can_be_off():
    model = recorder()
    condenser = QueryCondenser(model, cache_size=1)
    first, second = chat("A?", "a", "and b?"), chat("C?", "c", "and d?")
    condenser.condense(first)
    condenser.condense(second)
    assert condenser.condense(first).how == "model"  # evicted
    off = QueryCondenser(model, cache_size=0)
    assert [off.condense(first).how for _ in range(2)] == ["model", "model"]


def test_no_history_no_call_and_only_follow_ups_saves_calls():
    model = recorder()
    assert QueryCondenser(model).condense(chat("Leave?")).query == "Leave?"
    gated = QueryCondenser(model, only_follow_ups=True)
    switch = chat("Hotel cap?", "EUR 160.", "How do I report a stolen laptop?")
    result = gated.condense(switch)
    assert (result.query, result.how, result.model_calls) == (switch[-1].content, "heuristic", 0)
    assert model.received == []
    assert QueryCondenser(model).condense([SystemMessage("s")]).how == "none"


def test_the_request_keeps_the_last_turns_clipped():
    model = recorder()
    texts = [f"turn {i} " + "x" * 50 for i in range(10)] + ["and then?"]
    QueryCondenser(model, max_turns=3, max_chars=20).condense(chat(*texts))
    body = model.received[0][1].content
    assert body.count("\n") == 5 and "turn 9" in body and "turn 6" not in body
    assert all(len(line) <= len("Assistant: ") + 20 for line in body.splitlines()[1:4])


def test_injected_content_is_stripped_before_the_condenser_sees_the_history():
    model = recorder()
    history = chat("Meal allowance at home?", "EUR 45.", "and abroad?")
    injected = place_context(history, "[User Facts]\nsecret=value", placement="dynamic_context")
    QueryCondenser(model).condense(injected)
    assert "secret" not in model.received[0][1].content


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (lambda m: (_ for _ in ()).throw(ConnectionError("provider down")), "provider down"),
        (lambda m: "   ", "empty query"),
    ],
)
def test_a_failing_model_falls_back_to_the_heuristic_with_a_log(answer, error, caplog):
    msgs = chat("What is the meal allowance at home?", "EUR 45.", "and abroad?")
    condenser = QueryCondenser(recorder(answer))
    with caplog.at_level(logging.WARNING, logger="langchain_knowledge_inject.retrieval_query"):
        result = condenser.condense(msgs)
    assert result.query == followup_query(msgs) and result.how == "heuristic"
    assert error in (result.error or "") and "follow-up heuristic" in caplog.text
    assert condenser.condense(msgs).model_calls == 1  # a failure is not cached


@pytest.mark.slow
def test_a_model_that_hangs_times_out_to_the_heuristic():
    release = threading.Event()

    def hang(messages):
        release.wait(5)
        return "too late"

    msgs = chat("What is the meal allowance at home?", "EUR 45.", "and abroad?")
    try:
        result = QueryCondenser(recorder(hang), timeout=0.05).condense(msgs)
    finally:
        release.set()
    assert (result.query, result.how, result.error) == (
        followup_query(msgs),
        "heuristic",
        "timed out",
    )


@pytest.mark.slow
async def test_async_twin_condenses_caches_and_times_out():
    fake = GenericFakeChatModel(messages=iter([AIMessage("meal allowance abroad")]))
    condenser = QueryCondenser(fake)
    msgs = chat("Meal allowance at home?", "EUR 45.", "and abroad?")
    assert (await condenser.acondense(msgs)).query == "meal allowance abroad"
    assert (await condenser.acondense(msgs)).how == "cache"

    class Slow(GenericFakeChatModel):
        async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
            await asyncio.sleep(5)
            raise AssertionError("not reached")

    slow = QueryCondenser(Slow(messages=iter([])), timeout=0.05)
    result = await slow.acondense(msgs)
    assert result.how == "heuristic" and result.query == followup_query(msgs)


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"max_turns": 0}, "max_turns"),
        ({"max_chars": True}, "max_chars"),
        ({"cache_size": -1}, "cache_size"),
        ({"timeout": 0}, "timeout"),
        ({"prompt": " "}, "prompt"),
    ],
)
def test_bad_options_are_clear_errors(kwargs, option):
    with pytest.raises(ConfigurationError) as info:
        QueryCondenser(recorder(), **kwargs)
    assert info.value.option == option


def test_a_model_that_is_not_a_chat_model_is_refused():
    with pytest.raises(ConfigurationError, match="chat model"):
        QueryCondenser("gpt-4o")  # type: ignore[arg-type]
