"""What a surface does around the model call: restricted tool calls, the stream, the reply.

Shared by the graph, the node and the agent middleware (not a surface itself).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langchain_knowledge_inject._restricted.scope import (
    RestrictedHost,
    arun_tool_restricted,
    run_tool_restricted,
)
from langchain_knowledge_inject._surfaces.engine import InjectionEngine
from langchain_knowledge_inject._turn.manifest import MANIFEST_EVENT

__all__ = ["as_message", "tool_call_wrappers", "write_stream"]


def tool_call_wrappers(engine: InjectionEngine) -> tuple[Any, Any]:
    """``ToolNode`` / middleware wrappers that run each tool call of a restricted turn restricted.

    Returns ``(wrap_tool_call, awrap_tool_call)``. The turn is restricted when
    :meth:`InjectionEngine.resolve` says so for the tool call's config; then the
    tool sees ``configurable["restricted"] = True`` and the engine's summarizer
    model and ``sensitive_sources`` (see
    :func:`~langchain_knowledge_inject._restricted.scope.run_tool_restricted`).
    """

    def host(request: Any) -> RestrictedHost | None:
        runtime = getattr(request, "runtime", None)
        if not engine.resolve(getattr(runtime, "config", None)).restricted:
            return None
        return RestrictedHost(
            summarizer_model=engine.summarizer_model,
            sensitive_sources=engine.sensitive_sources(),
        )

    def wrap(request: Any, handler: Any) -> Any:
        found = host(request)
        return handler(request) if found is None else run_tool_restricted(request, handler, found)

    async def awrap(request: Any, handler: Any) -> Any:
        found = host(request)
        if found is None:
            return await handler(request)
        return await arun_tool_restricted(request, handler, found)

    return wrap, awrap


def write_stream(manifest: dict[str, Any]) -> None:
    """Send the manifest to ``stream_mode="custom"`` (no-op outside a graph run)."""
    try:
        from langgraph.config import get_stream_writer

        writer = get_stream_writer()
    except (RuntimeError, KeyError):  # not inside a graph run
        return
    writer({MANIFEST_EVENT: manifest})


def as_message(reply: Any) -> BaseMessage:
    """A model's reply as a message (a bare string becomes an ``AIMessage``)."""
    return reply if isinstance(reply, BaseMessage) else AIMessage(str(reply))
