"""Decoding for the leak guard: what an encoding the main model can undo hides.

:func:`decoded_views` finds, in a summary, base64 (standard and URL-safe),
base32, hex bytes, binary bytes, Morse code, URL percent-encoding and HTML
character references, decodes them, and decodes the results once more. A
decoded text counts only when it is mostly printable and holds at least three
letters or digits; the leak guard then checks it like the summary itself.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import urllib.parse
from collections.abc import Iterable

from langchain_knowledge_inject._turn.textfold import fold

__all__ = ["decoded_views"]

_BASE64 = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{8,}={0,2}")
_HEX = re.compile(
    r"(?<![0-9a-f])(?:0x)?(?:[0-9a-f]{2}){4,}(?![0-9a-f])"
    r"|(?<![0-9a-f])[0-9a-f]{2}(?:[ :-][0-9a-f]{2}){3,}(?![0-9a-f])",
    re.IGNORECASE,
)
_BASE32 = re.compile(r"(?<![A-Za-z2-7=])(?=[A-Z2-7]*[2-7=])[A-Z2-7]{8,}={0,6}(?![A-Za-z2-7])")
_BINARY = re.compile(r"(?<![01])[01]{8}(?:\s?[01]{8}){2,}(?![01])")
_MORSE = re.compile(
    r"(?:[.\u2022\u00b7\u2013\u2014_-]{1,6}(?:\s+|\s*[/|]\s*)){2,}[.\u2022\u00b7\u2013\u2014_-]{1,6}"
)
_MORSE_CODES = (
    ".- -... -.-. -.. . ..-. --. .... .. .--- -.- .-.. -- -. --- .--. --.- .-. ... - ..- "
    "...- .-- -..- -.-- --.. ----- .---- ..--- ...-- ....- ..... -.... --... ---.. ----."
)
_MORSE_CODE = dict(zip(_MORSE_CODES.split(), "abcdefghijklmnopqrstuvwxyz0123456789", strict=True))


def _printable(data: bytes) -> str | None:
    """The decoded text when it reads as text: printable, mostly letters, digits and spaces.

    Random bytes (an ordinary word read as base64 by chance) rarely pass, so a
    decoding artefact does not bring stray digits into the comparison.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or not all(char.isprintable() or char.isspace() for char in text):
        return None
    alnum = sum(char.isalnum() for char in text)
    plain = alnum + sum(char.isspace() or char in "-_.,:;'/@" for char in text)
    return text if alnum >= 3 and plain >= 0.9 * len(text) else None


def _looks_encoded(token: str) -> bool:
    """Whether a base64/base32 candidate has a sign of encoding, unlike an ordinary word."""
    if re.search(r"[\d+/=_-]", token):
        return True
    inner = token[1:]
    return sum(c.isupper() for c in inner) >= 2 and sum(c.islower() for c in inner) >= 2


def _decode_base64(token: str) -> str | None:
    raw = token.replace("-", "+").replace("_", "/").rstrip("=")
    raw += "=" * (-len(raw) % 4)
    try:
        return _printable(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError):
        return None


def _decode_hex(token: str) -> str | None:
    digits = re.sub(r"[ :-]", "", token)
    digits = digits[2:] if digits[:2].lower() == "0x" else digits
    if len(digits) % 2:
        return None
    try:
        return _printable(bytes.fromhex(digits))
    except ValueError:
        return None


def _decode_base32(token: str) -> str | None:
    raw = token.rstrip("=")
    raw += "=" * (-len(raw) % 8)
    try:
        return _printable(base64.b32decode(raw.upper()))
    except (binascii.Error, ValueError):
        return None


def _decode_binary(token: str) -> str | None:
    bits = re.sub(r"\s", "", token)
    if len(bits) % 8:
        return None
    return _printable(bytes(int(bits[i : i + 8], 2) for i in range(0, len(bits), 8)))


def _decode_morse(token: str) -> str | None:
    # a sentence's full stop may stick to the last letter
    return _morse_text(token) or (_morse_text(token[:-1]) if token.endswith(".") else None)


def _morse_text(token: str) -> str | None:
    token = re.sub("[\u2022\u00b7]", ".", token)
    token = re.sub("[\u2013\u2014_]", "-", token)
    words = []
    for word in re.split(r"\s*[/|]\s*|\s{3,}", token.strip()):
        codes = word.split()
        if not codes or any(code not in _MORSE_CODE for code in codes):
            return None
        words.append("".join(_MORSE_CODE[code] for code in codes))
    text = " ".join(words)
    return text if sum(char.isalnum() for char in text) >= 3 else None


def _decode_once(text: str) -> list[str]:
    found = []
    for unescaped in (urllib.parse.unquote(text), html.unescape(text)):
        if unescaped != text:
            found.append(unescaped)
    for match in _BASE64.finditer(text):
        decoded = _looks_encoded(match.group()) and _decode_base64(match.group())
        if decoded:
            found.append(decoded)
    for match in _HEX.finditer(text):
        decoded = _decode_hex(match.group())
        if decoded:
            found.append(decoded)
    for pattern, decode in (
        (_BASE32, _decode_base32),
        (_BINARY, _decode_binary),
        (_MORSE, _decode_morse),
    ):
        for match in pattern.finditer(text):
            decoded = decode(match.group())
            if decoded:
                found.append(decoded)
    return found


def decoded_views(texts: Iterable[str], *, depth: int = 2) -> list[str]:
    """Texts hidden in ``texts`` by base64, hex, URL or HTML encoding, ``depth`` levels deep.

    Example:
        >>> decoded_views(["key: a2VzdHJlbA== or %71%78"])
        ['key: a2VzdHJlbA== or qx', 'kestrel']
    """
    views: list[str] = []
    frontier = [fold(text, casefold=False) for text in texts]
    for _ in range(depth):
        frontier = [decoded for text in frontier for decoded in _decode_once(text)]
        frontier = [text for text in dict.fromkeys(frontier) if text not in views]
        views += frontier
    return views
