"""Numbers for the leak guard: number words read as digits, values read to compare.

The guard refuses every number unless its value stands whole in the question, so
it lists no notation. It reads: number words of :data:`NUMBER_LANGUAGES` with
``text2num`` and digits of any script (:func:`number_text`), the values a number
in digits stands for (:func:`readings`), and Roman numerals in any case (:func:`roman`).
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from text_to_num import alpha2digit

NUMBER_LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "da")
"""The languages whose number words the guard reads (all that ``text2num`` knows)."""

_COMMON_ZIPF = 3.0
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
"""A number as written in digits, with its separators ("7,350,000", "8.5")."""
_ROMAN = re.compile(r"M{0,4}(?:CM|CD|D?C{0,4})(?:XC|XL|L?X{0,4})(?:IX|IV|V?I{0,4})")
_WORD = re.compile(r"[^\W\d_]+")
_NUMBER_HYPHEN = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)+")
_MASK = "\ue000"
_SPOKEN_ZERO = re.compile(
    r"(?:(?P<before>[^\W\d_]+)\W+)?(?P<oh>\b[Oo]h\b)(?:\W+(?P<after>[^\W\d_]+))?"
)


def canonical(value: Decimal) -> str:
    """Canonical string of a value: no exponent, no trailing zeros ("8.50" -> "8.5")."""
    text = format(value.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


def roman(word: str) -> bool:
    """Whether ``word`` (two letters or more, any case) is a valid Roman numeral.

    Example:
        >>> roman("mcmlxxxvii"), roman("Mix"), roman("mild")
        (True, True, False)
    """
    return len(word) > 1 and bool(_ROMAN.fullmatch(word.upper()))


@lru_cache(maxsize=4096)
def _is_number_word(word: str, lang: str) -> bool:
    return alpha2digit(word, lang, threshold=0) != word


def _read_words(text: str, lang: str, home: str) -> str:
    """``text`` with the number words of ``lang`` in digits (see the module doc)."""
    from langchain_knowledge_inject._restricted.guard_text import zipf

    found = list(_WORD.finditer(text))
    pieces, masked, last = [], [], 0
    for i, match in enumerate(found if lang != home else ()):
        word = match.group()
        if zipf(word.casefold(), home) < _COMMON_ZIPF or not _is_number_word(word, lang):
            continue
        near = [found[j].group() for j in (i - 1, i + 1) if 0 <= j < len(found)]
        if _is_number_word(word, home) or any(_is_number_word(w, lang) for w in near):
            continue
        pieces += [text[last : match.start()], _MASK]
        masked.append(word)
        last = match.end()
    source = "".join([*pieces, text[last:]])
    try:
        converted = alpha2digit(source, lang)
    except Exception:  # text2num's parsers raise on odd input: read the rest
        return text
    words = iter(masked)
    return re.sub(_MASK, lambda m: next(words, ""), converted)


def _spoken_zero(match: re.Match[str]) -> str:
    near = (match.group("before") or "", match.group("after") or "")
    if not any(_is_number_word(word, "en") for word in near if word):
        return match.group()
    start, end = match.span("oh")
    return match.string[match.start() : start] + "zero" + match.string[end : match.end()]


def _unhyphenate(match: re.Match[str]) -> str:
    parts = match.group().split("-")
    numbers = all(any(_is_number_word(p, lang) for lang in NUMBER_LANGUAGES) for p in parts)
    return " ".join(parts) if numbers else match.group()


@lru_cache(maxsize=512)
def number_text(text: str, home: str = "en") -> str:
    """``text`` NFKC-folded with its number words and digits of any script in ASCII digits.

    Args:
        text: Any text.
        home: The language the text is written in (its number words are always read).

    Example:
        >>> number_text("vier acht eins sieben, \u0664\u0668\u0661\u0667")
        '4 8 1 7, 4817'
    """
    text = unicodedata.normalize("NFKC", text.replace(_MASK, ""))
    text = "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in text)
    text = _NUMBER_HYPHEN.sub(_unhyphenate, text)  # "four-eight-one"; "twenty five" parses
    text = _SPOKEN_ZERO.sub(_spoken_zero, text)  # "one oh one": text2num has no "oh"
    for lang in (home, *(lang for lang in NUMBER_LANGUAGES if lang != home)):
        text = _read_words(text, lang, home)
    return text


def readings(raw: str) -> set[str]:
    """Every value a number written in digits can stand for ("7.350" is 7.35 or 7350).

    Example:
        >>> sorted(readings("7.350"))
        ['7.35', '7350']
    """
    found: list[str] = []
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", raw):
        found.append(raw.replace(",", ""))
    if re.fullmatch(r"\d{1,3}(?:\.\d{3})+(?:,\d+)?", raw):
        found.append(raw.replace(".", "").replace(",", "."))
    if len(re.findall(r"[.,]", raw)) <= 1:
        found.append(raw.replace(",", "."))
    else:  # "14.03.2025": each group, and the groups joined
        found += [*re.split(r"[.,]", raw), re.sub(r"[.,]", "", raw)]
    values = set()
    for text in found:
        try:
            values.add(canonical(Decimal(text)))
        except InvalidOperation:
            continue
    return values


def number_values(text: str) -> set[str]:
    """Every value written in digits in ``text`` (already through :func:`number_text`).

    Example:
        >>> sorted(number_values("between 7.35 and 1,200"))
        ['1.2', '1200', '7.35']
    """
    return set().union(*(readings(m.group()) for m in NUMBER.finditer(text)))
