"""What recent turns left behind: a bounded map, shared by threads (oldest dropped first)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class Recent:
    """A bounded map, safe across threads: the oldest key is dropped first.

    The pipeline keeps the summaries released in a thread (so the leak guard judges
    fragments together) and the chunk ids injected in a turn (so the search tool skips
    them); the middleware each turn's injected text; the query condenser its queries.
    All belong to this process; a turn served by another process starts afresh.
    """

    def __init__(self, size: int) -> None:
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def get(self, key: str | None, default: Any, *, touch: bool = False) -> Any:
        """The value of ``key``, else ``default``; ``touch`` makes it the newest."""
        with self._lock:
            if key is None or key not in self._items:
                return default
            if touch:
                self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: str | None, value: Any) -> None:
        if key is None:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
