"""Bounded time for every call to a Chroma server.

chromadb 1.5's ``HttpClient`` builds its ``httpx`` session with ``timeout=None``
and ``chromadb.config.Settings`` has no client-side timeout (only server-side
ones), so a frozen server (``kill -STOP``: the kernel still accepts the
connection, nobody answers) blocks a call for as long as it stays frozen.
``AsyncHttpClient`` has the same ``timeout=None`` session and is a second,
all-async API, so a knowledge base would need two clients (and the embedded
store has no async client at all); it is not used. Two mechanisms instead:

* :func:`apply_http_timeout` sets a timeout on the client's ``httpx`` session
  when it has none, so a thread waiting on a frozen server frees itself. It
  reaches into the client (``client._server._session``): there is no public
  setting. chromadb shares one session between the ``HttpClient`` objects of a
  process that have the same settings, so the first timeout set is theirs too.
* :class:`BoundedCalls` runs each call on the knowledge base's own pool of
  lazily started daemon threads and waits at most until the operation's deadline; past it the
  caller gets :class:`~langchain_knowledge_inject.errors.StoreTimeoutError` and
  the stuck thread stays in this pool. Another knowledge base, and the event
  loop's default executor, never lend a thread to a frozen server.

The embedded store (``PersistentClient``) has no network between the caller and
the data: its calls run inline, with no thread hop.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from typing import Any, TypeVar

from langchain_knowledge_inject.errors import ConfigurationError, StoreTimeoutError

T = TypeVar("T")

DEFAULT_TIMEOUT = 5.0
"""Seconds a call to a Chroma server may take by default (search and write)."""

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "kinject_store_deadline", default=None
)


def check_seconds(option: str, value: Any, *, zero: bool = False) -> None:
    """Check a number of seconds (``timeout``, ``sync_interval``): > 0 (or >= 0), or None.

    Raises:
        ConfigurationError: Anything else, naming what is allowed.
    """
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value >= 0 if zero else value > 0)
        or value != value
        or value == float("inf")
    ):
        bound = ">= 0" if zero else "> 0"
        msg = f"{option} must be a number of seconds {bound}, or None; got {value!r}"
        raise ConfigurationError(msg, option=option, value=value)


def apply_http_timeout(client: Any, seconds: float) -> bool:
    """Give a chromadb ``HttpClient``'s ``httpx`` session a timeout when it has none.

    Returns:
        True when a timeout was set; False for another kind of client, or a
        session that already has a timeout.
    """
    try:
        import httpx
    except ImportError:  # pragma: no cover - chromadb depends on httpx
        return False
    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):
        return False
    current = session.timeout
    if any(v is not None for v in (current.connect, current.read, current.write, current.pool)):
        return False
    session.timeout = httpx.Timeout(seconds)
    return True


class WorkerPool:
    """A bounded pool of daemon threads, started lazily.

    Unlike ``ThreadPoolExecutor`` its threads are daemons, so a thread stuck on a
    frozen server never holds up the interpreter's exit.

    Args:
        size: Most threads.
        name: Thread name prefix.
    """

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._pending = 0

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``fn(*args, **kwargs)`` on a worker; its future."""
        future: Future[T] = Future()
        context = contextvars.copy_context()
        with self._lock:
            self._pending += 1
            if self._pending > self._idle and self._threads < self._size:
                self._threads += 1
                threading.Thread(
                    target=self._work, name=f"{self._name}-{self._threads}", daemon=True
                ).start()
        self._queue.put((future, context, fn, args, kwargs))
        return future

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            future, context, fn, args, kwargs = self._queue.get()
            with self._lock:
                self._idle -= 1
                self._pending -= 1
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = context.run(fn, *args, **kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)


class BoundedCalls:
    """Runs a knowledge base's calls to a Chroma server within a deadline.

    Args:
        timeout: Seconds an operation may take; None runs calls inline, unbounded.
        kb_name: For error messages.
        size: Most calls in flight at once (threads of the pool).
    """

    def __init__(self, timeout: float | None, *, kb_name: str, size: int = 32) -> None:
        self.timeout = timeout
        self._kb_name = kb_name
        self._size = size
        self._pool: WorkerPool | None = None
        self._lock = threading.Lock()

    def _workers(self) -> WorkerPool:
        with self._lock:
            if self._pool is None:
                self._pool = WorkerPool(self._size, f"kinject-{self._kb_name}")
            return self._pool

    @contextmanager
    def operation(self) -> Iterator[float | None]:
        """One deadline for every call made inside (a search, a write batch).

        Nested operations keep the outer deadline.
        """
        if self.timeout is None or _DEADLINE.get() is not None:
            yield _DEADLINE.get()
            return
        deadline = time.monotonic() + self.timeout
        token = _DEADLINE.set(deadline)
        try:
            yield deadline
        finally:
            _DEADLINE.reset(token)

    @contextmanager
    def per_call(self) -> Iterator[None]:
        """Inside, each call gets the whole timeout (a long job made of many calls)."""
        token = _DEADLINE.set(None)
        try:
            yield
        finally:
            _DEADLINE.reset(token)

    def call(self, operation: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, or :class:`StoreTimeoutError` past the deadline.

        Args:
            operation: Name of the call, for the error (``"query"``, ``"upsert"``).
            fn: The call.
            *args: Its positional arguments.
            **kwargs: Its keyword arguments.
        """
        if self.timeout is None:
            return fn(*args, **kwargs)
        deadline = _DEADLINE.get()
        if deadline is None:
            deadline = time.monotonic() + self.timeout
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self._timed_out(operation)
        future = self._workers().submit(fn, *args, **kwargs)
        try:
            return future.result(timeout=remaining)
        except FutureTimeout:
            future.cancel()  # still queued behind stuck calls: never runs
            raise self._timed_out(operation) from None

    def _timed_out(self, operation: str) -> StoreTimeoutError:
        msg = (
            f"The Chroma server did not answer {operation!r} for knowledge base "
            f"{self._kb_name!r} within {self.timeout:g} s (the knowledge base's timeout=; "
            "raise it if the server is slow rather than stuck)"
        )
        return StoreTimeoutError(
            msg, kb_name=self._kb_name, operation=operation, seconds=float(self.timeout or 0)
        )


class BoundedCollection:
    """A Chroma collection whose data calls go through :meth:`BoundedCalls.call`."""

    _BOUNDED = frozenset({"query", "get", "upsert", "update", "delete", "count", "add", "peek"})

    def __init__(self, collection: Any, calls: BoundedCalls) -> None:
        self._collection = collection
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._collection, name)
        if name not in self._BOUNDED:
            return attr

        def bounded(*args: Any, **kwargs: Any) -> Any:
            return self._calls.call(name, attr, *args, **kwargs)

        return bounded

    @property
    def unbounded(self) -> Any:
        """The wrapped chromadb collection."""
        return self._collection
