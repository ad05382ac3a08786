"""``KnowledgeInjectionMiddleware``: knowledge injection for ``langchain.agents.create_agent``.

The middleware works at model-call time (``wrap_model_call`` / ``awrap_model_call``):
it changes what the model sees with ``request.override(...)`` and never writes the
injected text into the agent's messages. The first model call of a user turn runs
the pipeline (:class:`~langchain_knowledge_inject._surfaces.pipeline.KnowledgePipeline`)
and keeps the injected text in this process, keyed by the conversation, the current
user message and the request's settings; the following calls of the same tool loop
place it again. The turn's documents go to the agent's state as ``retrieved`` (as the
graph's: restricted, keyed stubs, never text), its manifest only with ``keep_manifest=True``;
an ``after_agent`` step exists only when an ``EpisodicMemory`` records turns. In a
restricted turn ``wrap_tool_call`` runs every tool call as a restricted host's call,
so a ``knowledge_base_search`` tool returns safe summaries however it was built.
See docs/surfaces.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromInput,
)
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.types import Command
from typing_extensions import NotRequired

from langchain_knowledge_inject._surfaces.hosting import (
    acall_model_logged,
    arun_tool,
    call_model_logged,
    current_config,
    run_tool,
    write_stream,
)
from langchain_knowledge_inject._surfaces.pipeline import (
    KnowledgePipeline,
    PreparedTurn,
    Recent,
    Request,
    pipeline_for,
    thread_key,
)
from langchain_knowledge_inject._surfaces.tools import create_knowledge_base_search_tool
from langchain_knowledge_inject._turn.placement import (
    current_user_index,
    query_text,
)
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AnyMessage, ToolMessage
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime
    from typing_extensions import Unpack

    from langchain_knowledge_inject._turn.blocks import ContextBlock
    from langchain_knowledge_inject.settings import KnowledgeSettings, SettingsOptions

_CACHED_TURNS = 4096


class KnowledgeInjectionState(AgentState[Any]):
    """Agent state with the fields of :class:`KnowledgeInjectionMiddleware`."""

    retrieved: NotRequired[Annotated[list[Document], OmitFromInput]]
    """The current turn's documents, best first (restricted: keyed stubs, never the text)."""

    knowledge_manifest: NotRequired[Annotated[dict[str, Any] | None, OmitFromInput]]
    """The current turn's injection manifest (as a dict), with ``keep_manifest=True``."""


