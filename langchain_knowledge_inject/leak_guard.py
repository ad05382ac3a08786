"""The leak guard of restricted mode: does a summary give away the raw text?

A safe summary written by the secondary model is released to the main model
only when :func:`check_leak` finds none of three signs of copying:

- a long run of consecutive words that also appears in one chunk
  (``max_verbatim_words``);
- a high share of the summary's words lying inside word n-grams that also
  appear in the chunks (``max_copied_ngram_share``; judged only on summaries
  long enough for a share to mean something, ``min_words_for_share``);
- a number that also appears in the chunks (``forbid_numbers``), in digits or
  spelled out ("fourteen", "twenty-five"), with thousands separators and
  trailing zeros normalized ("1,500" is "1500", "95.0" is "95").

Text is compared after Unicode NFKC normalization, case folding and removal
of zero-width characters, so changing case, punctuation or hiding invisible
characters between letters does not get a copy through.

The defaults were chosen on the labelled set in
``tests/unit_tests/restricted_fixtures.py`` (``LEAK_CASES``); the test
``test_leak_guard.py::test_default_policy_on_labelled_set`` pins the false
positive and false negative counts.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langchain_knowledge_inject.errors import ConfigurationError

__all__ = ["LeakPolicy", "LeakReport", "check_leak"]

_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"), None)
_TOKEN_RE = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+")
_UNITS = {
    "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
_ONES = {"one": 1, "two": 2, **{word: value for word, value in _UNITS.items() if value < 10}}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}


class _StrictConfig(BaseModel):
    """A pydantic config whose invalid values raise :class:`ConfigurationError`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            error = exc.errors()[0]
            option = ".".join(str(part) for part in error["loc"]) or None
            msg = f"{type(self).__name__}: invalid value for {option!r}: {error['msg']}"
            raise ConfigurationError(msg, option=option, value=error.get("input")) from None


class LeakPolicy(_StrictConfig):
    """Thresholds of the leak guard; a summary crossing any of them is withheld.

    Chosen on the labelled set (``LEAK_CASES``: 25 legitimate summaries, 21
    copies). With the defaults the guard misses no copy and flags one
    legitimate summary, a term-dense restatement that keeps 70% of its words
    in copied 3-word sequences, as much as a copy with every fourth word
    changed; withholding is the safe side of that tie.

    Example:
        >>> from langchain_knowledge_inject.leak_guard import LeakPolicy
        >>> LeakPolicy().max_verbatim_words
        8
        >>> LeakPolicy(forbid_numbers=False).forbid_numbers
        False
    """

    max_verbatim_words: int = Field(default=8, ge=1)
    """Longest run of consecutive words a summary may share with one chunk.

    The legitimate summaries in the set share at most 8 words in a row (a
    domain phrase: "year and needs written approval from HR and"); the copy
    this check alone must catch, a clause inside a long paraphrase, shares 9."""

    max_copied_ngram_share: float = Field(default=0.6, gt=0.0, le=1.0)
    """Largest share of the summary's words that may lie inside an n-gram found in the chunks.

    Catches copies whose verbatim runs are broken by edits. Ordinary
    paraphrases in the set stay at or below 0.31 and term-dense ones reach
    0.57 (one, 0.70, is flagged); copies with every 4th or 5th word changed
    reach 0.71 and 0.82, a definition restated without its values 0.85."""

    ngram_size: int = Field(default=3, ge=2, le=10)
    """Length in words of the n-grams behind ``max_copied_ngram_share``.

    2 flags three more legitimate summaries at any threshold that catches the
    edited copies; 4 and 5 miss the copy with every 4th word changed."""

    min_words_for_share: int = Field(default=12, ge=1)
    """The share is judged only on summaries of at least this many words.

    On a one-line summary a single shared phrase is already a large share
    ("Open a bridge and notify the incident commander."); the verbatim-run and
    number checks still apply to short summaries."""

    forbid_numbers: bool = True
    """Withhold a summary that repeats any number found in the chunks.

    Without it the guard misses all 9 copied-value cases of the set."""

    number_words: bool = True
    """Also read spelled-out numbers ("fourteen", "twenty-five") as numbers.

    "one" and "two" on their own are left out on purpose ("one of them", "two
    things"); they still count inside compounds such as "twenty-two"."""

    allowed_numbers: tuple[str, ...] = ()
    """Numbers that may be repeated even when ``forbid_numbers`` is on (e.g. ``("24", "7")``)."""


@dataclass
class LeakReport:
    """What the leak guard found in one summary.

    The reasons name the check and the measure, never the copied text or
    values, so a report can be logged.
    """

    leaked: bool
    """Whether the summary must be withheld."""
    reasons: list[str] = field(default_factory=list)
    """One human-readable line per failed check; empty when nothing leaked."""
    longest_verbatim_run: int = 0
    """Longest run of consecutive words shared with a single chunk."""
    copied_ngram_share: float = 0.0
    """Share of the summary's n-grams found in the chunks (0 when too short to judge)."""
    copied_numbers: list[str] = field(default_factory=list)
    """Normalized numbers the summary repeats from the chunks (sensitive: do not log)."""
    summary_words: int = 0
    """Number of words the summary was compared on."""


