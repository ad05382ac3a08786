"""What a surface does around the model call: logging it, the custom stream, restricted tools.

Shared by the graph, the node and the agent middleware (not a surface itself).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import AIMessage, BaseMessage

from langchain_knowledge_inject._restricted.scope import RestrictedHost, restricted_host
from langchain_knowledge_inject._turn.logs import (
    log_model_request,
    log_model_response,
    model_io_enabled,
)
from langchain_knowledge_inject._turn.manifest import MANIFEST_EVENT

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from langchain_knowledge_inject._surfaces.pipeline import KnowledgePipeline, Request


def current_config() -> RunnableConfig | None:
    """The config of the running graph, or ``None`` when called outside one."""
    try:
        from langgraph.config import get_config

        return get_config()
    except RuntimeError:
        return None


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


def _reply(response: Any) -> Any:
    result = getattr(response, "result", None)
    return result[-1] if isinstance(result, list) and result else response


def call_model_logged(
    call: Callable[[Any], Any],
    sent: Any,
    describe: Callable[[Any], list[BaseMessage]],
    req: Request,
    *,
    surface: str,
) -> Any:
    """Call the model on ``sent``, logging its request and reply when asked to."""
    on = model_io_enabled(req.settings.log_model_io)
    log_model_request(describe(sent), surface=surface, restricted=req.restricted, enabled=on)
    response = call(sent)
    log_model_response(_reply(response), surface=surface, restricted=req.restricted, enabled=on)
    return response


async def acall_model_logged(
    call: Callable[[Any], Awaitable[Any]],
    sent: Any,
    describe: Callable[[Any], list[BaseMessage]],
    req: Request,
    *,
    surface: str,
) -> Any:
    """Async twin of :func:`call_model_logged`."""
    on = model_io_enabled(req.settings.log_model_io)
    log_model_request(describe(sent), surface=surface, restricted=req.restricted, enabled=on)
    response = await call(sent)
    log_model_response(_reply(response), surface=surface, restricted=req.restricted, enabled=on)
    return response


def _restricted_call(
    pipeline: KnowledgePipeline, request: Any, req: Request
) -> tuple[Any, RestrictedHost]:
    """The tool call with ``configurable["restricted"] = True``, and the host it runs under."""
    host = RestrictedHost(
        summarizer_model=pipeline.summarizer_model, sensitive_sources=req.sensitive_sources
    )
    runtime: Any = getattr(request, "runtime", None)
    if runtime is None or not dataclasses.is_dataclass(runtime) or isinstance(runtime, type):
        return request, host
    config: dict[str, Any] = dict(getattr(runtime, "config", None) or {})
    config["configurable"] = {**(config.get("configurable") or {}), "restricted": True}
    return request.override(runtime=dataclasses.replace(runtime, config=config)), host


def _tool_args(request: Any) -> dict[str, Any]:
    runtime = getattr(request, "runtime", None)
    return {
        "config": getattr(runtime, "config", None),
        "context": getattr(runtime, "context", None),
    }


def run_tool(pipeline: KnowledgePipeline, request: Any, handler: Callable[[Any], Any]) -> Any:
    """Run one tool call; in a restricted turn as a restricted host's call.

    The tool then sees ``configurable["restricted"] = True`` and the host's summarizer
    and ``sensitive_sources`` (:func:`~._restricted.scope.current_host`), wherever it
    was built.
    """
    req = pipeline.request(**_tool_args(request))
    if not req.restricted:
        return handler(request)
    call, host = _restricted_call(pipeline, request, req)
    with restricted_host(host):
        return handler(call)


async def arun_tool(
    pipeline: KnowledgePipeline, request: Any, handler: Callable[[Any], Awaitable[Any]]
) -> Any:
    """Async twin of :func:`run_tool` (the flags read in a worker thread)."""
    req = await pipeline.arequest(**_tool_args(request))
    if not req.restricted:
        return await handler(request)
    call, host = _restricted_call(pipeline, request, req)
    with restricted_host(host):
        return await cast("Awaitable[Any]", handler(call))
