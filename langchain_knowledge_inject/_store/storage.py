"""Where a knowledge base is stored: the store directory, its lock, and Chroma.

A store directory holds ``catalog.sqlite3`` (see ``catalog.py``) and, for the
embedded default, ``chroma/`` (a ``chromadb.PersistentClient``). Every tenant
partition of a knowledge base is one Chroma collection in cosine space, named
from the knowledge-base id and a hash of the tenant.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from langchain_knowledge_inject._store.catalog import open_connection
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    KnowledgeBaseOpenError,
    StoreError,
)

logger = logging.getLogger(__name__)

RECORD_KEYS = ("restricted", "sensitive_sources")
"""Settings that are also kept in Chroma, so that losing the catalog cannot clear them."""


def default_store_path() -> Path:
    """The default store directory: ``$KINJECT_HOME`` or a per-user data directory."""
    env = os.environ.get("KINJECT_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("langchain-knowledge-inject", appauthor=False))


def store_is_writable(path: Path) -> bool:
    """Whether the store directory (and its catalog, when there is one) can be written."""
    catalog = path / "catalog.sqlite3"
    if not os.access(path, os.W_OK):
        return False
    return not catalog.exists() or os.access(catalog, os.W_OK)


def ensure_store_dir(path: Path) -> None:
    """Create the store directory if needed; clear errors."""
    if path.exists() and not path.is_dir():
        msg = f"The store path {path} exists and is not a directory"
        raise KnowledgeBaseOpenError(msg)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"Cannot create the store directory {path}: {exc}"
        raise KnowledgeBaseOpenError(msg) from exc


def open_store_dir(path: Path, *, rebuild_damaged: bool = False) -> Any:
    """Create the store directory if needed and open its catalog; clear errors.

    Args:
        path: The store directory.
        rebuild_damaged: When the catalog is damaged (not a SQLite database, or
            malformed), keep it aside as ``catalog.sqlite3.damaged-<time>`` and
            start a new one, to be rebuilt from Chroma. Without it, a damaged
            catalog raises :class:`KnowledgeBaseOpenError`.

    A store that cannot be written (a read-only file system or directory) is
    opened read-only: see :func:`store_is_writable`.
    """
    ensure_store_dir(path)
    catalog = path / "catalog.sqlite3"
    if not store_is_writable(path):
        if not catalog.exists():
            msg = f"The store directory {path} is read-only and holds no catalog yet"
            raise KnowledgeBaseOpenError(msg)
        return _open_or_explain(catalog, read_only=True)
    try:
        return open_connection(catalog)
    except KnowledgeBaseOpenError as exc:
        reason = classify_store_error(exc.__cause__ or exc)
        if reason == "read_only":
            return _open_or_explain(catalog, read_only=True)
        if reason != "damaged":
            raise
        if not rebuild_damaged:
            msg = (
                f"The catalog {catalog} is damaged ({exc.__cause__}). The chunks are kept in "
                "Chroma: opening a knowledge base there (KnowledgeBase(name, path=...), or "
                "`kinject check --kb NAME --repair`) keeps the damaged file aside and rebuilds "
                "the catalog and keyword index from Chroma."
            )
            raise KnowledgeBaseOpenError(msg) from exc
    kept = set_aside_damaged(catalog)
    logger.warning(
        "The catalog %s was damaged; it is kept as %s and a new one is rebuilt from Chroma",
        catalog,
        kept.name,
    )
    return open_connection(catalog)


def set_aside_damaged(catalog: Path) -> Path:
    """Rename a damaged catalog (and its WAL files) aside, never deleting it; return the name."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    kept = catalog.with_name(f"{catalog.name}.damaged-{stamp}")
    count = 1
    while any(Path(f"{kept}{suffix}").exists() for suffix in ("", "-wal", "-shm")):
        count += 1
        kept = catalog.with_name(f"{catalog.name}.damaged-{stamp}-{count}")
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{catalog}{suffix}")
        if source.exists():
            source.rename(Path(f"{kept}{suffix}"))
    return kept


