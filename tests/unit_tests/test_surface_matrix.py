"""Source kind x surface x restricted: the model sees the knowledge, or only the safe summary.

Sources: a ``KnowledgeBase``, a LangChain retriever, a LangChain vector store.
Surfaces: the injector, the graph, the middleware, the tool, and the node in the
user's own ``StateGraph(MessagesState)``. Restricted: off (the raw passage reaches
the model) or on (only the safe summary does, never a raw passage).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.graph import START, MessagesState, StateGraph

from langchain_knowledge_inject import (
    KnowledgeBase,
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
    create_knowledge_node,
)
from tests.unit_tests.fakes import RecordingChatModel, WordHashEmbedding
from tests.unit_tests.restricted_fixtures import HONEST_SUMMARY, count_raw_passages, make_summarizer

QUESTION = "How many days of annual leave do employees receive?"
TEXTS = [
    "Employees receive 25 days of annual leave per calendar year, booked in the HR portal.",
    "Sick leave requires a doctor's note after three consecutive days of absence.",
    "Expenses above 50 euros need a receipt and the approval of a line manager.",
]
SOURCES = ("knowledge_base", "retriever", "vector_store")
SURFACES = ("injector", "graph", "middleware", "tool", "messages_state_node")


def _docs() -> list[Document]:
    return [Document(t, metadata={"source": f"p{i}.md"}) for i, t in enumerate(TEXTS)]


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Any]:
    kb = KnowledgeBase("hr", path=tmp_path_factory.mktemp("matrix"), embeddings=WordHashEmbedding())
    kb.add_documents(_docs())
    store = InMemoryVectorStore(WordHashEmbedding())
    store.add_documents(_docs())
    other = InMemoryVectorStore(WordHashEmbedding())
    other.add_documents(_docs())
    yield {
        "knowledge_base": kb,
        "retriever": other.as_retriever(search_kwargs={"k": 3}),
        "vector_store": store,
    }
    kb.close()


def _seen(surface: str, source: Any, options: dict[str, Any]) -> str:
    """Everything the main model is given on one turn (the question itself removed)."""
    if surface == "tool":
        tool = create_knowledge_base_search_tool(source, **options)
        return str(tool.invoke({"query": QUESTION}))
    model = RecordingChatModel()
    turn = {"messages": [HumanMessage(QUESTION)]}
    if surface == "injector":
        model.invoke(KnowledgeInjector(source, **options).invoke([HumanMessage(QUESTION)]))
    elif surface == "graph":
        create_knowledge_graph(model, source, **options).invoke(turn)
    elif surface == "middleware":
        agent = create_agent(model, middleware=[KnowledgeInjectionMiddleware(source, **options)])
        agent.invoke(turn)
    else:
        builder = StateGraph(MessagesState)
        builder.add_node("model", create_knowledge_node(model, source, **options))
        builder.add_edge(START, "model")
        state = builder.compile().invoke(turn)
        assert [m.type for m in state["messages"]] == ["human", "ai"]  # clean, reply stored
    (received,) = model.received
    return "\n".join(m.text for m in received if m.text != QUESTION)


@pytest.mark.parametrize("restricted", [False, True], ids=["open", "restricted"])
@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("kind", SOURCES)
def test_the_model_sees_the_knowledge_or_only_the_summary(sources, kind, surface, restricted):
    options: dict[str, Any] = {"top_k": 3, "min_score": 0.0}
    summarizer = make_summarizer("honest")
    if restricted:
        options |= {"restricted": True, "summarizer_model": summarizer}
    seen = _seen(surface, sources[kind], options)
    if restricted:
        # the summarizer got the chunks of this source; the model got only its summary
        assert any(TEXTS[0] in m.text for request in summarizer.requests for m in request)
        assert HONEST_SUMMARY in seen
        assert count_raw_passages(seen, TEXTS) == 0
    else:
        assert TEXTS[0] in seen
        assert HONEST_SUMMARY not in seen
