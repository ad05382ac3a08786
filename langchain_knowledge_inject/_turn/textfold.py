"""Unicode folding shared by the leak guard and marker neutralization.

Untrusted text can hide a value or a marker behind characters that look the
same, or nothing at all, to a reader: zero-width and other format characters,
combining marks, no-break and other exotic spaces, fullwidth forms, digits of
other scripts, Cyrillic or Greek letters that look Latin. Folding maps all of
these to one plain form before anything is compared:

1. NFKC (fullwidth and compatibility forms, ligatures, NBSP become plain);
2. format characters (category ``Cf``: zero-width space and joiners, word
   joiner, soft hyphen, BOM, bidi controls) are dropped;
3. every space separator (``Zs``) becomes an ASCII space;
4. decimal digits of every script become ASCII digits (``unicodedata.decimal``);
5. Cyrillic and Greek letters that look like Latin ones become those letters;
6. with ``marks=False`` (the default), combining marks are dropped after
   canonical decomposition, so "é" and "e" compare equal.

:func:`fold_with_map` keeps, for each folded character, the index of the
original character it came from, so a match found on the folded text can be
rewritten in the original one.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

__all__ = ["fold", "fold_char", "fold_with_map"]

# Cyrillic and Greek letters that look like Latin ones, and the Latin letters they mimic.
_LOOKALIKES = (
    "\u0430\u0432\u0435\u043a\u043c\u043d\u043e\u0440\u0441\u0442\u0443\u0445"
    "\u0455\u0456\u0458\u0501\u04cf\u04bb\u051b\u051d\u04af\u0410\u0412\u0415"
    "\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0423\u0405\u0406\u0408"
    "\u04ae\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1"
    "\u03a4\u03a5\u03a7\u03bf\u03bd\u03b9\u03b1\u03ba\u03c1\u03c4\u03c5\u03c7"
)
_LATIN = "abekmhopctyxsijdlhqwyABEKMHOPCTXYSIJYABEZHIKMNOPTYXoviakptux"
_CONFUSABLES = str.maketrans(_LOOKALIKES, _LATIN)
_MARK_CATEGORIES = frozenset({"Mn", "Me", "Mc"})


@lru_cache(maxsize=65536)
def fold_char(char: str, marks: bool = False) -> str:
    """Fold one character (see the module docstring); may return ``""`` or several chars."""
    if char.isascii():
        return char
    out = []
    for piece in unicodedata.normalize("NFKC", char):
        category = unicodedata.category(piece)
        if category == "Cf":
            continue
        if category == "Zs":
            out.append(" ")
            continue
        if category == "Nd":
            out.append(str(unicodedata.decimal(piece)))
            continue
        piece = piece.translate(_CONFUSABLES)
        if not marks:
            piece = "".join(
                c
                for c in unicodedata.normalize("NFD", piece)
                if unicodedata.category(c) not in _MARK_CATEGORIES
            )
        out.append(piece)
    return "".join(out)


def fold(text: str, *, marks: bool = False, casefold: bool = True) -> str:
    """Fold ``text`` for comparison.

    Args:
        text: Any text.
        marks: Keep combining marks (needed by number-word parsers, for "fünf").
        casefold: Also case-fold the result.

    Returns:
        The folded text.

    Example:
        >>> fold("\uff33\uff59\uff53\u200btem\u00a0\u0664\u0662 caf\u00e9")
        'system 42 cafe'
    """
    text = unicodedata.normalize("NFKC", text)
    if not text.isascii():
        text = "".join(fold_char(char, marks) for char in text)
        text = unicodedata.normalize("NFC", text)
    return text.casefold() if casefold else text


def fold_with_map(text: str) -> tuple[str, list[int]]:
    """Fold ``text`` character by character, keeping where each folded character came from.

    Case is kept. ``starts[k]`` is the index in ``text`` of the character that
    produced folded character ``k``; ``starts`` has one extra entry,
    ``len(text)``, so a folded span ``[a, b)`` is the original span
    ``[starts[a], starts[b])``.

    Example:
        >>> folded, starts = fold_with_map("a\u200b\uff22")
        >>> folded, starts
        ('aB', [0, 2, 3])
    """
    chars: list[str] = []
    starts: list[int] = []
    for index, char in enumerate(text):
        piece = char if char.isascii() else fold_char(char)
        if len(piece) == 1:
            chars.append(piece)
            starts.append(index)
        else:
            chars.extend(piece)
            starts.extend([index] * len(piece))
    starts.append(len(text))
    return "".join(chars), starts
