"""The per-turn injection manifest: what was injected, where, and at what cost.

Each turn produces one :class:`InjectionManifest`. The graph keeps it in its
state; every surface emits it as the LangChain custom event
``"knowledge_injection"`` (:data:`MANIFEST_EVENT`), so tracing tools and
``astream_events`` show it::

    async for event in injector.astream_events(messages, version="v2"):
        if event["event"] == "on_custom_event" and event["name"] == "knowledge_injection":
            print(event["data"]["chunk_ids"])
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.runnables import ensure_config

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig

logger = logging.getLogger("langchain_knowledge_inject")

MANIFEST_EVENT = "knowledge_injection"
"""Name of the custom event that carries the manifest."""


@dataclass
class InjectionManifest:
    """What one turn injected.

    Attributes:
        injected: Whether an injected message (or postfix) was added.
        chunk_ids: Ids of the chunks in the knowledge block, best first.
        scores: Their relevance scores, in the same order.
        citation_ids: Their citation ids, as shown to the model.
        sources: Their sources, in the same order.
        tokens_used: Tokens of the injected text (by the injector's counter).
        placement: ``"current_message"``, ``"dynamic_context"``, ``"postfix"`` or ``"system"``.
        query: The retrieval query, or ``None`` when there was none.
        prefix_hash: SHA-256 of the messages before the injected position (see
            :func:`hash_messages`): it stays the same from turn to turn exactly
            when a provider's prefix cache can reuse that prefix.
        retrieval_error: The error text when retrieval failed and the turn
            went on without knowledge (``on_error="degrade"``), else ``None``.
        dropped: Chunks retrieved but left out by the token budget, each as
            ``{"chunk_id", "score", "source", "reason"}``.
        restricted: Whether restricted mode was on.
        summary_decision: Restricted mode: ``"answer"`` or ``"refuse"``.
        summary_reason: Restricted mode: the machine-readable reason.
        blocks: Names of the blocks in the injected message, in order
            (``"kb_meta"``, ``"knowledge"``, ``"extra"``, ...).
        errors: Every failure the turn went on without, as
            ``{"stage": "retrieval" | "block", "error": <exception class>}`` (plus
            ``"block"``: its name); the class only, never the error's text. Empty
            when nothing failed.
        query_source: How the retrieval query was made: ``"message"`` (the current
            message), ``"heuristic"`` (follow-up terms added), ``"model"`` /
            ``"cache"`` (the query model), or ``None`` when nothing was retrieved.
        history: What history trimming cut (``TrimmedHistory.to_dict()``), or
            ``None`` when trimming is off.
        retrieval_scores: With a reranker: the chunks' retrieval scores, in the
            reranked order (``scores`` are then the reranker's); else empty.
        summary_confidence: Restricted mode: ``"low"``, ``"medium"`` or ``"high"``.
        summary_codes: Restricted mode: fixed codes of what refused a summary (a
            summarizer failure such as ``timeout``, the leak guard's checks).

    In a restricted turn ``chunk_ids`` are keyed references (never derived from the
    content alone), scores are rounded to one decimal, source names are left out when
    the knowledge base marks them sensitive, and errors carry classes only.
    """

    injected: bool = False
    chunk_ids: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    citation_ids: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    tokens_used: int = 0
    placement: str = "current_message"
    query: str | None = None
    prefix_hash: str = ""
    retrieval_error: str | None = None
    dropped: list[dict[str, Any]] = field(default_factory=list)
    restricted: bool = False
    summary_decision: str | None = None
    summary_reason: str | None = None
    blocks: list[str] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    query_source: str | None = None
    history: dict[str, Any] | None = None
    retrieval_scores: list[float] = field(default_factory=list)
    summary_confidence: str | None = None
    summary_codes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The manifest as a JSON-serializable dict.

        Example:
            >>> InjectionManifest().to_dict()["injected"]
            False
        """
        data = dict(self.__dict__)
        for name in ("chunk_ids", "scores", "citation_ids", "sources", "blocks",
                     "retrieval_scores", "summary_codes"):  # fmt: skip
            data[name] = list(data[name])
        data["dropped"] = [dict(item) for item in self.dropped]
        data["errors"] = [dict(item) for item in self.errors]
        data["history"] = dict(self.history) if self.history is not None else None
        return data


def error_record(stage: str, error: str | BaseException, **fields: str) -> dict[str, str]:
    """One entry of :attr:`InjectionManifest.errors`: the stage and the exception class.

    Args:
        stage: Where the turn failed (``"retrieval"``, ``"block"``).
        error: The exception, or its text as recorded (``"ClassName: message"``);
            only the class name is kept.
        **fields: Other short fields (for example ``block``).

    Example:
        >>> error_record("retrieval", "StoreTimeoutError: no answer within 5 s")
        {'stage': 'retrieval', 'error': 'StoreTimeoutError'}
    """
    if isinstance(error, BaseException):
        name = type(error).__name__
    else:
        name = str(error).split(":", 1)[0].strip()
        if not name.isidentifier():
            name = "Error"
    return {"stage": stage, "error": name, **fields}


def _message_key(message: BaseMessage) -> dict[str, Any]:
    key: dict[str, Any] = {"type": message.type, "content": message.content}
    if message.name:
        key["name"] = message.name
    for attr in ("tool_calls", "tool_call_id"):
        value = getattr(message, attr, None)
        if value:
            key[attr] = value
    return key


def hash_messages(messages: Sequence[BaseMessage]) -> str:
    """SHA-256 (hex) of what a provider sees of ``messages``.

    Covers each message's type, content, name, tool calls and tool call id;
    message ids and metadata are left out, as providers do not see them.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> hash_messages([HumanMessage("a", id="1")]) == hash_messages([HumanMessage("a")])
        True
    """
    payload = json.dumps(
        [_message_key(m) for m in messages], sort_keys=True, ensure_ascii=False, default=str
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def emit_manifest(manifest: InjectionManifest, config: RunnableConfig | None = None) -> None:
    """Dispatch the manifest as the ``"knowledge_injection"`` custom event.

    Outside a run (no parent run id, e.g. a plain function call) this does
    nothing.

    Example:
        >>> emit_manifest(InjectionManifest())  # no run: a silent no-op
    """
    config = ensure_config(config)
    if config.get("callbacks") is None:  # no run, so no parent run to attach the event to
        return
    try:
        dispatch_custom_event(MANIFEST_EVENT, manifest.to_dict(), config=config)
    except RuntimeError:
        logger.debug("knowledge_injection event not dispatched: no parent run")


async def aemit_manifest(manifest: InjectionManifest, config: RunnableConfig | None = None) -> None:
    """Async twin of :func:`emit_manifest`."""
    config = ensure_config(config)
    if config.get("callbacks") is None:  # no run, so no parent run to attach the event to
        return
    try:
        await adispatch_custom_event(MANIFEST_EVENT, manifest.to_dict(), config=config)
    except RuntimeError:
        logger.debug("knowledge_injection event not dispatched: no parent run")
