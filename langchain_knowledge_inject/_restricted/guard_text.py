"""Reading text for the leak guard: characters, words, the allow-list, the chunks' names.

- :func:`character_codes`: letters, digits, spaces and :data:`PUNCTUATION` attached
  to words; anything else unless the question or the public description holds it.
- :func:`words` (NFKC- and case-folded runs of letters and digits), :func:`home_language`.
- :func:`allowed`: a word at least :data:`FLOOR` common in the text's language
  (wordfreq's large list) or in another language's small list (Zipf 3 and up), or
  a compound of such words.
- :func:`identifiers`: the chunks' codes, words off the allow-list, names and rare
  compounds, which a summary may not spell again; :func:`names` in a summary.
- :func:`longest_gapped_run`: the chunks' wording repeated, fillers allowed between.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

LANGUAGES = ("en", "de", "fr", "es", "it", "pt", "nl")
"""The languages whose words the guard reads: each has a large ``wordfreq`` list (Danish,
whose only list is small, cannot tell a rare word from an unknown one)."""
FLOOR = 1.5
"""The allow-list's floor: a word rarer than this in the text's language (Zipf scale: 1.5
is about once in 3 billion words) is refused (docs/restricted-mode.md, the measure)."""
# A single letter is a word only this common ("a", "y", "e"): every letter is frequent in
# wordfreq as a letter, and the words stand clear of it.
SINGLE_LETTER_ZIPF = 6.0
# A Roman-numeral-shaped word ("mix", "di") is a word of the text's language only when it is
# this much more common there than in the others' (numerals are common in all alike).
ROMAN_MARGIN = 0.5
NAME_ZIPF = 3.5
"""A capitalised chunk word rarer than this is a name ("Halvorsen", "Heron")."""
PHRASE_NAME_ZIPF = 5.0
"""A run of capitalised words rarer than this as a phrase is a name ("Blue Harbor Logistics")."""
PUNCTUATION = frozenset(  # the ordinary punctuation a summary may write
    ".,;:!?'\"()-/&\u2018\u2019\u201c\u201d\u201e\u00ab\u00bb\u2013\u2014\u2026\u00bf\u00a1"
)
_COMPOUND_ZIPF = 3.0
_PLAIN_ZIPF = 2.5  # a name of words this common counts only when written as a name again
_FUNCTION_ZIPF = 5.9
_INVISIBLE = frozenset({"Cc", "Cf", "Co", "Cn", "Cs"})
WORD = re.compile(r"[^\W_]+")
"""A word: a run of letters and digits."""
_ITEM = re.compile(r"[^\W_]+(?:[-_./][^\W_]+)*")
_RUN_WORD = re.compile(r"\d+|[^\W\d_]+")
_ACRONYM = re.compile(r"[A-Z]{2,5}s?")
_MARKS = re.compile(r"[^\w\s]{4,}")


@lru_cache(maxsize=65536)
def script_of(char: str) -> str:
    """The Unicode script of ``char`` ("LATIN", "CYRILLIC", "COMMON", "BRAILLE"...)."""
    from confusable_homoglyphs.categories import alias

    try:
        return str(alias(char))
    except Exception:  # a code point the data does not list
        return "UNKNOWN"


def character_codes(text: str, known: frozenset[str]) -> set[str]:
    """Why the characters of ``text`` cannot be read, as codes (empty when they can).

    ``invisible_character`` (format, control, private-use, unassigned),
    ``unreadable_script`` (a letter of a script other than Latin, a stray mark),
    ``number`` (a numeric character that is not a digit) and ``symbol``
    (anything else that is not punctuation of :data:`PUNCTUATION`; a piece of
    punctuation standing alone longer than one character; three such pieces in a
    row; four punctuation marks in a row). ``known`` (the question's and the
    public description's characters) is readable.

    Example:
        >>> sorted(character_codes("Opens at \U0001f553, code .- -...", frozenset()))
        ['symbol']
    """
    text = unicodedata.normalize("NFKC", text)
    codes = set()
    for char in set(text) - known:
        category = unicodedata.category(char)
        if char.isspace() or char in PUNCTUATION or category == "Nd":
            continue
        if category[0] == "L":
            if script_of(char) != "LATIN":
                codes.add("unreadable_script")
        elif category in _INVISIBLE:
            codes.add("invisible_character")
        else:
            codes.add({"M": "unreadable_script", "N": "number"}.get(category[0], "symbol"))
    bare = [not any(c.isalnum() for c in piece) for piece in text.split()]
    lone = [p for p, b in zip(text.split(), bare, strict=True) if b and len(p) > 1 and p != "..."]
    rows = any(all(bare[i : i + 3]) for i in range(len(bare) - 2))
    if lone or rows or _MARKS.search(text):
        codes.add("symbol")
    return codes


def items(text: str) -> list[str]:
    """Words of ``text`` with their inner separators ("x-ray", "amber_walrus"), NFKC-folded."""
    return _ITEM.findall(unicodedata.normalize("NFKC", text))


def visible(text: str) -> str:
    """``text`` NFKC-folded and case-folded, format characters (zero-width, soft hyphen) dropped."""
    text = unicodedata.normalize("NFKC", text).casefold()
    if text.isascii():
        return text
    return "".join(c for c in text if c.isascii() or unicodedata.category(c) != "Cf")


def runs_words(text: str) -> list[str]:
    """The words of ``text`` for verbatim runs: letters and digits apart ("q3" is "q", "3")."""
    return _RUN_WORD.findall(visible(text))


def words(text: str) -> list[str]:
    """The words of ``text``: runs of letters and digits (see :func:`visible` for the fold)."""
    return WORD.findall(visible(text))


@lru_cache(maxsize=131072)
def zipf(word: str, lang: str, *, small: bool = False) -> float:
    """How common ``word`` is in ``lang`` (wordfreq's Zipf scale: 3 is once per million words).

    The large lists are loaded on first use, one language at a time (about 35 MB
    each); ``small`` uses the small lists (words at or above Zipf 3) instead.
    """
    from wordfreq import zipf_frequency

    return float(zipf_frequency(word, lang, wordlist="small" if small else "large"))


def common(word: str, home: str) -> float:
    """The word's frequency: ``home``'s large list, or another language's small list."""
    others = (zipf(word, lang, small=True) for lang in LANGUAGES if lang != home)
    return max(zipf(word, home), *others)


@lru_cache(maxsize=131072)
def allowed(word: str, home: str) -> bool:
    """Whether ``word`` is on the allow-list of a text in ``home`` (see the module doc).

    A compound of up to three common words of ``home`` counts, with a linking "s"
    ("resturlaubs", "gleitzeitmodell").

    Example:
        >>> allowed("leave", "en"), allowed("zephyrine", "en"), allowed("plusstunden", "de")
        (True, False, True)
    """
    return common(word, home) >= FLOOR or _compound(word, home, 3)


@lru_cache(maxsize=65536)
def _compound(word: str, home: str, parts: int) -> bool:
    if zipf(word, home) >= _COMPOUND_ZIPF:
        return True
    for i in range(3, len(word) - 2):
        head, tail = word[:i], word[i:]
        if (
            parts > 1
            and zipf(head, home) >= _COMPOUND_ZIPF
            and any(
                _compound(rest, home, parts - 1)
                for rest in (tail, tail[1:] if tail.startswith("s") else "")
                if len(rest) >= 3
            )
        ):
            return True
    return False


def native(word: str, home: str) -> bool:
    """Whether a Roman-numeral-shaped word is a word of ``home`` (see :data:`ROMAN_MARGIN`)."""
    here = zipf(word, home)
    others = sorted(zipf(word, lang, small=True) for lang in LANGUAGES if lang != home)
    return here >= _COMPOUND_ZIPF and here - others[(len(others) - 1) // 2] >= ROMAN_MARGIN


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


def _name_runs(text: str, lang: str) -> list[list[tuple[str, bool]]]:
    """Runs of capitalised words inside a sentence ("acquire Blue Harbor Logistics").

    Each word comes with whether it is a codename in capitals ("NIGHTFALL"). German
    capitalises every noun: there, only words in capitals count.
    """
    runs: list[list[tuple[str, bool]]] = [[]]
    for match in WORD.finditer(text):
        word = match.group()
        before = text[: match.start()].rstrip(" \t")
        inside = bool(before) and before[-1] not in ".!?:;\n"
        titled = word[:1].isupper() and not word.isupper() and lang != "de"
        titled = titled and not _ACRONYM.fullmatch(word)
        shouted = word.isupper() and len(word) > 5
        if (titled or shouted) and inside and _best_zipf(word.casefold(), lang) < _FUNCTION_ZIPF:
            runs[-1].append((word.casefold(), shouted))
            continue
        runs.append([])
    return [run for run in runs if run]


def names(text: str, lang: str) -> set[str]:
    """The names ``text`` writes: capitalised words inside a sentence rarer than NAME_ZIPF."""
    runs = _name_runs(unicodedata.normalize("NFKC", text), lang)
    return {w for run in runs for w, _ in run if _best_zipf(w, lang) < NAME_ZIPF}


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
    """The chunks' identifiers: ``{words: kind}``, kind ``any``, ``name`` or ``joined``.

    Rarity is judged in the chunk's language and in English. ``any`` counts
    however it is spelled; ``name`` (a name made of allowed words, "Blue Harbor
    Logistics") counts when a summary writes it as a name again, capitalised;
    ``joined`` when a summary writes its words as one compound again.
    """
    found: dict[tuple[str, ...], str] = {}
    for chunk in chunks:
        folded = unicodedata.normalize("NFKC", chunk)
        lang = home_language(words(folded))
        for run in _name_runs(folded, lang):
            for size in range(1, len(run) + 1):
                for start in range(len(run) - size + 1):
                    named = run[start : start + size]
                    part = tuple(word for word, _ in named)
                    limit = NAME_ZIPF if size == 1 else PHRASE_NAME_ZIPF
                    if _phrase_zipf(part, lang) < limit and not set(part) <= asked:
                        plain = all(
                            _best_zipf(w, lang) >= _PLAIN_ZIPF and not shouted
                            for w, shouted in named
                        )
                        found[part] = "name" if plain else "any"
        for match in _ITEM.finditer(folded):
            written = WORD.findall(match.group())
            parts = tuple(w.casefold() for w in written)
            alpha = tuple(p for p in parts if p.isalpha())
            for compound in {parts, alpha}:  # "nightjar-copper-19" and "nightjar-copper"
                kind = _compound_kind(compound, lang)
                if kind and not set(compound) <= asked:
                    found[compound] = "any" if kind == "rare" else "joined"
            for part in parts:
                if part in asked or len(part) < 2:
                    continue
                code = not part.isalpha() and not part.isdigit()
                if code or (part.isalpha() and not allowed(part, lang)):
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
