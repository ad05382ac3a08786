"""``KnowledgeInjector``: the Runnable that puts retrieved knowledge in front of the model.

Each turn: resolve the settings (constructor values, then per-request overrides
from ``config["configurable"]``), retrieve with the text of the current user
message, render the context blocks (procedure, past-conversation snippets, user
facts), build the dynamic_context text (all blocks under one token budget, the
knowledge block cut at chunk boundaries), place it, and emit the manifest. The
input messages are never changed; ``strip_injected(output) == input``.

The steps are those of :class:`~langchain_knowledge_inject._surfaces.engine.InjectionEngine`
(shared with the graph, the node and the middleware); this module adds the Runnable.

Settings: one :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`
(``settings=``, or its fields as keyword arguments), with per-request overrides
from ``config["configurable"]`` parsed by ``KnowledgeSettings.with_overrides``
(see :mod:`~langchain_knowledge_inject.settings` for the keys). The sources: a
``KnowledgeBase``, a LangChain retriever or vector store, or a mix (see
:mod:`~langchain_knowledge_inject._turn.sources`); each search runs as a retriever run.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, ensure_config

from langchain_knowledge_inject._surfaces.engine import InjectionEngine
from langchain_knowledge_inject._turn.assemble import PreparedTurn, RestrictedKnowledge
from langchain_knowledge_inject._turn.retrieval import RetrievalOutcome
from langchain_knowledge_inject.settings import KnowledgeSettings

if TYPE_CHECKING:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForChainRun,
        CallbackManagerForChainRun,
    )
    from langchain_core.runnables.utils import ConfigurableFieldSpec


__all__ = [
    "KnowledgeInjector",
    "KnowledgeSettings",
    "PreparedTurn",
    "RestrictedKnowledge",
    "RetrievalOutcome",
]

logger = logging.getLogger("langchain_knowledge_inject")


class KnowledgeInjector(InjectionEngine, Runnable[Any, list[BaseMessage]]):
    r"""Retrieve for the current user message and return the messages to send.

    Input: a list of messages (or message-like tuples/dicts), a ``{"messages":
    [...]}`` dict, or a chat ``PromptValue``. Output: the list of messages with
    the dynamic_context injected, so ``prompt | injector | model`` works.
    The system message gets ``knowledge_prompt`` (default
    :data:`KNOWLEDGE_SYSTEM_PROMPT`, the same as the graph and the middleware:
    how to use and cite the knowledge), once, on every turn with injection on, so
    the prefix stays byte-identical; ``knowledge_prompt=None`` leaves it out. When
    nothing relevant is retrieved and no block has anything to add, only that
    prompt is added. Injections of earlier turns found in the input are removed
    first, so they never pile up. In a ``StateGraph(MessagesState)`` of your own,
    use :func:`~langchain_knowledge_inject._surfaces.node.create_knowledge_node` rather than
    ``injector | model`` as a node (a node must return a state update).

    Context blocks (``blocks=``; knowledge alone is on by default): a
    ``ProcedureLibrary``, an ``EpisodicMemory``, a ``UserFacts`` (or any
    :class:`~langchain_knowledge_inject._turn.blocks.ContextBlock`) add their blocks to
    the same message, in the order ``[Procedure]``, ``[Retrieved Knowledge]``,
    ``[Past Conversation Snippets]``, ``[User Facts]`` whatever the list order,
    on every turn with a query, retrieval hit or not. Each renders from the query,
    the visible history without injection and the run's config (user id:
    ``configurable["user_id"]``). One ``max_tokens`` budget covers the message:
    caps per block first, then the lowest ``priority`` is cut first (see
    :mod:`~langchain_knowledge_inject._turn.blocks`), snippets and chunks one by one.
    The manifest's ``dropped`` lists each cut chunk (``chunk_id``, ``score``,
    ``source``, ``reason``) and each other shortened block (``block``, ``reason``
    ``"block_cap"``/``"token_budget"``, ``removed``, ``kept``, ``dropped``); a
    failed block is ``{"block", "reason": "error", "error"}`` (raised with
    ``on_error="raise"``). :meth:`record_turn` stores a finished turn in the
    episodic memory; the graph and the middleware call it after the answer.

    Restricted mode (the safe default): knowledge goes through the safe summary,
    never as raw chunks; the summary is cut after every other block and never
    dropped. The procedure (the application's own text), the past-conversation
    snippets and the facts of the same user (their own data) are injected as
    usual. Leave a block out of ``blocks`` where even that is too much.

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
        >>> [m.type for m in out], out[1].content.splitlines()[0]
        (['system', 'human', 'human'], '[Retrieved Knowledge]')
        >>> injector.invoke(messages, {"configurable": {"knowledge_enabled": False}}) == messages
        True
        >>> turn = injector.prepare(messages)  # the same, plus documents and manifest
        >>> turn.manifest.chunk_ids, turn.manifest.sources
        (['c1'], ['leave.md'])
        >>> model = GenericFakeChatModel(messages=iter(["25 days (Source: leave.md)."]))
        >>> (injector | model).invoke(messages).content
        '25 days (Source: leave.md).'

        With user facts (``EpisodicMemory`` and ``ProcedureLibrary`` plug in the same way):

        >>> from langgraph.store.memory import InMemoryStore
        >>> from langchain_knowledge_inject import UserFacts
        >>> facts = UserFacts(InMemoryStore())
        >>> _ = facts.set("u1", "team", "Payroll")
        >>> with_facts = KnowledgeInjector(TinyKB(), blocks=[facts])
        >>> out = with_facts.invoke(messages, {"configurable": {"user_id": "u1"}})
        >>> out[1].content.split("\n\n")[-1]
        '[User Facts]\nteam=Payroll'

    Args:
        knowledge_base: The knowledge source(s): a ``KnowledgeBase``, a LangChain
            ``BaseRetriever`` or ``VectorStore``, or a sequence mixing these (see
            :mod:`~langchain_knowledge_inject._turn.sources`); results of several are merged.
        settings: The :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`
            (``top_k``, ``min_score``, ``mode``, ``tenant_id``, ``placement``,
            ``max_tokens``, ``restricted``, ``on_error``, ``include_kb_meta``,
            ``query_window``, ``knowledge_prompt``). ``restricted`` is also on when a
            bound knowledge base's info says so.
        **options: Fields of ``settings`` given directly (``top_k=3``); they
            override those of ``settings``.
        token_counter: Counts tokens; :func:`approximate_token_count` by default.
        template: The knowledge block template.
        extra_blocks: Blocks added after the other blocks in the same message:
            strings, or callables ``(config) -> str | None`` run every turn
            (user or permission context). They accompany content: with nothing
            retrieved and no other block there is no message at all.
        blocks: Context blocks (:class:`~langchain_knowledge_inject._turn.blocks.ContextBlock`):
            ``ProcedureLibrary``, ``EpisodicMemory``, ``UserFacts`` or your own;
            at most one per name (see above).
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

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The per-request settings, declared as configurable fields (defaults: the settings)."""
        return self.settings.config_specs()

    # -- Runnable ----------------------------------------------------------------------
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
        self,
        input: Any,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> list[BaseMessage]:
        """Return the messages to send for this turn (traced as a ``KnowledgeInjector`` run)."""
        return self._call_with_config(self._messages_out, input, ensure_config(config))

    async def ainvoke(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> list[BaseMessage]:
        """Async twin of :meth:`invoke`."""
        return await self._acall_with_config(self._amessages_out, input, ensure_config(config))
