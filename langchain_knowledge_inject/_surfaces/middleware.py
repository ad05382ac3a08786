"""``KnowledgeInjectionMiddleware``: knowledge injection for ``langchain.agents.create_agent``.

The middleware works at model-call time (``wrap_model_call`` / ``awrap_model_call``):
it changes what the model sees on this call with ``request.override(...)`` and
never writes the injected text into the agent's messages, so the checkpointed
history stays injection-free and never grows with injected text.

What the model sees on each call:

- the system message with :data:`KNOWLEDGE_SYSTEM_PROMPT` appended (a constant,
  so the system prompt stays byte-identical from turn to turn);
- the dynamic_context placed next to the *current user message*: inside a tool
  loop (AI tool call, tool result, AI tool call, ...) it stays attached to the
  last human turn, not to the latest tool result.

One retrieval per user turn: the first model call of a turn retrieves and keeps
the result in the private state field ``knowledge_turn`` (keyed by the current
user message and the resolved settings); the following calls of the same tool
loop reuse it. A new user message (or other ``configurable`` overrides) starts
a new retrieval, so a document added between two turns is used on the next.
The turn's manifest is written to ``knowledge_manifest`` (read by the
``knowledge_base_search`` tool to skip chunks already injected) and emitted as
the ``knowledge_injection`` custom event once per turn.

Context blocks (``blocks=``: procedure, past-conversation snippets, user facts)
go into the same injected text, rendered once per user turn like retrieval. With
an ``EpisodicMemory`` among them, ``after_agent`` records the finished exchange
from the agent's (injection-free) messages; ``memory_tools=True`` registers the
``store_memory`` / ``set_user_fact`` / ``forget_user_fact`` tools.

Restricted mode (decided per turn by
:func:`~langchain_knowledge_inject._restricted.scope.resolve_restricted`) also covers
the agent's tools: ``wrap_tool_call`` runs every tool call of a restricted turn with
``configurable["restricted"] = True`` and lends the tool this middleware's summarizer
model, so a ``knowledge_base_search`` tool passed to ``create_agent(tools=...)``
returns safe summaries, never passages, however it was built.
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
    PrivateStateAttr,
)
from langchain_core.messages import BaseMessage, SystemMessage
from langgraph.types import Command
from typing_extensions import NotRequired

from langchain_knowledge_inject._surfaces.engine import engine_for
from langchain_knowledge_inject._surfaces.hosting import tool_call_wrappers
from langchain_knowledge_inject._surfaces.search import build_search_tool
from langchain_knowledge_inject._turn.assemble import PreparedTurn
from langchain_knowledge_inject._turn.logs import (
    log_model_request,
    log_model_response,
    model_io_enabled,
)
from langchain_knowledge_inject._turn.placement import (
    current_user_index,
    extend_system_message,
    query_text,
    strip_injected,
)
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AnyMessage, ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime
    from typing_extensions import Unpack

    from langchain_knowledge_inject._turn.blocks import ContextBlock
    from langchain_knowledge_inject.settings import KnowledgeSettings, SettingsOptions

__all__ = ["KnowledgeInjectionMiddleware", "KnowledgeInjectionState"]


class KnowledgeInjectionState(AgentState[Any]):
    """Agent state with the fields of :class:`KnowledgeInjectionMiddleware`."""

    knowledge_manifest: NotRequired[Annotated[dict[str, Any] | None, OmitFromInput]]
    """The current turn's injection manifest (as a dict)."""
    knowledge_turn: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    """Per-turn cache: ``{"key", "dynamic_context"}`` of the current user turn."""