def _open_or_explain(catalog: Path, *, read_only: bool) -> Any:
    try:
        return open_connection(catalog, read_only=read_only)
    except KnowledgeBaseOpenError as exc:
        msg = (
            f"The catalog {catalog} is on a read-only store and cannot be read "
            f"({exc.__cause__}); restore a readable copy, or make the store writable so "
            "that it can be rebuilt from Chroma."
        )
        raise KnowledgeBaseOpenError(msg) from exc


def persistent_client(path: Path, name: str, *, read_only: bool = False) -> Any:
    """The embedded Chroma client of a store directory.

    Args:
        path: The store directory.
        name: The knowledge base (for messages).
        read_only: The store cannot be written. Chroma's embedded store writes
            even to open, so a copy of ``chroma/`` in a temporary directory is
            opened instead: searches work, and the knowledge base refuses writes.
    """
    import chromadb

    where = path / "chroma"
    try:
        if read_only and where.exists():
            import atexit
            import shutil
            import tempfile

            scratch = tempfile.mkdtemp(prefix="kinject-readonly-")
            atexit.register(shutil.rmtree, scratch, ignore_errors=True)
            snapshot = Path(scratch) / "chroma"
            shutil.copytree(where, snapshot)
            logger.warning(
                "The store %s is read-only: searching a copy of its Chroma store in %s",
                path,
                snapshot,
            )
            where = snapshot
        return chromadb.PersistentClient(path=str(where))
    except Exception as exc:
        reason = classify_store_error(exc)
        hint = {
            "disk_full": " The disk is full: free disk space, then open it again.",
            "read_only": " The store is read-only and could not be copied for reading.",
        }.get(reason or "", "")
        msg = f"Cannot open the Chroma store in {where}: {exc}.{hint}"
        raise KnowledgeBaseOpenError(msg, kb_name=name) from exc


def collection_name(kb_id: str, partition: str) -> str:
    """The Chroma collection of one tenant partition of a knowledge base."""
    if not partition:
        return f"kinject-{kb_id}-shared"
    return f"kinject-{kb_id}-t{hashlib.sha256(partition.encode()).hexdigest()[:16]}"


def record_collection_name(kb_id: str) -> str:
    """The Chroma collection that records a knowledge base's own settings (no vectors)."""
    return f"kinject-{kb_id}-kb"


def read_kb_record(client: Any, kb_id: str) -> dict[str, Any] | None:
    """The knowledge-base record kept in Chroma, or None when there is none.

    Raises:
        Exception: Chroma could not be asked (server down, ...): the caller decides.
    """
    try:
        collection = client.get_collection(record_collection_name(kb_id), embedding_function=None)
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise
    meta = dict(collection.metadata or {})
    record: dict[str, Any] = {"name": meta.get("kinject_kb", "")}
    for key in RECORD_KEYS:
        record[key] = meta.get(f"kinject_{key}") is True
    for key in ("description", "embedding_model", "routing_hint"):
        record[key] = str(meta.get(f"kinject_{key}") or "")
    for key in ("topics", "routing_keywords"):
        try:
            record[key] = list(json.loads(meta.get(f"kinject_{key}") or "[]"))
        except (TypeError, ValueError):
            record[key] = []
    return record


def write_kb_record(client: Any, kb_id: str, name: str, row: Mapping[str, Any]) -> None:
    """Write (replace) the knowledge-base record kept in Chroma from a catalog row."""
    settings = row.get("settings") or {}
    metadata: dict[str, Any] = {
        "kinject_kb": name,
        "kinject_kb_id": kb_id,
        "kinject_description": str(row.get("description") or ""),
        "kinject_embedding_model": str(row.get("embedding_model") or ""),
        "kinject_topics": json.dumps(list(row.get("topics") or [])),
        "kinject_routing_hint": str(settings.get("routing_hint") or ""),
        "kinject_routing_keywords": json.dumps(list(settings.get("routing_keywords") or [])),
    }
    for key in RECORD_KEYS:
        metadata[f"kinject_{key}"] = bool(settings.get(key, False))
    collection = client.get_or_create_collection(
        record_collection_name(kb_id), metadata=metadata, embedding_function=None
    )
    if dict(collection.metadata or {}) != metadata:
        collection.modify(metadata=metadata)


