"""Sealed text: restricted chunks kept in Chroma encrypted, opened only inside the boundary.

An envelope is ``kinject-sealed:1:<kb id>:<key id>:<base64url(nonce, AES-256-GCM
ciphertext, tag)>``, its head the associated data; who may open: :func:`reading`; the
key: ``seal_key=``, ``KINJECT_SEAL_KEY_<NAME>`` or ``<store>/keys/<kb id>.key``.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import hashlib
import os
import re
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.documents import Document

from langchain_knowledge_inject._store.flags import raw_allowed
from langchain_knowledge_inject.errors import ConfigurationError, SealedKnowledgeError

PREFIX = "kinject-sealed:"
"""What every envelope starts with."""
ENV_PREFIX = "KINJECT_SEAL_KEY_"
"""The environment variable of a key: this and the name, upper-cased, others as ``_``."""
KEYRING: dict[tuple[str, str], Any] = {}
"""The keys this process holds (AES-GCM ciphers) by knowledge-base id and key id."""
_ENVELOPE = re.compile(r"kinject-sealed:1:([0-9a-f]{12}):([0-9a-f]{8}):([A-Za-z0-9_-]+)")
_SURFACE = contextvars.ContextVar("kinject_kept_sealed", default=False)


def sealed_by(text: object) -> tuple[str, str] | None:
    """The knowledge-base id and key id of the first envelope in ``text``; None: not sealed."""
    found = _ENVELOPE.search(text) if isinstance(text, str) and PREFIX in text else None
    return (found[1], found[2]) if found else None


def is_sealed(text: object) -> bool:
    """Whether ``text`` holds an envelope (its head and some ciphertext) anywhere."""
    return sealed_by(text) is not None


def any_sealed(documents: Sequence[Document]) -> bool:
    """Whether the text of any of ``documents`` is sealed."""
    return any(is_sealed(d.page_content) for d in documents)


def open_sealed(text: str, kb_id: str | None = None) -> str | None:
    """``text`` with each envelope (``kb_id``'s alone, if given) opened; None: one did not."""
    pieces, last = [], 0
    for found in _ENVELOPE.finditer(text) if PREFIX in text else ():
        key: Any = KEYRING.get((found[1], found[2])) if kb_id in (None, found[1]) else None
        try:  # no key (None), or InvalidTag: changed, cut
            data, head = _unb64(found[3]), found[0][: -len(found[3])].encode()
            pieces += [text[last : found.start()], key.decrypt(data[:12], data[12:], head).decode()]
        except Exception:
            return None
        last = found.end()
    return "".join(pieces) + text[last:]


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def unsealed(text: Any) -> Any:
    """``text`` opened with the keyring inside ``raw_access()`` alone; else, or unopened, as is."""
    return (open_sealed(text) or text) if raw_allowed() and is_sealed(text) else text


def opened(documents: Sequence[Document]) -> list[Document]:
    """Documents any source returned, their text :func:`unsealed`."""
    return [d.model_copy(update={"page_content": unsealed(d.page_content)})
            if is_sealed(d.page_content) else d for d in documents]  # fmt: skip


def reading() -> Literal["owner", "boundary", "surface"]:
    """Whose read a knowledge base serves: inside ``raw_access()``, :func:`kept_sealed`, or else."""
    return "boundary" if raw_allowed() else "surface" if _SURFACE.get() else "owner"


@contextlib.contextmanager
def kept_sealed() -> Iterator[None]:
    """Inside (outside ``raw_access()``), knowledge bases return their text as stored."""
    token = _SURFACE.set(True)
    try:
        yield
    finally:
        _SURFACE.reset(token)


class Sealer:
    """The key (``key_id`` None: none here) of knowledge base ``name`` (``kb_id``, ``store``)."""

    def __init__(self, name: str, kb_id: str, store: Path, given: str | bytes | None) -> None:
        self.name, self.kb_id, self.key_id = name, kb_id, None
        self.env = ENV_PREFIX + re.sub(r"[^A-Z0-9]", "_", name.upper())
        self.file = store / "keys" / f"{kb_id}.key"
        if given is not None:
            self.key_id = self._hold(given, "seal_key")
        elif os.environ.get(self.env) or self.file.is_file():
            self.key_id = self._hold(os.environ.get(self.env), self.env)

    def _hold(self, secret: str | bytes | None, option: str) -> str:
        """Hold a key (None: the key file's); its id, 8 hex digits of a hash of it."""
        if secret is None:
            secret, option = self.file.read_text("utf-8"), str(self.file)
        try:
            raw = secret if isinstance(secret, bytes) else _unb64(secret.strip())
        except ValueError:
            raw = b""
        if len(raw) != 32:
            msg = f"{option}: a key is 32 bytes, or their 43-character URL-safe base64 text"
            raise ConfigurationError(msg, option=option, value="<key>")
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key_id = hashlib.sha256(b"kinject-seal-key\x1f" + raw).hexdigest()[:8]
        KEYRING[(self.kb_id, key_id)] = AESGCM(raw)
        return key_id

    def create(self) -> str:
        """The key held, else the key file's, made if missing (``O_EXCL``, 0600: one key)."""
        if self.key_id is None:
            self.file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                fd = os.open(self.file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(secrets.token_urlsafe(32) + "\n")  # 43 characters
            self.key_id = self._hold(None, "")
        return self.key_id

    def seal(self, text: str) -> str:
        """``text`` sealed (sealed or empty text as it is); ``SealedKnowledgeError``: no key."""
        if not text or is_sealed(text):
            return text
        if self.key_id is None:
            raise self.error()
        head, nonce = f"{PREFIX}1:{self.kb_id}:{self.key_id}:", os.urandom(12)
        data = KEYRING[(self.kb_id, self.key_id)].encrypt(nonce, text.encode(), head.encode())
        return head + base64.urlsafe_b64encode(nonce + data).decode().rstrip("=")

    def open(self, text: str) -> str:
        """``text`` opened (as it is when not sealed); ``SealedKnowledgeError`` when it cannot."""
        found = open_sealed(text, self.kb_id)
        if found is None:
            raise self.error("damaged" if sealed_by(text) == (self.kb_id, self.key_id) else None)
        return found

    def error(self, reason: str | None = None) -> SealedKnowledgeError:
        """The error of a read or write without the key (None: ``no_key`` or ``wrong_key``)."""
        reason = reason or ("no_key" if self.key_id is None else "wrong_key")
        msg = f"Knowledge base {self.name!r} is sealed ({reason}): give the key that sealed it "
        msg += f"as KnowledgeBase(seal_key=...), in {self.env}, or in the key file {self.file}"
        return SealedKnowledgeError(msg, kb_name=self.name, reason=reason)
