"""``create_knowledge_graph``: a LangGraph graph that injects knowledge on every turn.

The graph::

    START -> retrieve -> [safe_summarize] -> build_context -> call_model -> [record_memory] -> END
                                                    (tools <-> call_model, with tools=)

``retrieve`` searches with the current user message, ``safe_summarize`` (restricted
mode only; a conditional edge skips it otherwise) turns the chunks into a safe
summary, ``build_context`` assembles the dynamic_context text (with the context
blocks given as ``blocks=``: procedure, past-conversation snippets, user facts) and
the manifest, ``call_model`` sends ``[system prompt] + history + dynamic_context``
to the model, and ``record_memory`` (only with an ``EpisodicMemory`` among the
blocks) stores the finished exchange after the final answer.

Restricted mode keeps raw chunk text inside the step that summarizes it: ``retrieve``
only works out the query, and ``safe_summarize`` searches and summarizes in one
step, writing the safe summary and stubs of the chunks (ids and scores, see
:func:`~langchain_knowledge_inject._restricted.scope.redact_documents`) to the state.
So no raw text reaches the state, the checkpoints, any stream mode or
``astream_events``; the summarizer runs isolated from the caller's callbacks. The
``tools`` node runs every tool of a restricted turn restricted (see
:func:`~langchain_knowledge_inject._restricted.scope.run_tool_restricted`), so a
``knowledge_base_search`` tool built separately returns safe summaries too.

Only the model's reply is added to ``messages``: the injected text lives in the
per-turn state fields (overwritten every turn), never in the history. The stored
history after a turn is exactly the history of the same conversation without
injection, so it never grows with injected text and a checkpointer stores it as is.

The node factories (:func:`create_retrieve_node`, :func:`create_safe_summarize_node`,
:func:`create_build_context_node`, :func:`create_call_model_node`,
:func:`create_record_memory_node`, :func:`create_route_after_retrieve`) are public:
put them into your own graph whose state extends :class:`KnowledgeState` (in a
state without its fields they raise ``ConfigurationError`` at the first run). To
add injection to a plain ``StateGraph(MessagesState)``, use the one node
:func:`~langchain_knowledge_inject._surfaces.node.create_knowledge_node` instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.graph import END, START, MessagesState, StateGraph

from langchain_knowledge_inject._restricted.scope import is_redacted, redact_documents
from langchain_knowledge_inject._surfaces.engine import (
    InjectionEngine,
    engine_for,
    fail_closed_knowledge,
)
from langchain_knowledge_inject._surfaces.hosting import (
    as_message,
    tool_call_wrappers,
    write_stream,
)
from langchain_knowledge_inject._surfaces.search import build_search_tool
from langchain_knowledge_inject._turn.assemble import PreparedTurn, RestrictedKnowledge
from langchain_knowledge_inject._turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
from langchain_knowledge_inject._turn.logs import (
    log_model_request,
    log_model_response,
    log_turn,
    model_io_enabled,
)
from langchain_knowledge_inject._turn.manifest import aemit_manifest, emit_manifest
from langchain_knowledge_inject._turn.placement import (
    extend_system_message,
    place_context,
    strip_injected,
)
from langchain_knowledge_inject._turn.retrieval import RetrievalOutcome
from langchain_knowledge_inject.errors import ConfigurationError
from langchain_knowledge_inject.settings import KnowledgeSettings

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool
    from langgraph.graph.state import CompiledStateGraph
    from typing_extensions import Unpack

    from langchain_knowledge_inject._turn.blocks import ContextBlock
    from langchain_knowledge_inject.settings import SettingsOptions

__all__ = [
    "KnowledgeState",
    "compose_messages",
    "create_build_context_node",
    "create_call_model_node",
    "create_knowledge_graph",
    "create_record_memory_node",
    "create_retrieve_node",
    "create_route_after_retrieve",
    "create_safe_summarize_node",
]

logger = logging.getLogger("langchain_knowledge_inject")


class KnowledgeState(MessagesState):
    """State of the knowledge graph: the conversation plus this turn's knowledge.

    Every field but ``messages`` is per turn: ``retrieve`` resets them and the
    other nodes overwrite them, so nothing accumulates from turn to turn.
    """

    retrieved: list[Document]
    """The chunks retrieved for the current user message, best first (restricted mode:
    stubs with ids and scores only, never the text)."""
    retrieval_query: str | None
    """The query sent to the knowledge base, or ``None`` when retrieval did not run."""
    retrieval_error: str | None
    """Why retrieval failed (``on_error="degrade"``), else ``None``."""
    safe_summary: dict[str, Any] | None
    """Restricted mode: ``{"text", "decision", "reason"}`` of the safe summary."""
    dynamic_context: str | None
    """The text injected in front of the model this turn, or ``None``."""
    knowledge_manifest: dict[str, Any] | None
    """This turn's manifest (:class:`~.turn.manifest.InjectionManifest`) as a dict."""
    retrieval_query_source: str | None
    """How the query was made (``"message"``, ``"heuristic"``, ``"model"``, ``"cache"``)."""
    turn_started_at: float | None
    """When ``retrieve`` started this turn (``time.time()``), for the turn's log line."""


