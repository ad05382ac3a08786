"""The leak guard: thresholds, normalization, and the labelled set behind the defaults."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_knowledge_inject import leak_guard
from langchain_knowledge_inject.errors import ConfigurationError
from langchain_knowledge_inject.leak_guard import LeakPolicy, LeakReport, check_leak
from tests.unit_tests.restricted_fixtures import CHUNKS, LEAK_CASES


def _errors(policy: LeakPolicy) -> tuple[list[str], list[str]]:
    """False positives and false negatives of ``policy`` on the labelled set."""
    false_pos, false_neg = [], []
    for case in LEAK_CASES:
        flagged = check_leak(case.summary, case.chunks, policy=policy).leaked
        if flagged and not case.should_flag:
            false_pos.append(case.name)
        if case.should_flag and not flagged:
            false_neg.append(case.name)
    return false_pos, false_neg


def test_labelled_set_shape() -> None:
    legit = [c for c in LEAK_CASES if not c.should_flag]
    copies = [c for c in LEAK_CASES if c.should_flag]
    assert (len(legit), len(copies)) == (25, 21)
    assert len({c.name for c in LEAK_CASES}) == len(LEAK_CASES)


def test_default_policy_on_labelled_set() -> None:
    """The figures quoted in LeakPolicy's docstring: 0 missed copies, 1 flagged paraphrase."""
    false_pos, false_neg = _errors(LeakPolicy())
    assert false_neg == []
    assert false_pos == ["commission_domain_terms"]


@pytest.mark.parametrize(
    ("change", "missed"),
    [
        ({"max_verbatim_words": 1000}, {"copied_clause_in_long_paraphrase"}),
        (
            {"max_copied_ngram_share": 1.0},
            {"verbatim_case_punctuation", "edited_every_5th", "edited_every_4th"},
        ),
        ({"ngram_size": 4}, {"edited_every_4th"}),
        (
            {"number_words": False},
            {"numbers_words", "numbers_compound_words", "numbers_percent_word"},
        ),
    ],
)
def test_each_check_earns_its_place(change: dict, missed: set[str]) -> None:
    """Switching one check off (or loosening it) lets exactly these copies through."""
    _, false_neg = _errors(LeakPolicy(**change))
    assert set(false_neg) == missed


def test_numbers_check_catches_every_copied_value() -> None:
    _, false_neg = _errors(LeakPolicy(forbid_numbers=False))
    assert len(false_neg) == 9
    assert all(name.startswith("numbers_") for name in false_neg)


def test_stricter_run_threshold_flags_a_domain_phrase() -> None:
    false_pos, false_neg = _errors(LeakPolicy(max_verbatim_words=7))
    assert "remote_paraphrase" in false_pos
    assert false_neg == []


def test_short_summaries_are_not_judged_on_share() -> None:
    false_pos, _ = _errors(LeakPolicy(min_words_for_share=1))
    assert {"short_terms_approval", "short_terms_bridge"} <= set(false_pos)


