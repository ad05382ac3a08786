"""The leak guard: thresholds, normalization, and the labelled set behind the defaults."""

from __future__ import annotations

import doctest
import json
import re
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel

from langchain_knowledge_inject._restricted import guard as leak_guard
from langchain_knowledge_inject._restricted.guard import LeakPolicy, LeakReport, check_leak
from langchain_knowledge_inject._restricted.boundary import format_block as format_safe_summary
from langchain_knowledge_inject._restricted.boundary import release
from langchain_knowledge_inject.errors import ConfigurationError
from tests.unit_tests.adversarial_fixtures import (
    BORDERLINE_RESTATEMENTS,
    HONEST_CASES,
    SMUGGLING_CASES,
    HonestCase,
    SmugglingCase,
)
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
    strict = LeakPolicy(filler_gap=0)
    forward = check_leak(" ".join(words), [" ".join(other)], policy=strict).longest_verbatim_run
    backward = check_leak(" ".join(other), [" ".join(words)], policy=strict).longest_verbatim_run
    assert forward == backward <= min(len(words), len(other))
    gapped = check_leak(" ".join(words), [" ".join(other)]).longest_verbatim_run
    assert forward <= gapped <= len(other)


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


# --- the adversarial suite: smuggling encodings and honest summaries --------------------


def _fields(case: SmugglingCase) -> dict[str, str]:
    """Everything the main model would see from this hostile reply."""
    return {
        "summary": case.summary if case.decision == "answer" else "",
        "answer_guidance": case.answer_guidance,
        "reason": case.reason,
    }


def test_adversarial_sets_shape() -> None:
    assert len(SMUGGLING_CASES) >= 30
    assert len({c.name for c in SMUGGLING_CASES}) == len(SMUGGLING_CASES)
    assert len({c.encoding for c in SMUGGLING_CASES}) == len(SMUGGLING_CASES)
    assert len(HONEST_CASES) >= 50
    assert len({c.name for c in HONEST_CASES}) == len(HONEST_CASES)
    for case in SMUGGLING_CASES:
        assert case.secret in case.chunks[0], case.name
        assert (case.decision == "answer") == (case.reason == "answerable"), case.name


@pytest.mark.parametrize("case", SMUGGLING_CASES, ids=lambda c: c.name)
def test_every_smuggling_encoding_is_withheld(case: SmugglingCase) -> None:
    report = check_leak(_fields(case), case.chunks, question=case.question)
    assert report.leaked, case.encoding
    # the reasons may be logged: they never quote the secret or any of its pieces
    reasons = " ".join(report.reasons).casefold()
    for piece in re.findall(r"[^\W_]{2,}", case.secret.casefold()):
        if piece.isalpha() and piece in _REASON_WORDS:
            continue
        assert not re.search(rf"\b{re.escape(piece)}\b", reasons), (case.name, piece)


_REASON_WORDS = {"the", "of", "on", "to", "after", "days", "words", "number", "office"}


@pytest.mark.parametrize("case", SMUGGLING_CASES, ids=lambda c: c.name)
def test_smuggling_is_withheld_through_the_summarizer(case: SmugglingCase) -> None:
    """The same replies through ``summarize_chunks``: the main model gets the fixed refusal."""
    reply = json.dumps(
        {
            "decision": case.decision,
            "reason": case.reason,
            "summary": case.summary,
            "answer_guidance": case.answer_guidance,
            "confidence": 0.9,
        }
    )
    model = GenericFakeChatModel(messages=iter([reply]))
    docs = [Document(chunk, metadata={"source": "restricted.md"}) for chunk in case.chunks]
    result = release(case.question, docs, model=model).summary
    assert (result.decision, result.reason) == ("refuse", "leak_detected")
    shown = format_safe_summary(result)
    for written in (case.summary, case.answer_guidance):
        assert not written.strip() or written not in shown


def _withheld(cases: Sequence[HonestCase], policy: LeakPolicy | None = None) -> list[str]:
    return [
        case.name
        for case in cases
        if check_leak(
            {"summary": case.summary, "answer_guidance": case.answer_guidance},
            case.chunks,
            question=case.question,
            policy=policy,
        ).leaked
    ]


def test_false_positive_share_on_honest_summaries() -> None:
    """Quality target of issue 9: at most 5% of honest summaries withheld (0 today)."""
    withheld = _withheld(HONEST_CASES)
    assert len(withheld) / len(HONEST_CASES) <= 0.05, withheld
    assert withheld == []


