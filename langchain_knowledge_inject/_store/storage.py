"""Where a knowledge base is stored: the store directory, its lock, names, disk and errors.

A store directory holds ``chroma/`` (the embedded ``chromadb.PersistentClient``,
unless a client is given) and ``keyword/`` (the keyword cache). Every tenant
partition of a knowledge base is one Chroma collection in cosine space, named
from the knowledge-base id and a hash of the tenant.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from langchain_knowledge_inject.errors import ConfigurationError, KnowledgeBaseOpenError, StoreError

logger = logging.getLogger(__name__)

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
"""A knowledge base's name: 1-63 letters, digits, '.', '_' or '-'; a letter or digit first."""
MIN_FREE_ENV = "KINJECT_MIN_FREE_MB"
"""Environment variable: MiB that writes leave free on the store's disk (default 16)."""


def knowledge_base_id(name: str) -> str:
    """The id of the knowledge base ``name``: derived from the name, the same in every process."""
    return hashlib.sha256(f"kinject-kb\x1f{name}".encode()).hexdigest()[:12]


def collection_name(kb_id: str, partition: str) -> str:
    """The Chroma collection of one tenant partition of a knowledge base."""
    if not partition:
        return f"kinject-{kb_id}-shared"
    return f"kinject-{kb_id}-t{hashlib.sha256(partition.encode()).hexdigest()[:16]}"


def keyword_folder(root: Path, partition: str) -> Path:
    """The keyword cache's folder of one tenant partition, under ``<store>/keyword/<kb id>``."""
    return root / (hashlib.sha256(partition.encode()).hexdigest()[:16] if partition else "shared")


def default_store_path() -> Path:
    """The default store directory: ``$KINJECT_HOME`` or a per-user data directory."""
    env = os.environ.get("KINJECT_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("langchain-knowledge-inject", appauthor=False))


def store_is_writable(path: Path) -> bool:
    """Whether the store directory can be written."""
    return os.access(path, os.W_OK)


def ensure_store_dir(path: Path) -> None:
    """Create the store directory if needed; clear errors."""
    try:
        if path.exists() and not path.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "exists and is not a directory")
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"The store path {path} cannot be used: {exc.strerror or exc}"
        raise KnowledgeBaseOpenError(msg) from exc


def persistent_client(path: Path, name: str, *, read_only: bool = False) -> Any:
    """The embedded Chroma client of a store directory.

    A read-only store is opened from a copy of ``chroma/`` in a temporary
    directory (Chroma's embedded store writes even to open): searches work, and
    the knowledge base refuses writes.
    """
    import chromadb

    where = path / "chroma"
    try:
        if read_only and where.exists():
            import atexit
            import tempfile

            scratch = tempfile.mkdtemp(prefix="kinject-readonly-")
            atexit.register(shutil.rmtree, scratch, ignore_errors=True)
            shutil.copytree(where, Path(scratch) / "chroma")
            logger.warning("The store %s is read-only: searching a copy in %s", path, scratch)
            where = Path(scratch) / "chroma"
        return chromadb.PersistentClient(path=str(where))
    except Exception as exc:
        hint = {"disk_full": " Free disk space, then open it again."}.get(
            classify_store_error(exc) or "", ""
        )
        msg = f"Cannot open the Chroma store in {where}: {exc}.{hint}"
        raise KnowledgeBaseOpenError(msg, kb_name=name) from exc


def is_not_found(exc: BaseException) -> bool:
    """Whether a Chroma error says that a collection does not exist."""
    if type(exc).__name__ in ("NotFoundError", "InvalidCollectionException"):
        return True
    return any(marker in str(exc).lower() for marker in ("does not exist", "not found"))


_MARKERS = {
    "disk_full": ("disk is full", "no space left", "database or disk is full", "disk quota"),
    "read_only": ("readonly database", "read-only file system", "read only", "permission denied"),
    "damaged": ("malformed", "not a database", "file is encrypted"),
}


def classify_store_error(exc: BaseException) -> str | None:
    """``"disk_full"``, ``"read_only"``, ``"damaged"``, or None for any other error."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        return "disk_full"
    if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return "read_only"
    text = str(exc).lower()
    return next((r for r, markers in _MARKERS.items() if any(m in text for m in markers)), None)


def store_error(exc: BaseException, *, action: str, kb_name: str, path: Path) -> StoreError | None:
    """The package's own error for a disk-full, read-only or damaged store, or None.

    Args:
        exc: What the store raised.
        action: What was being done, for the message ("adding documents").
        kb_name: The knowledge base.
        path: Its store directory.
    """
    reason = classify_store_error(exc)
    if reason is None:
        return None
    detail = {
        "disk_full": f"The disk holding knowledge base {kb_name!r} is full ({exc}): {action} was "
        "not done, and searches still work. Free disk space, then run the same call again; no "
        "restart is needed.",
        "read_only": read_only_message(kb_name, path, f"{action} ({exc})"),
        "damaged": f"The Chroma store of knowledge base {kb_name!r} ({path}) is damaged ({exc}): "
        f"{action} failed. Restore the store directory from a backup.",
    }[reason]
    return StoreError(detail, kb_name=kb_name, reason=reason, path=path)


def read_only_message(kb_name: str, path: Path, action: str) -> str:
    """What a write refused on a read-only store says."""
    return (
        f"The store of knowledge base {kb_name!r} ({path}) is read-only: {action} was refused. "
        "Searching still works; to write, make the store directory writable or open a "
        "writable copy of it."
    )


def chroma_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata as Chroma stores it: scalars kept, None dropped, the rest as JSON."""
    return {
        str(k): v
        if isinstance(v, (str, int, float, bool))
        else json.dumps(v, default=str, sort_keys=True)
        for k, v in metadata.items()
        if v is not None
    }