def is_not_found(exc: BaseException) -> bool:
    """Whether a Chroma error says that a collection does not exist."""
    if type(exc).__name__ in ("NotFoundError", "InvalidCollectionException"):
        return True
    text = str(exc).lower()
    return "does not exist" in text or "not found" in text


_DISK_FULL = ("disk is full", "no space left", "database or disk is full", "disk quota")
_READ_ONLY = ("readonly database", "read-only file system", "read only", "permission denied")
_DAMAGED = ("malformed", "not a database", "file is encrypted")


def classify_store_error(exc: BaseException) -> str | None:
    """``"disk_full"``, ``"read_only"``, ``"damaged"``, or None for any other error."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        return "disk_full"
    if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return "read_only"
    text = str(exc).lower()
    if any(marker in text for marker in _DISK_FULL):
        return "disk_full"
    if any(marker in text for marker in _READ_ONLY):
        return "read_only"
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return "damaged" if any(marker in text for marker in _DAMAGED) else None
    if any(marker in text for marker in _DAMAGED):
        return "damaged"
    return None


def store_error(exc: BaseException, *, action: str, kb_name: str, path: Path) -> StoreError | None:
    """The package's own error for a disk-full, read-only or damaged store, or None.

    Args:
        exc: What the store raised.
        action: What was being done, for the message ("adding documents").
        kb_name: The knowledge base.
        path: Its store directory.
    """
    reason = classify_store_error(exc)
    if reason == "disk_full":
        msg = (
            f"The disk holding knowledge base {kb_name!r} is full ({exc}): {action} was not "
            "done, nothing half-written was kept and searches still work. Free disk space, "
            "then run the same call again; no restart is needed."
        )
    elif reason == "read_only":
        msg = (
            f"The store of knowledge base {kb_name!r} ({path}) is read-only ({exc}): {action} "
            "was refused. Searching still works; to write, make the store directory writable "
            "or open a writable copy of it."
        )
    elif reason == "damaged":
        msg = (
            f"The catalog of knowledge base {kb_name!r} ({path / 'catalog.sqlite3'}) is damaged "
            f"({exc}): {action} failed. The chunks are kept in Chroma: run "
            f"`kinject check --kb {kb_name} --repair` (or kb.check(repair=True)) to rebuild the "
            "catalog and the keyword index from Chroma."
        )
    else:
        return None
    return StoreError(msg, kb_name=kb_name, reason=reason, path=path)


def chroma_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata as Chroma stores it: scalars kept, None dropped, the rest as JSON."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if value is None:
            continue
        if isinstance(value, (str, int, float, bool)):
            out[str(key)] = value
        else:
            out[str(key)] = json.dumps(value, default=str, sort_keys=True)
    return out


WRITE_MARK = "kinject_written"
"""Chroma metadata key of a chunk's write mark (seconds since the epoch, the writer's clock).

Server mode: every chunk written carries it, and other processes catch up from it (``sync``).
"""


def write_mark() -> float:
    """The mark of a write sent now."""
    return round(time.time(), 6)


def strip_mark(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Chunk metadata without the write mark."""
    return {k: v for k, v in (metadata or {}).items() if k != WRITE_MARK}


