"""The leak guard of restricted mode: does what the main model would see give the chunks away?

A safe summary written by the secondary model is released to the main model
only when :func:`check_leak` finds nothing in ANY field the main model sees
(summary, answer guidance, reason, refusal text), checked one by one and
joined in both orders, and nothing once it is joined with the summaries
already released earlier in the same run and thread (``released``), so that
fragments cannot add up to a secret.

The guard fails closed on what it cannot read, instead of decoding the forms it
was taught. Its reason codes (:data:`CODES`; docs/restricted-mode.md has a line
for each): characters it cannot read (``invisible_character``,
``unreadable_script``), a language or words it cannot read
(``unparsed_language``, ``unknown_token``), the chunks' codes, rare words,
names and rare compounds however they are spelled (``copied_identifier``), the
chunks' numbers in any script, notation or language, or their digits spelled
out, split or reversed (``copied_number``), a number of three or more
significant digits it cannot explain (``unexplained_number``: octal, binary,
arithmetic on a secret; a year is explained), runs and n-grams of chunk words (``verbatim_run``,
``copied_ngrams``), a sensitive source name after folding case and separators
(``source_name``), a finding that appears only together with ``released``
(``fragment``), and its own failure (``guard_error``).

Words and numbers of the user's question are never secrets: "Q3" in a summary
is fine when the question asked about Q3. A :class:`LeakReport` carries codes,
counts and lengths, never a string of the summary, the chunks or a source.

What it cannot catch: a paraphrase of a fact that holds no identifier or
number ("the threshold is a bit under two thirds"), a rounded value ("about 7
million" for 7,348,912), a secret made of common words that are not capitalised
and not written as a compound, and what the decision itself gives away.
``test_leak_guard.py`` pins the figures on the labelled sets.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langchain_knowledge_inject._restricted import guard_text as _t
from langchain_knowledge_inject._restricted.guard_numbers import (
    chunk_digit_runs,
    digit_groups,
    number_text,
    number_values,
    significant,
)
from langchain_knowledge_inject.errors import ConfigurationError

logger = logging.getLogger("langchain_knowledge_inject.leak_guard")

CODES = (
    "invisible_character",
    "unreadable_script",
    "unparsed_language",
    "unknown_token",
    "copied_identifier",
    "copied_number",
    "unexplained_number",
    "verbatim_run",
    "copied_ngrams",
    "source_name",
    "fragment",
    "guard_error",
)
"""Every reason code a :class:`LeakReport` can carry, in the order it lists them."""

_YEAR = re.compile(r"(?:19|20)\d\d")
_WINDOW = 12  # longest run of summary words read as one spelled token
_MIN_SPELLED = 4  # shortest identifier looked for in joined words or initials


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
    """Thresholds of the leak guard's copy checks; output crossing any of them is withheld.

    The defaults were chosen on ``LEAK_CASES`` (``tests/unit_tests/restricted_fixtures.py``);
    ``test_leak_guard.py`` pins the figures.

    Example:
        >>> from langchain_knowledge_inject._restricted.guard import LeakPolicy
        >>> LeakPolicy().max_verbatim_words
        8
    """

    max_verbatim_words: int = Field(default=8, ge=1)
    """Longest run of consecutive chunk words the output may repeat (fillers allowed between).

    The legitimate summaries of ``LEAK_CASES`` share at most 8 words in a row
    (a domain phrase); a clause copied inside a long paraphrase shares 9."""

    filler_gap: int = Field(default=2, ge=0, le=5)
    """How many other words may sit between two repeated chunk words of a run.

    Catches a verbatim run with filler words interleaved ("deleted, um,
    automatically, you know, after..."). 0 counts strict runs only."""

    max_copied_ngram_share: float = Field(default=0.6, gt=0.0, le=1.0)
    """Largest share of the output's words that may lie inside an n-gram found in the chunks.

    Catches copies whose verbatim runs are broken by edits (every 4th or 5th
    word changed); ordinary paraphrases stay well below."""

    ngram_size: int = Field(default=3, ge=2, le=10)
    """Length in words of the n-grams behind ``max_copied_ngram_share``."""

    min_words_for_share: int = Field(default=12, ge=1)
    """The share is judged only on outputs of at least this many words.

    On a one-line summary a single shared phrase is already a large share."""

    allowed_numbers: tuple[str, ...] = ()
    """Numbers that may be repeated although the chunks hold them (e.g. ``("24", "7")``)."""


@dataclass(frozen=True)
class LeakReport:
    """What the leak guard found: codes, counts and lengths, never text, so it can be logged."""

    leaked: bool
    """Whether the output must be withheld."""
    codes: tuple[str, ...] = ()
    """The reason codes (:data:`CODES`), in that order; empty when nothing leaked."""
    counts: dict[str, int] = field(default_factory=dict)
    """How many findings each code has (characters, words, numbers...)."""
    longest_verbatim_run: int = 0
    """Longest run of consecutive chunk words repeated (filler words allowed between)."""
    copied_ngram_share: float = 0.0
    """Share of the output's words inside n-grams of the chunks (0 when too short to judge)."""
    summary_words: int = 0
    """Number of words the output was compared on (all fields)."""


def check_leak(
    fields: Mapping[str, str] | Sequence[str] | str,
    chunks: Sequence[str],
    *,
    question: str | None = "",
    sources: Sequence[str] = (),
    released: Sequence[str] = (),
    policy: LeakPolicy | None = None,
) -> LeakReport:
    """Check what the main model would see against the raw chunks it was written from.

    Args:
        fields: Everything the main model would see from the summarizer, by
            field name (summary, answer guidance, reason, refusal text); one
            text or a sequence of texts also work.
        chunks: The raw chunk texts, unbounded.
        question: The user's question: its words and numbers are not secrets.
        sources: Source names that must not be repeated (sensitive sources).
        released: The summaries already released earlier in this run and thread.
        policy: Thresholds; ``LeakPolicy()`` when omitted.

    Returns:
        A :class:`LeakReport`; ``leaked`` is true when any check fails, and when
        the guard itself fails (``guard_error``: it fails closed).

    Example:
        >>> from langchain_knowledge_inject._restricted.guard import check_leak
        >>> chunk = "Leave requests must be filed at least 14 days before the first day off."
        >>> check_leak({"summary": "Plan leave requests well ahead of time."}, [chunk]).leaked
        False
        >>> check_leak({"summary": "Requests are due 14 days ahead."}, [chunk]).codes
        ('copied_number',)
        >>> check_leak({"summary": "Due one four", "guidance": "days ahead"}, [chunk]).leaked
        True
        >>> check_leak("Yes, 14 days is enough.", [chunk], question="Are 14 days enough?").leaked
        False
        >>> check_leak("Ask Halvorsen Maritime.", ["The buyer is Halvorsen Maritime."]).codes
        ('copied_identifier',)
    """
    texts = _field_texts(fields)
    chunks = [chunk for chunk in chunks if chunk and chunk.strip()]
    if not texts or not (chunks or sources):
        return LeakReport(leaked=False, summary_words=sum(len(_t.words(t)) for t in texts))
    policy = policy or LeakPolicy()
    try:
        context = _Context(chunks, question or "", sources, policy)
        found = context.findings(texts)
        if released:
            before = context.findings(list(released), combined=True)
            together = context.findings([*released, *texts], combined=True)
            for code, items in together.items():
                if items - before.get(code, set()) - found.get(code, set()):
                    found.setdefault(code, set()).update(items)
                    found["fragment"] = {code}
    except Exception as exc:
        logger.warning("leak guard failed (%s): withholding", type(exc).__name__)
        return LeakReport(leaked=True, codes=("guard_error",), counts={"guard_error": 1})
    codes = tuple(code for code in CODES if found.get(code))
    return LeakReport(
        leaked=bool(codes),
        codes=codes,
        counts={code: len(found[code]) for code in codes},
        longest_verbatim_run=context.longest_run,
        copied_ngram_share=context.share,
        summary_words=context.summary_words,
    )


def _field_texts(fields: Mapping[str, str] | Sequence[str] | str) -> list[str]:
    if isinstance(fields, str):
        values: list[Any] = [fields]
    elif isinstance(fields, Mapping):
        values = list(fields.values())
    elif isinstance(fields, Sequence):
        values = list(fields)
    else:
        msg = "fields must be a mapping of field names to strings (or a string, or strings)"
        raise ConfigurationError(msg, option="fields", value=type(fields).__name__)
    return [str(value) for value in values if value is not None and str(value).strip()]


class _Context:
    """What the chunks, the question and the sources hold, read once for every check."""

    def __init__(
        self, chunks: list[str], question: str, sources: Sequence[str], policy: LeakPolicy
    ) -> None:
        self.policy = policy
        self.scripts = _t.scripts([*chunks, question])
        self.chars = frozenset("".join([*chunks, question]))
        self.asked = frozenset(_t.words(number_text(question))) | frozenset(_t.words(question))
        read = [number_text(chunk, _t.home_language(_t.words(chunk))) for chunk in chunks]
        self.chunk_words = [_t.runs_words(chunk) for chunk in read]
        self.vocabulary = frozenset(w for text in [*chunks, *read] for w in _t.words(text))
        ids = _t.identifiers(chunks, self.asked)
        self.spelled = {"".join(p): p for p, kind in ids.items() if kind == "any"}
        self.sources = frozenset(key for source in sources for key in _source_keys(source))
        self.spelled.update({key: (key,) for key in self.sources})
        self.joined = {"".join(p) for p in ids} | {"".join(reversed(p)) for p in ids}
        self.parts = [p for p, kind in ids.items() if kind == "any" and len(p) > 1]
        self.values = set().union(*(number_values(chunk) for chunk in read))
        allowed = [number_text(question), *(number_text(n) for n in policy.allowed_numbers)]
        self.allowed = set().union(*(number_values(text) for text in allowed))
        self.barriers = frozenset(w for text in allowed for w in _t.words(text) if w.isdigit())
        self.runs = set().union(*(chunk_digit_runs(chunk) for chunk in read)) - self.barriers
        self.longest_run, self.share, self.summary_words = 0, 0.0, 0

    def findings(self, texts: list[str], *, combined: bool = False) -> dict[str, set[Any]]:
        """What each check finds in ``texts`` (the items stay inside the guard)."""
        found: dict[str, set[Any]] = {code: set() for code in CODES}
        joins = ["\n".join(texts), "\n".join(reversed(texts))] if len(texts) > 1 else texts
        home = _t.home_language(_t.words(joins[0]))
        read = [number_text(text, home) for text in [*joins, *texts]]
        sequences = [_t.words(text) for text in read]
        if not combined:
            for text in texts:
                for code in _t.character_codes(text, self.scripts, self.chars):
                    found[code].add(code)
            self._words(sequences[0], home, found)
            found["unknown_token"] |= set().union(*(_t.odd_pieces(text) for text in texts))
            self.summary_words = len(sequences[0])
        for sequence, text in zip(sequences, read, strict=True):
            self._identifiers(sequence, text, found, combined=combined)
        self._numbers(read, found)
        self._runs([_t.runs_words(text) for text in read[: len(joins)]], found, share=not combined)
        return found

    def _words(self, sequence: list[str], home: str, found: dict[str, set[Any]]) -> None:
        letters = {w for w in sequence if not w.isdigit() and w not in self.asked}
        unknown = set()
        for word in letters:
            if any(c.isalpha() and _t.script_of(c) != "LATIN" for c in word):
                found["unparsed_language"].add(word)
            elif not (word in self.vocabulary or _t.known(word, home) or _t.ordinal(word)):
                unknown.add(word)
        language = len(unknown) >= 3 and len(unknown) * 2 > len(letters)
        found["unparsed_language" if language else "unknown_token"] |= unknown

    def _identifiers(
        self, sequence: list[str], text: str, found: dict[str, set[Any]], *, combined: bool
    ) -> None:
        for start in range(len(sequence)):
            window = sequence[start : start + _WINDOW]
            for size in range(1, len(window) + 1):
                words = window[:size]
                for key in ("".join(words), "".join(reversed(words))):
                    if key in self.spelled:
                        code = "source_name" if key in self.sources else "copied_identifier"
                        found[code].add(key)
            for parts in self.parts:  # in one summary close together, in a thread anywhere
                end = len(sequence) if combined else start + len(parts) + 2
                if set(parts) <= set(sequence[start:end]):
                    found["copied_identifier"].add("".join(parts))
        items = [_t.words(item) for item in _t.items(text)]
        initials = "".join(item[0][0] if item[0].isalpha() else item[0] for item in items if item)
        for key in self.spelled:
            if len(key) >= _MIN_SPELLED and key in initials:
                found["copied_identifier"].add(key)
        for item in items:
            if len(item) > 1 and "".join(item) in self.joined:
                found["copied_identifier"].add("".join(item))

    def _numbers(self, read: list[str], found: dict[str, set[Any]]) -> None:
        values = set().union(*(number_values(text) for text in read)) - self.allowed
        found["copied_number"] |= values & self.values
        for value in values - self.values:  # a year is explained: it dates something
            if len(significant(value)) >= 3 and not _YEAR.fullmatch(value):
                found["unexplained_number"].add(value)
        for text in read:
            groups, loose = digit_groups(text, barriers=self.barriers)
            for run in self.runs:
                tight = len(run) >= 2 and any(run in g or run[::-1] in g for g in groups)
                if tight or (len(run) >= 4 and (run in loose or run[::-1] in loose)):
                    found["copied_number"].add(run)

    def _runs(self, sequences: list[list[str]], found: dict[str, set[Any]], *, share: bool) -> None:
        policy = self.policy
        runs = [
            _t.longest_gapped_run(sequence, chunk, max_gap=policy.filler_gap)
            for sequence in sequences
            for chunk in self.chunk_words
        ]
        longest = max(runs, default=0)
        if longest > policy.max_verbatim_words:
            found["verbatim_run"].add(longest)
        output = sequences[0]
        if not share:
            return
        self.longest_run = longest
        if len(output) >= policy.min_words_for_share:
            self.share = _copied_share(output, self.chunk_words, policy.ngram_size)
            if self.share > policy.max_copied_ngram_share:
                found["copied_ngrams"].add(self.share)


def _source_keys(source: str) -> set[str]:
    """A source name as path, file name and (when it has several parts) stem, folded."""
    path = PurePath(source.strip())
    forms = {source, path.name} | ({path.stem} if len(_t.words(path.stem)) > 1 else set())
    return {key for key in ("".join(_t.words(form)) for form in forms) if len(key) >= 4}


def _copied_share(tokens: list[str], chunk_words: list[list[str]], n: int) -> float:
    """Share of ``tokens`` covered by an n-gram that also occurs in some chunk."""
    grams = {tuple(cw[i : i + n]) for cw in chunk_words for i in range(len(cw) - n + 1)}
    covered = [False] * len(tokens)
    for i in range(len(tokens) - n + 1):
        if tuple(tokens[i : i + n]) in grams:
            covered[i : i + n] = [True] * n
    return sum(covered) / len(tokens)
