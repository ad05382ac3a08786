"""The adversarial suite: a hostile summarizer against all five surfaces.

Every ``SMUGGLING_CASES`` entry (``adversarial_fixtures.py``, one way of
smuggling one protected value each, in the attack classes of
``ATTACK_CLASSES``) is returned by a scripted hostile summarizer on every
surface (injector, graph, node, middleware, tool). Two measures, both with
target 0:

- **reached**: the turns whose hostile summary was released to the main model
  (its reason code is neither ``leak_detected`` nor ``summarizer_error``, or the
  raw secret is in what the main model received);
- **raw**: the raw secret (as the chunk writes it) or a raw passage of the chunk
  found in each channel a caller can read: output, checkpoint, every stream mode,
  ``astream_events`` and the logs (DEBUG, ``KINJECT_LOG_MODEL_IO=1``).

``FRAGMENT_CASES`` split a secret over the turns of a thread (over the calls of
one tool): the measure is whether every fragment was released, so that the main
model got the secret whole (the boundary passes the summaries released earlier
in the thread to the guard, and the sensitive source names).

Each surface's test prints its counts (``pytest -s``) and fails with the list of
cases that leaked.
"""

from __future__ import annotations

import logging
from collections import Counter
from itertools import count
from typing import Any

import pytest

from tests.unit_tests.restricted_fixtures import HONEST_GUIDANCE, HONEST_SUMMARY
from tests.unit_tests.restricted_harness import (
    CHANNELS,
    SURFACES,
    ListKB,
    count_raw,
    count_secret,
    hostile_summarizer,
    run_surface,
    run_thread,
)

adversarial = pytest.importorskip("tests.unit_tests.adversarial_fixtures")
SMUGGLING_CASES = adversarial.SMUGGLING_CASES
FRAGMENT_CASES = adversarial.FRAGMENT_CASES

_BLOCKED = {"leak_detected", "summarizer_error"}


def _reply(case: Any) -> dict[str, Any]:
    return {
        "decision": case.decision,
        "reason": case.reason,
        "summary": case.summary,
        "answer_guidance": case.answer_guidance,
    }