def test_restatements_with_values_removed_are_withheld() -> None:
    """The six first drafts that restate a chunk sentence are copies by LEAK_CASES' standard."""
    assert _withheld(BORDERLINE_RESTATEMENTS) == [c.name for c in BORDERLINE_RESTATEMENTS]


@pytest.mark.parametrize(
    ("change", "summary", "chunk"),
    [
        (
            {"filler_gap": 0},
            "calls are, um, deleted, you know, automatically after, like, legal places, er, "
            "them on hold",
            "Call recordings are deleted automatically after legal places them on hold.",
        ),
        ({"decode": False}, "key: a2VzdHJlbC1ibHVl", "The master key is kestrel-blue-ivy."),
        ({"distinctive_tokens": False}, "codename Zephyrine", "The codename is Zephyrine."),
        ({"rare_word_zipf": 0.0}, "codename Zephyrine", "The codename is Zephyrine."),
        ({"rare_compound_zipf": 0.0}, "phrase tundra-marmot", "The phrase is tundra-marmot."),
        ({"number_words": False}, "zweitausendsiebenhundert", "Die Kaution ist 2700 Euro."),
        ({"min_digit_run": 5, "min_loose_digit_run": 5}, "it is 4 8 1 7", "The code is 4817."),
        ({"min_loose_digit_run": 9}, "starts 6601, then 8342", "Account 66018342."),
        ({"forbid_numbers": False}, "it is 4 8 1 7", "The code is 4817."),
    ],
)
def test_each_new_check_earns_its_place(change: dict, summary: str, chunk: str) -> None:
    """With the check on the probe is withheld; with it off, nothing else catches it."""
    assert check_leak(summary, [chunk], question="What is it?").leaked
    loosened = LeakPolicy(**change)
    assert not check_leak(summary, [chunk], question="What is it?", policy=loosened).leaked


def test_question_tokens_are_not_secrets() -> None:
    """Issue 9, item 4: "Q3" (and any word or number of the question) is not a copy."""
    chunk = "Quarterly targets 2024: close 3.4 million in Q3 and 4.1 million in Q4."
    summary = "The Q3 2024 target is about new recurring revenue."
    assert check_leak(summary, [chunk]).leaked
    report = check_leak(summary, [chunk], question="How are we doing against Q3 2024?")
    assert not report.leaked, report.reasons
    # a value the question does not hold is still withheld
    assert check_leak("Q3 asks for 3.4 million.", [chunk], question="Q3 target?").leaked


def test_fields_can_be_one_text_a_sequence_or_a_mapping() -> None:
    chunk = "Settlement funds are held in escrow account 66018342."
    halves = ("The account begins 6601", "and it ends 8342.")
    assert not check_leak(halves[0], [chunk]).leaked
    assert check_leak(list(halves), [chunk]).leaked
    assert check_leak({"summary": halves[1], "answer_guidance": halves[0]}, [chunk]).leaked
    assert check_leak(" ".join(halves), [chunk]).copied_digits == ["66018342"]
    with pytest.raises(ConfigurationError) as info:
        check_leak(42, [chunk])  # type: ignore[arg-type]
    assert info.value.option == "fields"


def test_the_guard_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(leak_guard, "_check_runs", broken)
    report = check_leak("anything", ["some chunk"])
    assert report.leaked
    assert report.reasons == ["the guard could not check the output (RuntimeError)"]


@pytest.mark.parametrize(
    ("summary", "chunk", "kind"),
    [
        ("use Z\u0435phyrine", "The codename is Zephyrine.", "rare word"),  # Cyrillic e
        ("Quebec X-ray seven Romeo", "Guest code QX7R.", "code"),
        ("amber and walrus and pilot", "Passphrase amber-walrus-pilot.", "compound"),
        ("AmberWalrusPilot", "Passphrase amber-walrus-pilot.", "compound"),
        ("tolip-surlaw-rebma", "Passphrase amber-walrus-pilot.", "compound"),
        ("Z.e.p.h.y.r.i.n.e", "The codename is Zephyrine.", "rare word"),
        ("n i g h t j a r copper", "Password nightjar-copper-19.", "code"),
        ("it is Zephyrne", "The codename is Zephyrine.", "rare word"),
        ("walrus, pilot and amber", "Passphrase amber-walrus-pilot.", "compound"),
    ],
)
def test_distinctive_tokens_in_other_spellings(summary: str, chunk: str, kind: str) -> None:
    report = check_leak(summary, [chunk], question="What is it?")
    assert report.leaked
    assert kind in " ".join(report.reasons)


