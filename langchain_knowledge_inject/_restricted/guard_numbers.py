"""Numbers for the leak guard: values in any notation, and digit strings in any order.

Two views of the numbers in a text:

- :func:`number_values`: the numeric VALUES written in it, whatever the
  notation: digits with any thousands or decimal separator ("7,350,000",
  "7.350.000", "8,5"), digits of any script (folded first), scale words and
  suffixes ("7.35 million", "7350 thousand", "7.35M", "2,6 Mio."), scientific
  notation ("4.2e6", "4.2 x 10^6"), percentages (also as a fraction: "12.5%"
  is 12.5 and 0.125), fractions ("1/8"), hexadecimal integers ("0xBEEF"),
  Roman numerals ("MCMLXXXVII"), and number words in English, German, French
  and Spanish, parsed by ``text2num`` ("eighteen thousand four hundred",
  "zweitausendsiebenhundertfünfzig", "trente-huit", "doscientos sesenta y
  cinco").
- :func:`digit_strings`: the digit strings a text spells, separators removed,
  as tight groups (digits apart only by punctuation, spaces or single letters:
  "4 8 1 7", "9-0-4-1-2", "a3b1c5") and as one loose string of every digit in
  order, so that a value split across fields or between words is seen whole.

Values are canonical decimal strings ("7350000", "8.5", "0.125").
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from text_to_num import alpha2digit

from langchain_knowledge_inject._turn.textfold import fold

__all__ = ["LANGUAGES", "canonical", "digit_strings", "number_values", "word_numbers_text"]

LANGUAGES = ("en", "de", "fr", "es")
"""Languages whose number words are parsed."""

# Words that are number words in a language but also ordinary English words;
# they are read as numbers only next to another number word of that language.
_FALSE_FRIENDS = {
    "de": frozenset({"elf"}),
    "fr": frozenset({"cent", "sept", "mille", "neuf"}),
    "es": frozenset({"once", "mil", "cien"}),
}
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SPACED_THOUSANDS = re.compile(r"\b\d{1,3}(?: \d{3})+\b(?![.,]\d)")
_AFTER = re.compile(
    r"\s*(?:(?P<pct>%|percent\b|per\s*cent\b|pour\s*cent\b|por\s*ciento\b|prozent\b|pct\b"
    r"|p(?:e|ou|o)r\s*100\b)"
    r"|(?P<exp>(?:e|\s*[x\u00d7*]\s*10\s*(?:\^|\*\*)\s*)(?P<power>[+-]?\d{1,3})\b)"
    r"|(?P<scale>[a-z]+\.?|1000000000|1000000|1000|100)\b)"
)
_SCALES = {
    "hundred": 100, "hundert": 100, "cent": 100, "cien": 100, "cientos": 100, "100": 100,
    "k": 1000, "thousand": 1000, "thousands": 1000, "tausend": 1000, "tsd": 1000,
    "tsd.": 1000, "mille": 1000, "mil": 1000, "1000": 1000,
    "m": 10**6, "mn": 10**6, "mm": 10**6, "mio": 10**6, "mio.": 10**6, "million": 10**6,
    "millions": 10**6, "millionen": 10**6, "millones": 10**6, "millon": 10**6,
    "1000000": 10**6,
    "b": 10**9, "bn": 10**9, "billion": 10**9, "billions": 10**9, "milliard": 10**9,
    "milliards": 10**9, "milliarden": 10**9, "mrd": 10**9, "mrd.": 10**9,
    "1000000000": 10**9,
}  # fmt: skip
_HEX_INT = re.compile(r"\b0x([0-9a-f]{1,16})\b")
_ROMAN = re.compile(r"\b[MDCLXVI]{2,}\b")
_ROMAN_VALID = re.compile(r"M{0,4}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"M": 1000, "D": 500, "C": 100, "L": 50, "X": 10, "V": 5, "I": 1}
_FRACTION = re.compile(r"\b(\d{1,6})\s*/\s*(\d{1,6})\b")
_THOUSANDS = re.compile(
    r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d{1,3}(?:\.\d{3})+(?:,\d+)?|\d{1,3}(?: \d{3})+"
)
_TOKEN = re.compile(r"\d+|[^\W\d_]+")
# letters that stand for digits inside a number ("48l7", "4O17")
_LEET_NUMBER = re.compile(r"\b(?=[0-9OoIlSZB]*\d)(?=[0-9OoIlSZB]*[OoIlSZB])[0-9OoIlSZB]{3,}\b")
_LEET_DIGITS = str.maketrans("OoIlSZB", "0011528")
_WORD = re.compile(r"[^\W\d_]+")


def canonical(value: Decimal) -> str:
    """Canonical string of a value: no exponent, no trailing zeros ("8.50" -> "8.5")."""
    text = format(value.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


@lru_cache(maxsize=4096)
def _is_number_word(word: str, lang: str) -> bool:
    return alpha2digit(word, lang) != word


def _mask_false_friends(text: str, lang: str) -> str:
    friends = _FALSE_FRIENDS.get(lang)
    if not friends:
        return text
    words = list(_WORD.finditer(text))
    pieces, last = [], 0
    for i, match in enumerate(words):
        if match.group() not in friends:
            continue
        neighbours = [words[j].group() for j in (i - 2, i - 1, i + 1, i + 2) if 0 <= j < len(words)]
        if any(_is_number_word(word, lang) for word in neighbours):
            continue
        pieces.append(text[last : match.start()])
        pieces.append("_")
        last = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


@lru_cache(maxsize=256)
def word_numbers_text(text: str) -> tuple[str, ...]:
    """``text`` folded, then with the number words of each language turned into digits.

    Returns the folded text, the folded text with English number words
    converted, then one converted text per other language and marks setting
    (number words are parsed with their accents, "fünfzig", and without, for
    text whose accents were stripped or spoofed) that differs from those.
    """
    plain = fold(text)
    english = _convert(_unhyphenated(plain), "en")
    sources = dict.fromkeys((fold(text, marks=True), plain, _unhyphenated(plain)))
    others = [_convert(source, lang) for source in sources for lang in LANGUAGES]
    cased = fold(text, casefold=False)
    for rewritten in (_ROMAN.sub(_roman_digits, cased), _LEET_NUMBER.sub(_leet_digits, cased)):
        if rewritten != cased:
            others.append(fold(rewritten))
    versions = dict.fromkeys(v for v in others if v not in (plain, english))
    return (plain, english, *versions)


def _leet_digits(match: re.Match[str]) -> str:
    token = match.group()
    if sum(char.isdigit() for char in token) < 2:
        return token
    return token.translate(_LEET_DIGITS)


def _unhyphenated(text: str) -> str:
    """Hyphens between words made spaces ("four-eight-one-seven"); "twenty-five" still parses."""
    return re.sub(r"(?<=[^\W\d_])-(?=[^\W\d_])", " ", text)


def _convert(text: str, lang: str) -> str:
    try:
        return fold(alpha2digit(_mask_false_friends(text, lang), lang))
    except Exception:
        return text


def _readings(raw: str) -> list[Decimal]:
    """Every value a digit token can stand for ("7.350" is 7.35 or 7350)."""
    found: list[str] = []
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", raw):
        found.append(raw.replace(",", ""))
    if re.fullmatch(r"\d{1,3}(?:\.\d{3})+(?:,\d+)?", raw):
        found.append(raw.replace(".", "").replace(",", "."))
    separators = re.findall(r"[.,]", raw)
    if len(separators) <= 1:
        found.append(raw.replace(",", "."))
    elif not found:  # "14.03.2025", "4.8.1.7": each group, and the groups joined
        found += re.split(r"[.,]", raw)
        found.append(re.sub(r"[.,]", "", raw))
    values = []
    for text in found:
        try:
            values.append(Decimal(text))
        except InvalidOperation:
            continue
    return values


def _values_in(text: str) -> set[str]:
    values: set[Decimal] = set()
    for match in _NUMBER.finditer(text):
        readings = _readings(match.group())
        values.update(readings)
        after = _AFTER.match(text, match.end())
        if not after:
            continue
        for value in readings:
            if after.group("pct"):
                values.add(value / 100)
            elif after.group("exp"):
                power = int(after.group("power"))
                if abs(power) <= 15:
                    values.add(value.scaleb(power))
            elif after.group("scale") in _SCALES:
                values.add(value * _SCALES[after.group("scale")])
    for match in _SPACED_THOUSANDS.finditer(text):
        values.add(Decimal(match.group().replace(" ", "")))
    for match in _HEX_INT.finditer(text):
        values.add(Decimal(int(match.group(1), 16)))
    for match in _FRACTION.finditer(text):
        numerator, denominator = int(match.group(1)), int(match.group(2))
        if 0 < numerator < denominator:  # a proper fraction ("1/8"), not "24/7"
            values.add((Decimal(numerator) / Decimal(denominator)).quantize(Decimal("1e-6")))
    return {canonical(value) for value in values}


def _roman_value(numeral: str) -> int | None:
    if not _ROMAN_VALID.fullmatch(numeral):
        return None
    total = 0
    for i, char in enumerate(numeral):
        value = _ROMAN_VALUES[char]
        following = _ROMAN_VALUES[numeral[i + 1]] if i + 1 < len(numeral) else 0
        total += -value if value < following else value
    return total


def _roman_digits(match: re.Match[str]) -> str:
    value = _roman_value(match.group())
    return match.group() if value is None else str(value)


@lru_cache(maxsize=256)
def number_values(text: str, *, words: bool = True) -> frozenset[str]:
    """Every numeric value written in ``text``, in any notation (see the module docstring).

    Args:
        text: Any text.
        words: Also read number words (and Roman numerals).

    Example:
        >>> sorted(number_values("7.35 million, or 7350 thousand"))
        ['1000', '1000000', '7.35', '7350', '7350000']
        >>> "2750" in number_values("zweitausendsiebenhundertfünfzig Euro")
        True
    """
    values: set[str] = set()
    versions = word_numbers_text(text) if words else (fold(text),)
    for version in versions:
        values |= _values_in(version)
    return frozenset(values)


def digit_strings(
    text: str, *, barriers: frozenset[str] = frozenset(), words: bool = True
) -> tuple[set[str], str]:
    """The digit strings ``text`` spells: tight groups, and all its digits in one string.

    Args:
        text: Any text (folded and number words converted here).
        barriers: Digit tokens that are not joined to their neighbours and are
            left out (the numbers of the user's question).
        words: Also read number words ("four eight one seven").

    Returns:
        ``(groups, loose)``: the tight groups of every version of the text, and
        the digits of the folded text with English number words converted.

    Example:
        >>> digit_strings("code 4 8-1.7, or a3b1c5")[0] >= {"4817", "315"}
        True
    """
    versions = word_numbers_text(text) if words else (fold(text), fold(text))
    groups: set[str] = set()
    for version in versions:
        current = ""
        for token in _TOKEN.findall(version):
            if token.isdigit() and token not in barriers:
                current += token
            elif token.isdigit() or len(token) > 1:
                if current:
                    groups.add(current)
                current = ""
        if current:
            groups.add(current)
    loose = "".join(t for t in re.findall(r"\d+", versions[1]) if t not in barriers)
    return groups, loose


def chunk_digit_runs(text: str) -> set[str]:
    """Digit runs of a chunk, separators inside a number removed, with their significant digits.

    Example:
        >>> sorted(chunk_digit_runs("paid 7,350,000 on 2025-03-14"))
        ['03', '14', '2025', '20250314', '735', '7350000']
        >>> sorted(chunk_digit_runs("1 500 seats, 4.2 and 95%"))
        ['1500', '2', '4', '42', '95']
    """
    folded = fold(text)
    runs: set[str] = set()
    for match in re.finditer(r"\d{1,3}(?: \d{3})+(?![\d.,])|\d+(?:[.,'/:_-]\d+)*", folded):
        raw = match.group()
        joined = re.sub(r"\D", "", raw)
        runs.add(joined)
        if not _THOUSANDS.fullmatch(raw):
            runs.update(re.findall(r"\d+", raw))
        significant = joined.strip("0")
        if len(significant) >= 3:
            runs.add(significant)
    return {run for run in runs if run.strip("0")}
