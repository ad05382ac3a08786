"""Exceptions raised by langchain-knowledge-inject.

Every exception the package raises on purpose derives from one base class, so
``except KnowledgeInjectError`` catches them all. The hierarchy::

    KnowledgeInjectError
    ├── ConfigurationError (also a ValueError)    invalid settings or arguments
    ├── KnowledgeBaseError                         a knowledge base cannot be used
    │   ├── KnowledgeBaseNotFoundError (also a LookupError)
    │   ├── KnowledgeBaseOpenError                 corrupt store, embedding model failure
    │   ├── StoreError                             disk full, read-only, damaged, unreachable
    │   └── ForkedProcessError                     used in a process forked after opening
    ├── IngestError                                a file or folder cannot be ingested
    ├── RestrictedKnowledgeError                   raw text of a restricted knowledge base
    │   │                                          read outside the package's surfaces
    │   └── SealedKnowledgeError                   no key here for its sealed text
    ├── RetrievalError                             a search failed (store down, ...)
    │   └── StoreTimeoutError (also a TimeoutError) a Chroma call exceeded the timeout
    └── MemoryWriteError                           episodic memory: recorded turns not written yet

Restricted mode never raises for a failed safe summary: it fails closed (a refusal
with reason ``summarizer_error``).

Each error keeps its context as attributes (``kb_name``, ``path``, ...), so a
caller can react without parsing the message.
"""

from __future__ import annotations

from pathlib import Path


class KnowledgeInjectError(Exception):
    """Base class of every error raised by this package."""


class ConfigurationError(KnowledgeInjectError, ValueError):
    """An option has a value that is not allowed.

    Attributes:
        option: Name of the offending option.
        value: The value that was given.
    """

    def __init__(self, message: str, *, option: str | None = None, value: object = None) -> None:
        super().__init__(message)
        self.option = option
        self.value = value


class KnowledgeBaseError(KnowledgeInjectError):
    """A knowledge base cannot be used.

    Attributes:
        kb_name: Name of the knowledge base concerned.
    """

    def __init__(self, message: str, *, kb_name: str | None = None) -> None:
        super().__init__(message)
        self.kb_name = kb_name


class KnowledgeBaseNotFoundError(KnowledgeBaseError, LookupError):
    """No knowledge base of that name exists in the store that was opened."""


class KnowledgeBaseOpenError(KnowledgeBaseError):
    """The knowledge base exists but cannot be opened (corrupt store, model failure)."""


class StoreError(KnowledgeBaseError):
    """The store could not be written or read: disk full, read-only, or a damaged file.

    The message says what was not done and the next step. Nothing half-written
    is kept: a write that fails is rolled back, and the same call can be run
    again once the cause is gone (no restart needed).

    Attributes:
        kb_name: Name of the knowledge base concerned.
        reason: ``"disk_full"``, ``"read_only"``, ``"damaged"``, ``"unreachable"`` or ``"io"``.
        path: The store directory concerned, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        kb_name: str | None = None,
        reason: str = "io",
        path: str | Path | None = None,
    ) -> None:
        super().__init__(message, kb_name=kb_name)
        self.reason = reason
        self.path = Path(path) if path is not None else None


class IngestError(KnowledgeInjectError):
    """A file or folder cannot be ingested.

    Attributes:
        path: The file or folder concerned.
    """

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        super().__init__(message)
        self.path = Path(path) if path is not None else None


class RestrictedKnowledgeError(KnowledgeInjectError):
    """Raw text of a restricted knowledge base was read outside the package's surfaces.

    ``kb.as_retriever()`` and ``kb.vectorstore()`` of a restricted knowledge base
    refuse to return raw chunks: pass the knowledge base (or them) to the
    package's surfaces, which summarize restricted knowledge.

    Attributes:
        kb_name: Name of the restricted knowledge base.
    """

    def __init__(self, message: str, *, kb_name: str | None = None) -> None:
        super().__init__(message)
        self.kb_name = kb_name


class SealedKnowledgeError(RestrictedKnowledgeError):
    """A restricted knowledge base's sealed text cannot be opened or written here.

    Attributes:
        reason: ``"no_key"``, ``"wrong_key"`` or ``"damaged"`` (it fails authentication).
    """

    def __init__(self, message: str, *, kb_name: str | None = None, reason: str = "no_key") -> None:
        super().__init__(message, kb_name=kb_name)
        self.reason = reason


class RetrievalError(KnowledgeInjectError):
    """A search failed, for example because the Chroma server is unreachable.

    Attributes:
        kb_name: Name of the knowledge base that was searched.
    """

    def __init__(self, message: str, *, kb_name: str | None = None) -> None:
        super().__init__(message)
        self.kb_name = kb_name


class MemoryWriteError(KnowledgeInjectError):
    """Episodic memory: recorded episodes could not be written (they stay in its journal)."""


class ForkedProcessError(KnowledgeBaseError):
    """A knowledge base opened in one process was used in a child forked from it.

    Its SQLite connection, its worker threads and the Chroma client's
    connections do not survive ``fork``: open the knowledge base in each
    worker after the fork instead.

    Attributes:
        opened_in: The pid of the process that opened the knowledge base.
    """

    def __init__(self, message: str, *, kb_name: str | None = None, opened_in: int = 0) -> None:
        super().__init__(message, kb_name=kb_name)
        self.opened_in = opened_in


class StoreTimeoutError(RetrievalError, TimeoutError):
    """A call to the Chroma store did not finish within the knowledge base's ``timeout``.

    Raised by searches and by writes (``add_documents``, ``delete``). A write
    that timed out may or may not have reached the server: running it again
    converges.

    Attributes:
        operation: What was called (``"query"``, ``"upsert"``, ...).
        seconds: The time allowed.
    """

    def __init__(
        self,
        message: str,
        *,
        kb_name: str | None = None,
        operation: str = "",
        seconds: float = 0.0,
    ) -> None:
        super().__init__(message, kb_name=kb_name)
        self.operation = operation
        self.seconds = seconds
