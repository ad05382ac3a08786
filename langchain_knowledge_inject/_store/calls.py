"""Bounded time for every call to a Chroma server.

chromadb's ``HttpClient`` builds its ``httpx`` session with ``timeout=None`` and
has no client-side timeout setting, so a frozen server (``kill -STOP``: the
kernel still accepts the connection, nobody answers) blocks a call for as long
as it stays frozen. Two mechanisms instead (the async client is a second API,
and the embedded store has none):

* :func:`apply_http_timeout` gives the client's ``httpx`` session a timeout when
  it has none (``client._server._session``: there is no public setting), so a
  thread waiting on a frozen server frees itself;
* :class:`BoundedCalls` runs each call on the knowledge base's own threads and
  waits at most what is left of the operation's :class:`Deadline`; past it the
  caller gets :class:`~langchain_knowledge_inject.errors.StoreTimeoutError` and the
  stuck thread stays in this pool (freed by the session timeout), never in another's.

A refused connection is a ``StoreError`` at once. The embedded store has no network
between the caller and the data: its calls run inline.
"""

from __future__ import annotations

import contextvars
import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from langchain_knowledge_inject.errors import ConfigurationError, StoreError, StoreTimeoutError

T = TypeVar("T")

DEFAULT_TIMEOUT = 5.0
"""Seconds a call to a Chroma server may take by default (search and write)."""

_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "kinject_store_deadline", default=None
)


class Deadline:
    """Seconds a search or a turn waits on the store: while calls are in flight (counted once)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self._spent, self._since, self._open = seconds, 0.0, 0.0, 0
        self._lock = threading.Lock()

    def left(self) -> float:  # seconds still to wait (<= 0: spent)
        with self._lock:
            return self.seconds - self._spent - (time.monotonic() - self._since) * bool(self._open)

    @contextmanager
    def waiting(self) -> Iterator[float]:  # one call's time, counted; it may wait what it yields
        with self._lock:
            self._since = self._since if self._open else time.monotonic()
            self._open += 1
        try:
            yield self.left()
        finally:
            with self._lock:
                self._open -= 1
                self._spent += 0.0 if self._open else time.monotonic() - self._since


@contextmanager
def within(deadline: Deadline | None) -> Iterator[Deadline | None]:
    """Make ``deadline`` the one every bounded call inside waits on (an outer one stays)."""
    token = _DEADLINE.set(deadline) if deadline and _DEADLINE.get() is None else None
    try:
        yield _DEADLINE.get()
    finally:
        if token is not None:
            _DEADLINE.reset(token)


def check_seconds(option: str, value: Any, *, zero: bool = False) -> None:
    """Check a number of seconds: > 0 (or >= 0 with ``zero``), finite, or None.

    Raises:
        ConfigurationError: Anything else, naming what is allowed.
    """
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if value is not None and not (ok and (value >= 0 if zero else value > 0)):
        bound = ">= 0" if zero else "> 0"
        msg = f"{option} must be a number of seconds {bound}, or None; got {value!r}"
        raise ConfigurationError(msg, option=option, value=value)


def apply_http_timeout(client: Any, seconds: float) -> bool:
    """Give a chromadb ``HttpClient``'s ``httpx`` session a timeout if it has none; True if set."""
    import httpx

    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):
        return False
    current = session.timeout
    if any(v is not None for v in (current.connect, current.read, current.write, current.pool)):
        return False
    session.timeout = httpx.Timeout(seconds)
    return True


@contextmanager
def server_errors(kb_name: str | None, operation: str) -> Iterator[None]:
    """A connection to the server refused, dropped or timed out, as this package's error."""
    try:
        yield
    except Exception as exc:
        import httpx  # only once something failed: the embedded store's commands never need it

        if not isinstance(exc, httpx.TransportError):
            raise
        msg = f"The Chroma server did not answer {operation!r} ({type(exc).__name__})"
        if isinstance(exc, httpx.TimeoutException):
            raise StoreTimeoutError(msg, kb_name=kb_name, operation=operation) from exc
        msg += ": is it running? The same call works again once it answers"
        raise StoreError(msg, kb_name=kb_name, reason="unreachable") from exc


def worker_pool(size: int, name: str) -> ThreadPoolExecutor:
    """A knowledge base's own threads for calls to its server (a frozen one holds only these)."""
    return ThreadPoolExecutor(max_workers=size, thread_name_prefix=name)


def submit(
    pool: ThreadPoolExecutor, fn: Callable[..., T], /, *args: Any, **kwargs: Any
) -> Future[T]:
    """``pool.submit`` in the caller's context (its deadline and ``raw_access`` go along)."""
    return pool.submit(contextvars.copy_context().run, fn, *args, **kwargs)


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
        self._pool = worker_pool(size, f"kinject-{kb_name}")

    def operation(self) -> AbstractContextManager[Deadline | None]:
        """One deadline for every call made inside (a search, a write batch); nested: the outer."""
        return within(None if self.timeout is None else Deadline(self.timeout))

    def call(self, operation: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, or :class:`StoreTimeoutError` past the deadline.

        Args:
            operation: Name of the call, for the error (``"query"``, ``"upsert"``).
            fn: The call.
            *args: Its positional arguments.
            **kwargs: Its keyword arguments.
        """
        if self.timeout is None:
            with server_errors(self._kb_name, operation):
                return fn(*args, **kwargs)
        with (_DEADLINE.get() or Deadline(self.timeout)).waiting() as left:
            if left > 0:
                future = submit(self._pool, fn, *args, **kwargs)
                with server_errors(self._kb_name, operation):
                    try:
                        return future.result(timeout=left)
                    except FutureTimeout:
                        future.cancel()  # still queued behind stuck calls: never runs
        msg = (
            f"The Chroma server did not answer {operation!r} for knowledge base "
            f"{self._kb_name!r} within {self.timeout:g} s (the knowledge base's timeout=; "
            "raise it if the server is slow rather than stuck)"
        )
        raise StoreTimeoutError(
            msg, kb_name=self._kb_name, operation=operation, seconds=float(self.timeout)
        )


class BoundedCollection:
    """A Chroma collection whose data calls go through :meth:`BoundedCalls.call`."""

    _BOUNDED = frozenset({"query", "get", "upsert", "update", "delete", "count", "add", "peek"})

    def __init__(self, collection: Any, calls: BoundedCalls) -> None:
        self.unbounded = collection
        self._calls = calls

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.unbounded, name)
        if name not in self._BOUNDED:
            return attr
        return lambda *args, **kwargs: self._calls.call(name, attr, *args, **kwargs)
