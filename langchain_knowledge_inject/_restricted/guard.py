"""The leak guard of restricted mode: does what the main model would see give the chunks away?

A safe summary written by the secondary model is released to the main model
only when :func:`check_leak` finds no sign of copying in ANY field the main
model sees (summary, answer guidance, reason, refusal text), checked one by
one, joined in both orders (so a value or a run split across fields is seen
whole), and once more after undoing base64, hex, URL and HTML encodings.

Everything is compared after Unicode folding (:mod:`._textfold`): NFKC,
digits of every script made ASCII, zero-width characters and combining marks
dropped, Latin look-alikes mapped, case folded. Then:

- **verbatim runs**: a run of consecutive chunk words repeated in order, with
  up to ``filler_gap`` filler words between them, longer than
  ``max_verbatim_words``;
- **copied share**: too many of the summary's words inside word n-grams of
  the chunks (``max_copied_ngram_share``);
- **values** (``forbid_numbers``): a number of the chunks written in any
  notation: separators, "7.35 million" / "7350 thousand" / "7.35M" for
  7,350,000, scientific, percent as a fraction, "1/8", hex integers, Roman
  numerals, number words in English, German, French and Spanish (parsed by
  ``text2num``);
- **digit strings**: the digits of a chunk number spelled with separators,
  spaces or single letters between them, in pairs, reversed, or spread over
  several fields;
- **distinctive tokens**: a passphrase, code or identifier of the chunks
  (letters and digits mixed, compounds of rare or many words, words no
  ordinary vocabulary has) repeated even once: as is, spaced, joined,
  reordered, reversed, in leetspeak, letter-shifted (ROT13) or mirrored (Atbash).

Words and numbers that the user's question already holds are never secrets:
"Q3" in a summary is fine when the question asked about Q3.

The rare-word test knows English, German, French and Spanish; words of
other scripts get no rarity verdict (codes, numbers and runs still apply).

What it cannot catch: a paraphrase of a fact that holds no distinctive token
or number ("the threshold is a bit under two thirds"), a rounded value
("about 7 million" for 7,348,912), a number word the parsers do not read
("a dozen"), an encoding it does not undo (a custom cipher, base32), and
information given away by the decision itself.

The defaults were chosen on ``LEAK_CASES`` (``tests/unit_tests/restricted_fixtures.py``)
and on ``SMUGGLING_CASES`` / ``HONEST_CASES``
(``tests/unit_tests/adversarial_fixtures.py``); ``test_leak_guard.py`` pins the
figures.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langchain_knowledge_inject._restricted.guard_decode import decoded_views
from langchain_knowledge_inject._restricted.guard_numbers import (
    canonical,
    chunk_digit_runs,
    digit_strings,
    number_values,
    word_numbers_text,
)
from langchain_knowledge_inject._restricted.guard_tokens import (
    copied_tokens,
    distinctive_tokens,
    longest_gapped_run,
    words,
)
from langchain_knowledge_inject.errors import ConfigurationError

__all__ = ["Fields", "LeakPolicy", "LeakReport", "StrictConfig", "check_leak"]

logger = logging.getLogger("langchain_knowledge_inject.leak_guard")

Fields = str | Sequence[str] | Mapping[str, str]
"""What :func:`check_leak` checks: one text, several, or texts by field name."""


class StrictConfig(BaseModel):
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


class LeakPolicy(StrictConfig):
    """Thresholds and switches of the leak guard; output crossing any of them is withheld.

    The defaults were chosen on three labelled sets: ``LEAK_CASES`` (25
    legitimate summaries, 21 copies), ``SMUGGLING_CASES`` (hostile summaries,
    one encoding each) and ``HONEST_CASES`` (legitimate summaries written for
    the adversarial suite). ``test_leak_guard.py`` pins the figures: every
    copy and every smuggling case withheld, at most 5% of honest summaries.

    Example:
        >>> from langchain_knowledge_inject._restricted.guard import LeakPolicy
        >>> LeakPolicy().max_verbatim_words
        8
        >>> LeakPolicy(forbid_numbers=False).forbid_numbers
        False
    """

    max_verbatim_words: int = Field(default=8, ge=1)
    """Longest run of consecutive chunk words the output may repeat (fillers allowed between).

    The legitimate summaries of ``LEAK_CASES`` share at most 8 words in a row
    (a domain phrase: "year and needs written approval from HR and"); the copy
    this check alone must catch, a clause inside a long paraphrase, shares 9."""

    filler_gap: int = Field(default=2, ge=0, le=5)
    """How many other words may sit between two repeated chunk words of a run.

    Catches a verbatim run with filler words interleaved ("deleted, um,
    automatically, you know, after..."). 0 counts strict runs only."""

    max_copied_ngram_share: float = Field(default=0.6, gt=0.0, le=1.0)
    """Largest share of the output's words that may lie inside an n-gram found in the chunks.

    Catches copies whose verbatim runs are broken by edits. Ordinary
    paraphrases in the set stay at or below 0.31 and term-dense ones reach
    0.57 (one, 0.70, is flagged); copies with every 4th or 5th word changed
    reach 0.71 and 0.82, a definition restated without its values 0.85."""

    ngram_size: int = Field(default=3, ge=2, le=10)
    """Length in words of the n-grams behind ``max_copied_ngram_share``.

    2 flags three more legitimate summaries at any threshold that catches the
    edited copies; 4 and 5 miss the copy with every 4th word changed."""

    min_words_for_share: int = Field(default=12, ge=1)
    """The share is judged only on outputs of at least this many words.

    On a one-line summary a single shared phrase is already a large share
    ("Open a bridge and notify the incident commander."); the other checks
    still apply to short summaries."""

    forbid_numbers: bool = True
    """Withhold output that repeats a number of the chunks, as a value or as a digit string.

    Values are compared in any notation ("7.35 million" is 7,350,000); digit
    strings with separators removed and reversed ("4 8 1 7", "7-1-8-4").
    Without it the guard misses all 9 copied-value cases of ``LEAK_CASES``."""

    number_words: bool = True
    """Also read number words (English, German, French, Spanish) and Roman numerals.

    "one" and "two" on their own are left out on purpose ("one of them", "two
    things"); they still count inside compounds such as "twenty-two"."""

    min_digit_run: int = Field(default=2, ge=1)
    """Shortest chunk digit string looked for inside the output's tight digit groups.

    A tight group is digits apart only by punctuation, spaces or single
    letters ("4 8-1.7", "a3b1c5"); they are searched forwards and reversed."""

    min_loose_digit_run: int = Field(default=4, ge=2)
    """Shortest chunk digit string looked for in all the output's digits joined.

    Catches a number split across fields or words ("begins 6601" ...
    "ends 8342"); shorter strings would match by chance."""

    distinctive_tokens: bool = True
    """Withhold output that repeats a passphrase, code or identifier of the chunks, even once."""

    rare_word_zipf: float = Field(default=1.5, ge=0.0, le=8.0)
    """A chunk word (4+ letters) rarer than this Zipf frequency counts as distinctive.

    Zipf 1.5 is about once in 30 million words, in English, German, French and
    Spanish (wordfreq): invented codenames ("Zephyrine") are below it; jargon
    and acronyms an honest summary reuses ("itemised" 1.8, "CISO" 1.8,
    "EMEA" 2.5) are above. Plurals of known words count as known, and an
    all-capitals acronym ("OKRs") is distinctive only when no vocabulary has
    it at all. 0 turns the rare-word test off."""

    rare_compound_zipf: float = Field(default=3.0, ge=0.0, le=8.0)
    """A two-word compound ("tundra-marmot") rarer than this counts as distinctive.

    Its frequency is wordfreq's combination of its words' frequencies; Zipf 3
    is once per million words. Common compounds stay above ("sign-off" 5.0,
    "break-glass" 4.7, "per-diem" 3.1). Compounds of three or more words count
    whenever none of them is a function word ("amber-walrus-pilot", not
    "up-to-date")."""

    decode: bool = True
    """Also check what base64, base32, hex, binary, Morse, URL and HTML encodings hide."""

    allowed_numbers: tuple[str, ...] = ()
    """Numbers that may be repeated even when ``forbid_numbers`` is on (e.g. ``("24", "7")``)."""


@dataclass
class LeakReport:
    """What the leak guard found in one output.

    The reasons name the check and a count, never the copied text or values,
    so a report can be logged. The ``copied_*`` lists are sensitive.
    """

    leaked: bool
    """Whether the output must be withheld."""
    reasons: list[str] = field(default_factory=list)
    """One human-readable line per failed check; empty when nothing leaked."""
    longest_verbatim_run: int = 0
    """Longest run of consecutive chunk words repeated (filler words allowed between)."""
    copied_ngram_share: float = 0.0
    """Share of the output's words inside n-grams of the chunks (0 when too short to judge)."""
    copied_numbers: list[str] = field(default_factory=list)
    """Canonical values the output repeats from the chunks (sensitive: do not log)."""
    copied_digits: list[str] = field(default_factory=list)
    """Chunk digit strings found in the output's digits (sensitive: do not log)."""
    copied_tokens: list[str] = field(default_factory=list)
    """Distinctive chunk tokens the output repeats, folded (sensitive: do not log)."""
    summary_words: int = 0
    """Number of words the output was compared on (all fields)."""

    @property
    def codes(self) -> tuple[str, ...]:
        """Machine-readable codes of the failed checks (interim: the guard is being rebuilt)."""
        return tuple(dict.fromkeys(r.split(" ")[0] for r in self.reasons)) and ("leak",)


def check_leak(
    fields: Fields,
    chunks: Sequence[str],
    *,
    policy: LeakPolicy | None = None,
    question: str | None = None,
    sources: Sequence[str] = (),
    released: Sequence[str] = (),
) -> LeakReport:
    """Check what the main model would see against the raw chunks it was written from.

    Args:
        fields: Everything the main model would see from the summarizer: one
            text, a sequence of texts, or texts by field name (summary,
            answer guidance, reason, refusal text). Each is checked, and they
            are also joined (in both orders) so nothing can be split across them.
        chunks: The raw chunk texts, unbounded.
        policy: Thresholds; ``LeakPolicy()`` when omitted.
        question: The user's question: its words and numbers are not secrets.
        sources: Source names that must not appear.
        released: Summaries released earlier in the same thread (judged together).

    Returns:
        A :class:`LeakReport`; ``leaked`` is true when any check fails, and
        when the guard itself fails (it fails closed).

    Example:
        >>> from langchain_knowledge_inject._restricted.guard import check_leak
        >>> chunk = "Leave requests must be filed at least 14 days before the first day off."
        >>> check_leak("Plan leave requests well ahead of time.", [chunk]).leaked
        False
        >>> check_leak("Requests are due 14 days ahead.", [chunk]).copied_numbers
        ['14']
        >>> check_leak({"summary": "Due one four", "guidance": "days ahead"}, [chunk]).leaked
        True
        >>> check_leak("Yes, 14 days is enough.", [chunk], question="Are 14 days enough?").leaked
        False
    """
    policy = policy or LeakPolicy()
    texts = _field_texts(fields)
    if _names_a_source(texts, sources):  # interim, until the guard's rebuild lands
        return LeakReport(leaked=True, reasons=["source_name"])
    if released and texts:
        texts = [*texts, "\n".join([*released, *texts])]
    chunks = [chunk for chunk in chunks if chunk and chunk.strip()]
    report = LeakReport(leaked=False)
    if not texts or not chunks:
        report.summary_words = sum(len(words(text)) for text in texts)
        return report
    try:
        _check(report, texts, chunks, policy, question or "")
    except Exception as exc:
        logger.warning("leak guard failed (%s): withholding", type(exc).__name__)
        report.reasons.append(f"the guard could not check the output ({type(exc).__name__})")
    report.leaked = bool(report.reasons)
    return report


def _fold_name(text: str) -> str:
    return "".join(c for c in text.casefold() if c.isalnum())


def _names_a_source(texts: Sequence[str], sources: Sequence[str]) -> bool:
    from pathlib import PurePath

    folded = _fold_name(" ".join(texts))
    names = {_fold_name(PurePath(s).stem) for s in sources} | {_fold_name(s) for s in sources}
    return any(name in folded for name in names if len(name) >= 4)


def _field_texts(fields: Fields) -> list[str]:
    if isinstance(fields, str):
        values = [fields]
    elif isinstance(fields, Mapping):
        values = list(fields.values())
    elif isinstance(fields, Sequence):
        values = list(fields)
    else:
        msg = "fields must be a string, a sequence of strings or a mapping of strings"
        raise ConfigurationError(msg, option="fields", value=type(fields).__name__)
    return [str(value) for value in values if value is not None and str(value).strip()]


def _check(
    report: LeakReport, texts: list[str], chunks: list[str], policy: LeakPolicy, question: str
) -> None:
    joined = "\n".join(texts)
    joins = [joined, "\n".join(reversed(texts))] if len(texts) > 1 else [joined]
    sequences = [words(text) for text in joins]
    decoded = decoded_views(texts) if policy.decode else []
    sequences += [words(text) for text in decoded]
    report.summary_words = len(sequences[0])
    chunk_words = [words(chunk) for chunk in chunks]

    _check_runs(report, sequences, chunk_words, policy)
    if policy.forbid_numbers:
        _check_numbers(report, [*texts, *decoded], joins, chunks, policy, question)
    if policy.distinctive_tokens:
        distinctive = distinctive_tokens(
            chunks,
            exclude=[question],
            word_zipf_limit=policy.rare_word_zipf,
            compound_zipf_limit=policy.rare_compound_zipf,
        )
        copied = copied_tokens([*joins, *decoded], distinctive)
        report.copied_tokens = sorted(copied)
        if copied:
            kinds = sorted({distinctive[key].kind for key in copied})
            ways = sorted(set(copied.values()))
            report.reasons.append(
                f"{len(copied)} distinctive token(s) copied from the chunks "
                f"({', '.join(kinds)}; written {', '.join(ways)})"
            )


def _check_runs(
    report: LeakReport,
    sequences: list[list[str]],
    chunk_words: list[list[str]],
    policy: LeakPolicy,
) -> None:
    report.longest_verbatim_run = max(
        longest_gapped_run(sequence, cw, max_gap=policy.filler_gap)
        for sequence in sequences
        for cw in chunk_words
    )
    if report.longest_verbatim_run > policy.max_verbatim_words:
        report.reasons.append(
            f"verbatim run of {report.longest_verbatim_run} words "
            f"(limit {policy.max_verbatim_words})"
        )
    output = sequences[0]
    if len(output) >= policy.min_words_for_share:
        report.copied_ngram_share = _copied_share(output, chunk_words, policy.ngram_size)
        if report.copied_ngram_share > policy.max_copied_ngram_share:
            report.reasons.append(
                f"{report.copied_ngram_share:.0%} of the words inside copied "
                f"{policy.ngram_size}-word sequences (limit {policy.max_copied_ngram_share:.0%})"
            )


def _check_numbers(
    report: LeakReport,
    texts: list[str],
    joins: list[str],
    chunks: list[str],
    policy: LeakPolicy,
    question: str,
) -> None:
    read_words = policy.number_words
    asked = set(number_values(question, words=read_words)) if question else set()
    allowed = asked.union(*(number_values(v, words=False) for v in policy.allowed_numbers))
    chunk_values = set().union(*(number_values(chunk, words=read_words) for chunk in chunks))
    output_values = set().union(*(number_values(text, words=read_words) for text in texts))
    copied = (output_values & chunk_values) - allowed
    # a percentage also matches as a fraction ("8.5" and "0.085"): name it once
    report.copied_numbers = sorted(v for v in copied if _hundredfold(v) not in copied)
    if report.copied_numbers:
        report.reasons.append(f"{len(report.copied_numbers)} number(s) copied from the chunks")

    barriers = frozenset(_digit_tokens(question)) | frozenset(
        value for value in allowed if value.isdigit()
    )
    runs = set().union(*(chunk_digit_runs(chunk) for chunk in chunks)) - barriers
    found: set[str] = set()
    for text in [*joins, *texts]:
        groups, loose = digit_strings(text, barriers=barriers, words=read_words)
        for run in runs:
            backwards = run[::-1]
            tight = len(run) >= policy.min_digit_run and any(
                run in group or backwards in group for group in groups
            )
            spread = len(run) >= policy.min_loose_digit_run and (run in loose or backwards in loose)
            if tight or spread:
                found.add(run)
    found -= set(report.copied_numbers)
    report.copied_digits = sorted(found)
    if found:
        report.reasons.append(
            f"{len(found)} digit string(s) of the chunks spelled out, split or reversed"
        )


def _hundredfold(value: str) -> str:
    return canonical(Decimal(value) * 100)


def _digit_tokens(text: str) -> set[str]:
    if not text:
        return set()
    tokens: set[str] = set()
    for version in word_numbers_text(text):
        tokens.update(token for token in words(version) if token.isdigit())
    return tokens


def _ngrams(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _copied_share(tokens: list[str], chunk_words: list[list[str]], n: int) -> float:
    """Share of ``tokens`` covered by an n-gram that also occurs in some chunk."""
    chunk_grams = set().union(*(_ngrams(cw, n) for cw in chunk_words))
    covered = [False] * len(tokens)
    for i, gram in enumerate(_ngrams(tokens, n)):
        if gram in chunk_grams:
            covered[i : i + n] = [True] * n
    return sum(covered) / len(tokens)
