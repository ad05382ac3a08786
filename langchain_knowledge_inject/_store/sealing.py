"""Sealed text: restricted chunks kept in Chroma encrypted, opened only inside the boundary.

The text of every chunk of a restricted knowledge base is stored as an envelope::

    kinject-sealed:1:<kb id>:<key id>:<base64url(nonce || AES-256-GCM ciphertext and tag)>

sealed with ``cryptography``'s AES-GCM under the knowledge base's own key (32 random
bytes, never in Chroma), a fresh 96-bit nonce per chunk, and the envelope's head (the
prefix, version, knowledge-base id and key id) as associated data: an envelope opens
only under its knowledge base and key, and any change to it fails authentication. So
whatever reads the collection another way (a plain ``langchain_chroma.Chroma``, any
wrapper, a raw ``chromadb`` client, another application on the Chroma server) reads
ciphertext, and a sealed chunk is restricted whatever its flags say
(:func:`is_sealed`).

Who opens: :func:`reading` tells the knowledge base whose call it serves. The owner's
own ``kb.search`` / ``kb.get_by_ids`` (``"owner"``) and anything inside
:func:`~.flags.raw_access` (``"boundary"``: the pipeline's restricted search, which
feeds the summarizer) get plaintext; a surface's search, a memory block and the
knowledge base's retriever and vector store run inside :func:`kept_sealed`
(``"surface"``) and get the text as stored. Outside the knowledge base, :func:`opened`
opens what any source returned, only inside ``raw_access()``, with the process
:data:`KEYRING` that every ``KnowledgeBase`` holding its key fills.

The key of knowledge base ``name`` is, in this order: ``KnowledgeBase(seal_key=...)``,
the environment variable ``KINJECT_SEAL_KEY_<NAME>`` (the name upper-cased, other
characters as ``_``), or the key file ``<store>/keys/<kb id>.key`` (mode 0600), which
``restrict()`` creates when no key was given. The text form of a key is 43 characters
of URL-safe base64 (:func:`new_key`).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.documents import Document

from langchain_knowledge_inject._store.flags import raw_allowed
from langchain_knowledge_inject.errors import ConfigurationError, SealedKnowledgeError

PREFIX = "kinject-sealed:"
"""What every envelope starts with."""
VERSION = "1"
ENV_PREFIX = "KINJECT_SEAL_KEY_"
"""Environment variable of a knowledge base's key: this, then its name (see the module doc)."""
_ENVELOPE = re.compile(r"kinject-sealed:1:([0-9a-f]{12}):([0-9a-f]{8}):([A-Za-z0-9_-]+)")
_NONCE = 12
Reading = Literal["owner", "boundary", "surface"]
_SURFACE = contextvars.ContextVar("kinject_kept_sealed", default=False)


def sealed_by(text: object) -> tuple[str, str] | None:
    """The knowledge-base id and key id of the first envelope in ``text``; None: not sealed.

    Example:
        >>> sealed_by("kinject-sealed:1:0123456789ab:89abcdef:AAAA"), sealed_by("25 days")
        (('0123456789ab', '89abcdef'), None)
    """
    found = _ENVELOPE.search(text) if isinstance(text, str) and PREFIX in text else None
    return (found[1], found[2]) if found else None


def is_sealed(text: object) -> bool:
    """Whether ``text`` holds an envelope (its head and some ciphertext) anywhere."""
    return sealed_by(text) is not None


def new_key() -> str:
    """A new random key in its text form (what a key file and ``seal_key=`` hold)."""
    return base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")


class SealKey:
    """A 256-bit AES-GCM key and its id (8 hex digits of a hash of it, stored beside the data).

    Raises:
        ConfigurationError: Not 32 bytes, or text that is not their URL-safe base64.
    """

    def __init__(self, secret: str | bytes, *, option: str = "seal_key") -> None:
        raw = secret
        if isinstance(secret, str):
            try:
                raw = base64.urlsafe_b64decode(secret.strip() + "=" * (-len(secret.strip()) % 4))
            except (binascii.Error, ValueError):
                raw = b""
        if not isinstance(raw, bytes) or len(raw) != 32:
            msg = f"{option} must be a key of 32 bytes, or its 43-character URL-safe base64 text"
            raise ConfigurationError(msg, option=option, value="<key>")
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.id = hashlib.sha256(b"kinject-seal-key\x1f" + raw).hexdigest()[:8]
        self._aead = AESGCM(raw)

    def seal(self, text: str, kb_id: str) -> str:
        """``text`` as an envelope bound to ``kb_id`` and this key."""
        head = f"{PREFIX}{VERSION}:{kb_id}:{self.id}:"
        nonce = os.urandom(_NONCE)
        sealed = nonce + self._aead.encrypt(nonce, text.encode("utf-8"), head.encode())
        return head + base64.urlsafe_b64encode(sealed).decode().rstrip("=")

    def open(self, match: re.Match[str]) -> str:
        """The plaintext of one envelope (``cryptography``'s ``InvalidTag`` when tampered)."""
        data = base64.urlsafe_b64decode(match[3] + "=" * (-len(match[3]) % 4))
        head = f"{PREFIX}{VERSION}:{match[1]}:{match[2]}:"
        return self._aead.decrypt(data[:_NONCE], data[_NONCE:], head.encode()).decode("utf-8")


