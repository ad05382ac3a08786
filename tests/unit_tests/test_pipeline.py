"""The turn's plain functions, the one pipeline every surface shares, restricted mode's boundary."""

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
from langchain_knowledge_inject._restricted.boundary import arelease, release
from langchain_knowledge_inject._surfaces.pipeline import KnowledgePipeline, pipeline_for
from langchain_knowledge_inject._turn.assemble import (
    AssembledContext,
    RestrictedKnowledge,
    assemble_context,
)
from langchain_knowledge_inject._turn.formatting import DEFAULT_KNOWLEDGE_TEMPLATE
from langchain_knowledge_inject._turn.tokens import approximate_token_count
from tests.unit_tests.restricted_fixtures import RESTRICTED_DOCUMENTS, make_summarizer

CHUNKS = [
    Document(
        "Staff get 25 days of annual leave.", id="c1", metadata={"source": "leave.md", "score": 0.9}
    ),
    Document(
        "Expense claims need a receipt.", id="c2", metadata={"source": "expenses.md", "score": 0.7}
    ),
]


class TinyKB:
    def search(self, query, **kwargs):
        return list(CHUNKS)

    async def asearch(self, query, **kwargs):
        return self.search(query, **kwargs)


def _assemble(documents, **overrides):
    options = {
        "restricted": None,
        "blocks": [],
        "block_errors": [],
        "before": [],
        "after": [],
        "max_tokens": 2000,
        "counter": approximate_token_count,
        "template": DEFAULT_KNOWLEDGE_TEMPLATE,
        "priorities": {},
        "caps": {},
    }
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


def test_the_pipeline_places_the_text_and_writes_the_manifest() -> None:
    messages = [SystemMessage("sys"), HumanMessage("Leave days?")]
    pipeline = KnowledgePipeline(TinyKB(), placement="dynamic_context")
    turn = pipeline.prepare(messages, pipeline.request())
    assert [m.type for m in turn.messages] == ["system", "human", "human"]
    assert turn.messages[1].content == turn.dynamic_context
    assert turn.manifest.chunk_ids == ["c1", "c2"] and turn.manifest.query == "Leave days?"
    assert messages == [SystemMessage("sys"), HumanMessage("Leave days?")]  # input untouched


# --- the pipeline the surfaces share ------------------------------------------------------


def test_the_surfaces_share_one_pipeline() -> None:
    injector = KnowledgeInjector(TinyKB(), top_k=2)
    assert pipeline_for(injector) is injector.pipeline
    assert KnowledgeInjectionMiddleware(injector).pipeline is injector.pipeline
    built = KnowledgeInjectionMiddleware(TinyKB(), top_k=2).pipeline
    assert type(built) is KnowledgePipeline and built.settings.top_k == 2
    with pytest.raises(ConfigurationError, match="top_k"):
        pipeline_for(injector, options={"top_k": 3})


def test_a_pipeline_runs_the_same_turn_as_the_runnable() -> None:
    messages = [SystemMessage("sys"), HumanMessage("Leave days?")]
    pipeline = KnowledgePipeline(TinyKB(), top_k=2)
    by_pipeline = pipeline.prepare(messages, pipeline.request())
    by_runnable = KnowledgeInjector(TinyKB(), top_k=2).prepare(messages)
    assert by_pipeline.messages == by_runnable.messages
    assert by_pipeline.manifest.chunk_ids == by_runnable.manifest.chunk_ids == ["c1", "c2"]


async def test_the_request_is_resolved_once_from_configurable_and_the_runtime_context() -> None:
    pipeline = KnowledgePipeline(TinyKB(), top_k=2)
    config = {"configurable": {"top_k": 3, "user_id": "from-config"}}
    request = await pipeline.arequest(config, context={"top_k": 5, "user_id": "u7"})
    assert request.settings.top_k == 5  # the context wins
    assert request.config["configurable"]["user_id"] == "u7"  # memory blocks read it there
    with pytest.raises(ConfigurationError) as info:
        pipeline.request(None, context={"top_k": 0})
    assert info.value.option == "top_k"
    assert pipeline.request(None, context={"restricted": True}).restricted is True


def test_a_node_built_from_sources_runs() -> None:
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    model = GenericFakeChatModel(messages=iter([AIMessage("25 days.")]))
    node = create_knowledge_node(model, TinyKB())
    update = node.invoke({"messages": [HumanMessage("Leave days?")]})
    assert update["messages"][-1].content == "25 days."


# --- restricted mode: one boundary -----------------------------------------------------


def test_no_summarizer_model_refuses() -> None:
    released = release("q", RESTRICTED_DOCUMENTS, model=None)
    assert (released.summary.decision, released.summary.reason) == ("refuse", "summarizer_error")
    assert released.codes == ("no_model",)
    assert released.text.startswith("[Restricted Knowledge Summary]")


@pytest.mark.parametrize("kind", ["raising", "garbage", "copying"])
async def test_a_failing_summarizer_refuses_sync_and_async(kind: str) -> None:
    for released in (
        release("q", RESTRICTED_DOCUMENTS, model=make_summarizer(kind)),
        await arelease("q", RESTRICTED_DOCUMENTS, model=make_summarizer(kind)),
    ):
        assert released.summary.decision == "refuse"
        assert all(doc.page_content[:40] not in released.text for doc in RESTRICTED_DOCUMENTS)
        assert all(
            doc.page_content[:40] not in str(released.event()) for doc in RESTRICTED_DOCUMENTS
        )


def test_an_error_after_the_summary_refuses_too() -> None:
    def broken(text: str) -> int:
        raise RuntimeError(RESTRICTED_DOCUMENTS[0].page_content)  # a message quoting a chunk

    released = release(
        "q", RESTRICTED_DOCUMENTS, model=make_summarizer("honest"), max_tokens=50, counter=broken
    )
    assert (released.summary.decision, released.summary.reason) == ("refuse", "summarizer_error")
    assert released.codes == ("model_error",)
    assert RESTRICTED_DOCUMENTS[0].page_content[:40] not in released.text


def test_a_bad_timeout_is_the_callers_error() -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        release("q", RESTRICTED_DOCUMENTS, model=make_summarizer("honest"), timeout=-1)