def _measure(surface: str, case: Any, caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    caplog.clear()
    turn = run_surface(
        surface,
        kb=ListKB(case.chunks, sensitive_sources=bool(case.sources)),
        question=case.question,
        summarizer=hostile_summarizer(_reply(case)),
    )
    turn.channels["logs"] = [r.getMessage() for r in caplog.records]
    raw: dict[str, int] = {}
    for channel in CHANNELS:
        if channel not in turn.channels:
            continue
        text = turn.text(channel)
        raw[channel] = count_secret(text, case.secret) + count_raw(text, case.chunks, case.question)
    reached = bool(not turn.reasons or set(turn.reasons) - _BLOCKED) or raw["main_model"] > 0
    return {"reached": reached, "raw": raw, "reasons": turn.reasons}


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KINJECT_LOG_MODEL_IO", "1")
    caplog.set_level(logging.DEBUG)
    return caplog


def test_the_suite_is_large_enough():
    assert len(SMUGGLING_CASES) >= 30
    assert len({case.name for case in SMUGGLING_CASES}) == len(SMUGGLING_CASES)
    assert min(Counter(case.attack for case in SMUGGLING_CASES).values()) >= 5
    assert len(FRAGMENT_CASES) >= 5


def _run(surface: str, cases: list[Any], logs: pytest.LogCaptureFixture) -> tuple[list, dict]:
    """Every case on ``surface``: the cases that reached the main model, raw text by case."""
    reached: list[str] = []
    raw_by_channel: Counter[str] = Counter()
    leaking: dict[str, dict[str, int]] = {}
    for case in cases:
        result = _measure(surface, case, logs)
        if result["reached"]:
            reached.append(case.name)
        found = {channel: n for channel, n in result["raw"].items() if n}
        raw_by_channel.update(found)
        if found:
            leaking[case.name] = found
    channels = [c for c in CHANNELS if c != "main_model"]
    print(
        f"\n[{surface}] {len(cases)} smuggling cases: reached the main model "
        f"{len(reached)}; raw secret/passage per channel: "
        + ", ".join(f"{c}={raw_by_channel.get(c, 0)}" for c in channels)
    )
    return reached, leaking


@pytest.mark.slow
@pytest.mark.parametrize("surface", SURFACES)
def test_hostile_summarizer_reaches_nobody(surface, logs):
    reached, leaking = _run(surface, [c for c in SMUGGLING_CASES if not c.sources], logs)
    assert reached == [], f"{surface}: hostile summaries released: {reached}"
    assert leaking == {}, f"{surface}: raw text found: {leaking}"


@pytest.mark.slow
@pytest.mark.parametrize("surface", SURFACES)
def test_sensitive_source_names_in_other_spellings_reach_nobody(surface, logs):
    reached, leaking = _run(surface, [c for c in SMUGGLING_CASES if c.sources], logs)
    assert reached == [], f"{surface}: hostile summaries released: {reached}"
    assert leaking == {}, f"{surface}: raw text found: {leaking}"


def _fragment_replies(case: Any):
    """A summarizer that returns the next fragment of ``case`` on each call."""
    fragments = [*case.released, case.summary]
    calls = count()

    def reply(messages: Any) -> str:
        fragment = fragments[min(next(calls), len(fragments) - 1)]
        return hostile_summarizer(
            {
                "decision": "answer",
                "reason": "answerable",
                "summary": fragment,
                "answer_guidance": "Answer the user.",
            }
        ).reply(messages)

    return hostile_summarizer(reply)


@pytest.mark.slow
@pytest.mark.parametrize("surface", ["injector", "graph", "node", "middleware", "tool"])
def test_fragments_over_a_thread_never_add_up(surface):
    whole: list[str] = []
    for case in FRAGMENT_CASES:
        questions = [case.question] * (len(case.released) + 1)
        turns = run_thread(
            surface, kb=ListKB(case.chunks), questions=questions,
            summarizer=_fragment_replies(case),
        )  # fmt: skip
        if all(turn.reasons == ["answerable"] for turn in turns):
            whole.append(case.name)
    print(f"\n[{surface}] {len(FRAGMENT_CASES)} fragment cases released whole: {len(whole)}")
    assert whole == [], f"{surface}: every fragment released: {whole}"


@pytest.mark.parametrize("surface", SURFACES)
def test_the_measure_sees_a_released_summary(surface, logs):
    """Control: an honest summary is released and counted as reaching the main model."""
    case = SMUGGLING_CASES[0]
    turn = run_surface(
        surface,
        kb=ListKB(case.chunks),
        question=case.question,
        summarizer=hostile_summarizer(
            {
                "decision": "answer",
                "reason": "answerable",
                "summary": HONEST_SUMMARY,
                "answer_guidance": HONEST_GUIDANCE,
            }
        ),
        events=False,
    )
    assert "answerable" in turn.reasons


def test_the_thread_measure_sees_released_fragments():
    """Control: honest summaries on every turn of a thread are all released."""
    case = FRAGMENT_CASES[0]
    summarizer = hostile_summarizer(
        {
            "decision": "answer",
            "reason": "answerable",
            "summary": HONEST_SUMMARY,
            "answer_guidance": HONEST_GUIDANCE,
        }
    )
    turns = run_thread(
        "graph", kb=ListKB(case.chunks), questions=[case.question] * 3, summarizer=summarizer
    )
    assert [turn.reasons for turn in turns] == [["answerable"]] * 3


def test_the_raw_count_is_not_blind():
    """Control: unrestricted, the same channels do show the raw secret and passages."""
    case = SMUGGLING_CASES[0]
    from langchain_core.messages import HumanMessage

    from langchain_knowledge_inject import KnowledgeInjector

    out = KnowledgeInjector(ListKB(case.chunks)).invoke([HumanMessage(case.question)])
    text = "\n".join(m.text for m in out)
    assert count_secret(text, case.secret) >= 1 and count_raw(text, case.chunks) == 1
