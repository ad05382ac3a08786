"""Dates in questions resolved against a reference time (episodic memory)."""

from __future__ import annotations

import doctest
from datetime import datetime, timezone

import pytest

from langchain_knowledge_inject._memory import temporal as _temporal
from langchain_knowledge_inject._memory.temporal import asks_about_now, asks_about_past, resolve

NOW = datetime(2024, 6, 12, 15, 0, tzinfo=timezone.utc)  # a Wednesday


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What did I eat yesterday?", "2024-06-11", "2024-06-12"),
        ("What happened the day before yesterday?", "2024-06-10", "2024-06-11"),
        ("What did we say today?", "2024-06-12", "2024-06-13"),
        ("What did I buy two weeks ago?", "2024-05-25", "2024-06-02"),
        ("Where was I 3 days ago?", "2024-06-08", "2024-06-11"),
        ("What did I read a couple of months ago?", "2024-03-27", "2024-04-28"),
        ("What did I cook last May?", "2024-05-01", "2024-06-01"),
        ("What did I cook last June?", "2023-06-01", "2023-07-01"),
        ("Where did I travel in August?", "2023-08-01", "2023-09-01"),
        ("Where did I travel back in April?", "2024-04-01", "2024-05-01"),
        ("What did I do in May 2022?", "2022-05-01", "2022-06-01"),
        ("Which books did I read in 2023?", "2023-01-01", "2024-01-01"),
        ("What happened on March 3rd?", "2024-03-03", "2024-03-04"),
        ("What happened on 3 May 2023?", "2023-05-03", "2023-05-04"),
        ("What happened on June 5, 2023?", "2023-06-05", "2023-06-06"),
        ("What did I do last weekend?", "2024-06-08", "2024-06-10"),
        ("What did I do last Monday?", "2024-06-10", "2024-06-11"),
        ("What did we talk about last week?", "2024-06-03", "2024-06-10"),
        ("What did I watch last month?", "2024-05-01", "2024-06-01"),
        ("What did I plan earlier this month?", "2024-06-01", "2024-06-12"),
        ("What did I start last year?", "2023-01-01", "2024-01-01"),
    ],
)
def test_date_expressions_resolve_to_ranges(question, start, end) -> None:
    found = resolve(question, now=NOW)

    assert found is not None
    assert (found.start.date().isoformat(), found.end.date().isoformat()) == (start, end)
    assert found.text.lower() not in found.rest.lower()
    assert found.start < found.end


@pytest.mark.parametrize(
    "question",
    ["May I ask what my dog is called?", "What is my sister's name?", "I march every day.", ""],
)
def test_no_date_no_range(question) -> None:
    assert resolve(question, now=NOW) is None


def test_a_naive_reference_time_is_taken_as_utc() -> None:
    naive = resolve("yesterday", now=datetime(2024, 6, 12, 15, 0))
    assert naive is not None and naive.start == datetime(2024, 6, 11, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("question", "past"),
    [
        ("When did I adopt the dog?", True),
        ("What did I cook last May?", True),
        ("Where did I use to work?", True),
        ("What is my dog's name?", False),
        ("Where do I live?", False),
    ],
)
def test_questions_about_the_past(question, past) -> None:
    assert asks_about_past(question, found=resolve(question, now=NOW)) is past


@pytest.mark.parametrize(
    ("question", "now"),
    [
        ("Where does Ana live now?", True),
        ("What is Ana's current job?", True),
        ("Is Bo still with the running club?", True),
        ("What does Ana do these days?", True),
        ("Where did Ana live before the latest move?", False),
        ("What was her previous job, before the current one?", False),
        ("What does Ana do for a living?", False),
        ("Who knows?", False),
    ],
)
def test_questions_about_the_present(question, now) -> None:
    assert asks_about_now(question) is now


def test_docstring_examples() -> None:
    result = doctest.testmod(_temporal)
    assert result.attempted > 0 and result.failed == 0
