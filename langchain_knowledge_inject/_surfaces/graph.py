"""``create_knowledge_graph``: a LangGraph graph that injects knowledge on every turn.

The graph::

    START -> retrieve -> call_model -> [record_memory] -> END
                  (tools <-> call_model, with tools=)

``retrieve`` runs the turn's pipeline
(:class:`~langchain_knowledge_inject._surfaces.pipeline.KnowledgePipeline`) and writes
the injected text and what was retrieved to per-turn state fields (overwritten every
turn; in restricted mode the safe summary and keyed stubs, never raw text);
``call_model`` sends ``[system prompt] + history + knowledge`` with the knowledge placed
with the current user message, and adds only the reply to ``messages``. The ``tools``
node runs every tool of a restricted turn restricted. See docs/surfaces.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.graph import END, START, MessagesState, StateGraph

from langchain_knowledge_inject._surfaces.hosting import (
    acall_model_logged,
    arun_tool,
    as_message,
    call_model_logged,
    run_tool,
    write_stream,
)
from langchain_knowledge_inject._surfaces.pipeline import (
    KnowledgePipeline,
    PreparedTurn,
    Request,
    check_system_prompt,
    coerce_messages,
    pipeline_for,
)
from langchain_knowledge_inject._surfaces.tools import create_knowledge_base_search_tool
from langchain_knowledge_inject._turn.placement import strip_injected
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool
    from langgraph.graph.state import CompiledStateGraph
    from typing_extensions import Unpack

    from langchain_knowledge_inject._turn.blocks import ContextBlock
    from langchain_knowledge_inject.settings import KnowledgeSettings, SettingsOptions

logger = logging.getLogger("langchain_knowledge_inject")


class KnowledgeState(MessagesState):
    """State of the knowledge graph: the conversation plus this turn's knowledge.

    Every field but ``messages`` is per turn: ``retrieve`` overwrites them, so nothing
    accumulates from turn to turn.
    """

    retrieved: list[Document]
    """The chunks retrieved for the current user message, best first (restricted mode:
    stubs with a keyed reference and a score, never the text)."""
    retrieval_query: str | None
    """The query sent to the knowledge base, or ``None`` when retrieval did not run."""
    dynamic_context: str | None
    """The text injected in front of the model this turn, or ``None``."""
    safe_summary: dict[str, Any] | None
    """Restricted mode: what was released of the chunks (decision, reason, confidence
    bucket, guarded summary)."""
    knowledge_manifest: dict[str, Any] | None
    """This turn's manifest, with ``keep_manifest=True`` (else ``None``)."""


def _history(
    state: Any, system_prompt: str | None, pipeline: KnowledgePipeline
) -> list[BaseMessage]:
    if not isinstance(state, dict) or "messages" not in state:
        keys = sorted(state) if isinstance(state, dict) else type(state).__name__
        msg = f"the knowledge graph needs a 'messages' field in its state; got {keys}"
        raise ConfigurationError(msg, option="state", value=keys)
    history = strip_injected(coerce_messages(state["messages"]), headers=pipeline.strip_headers)
    return [SystemMessage(system_prompt), *history] if system_prompt else history