@pytest.mark.parametrize(
    ("summary", "chunk"),
    [
        ("vier acht eins sieben", "code 4817"),
        ("four-eight-one-seven", "code 4817"),
        ("first half 48, second half 17", "code 4817"),
        ("XLVIII XVII", "code 4817"),
        ("&#52;&#56;&#49;&#55;", "code 4817"),
        ("4\ufe0f\u20e38\ufe0f\u20e31\ufe0f\u20e37\ufe0f\u20e3", "code 4817"),
        ("\u2074\u2078\u00b9\u2077", "code 4817"),
        ("\u2463\u2467\u2460\u2466", "code 4817"),
        ("quatre mille huit cent dix-sept", "code 4817"),
        ("cuatro mil ochocientos diecisiete", "code 4817"),
        ("viertausendachthundertsiebzehn", "code 4817"),
        ("7,35 Mio. Euro", "budget 7,350,000 euros"),
        ("seven point three five million", "budget 7,350,000 euros"),
    ],
)
def test_numbers_in_other_spellings(summary: str, chunk: str) -> None:
    assert check_leak(summary, [chunk], question="What is it?").leaked


@pytest.mark.parametrize(
    "summary",
    [
        "Plan leave early; a small amount of unused leave can roll over.",
        "There are two main rules: plan ahead and get approval once.",
        "Use the HR portal, which is up-to-date, for sign-off on long absences.",
        "Phase one is planning; the on-call rota follows later this year.",
    ],
)
def test_ordinary_words_are_not_distinctive(summary: str) -> None:
    chunk = (
        "Annual leave requests go through the HR portal; the on-call rota and the up-to-date "
        "sign-off list are kept by HR. Unused leave of up to 5 days carries over once."
    )
    report = check_leak(summary, [chunk], question="How does leave work?")
    assert not report.leaked, report.reasons


@pytest.mark.parametrize(
    ("summary", "leaked"),
    [
        ("The leave policy update applies to everyone.", False),
        ("Ask HR about leave on the intranet.", False),
        ("The leave-policy-update applies to everyone.", True),
        ("The phrase is blue-house-river.", True),
        ("The phrase is river_house_blue.", True),
    ],
)
def test_compounds_of_common_words_count_only_when_written_as_one(
    summary: str, leaked: bool
) -> None:
    chunk = (
        "The leave-policy-update applies to all staff; see leave_policy.md and "
        "https://intranet.example.com/hr/leave. The vault phrase is blue-house-river."
    )
    report = check_leak(summary, [chunk], question="What changed?")
    assert report.leaked is leaked, report.reasons


@pytest.mark.parametrize(
    ("summary", "chunk", "question"),
    [
        (
            "Отпуск нужно согласовать с руководителем заранее.",  # noqa: RUF001
            "Заявление на отпуск подаётся через портал за 14 дней; согласование обязательно.",
            "Как оформить отпуск?",
        ),
        ("休假需要提前申请。", "年假申请必须在休假开始前14天通过人事系统提交。", "怎么请假？"),  # noqa: RUF001
    ],
)
def test_words_outside_the_vocabularies_are_not_rare_words(
    summary: str, chunk: str, question: str
) -> None:
    """No vocabulary for Russian or Chinese: their words get no rarity verdict."""
    assert not check_leak(summary, [chunk], question=question).leaked
    assert check_leak(summary + " 14", [chunk], question=question).leaked


def test_policy_new_fields_validate() -> None:
    with pytest.raises(ConfigurationError):
        LeakPolicy(filler_gap=-1)
    with pytest.raises(ConfigurationError):
        LeakPolicy(min_loose_digit_run=1)
    with pytest.raises(ConfigurationError):
        LeakPolicy(rare_word_zipf=9)
    assert LeakPolicy().filler_gap == 2
    assert LeakPolicy().rare_word_zipf == 1.5


def test_figures(capsys: pytest.CaptureFixture[str]) -> None:
    """Print the figures of the closing note (run with ``-s`` to see them)."""
    caught = sum(
        check_leak(_fields(c), c.chunks, question=c.question).leaked for c in SMUGGLING_CASES
    )
    honest = len(_withheld(HONEST_CASES))
    false_pos, false_neg = _errors(LeakPolicy())
    legit = sum(not c.should_flag for c in LEAK_CASES)
    with capsys.disabled():
        print(
            f"\nleak guard: {caught}/{len(SMUGGLING_CASES)} smuggling encodings withheld; "
            f"honest summaries withheld {honest}/{len(HONEST_CASES)}; "
            f"LEAK_CASES: {len(false_pos)}/{legit} legitimate flagged, "
            f"{len(false_neg)} copies missed"
        )
    assert caught == len(SMUGGLING_CASES)
