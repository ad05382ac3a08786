r"""Decoding the bytes of a text or HTML file: never a silent mis-decoding.

Order: a byte-order mark; strict UTF-8; for HTML, the charset the page declares
(``<meta charset>``) when the bytes decode with it; then ``charset-normalizer``.
Short Western European text decodes without error in a dozen single-byte code
pages (``r\\xe8gle`` is "règle" in cp1252, "rčgle" in cp1250), so among the
candidates that fit about as well as the best, Windows-1252 is preferred.

The choice is not sure when the text is not UTF-8 and other encodings fit as
well and give another text, unless every non-ASCII character it holds is a
common Western European letter or sign; ``ingest`` then logs a warning, and
names every file that was not UTF-8 in its report's ``warnings``.
"""

from __future__ import annotations

import codecs
import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

_BOMS = [(codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16")]  # fmt: skip
BOMS = tuple(bom for bom, _ in _BOMS)  # a text that starts with one holds NUL bytes
_META_CHARSET = re.compile(
    rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]{1,40})""", re.IGNORECASE
)
_WESTERN = frozenset(
    "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿœšžßÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÑÒÓÔÕÖØÙÚÛÜÝŸŒŠŽ"
    "\u201c\u201d\u2018\u2019\u201a\u201e\u2013\u2014\u2026\u20ac"  # quotes, dashes, ..., euro
    "«»°§©®™·¿¡¢£¥ªº±\u00d7÷¹²³¼½¾µ¶•\u00a0"
)
_TIE = 0.05  # candidates within this mess ratio of the best fit as well
_PREFER_WITHIN = 0.1  # cp1252 is kept when it fits within this of the best


@dataclass(frozen=True)
class Decoded:
    """A text and its ``encoding``; ``confident``: no other fits as well; ``detected``: guessed."""

    text: str
    encoding: str
    confident: bool
    detected: bool


def decode_bytes(data: bytes, *, html: bool = False) -> Decoded | None:
    """Decode a file's bytes (``html``: honour a ``<meta charset>``); None when none fits.

    Example:
        >>> decode_bytes("La règle".encode("latin-1")).text
        'La règle'
        >>> decode_bytes("déjà".encode()).encoding
        'utf-8'
    """
    encoding, errors = _unguessed(data)
    with contextlib.suppress(UnicodeDecodeError):
        return Decoded(data.decode(encoding, errors), encoding, True, False)
    if html and (declared := _META_CHARSET.search(data[:4096])):
        name = declared.group(1).decode("ascii", "ignore")
        with contextlib.suppress(LookupError, UnicodeDecodeError):
            return Decoded(data.decode(name), name.lower(), True, False)
    return _detect(data)


def decode_blocks(data: bytes, size: int = 1 << 20) -> Iterator[str]:
    """``data`` decoded ``size`` bytes at a time as by a BOM or UTF-8 (else UnicodeDecodeError)."""
    encoding, errors = _unguessed(data)
    decoder = codecs.getincrementaldecoder(encoding)(errors)
    for at in range(0, len(data), size):
        yield decoder.decode(memoryview(data)[at : at + size], final=at + size >= len(data))


def _unguessed(data: bytes) -> tuple[str, str]:
    """The encoding a byte-order mark names, errors replaced; else strict UTF-8."""
    return next(((n, "replace") for bom, n in _BOMS if data.startswith(bom)), ("utf-8", "strict"))


def _detect(data: bytes) -> Decoded | None:
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data))
    if not matches:
        return None
    best = min(m.chaos for m in matches)
    western = any(
        "cp1252" in m.could_be_from_charset and m.chaos <= best + _PREFER_WITHIN for m in matches
    )
    if western:
        encoding, text = "cp1252", data.decode("cp1252", errors="replace")
    else:
        chosen = matches[0]
        encoding, text = chosen.encoding, str(chosen)
    rivals = {str(m) for m in matches if m.chaos <= best + _TIE} - {text}
    sure = not rivals or (
        encoding == "cp1252" and all(ch in _WESTERN for ch in text if ord(ch) > 127)
    )
    return Decoded(text, encoding, sure, True)
