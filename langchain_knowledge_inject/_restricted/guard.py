"""The leak guard of restricted mode: a summary is released only when every word in it is allowed.

Every field the main model sees (summary, answer guidance, a refusal's guidance)
is checked alone, joined in both orders, and joined with what the thread already
released (``released``), so that fragments cannot add up. Every word must be a
common word of a language the guard reads (``guard_text.allowed``), a word of the
question or of the public description; every number, in any notation or language,
must have its value in the question; every character a letter, a digit, a space or
ordinary punctuation; nothing the chunks name may be spelled again, however spaced,
joined or hidden in initials. The reason codes (:data:`CODES`), and what the guard
cannot stop, are in docs/restricted-mode.md. A :class:`LeakReport` carries codes,
counts and lengths, never text.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langchain_knowledge_inject._restricted import guard_text as _t
from langchain_knowledge_inject._restricted.guard_numbers import (
    NUMBER,
    number_text,
    number_values,
    readings,
    roman,
)
from langchain_knowledge_inject.errors import ConfigurationError

logger = logging.getLogger("langchain_knowledge_inject.leak_guard")

CODES = (
    "invisible_character", "unreadable_script", "symbol", "number", "single_letters",
    "unparsed_language", "unknown_token", "copied_identifier", "initials", "source_name",
    "verbatim_run", "copied_ngrams", "fragment", "guard_error",
)  # fmt: skip
"""Every reason code a :class:`LeakReport` can carry, in the order it lists them."""

_WINDOW = 12  # longest run of summary words read as one spelled token
_MIN_SPELLED = 4  # shortest identifier looked for in joined words or initials
_STRIDES = 5  # initials of every word, every second word ... every fifth word
_ORDINAL = re.compile(r"\d+[^\W\d_]{1,3}")
_ELISION = re.compile(r"['\u2019][^\W\d_]")  # "l'accord"
_CLITIC = re.compile(r"[^\W\d_]['\u2019]")  # "user's"


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
    public: str = "",
    sources: Sequence[str] = (),
    released: Sequence[str] = (),
    policy: LeakPolicy | None = None,
) -> LeakReport:
    """Check what the main model would see: every word allowed, nothing of the chunks copied.

    Args:
        fields: Everything the main model would see from the summarizer, by
            field name (summary, answer guidance); one text or a sequence of texts
            also work.
        chunks: The raw chunk texts, unbounded.
        question: The user's question: its words and numbers are allowed.
        public: The knowledge base's public description (routing hint and
            keywords): its words are allowed.
        sources: Source names that must not be repeated (sensitive sources).
        released: What the thread already released (summaries and guidance).
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
        ('number',)
        >>> check_leak("Yes, 14 days is enough.", [chunk], question="Are 14 days enough?").leaked
        False
        >>> check_leak("Ask Halvorsen Maritime.", ["The buyer is Halvorsen Maritime."]).codes
        ('copied_identifier',)
        >>> check_leak("The code is xlviii.", [chunk]).codes
        ('number',)
    """
    texts = _field_texts(fields)
    chunks = [chunk for chunk in chunks if chunk and chunk.strip()]
    if not texts:
        return LeakReport(leaked=False)
    policy = policy or LeakPolicy()
    try:
        context = _Context(chunks, question or "", public, sources, policy)
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
    """What the question, the description, the chunks and the sources allow, read once."""

    def __init__(
        self,
        chunks: list[str],
        question: str,
        public: str,
        sources: Sequence[str],
        policy: LeakPolicy,
    ) -> None:
        self.policy = policy
        self.known = frozenset(_t.visible(question + public) + question + public)
        asked = number_text(question, _t.home_language(_t.words(question)))
        self.asked = frozenset(_t.words(f"{question} {asked} {public}"))
        numbers = [asked, number_text(public), *map(number_text, policy.allowed_numbers)]
        self.values = set().union(*map(number_values, numbers))
        self.chunk_words = [_t.runs_words(chunk) for chunk in chunks]
        self.vocabulary = frozenset(w for chunk in chunks for w in _t.words(chunk))
        ids = _t.identifiers(chunks, self.asked)
        self.spelled = {"".join(p): p for p, kind in ids.items() if kind == "any"}
        self.named = {"".join(p): p for p, kind in ids.items() if kind == "name"}
        self.sources = frozenset(key for source in sources for key in _source_keys(source))
        distinct = {w for s in sources for w in _distinctive(s)} - self.asked
        self.sources |= distinct
        self.spelled.update({key: (key,) for key in self.sources})
        self.joined = {"".join(p) for p in ids} | {"".join(reversed(p)) for p in ids}
        self.parts = [p for p, kind in ids.items() if kind != "joined" and len(p) > 1]
        spelt = [*self.spelled, *self.named]
        self.spelt = [key for key in spelt if len(key) >= _MIN_SPELLED and key.isalpha()]
        self.longest_run, self.share, self.summary_words = 0, 0.0, 0

    def findings(self, texts: list[str], *, combined: bool = False) -> dict[str, set[Any]]:
        """What each check finds in ``texts`` (the items stay inside the guard)."""
        found: dict[str, set[Any]] = {code: set() for code in CODES}
        joins = ["\n".join(texts), "\n".join(reversed(texts))] if len(texts) > 1 else texts
        sequences = [_t.words(text) for text in joins]
        if not combined:
            home = _t.home_language(sequences[0])
            read = number_text(joins[0], home)
            for text in texts:
                for code in _t.character_codes(text, self.known):
                    found[code].add(code)
                for name in _t.names(text, home) - self.asked:  # whatever the chunks say
                    code = "copied_identifier" if name in self.vocabulary else "unknown_token"
                    found[code].add(name)
            for number in NUMBER.finditer(read):
                if not readings(number.group()) & self.values:
                    found["number"].add(number.group())
            self._words(_t.visible(read), home, found)
            self.summary_words = len(sequences[0])
        for sequence, text in zip(sequences, joins, strict=True):
            caps = [w[:1].isupper() for w in _t.WORD.findall(unicodedata.normalize("NFKC", text))]
            caps = caps if len(caps) == len(sequence) else [False] * len(sequence)
            self._identifiers(sequence, caps, text, found, combined=combined)
        self._runs([_t.runs_words(text) for text in joins], found, share=not combined)
        return found

    def _words(self, read: str, home: str, found: dict[str, set[Any]]) -> None:
        """Every word on the allow-list; single letters words of ``home``, not spelling."""
        unknown, letters, run, last = set(), 0, 0, ""
        for match in _t.WORD.finditer(read):
            word = match.group()
            single = len(word) == 1 and word.isalpha()
            run = run + 1 if single else 0
            if run >= 3 or (run == 2 and word == last):  # "q x r", "i i"
                found["single_letters"].add(match.start())
            last = word
            if word in self.asked:
                continue
            if not word.isalpha():
                if not word.isdigit() and not _ORDINAL.fullmatch(word):
                    found["number"].add(word)  # letters and digits: a code, another base
            elif any(_t.script_of(c) != "LATIN" for c in word):
                found["unreadable_script"].add(word)
            elif single:
                elided = _ELISION.match(read, match.end()) or _CLITIC.fullmatch(
                    read, max(0, match.start() - 2), match.start()
                )
                if not elided and _t.zipf(word, home) < _t.SINGLE_LETTER_ZIPF:
                    found["single_letters"].add(word)
            elif roman(word) and not _t.native(word, home):
                found["number"].add(word)
            else:
                letters += 1
                if not _t.allowed(word, home):
                    unknown.add(word)
        if len(unknown) >= 3 and len(unknown) * 2 > letters:
            found["unparsed_language"] |= unknown
            return
        for word in unknown:
            found["copied_identifier" if word in self.vocabulary else "unknown_token"].add(word)

    def _identifiers(
        self,
        sequence: list[str],
        caps: list[bool],
        text: str,
        found: dict[str, set[Any]],
        *,
        combined: bool,
    ) -> None:
        """The chunks' identifiers however spelled; a name of allowed words when capitalised."""
        for start in range(len(sequence)):
            window = sequence[start : start + _WINDOW]
            for size in range(1, len(window) + 1):
                words = window[:size]
                named = all(caps[start : start + size])
                for key in ("".join(words), "".join(reversed(words))):
                    if key in self.spelled or (named and key in self.named):
                        code = "source_name" if key in self.sources else "copied_identifier"
                        found[code].add(key)
            end = len(sequence) if combined else None
            for parts in self.parts:  # in one summary close together, in a thread anywhere
                stop = end or start + len(parts) + 2
                seen = zip(sequence[start:stop], caps[start:stop], strict=True)
                written = {w for w, cap in seen if cap or "".join(parts) not in self.named}
                if set(parts) <= written:
                    found["copied_identifier"].add("".join(parts))
        for item in _t.items(text):
            joined = "".join(_t.words(item))
            if len(_t.words(item)) > 1 and joined in self.joined:
                found["copied_identifier"].add(joined)
        firsts = [word[0] for word in sequence]
        for stride in range(1, _STRIDES + 1):
            for offset in range(stride):
                spelled = "".join(firsts[offset::stride])
                found["initials"].update(key for key in self.spelt if key in spelled)

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


def _distinctive(source: str) -> set[str]:
    """The words of a source name a summary has no reason to write: rare ones, codes."""
    parts = _t.words(re.sub(r"([a-z])([A-Z])", r"\1 \2", PurePath(source.strip()).name))
    rare = [p for p in parts if not p.isalpha() or _t.common(p, "en") < _t.NAME_ZIPF]
    return {part for part in rare if len(part) >= _MIN_SPELLED and not part.isdigit()}


def _copied_share(tokens: list[str], chunk_words: list[list[str]], n: int) -> float:
    """Share of ``tokens`` covered by an n-gram that also occurs in some chunk."""
    grams = {tuple(cw[i : i + n]) for cw in chunk_words for i in range(len(cw) - n + 1)}
    covered = [False] * len(tokens)
    for i in range(len(tokens) - n + 1):
        if tuple(tokens[i : i + n]) in grams:
            covered[i : i + n] = [True] * n
    return sum(covered) / len(tokens)
