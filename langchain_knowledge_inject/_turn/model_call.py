"""Calling a secondary model with a time limit (the safe summary, the query condenser).

A sync caller cannot interrupt a blocking model call, so the call runs in a daemon
thread (in a copy of the caller's context) and is abandoned when it takes too long.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any


def call_with_timeout(
    call: Any,
    timeout: float | None,
    *,
    thread_name: str = "kinject-safe-summary",
    waiting_for: str = "the summarizer",
) -> Any:
    """Run ``call`` in a daemon thread (in a copy of the caller's context) and wait for it.

    Shared by every secondary-model call (the safe summary, the query condenser).

    Raises:
        TimeoutError: No result within ``timeout`` seconds; the thread is abandoned.
    """
    if timeout is None:
        return call()
    outcome: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def work() -> None:
        try:
            outcome["value"] = context.run(call)
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name=thread_name, daemon=True).start()
    if not done.wait(timeout):
        msg = f"{waiting_for} gave no answer within {timeout} s"
        raise TimeoutError(msg)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
