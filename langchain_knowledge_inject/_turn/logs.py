"""The package's log lines about a turn: one INFO line per turn, and the main model's I/O.

Logger names (all under ``langchain_knowledge_inject``, which has a ``NullHandler``;
see ``docs/logging.md``):

``langchain_knowledge_inject._turn``
    One INFO line per turn on every surface (:func:`log_turn`): the surface, whether
    something was injected, the blocks, chunk ids and scores, tokens, the placement,
    how the query was made (and its length, never its text), what history trimming
    cut, restricted mode and the safe-summary decision, and the time the turn took.
``langchain_knowledge_inject.model_io``
    Opt-in (``log_model_io=True`` or ``KINJECT_LOG_LLM_REQUESTS=1``): ``LLM_REQUEST``
    and ``LLM_RESPONSE`` lines for the main model (:func:`log_model_request`,
    :func:`log_model_response`). A restricted turn logs every message as its role,
    length and a short hash only: restricted text never reaches a log.
``langchain_knowledge_inject.restriction``
    ``safe summary started`` / ``safe summary completed`` (INFO), from the safe
    summary step.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

if TYPE_CHECKING:
    from langchain_knowledge_inject._turn.manifest import InjectionManifest

TURN_LOGGER = "langchain_knowledge_inject._turn"
"""The logger of the one INFO line per turn."""
MODEL_IO_LOGGER = "langchain_knowledge_inject.model_io"
"""The logger of the main model's ``LLM_REQUEST`` / ``LLM_RESPONSE`` lines."""
LOG_LLM_REQUESTS_ENV = "KINJECT_LOG_LLM_REQUESTS"
"""Environment variable that switches main-model request/response logging on (``1``)."""

turn_logger = logging.getLogger(TURN_LOGGER)
model_io_logger = logging.getLogger(MODEL_IO_LOGGER)

_MAX_LOGGED_CHARS = 4000


def model_io_enabled(setting: bool = False) -> bool:
    """Whether main-model I/O is logged: the setting, or ``KINJECT_LOG_LLM_REQUESTS``."""
    switch = os.environ.get(LOG_LLM_REQUESTS_ENV, "").strip().lower()
    return setting or switch in {"1", "true", "yes"}


def log_turn(manifest: InjectionManifest, *, surface: str, seconds: float) -> None:
    """The one INFO line of a turn (ids, scores, tokens and time; no text of any kind).

    Example:
        >>> from langchain_knowledge_inject._turn.manifest import InjectionManifest
        >>> log_turn(InjectionManifest(), surface="injector", seconds=0.01)
    """
    if not turn_logger.isEnabledFor(logging.INFO):
        return
    history = manifest.history or {}
    turn_logger.info(
        "knowledge turn: surface=%s injected=%s blocks=%s chunks=%s scores=%s tokens=%d "
        "placement=%s query_source=%s query_chars=%d history_removed=%d restricted=%s "
        "decision=%s errors=%s ms=%.1f",
        surface,
        manifest.injected,
        ",".join(manifest.blocks) or "-",
        ",".join(manifest.chunk_ids) or "-",
        ",".join(f"{s:.3f}" for s in manifest.scores) or "-",
        manifest.tokens_used,
        manifest.placement,
        manifest.query_source or "-",
        len(manifest.query or ""),
        int(history.get("messages_removed", 0)),
        manifest.restricted,
        manifest.summary_decision or "-",
        ",".join(e.get("error", "") for e in manifest.errors) or "-",
        seconds * 1000.0,
    )


def _fingerprint(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:12]
    return f"{len(text)} chars, sha256 {digest}"


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, default=str)


def _describe(message: BaseMessage, *, restricted: bool) -> str:
    text = _text(message)
    calls = getattr(message, "tool_calls", None) or []
    names = ",".join(str(c.get("name", "")) for c in calls)
    suffix = f" tool_calls=[{names}]" if names else ""
    if restricted:
        return f"{message.type}: <{_fingerprint(text)}>{suffix}"
    if len(text) > _MAX_LOGGED_CHARS:
        text = text[:_MAX_LOGGED_CHARS] + f" ... <{len(text)} chars in all>"
    return f"{message.type}: {text}{suffix}"


def log_model_request(
    messages: Sequence[BaseMessage], *, surface: str, restricted: bool, enabled: bool
) -> None:
    """``LLM_REQUEST``: the messages sent to the main model (restricted: lengths and hashes)."""
    if not (enabled and model_io_logger.isEnabledFor(logging.INFO)):
        return
    body = "\n".join(_describe(m, restricted=restricted) for m in messages)
    model_io_logger.info(
        "LLM_REQUEST surface=%s restricted=%s messages=%d\n%s",
        surface,
        restricted,
        len(messages),
        body,
    )


def log_model_response(reply: Any, *, surface: str, restricted: bool, enabled: bool) -> None:
    """``LLM_RESPONSE``: the main model's reply (restricted: length and hash)."""
    if not (enabled and model_io_logger.isEnabledFor(logging.INFO)):
        return
    if isinstance(reply, BaseMessage):
        shown = _describe(reply, restricted=restricted)
    else:
        shown = f"<{type(reply).__name__}>"
    model_io_logger.info("LLM_RESPONSE surface=%s restricted=%s\n%s", surface, restricted, shown)
