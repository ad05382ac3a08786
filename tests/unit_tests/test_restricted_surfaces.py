"""Restricted mode across all four surfaces: no raw passage ever reaches the main model.

For every scripted summarizer (honest, copying, number-copying, obedient to
attack text, garbage, invalid, refusing, raising; JSON-text and structured
flavours) and every surface (injector, graph, middleware, tool), the text the
main model receives is searched for runs of 6+ words and for numbers copied
from the restricted chunks (including chunks carrying attack texts). The
target, asserted here, is 0 in every case. The slow summarizer (timeout) is
covered in ``test_restriction.py`` with a short timeout.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from langchain_knowledge_inject import (
    KnowledgeBase,
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
)
from tests.unit_tests.fakes import RecordingChatModel, WordHashEmbedding
from tests.unit_tests.restricted_fixtures import (
    ALL_DOCUMENTS,
    REPLIES,
    count_copied_values,
    count_raw_passages,
    make_summarizer,
)

QUESTION = (
    "What are the rules on annual leave, incidents, commission, support targets, remote work, "
    "expenses, the travel budget and the bonus pool?"
)
CHUNKS = [d.page_content for d in ALL_DOCUMENTS]
OPTIONS: dict[str, Any] = {"top_k": 8, "min_score": 0.0, "mode": "keyword"}
CASES = [(kind, structured) for kind in REPLIES for structured in (False, True)]
SURFACES = ("injector", "graph", "middleware", "tool")


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    base = KnowledgeBase(
        "ops", path=tmp_path_factory.mktemp("restricted"), embeddings=WordHashEmbedding()
    )
    base.add_documents([d.model_copy(update={"id": None}) for d in ALL_DOCUMENTS])
    yield base
    base.close()


def _seen_by_main_model(surface: str, kb: KnowledgeBase, summarizer: BaseChatModel) -> str:
    """Everything the main model is given on one turn, as one text (the question removed)."""
    restricted = {"restricted": True, "summarizer_model": summarizer}
    if surface == "tool":
        tool = create_knowledge_base_search_tool(
            kb, top_k=8, min_score=0.0, mode="keyword", **restricted
        )
        return str(tool.invoke({"query": QUESTION}))
    model = RecordingChatModel()
    if surface == "injector":
        messages = KnowledgeInjector(kb, **OPTIONS, **restricted).invoke([HumanMessage(QUESTION)])
        model.invoke(messages)
    elif surface == "graph":
        graph = create_knowledge_graph(model, kb, **OPTIONS, **restricted)
        graph.invoke({"messages": [HumanMessage(QUESTION)]})
    else:
        middleware = KnowledgeInjectionMiddleware(kb, **OPTIONS, **restricted)
        create_agent(model, middleware=[middleware]).invoke({"messages": [HumanMessage(QUESTION)]})
    (received,) = model.received
    return "\n".join(m.text for m in received if m.text != QUESTION)


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize(("kind", "structured"), CASES)
def test_no_raw_passage_reaches_the_main_model(kb, surface, kind, structured):
    seen = _seen_by_main_model(surface, kb, make_summarizer(kind, structured=structured))
    assert "[Restricted Knowledge Summary]" in seen  # the turn did go through restricted mode
    assert count_raw_passages(seen, CHUNKS) == 0
    assert count_copied_values(seen, CHUNKS) == 0


def test_the_measure_would_see_a_leak(kb):
    """The counters are not blind: raw chunks shown unrestricted are counted."""
    messages = KnowledgeInjector(kb, **OPTIONS).invoke([HumanMessage(QUESTION)])
    seen = "\n".join(m.text for m in messages if m.text != QUESTION)
    assert count_raw_passages(seen, CHUNKS) >= 5
    assert count_copied_values(seen, CHUNKS) >= 5
