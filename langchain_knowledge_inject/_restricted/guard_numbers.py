"""Numbers for the leak guard: every number a text writes, read as a value and as digits.

:func:`number_text` rewrites a text so that each number in it is written in
ASCII digits, whatever the script or the language it was written in:

- characters with a Unicode numeric value (``unicodedata.numeric``: CJK
  numerals "四千八百十七", Aegean or counting-rod numbers; digits of every
  script through ``unicodedata.decimal``); NFKC first turns circled,
  superscript, fullwidth and Roman-numeral characters into ASCII;
- Roman numerals in capitals ("MCMLXXXVII");
- number words of every language in :data:`NUMBER_LANGUAGES`, parsed by ``text2num``
  ("zweitausendsiebenhundertfünfzig", "trente-huit", "fire otte en syv"); a
  number word of another language that is a common word of the text's own
  language ("once", "fire", "to") is left alone.

:func:`number_values` then reads values in any notation (separators, scale
words and suffixes, scientific notation, percentages also as fractions, proper
fractions), and :func:`digit_groups` / :func:`chunk_digit_runs` give the digit
strings that a text spells and that a chunk holds. Values are canonical decimal
strings ("7350000", "8.5", "0.125").
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from text_to_num import alpha2digit

NUMBER_LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl", "da")
"""The languages whose number words the guard parses (all that ``text2num`` knows)."""

_COMMON_ZIPF = 3.0
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SPACED_THOUSANDS = re.compile(r"\b\d{1,3}(?: \d{3})+\b(?![.,]\d)")
_AFTER = re.compile(
    r"\s*(?:(?P<pct>%|percent\b|per\s*cent\b|pour\s*cent\b|por\s*ciento\b|prozent\b|pct\b"
    r"|p(?:e|ou|o)r\s*100\b|per\s*cento\b|procent\b)"
    r"|(?P<exp>(?:e|\s*[x\u00d7*]\s*10\s*(?:\^|\*\*)\s*)(?P<power>[+-]?\d{1,3})\b)"
    r"|(?P<scale>[a-z]+\.?|1000000000|1000000|1000|100)\b)"
)
_SCALE_WORDS = {
    100: "hundred hundert cent cien cientos cento honderd 100",
    1000: "k thousand thousands tausend tsd tsd. mille mil mila duizend 1000",
    10**6: "m mn mm mio mio. million millions millionen millones millon milioni milhoes "
    "miljoen 1000000",
    10**9: "b bn billion billions milliard milliards milliarden mrd mrd. miliardi miljard "
    "1000000000",
}
_SCALES = {word: scale for scale, words in _SCALE_WORDS.items() for word in words.split()}
_ROMAN = re.compile(r"\b[MDCLXVI]{2,}\b")
_ROMAN_VALID = re.compile(r"M{0,4}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"M": 1000, "D": 500, "C": 100, "L": 50, "X": 10, "V": 5, "I": 1}
_FRACTION = re.compile(r"\b(\d{1,6})\s*/\s*(\d{1,6})\b")
_THOUSANDS = re.compile(
    r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d{1,3}(?:\.\d{3})+(?:,\d+)?|\d{1,3}(?: \d{3})+"
)
_WORD = re.compile(r"[^\W\d_]+")


def canonical(value: Decimal) -> str:
    """Canonical string of a value: no exponent, no trailing zeros ("8.50" -> "8.5")."""
    text = format(value.normalize(), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


def significant(value: str) -> str:
    """The significant digits of a canonical value ("0.0125" -> "125", "7350000" -> "735")."""
    return value.replace(".", "").replace("-", "").strip("0")


def _numeric_run(values: list[float]) -> int | float:
    """The value of a run of numeric characters: positional digits, 十/百/千 and 万/億 scales."""
    total, section, digits = 0.0, 0.0, 0.0
    for value in values:
        if value < 10 and value == int(value):
            digits = digits * 10 + value
        elif value in (10, 100, 1000):
            section += (digits or 1) * value
            digits = 0
        elif value >= 10000 and value == int(value):
            total = (total + section + digits) * value
            section = digits = 0
        else:
            section += value
    result = total + section + digits
    return int(result) if result == int(result) else result


def _numeric_characters(text: str) -> str:
    """Runs of characters with a numeric value that NFKC leaves non-ASCII, as ASCII digits."""
    out: list[str] = []
    run: list[float] = []
    for char in text + " ":
        value = None
        if not char.isascii() and not unicodedata.normalize("NFKC", char).isascii():
            value = unicodedata.numeric(char, None)
        if value is not None:
            run.append(value)
            continue
        if run:
            out.append(f" {_numeric_run(run)} ")
            run = []
        out.append(char)
    return "".join(out[:-1])


def _roman(match: re.Match[str]) -> str:
    numeral = match.group()
    if not _ROMAN_VALID.fullmatch(numeral):
        return numeral
    total = 0
    for i, char in enumerate(numeral):
        value = _ROMAN_VALUES[char]
        following = _ROMAN_VALUES[numeral[i + 1]] if i + 1 < len(numeral) else 0
        total += -value if value < following else value
    return str(total)


@lru_cache(maxsize=4096)
def _is_number_word(word: str, lang: str) -> bool:
    return alpha2digit(word, lang, threshold=0) != word


_MASK = "\ue000"


def _read_words(text: str, lang: str, home: str) -> str:
    """``text`` with the number words of ``lang`` in digits.

    For a language other than ``home``, a number word that is a common word of
    ``home`` ("once", "fire", "to" in English) is read only next to another
    number word of that language.
    """
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


_NUMBER_HYPHEN = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)+")


def _unhyphenate(match: re.Match[str]) -> str:
    parts = match.group().split("-")
    numbers = all(any(_is_number_word(p, lang) for lang in NUMBER_LANGUAGES) for p in parts)
    return " ".join(parts) if numbers else match.group()


@lru_cache(maxsize=512)
def number_text(text: str, home: str = "en") -> str:
    """``text`` NFKC-folded with every number it writes in ASCII digits (see the module doc).

    Args:
        text: Any text.
        home: The language the text is written in (its number words are always read).

    Example:
        >>> number_text("vier acht eins sieben, MCMLXXXVII, \u56db\u5343\u516b\u767e\u5341\u4e03")
        '4 8 1 7, 1987,  4817 '
    """
    text = unicodedata.normalize("NFKC", _numeric_characters(text.replace(_MASK, "")))
    text = "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in text)
    text = _ROMAN.sub(_roman, text)
    text = _NUMBER_HYPHEN.sub(_unhyphenate, text)  # "four-eight-one"; "twenty five" parses
    for lang in (home, *(lang for lang in NUMBER_LANGUAGES if lang != home)):
        text = _read_words(text, lang, home)
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


def number_values(text: str) -> set[str]:
    """Every numeric value written in ``text`` (already through :func:`number_text`).

    Example:
        >>> sorted(number_values("7.35 million, or 7350 thousand"))
        ['7.35', '7350', '7350000']
    """
    text = text.casefold()
    values: set[Decimal] = set()
    for match in _NUMBER.finditer(text):
        readings = _readings(match.group())
        values.update(readings)
        after = _AFTER.match(text, match.end())
        for value in readings:
            if after is None:
                break
            if after.group("pct"):
                values.add(value / 100)
            elif after.group("exp") and abs(int(after.group("power"))) <= 15:
                values.add(value.scaleb(int(after.group("power"))))
            elif after.group("scale") in _SCALES:
                values.add(value * _SCALES[after.group("scale")])
    for match in _SPACED_THOUSANDS.finditer(text):
        values.add(Decimal(match.group().replace(" ", "")))
    for match in _FRACTION.finditer(text):
        numerator, denominator = int(match.group(1)), int(match.group(2))
        if 0 < numerator < denominator:  # a proper fraction ("1/8"), not "24/7"
            values.add((Decimal(numerator) / Decimal(denominator)).quantize(Decimal("1e-6")))
    return {canonical(value) for value in values}


def digit_groups(text: str, *, barriers: frozenset[str] = frozenset()) -> tuple[set[str], str]:
    """The digit strings ``text`` spells: tight groups, and all its digits in one string.

    A tight group is digits apart only by punctuation, spaces or single letters
    ("4 8-1.7", "73 19 04"); ``barriers`` (the question's numbers) split groups
    and are left out.

    Example:
        >>> groups, loose = digit_groups("code 4 8-1.7, then 23")
        >>> sorted(groups), loose
        (['23', '4817'], '481723')
    """
    groups: set[str] = set()
    current = ""
    for token in re.findall(r"\d+|[^\W\d_]+", text):
        if token.isdigit() and token not in barriers:
            current += token
        elif token.isdigit() or len(token) > 1:
            groups.add(current)
            current = ""
    groups.add(current)
    loose = "".join(t for t in re.findall(r"\d+", text) if t not in barriers)
    return groups - {""}, loose


def chunk_digit_runs(text: str) -> set[str]:
    """Digit runs of a chunk, separators inside a number removed, with their significant digits.

    Example:
        >>> sorted(chunk_digit_runs("paid 7,350,000 on 2025-03-14"))
        ['03', '14', '2025', '20250314', '735', '7350000']
    """
    runs: set[str] = set()
    for match in re.finditer(r"\d{1,3}(?: \d{3})+(?![\d.,])|\d+(?:[.,'/:_-]\d+)*", text):
        raw = match.group()
        joined = re.sub(r"\D", "", raw)
        runs.add(joined)
        if not _THOUSANDS.fullmatch(raw):
            runs.update(re.findall(r"\d+", raw))
        if len(joined.strip("0")) >= 3:
            runs.add(joined.strip("0"))
    return {run for run in runs if run.strip("0")}