class StoreLock:
    """An advisory lock that keeps a second process out of an embedded store directory.

    Chroma's embedded client keeps its index in memory and is not meant to be
    shared by processes: two writers could each persist an index without the
    other's vectors. So the first process to open a store directory holds an
    exclusive ``flock`` on ``<path>/.kinject.lock`` until its last knowledge base
    there is closed; another process gets a clear error. Within one process the
    lock is shared (counted); a child forked from the holder must take its own,
    which the parent still holds, so it gets the error too.
    """

    _held: ClassVar[dict[str, tuple[Any, int]]] = {}
    _held_by = os.getpid()
    _guard = threading.Lock()
    _queued: ClassVar[list[StoreLock]] = []

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.key, self._released = str(path.resolve()), False
        with self._guard:
            if StoreLock._held_by != os.getpid():  # inherited through a fork: not ours
                StoreLock._held, StoreLock._held_by, StoreLock._queued = {}, os.getpid(), []
            handle, count = self._held.get(self.key, (None, 0))
            self._held[self.key] = (handle or _flock(path, shared=read_only), count + 1)
            self._release_queued()

    def release(self, *, wait: bool = True) -> None:
        """Release this share (the last unlocks); ``wait=False``: queued when the guard is busy."""
        # A finalizer may run inside this very thread's guarded section (the garbage
        # collector runs in any allocation): then the next share taken or released does it.
        StoreLock._queued.append(self)
        if self._guard.acquire(blocking=wait):
            try:
                self._release_queued()
            finally:
                self._guard.release()

    @classmethod
    def _release_queued(cls) -> None:
        while cls._queued:
            lock = cls._queued.pop()
            if lock._released or cls._held_by != os.getpid():
                continue
            lock._released = True
            handle, count = cls._held.pop(lock.key, (None, 0))
            if count > 1:
                cls._held[lock.key] = (handle, count - 1)
            elif hasattr(handle, "close"):
                handle.close()


def _flock(path: Path, *, shared: bool) -> Any:
    """Take the store's lock file: exclusive (writing), or shared when it exists (read-only)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: documented, not enforced
        return object()
    lock_path = path / ".kinject.lock"
    if shared and not lock_path.exists():
        return object()
    handle = lock_path.open("r" if shared else "a+")
    try:
        fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
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
    if not shared:
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
    return handle


def min_free_bytes() -> int:
    """The free space a write must leave on the store's disk (``KINJECT_MIN_FREE_MB``, 16).

    Raises:
        ConfigurationError: The variable is set to something other than a number >= 0.
    """
    raw = os.environ.get(MIN_FREE_ENV, "").strip() or "16"
    try:
        mib = float(raw)
    except ValueError:
        mib = -1.0
    if not mib >= 0:  # also catches NaN
        msg = f"{MIN_FREE_ENV} must be a number of MiB >= 0 (0 turns the check off), got {raw!r}"
        raise ConfigurationError(msg, option=MIN_FREE_ENV, value=raw)
    return int(mib * (1 << 20))


def estimated_write_bytes(texts: Sequence[str], dimensions: int) -> int:
    """A generous estimate of the disk a write of ``texts`` takes (Chroma and keyword cache).

    Six times the text and three times the vector cover the text, metadata, vector,
    vector index and both keyword indexes, with room for journals.
    """
    text_bytes = sum(len(t.encode("utf-8", "replace")) for t in texts)
    return text_bytes * 6 + len(texts) * max(dimensions, 0) * 4 * 3


def free_bytes(path: Path) -> int | None:
    """Free bytes on the file system holding ``path`` (None when it cannot be read)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def ensure_room(path: Path, needed: int, *, action: str, kb_name: str) -> None:
    """Refuse a write that would leave less than the reserve free on the store's disk.

    Chroma's local store does not recover in-process from a write that fills the
    disk, so a write stops before that point with ``StoreError(reason="disk_full")``,
    having written nothing. The reserve is ``KINJECT_MIN_FREE_MB`` (0 turns it off).
    """
    reserve = min_free_bytes()
    free = free_bytes(path) if reserve else None
    if free is None or free >= needed + reserve:
        return
    msg = (
        f"The disk holding knowledge base {kb_name!r} is full: {free >> 20} MiB free, and "
        f"{action} needs about {max(needed >> 20, 1)} MiB plus a reserve of {reserve >> 20} "
        "MiB. Nothing was written and searches still work. Free disk space, then run the "
        f"same call again; no restart is needed (the reserve is {MIN_FREE_ENV})."
    )
    raise StoreError(msg, kb_name=kb_name, reason="disk_full", path=path)
