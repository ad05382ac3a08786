"""The turn's plain functions, the shared engine, the fail-closed entry point, renamed names."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage, SystemMessage

from langchain_knowledge_inject import (
    ConfigurationError,
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    create_knowledge_node,
)
from langchain_knowledge_inject._restricted.summary import asafe_summary_block, safe_summary_block
from langchain_knowledge_inject._surfaces.engine import (
    InjectionEngine,
    engine_for,
    fail_closed_knowledge,
)
from langchain_knowledge_inject._turn.assemble import (
    AssembledContext,
    PreparedTurn,
    RestrictedKnowledge,
    assemble_context,
    prepare_turn,
)
from langchain_knowledge_inject._turn.formatting import DEFAULT_KNOWLEDGE_TEMPLATE
from langchain_knowledge_inject._turn.retrieval import RetrievalOutcome
from langchain_knowledge_inject._turn.tokens import approximate_token_count
from tests.unit_tests.restricted_fixtures import RESTRICTED_DOCUMENTS, make_summarizer

CHUNKS = [
    Document("Staff get 25 days of annual leave.", id="c1",
             metadata={"source": "leave.md", "score": 0.9}),
    Document("Expense claims need a receipt.", id="c2",
             metadata={"source": "expenses.md", "score": 0.7}),
]  # fmt: skip


class TinyKB:
    def search(self, query, **kwargs):
        return list(CHUNKS)

    async def asearch(self, query, **kwargs):
        return self.search(query, **kwargs)


def _assemble(documents, **overrides):
    options = {
        "restricted": None, "blocks": [], "block_errors": [], "before": [], "after": [],
        "max_tokens": 2000, "counter": approximate_token_count,
        "template": DEFAULT_KNOWLEDGE_TEMPLATE, "priorities": {}, "caps": {},
    }  # fmt: skip
    options.update(overrides)
    return assemble_context(documents, **options)


# --- the turn as plain functions -----------------------------------------------------------


def test_assemble_context_is_a_function_of_its_inputs() -> None:
    built = _assemble(CHUNKS)
    assert built.text is not None and built.text.startswith("[Retrieved Knowledge]")
    assert "25 days" in built.text and "receipt" in built.text
    assert [d.id for d in built.used] == ["c1", "c2"] and built.blocks == ["knowledge"]
    assert built == _assemble(CHUNKS)  # same inputs, same result: no hidden state


def test_assemble_context_cuts_chunks_to_the_budget_and_reports_them() -> None:
    one = approximate_token_count(_assemble(CHUNKS[:1]).text or "")
    built = _assemble(CHUNKS, max_tokens=one)
    assert [d.id for d in built.used] == ["c1"]
    assert [(d["chunk_id"], d["reason"]) for d in built.dropped] == [("c2", "token_budget")]


def test_restricted_knowledge_replaces_the_chunks() -> None:
    safe = RestrictedKnowledge("[Restricted Knowledge Summary]\nsafe words", "answer", "answerable")
    built = _assemble(CHUNKS, restricted=safe, after=[("extra", "user: u1")])
    assert built.text is not None and "safe words" in built.text
    assert "25 days" not in built.text and "receipt" not in built.text
    assert built.used == [] and [d.id for d in built.reported] == ["c1", "c2"]
    assert (built.decision, built.reason) == ("answer", "answerable")


def test_nothing_to_inject_gives_no_text_even_with_extra_blocks() -> None:
    built = _assemble([], after=[("extra", "user: u1")], before=[("kb_meta", "[KB] hr")])
    assert built == AssembledContext()


def test_prepare_turn_places_the_text_and_writes_the_manifest() -> None:
    messages = [SystemMessage("sys"), HumanMessage("Leave days?")]
    built = _assemble(CHUNKS)
    outcome = RetrievalOutcome(query="Leave days?", documents=list(CHUNKS))
    turn = prepare_turn(messages, outcome, built, placement="dynamic_context", restricted=False,
                        retrieved=CHUNKS, sources=["leave.md", "expenses.md"])  # fmt: skip
    assert isinstance(turn, PreparedTurn)
    assert [m.type for m in turn.messages] == ["system", "human", "human"]
    assert turn.messages[1].content == built.text and turn.dynamic_context == built.text
    assert turn.manifest.chunk_ids == ["c1", "c2"] and turn.manifest.query == "Leave days?"
    assert messages == [SystemMessage("sys"), HumanMessage("Leave days?")]  # input untouched


# --- the engine the surfaces share ---------------------------------------------------------


def test_the_injector_is_an_engine_and_the_surfaces_share_one() -> None:
    injector = KnowledgeInjector(TinyKB(), top_k=2)
    assert isinstance(injector, InjectionEngine)
    assert engine_for(injector) is injector
    assert KnowledgeInjectionMiddleware(injector).injector is injector
    built = KnowledgeInjectionMiddleware(TinyKB(), top_k=2).injector
    assert type(built) is InjectionEngine and built.settings.top_k == 2
    with pytest.raises(ConfigurationError, match="top_k"):
        engine_for(injector, options={"top_k": 3})


def test_an_engine_runs_the_same_turn_as_the_runnable() -> None:
    messages = [SystemMessage("sys"), HumanMessage("Leave days?")]
    by_engine = InjectionEngine(TinyKB(), top_k=2).prepare(messages)
    by_runnable = KnowledgeInjector(TinyKB(), top_k=2).prepare(messages)
    assert by_engine.messages == by_runnable.messages
    assert by_engine.manifest.chunk_ids == by_runnable.manifest.chunk_ids == ["c1", "c2"]


def test_a_node_built_from_sources_runs() -> None:
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    model = GenericFakeChatModel(messages=iter([AIMessage("25 days.")]))
    node = create_knowledge_node(model, TinyKB())
    update = node.invoke({"messages": [HumanMessage("Leave days?")]})
    assert update["messages"][-1].content == "25 days."


# --- restricted mode: one fail-closed entry point ------------------------------------------


def test_no_summarizer_model_refuses() -> None:
    text, shown = safe_summary_block("q", RESTRICTED_DOCUMENTS, model=None)
    assert (shown.decision, shown.reason) == ("refuse", "summarizer_error")
    assert text.startswith("[Restricted Knowledge Summary]")
    assert fail_closed_knowledge() == RestrictedKnowledge(text, "refuse", "summarizer_error")


@pytest.mark.parametrize("kind", ["raising", "garbage", "copying"])
async def test_a_failing_summarizer_refuses_sync_and_async(kind: str) -> None:
    for text, shown in (
        safe_summary_block("q", RESTRICTED_DOCUMENTS, model=make_summarizer(kind)),
        await asafe_summary_block("q", RESTRICTED_DOCUMENTS, model=make_summarizer(kind)),
    ):
        assert shown.decision == "refuse"
        assert all(doc.page_content[:40] not in text for doc in RESTRICTED_DOCUMENTS)


def test_an_error_after_the_summary_refuses_too() -> None:
    def broken(text: str) -> int:
        raise RuntimeError(RESTRICTED_DOCUMENTS[0].page_content)  # a message quoting a chunk

    text, shown = safe_summary_block("q", RESTRICTED_DOCUMENTS, model=make_summarizer("honest"),
                                     max_tokens=50, counter=broken)  # fmt: skip
    assert (shown.decision, shown.reason) == ("refuse", "summarizer_error")
    assert RESTRICTED_DOCUMENTS[0].page_content[:40] not in text


def test_a_bad_timeout_is_the_callers_error() -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        safe_summary_block("q", RESTRICTED_DOCUMENTS, model=make_summarizer("honest"), timeout=-1)