class StoreLock:
    """An advisory lock that keeps a second process out of an embedded store directory.

    Chroma's embedded client keeps its index in memory and is not meant to be
    shared by processes: two writers could each persist an index without the
    other's vectors. So the first process to open a store directory holds an
    exclusive ``flock`` on ``<path>/.kinject.lock`` until its last knowledge base
    there is closed; another process gets a clear error instead of a corrupt
    store. Within one process the lock is shared (reference-counted).
    """

    _held: ClassVar[dict[str, tuple[Any, int]]] = {}
    _held_by = os.getpid()
    _guard = threading.Lock()

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.key = str(path.resolve())
        self._released = False
        with self._guard:
            self._forget_inherited()
            handle, count = self._held.get(self.key, (None, 0))
            if handle is None:
                handle = self._acquire_shared(path) if read_only else self._acquire(path)
            self._held[self.key] = (handle, count + 1)

    @classmethod
    def _forget_inherited(cls) -> None:
        """In a child forked from the holder, the parent's locks are not this process's.

        Their file handles are left open (closing them could not release the
        parent's ``flock`` anyway); the child must take its own lock, which the
        parent still holds, so it gets the "open in another process" error.
        """
        if cls._held_by != os.getpid():
            cls._held = {}
            cls._held_by = os.getpid()

    @staticmethod
    def _acquire(path: Path) -> Any:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: documented, not enforced
            return object()
        lock_path = path / ".kinject.lock"
        handle = lock_path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            handle.seek(0)
            owner = handle.read().strip() or "unknown"
            handle.close()
            msg = (
                f"The store {path} is open in another process (pid {owner}). The embedded "
                "Chroma store serves one process at a time: close the other process, or run a "
                "Chroma server (`chroma run --path DIR`) and pass client=chromadb.HttpClient(...)."
            )
            raise KnowledgeBaseOpenError(msg) from exc
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        return handle

    @staticmethod
    def _acquire_shared(path: Path) -> Any:
        """A read-only store: a shared lock when the lock file is there, else none."""
        try:
            import fcntl

            handle = (path / ".kinject.lock").open("r")
        except (ImportError, OSError):
            return object()
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            handle.close()
            msg = f"The store {path} is being written by another process"
            raise KnowledgeBaseOpenError(msg) from exc
        return handle

    def release(self) -> None:
        """Release this holder's share; the lock goes when the last holder releases."""
        if self._released:
            return
        self._released = True
        with self._guard:
            self._forget_inherited()
            handle, count = self._held.get(self.key, (None, 0))
            if handle is None:
                return
            if count <= 1:
                self._held.pop(self.key, None)
                if handle is not None and hasattr(handle, "close"):
                    handle.close()
            else:
                self._held[self.key] = (handle, count - 1)


MIN_FREE_ENV = "KINJECT_MIN_FREE_MB"
"""Environment variable: MiB that writes leave free on the store's disk (default 16)."""

DEFAULT_MIN_FREE_MB = 16


def min_free_bytes() -> int:
    """The free space a write must leave on the store's disk (``KINJECT_MIN_FREE_MB``).

    Raises:
        ConfigurationError: The variable is set to something other than a number >= 0.
    """
    raw = os.environ.get(MIN_FREE_ENV, "").strip()
    if not raw:
        return DEFAULT_MIN_FREE_MB << 20
    try:
        mib = float(raw)
    except ValueError:
        mib = -1.0
    if not mib >= 0:  # also catches NaN
        msg = f"{MIN_FREE_ENV} must be a number of MiB >= 0 (0 turns the check off), got {raw!r}"
        raise ConfigurationError(msg, option=MIN_FREE_ENV, value=raw)
    return int(mib * (1 << 20))


def estimated_write_bytes(texts: Sequence[str], dimensions: int) -> int:
    """A generous estimate of the disk a write of ``texts`` takes, all stores together.

    Chroma keeps each text, its metadata, its vector and the vector index; the catalog keeps
    the registry row, the keyword index and the document index. Six times the text and three
    times the vector cover all of them with room for journals.
    """
    text_bytes = sum(len(t.encode("utf-8", "replace")) for t in texts)
    return text_bytes * 6 + len(texts) * max(dimensions, 0) * 4 * 3


def free_bytes(path: Path) -> int | None:
    """Free bytes on the file system holding ``path`` (None when it cannot be read)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None
