"""``create_knowledge_node``: knowledge injection as one node of your own ``MessagesState`` graph.

::

    builder = StateGraph(MessagesState)
    builder.add_node("model", create_knowledge_node(model, kb))
    builder.add_edge(START, "model")

The node reads only ``state["messages"]`` and returns only ``{"messages": [reply]}``:
the model gets the knowledge on each call (a tool loop retrieves again for the same
user message), the injected text is never returned, so the stored history stays
clean, and no state keys of ours are needed (a state without ``messages`` is a
:class:`~langchain_knowledge_inject.errors.ConfigurationError` at the first run). The
manifest goes out as the ``knowledge_injection`` custom event; an ``EpisodicMemory``
among the blocks records the finished exchange. See docs/surfaces.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from langchain_knowledge_inject._surfaces.hosting import (
    acall_model_logged,
    as_message,
    call_model_logged,
    write_stream,
)
from langchain_knowledge_inject._surfaces.pipeline import (
    KnowledgePipeline,
    check_system_prompt,
    pipeline_for,
)
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from typing_extensions import Unpack

    from langchain_knowledge_inject._turn.blocks import ContextBlock
    from langchain_knowledge_inject.settings import KnowledgeSettings, SettingsOptions


def create_knowledge_node(
    model: Runnable[Any, Any],
    knowledge_base: Any,
    *,
    settings: KnowledgeSettings | None = None,
    system_prompt: str | None = None,
    summarizer_model: BaseChatModel | None = None,
    blocks: Sequence[ContextBlock] = (),
    name: str = "call_model",
    **options: Unpack[SettingsOptions],
) -> Runnable[Any, dict[str, Any]]:
    """A graph node that calls ``model`` with knowledge injected, for a ``MessagesState`` graph.

    See the module docstring for what it reads, writes and emits.

    Args:
        model: The chat model (bind tools beforehand if it calls tools).
        knowledge_base: The knowledge source(s) (a ``KnowledgeBase``, a LangChain
            ``BaseRetriever`` or ``VectorStore``, or a sequence of them), or a ready
            :class:`~langchain_knowledge_inject._surfaces.runnable.KnowledgeInjector`.
        settings: The :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`.
        system_prompt: Your system prompt, sent first (``settings.knowledge_prompt``
            is appended to it). ``None``: a system message at the start of the
            history is used as is.
        summarizer_model: Restricted mode: the secondary model writing safe summaries.
        blocks: Context blocks (``ProcedureLibrary``, ``EpisodicMemory``, ``UserFacts``).
        name: The node's run name.
        **options: Fields of ``settings`` given directly (``top_k=3``).

    Returns:
        A Runnable ``state -> {"messages": [reply]}`` (sync and async).

    Raises:
        ConfigurationError: An option is not allowed; at run time, a state without
            ``messages``.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage
        >>> from langgraph.graph import START, MessagesState, StateGraph
        >>> class TinyKB:  # a KnowledgeBase, retriever or vector store in real use
        ...     def search(self, query, **kwargs):
        ...         return [Document("Staff get 25 days of leave.", id="c1",
        ...                          metadata={"source": "leave.md", "score": 0.9})]
        ...     async def asearch(self, query, **kwargs):
        ...         return self.search(query, **kwargs)
        >>> model = GenericFakeChatModel(messages=iter([AIMessage("25 days (Source: leave.md).")]))
        >>> builder = StateGraph(MessagesState)
        >>> _ = builder.add_node("model", create_knowledge_node(model, TinyKB()))
        >>> _ = builder.add_edge(START, "model")
        >>> state = builder.compile().invoke({"messages": [("user", "Leave days?")]})
        >>> [m.type for m in state["messages"]], state["messages"][-1].content
        (['human', 'ai'], '25 days (Source: leave.md).')
    """
    pipeline = pipeline_for(
        knowledge_base,
        settings=settings,
        summarizer_model=summarizer_model,
        blocks=blocks,
        options=dict(options),
    )
    if not isinstance(model, Runnable):
        msg = f"model must be a chat model (a Runnable), got {type(model).__name__}"
        raise ConfigurationError(msg, option="model", value=model)
    check_system_prompt(system_prompt)
    node = _KnowledgeNode(model, pipeline, system_prompt)
    return RunnableLambda(node.call, afunc=node.acall, name=name)


class _KnowledgeNode:
    def __init__(
        self, model: Runnable[Any, Any], pipeline: KnowledgePipeline, system_prompt: str | None
    ) -> None:
        self.model = model
        self.pipeline = pipeline
        self.system_prompt = system_prompt

    def _done(self, state: Any, reply: BaseMessage) -> bool:
        return self.pipeline.records_turns and not getattr(reply, "tool_calls", None)

    def call(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        request = self.pipeline.request(config)
        turn = self.pipeline.prepare(
            self.pipeline.history(state, self.system_prompt), request, surface="node"
        )
        write_stream(turn.manifest.to_dict())
        reply = as_message(
            call_model_logged(
                lambda m: self.model.invoke(m, config), turn.messages, list, request, surface="node"
            )
        )
        if self._done(state, reply):
            self.pipeline.record_turn([*state["messages"], reply], request)
        return {"messages": [reply]}

    async def acall(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        request = await self.pipeline.arequest(config)
        turn = await self.pipeline.aprepare(
            self.pipeline.history(state, self.system_prompt), request, surface="node"
        )
        write_stream(turn.manifest.to_dict())
        reply = as_message(
            await acall_model_logged(
                lambda m: self.model.ainvoke(m, config),
                turn.messages,
                list,
                request,
                surface="node",
            )
        )
        if self._done(state, reply):
            await self.pipeline.arecord_turn([*state["messages"], reply], request)
        return {"messages": [reply]}
