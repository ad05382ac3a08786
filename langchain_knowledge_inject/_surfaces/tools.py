r"""The ``knowledge_base_search`` tool: lets the model search the knowledge base itself.

Automatic injection puts the best chunks of the current user message in front of
the model. The tool is for what injection did not cover: a follow-up lookup with
other words, a category, more results. It skips the chunks already injected in
the same turn, so the model never pays twice for the same passage.

How it knows what was injected (no global state, nothing to clear):

1. The turn's injection manifest in the graph state (``knowledge_manifest``,
   written every turn by :func:`create_knowledge_graph` and by
   :class:`KnowledgeInjectionMiddleware`), read through the ``ToolRuntime`` that
   LangGraph's ``ToolNode`` (and ``create_agent``) hands to the tool.
2. The tool's own earlier results of the same turn: the ``ToolMessage``\\s of this
   tool after the last user message carry their ``Document``\\s as artifact.

Called outside a graph (``tool.invoke({...})``) there is no state: nothing is
skipped.

Restricted mode is decided on every call by
:func:`~langchain_knowledge_inject._restricted.scope.resolve_restricted`: the knowledge
base's stored flag (read now), the tool's own ``restricted``, and
``configurable["restricted"]`` of the config the tool is invoked with (or of its
``ToolRuntime``); any "on" wins. A restricted graph or agent runs the tool
restricted whatever it was built with, and lends it its summarizer model.

The application's pinned ``filter`` is always ANDed with the model's ``category``;
the model can narrow a search, never widen it. The result fits ``max_tokens``: the
passages are cut at passage boundaries, and a first passage longer than the whole
budget is cut to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._surfaces.search import (
    DEFAULT_DESCRIPTION,
    KnowledgeBaseSearchInput,
    SearchMode,
    build_search_tool,
    pinned_and,
)

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool
    from typing_extensions import Unpack

    from langchain_knowledge_inject.settings import KnowledgeSettings, SettingsOptions

__all__ = [
    "DEFAULT_DESCRIPTION",
    "KnowledgeBaseSearchInput",
    "SearchMode",
    "create_knowledge_base_search_tool",
    "pinned_and",
]


def create_knowledge_base_search_tool(
    knowledge_base: Any,
    *,
    settings: KnowledgeSettings | None = None,
    name: str = "knowledge_base_search",
    description: str = DEFAULT_DESCRIPTION,
    filter: Mapping[str, Any] | None = None,
    summarizer_model: BaseChatModel | None = None,
    **options: Unpack[SettingsOptions],
) -> BaseTool:
    r"""Create the ``knowledge_base_search`` tool over a knowledge base.

    The tool returns ``content_and_artifact``: the content is text for the model,
    one entry per passage with its citation id, source, category and score; the
    artifact is the list of ``Document``\\s. Chunks already injected in the same
    turn (and chunks this tool already returned in the same turn) are skipped; see
    the module docstring for how the tool knows them.

    In restricted mode the tool never returns passages: the model gets the safe
    summary of the matching chunks (``restricted.summary.safe_summary_block``) and the
    artifact is the summary as a dict. Without a usable summarizer it fails
    closed (a refusal with reason ``summarizer_error``).

    Args:
        knowledge_base: The knowledge source(s): a ``KnowledgeBase``, a LangChain
            ``BaseRetriever`` or ``VectorStore``, or a sequence mixing these (see
            :mod:`~langchain_knowledge_inject._turn.sources`).
        settings: The :class:`~langchain_knowledge_inject.settings.KnowledgeSettings`
            shared with the other surfaces. The tool uses ``top_k`` (its default
            number of passages; the model may ask for 1 to 50), ``min_score``,
            ``mode``, ``tenant_id`` and ``restricted``; per-request overrides of
            ``config["configurable"]`` apply as for injection.
        **options: Fields of ``settings`` given directly (``top_k=2``).
        name: Tool name the model sees.
        description: Tool description the model sees.
        filter: A metadata filter always applied: the model's ``category`` is ANDed
            with it (it narrows the pinned filter, never replaces it).
        summarizer_model: The secondary model that writes safe summaries
            (restricted mode); without one, the hosting restricted graph's or
            agent's is used, else the tool fails closed. ``settings.restricted``
            is also on when a knowledge base is marked restricted, per request with
            ``configurable["restricted"] = True``, and when a restricted graph or
            agent runs the tool. ``settings.max_tokens`` (at least 100) is the token
            budget of one result (passages or safe summary).

    Returns:
        A ``StructuredTool`` with a sync and an async implementation.

    Raises:
        ConfigurationError: An option has a value that is not allowed.

    Example:
        .. code-block:: python

            from langchain_core.embeddings import DeterministicFakeEmbedding
            from langchain_core.documents import Document
            from langchain_knowledge_inject import (
                KnowledgeBase,
                create_knowledge_base_search_tool,
            )

            kb = KnowledgeBase("hr", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=64))
            doc = Document("Annual leave is 25 days.", metadata={"source": "leave.md"})
            kb.add_documents([doc])
            tool = create_knowledge_base_search_tool(kb, top_k=2)
            print(tool.invoke({"query": "annual leave"}))
    """
    return build_search_tool(
        knowledge_base, settings=settings, name=name, description=description, filter=filter,
        summarizer_model=summarizer_model, **options,
    )  # fmt: skip