class Keyring:
    """The keys this process holds, by knowledge-base id and key id."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str], SealKey] = {}
        self._lock = threading.Lock()

    def add(self, kb_id: str, key: SealKey) -> None:
        """Hold ``key`` for the knowledge base ``kb_id``."""
        with self._lock:
            self._keys[(kb_id, key.id)] = key

    def get(self, kb_id: str, key_id: str) -> SealKey | None:
        """The key of ``kb_id`` with id ``key_id``, when held."""
        return self._keys.get((kb_id, key_id))


KEYRING = Keyring()
"""The process keyring, filled by every ``KnowledgeBase`` that holds its key."""


def _opened(text: str, key_for: Callable[[str, str], SealKey | None]) -> str | None:
    """``text`` with every envelope opened; None when one cannot be (no key, changed, cut)."""
    pieces, last = [], 0
    for match in _ENVELOPE.finditer(text):
        key = key_for(match[1], match[2])
        try:
            pieces += [text[last : match.start()], key.open(match)]  # type: ignore[union-attr]
        except Exception:  # no key (None), or InvalidTag: changed, cut, another key
            return None
        last = match.end()
    return "".join(pieces) + text[last:]


def open_with_keyring(text: str) -> str | None:
    """``text`` with every envelope opened with the :data:`KEYRING`; None when one does not open."""
    return _opened(text, KEYRING.get) if is_sealed(text) else text


def unsealed(text: Any) -> Any:
    """``text`` opened with the keyring inside ``raw_access()``; else, or unopened: as it is.

    What stays sealed is refused by the boundary (reason ``key_unavailable``).
    """
    return (open_with_keyring(text) or text) if raw_allowed() and is_sealed(text) else text


def opened(documents: Sequence[Document]) -> list[Document]:
    """Documents any source returned, with :func:`unsealed` text."""
    out = []
    for doc in documents:
        text = unsealed(doc.page_content)
        out.append(
            doc if text is doc.page_content else doc.model_copy(update={"page_content": text})
        )
    return out


def reading() -> Reading:
    """Whose read a knowledge base serves now: ``"boundary"``, ``"surface"`` or ``"owner"``."""
    if raw_allowed():
        return "boundary"
    return "surface" if _SURFACE.get() else "owner"


@contextlib.contextmanager
def kept_sealed() -> Iterator[None]:
    """Inside (and outside ``raw_access()``), knowledge bases return sealed text as stored."""
    token = _SURFACE.set(True)
    try:
        yield
    finally:
        _SURFACE.reset(token)


class Sealer:
    """One knowledge base's sealing: its key (None when this process has none) and errors.

    Args:
        name: The knowledge base's name.
        kb_id: Its id (envelopes are bound to it).
        store: Its store directory (the key file is ``keys/<kb id>.key`` there).
        given: The key passed as ``seal_key=`` (text or bytes), or None.
    """

    def __init__(self, name: str, kb_id: str, store: Path, given: str | bytes | None) -> None:
        self.name, self.kb_id = name, kb_id
        self.env = ENV_PREFIX + re.sub(r"[^A-Z0-9]", "_", name.upper())
        self.file = store / "keys" / f"{kb_id}.key"
        self.key: SealKey | None = None
        if given is not None:
            self._hold(SealKey(given))
        elif os.environ.get(self.env):
            self._hold(SealKey(os.environ[self.env], option=self.env))
        elif self.file.is_file():
            self._hold(SealKey(self.file.read_text("utf-8"), option=str(self.file)))

    def _hold(self, key: SealKey) -> SealKey:
        self.key = key
        KEYRING.add(self.kb_id, key)
        return key

    def create(self) -> SealKey:
        """The key of ``restrict()``: the one held, else the key file, made now if missing.

        Made with ``O_EXCL`` and mode 0600, so processes restricting at once share one key.
        """
        if self.key is not None:
            return self.key
        self.file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(self.file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return self._hold(SealKey(self.file.read_text("utf-8"), option=str(self.file)))
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(new_key() + "\n")
            out.flush()
            os.fsync(out.fileno())
        return self._hold(SealKey(self.file.read_text("utf-8"), option=str(self.file)))

    def seal(self, text: str) -> str:
        """``text`` sealed (already sealed or empty text: as it is).

        Raises:
            SealedKnowledgeError: This process has no key to seal with.
        """
        if not text or is_sealed(text):
            return text
        if self.key is None:
            raise self.error("no_key")
        return self.key.seal(text, self.kb_id)

    def open(self, text: str) -> str:
        """``text`` with its envelopes opened (text that is not sealed: as it is).

        Raises:
            SealedKnowledgeError: No key here, another key sealed it, or it was changed.
        """
        if not is_sealed(text):
            return text
        mine = None if self.key is None else (self.kb_id, self.key.id)
        found = _opened(text, lambda *ids: self.key if ids == mine else None)
        if found is None:
            raise self.error("damaged" if sealed_by(text) == mine else None)
        return found

    def error(self, reason: str | None = None) -> SealedKnowledgeError:
        """The error of a sealed read or write this process cannot do, saying how to fix it.

        Args:
            reason: ``"no_key"``, ``"wrong_key"`` or ``"damaged"``; None: the first two,
                whichever holds.
        """
        reason = reason or ("no_key" if self.key is None else "wrong_key")
        what = {
            "no_key": "this process has no key for it",
            "wrong_key": "it was sealed with another key than the one this process holds",
            "damaged": "its sealed text fails authentication (changed or cut)",
        }[reason]
        msg = (
            f"Knowledge base {self.name!r} is restricted and its text is sealed, but {what}. "
            f"Give the key with KnowledgeBase(..., seal_key=...), the environment variable "
            f"{self.env}, or the key file {self.file} (mode 0600), as the process that "
            "restricted it has it."
        )
        return SealedKnowledgeError(msg, kb_name=self.name, reason=reason)