class KnowledgeInjectionMiddleware(AgentMiddleware[KnowledgeInjectionState, Any, Any]):
    """Inject retrieved knowledge into every model call of a ``create_agent`` agent.

    See the module docstring for what the model sees and the per-turn cache.
    Per-request settings come from the runtime context (``context=`` of ``invoke``,
    with ``context_schema=KnowledgeContext`` or your own schema with its keys) and from
    ``config["configurable"]``; the context wins where both set a key.

    Setup:
        .. code-block:: python

            from langchain.agents import create_agent
            from langchain_core.language_models import GenericFakeChatModel
            from langchain_core.messages import AIMessage
            from langgraph.checkpoint.memory import InMemorySaver
            from langchain_knowledge_inject import KnowledgeInjectionMiddleware

            # any tool-calling chat model, e.g. "openai:gpt-4o-mini", with
            # tools=[create_knowledge_base_search_tool(kb)]; a scripted fake here
            model = GenericFakeChatModel(messages=iter([AIMessage("25 days.")]))
            agent = create_agent(
                model,
                system_prompt="You are the HR assistant.",
                middleware=[KnowledgeInjectionMiddleware(kb, top_k=4)],
                checkpointer=InMemorySaver(),
            )
            result = agent.invoke(
                {"messages": [("user", "How many days of leave?")]},
                {"configurable": {"thread_id": "t1"}},
            )
            assert result["messages"][-1].content == "25 days."

    Args:
        knowledge_base: The knowledge source(s): a ``KnowledgeBase``, a LangChain
            ``BaseRetriever`` or ``VectorStore``, or a sequence mixing these; or a
            ready :class:`KnowledgeInjector` (for ``token_counter``, ``template``,
            ``extra_blocks``).
        settings: The :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`
            (``top_k``, ``restricted``, ``knowledge_prompt``, ...).
        **options: Fields of ``settings`` given directly (``top_k=4``).
        summarizer_model: Restricted mode: the secondary model writing safe summaries.
        blocks: Context blocks (``ProcedureLibrary``, ``EpisodicMemory``,
            ``UserFacts``, ...): see :class:`KnowledgeInjector`. The user id is
            ``config["configurable"]["user_id"]``.
        search_tool: Also register a :func:`create_knowledge_base_search_tool` over
            the same sources and settings (``self.tools``).
        memory_tools: Also register the memory tools of the ``EpisodicMemory``
            and ``UserFacts`` among ``blocks``.
        keep_manifest: Also write each turn's manifest to the state field
            ``knowledge_manifest`` (and so to checkpoints). Off by default: the manifest
            goes out as the ``knowledge_injection`` custom event.

    Raises:
        ConfigurationError: An option has a value that is not allowed.
    """

    state_schema = KnowledgeInjectionState

    def __new__(cls, *args: Any, **kwargs: Any) -> KnowledgeInjectionMiddleware:
        """An ``EpisodicMemory`` among the blocks adds the ``after_agent`` recording step."""
        records = any(callable(getattr(b, "record_turn", None)) for b in kwargs.get("blocks") or ())
        ready = getattr(args[0] if args else kwargs.get("knowledge_base"), "pipeline", None)
        records = records or bool(isinstance(ready, KnowledgePipeline) and ready.records_turns)
        target = _RecordingMiddleware if records and cls is KnowledgeInjectionMiddleware else cls
        return super().__new__(target)

    def __init__(
        self,
        knowledge_base: Any,
        *,
        settings: KnowledgeSettings | None = None,
        summarizer_model: BaseChatModel | None = None,
        blocks: Sequence[ContextBlock] = (),
        search_tool: bool | None = None,
        memory_tools: bool = False,
        keep_manifest: bool = False,
        **options: Unpack[SettingsOptions],
    ) -> None:
        super().__init__()
        for option, value in (
            ("search_tool", search_tool),
            ("memory_tools", memory_tools),
            ("keep_manifest", keep_manifest),
        ):
            if value is not None and not isinstance(value, bool):
                msg = f"{option} must be True, False or None, got {value!r}"
                raise ConfigurationError(msg, option=option, value=value)
        self.pipeline = pipeline_for(
            knowledge_base,
            settings=settings,
            summarizer_model=summarizer_model,
            blocks=blocks,
            options=dict(options),
        )
        self.keep_manifest = keep_manifest
        self.tools = _memory_tools(self.pipeline.blocks) if memory_tools else []
        if search_tool or (search_tool is None and self.pipeline.settings.retrieval == "tool"):
            # the tool shares this middleware's pipeline (read from .pipeline, as an injector's)
            self.tools = [*self.tools, create_knowledge_base_search_tool(self)]
        self._turns = Recent(_CACHED_TURNS)

    # -- the hooks -------------------------------------------------------------------------
    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse],
    ) -> ModelResponse | ExtendedModelResponse:
        """Call the model with the knowledge injected (retrieving once per user turn)."""
        req = self.pipeline.request(current_config(), context=_context(request))
        messages = _sent(request)  # system message + conversation
        key = _turn_key(req, messages)
        turn = None
        if key not in self._turns:
            turn = self.pipeline.prepare(messages, req, surface="middleware")
            write_stream(turn.manifest.to_dict())
        sent = self._request(request, req, messages, key, turn)
        response = call_model_logged(handler, sent, _sent, req, surface="middleware")
        return self._response(response, turn)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse]],
    ) -> ModelResponse | ExtendedModelResponse:
        """Async twin of :meth:`wrap_model_call`."""
        req = await self.pipeline.arequest(current_config(), context=_context(request))
        messages = _sent(request)  # system message + conversation
        key = _turn_key(req, messages)
        turn = None
        if key not in self._turns:
            turn = await self.pipeline.aprepare(messages, req, surface="middleware")
            write_stream(turn.manifest.to_dict())
        sent = self._request(request, req, messages, key, turn)
        response = await acall_model_logged(handler, sent, _sent, req, surface="middleware")
        return self._response(response, turn)

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run every tool call of a restricted turn restricted, however the tool was built."""
        return cast("ToolMessage | Command[Any]", run_tool(self.pipeline, request, handler))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async twin of :meth:`wrap_tool_call`."""
        return cast("ToolMessage | Command[Any]", await arun_tool(self.pipeline, request, handler))

    # -- helpers ---------------------------------------------------------------------------
    def _request(
        self,
        request: ModelRequest[Any],
        req: Request,
        messages: list[BaseMessage],
        key: str | None,
        turn: PreparedTurn | None,
    ) -> ModelRequest[Any]:
        if turn is not None:
            sent = turn.messages
            self._turns.put(key, turn.dynamic_context)
        else:
            text = self._turns.get(key, None)
            sent, _ = self.pipeline.shape(self.pipeline.clean(messages, req), text, req)
        out = cast("list[AnyMessage]", sent)
        if out and isinstance(out[0], SystemMessage):
            return request.override(system_message=cast("SystemMessage", out[0]), messages=out[1:])
        return request.override(messages=out)

    def _response(
        self, response: ModelResponse, turn: PreparedTurn | None
    ) -> ModelResponse | ExtendedModelResponse:
        if turn is None:
            return response
        update: dict[str, Any] = {"retrieved": list(turn.retrieved)}
        update |= {"knowledge_manifest": turn.manifest.to_dict()} if self.keep_manifest else {}
        return ExtendedModelResponse(model_response=response, command=Command(update=update))