def compose_messages(
    history: Sequence[BaseMessage],
    dynamic_context: str | None,
    *,
    system_prompt: str | None = None,
    knowledge_prompt: str | None = KNOWLEDGE_SYSTEM_PROMPT,
    placement: str = "dynamic_context",
) -> list[BaseMessage]:
    r"""The exact messages the model receives: system prompt, history, dynamic context.

    The system message is ``system_prompt`` followed by a blank line and
    ``knowledge_prompt`` (both static, so byte-identical on every turn). When
    ``system_prompt`` is ``None`` and the history starts with a system message,
    ``knowledge_prompt`` is appended to that one instead of adding a second.
    Injections of earlier turns found in ``history`` are removed first.

    Args:
        history: The stored conversation (``state["messages"]``).
        dynamic_context: The text to inject, or ``None``.
        system_prompt: Your system prompt.
        knowledge_prompt: The static knowledge instructions (``None``: leave out).
        placement: ``"dynamic_context"``, ``"postfix"`` or ``"system"``.

    Returns:
        The messages to send.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> msgs = compose_messages([HumanMessage("Leave?")], "[Retrieved Knowledge]\\n...",
        ...                         system_prompt="You are HR.")
        >>> [m.type for m in msgs]
        ['system', 'human', 'human']
    """
    messages = strip_injected(history)
    if system_prompt is None and messages and isinstance(messages[0], SystemMessage):
        messages = [extend_system_message(messages[0], knowledge_prompt), *messages[1:]]
    else:
        text = "\n\n".join(p for p in (system_prompt, knowledge_prompt) if p)
        if text:
            messages = [SystemMessage(text), *messages]
    if dynamic_context:
        messages = place_context(messages, dynamic_context, placement=placement)  # type: ignore[arg-type]
    return messages


class _FromSettings:
    """Marker default: take ``knowledge_prompt`` from the injector's settings."""

    def __repr__(self) -> str:
        return "FROM_SETTINGS"


FROM_SETTINGS = _FromSettings()


def _prompt(injector: InjectionEngine, knowledge_prompt: str | _FromSettings | None) -> str | None:
    if isinstance(knowledge_prompt, _FromSettings):
        return injector.settings.knowledge_prompt
    return knowledge_prompt


def _messages_of(state: Any, node: str) -> Any:
    if not isinstance(state, dict) or "messages" not in state:
        msg = f"the {node!r} node needs a 'messages' field in the graph state"
        raise ConfigurationError(msg, option="state", value=sorted(state or ()))
    return state["messages"]


