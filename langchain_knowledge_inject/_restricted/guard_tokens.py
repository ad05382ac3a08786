"""Words for the leak guard: distinctive tokens and gapped verbatim runs.

- :func:`distinctive_tokens`: the tokens of a chunk that identify it on their
  own (passphrases, codes, identifiers) and a summary has no reason to repeat:
  tokens mixing letters and digits ("QX7R", "KESTREL-52"); compounds of three
  or more words none of which is a function word ("amber-walrus-pilot");
  two-word compounds rarer than ``compound_zipf`` ("tundra-marmot"); words
  rarer than ``word_zipf`` in English, German, French and Spanish ("Zephyrine"),
  plurals of known words and known acronyms ("OKRs") excepted.
  Frequencies come from ``wordfreq`` (Zipf scale: 3 is once per million words).
- :func:`copied_tokens`: which of them a summary repeats, written as is, with
  its parts spaced, hyphenated, joined or in reverse order, reversed letter by
  letter, in leetspeak ("f4lc0nr1dg3"), with its letters shifted (ROT13) or
  mirrored (Atbash), in a spelling alphabet ("Quebec X-ray"), its words in
  any order close together, or (a rare word of 7+ letters) with one typo.
- :func:`longest_gapped_run`: the longest run of consecutive chunk words that
  a summary repeats in order, allowing a few filler words between them.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from langchain_knowledge_inject._turn.textfold import fold

__all__ = [
    "Distinctive",
    "copied_tokens",
    "distinctive_tokens",
    "longest_gapped_run",
    "words",
]

_WORDS = re.compile(r"\d+|[^\W\d_]+")
_ITEM = re.compile(r"[^\W_]+(?:[-_./'][^\W_]+)*")
_PART = re.compile(r"[^\W_]+")
_PIECE = re.compile(r"[a-z0-9@$]+")
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th|er|e|eme|o|a|te|ten)")
_ATBASH = str.maketrans("abcdefghijklmnopqrstuvwxyz", "zyxwvutsrqponmlkjihgfedcba")
_LEET = str.maketrans("0134@5$7892l", "oieaasstbgzi")
_FUNCTION_WORD_ZIPF = 5.9
_PASSPHRASE_ZIPF = 4.0
_ACRONYM = re.compile(r"[A-Z]{2,5}s?")
_ACRONYM_ZIPF = 0.5
_NATO = [
    "alfa",
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliett",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "whisky",
    "xray",
    "yankee",
    "zulu",
]
_DIGIT_WORDS = {
    "en": "zero one two three four five six seven eight nine",
    "de": "null eins zwei drei vier funf sechs sieben acht neun",
    "fr": "zero un deux trois quatre cinq six sept huit neuf",
    "es": "cero uno dos tres cuatro cinco seis siete ocho nueve",
}
_SPELLING = {word: word[0] for word in _NATO} | {
    word: str(digit) for words in _DIGIT_WORDS.values() for digit, word in enumerate(words.split())
}
_MAX_WINDOW = 8


def words(text: str) -> list[str]:
    """Words and digit groups of ``text``, folded (letters and digits split apart)."""
    return _WORDS.findall(fold(text))


# --- distinctive tokens -------------------------------------------------------------------


@lru_cache(maxsize=65536)
def word_zipf(word: str) -> float:
    """How common ``word`` is: its highest Zipf frequency in English, German, French, Spanish.

    English uses wordfreq's large list; the others its small lists (words at or
    above Zipf 3), which keeps memory low.
    """
    from wordfreq import zipf_frequency

    english = zipf_frequency(word, "en")
    others = (zipf_frequency(word, lang, wordlist="small") for lang in ("de", "fr", "es"))
    return max(english, *others)


def _compound_zipf(parts: tuple[str, ...]) -> float:
    """Zipf frequency of a sequence of words, as wordfreq combines them (rarest dominates)."""
    zipfs = [word_zipf(part) for part in parts]
    if min(zipfs) <= 0:
        return 0.0
    return -math.log10(sum(10.0 ** (-z) for z in zipfs))


@dataclass(frozen=True)
class Distinctive:
    """A distinctive chunk token: its comparison key and why it counts."""

    key: str
    """Folded, separators removed ("amberwalruspilot")."""
    kind: str
    """``code`` (letters and digits), ``compound``, ``passphrase`` or ``rare word``."""
    parts: tuple[str, ...] = ()
    """Its words, folded, when it is a compound."""


def _kind(
    parts: tuple[str, ...],
    word_zipf_limit: float,
    compound_zipf_limit: float,
    *,
    hyphenated: bool = False,
) -> str:
    """Why a chunk token (its parts, case kept) is distinctive, or ``""`` when it is not.

    A compound is distinctive when its words, combined, are rarer than
    ``compound_zipf_limit``; a hyphenated one of three or more words, none of
    them a function word ("up-to-date" is not a passphrase), already below
    ``_PASSPHRASE_ZIPF`` ("amber-walrus-pilot"); above it ("blue-house-river")
    it is a ``passphrase``, copied only when written as one compound again
    (an honest summary writes "the leave policy update", with spaces).
    """
    written = "".join(parts)
    parts = tuple(part.casefold() for part in parts)
    joined = "".join(parts)
    has_digit = any(char.isdigit() for char in joined)
    has_alpha = any(char.isalpha() for char in joined)
    if has_digit and has_alpha:
        if len(joined) >= 3 and not _ORDINAL.fullmatch(joined):
            return "code"
        return ""
    if not has_alpha or not fold(joined).isascii():
        return ""  # the vocabularies are English, German, French, Spanish: no verdict elsewhere
    if len(parts) >= 2:
        combined = _compound_zipf(parts)
        if combined < compound_zipf_limit:
            return "compound"
        passphrase = hyphenated and len(parts) >= 3
        if passphrase and all(word_zipf(part) < _FUNCTION_WORD_ZIPF for part in parts):
            return "compound" if combined < _PASSPHRASE_ZIPF else "passphrase"
        return ""
    if len(joined) < 4:
        return ""
    zipf = word_zipf(joined)
    if joined.endswith("s"):  # a plural of a known word is known ("OKRs", "tranches")
        zipf = max(zipf, word_zipf(joined[:-1]))
    if _ACRONYM.fullmatch(written):  # jargon: rare only when no vocabulary knows it
        word_zipf_limit = min(word_zipf_limit, _ACRONYM_ZIPF)
    return "rare word" if zipf < word_zipf_limit else ""


def distinctive_tokens(
    chunks: Iterable[str],
    *,
    exclude: Iterable[str] = (),
    word_zipf_limit: float,
    compound_zipf_limit: float,
) -> dict[str, Distinctive]:
    """The distinctive tokens of ``chunks``, by key.

    Args:
        chunks: Raw chunk texts.
        exclude: Texts whose tokens are not secrets (the user's question).
        word_zipf_limit: A single word rarer than this is distinctive.
        compound_zipf_limit: A two-word compound rarer than this is distinctive.

    Returns:
        ``{key: Distinctive}``.
    """
    excluded = {key for text in exclude for key in _keys_of(text)}
    found: dict[str, Distinctive] = {}
    for chunk in chunks:
        for match in _ITEM.finditer(fold(chunk, marks=True, casefold=False)):
            compound = tuple(_PART.findall(match.group()))
            hyphenated = set(re.findall(r"[-_./']", match.group())) == {"-"}
            candidates = [compound] + ([(p,) for p in compound] if len(compound) > 1 else [])
            for parts in candidates:
                key = fold("".join(parts))
                if key in found or key in excluded:
                    continue
                kind = _kind(parts, word_zipf_limit, compound_zipf_limit, hyphenated=hyphenated)
                if not kind:
                    continue
                if kind == "passphrase":
                    found[key] = Distinctive(key, kind)
                    continue
                folded_parts = tuple(fold(part) for part in parts) if len(parts) > 1 else ()
                found[key] = Distinctive(key, kind, folded_parts)
                # most of a passphrase is still the passphrase, when that part is rare itself
                for size in range(2, len(parts)):
                    for start in range(len(parts) - size + 1):
                        sub_parts = parts[start : start + size]
                        sub = fold("".join(sub_parts))
                        if sub in excluded or sub in found:
                            continue
                        if _kind(sub_parts, word_zipf_limit, compound_zipf_limit):
                            found[sub] = Distinctive(sub, kind, tuple(map(fold, sub_parts)))
    return found


def _keys_of(text: str) -> set[str]:
    keys = set()
    for match in _ITEM.finditer(fold(text)):
        parts = _PART.findall(match.group())
        keys.add("".join(parts))
        keys.update(parts)
    return keys


def _shift_signature(word: str) -> tuple[int, ...]:
    return tuple((ord(b) - ord(a)) % 26 for a, b in itertools.pairwise(word))


def _piece_lists(text: str) -> list[list[str]]:
    """The pieces of ``text``, and the same pieces read three other ways.

    Spelling-alphabet and digit words read as their letter or digit ("Quebec
    X-ray seven" is "qx7"), function words dropped ("amber and walrus"), and
    runs of single characters joined ("Z.e.p.h.y.r").
    """
    pieces = _PIECE.findall(fold(text).replace("x-ray", "xray"))
    lists = [pieces]
    spelled = [_SPELLING.get(piece, piece) for piece in pieces]
    if spelled != pieces:
        lists.append(spelled)
    content = [p for p in pieces if p.isdigit() or word_zipf(p) < _FUNCTION_WORD_ZIPF]
    if len(content) != len(pieces):
        lists.append(content)
    collapsed: list[str] = []
    run = ""
    for piece in spelled:
        if len(piece) == 1:
            run += piece
            continue
        if run:
            collapsed.append(run)
            run = ""
        collapsed.append(piece)
    if run:
        collapsed.append(run)
    if collapsed != spelled:
        lists.append(collapsed)
    return lists


def output_keys(texts: Iterable[str]) -> dict[str, str]:
    """Candidate keys a summary spells, each with how it is written.

    Windows of up to 8 consecutive pieces, joined in order and in reverse
    order; each window also reversed letter by letter and read as leetspeak.
    """
    keys: dict[str, str] = {}
    for text in texts:
        for pieces in _piece_lists(text):
            _window_keys(pieces, keys)
    return keys


def _window_keys(pieces: list[str], keys: dict[str, str]) -> None:
    for start in range(len(pieces)):
        window: list[str] = []
        for piece in pieces[start : start + _MAX_WINDOW]:
            window.append(piece)
            if sum(map(len, window)) > 64:
                break
            forward = "".join(window)
            keys.setdefault(forward, "as written" if len(window) == 1 else "parts joined")
            keys.setdefault("".join(reversed(window)), "parts reordered")
            keys.setdefault(forward[::-1], "reversed")
            keys.setdefault(forward.translate(_LEET), "leetspeak")
            keys.setdefault(forward.translate(_ATBASH), "letters mirrored")


def copied_tokens(
    output_texts: Iterable[str], distinctive: dict[str, Distinctive]
) -> dict[str, str]:
    """Distinctive tokens that the output spells, with how: ``{key: how}``."""
    output_texts = list(output_texts)
    keys = output_keys(output_texts)
    written = _compound_keys(output_texts)
    copied = {
        key: how
        for key, how in keys.items()
        if key in distinctive and (distinctive[key].kind != "passphrase" or key in written)
    }
    distinctive = {k: d for k, d in distinctive.items() if d.kind != "passphrase"}
    leet = {d.translate(_LEET): d for d in distinctive if len(d) >= 5}
    for key, how in keys.items():
        original = leet.get(key.translate(_LEET))
        if original and original not in copied:
            copied[original] = "leetspeak" if how != "reversed" else how
    for text in output_texts:
        pieces = _PIECE.findall(fold(text))
        for key, token in distinctive.items():
            if key not in copied and len(token.parts) >= 2 and _parts_together(pieces, token.parts):
                copied[key] = "parts reordered"
    shifted = {_shift_signature(d): d for d in distinctive if len(d) >= 5 and d.isalpha()}
    for key in keys:
        if len(key) >= 5 and key.isalpha():
            original = shifted.get(_shift_signature(key))
            if original and original not in copied:
                copied[original] = "letters shifted"
    long_words = [d for d, t in distinctive.items() if len(d) >= 7 and t.kind == "rare word"]
    for key in keys if long_words else ():
        for original in long_words:
            if original not in copied and _one_edit_apart(key, original):
                copied[original] = "misspelled"
    return copied


def _one_edit_apart(a: str, b: str) -> bool:
    """Whether ``a`` becomes ``b`` by changing, adding or removing one character."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    if len(a) == len(b):
        return a[i + 1 :] == b[i + 1 :]
    return a[i:] == b[i + 1 :]


def _compound_keys(texts: list[str]) -> set[str]:
    """Keys of the compounds written in ``texts`` (words joined by ``-_./``), both orders."""
    keys = set()
    for text in texts:
        for match in _ITEM.finditer(fold(text)):
            parts = _PART.findall(match.group())
            if len(parts) >= 2:
                keys.add("".join(parts))
                keys.add("".join(reversed(parts)))
    return keys


def _parts_together(pieces: list[str], parts: tuple[str, ...]) -> bool:
    """Whether every part occurs within a window of ``len(parts) + 2`` pieces, in any order."""
    needed = set(parts)
    if not needed <= set(pieces):
        return False
    width = len(parts) + 2
    return any(
        needed <= set(pieces[i : i + width]) for i, piece in enumerate(pieces) if piece in needed
    )


# --- gapped verbatim runs -----------------------------------------------------------------


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
        recent = rows[-(max_gap + 1) :]
        for j in positions.get(word, ()):
            length = 1
            for row in recent:
                previous = row.get(j - 1)
                if previous is not None and previous + 1 > length:
                    length = previous + 1
            current[j] = length
            best = max(best, length)
        rows.append(current)
    return best
