"""``KnowledgeInjector``: the Runnable that puts retrieved knowledge in front of the model.

Each turn runs the one pipeline every surface shares
(:class:`~langchain_knowledge_inject._surfaces.pipeline.KnowledgePipeline`): the
request's settings, the retrieval query, the search of every source, restricted
mode's boundary, the context blocks under one budget, placement and the manifest.
The input messages are never changed, and ``strip_injected(output)`` gives them back
(the system message keeps the static knowledge prompt).
:meth:`KnowledgeInjector.with_sources` returns the answer together with the
documents it was given, and :func:`cited_documents` the ones it cites.
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableGenerator, ensure_config
from langchain_core.runnables.utils import AddableDict

from langchain_knowledge_inject._surfaces.pipeline import (
    KnowledgePipeline,
    PreparedTurn,
    coerce_messages,
)
from langchain_knowledge_inject._turn.formatting import cited

if TYPE_CHECKING:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForChainRun,
        CallbackManagerForChainRun,
    )
    from langchain_core.runnables.utils import ConfigurableFieldSpec

logger = logging.getLogger("langchain_knowledge_inject")


def cited_documents(
    result: Mapping[str, Any] | Any, context: Sequence[Document] | None = None
) -> list[Document]:
    """The documents an answer cites by their citation ids (``[K1a2b]``), in citation order.

    Args:
        result: What :meth:`KnowledgeInjector.with_sources` returned (``answer`` and
            ``context``), or the answer itself (a message or a string) with ``context``.
        context: The documents that were injected (when ``result`` is the answer).

    Example:
        >>> doc = Document("25 days of leave.", id="c1", metadata={"source": "leave.md"})
        >>> [d.id for d in cited_documents("It is 25 days [Kd0f6].", [doc])]
        ['c1']
    """
    if isinstance(result, Mapping):
        answer, context = result.get("answer"), result.get("context") or []
    else:
        answer = result
    text = answer.text if isinstance(answer, BaseMessage) else str(answer or "")
    return cited(text, list(context or []))


class KnowledgeInjector(Runnable[Any, list[BaseMessage]]):
    r"""Retrieve for the current user message and return the messages to send.

    Input: a list of messages (or message-like tuples/dicts), a ``{"messages":
    [...]}`` dict, a string or a chat ``PromptValue``. Output: the messages to send,
    the knowledge placed at ``placement`` (by default in the current user message), so
    ``prompt | injector | model`` works. The system message gets ``knowledge_prompt``
    once, on every turn with injection on, so the prefix stays byte-identical.
    Injections of earlier turns found in the input are removed first. In a
    ``StateGraph(MessagesState)`` of your own, use ``create_knowledge_node`` rather
    than ``injector | model`` as a node (a node must return a state update).

    Context blocks (``blocks=``): a ``ProcedureLibrary``, an ``EpisodicMemory``, a
    ``UserFacts`` (or any ``ContextBlock``) add their blocks beside the knowledge, in
    the order ``[Procedure]``, ``[Retrieved Knowledge]``, ``[Past Conversation
    Snippets]``, ``[User Facts]``. One ``max_tokens`` budget covers them all (caps per
    block first, then the lowest ``priority`` is cut first, item by item); the
    manifest's ``dropped`` says what was cut. In restricted mode the knowledge goes
    through the safe summary, which is cut last and never dropped; the other blocks
    (the application's procedures, the same user's own snippets and facts) are
    injected as usual.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> from langchain_knowledge_inject._turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
        >>> class TinyKB:  # a KnowledgeBase in real use
        ...     def search(self, query, **kwargs):
        ...         return [Document("Staff get 25 days of leave.", id="c1",
        ...                          metadata={"source": "leave.md", "score": 0.9})]
        ...     async def asearch(self, query, **kwargs):
        ...         return self.search(query, **kwargs)
        >>> injector = KnowledgeInjector(TinyKB(), top_k=3, max_tokens=1500)
        >>> messages = [SystemMessage(KNOWLEDGE_SYSTEM_PROMPT), HumanMessage("Leave days?")]
        >>> out = injector.invoke(messages)
        >>> [m.type for m in out], out[1].content[0]["text"].splitlines()[0]
        (['system', 'human'], '[Retrieved Knowledge]')
        >>> injector.invoke(messages, {"configurable": {"knowledge_enabled": False}}) == messages
        True
        >>> turn = injector.prepare(messages)  # the same, plus documents and manifest
        >>> turn.manifest.chunk_ids, turn.manifest.sources
        (['c1'], ['leave.md'])
        >>> model = GenericFakeChatModel(messages=iter(["25 days (Source: leave.md)."]))
        >>> (injector | model).invoke(messages).content
        '25 days (Source: leave.md).'

        The answer with the documents it was given (as ``create_retrieval_chain`` does),
        and the ones it cites:

        >>> model = GenericFakeChatModel(messages=iter(["25 days [Kd0f6]."]))
        >>> result = injector.with_sources(model).invoke(messages)
        >>> [d.id for d in result["context"]], [d.id for d in cited_documents(result)]
        (['c1'], ['c1'])

        With user facts (``EpisodicMemory`` and ``ProcedureLibrary`` plug in the same way):

        >>> from langgraph.store.memory import InMemoryStore
        >>> from langchain_knowledge_inject import UserFacts
        >>> facts = UserFacts(InMemoryStore())
        >>> _ = facts.set("u1", "team", "Payroll")
        >>> with_facts = KnowledgeInjector(TinyKB(), blocks=[facts])
        >>> out = with_facts.invoke(messages, {"configurable": {"user_id": "u1"}})
        >>> out[1].content[0]["text"].split("\n\n")[-1]
        '[User Facts]\nteam=Payroll'

    Args:
        knowledge_base: The knowledge source(s): a ``KnowledgeBase``, a LangChain
            ``BaseRetriever`` or ``VectorStore``, or a sequence mixing these; results of
            several are merged. Restricted mode is on whenever one is restricted.
        settings: The :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`.
        **options: Fields of ``settings`` given directly (``top_k=3``); they
            override those of ``settings``.
        token_counter: Counts tokens; an approximate count by default.
        template: The knowledge block template.
        extra_blocks: Blocks added after the other blocks in the same message:
            strings, or callables ``(config) -> str | None`` run every turn
            (user or permission context). They accompany content: with nothing
            retrieved and no other block there is no message at all.
        blocks: Context blocks: ``ProcedureLibrary``, ``EpisodicMemory``, ``UserFacts``
            or your own; at most one per name.
        summarizer_model: Restricted mode: the secondary chat model that writes the
            safe summary. Without one, restricted turns fail closed (``refuse`` /
            ``summarizer_error``).
        block_order: The order of the content blocks by name (``None``: the fixed order).
        block_separator: What joins two blocks (a blank line by default).

    Raises:
        ConfigurationError: An option has a value that is not allowed.
    """

    _warned_node = False
    """Whether the "graph state as input" warning was given (once per injector)."""

    def __init__(self, knowledge_base: Any, **options: Any) -> None:
        self.pipeline = KnowledgePipeline(knowledge_base, **options)

    def __repr__(self) -> str:
        return repr(self.pipeline).replace("KnowledgePipeline", "KnowledgeInjector", 1)

    @property
    def settings(self) -> Any:
        """The constructor's :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`."""
        return self.pipeline.settings

    @property
    def knowledge_bases(self) -> tuple[Any, ...]:
        """The sources as given (knowledge bases, retrievers, vector stores)."""
        return self.pipeline.knowledge_bases

    @property
    def records_turns(self) -> bool:
        """Whether a block records finished turns (an ``EpisodicMemory``)."""
        return self.pipeline.records_turns

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The per-request settings, declared as configurable fields (defaults: the settings)."""
        return self.settings.config_specs()

    # -- one turn ------------------------------------------------------------------------------
    def prepare(
        self, input: Any, config: RunnableConfig | None = None, *, context: Any = None
    ) -> PreparedTurn:
        """Run one turn: the messages to send, the documents, the injected text, the manifest."""
        request = self.pipeline.request(config, context=context)
        return self.pipeline.prepare(coerce_messages(input), request)

    async def aprepare(
        self, input: Any, config: RunnableConfig | None = None, *, context: Any = None
    ) -> PreparedTurn:
        """Async twin of :meth:`prepare`."""
        request = await self.pipeline.arequest(config, context=context)
        return await self.pipeline.aprepare(coerce_messages(input), request)

    def record_turn(self, messages: Any, config: RunnableConfig | None = None) -> list[str]:
        """Store a finished turn in the blocks that record (an ``EpisodicMemory``)."""
        request = self.pipeline.request(config)
        return self.pipeline.record_turn(coerce_messages(messages), request)

    async def arecord_turn(self, messages: Any, config: RunnableConfig | None = None) -> list[str]:
        """Async twin of :meth:`record_turn`."""
        request = await self.pipeline.arequest(config)
        return await self.pipeline.arecord_turn(coerce_messages(messages), request)

    # -- Runnable ------------------------------------------------------------------------------
    def _warn_if_graph_node(self, input: Any, config: RunnableConfig) -> None:
        """``injector | model`` as a graph node returns a bare message that LangGraph drops."""
        node = (config.get("metadata") or {}).get("langgraph_node")
        if node is None or not isinstance(input, dict) or self._warned_node:
            return
        self._warned_node = True
        logger.warning(
            "KnowledgeInjector got the graph state of node %r as input: if `injector | model` "
            "is the node, its reply is a bare message that LangGraph drops and never reaches "
            "'messages'; use create_knowledge_node(model, knowledge_base) as the node instead",
            node,
        )

    def _messages_out(
        self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> list[BaseMessage]:
        self._warn_if_graph_node(input, config)
        return self.prepare(input, config).messages

    async def _amessages_out(
        self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> list[BaseMessage]:
        self._warn_if_graph_node(input, config)
        return (await self.aprepare(input, config)).messages

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        """Return the messages to send for this turn (traced as a ``KnowledgeInjector`` run)."""
        return self._call_with_config(self._messages_out, input, ensure_config(config))

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        """Async twin of :meth:`invoke`."""
        return await self._acall_with_config(self._amessages_out, input, ensure_config(config))

    # -- the answer with its sources -------------------------------------------------------------
    def with_sources(self, model: Runnable[Any, Any]) -> Runnable[Any, dict[str, Any]]:
        """A Runnable that answers and returns the documents it was given.

        Its output is ``{"answer": <the model's reply>, "context": [<documents>],
        "manifest": <the turn's manifest as a dict>}``, as ``create_retrieval_chain``
        returns ``context``; streamed, ``context`` and ``manifest`` first, then the reply's
        chunks (``{"answer": <chunk>}``), which ``invoke`` adds up. In a restricted turn
        ``context`` holds stubs (a keyed reference and a score, never the text) and
        ``safe_summary`` what was released. Pass the result to :func:`cited_documents`
        for the documents the answer cites.
        """

        def answer(inputs: Iterator[Any], config: RunnableConfig) -> Iterator[dict[str, Any]]:
            turn = self.prepare(functools.reduce(operator.add, inputs), config)
            yield _with_sources(turn)
            yield from (AddableDict(answer=c) for c in model.stream(turn.messages, config))

        async def aanswer(
            inputs: AsyncIterator[Any], config: RunnableConfig
        ) -> AsyncIterator[dict[str, Any]]:
            turn = await self.aprepare(
                functools.reduce(operator.add, [i async for i in inputs]), config
            )
            yield _with_sources(turn)
            async for chunk in model.astream(turn.messages, config):
                yield AddableDict(answer=chunk)

        return RunnableGenerator(answer, aanswer, name="knowledge_answer")  # type: ignore[arg-type]


def _with_sources(turn: PreparedTurn) -> AddableDict:
    out = AddableDict(
        context=list(turn.retrieved if turn.manifest.restricted else turn.documents),
        manifest=turn.manifest.to_dict(),
    )
    if turn.safe_summary is not None:
        out["safe_summary"] = turn.safe_summary.model_dump()
    return out