def _require(state: dict[str, Any], keys: Sequence[str], node: str) -> None:
    """Fail loudly where the state lacks our per-turn fields (a plain ``MessagesState``)."""
    missing = [key for key in keys if key not in state]
    if missing:
        msg = (
            f"the {node!r} node found no {', '.join(repr(k) for k in missing)} in the graph "
            "state: the state must extend KnowledgeState and the retrieve / build_context "
            "nodes must run first; in a plain StateGraph(MessagesState) add the one node "
            "create_knowledge_node(model, knowledge_base) instead"
        )
        raise ConfigurationError(msg, option="state", value=sorted(state))


# --- nodes ---------------------------------------------------------------------------------


def create_retrieve_node(injector: InjectionEngine) -> Runnable[Any, dict[str, Any]]:
    """The ``retrieve`` node: search with the current user message.

    Writes ``retrieved``, ``retrieval_query``, ``retrieval_error`` and resets the
    other per-turn fields. Honors ``config["configurable"]`` overrides
    (``knowledge_enabled``, ``top_k``, ``min_score``, ``tenant_id``).

    Example:
        >>> node = create_retrieve_node(injector)  # doctest: +SKIP
        >>> builder.add_node("retrieve", node)  # doctest: +SKIP
    """

    def _update(outcome: RetrievalOutcome, started: float) -> dict[str, Any]:
        return {
            "retrieved": list(outcome.documents),
            "retrieval_query": outcome.query,
            "retrieval_error": outcome.error,
            "safe_summary": None,
            "dynamic_context": None,
            "knowledge_manifest": None,
            "retrieval_query_source": outcome.query_source,
            "turn_started_at": started,
        }

    def retrieve(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        started = time.time()
        settings = injector.resolve(config)
        messages = _messages_of(state, "retrieve")
        if settings.restricted:  # searched by safe_summarize, so raw text never enters state
            return _update(RetrievalOutcome(query=injector.query(messages, settings)), started)
        return _update(injector.retrieve(messages, settings, config), started)

    async def aretrieve(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        started = time.time()
        settings = injector.resolve(config)
        messages = _messages_of(state, "retrieve")
        if settings.restricted:
            return _update(RetrievalOutcome(query=injector.query(messages, settings)), started)
        return _update(await injector.aretrieve(messages, settings, config), started)

    return RunnableLambda(retrieve, afunc=aretrieve, name="retrieve")


def create_route_after_retrieve(
    injector: InjectionEngine,
) -> Callable[[dict[str, Any], RunnableConfig], Literal["safe_summarize", "build_context"]]:
    """The conditional edge after ``retrieve``: ``safe_summarize`` only in restricted mode.

    Restricted mode can be switched on per request (``configurable["restricted"]``)
    or by a knowledge base's stored flag, so the decision is taken per run. A
    restricted turn with a query goes to ``safe_summarize``, which searches and
    summarizes; without a query (injection off) there is nothing to do.
    """

    def route_after_retrieve(
        state: dict[str, Any], config: RunnableConfig
    ) -> Literal["safe_summarize", "build_context"]:
        _require(state, ("retrieved", "retrieval_query"), "route_after_retrieve")
        if injector.resolve(config).restricted and (
            state.get("retrieval_query") is not None or state.get("retrieved")
        ):
            return "safe_summarize"
        return "build_context"

    return route_after_retrieve


def create_safe_summarize_node(injector: InjectionEngine) -> Runnable[Any, dict[str, Any]]:
    """The ``safe_summarize`` node (restricted mode): search, then summarize, in one step.

    Searches with ``retrieval_query`` (written by ``retrieve``), has the injector's
    ``summarizer_model`` write the safe summary
    (:func:`~langchain_knowledge_inject._restricted.summary.summarize_chunks`) and writes
    ``safe_summary`` plus stubs of the chunks to ``retrieved`` (ids and scores,
    never the text). Chunks a foreign ``retrieve`` node already put in the state
    are summarized instead, and replaced by stubs. Fails closed: without a
    summarizer, or on any error, the summary is a refusal with reason
    ``summarizer_error``, never the raw chunks.
    """

    def _inputs(state: dict[str, Any], config: RunnableConfig) -> tuple[Any, Any, bool]:
        settings = injector.resolve(config)
        docs = list(state.get("retrieved") or [])
        raw = bool(docs) and not is_redacted(docs)
        outcome = RetrievalOutcome(query=state.get("retrieval_query"), documents=docs)
        return settings, outcome, raw

    def _update(outcome: RetrievalOutcome, context: RestrictedKnowledge | None) -> dict[str, Any]:
        hidden = injector.sensitive_sources()
        summary = None
        if context is not None:
            summary = {"text": context.text, "decision": context.decision,
                       "reason": context.reason}  # fmt: skip
        update = {
            "retrieved": redact_documents(outcome.documents, sensitive_sources=hidden),
            "retrieval_error": outcome.error,
            "safe_summary": summary,
        }
        if outcome.query_source is not None:  # searched here: the query actually used
            update["retrieval_query"] = outcome.query
            update["retrieval_query_source"] = outcome.query_source
        return update

    def safe_summarize(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        _require(state, ("retrieved", "retrieval_query"), "safe_summarize")
        settings, outcome, raw = _inputs(state, config)
        if not raw and outcome.query is not None:
            outcome = injector.retrieve(state["messages"], settings, config)
        if not outcome.documents:
            return _update(outcome, None)
        return _update(outcome, injector.safe_summary(outcome.query, outcome.documents, config))

    async def asafe_summarize(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        _require(state, ("retrieved", "retrieval_query"), "safe_summarize")
        settings, outcome, raw = _inputs(state, config)
        if not raw and outcome.query is not None:
            outcome = await injector.aretrieve(state["messages"], settings, config)
        if not outcome.documents:
            return _update(outcome, None)
        context = await injector.asafe_summary(outcome.query, outcome.documents, config)
        return _update(outcome, context)

    return RunnableLambda(safe_summarize, afunc=asafe_summarize, name="safe_summarize")


def create_build_context_node(
    injector: InjectionEngine,
    *,
    system_prompt: str | None = None,
    knowledge_prompt: str | _FromSettings | None = FROM_SETTINGS,
) -> Runnable[Any, dict[str, Any]]:
    """The ``build_context`` node: the dynamic_context text and the turn's manifest.

    Renders the injector's context blocks (procedure, past-conversation snippets,
    user facts) from the stored history, fits them and the chunks into
    ``max_tokens`` (in restricted mode the knowledge block is the safe summary of
    ``safe_summarize``; a missing one fails closed), writes
    ``dynamic_context`` and ``knowledge_manifest``, and emits the manifest as the
    ``knowledge_injection`` custom event (``astream_events``, tracing) and on
    ``stream_mode="custom"``. ``system_prompt`` and ``knowledge_prompt`` must be
    those of ``call_model``: they are part of the hashed stable prefix
    (``knowledge_prompt`` defaults to the injector's ``settings.knowledge_prompt``).

    Raises:
        ConfigurationError: At run time, when the state has no ``retrieved`` /
            ``retrieval_query`` field (the graph's state must extend
            :class:`KnowledgeState`; in a plain ``MessagesState`` graph use
            :func:`~langchain_knowledge_inject._surfaces.node.create_knowledge_node`).
    """
    prompt = _prompt(injector, knowledge_prompt)

    def _inputs(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        _require(state, ("retrieved", "retrieval_query"), "build_context")
        settings = injector.resolve(config)
        history = strip_injected(state["messages"], headers=injector.strip_headers)
        messages = compose_messages(
            history, None, system_prompt=system_prompt,
            knowledge_prompt=prompt if settings.enabled else None, placement=settings.placement,
        )  # fmt: skip
        outcome = RetrievalOutcome(
            query=state.get("retrieval_query"),
            documents=list(state.get("retrieved") or []),
            error=state.get("retrieval_error"),
            query_source=state.get("retrieval_query_source"),
        )
        restricted = _restricted_from_state(state, settings)
        return {"messages": messages, "settings": settings, "outcome": outcome,
                "restricted": restricted, "config": config}  # fmt: skip

    def _update(turn: PreparedTurn, state: dict[str, Any]) -> dict[str, Any]:
        manifest = turn.manifest.to_dict()
        write_stream(manifest)
        started = state.get("turn_started_at")
        seconds = time.time() - started if isinstance(started, (int, float)) else 0.0
        log_turn(turn.manifest, surface="graph", seconds=max(seconds, 0.0))
        return {"dynamic_context": turn.dynamic_context, "knowledge_manifest": manifest}

    def build_context(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        turn = injector.finish_turn(**_inputs(state, config))
        emit_manifest(turn.manifest, config)
        return _update(turn, state)

    async def abuild_context(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        turn = await injector.afinish_turn(**_inputs(state, config))
        await aemit_manifest(turn.manifest, config)
        return _update(turn, state)

    return RunnableLambda(build_context, afunc=abuild_context, name="build_context")


def _restricted_from_state(
    state: dict[str, Any], settings: KnowledgeSettings
) -> RestrictedKnowledge | None:
    """The safe summary for a restricted turn; fail closed when there is none."""
    if not settings.restricted or not state.get("retrieved"):
        return None
    summary = state.get("safe_summary") or {}
    if summary.get("text") and summary.get("decision") in ("answer", "refuse"):
        return RestrictedKnowledge(summary["text"], summary["decision"], summary.get("reason"))
    logger.warning("restricted turn without a safe summary; refusing")
    return fail_closed_knowledge()


def create_call_model_node(
    model: Runnable[Any, Any],
    injector: InjectionEngine,
    *,
    system_prompt: str | None = None,
    knowledge_prompt: str | _FromSettings | None = FROM_SETTINGS,
) -> Runnable[Any, dict[str, Any]]:
    """The ``call_model`` node: send system prompt + history + dynamic context; keep the reply.

    Returns only ``{"messages": [reply]}``: the injected text never enters the
    history. Inside a tool loop the dynamic context stays next to the last user
    message. ``model`` is used as given (bind tools beforehand).

    Raises:
        ConfigurationError: At run time, when the state has no ``dynamic_context``
            field: the ``build_context`` node did not run or the state does not
            extend :class:`KnowledgeState` (in a plain ``MessagesState`` graph use
            :func:`~langchain_knowledge_inject._surfaces.node.create_knowledge_node`).
    """
    prompt = _prompt(injector, knowledge_prompt)

    def _messages(state: dict[str, Any], config: RunnableConfig) -> list[BaseMessage]:
        _require(state, ("dynamic_context",), "call_model")
        settings = injector.settings.with_overrides(config)  # no flag read needed
        history = strip_injected(state["messages"], headers=injector.strip_headers)
        base = compose_messages(
            history, None, system_prompt=system_prompt,
            knowledge_prompt=prompt if settings.enabled else None, placement=settings.placement,
        )  # fmt: skip
        return injector.shape(base, state.get("dynamic_context"), settings, config)

    def _log_io(config: RunnableConfig) -> tuple[bool, bool]:
        """(logging on, restricted turn) for the main model's request/response lines."""
        enabled = model_io_enabled(injector.settings.with_overrides(config).log_model_io)
        return enabled, enabled and injector.resolve(config).restricted

    def call_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        messages = _messages(state, config)
        on, restricted = _log_io(config)
        log_model_request(messages, surface="graph", restricted=restricted, enabled=on)
        reply = as_message(model.invoke(messages, config))
        log_model_response(reply, surface="graph", restricted=restricted, enabled=on)
        return {"messages": [reply]}

    async def acall_model(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        messages = _messages(state, config)
        on, restricted = _log_io(config)
        log_model_request(messages, surface="graph", restricted=restricted, enabled=on)
        reply = as_message(await model.ainvoke(messages, config))
        log_model_response(reply, surface="graph", restricted=restricted, enabled=on)
        return {"messages": [reply]}

    return RunnableLambda(call_model, afunc=acall_model, name="call_model")


def create_record_memory_node(injector: InjectionEngine) -> Runnable[Any, dict[str, Any]]:
    """The ``record_memory`` node: store the finished turn in the episodic memory.

    Runs after the final answer (after ``call_model`` and any tool loop) and
    calls :meth:`~.engine.InjectionEngine.record_turn` on the stored, injection-free
    history, with the user id and thread id of ``config["configurable"]``. It
    changes no state. Recording follows the memory's ``auto_record`` and the
    per-request ``configurable["episodic_record"]``.
    """

    def record_memory(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        injector.record_turn(state["messages"], config)
        return {}

    async def arecord_memory(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        await injector.arecord_turn(state["messages"], config)
        return {}

    return RunnableLambda(record_memory, afunc=arecord_memory, name="record_memory")


# --- the graph -----------------------------------------------------------------------------


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
    **options: Unpack[SettingsOptions],
) -> CompiledStateGraph:
    """Create a compiled LangGraph graph that injects knowledge before every model call.

    Nodes: ``retrieve`` -> ``safe_summarize`` (restricted mode only) ->
    ``build_context`` -> ``call_model``, plus a ``tools`` node looping back to
    ``call_model`` when ``tools`` are given. The state is :class:`KnowledgeState`.
    The stored history holds only the conversation; see the module docstring.

    Per-request overrides through ``config["configurable"]``: see
    :mod:`~langchain_knowledge_inject.settings` (declared by the injector's
    ``config_specs``).

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
    injector = engine_for(
        knowledge_base, settings=settings, summarizer_model=summarizer_model, blocks=blocks,
        options=dict(options),
    )  # fmt: skip
    chat_model = _chat_model(model)
    tools = _with_search_tool(injector, tools)
    bound = chat_model.bind_tools(list(tools)) if tools else chat_model
    prompts = {"system_prompt": system_prompt}

    builder = StateGraph(KnowledgeState)
    builder.add_node("retrieve", create_retrieve_node(injector))
    builder.add_node("safe_summarize", create_safe_summarize_node(injector))
    builder.add_node("build_context", create_build_context_node(injector, **prompts))
    builder.add_node("call_model", create_call_model_node(bound, injector, **prompts))
    builder.add_edge(START, "retrieve")
    builder.add_conditional_edges(
        "retrieve",
        create_route_after_retrieve(injector),
        {"safe_summarize": "safe_summarize", "build_context": "build_context"},
    )
    builder.add_edge("safe_summarize", "build_context")
    builder.add_edge("build_context", "call_model")
    done = END
    if injector.records_turns:
        done = "record_memory"
        builder.add_node("record_memory", create_record_memory_node(injector))
        builder.add_edge("record_memory", END)
    if tools:
        from langgraph.prebuilt import ToolNode, tools_condition

        wrap, awrap = tool_call_wrappers(injector)
        builder.add_node("tools", ToolNode(list(tools), wrap_tool_call=wrap, awrap_tool_call=awrap))
        builder.add_conditional_edges("call_model", tools_condition, {"tools": "tools", END: done})
        builder.add_edge("tools", "call_model")
    else:
        builder.add_edge("call_model", done)
    return builder.compile(checkpointer=checkpointer, store=store, name=name or "knowledge_graph")


def _with_search_tool(engine: InjectionEngine, tools: Sequence[Any] | None) -> Sequence[Any] | None:
    """Tool-driven retrieval (``retrieval="tool"``): the search tool joins the tools."""
    if engine.settings.retrieval != "tool":
        return tools
    if any(getattr(t, "name", None) == "knowledge_base_search" for t in tools or ()):
        return tools
    tool = build_search_tool(
        engine.knowledge_bases, settings=engine.settings, summarizer_model=engine.summarizer_model
    )
    return [*(tools or ()), tool]


def _chat_model(model: Any) -> Any:
    if isinstance(model, str):
        from langchain.chat_models import init_chat_model

        return init_chat_model(model)
    if not isinstance(model, Runnable):
        msg = f"model must be a chat model or a 'provider:model' string, got {type(model).__name__}"
        raise ConfigurationError(msg, option="model", value=model)
    return model
