"""The ledger of restricted mode: what each conversation thread was already shown.

The leak guard judges a new summary together with what its thread already
released, so that fragments cannot add up to a secret. The boundary reads the
thread's entries, judges and records under the thread's lock
(:meth:`Ledger.hold`), so parallel calls of one turn (four tool calls of one
AI message, run at once by a ``ToolNode``) see each other: the second waits for
the first to be recorded. What it records is what the main model was shown: a
summary and its guidance, and a refusal's guidance written by the summarizer
(the package's fixed refusals are not recorded).

Limits (docs/restricted-mode.md): the ledger lives in this process's memory
(a thread served by another process, or after a restart, starts afresh); a
thread is its ``thread_id``, else its first human message; each thread keeps its
last :data:`ENTRIES` releases; at most :data:`THREADS` threads are kept, the least
recently used dropped first. A call with no thread is judged alone. Values the
question does not hold are refused whatever the ledger says, so a summarizer that
remembers another thread's chunks cannot release their numbers.
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
        """The thread's releases, locked until the block ends: read, judge, append.

        ``thread=None`` yields a fresh, unrecorded list (the call is judged alone).
        """
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

    def released(self, thread: str | None) -> list[SafeSummary]:
        """A copy of what ``thread`` has released, oldest first."""
        with self.hold(thread) as released:
            return list(released)


LEDGER = Ledger()
"""The process's ledger, used by every surface's boundary."""