def test_defaults() -> None:
    policy = LeakPolicy()
    assert policy.max_verbatim_words == 8
    assert policy.max_copied_ngram_share == 0.6
    assert policy.ngram_size == 3
    assert policy.min_words_for_share == 12
    assert policy.forbid_numbers is True
    assert policy.number_words is True
    assert policy.allowed_numbers == ()


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"max_verbatim_words": 0}, "max_verbatim_words"),
        ({"max_copied_ngram_share": 1.5}, "max_copied_ngram_share"),
        ({"max_copied_ngram_share": 0}, "max_copied_ngram_share"),
        ({"ngram_size": 1}, "ngram_size"),
        ({"min_words_for_share": 0}, "min_words_for_share"),
        ({"max_verbatim": 5}, "max_verbatim"),
    ],
)
def test_invalid_policy_raises_configuration_error(kwargs: dict, option: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        LeakPolicy(**kwargs)
    assert info.value.option == option
    assert option in str(info.value)
    assert isinstance(info.value, ValueError)


def test_verbatim_copy_is_flagged_with_value_free_reasons() -> None:
    report = check_leak(CHUNKS["leave"], [CHUNKS["leave"]])
    assert report.leaked
    assert report.longest_verbatim_run == 55
    assert report.copied_ngram_share == 1.0
    assert report.copied_numbers == ["10", "14", "31", "5"]
    joined = " ".join(report.reasons)
    assert "verbatim run of 55 words" in joined
    assert "4 number(s) copied" in joined
    for value in report.copied_numbers:  # reasons can be logged: no values in them
        assert f" {value} " not in f" {joined} ".replace("55", "")


def test_paraphrase_passes() -> None:
    report = check_leak(
        "Plan your time off early and get the right sign-off for long absences.",
        [CHUNKS["leave"]],
    )
    assert report == LeakReport(
        leaked=False,
        longest_verbatim_run=report.longest_verbatim_run,
        copied_ngram_share=report.copied_ngram_share,
        summary_words=14,
    )
    assert report.longest_verbatim_run <= 2


@pytest.mark.parametrize(
    ("summary", "chunk", "expected"),
    [
        ("about 1500 people", "more than 1,500 customers", ["1500"]),
        ("a rate of 8.50 percent", "8.5% of revenue", ["8.5"]),
        ("a rate of 8,5 percent", "8.5% of revenue", ["8.5"]),
        ("fourteen days", "at least 14 calendar days", ["14"]),
        ("twenty-five percent", "deeper than 25% off", ["25"]),
        ("ninety five", "95% of tickets", ["95"]),
        ("three hundred", "300 seats", ["300"]),
        ("\uff11\uff14 days", "14 days", ["14"]),
        ("section 04.20", "Section 4.2 Support KPIs", ["4.2"]),
        ("one of them, two things", "1 or 2 tickets", []),
        ("twenty-two", "22 seats", ["22"]),
        ("7 days", "within 30 minutes", []),
    ],
)
def test_number_normalization(summary: str, chunk: str, expected: list[str]) -> None:
    assert check_leak(summary, [chunk]).copied_numbers == expected


def test_allowed_numbers_and_switches() -> None:
    chunk = "Support runs 24/7 and answers within 30 minutes."
    summary = "Support runs around the clock, 24/7."
    assert check_leak(summary, [chunk]).copied_numbers == ["24", "7"]
    assert not check_leak(summary, [chunk], policy=LeakPolicy(allowed_numbers=("24", "7"))).leaked
    assert not check_leak(summary, [chunk], policy=LeakPolicy(forbid_numbers=False)).leaked
    assert (
        check_leak("fourteen", ["14"], policy=LeakPolicy(number_words=False)).copied_numbers == []
    )


def test_invisible_characters_case_and_punctuation_do_not_hide_a_copy() -> None:
    chunk = CHUNKS["definition"]
    disguised = (
        "ACCOUNTS\u200b that MEET the de\u00adfinition -- for a full quarter; "
        "are tagged ''Tier A'' in the C\u2060RM"
    )
    report = check_leak(disguised, [chunk])
    assert report.leaked
    assert report.longest_verbatim_run == 16


def test_runs_are_counted_within_one_chunk() -> None:
    """A run must be consecutive in one chunk; words spread over two chunks do not add up."""
    chunks = ["alpha beta gamma delta", "epsilon zeta eta theta"]
    report = check_leak("alpha beta gamma delta epsilon zeta eta theta", chunks)
    assert report.longest_verbatim_run == 4


def test_share_is_not_judged_below_min_words() -> None:
    policy = LeakPolicy(min_words_for_share=12)
    report = check_leak("open a bridge and notify the incident commander", [CHUNKS["incident"]])
    assert report.copied_ngram_share == 0.0
    assert not report.leaked
    report = check_leak(
        "open a bridge and notify the incident commander",
        [CHUNKS["incident"]],
        policy=LeakPolicy(min_words_for_share=1),
    )
    assert report.copied_ngram_share > 0.6
    assert policy.min_words_for_share == 12


def test_empty_inputs() -> None:
    assert check_leak("", [CHUNKS["leave"]]) == LeakReport(leaked=False)
    assert check_leak("anything at all", []) == LeakReport(leaked=False, summary_words=3)
    assert not check_leak("anything at all", ["", "   "]).leaked


_VOCABULARY = ["alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega"]
_WORDS = st.lists(st.sampled_from(_VOCABULARY), min_size=1)


@settings(max_examples=60, deadline=None)
@given(words=_WORDS)
def test_copy_of_itself_has_full_run(words: list[str]) -> None:
    text = " ".join(words)
    report = check_leak(text, [text])
    assert report.longest_verbatim_run == len(words)
    if len(words) >= 12:
        assert report.copied_ngram_share == 1.0


@settings(max_examples=60, deadline=None)
@given(words=_WORDS, other=_WORDS)
def test_run_is_symmetric_and_bounded(words: list[str], other: list[str]) -> None:
    forward = check_leak(" ".join(words), [" ".join(other)]).longest_verbatim_run
    backward = check_leak(" ".join(other), [" ".join(words)]).longest_verbatim_run
    assert forward == backward <= min(len(words), len(other))


def test_large_inputs_are_handled() -> None:
    """The default bounds give at most 8,000 characters of chunks; far more still works."""
    chunks = [CHUNKS[key] * 8 for key in CHUNKS]
    summary = " ".join(["generic advice about planning"] * 80)
    report = check_leak(summary, chunks)
    assert report.summary_words == 320
    assert not report.leaked


def test_docstring_examples() -> None:
    result = doctest.testmod(leak_guard)
    assert result.attempted >= 5
    assert result.failed == 0
