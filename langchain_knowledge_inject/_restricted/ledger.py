"""The ledger of restricted mode: what each conversation thread was already shown.

The boundary judges a summary with what its thread released and records it under
the thread's lock (:meth:`Ledger.hold`), so parallel calls of one turn see each
other. Its limits (per process, per thread, :data:`ENTRIES` releases each,
:data:`THREADS` threads) are in docs/restricted-mode.md.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from langchain_knowledge_inject._turn.recent import Recent

if TYPE_CHECKING:
    from langchain_knowledge_inject._restricted.boundary import SafeSummary

ENTRIES = 32
"""Releases kept per thread."""
THREADS = 4096
"""Threads kept per process (least recently used dropped first)."""


class Ledger:
    """The releases of every thread in this process, each thread behind its own lock."""

    def __init__(self, *, threads: int = THREADS, entries: int = ENTRIES) -> None:
        self._threads = Recent(threads)
        self._entries = entries
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, thread: str | None) -> Iterator[deque[SafeSummary]]:
        """The thread's releases, locked until the block ends (``None``: a fresh list)."""
        if thread is None:
            yield deque(maxlen=self._entries)
            return
        with self._lock:
            entry = self._threads.get(thread, None, touch=True)
            if entry is None:
                entry = (threading.Lock(), deque(maxlen=self._entries))
                self._threads.put(thread, entry)
        lock, released = entry
        with lock:
            yield released


LEDGER = Ledger()
"""The process's ledger, used by every surface's boundary."""
