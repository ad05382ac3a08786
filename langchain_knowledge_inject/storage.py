"""Where a knowledge base is stored: the store directory, its lock, and Chroma.

A store directory holds ``catalog.sqlite3`` (see ``catalog.py``) and, for the
embedded default, ``chroma/`` (a ``chromadb.PersistentClient``). Every tenant
partition of a knowledge base is one Chroma collection in cosine space, named
from the knowledge-base id and a hash of the tenant.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from langchain_knowledge_inject.catalog import open_connection
from langchain_knowledge_inject.errors import KnowledgeBaseOpenError


def default_store_path() -> Path:
    """The default store directory: ``$KINJECT_HOME`` or a per-user data directory."""
    env = os.environ.get("KINJECT_HOME")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("langchain-knowledge-inject", appauthor=False))


def open_store_dir(path: Path) -> Any:
    """Create the store directory if needed and open its catalog; clear errors."""
    if path.exists() and not path.is_dir():
        msg = f"The store path {path} exists and is not a directory"
        raise KnowledgeBaseOpenError(msg)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"Cannot create the store directory {path}: {exc}"
        raise KnowledgeBaseOpenError(msg) from exc
    return open_connection(path / "catalog.sqlite3")


def persistent_client(path: Path, name: str) -> Any:
    """The embedded Chroma client of a store directory."""
    import chromadb

    try:
        return chromadb.PersistentClient(path=str(path / "chroma"))
    except Exception as exc:
        msg = f"Cannot open the Chroma store in {path / 'chroma'}: {exc}"
        raise KnowledgeBaseOpenError(msg, kb_name=name) from exc


def collection_name(kb_id: str, partition: str) -> str:
    """The Chroma collection of one tenant partition of a knowledge base."""
    if not partition:
        return f"kinject-{kb_id}-shared"
    return f"kinject-{kb_id}-t{hashlib.sha256(partition.encode()).hexdigest()[:16]}"


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
    _guard = threading.Lock()

    def __init__(self, path: Path) -> None:
        self.key = str(path.resolve())
        self._released = False
        with self._guard:
            handle, count = self._held.get(self.key, (None, 0))
            if handle is None:
                handle = self._acquire(path)
            self._held[self.key] = (handle, count + 1)

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

    def release(self) -> None:
        """Release this holder's share; the lock goes when the last holder releases."""
        if self._released:
            return
        self._released = True
        with self._guard:
            handle, count = self._held.get(self.key, (None, 0))
            if count <= 1:
                self._held.pop(self.key, None)
                if handle is not None and hasattr(handle, "close"):
                    handle.close()
            else:
                self._held[self.key] = (handle, count - 1)
