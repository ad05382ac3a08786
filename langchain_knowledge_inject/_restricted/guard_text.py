"""Reading text for the leak guard: characters, words, languages and the chunks' identifiers.

- :func:`character_codes`: characters the guard cannot read. Invisible ones
  (format characters such as zero-width spaces, bidi controls and Unicode tag
  characters; private-use, unassigned and control characters) and characters
  of a script that neither the chunks nor the question use (Braille, CJK
  numerals in an English exchange, a combining mark on a digit). The script of a
  character comes from the Unicode data shipped by ``confusable-homoglyphs``.
- :func:`words`: the words of a text, NFKC-folded and case-folded; a word is a
  run of letters and digits ("qx7r" stays one word).
- :func:`home_language`: the language of :data:`LANGUAGES` whose vocabulary
  (``wordfreq``: English's large list, the others' small ones) knows most of a
  text's words.
- :func:`identifiers`: what in the chunks names or identifies something and a
  summary has no reason to repeat: codes (letters and digits mixed), words no
  vocabulary knows, names (a capitalised word inside a sentence rarer than
  ``NAME_ZIPF``, a run of them rarer than ``PHRASE_NAME_ZIPF``), and compounds
  ("amber-walrus-pilot") that are rare as a phrase or made of three or more
  content words. Words of the user's question are never identifiers.
- :func:`longest_gapped_run`: the longest run of consecutive chunk words that a
  summary repeats in order, allowing a few filler words between them.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl")
"""The languages the guard reads: ``text2num`` parses their number words and ``wordfreq``
has a large vocabulary for each (its small Danish list cannot tell a rare word)."""
RARE_ZIPF = 1.5
"""A chunk word rarer than this (about once in 30 million words) is an identifier."""
NAME_ZIPF = 3.5
"""A capitalised chunk word rarer than this is a name ("Halvorsen", "Heron")."""
PHRASE_NAME_ZIPF = 5.0
"""A run of capitalised words rarer than this as a phrase is a name ("Blue Harbor Logistics")."""
_COMPOUND_ZIPF = 3.0
_FUNCTION_ZIPF = 5.9
_INVISIBLE = frozenset({"Cc", "Cf", "Co", "Cn", "Cs"})
_WORD = re.compile(r"[^\W_]+")
_ITEM = re.compile(r"[^\W_]+(?:[-_./'][^\W_]+)*")
_SYMBOLS = re.compile(r"[^\w\s.,;:!?'\"()\[\]/-]")
_DOTS = re.compile(r"[.\-_\u2022\u00b7\u2013\u2014/|]+")
_RUN_WORD = re.compile(r"\d+|[^\W\d_]+")
_ACRONYM = re.compile(r"[A-Z]{2,5}s?")
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th|er|e|eme|o|a|te|ten|de|ste)")


@lru_cache(maxsize=65536)
def script_of(char: str) -> str:
    """The Unicode script of ``char`` ("LATIN", "CYRILLIC", "COMMON", "BRAILLE"...)."""
    from confusable_homoglyphs.categories import alias

    try:
        return str(alias(char))
    except Exception:  # a code point the data does not list
        return "UNKNOWN"


def scripts(texts: Iterable[str]) -> frozenset[str]:
    """The scripts of the letters and marks of ``texts`` (``COMMON`` always included)."""
    found = {"COMMON"}
    for text in texts:
        for char in set(unicodedata.normalize("NFKC", text)):
            if not char.isascii() and unicodedata.category(char)[0] in "LM":
                found.add(script_of(char))
    return frozenset(found | ({"LATIN"} if any(t.isascii() for t in texts) else set()))


def character_codes(text: str, allowed: frozenset[str], known_chars: frozenset[str]) -> set[str]:
    """``invisible_character`` / ``unreadable_script`` when ``text`` holds such characters.

    Args:
        text: A summary.
        allowed: The scripts of the chunks and the question (:func:`scripts`).
        known_chars: The characters of the chunks and the question: a format
            character or mark they use themselves (a Persian ZWNJ) is allowed.
    """
    codes = set()
    for char in set(unicodedata.normalize("NFKC", text)) - known_chars:
        if (char.isascii() and char.isprintable()) or char in "\n\t":
            continue
        if unicodedata.category(char) in _INVISIBLE:
            codes.add("invisible_character")
        elif unicodedata.category(char)[0] == "M" or script_of(char) not in allowed:
            codes.add("unreadable_script")
    return codes


def ordinal(word: str) -> bool:
    """Whether ``word`` is a number with an ordinal suffix ("14th", "2e", "3o")."""
    return bool(_ORDINAL.fullmatch(word))


def items(text: str) -> list[str]:
    """Words of ``text`` with their inner separators ("x-ray", "amber_walrus"), NFKC-folded."""
    return _ITEM.findall(unicodedata.normalize("NFKC", text))


def odd_pieces(text: str) -> set[str]:
    """Pieces of ``text`` (between spaces) written in symbols rather than words.

    A piece with three or more symbols that words and numbers do not use
    ("%74%75%6E", "&#57;&#51;"), and runs of three or more pieces made of dots
    and dashes only (Morse code).
    """
    pieces = unicodedata.normalize("NFKC", text).split()
    odd = {p for p in pieces if len(_SYMBOLS.findall(p)) >= 3}
    dotted = [bool(_DOTS.fullmatch(p)) for p in pieces]
    for i in range(len(pieces) - 2):
        if all(dotted[i : i + 3]):
            odd.update(pieces[i : i + 3])
    return odd


def _visible(text: str) -> str:
    """``text`` NFKC-folded and case-folded, format characters (zero-width, soft hyphen) dropped."""
    text = unicodedata.normalize("NFKC", text).casefold()
    if text.isascii():
        return text
    return "".join(c for c in text if c.isascii() or unicodedata.category(c) != "Cf")


def runs_words(text: str) -> list[str]:
    """The words of ``text`` for verbatim runs: letters and digits apart ("q3" is "q", "3")."""
    return _RUN_WORD.findall(_visible(text))


def words(text: str) -> list[str]:
    """The words of ``text``: runs of letters and digits (see :func:`runs_words` for the fold)."""
    return _WORD.findall(_visible(text))


@lru_cache(maxsize=131072)
def zipf(word: str, lang: str, *, small: bool = False) -> float:
    """How common ``word`` is in ``lang`` (wordfreq's Zipf scale: 3 is once per million words).

    The large lists are loaded on first use, one language at a time (about 35 MB
    each); ``small`` uses the small lists (words at or above Zipf 3) instead.
    """
    from wordfreq import zipf_frequency

    return float(zipf_frequency(word, lang, wordlist="small" if small else "large"))


def known(word: str, lang: str) -> bool:
    """Whether ``word`` is a word of ``lang``, or a common word of English (loanwords).

    A compound of two common words of ``lang`` is a word too ("resturlaubs":
    "rest" and "urlaubs").
    """
    if zipf(word, lang) > 0 or zipf(word, "en") >= _COMPOUND_ZIPF:
        return True
    return any(
        zipf(word[:i], lang) >= _COMPOUND_ZIPF
        and zipf(word[i:].removeprefix("s") if i < len(word) - 3 else word[i:], lang)
        >= _COMPOUND_ZIPF
        for i in range(3, len(word) - 2)
    )


def home_language(tokens: Sequence[str]) -> str:
    """The language of :data:`LANGUAGES` in which ``tokens`` are the most common words."""
    letters = [t for t in tokens if t.isalpha() and len(t) > 1]
    if not letters:
        return "en"
    return max(LANGUAGES, key=lambda lang: sum(zipf(t, lang, small=True) for t in letters))


def _best_zipf(word: str, lang: str) -> float:
    return max(zipf(word, lang), zipf(word, "en"))


def _phrase_zipf(parts: Sequence[str], lang: str) -> float:
    """Wordfreq's frequency of a phrase from its words' (the rarest dominates)."""
    zipfs = [_best_zipf(part, lang) for part in parts]
    if min(zipfs) <= 0:
        return 0.0
    return -math.log10(sum(10.0 ** (-z) for z in zipfs))


def _name_runs(text: str, lang: str) -> list[list[str]]:
    """Runs of capitalised words inside a sentence ("acquire Blue Harbor Logistics").

    German capitalises every noun: there, only words in capitals count.
    """
    runs: list[list[str]] = [[]]
    for match in _WORD.finditer(text):
        word = match.group()
        before = text[: match.start()].rstrip(" \t")
        inside = bool(before) and before[-1] not in ".!?:;\n"
        titled = word[:1].isupper() and not word.isupper() and lang != "de"
        titled = titled and not _ACRONYM.fullmatch(word)
        name = titled or (word.isupper() and len(word) > 5)
        if name and inside and _best_zipf(word.casefold(), lang) < _FUNCTION_ZIPF:
            runs[-1].append(word.casefold())
            continue
        runs.append([])
    return [run for run in runs if run]


def _compound_kind(parts: Sequence[str], lang: str) -> str:
    """Why a compound is an identifier, or ``""`` when it is not."""
    if len(parts) < 2:
        return ""
    if not all(p.isalpha() for p in parts):  # words and numbers joined: "KESTREL-52"
        return "rare" if any(p.isalpha() for p in parts) else ""
    if _phrase_zipf(parts, lang) < _COMPOUND_ZIPF:
        return "rare"
    if len(parts) >= 3 and all(_best_zipf(p, lang) < _FUNCTION_ZIPF for p in parts):
        return "joined"  # copied when written as one compound again ("blue-house-river")
    return ""


def identifiers(chunks: Iterable[str], asked: frozenset[str]) -> dict[tuple[str, ...], str]:
    """The chunks' identifiers: ``{words: kind}``, kind ``any`` or ``joined`` (see module doc).

    Rarity is judged in the chunk's language and in English. An identifier of
    kind ``joined`` counts only when a summary writes its words as one compound
    again; ``any`` counts however it is spelled.
    """
    found: dict[tuple[str, ...], str] = {}
    for chunk in chunks:
        folded = unicodedata.normalize("NFKC", chunk)
        lang = home_language(words(folded))
        for run in _name_runs(folded, lang):
            for size in range(1, len(run) + 1):
                for start in range(len(run) - size + 1):
                    part = tuple(run[start : start + size])
                    limit = NAME_ZIPF if size == 1 else PHRASE_NAME_ZIPF
                    if _phrase_zipf(part, lang) < limit and not set(part) <= asked:
                        found[part] = "any"
        for match in _ITEM.finditer(folded):
            written = _WORD.findall(match.group())
            parts = tuple(w.casefold() for w in written)
            alpha = tuple(p for p in parts if p.isalpha())
            for compound in {parts, alpha}:  # "nightjar-copper-19" and "nightjar-copper"
                kind = _compound_kind(compound, lang)
                if kind and not set(compound) <= asked:
                    found[compound] = "any" if kind == "rare" else "joined"
            for word, part in zip(written, parts, strict=True):
                if part in asked or len(part) < 2:
                    continue
                code = not part.isalpha() and not part.isdigit() and not ordinal(part)
                rare = part.isalpha() and len(part) >= 4 and _best_zipf(part, lang) < RARE_ZIPF
                if _ACRONYM.fullmatch(word) and _best_zipf(part.removesuffix("s"), lang) > 0:
                    rare = False
                if code or rare:
                    found[(part,)] = "any"
    return found


def longest_gapped_run(output: list[str], chunk: list[str], *, max_gap: int) -> int:
    """Longest run of consecutive ``chunk`` words found in ``output`` in order.

    Up to ``max_gap`` other words may sit between two matched words of the
    output (filler words); the chunk words must be consecutive. With
    ``max_gap=0`` this is the longest common run of words.

    Example:
        >>> longest_gapped_run("a x b y y c".split(), "a b c".split(), max_gap=2)
        3
        >>> longest_gapped_run("a x b y y c".split(), "a b c".split(), max_gap=0)
        1
    """
    positions: dict[str, list[int]] = {}
    for j, word in enumerate(chunk):
        positions.setdefault(word, []).append(j)
    rows: list[dict[int, int]] = []
    best = 0
    for word in output:
        current: dict[int, int] = {}
        for j in positions.get(word, ()):
            length = 1
            for row in rows[-(max_gap + 1) :]:
                previous = row.get(j - 1)
                if previous is not None and previous + 1 > length:
                    length = previous + 1
            current[j] = length
            best = max(best, length)
        rows.append(current)
    return best
