"""Intra-op thread count of the default embedding model (torch and ONNX Runtime).

Encoding one query is a few milliseconds of matrix work split across torch's
intra-op threads. When those threads outnumber the cores that are actually free,
every split waits for its slowest thread, and a thread that the scheduler
pre-empted makes the whole call wait a time slice: on a loaded 2-core machine,
2 torch threads took about 1 s per query against 69 ms with 1 thread.

The policy, applied when the default model is loaded:

* ``KINJECT_TORCH_THREADS=N`` (a positive integer) pins the count; it wins.
* Otherwise a count the user chose is kept: ``OMP_NUM_THREADS`` or
  ``MKL_NUM_THREADS`` in the environment, or ``torch.set_num_threads(n)`` called
  before the model loads (any count other than torch's own default).
* Otherwise the package picks: **1 thread when the process may use at most 2
  cores**, else the number of usable cores (CPU affinity and a cgroup CPU quota
  both count), never more than torch's default.

ONNX Runtime sessions of the default model get the same intra-op count, one
inter-op thread, and sleeping (not spinning) idle threads.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

from langchain_knowledge_inject.errors import ConfigurationError

THREADS_ENV = "KINJECT_TORCH_THREADS"
"""Environment variable that pins the default model's intra-op thread count."""

SINGLE_THREAD_MAX_CORES = 2
"""At or below this many usable cores the default is one intra-op thread."""

logger = logging.getLogger(__name__)

_USER_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
_applied: int | None = None  # the count this module last set, so it is not taken for the user's


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity, capped by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def _cgroup_quota() -> float | None:
    """CPUs allowed by a cgroup v2 ``cpu.max`` (or v1 quota/period); None when unlimited."""
    try:
        fields = Path("/sys/fs/cgroup/cpu.max").read_text(encoding="ascii").split()
        if len(fields) == 2 and fields[0] != "max":
            return int(fields[0]) / int(fields[1])
    except (OSError, ValueError, ZeroDivisionError):
        pass
    try:
        base = Path("/sys/fs/cgroup/cpu")
        quota = int((base / "cpu.cfs_quota_us").read_text(encoding="ascii"))
        period = int((base / "cpu.cfs_period_us").read_text(encoding="ascii"))
        if quota > 0 and period > 0:
            return quota / period
    except (OSError, ValueError):
        pass
    return None


def default_thread_count(cores: int | None = None) -> int:
    """The package's own choice: 1 thread up to 2 usable cores, else one per usable core."""
    cores = usable_cores() if cores is None else max(1, cores)
    return 1 if cores <= SINGLE_THREAD_MAX_CORES else cores


def pinned_threads() -> int | None:
    """The count ``KINJECT_TORCH_THREADS`` pins, or None when it is not set.

    Raises:
        ConfigurationError: The variable is set to something other than a positive integer.
    """
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"{THREADS_ENV} must be a positive integer (a thread count); got {raw!r}"
        raise ConfigurationError(msg, option=THREADS_ENV, value=raw)
    return value


def torch_default_threads() -> int:
    """The intra-op count torch starts with when nobody set one: its physical cores.

    Read from ``/proc/cpuinfo`` (distinct physical id / core id pairs), as torch's
    cpuinfo does; ``os.cpu_count()`` where that is not available.
    """
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return os.cpu_count() or 1
    cores: set[tuple[str, str]] = set()
    package = core = ""
    for line in [*text.splitlines(), ""]:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            package = value.strip()
        elif key == "core id":
            core = value.strip()
        elif not key:  # end of one processor's block
            if core:
                cores.add((package, core))
            package = core = ""
    return len(cores) or os.cpu_count() or 1


def user_thread_setting(current: int) -> str | None:
    """How the user chose torch's current thread count, or None when nobody did.

    Args:
        current: ``torch.get_num_threads()`` now.
    """
    for name in _USER_ENV:
        if os.environ.get(name, "").strip():
            return f"{name}={os.environ[name].strip()}"
    if current not in (torch_default_threads(), _applied):
        return f"torch.set_num_threads({current})"
    return None


def embedding_threads() -> int:
    """Intra-op threads for the default model: the pinned count, else the package's default.

    This is the count a fresh process gets; :func:`configure_torch_threads`
    keeps a count the user set instead.
    """
    pinned = pinned_threads()
    return pinned if pinned is not None else default_thread_count()


def configure_torch_threads(threads: int | None = None) -> int:
    """Set torch's intra-op thread count by the policy above, and return the count in use.

    Args:
        threads: Force this count (a caller's explicit choice, e.g. a benchmark).
            None applies the policy: ``KINJECT_TORCH_THREADS``, else the user's
            own setting is kept, else 1 thread up to 2 usable cores.

    Returns:
        ``torch.get_num_threads()`` afterwards.

    Raises:
        ConfigurationError: ``KINJECT_TORCH_THREADS`` is not a positive integer.
    """
    import torch

    global _applied
    current = torch.get_num_threads()
    if threads is None:
        threads = pinned_threads()
    if threads is None:
        chosen_by = user_thread_setting(current)
        if chosen_by is not None:
            logger.debug("keeping %d torch threads, set by %s", current, chosen_by)
            return current
        threads = min(default_thread_count(), max(1, current))
    threads = max(1, threads)
    if current != threads:
        torch.set_num_threads(threads)
    _applied = torch.get_num_threads()
    return _applied