def _retrieve_node(
    pipeline: KnowledgePipeline, system_prompt: str | None, keep_manifest: bool
) -> Runnable[Any, dict[str, Any]]:
    def update(turn: PreparedTurn) -> dict[str, Any]:
        manifest = turn.manifest.to_dict()
        write_stream(manifest)
        summary = turn.safe_summary.model_dump() if turn.safe_summary is not None else None
        return {
            "retrieved": list(turn.retrieved),
            "retrieval_query": turn.query,
            "dynamic_context": turn.dynamic_context,
            "safe_summary": summary,
            "knowledge_manifest": manifest if keep_manifest else None,
        }

    def retrieve(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        request = pipeline.request(config)
        history = _history(state, system_prompt, pipeline)
        return update(pipeline.prepare(history, request, surface="graph"))

    async def aretrieve(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        request = await pipeline.arequest(config)
        history = _history(state, system_prompt, pipeline)
        return update(await pipeline.aprepare(history, request, surface="graph"))

    return RunnableLambda(retrieve, afunc=aretrieve, name="retrieve")


def _call_model_node(
    model: Runnable[Any, Any], pipeline: KnowledgePipeline, system_prompt: str | None
) -> Runnable[Any, dict[str, Any]]:
    def messages(state: dict[str, Any], request: Request) -> list[BaseMessage]:
        history = pipeline.clean(_history(state, system_prompt, pipeline), request)
        return pipeline.shape(history, state.get("dynamic_context"), request)[0]

    def call_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        request = pipeline.request(config)
        sent = messages(state, request)
        reply = call_model_logged(
            lambda m: model.invoke(m, config), sent, list, request, surface="graph"
        )
        return {"messages": [as_message(reply)]}

    async def acall_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        request = await pipeline.arequest(config)
        sent = messages(state, request)
        reply = await acall_model_logged(
            lambda m: model.ainvoke(m, config), sent, list, request, surface="graph"
        )
        return {"messages": [as_message(reply)]}

    return RunnableLambda(call_model, afunc=acall_model, name="call_model")


def _record_node(pipeline: KnowledgePipeline) -> Runnable[Any, dict[str, Any]]:
    def record_memory(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        pipeline.record_turn(state["messages"], pipeline.request(config))
        return {}

    async def arecord_memory(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        await pipeline.arecord_turn(state["messages"], await pipeline.arequest(config))
        return {}

    return RunnableLambda(record_memory, afunc=arecord_memory, name="record_memory")


def create_knowledge_graph(
    model: BaseChatModel | str,
    knowledge_base: Any,
    *,
    settings: KnowledgeSettings | None = None,
    system_prompt: str | None = None,
    summarizer_model: BaseChatModel | None = None,
    blocks: Sequence[ContextBlock] = (),
    tools: Sequence[BaseTool | Callable[..., Any]] | None = None,
    checkpointer: Any = None,
    store: Any = None,
    name: str | None = None,
    context_schema: type[Any] | None = None,
    keep_manifest: bool = False,
    **options: Unpack[SettingsOptions],
) -> CompiledStateGraph:
    """Create a compiled LangGraph graph that injects knowledge before every model call.

    Nodes: ``retrieve`` -> ``call_model``, plus a ``tools`` node looping back to
    ``call_model`` when ``tools`` are given, and ``record_memory`` with an
    ``EpisodicMemory``. The state is :class:`KnowledgeState`. The stored history holds
    only the conversation; see the module docstring.

    Per-request settings: ``config["configurable"]`` and the runtime context
    (``context=``; declare it with ``context_schema=KnowledgeContext``).

    Args:
        model: The chat model, or a ``"provider:model"`` string for ``init_chat_model``.
        knowledge_base: The knowledge source(s): a ``KnowledgeBase``, a LangChain
            ``BaseRetriever`` or ``VectorStore``, or a sequence mixing these; or a
            ready :class:`KnowledgeInjector` (for ``token_counter``, ``template``,
            ``extra_blocks``), in which case ``settings``, ``summarizer_model``,
            ``blocks`` and ``**options`` belong on the injector.
        settings: The :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`
            (``top_k``, ``restricted``, ``knowledge_prompt``, ...).
        **options: Fields of ``settings`` given directly (``top_k=3``).
        system_prompt: Your system prompt; ``settings.knowledge_prompt`` (default
            :data:`KNOWLEDGE_SYSTEM_PROMPT`) is appended to it.
        summarizer_model: Restricted mode: the secondary model writing safe summaries.
        blocks: Context blocks: ``blocks=[ProcedureLibrary(...), EpisodicMemory(...),
            UserFacts(store)]`` adds those blocks to the injected message (user id:
            ``configurable["user_id"]``); with an ``EpisodicMemory`` a
            ``record_memory`` node records each finished turn. Give the model the
            memory tools with ``tools=create_memory_tools(memory=..., facts=...)``.
        tools: Tools the model may call (bound with ``bind_tools``), for example
            :func:`create_knowledge_base_search_tool`.
        checkpointer: A LangGraph checkpointer (``InMemorySaver``, ``SqliteSaver``...).
        context_schema: The runtime context's schema (e.g. :class:`KnowledgeContext`):
            ``graph.invoke(input, context={"user_id": "u1", "top_k": 6})``.
        keep_manifest: Also keep each turn's manifest in the state field
            ``knowledge_manifest`` (and so in checkpoints); it always goes out as the
            ``knowledge_injection`` custom event.
        store: A LangGraph store.
        name: Name of the compiled graph.

    Returns:
        The compiled graph. Invoke it with ``{"messages": [...]}``.

    Raises:
        ConfigurationError: An option has a value that is not allowed.

    Example:
        .. code-block:: python

            from langchain_core.language_models import GenericFakeChatModel
            from langchain_core.messages import AIMessage
            from langgraph.checkpoint.memory import InMemorySaver
            from langchain_knowledge_inject import create_knowledge_graph

            # any chat model, e.g. "openai:gpt-4o-mini"; a scripted fake here
            model = GenericFakeChatModel(messages=iter([AIMessage("25 days.")]))
            graph = create_knowledge_graph(
                model, kb, system_prompt="You are the HR assistant.",
                checkpointer=InMemorySaver(),
            )
            config = {"configurable": {"thread_id": "t1"}}
            state = graph.invoke({"messages": [("user", "How many days of leave?")]}, config)
            assert state["messages"][-1].content == "25 days."
    """
    pipeline = pipeline_for(
        knowledge_base,
        settings=settings,
        summarizer_model=summarizer_model,
        blocks=blocks,
        options=dict(options),
    )
    check_system_prompt(system_prompt)
    if tools is not None and (isinstance(tools, str) or not isinstance(tools, Sequence)):
        msg = f"tools must be a list of tools (BaseTool or functions), got {type(tools).__name__}"
        raise ConfigurationError(msg, option="tools", value=tools)
    chat_model = _chat_model(model)
    if pipeline.settings.retrieval == "tool" and not any(
        getattr(t, "name", None) == "knowledge_base_search" for t in tools or ()
    ):
        ready = SimpleNamespace(pipeline=pipeline)  # the tool takes this ready pipeline
        tools = [*(tools or ()), create_knowledge_base_search_tool(ready)]
    bound = chat_model.bind_tools(list(tools)) if tools else chat_model

    builder = StateGraph(KnowledgeState, context_schema=context_schema)
    builder.add_node("retrieve", _retrieve_node(pipeline, system_prompt, keep_manifest))
    builder.add_node("call_model", _call_model_node(bound, pipeline, system_prompt))
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "call_model")
    done = END
    if pipeline.records_turns:
        done = "record_memory"
        builder.add_node("record_memory", _record_node(pipeline))
        builder.add_edge("record_memory", END)
    if tools:
        from langgraph.prebuilt import ToolNode, tools_condition

        def wrap(request: Any, handler: Any) -> Any:
            return run_tool(pipeline, request, handler)

        async def awrap(request: Any, handler: Any) -> Any:
            return await arun_tool(pipeline, request, handler)

        builder.add_node("tools", ToolNode(list(tools), wrap_tool_call=wrap, awrap_tool_call=awrap))
        builder.add_conditional_edges("call_model", tools_condition, {"tools": "tools", END: done})
        builder.add_edge("tools", "call_model")
    else:
        builder.add_edge("call_model", done)
    return builder.compile(checkpointer=checkpointer, store=store, name=name or "knowledge_graph")


def _chat_model(model: Any) -> Any:
    if isinstance(model, str):
        from langchain.chat_models import init_chat_model

        return init_chat_model(model)
    if not isinstance(model, Runnable):
        msg = f"model must be a chat model or a 'provider:model' string, got {type(model).__name__}"
        raise ConfigurationError(msg, option="model", value=model)
    return model