class KnowledgeInjectionMiddleware(AgentMiddleware[KnowledgeInjectionState, Any, Any]):
    """Inject retrieved knowledge into every model call of a ``create_agent`` agent.

    See the module docstring for what the model sees, the per-turn cache and the
    state fields. Per-request overrides come from ``config["configurable"]``
    (see :mod:`~langchain_knowledge_inject.settings`).

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
            and ``UserFacts`` among ``blocks`` (see
            :func:`~langchain_knowledge_inject._memory.tools.create_memory_tools`).

    Raises:
        ConfigurationError: An option has a value that is not allowed.
    """

    state_schema = KnowledgeInjectionState

    def __init__(
        self,
        knowledge_base: Any,
        *,
        settings: KnowledgeSettings | None = None,
        summarizer_model: BaseChatModel | None = None,
        blocks: Sequence[ContextBlock] = (),
        search_tool: bool | None = None,
        memory_tools: bool = False,
        **options: Unpack[SettingsOptions],
    ) -> None:
        super().__init__()
        self.injector = engine_for(
            knowledge_base, settings=settings, summarizer_model=summarizer_model, blocks=blocks,
            options=dict(options),
        )  # fmt: skip
        self.knowledge_prompt = self.injector.settings.knowledge_prompt
        self._wrap_tool, self._awrap_tool = tool_call_wrappers(self.injector)
        self.tools = _memory_tools(self.injector.blocks) if memory_tools else []
        if search_tool or (search_tool is None and self.injector.settings.retrieval == "tool"):
            self.tools = [
                *self.tools,
                build_search_tool(
                    self.injector.knowledge_bases,
                    settings=self.injector.settings,
                    summarizer_model=self.injector.summarizer_model,
                ),
            ]

    # -- the hooks -------------------------------------------------------------------------
    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse],
    ) -> ExtendedModelResponse:
        """Call the model with the knowledge injected (retrieving once per user turn)."""
        config = _current_config()
        key, cached = self._cached(request, config)
        turn = (
            None
            if cached
            else self.injector.prepare(self._messages(request), config, surface="middleware")
        )
        sent = self._request(request, config, cached, turn)
        on, restricted = self._log_io(config)
        log_model_request(_sent(sent), surface="middleware", restricted=restricted, enabled=on)
        response = handler(sent)
        log_model_response(_reply(response), surface="middleware", restricted=restricted,
                           enabled=on)  # fmt: skip
        return ExtendedModelResponse(model_response=response, command=_update(key, turn))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse]],
    ) -> ExtendedModelResponse:
        """Async twin of :meth:`wrap_model_call`."""
        config = _current_config()
        key, cached = self._cached(request, config)
        turn = (
            None
            if cached
            else await self.injector.aprepare(self._messages(request), config, surface="middleware")
        )
        sent = self._request(request, config, cached, turn)
        on, restricted = self._log_io(config)
        log_model_request(_sent(sent), surface="middleware", restricted=restricted, enabled=on)
        response = await handler(sent)
        log_model_response(_reply(response), surface="middleware", restricted=restricted,
                           enabled=on)  # fmt: skip
        return ExtendedModelResponse(model_response=response, command=_update(key, turn))

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run every tool call of a restricted turn restricted, however the tool was built.

        When the turn is restricted (a knowledge base's stored flag, this
        middleware's ``restricted`` or ``configurable["restricted"]``), the tool
        runs with ``configurable["restricted"] = True`` and this middleware's
        summarizer model, so a ``knowledge_base_search`` tool built separately
        returns a safe summary, never passages. Other turns pass through unchanged.
        """
        return cast("ToolMessage | Command[Any]", self._wrap_tool(request, handler))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async twin of :meth:`wrap_tool_call`."""
        return cast("ToolMessage | Command[Any]", await self._awrap_tool(request, handler))

    def after_agent(
        self, state: KnowledgeInjectionState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Record the finished turn in the episodic memory (when one is among the blocks)."""
        if self.injector.records_turns:
            self.injector.record_turn(state.get("messages") or [], _current_config())
        return None

    async def aafter_agent(
        self, state: KnowledgeInjectionState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of :meth:`after_agent`."""
        if self.injector.records_turns:
            await self.injector.arecord_turn(state.get("messages") or [], _current_config())
        return None

    # -- helpers ---------------------------------------------------------------------------
    def _log_io(self, config: RunnableConfig | None) -> tuple[bool, bool]:
        """(main-model I/O logging on, restricted turn)."""
        on = model_io_enabled(self.injector.settings.with_overrides(config).log_model_io)
        return on, on and self.injector.resolve(config).restricted

    def _system(self, request: ModelRequest[Any]) -> SystemMessage | None:
        system, addition = request.system_message, self.knowledge_prompt
        if not self.injector.settings.with_overrides(_current_config()).enabled:
            addition = None  # knowledge switched off: the system prompt as the agent has it
        if system is None:
            return SystemMessage(addition) if addition else None
        return extend_system_message(system, addition)

    def _messages(self, request: ModelRequest[Any]) -> list[BaseMessage]:
        """System message + conversation, as the injector should see them."""
        system = self._system(request)
        return [system, *request.messages] if system is not None else list(request.messages)

    def _cached(
        self, request: ModelRequest[Any], config: RunnableConfig | None
    ) -> tuple[str, dict[str, Any] | None]:
        """The turn key, and the cached turn when this user turn already retrieved."""
        settings = self.injector.resolve(config)
        key = _turn_key(request.messages, settings)
        cached = (request.state or {}).get("knowledge_turn")
        if isinstance(cached, dict) and cached.get("key") == key:
            return key, cached
        return key, None

    def _request(
        self,
        request: ModelRequest[Any],
        config: RunnableConfig | None,
        cached: dict[str, Any] | None,
        turn: PreparedTurn | None,
    ) -> ModelRequest[Any]:
        if turn is not None:
            messages = turn.messages
        else:
            text = (cached or {}).get("dynamic_context")
            messages = strip_injected(self._messages(request), headers=self.injector.strip_headers)
            settings = self.injector.resolve(config)
            messages = self.injector.shape(messages, text, settings, config)
        sent = cast("list[AnyMessage]", messages)
        if self._system(request) is not None:
            system = cast("SystemMessage", sent[0])
            return request.override(system_message=system, messages=sent[1:])
        return request.override(messages=sent)


def _sent(request: ModelRequest[Any]) -> list[BaseMessage]:
    system = request.system_message
    return [system, *request.messages] if system is not None else list(request.messages)


def _reply(response: Any) -> Any:
    result = getattr(response, "result", None)
    if isinstance(result, list) and result:
        return result[-1]
    return response


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


def _turn_key(messages: Sequence[BaseMessage], settings: KnowledgeSettings) -> str:
    """Identify a user turn: the current user message (position, id, text) and the settings."""
    index = current_user_index(messages)
    message = messages[index] if index is not None else None
    payload = {
        "index": index,
        "id": getattr(message, "id", None),
        "text": query_text(message),
        "settings": settings.model_dump(mode="json"),
    }
    raw = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _update(key: str, turn: PreparedTurn | None) -> Command[Any] | None:
    if turn is None:
        return None
    return Command(
        update={
            "knowledge_manifest": turn.manifest.to_dict(),
            "knowledge_turn": {"key": key, "dynamic_context": turn.dynamic_context},
        }
    )


def _current_config() -> RunnableConfig | None:
    """The config of the running graph, or ``None`` when a hook is called directly."""
    try:
        from langgraph.config import get_config

        return get_config()
    except RuntimeError:
        return None
