"""``create_knowledge_graph``: a LangGraph graph that injects knowledge on every turn.

The graph::

    START -> retrieve -> [safe_summarize] -> build_context -> call_model -> [record_memory] -> END
                                                   (tools <-> call_model, with tools=)

Each node runs one step of the turn pipeline
(:class:`~langchain_knowledge_inject._surfaces.pipeline.KnowledgePipeline`) and writes its
result to per-turn state fields: ``retrieve`` the query and an open turn's documents;
``safe_summarize`` (restricted turns only, by ``route_after_retrieve``) searches and
summarizes in one step, writing the safe summary and keyed stubs, never raw text;
``build_context`` the dynamic_context and the manifest; ``call_model`` adds only the
reply to ``messages``. ``retrieve`` reads the stored restriction flags once and records
the turn's decision in ``knowledge_turn``: the later nodes rebuild the request from it,
and a turn any node sees restricted stays restricted. :class:`KnowledgeNodes` are the
nodes, for a graph of your own. See docs/surfaces.md.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config
from langgraph.graph import END, START, MessagesState, StateGraph

from langchain_knowledge_inject._restricted.scope import SourceFlags
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
    Retrieval,
    check_system_prompt,
    pipeline_for,
    released_from,
    turn_key,
)
from langchain_knowledge_inject._surfaces.tools import create_knowledge_base_search_tool
from langchain_knowledge_inject._turn.conversation import TurnQuery
from langchain_knowledge_inject._turn.retrieval import Retrieved
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage
    from langchain_core.tools import BaseTool
    from langgraph.graph.state import CompiledStateGraph
    from typing_extensions import Unpack

    from langchain_knowledge_inject._turn.blocks import ContextBlock
    from langchain_knowledge_inject.settings import KnowledgeSettings, SettingsOptions


Route = Literal["safe_summarize", "build_context"]
_Resumed = tuple["list[BaseMessage]", Retrieval, dict[str, Any]]
STEPS = ("retrieve", "safe_summarize", "build_context", "call_model")


class KnowledgeState(MessagesState):
    """State of the knowledge graph: the conversation plus this turn's knowledge.

    Every field but ``messages`` is per turn: ``retrieve`` resets them and the later
    nodes overwrite theirs, so nothing accumulates from turn to turn.
    """

    retrieved: list[Document]
    """The chunks retrieved for the current user message, best first (restricted mode:
    stubs with a keyed reference and a score, never the text)."""
    retrieval_query: str | None
    """The query sent to the knowledge base, or ``None`` when retrieval did not run."""
    dynamic_context: str | None
    """The text injected in front of the model this turn, or ``None``."""
    safe_summary: dict[str, Any] | None
    """Restricted mode: what the boundary released (decision, reason, confidence bucket,
    guarded summary, sources; the chunks' keyed refs, scores and codes)."""
    knowledge_manifest: dict[str, Any] | None
    """This turn's manifest, with ``keep_manifest=True`` (else ``None``)."""
    knowledge_turn: dict[str, Any] | None
    """What the later steps need of the earlier ones, never a chunk's text: the turn's
    restriction decision and the stored flags it came from (read once, by ``retrieve``),
    how the query was made, the sources that failed, what is left of its store deadline."""


class _Node(Runnable[Any, Any]):
    """A node: ``func(state, config)``, ``afunc`` when async; traced by the graph's own run.

    (A RunnableLambda adds a second run and signature checks to every call.)
    """

    def __init__(self, func: Callable[..., Any], afunc: Callable[..., Any], name: str) -> None:
        self.func, self.afunc, self.name = func, afunc, name

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self.func(input, ensure_config(config))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self.afunc(input, ensure_config(config))


class KnowledgeNodes:
    """The knowledge graph's nodes, for a ``StateGraph`` whose state extends ``KnowledgeState``.

    Made by :func:`create_knowledge_nodes`; each node is a Runnable (sync and async).
    """

    retrieve: Runnable[Any, dict[str, Any]]
    """The query and, on an open turn, the documents (``retrieved``)."""
    route_after_retrieve: Runnable[Any, Route]
    """The conditional edge after ``retrieve``: ``"build_context"`` when ``retrieve``
    recorded an open turn, else ``"safe_summarize"``."""
    safe_summarize: Runnable[Any, dict[str, Any]]
    """A restricted turn's search and safe summary, in one step."""
    build_context: Runnable[Any, dict[str, Any]]
    """``dynamic_context`` from ``retrieved`` (open) or ``safe_summary`` (restricted)."""
    call_model: Runnable[Any, dict[str, Any]]
    """The model call with ``dynamic_context`` placed; adds the reply to ``messages``."""
    tools: Runnable[Any, Any] | None = None
    """A ``ToolNode`` running a restricted turn's tools restricted (with tools)."""
    record_memory: Runnable[Any, dict[str, Any]] | None = None
    """Records the finished turn (with an ``EpisodicMemory`` among the blocks)."""

    def __init__(
        self, pipeline: KnowledgePipeline, model: Any, prompt: str | None, keep: bool
    ) -> None:
        self._pipeline, self._model, self._prompt, self._keep = pipeline, model, prompt, keep
        for name in STEPS if not pipeline.records_turns else (*STEPS, "record_memory"):
            run, arun = getattr(self, f"_{name}"), getattr(self, f"_a{name}")
            setattr(self, name, _Node(run, arun, name))
        self.route_after_retrieve = _Node(self._route, self._aroute, "route_after_retrieve")

    # -- the state of the turn -----------------------------------------------------------------
    def _recorded(
        self, state: Any, config: RunnableConfig
    ) -> tuple[list[BaseMessage], dict[str, Any], SourceFlags | None]:
        """The history, this turn's ``knowledge_turn`` and the flags decided there.

        Another turn's record, or one that does not parse: ``{}`` and ``None`` (read again).
        """
        history = self._pipeline.history(state, self._prompt)
        record, key = state.get("knowledge_turn"), turn_key(config, history)
        if isinstance(record, dict) and key is not None and record.get("turn") == key:
            try:
                return history, record, SourceFlags(**record["flags"])
            except (KeyError, TypeError):
                pass
        return history, {}, None

    def _restore(
        self, state: dict[str, Any], request: Request, history: list[BaseMessage], record: Any
    ) -> _Resumed:
        """The clean messages, and the turn as the earlier nodes left it in the state."""
        how = TurnQuery(state.get("retrieval_query"), record.get("query_source"))
        docs = [] if request.restricted else list(state.get("retrieved") or [])
        found = Retrieved(docs, list(record.get("errors") or []), record.get("error"))
        released = released_from(state.get("safe_summary")) if request.restricted else None
        got = Retrieval(how, found, request, released, record.get("started") or time.time())
        return self._pipeline.clean(history, request), got, record

    def _asked(self, config: RunnableConfig, record: Any, flags: SourceFlags | None) -> Request:
        # the request as retrieve decided it (no flags: read again), with what is left of
        # the turn's one store deadline
        return self._pipeline.request(config, flags=flags, left=record.get("store_left"))

    def _resume(self, state: Any, config: RunnableConfig) -> _Resumed:
        history, record, flags = self._recorded(state, config)
        return self._restore(state, self._asked(config, record, flags), history, record)

    async def _aresume(self, state: Any, config: RunnableConfig) -> _Resumed:
        history, record, flags = self._recorded(state, config)
        if flags is None:  # no record of this turn: the flags read again, off the event loop
            return self._restore(state, await self._pipeline.arequest(config), history, record)
        return self._restore(state, self._asked(config, record, flags), history, record)

    # -- the nodes: each one step of the pipeline, and its fields of the state ------------------
    def _retrieved(self, got: Retrieval, config: RunnableConfig, history: Any) -> dict[str, Any]:
        request = got.request  # its flags with its decision: the later nodes' request
        flags = {**dataclasses.asdict(request.flags), "restricted": request.restricted,
                 "sensitive_sources": request.sensitive_sources}  # fmt: skip
        record = {"turn": turn_key(config, history), "flags": flags,
                  "started": got.started, "query_source": got.query.source,
                  "errors": list(got.found.errors), "error": got.found.error,
                  "store_left": request.deadline.left() if request.deadline else None}  # fmt: skip
        return {"retrieval_query": got.query.query, "retrieved": got.kept, "safe_summary": None,
                "dynamic_context": None, "knowledge_manifest": None,
                "knowledge_turn": record}  # fmt: skip

    def _retrieve(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        history = self._pipeline.history(state, self._prompt)
        request = self._pipeline.request(config)  # the stored flags, read once a turn: here
        got = self._pipeline.retrieve(self._pipeline.clean(history, request), request)
        return self._retrieved(got, config, history)

    async def _aretrieve(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        history = self._pipeline.history(state, self._prompt)
        request = await self._pipeline.arequest(config)
        got = await self._pipeline.aretrieve(self._pipeline.clean(history, request), request)
        return self._retrieved(got, config, history)

    def _route(self, state: Any, config: RunnableConfig) -> Route:
        flags = self._recorded(state, config)[2]  # no record: restricted until shown open
        return "build_context" if flags is not None and not flags.restricted else "safe_summarize"

    async def _aroute(self, state: Any, config: RunnableConfig) -> Route:
        return self._route(state, config)  # no I/O: on the event loop, not in a thread

    @staticmethod
    def _summarized(got: Retrieval, record: dict[str, Any]) -> dict[str, Any]:
        released = got.released.event() if got.released is not None else None
        record = {**record, "errors": list(got.found.errors)}
        return {"retrieved": got.kept, "safe_summary": released, "knowledge_turn": record}

    def _safe_summarize(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        clean, got, record = self._resume(state, config)
        return self._summarized(self._pipeline.summarize(clean, got), record)

    async def _asafe_summarize(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        clean, got, record = await self._aresume(state, config)
        return self._summarized(await self._pipeline.asummarize(clean, got), record)

    def _built(self, turn: PreparedTurn) -> dict[str, Any]:
        manifest = turn.manifest.to_dict()
        write_stream(manifest)
        kept = manifest if self._keep else None
        return {"dynamic_context": turn.dynamic_context, "knowledge_manifest": kept}

    def _build_context(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        clean, got, _ = self._resume(state, config)
        return self._built(self._pipeline.build_context(clean, got, surface="graph"))

    async def _abuild_context(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        clean, got, _ = await self._aresume(state, config)
        return self._built(await self._pipeline.abuild_context(clean, got, surface="graph"))

    def _call_model(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        clean, got, _ = self._resume(state, config)
        sent = self._pipeline.shape(clean, state.get("dynamic_context"), got.request)[0]
        call = lambda m: self._model.invoke(m, config)  # noqa: E731
        reply = call_model_logged(call, sent, list, got.request, surface="graph")
        return {"messages": [as_message(reply)]}

    async def _acall_model(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        clean, got, _ = await self._aresume(state, config)
        sent = self._pipeline.shape(clean, state.get("dynamic_context"), got.request)[0]
        call = lambda m: self._model.ainvoke(m, config)  # noqa: E731
        reply = await acall_model_logged(call, sent, list, got.request, surface="graph")
        return {"messages": [as_message(reply)]}

    def _record_memory(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        self._pipeline.record_turn(state["messages"], self._resume(state, config)[1].request)
        return {}

    async def _arecord_memory(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        request = (await self._aresume(state, config))[1].request
        await self._pipeline.arecord_turn(state["messages"], request)
        return {}


def create_knowledge_nodes(
    model: BaseChatModel | str,
    knowledge_base: Any,
    *,
    settings: KnowledgeSettings | None = None,
    system_prompt: str | None = None,
    summarizer_model: BaseChatModel | None = None,
    blocks: Sequence[ContextBlock] = (),
    tools: Sequence[BaseTool | Callable[..., Any]] | None = None,
    keep_manifest: bool = False,
    **options: Unpack[SettingsOptions],
) -> KnowledgeNodes:
    """The knowledge graph's nodes and its routing function, for a graph of your own.

    Wire them into a ``StateGraph`` whose state extends :class:`KnowledgeState` as
    :func:`create_knowledge_graph` does (it is built from them), with nodes of your own
    between (a permission check or a reranker between ``retrieve`` and ``build_context``
    reads and rewrites ``retrieved``), or compile with ``interrupt_before=["call_model"]``
    to show a person ``dynamic_context`` first. The arguments are those of
    :func:`create_knowledge_graph`; docs/surfaces.md wires them, with a person's review
    before the model (``interrupt_before=["call_model"]``) and the turn resumed.

    Raises:
        ConfigurationError: An option has a value that is not allowed.
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
    nodes = KnowledgeNodes(
        pipeline, chat_model.bind_tools(list(tools)) if tools else chat_model, system_prompt,
        keep_manifest,
    )  # fmt: skip
    if tools:
        from langgraph.prebuilt import ToolNode

        def wrap(request: Any, handler: Any) -> Any:
            return run_tool(pipeline, request, handler)

        async def awrap(request: Any, handler: Any) -> Any:
            return await arun_tool(pipeline, request, handler)

        nodes.tools = ToolNode(list(tools), wrap_tool_call=wrap, awrap_tool_call=awrap)
    return nodes


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

    Nodes: ``retrieve`` -> ``safe_summarize`` (restricted turns only) -> ``build_context``
    -> ``call_model``, plus a ``tools`` node looping back to ``call_model`` when ``tools``
    are given, and ``record_memory`` with an ``EpisodicMemory``. The state is
    :class:`KnowledgeState`. The stored history holds only the conversation.

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
    nodes = create_knowledge_nodes(
        model, knowledge_base, settings=settings, system_prompt=system_prompt,
        summarizer_model=summarizer_model, blocks=blocks, tools=tools,
        keep_manifest=keep_manifest, **options,
    )  # fmt: skip
    builder = StateGraph(KnowledgeState, context_schema=context_schema)
    for step in STEPS:
        builder.add_node(step, getattr(nodes, step))
    builder.add_edge(START, "retrieve")
    builder.add_conditional_edges("retrieve", nodes.route_after_retrieve, list(STEPS[1:3]))
    builder.add_edge("safe_summarize", "build_context")
    builder.add_edge("build_context", "call_model")
    done = END
    if nodes.record_memory is not None:
        done = "record_memory"
        builder.add_node("record_memory", nodes.record_memory)
        builder.add_edge("record_memory", END)
    if nodes.tools is not None:
        from langgraph.prebuilt import tools_condition

        builder.add_node("tools", nodes.tools)
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