def check_leak(
    summary_text: str, chunks: Sequence[str], *, policy: LeakPolicy | None = None
) -> LeakReport:
    """Check a summary against the raw chunks it was written from.

    Args:
        summary_text: Everything the main model would see from the summarizer
            (summary and answer guidance, joined).
        chunks: The raw chunk texts, unbounded.
        policy: Thresholds; ``LeakPolicy()`` when omitted.

    Returns:
        A :class:`LeakReport`; ``leaked`` is true when any check fails.

    Example:
        >>> from langchain_knowledge_inject.leak_guard import check_leak
        >>> chunk = "Leave requests must be filed at least 14 days before the first day off."
        >>> check_leak("Plan leave requests well ahead of time.", [chunk]).leaked
        False
        >>> check_leak("Requests are due 14 days ahead.", [chunk]).copied_numbers
        ['14']
    """
    policy = policy or LeakPolicy()
    words = _tokens(summary_text)
    chunk_words = [_tokens(chunk) for chunk in chunks]
    report = LeakReport(leaked=False, summary_words=len(words))
    if not words or not any(chunk_words):
        return report

    report.longest_verbatim_run = max(_longest_common_run(words, cw) for cw in chunk_words)
    if report.longest_verbatim_run > policy.max_verbatim_words:
        report.reasons.append(
            f"verbatim run of {report.longest_verbatim_run} words "
            f"(limit {policy.max_verbatim_words})"
        )

    if len(words) >= policy.min_words_for_share:
        report.copied_ngram_share = _copied_share(words, chunk_words, policy.ngram_size)
        if report.copied_ngram_share > policy.max_copied_ngram_share:
            report.reasons.append(
                f"{report.copied_ngram_share:.0%} of the words inside copied "
                f"{policy.ngram_size}-word sequences (limit {policy.max_copied_ngram_share:.0%})"
            )

    if policy.forbid_numbers:
        chunk_numbers = set().union(*(_numbers(cw, policy) for cw in chunk_words))
        allowed = {_normalize_number(value) for value in policy.allowed_numbers}
        summary_numbers = _numbers(words, policy)
        report.copied_numbers = sorted((summary_numbers & chunk_numbers) - allowed)
        if report.copied_numbers:
            report.reasons.append(f"{len(report.copied_numbers)} number(s) copied from the chunks")

    report.leaked = bool(report.reasons)
    return report


def _tokens(text: str) -> list[str]:
    """Words and numbers of ``text``, normalized for comparison."""
    text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).casefold()
    return _TOKEN_RE.findall(text)


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def _copied_share(words: list[str], chunk_words: list[list[str]], n: int) -> float:
    """Share of ``words`` covered by an n-gram that also occurs in some chunk."""
    chunk_grams = set().union(*(_ngrams(cw, n) for cw in chunk_words))
    covered = [False] * len(words)
    for i, gram in enumerate(_ngrams(words, n)):
        if gram in chunk_grams:
            covered[i : i + n] = [True] * n
    return sum(covered) / len(words)


def _longest_common_run(words: list[str], other: list[str]) -> int:
    """Length of the longest run of consecutive words found in both lists."""
    positions: dict[str, list[int]] = {}
    for j, word in enumerate(other):
        positions.setdefault(word, []).append(j)
    best = 0
    previous: dict[int, int] = {}
    for word in words:
        current = {j: previous.get(j - 1, 0) + 1 for j in positions.get(word, ())}
        if current:
            best = max(best, *current.values())
        previous = current
    return best


def _normalize_number(token: str) -> str:
    """Canonical form of a digit token: no thousands separators, no trailing zeros."""
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", token):
        token = token.replace(",", "")
    token = token.replace(",", ".")
    if "." in token:
        whole, _, fraction = token.partition(".")
        fraction = fraction.rstrip("0")
        token = f"{whole}.{fraction}" if fraction else whole
    return token.lstrip("0") or "0"


def _numbers(words: list[str], policy: LeakPolicy) -> set[str]:
    """Every number in a token list, digits and (optionally) number words."""
    found: set[str] = set()
    i = 0
    while i < len(words):
        word = words[i]
        if word[0].isdigit():
            found.add(_normalize_number(word))
            i += 1
            continue
        if not policy.number_words or (word not in _UNITS and word not in _TENS):
            i += 1
            continue
        value = _UNITS.get(word) or _TENS[word]
        i += 1
        if word in _TENS and i < len(words) and words[i] in _ONES:
            value += _ONES[words[i]]
            i += 1
        while i < len(words) and words[i] in _SCALES:
            value *= _SCALES[words[i]]
            i += 1
        found.add(str(value))
    return found