class _RecordingMiddleware(KnowledgeInjectionMiddleware):
    """The middleware with an ``after_agent`` step: records the finished exchange."""

    def after_agent(
        self, state: KnowledgeInjectionState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Record the finished turn in the episodic memory."""
        req = self.pipeline.request(current_config(), context=getattr(runtime, "context", None))
        self.pipeline.record_turn(state.get("messages") or [], req)
        return None

    async def aafter_agent(
        self, state: KnowledgeInjectionState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of :meth:`after_agent`."""
        context = getattr(runtime, "context", None)
        req = await self.pipeline.arequest(current_config(), context=context)
        await self.pipeline.arecord_turn(state.get("messages") or [], req)
        return None


def _context(request: ModelRequest[Any]) -> Any:
    return getattr(getattr(request, "runtime", None), "context", None)


def _sent(request: ModelRequest[Any]) -> list[BaseMessage]:
    """System message + conversation: what the pipeline sees, and what is sent."""
    system = request.system_message
    return [system, *request.messages] if system is not None else list(request.messages)


def _memory_tools(blocks: Sequence[ContextBlock]) -> list[Any]:
    """The memory tools of the ``EpisodicMemory`` and ``UserFacts`` among ``blocks``."""
    from langchain_knowledge_inject._memory.episodic import EpisodicMemory
    from langchain_knowledge_inject._memory.facts import UserFacts
    from langchain_knowledge_inject._memory.tools import create_memory_tools

    memory = next((b for b in blocks if isinstance(b, EpisodicMemory)), None)
    facts = next((b for b in blocks if isinstance(b, UserFacts)), None)
    if memory is None and facts is None:
        msg = "memory_tools=True needs an EpisodicMemory or a UserFacts among blocks"
        raise ConfigurationError(msg, option="memory_tools", value=True)
    return create_memory_tools(memory=memory, facts=facts)


def _turn_key(req: Request, messages: Sequence[BaseMessage]) -> str | None:
    """One user turn: the conversation, the current user message and the request's settings."""
    index = current_user_index(messages)
    thread = thread_key(req.config, messages)
    if index is None or thread is None:
        return None
    message = messages[index]
    payload = {
        "thread": thread,
        "index": index,
        "id": getattr(message, "id", None),
        "text": query_text(message),
        "settings": req.settings.model_dump(mode="json"),
    }
    raw = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()
