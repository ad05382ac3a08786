"""What a LangChain user expects of every surface: a reranker stage, sources back, alternation."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from langchain_knowledge_inject import (
    ConfigurationError,
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    RetrievalError,
    cited_documents,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
    create_knowledge_node,
)
from langchain_knowledge_inject._surfaces.pipeline import shown_keys, shown_this_turn
from langchain_knowledge_inject._turn.formatting import citation_id
from tests.unit_tests.fakes import FakeKB, NumberedChatModel, injected_text
from tests.unit_tests.restricted_fixtures import make_summarizer

DOCS = [
    Document(
        f"Policy {name}: rule text {i}.", id=name, metadata={"source": f"{name}.md", "score": s}
    )
    for i, (name, s) in enumerate([("alpha", 0.9), ("beta", 0.8), ("gamma", 0.7), ("delta", 0.6)])
]


def _kb() -> FakeKB:
    return FakeKB([d.model_copy() for d in DOCS])


class Reverser(BaseDocumentCompressor):
    """A deterministic reranker: the candidates in reverse order, scored 1, 0.9, 0.8..."""

    seen: list[int] = []  # noqa: RUF012 - how many candidates each call got

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        self.seen.append(len(documents))
        out = []
        for rank, doc in enumerate(reversed(documents)):
            meta = {**doc.metadata, "relevance_score": round(1.0 - rank / 10, 1)}
            out.append(Document(doc.page_content, id=doc.id, metadata=meta))
        return out


# --- reranking --------------------------------------------------------------------------


def test_the_reranker_sees_more_candidates_and_the_manifest_shows_both_scores():
    reranker = Reverser()
    turn = KnowledgeInjector(_kb(), top_k=2, reranker=reranker).prepare([HumanMessage("q")])
    assert reranker.seen == [4]  # four times top_k candidates, all the knowledge base had
    assert turn.manifest.chunk_ids == ["delta", "gamma"]
    assert turn.manifest.scores == [1.0, 0.9]  # the reranker's
    assert turn.manifest.retrieval_scores == [0.6, 0.7]  # the retrieval's, same order
    assert "Policy delta" in turn.dynamic_context and "Policy alpha" not in turn.dynamic_context


def test_a_callable_reranker_and_a_bad_one():
    def last_first(query: str, documents: list[Document]) -> list[Document]:
        return documents[::-1]

    turn = KnowledgeInjector(_kb(), top_k=1, reranker=last_first).prepare([HumanMessage("q")])
    assert turn.manifest.chunk_ids == ["delta"] and turn.manifest.retrieval_scores == [0.6]
    with pytest.raises(ConfigurationError) as info:
        KnowledgeInjector(_kb(), reranker="cross-encoder")
    assert info.value.option == "reranker" and "BaseDocumentCompressor" in str(info.value)


@pytest.mark.parametrize("surface", ["graph", "node", "middleware", "tool", "async"])
async def test_the_reranker_runs_on_every_surface(surface):
    options: dict[str, Any] = {"top_k": 1, "reranker": Reverser()}
    model = NumberedChatModel()
    question = {"messages": [HumanMessage("q")]}
    if surface == "graph":
        create_knowledge_graph(model, _kb(), **options).invoke(question)
    elif surface == "node":
        create_knowledge_node(model, _kb(), **options).invoke(question)
    elif surface == "middleware":
        agent = create_agent(model, middleware=[KnowledgeInjectionMiddleware(_kb(), **options)])
        agent.invoke(question)
    elif surface == "async":
        await create_knowledge_graph(model, _kb(), **options).ainvoke(question)
    else:
        tool = create_knowledge_base_search_tool(_kb(), **options)
        message = tool.invoke({"name": tool.name, "args": {"query": "q"}, "id": "1",
                               "type": "tool_call"})  # fmt: skip
        assert [d.id for d in message.artifact] == ["delta"]
        return
    assert "Policy delta" in injected_text(model.received[-1])


def test_the_reranker_runs_inside_restricted_mode_and_only_refs_leave():
    injector = KnowledgeInjector(
        _kb(), top_k=2, reranker=Reverser(), restricted=True,
        summarizer_model=make_summarizer("honest"),
    )  # fmt: skip
    turn = injector.prepare([HumanMessage("q")])
    assert turn.manifest.summary_decision == "answer"
    assert len(turn.manifest.chunk_ids) == 2 and not {"delta", "gamma"} & set(
        turn.manifest.chunk_ids
    )
    assert turn.manifest.scores == [1.0, 0.9] and "Policy" not in turn.dynamic_context


@pytest.mark.parametrize("surface", ["injector", "node", "middleware", "async graph"])
async def test_every_surface_keeps_roles_strictly_alternating(surface):
    model = AlternatingOnly()
    history: list[BaseMessage] = [HumanMessage("first?"), AIMessage("one"), HumanMessage("second?")]
    if surface == "injector":
        reply = await (KnowledgeInjector(_kb()) | model).ainvoke(history)
    elif surface == "node":
        reply = create_knowledge_node(model, _kb()).invoke({"messages": history})["messages"][-1]
    elif surface == "middleware":
        agent = create_agent(model, middleware=[KnowledgeInjectionMiddleware(_kb())])
        reply = agent.invoke({"messages": history})["messages"][-1]
    else:
        graph = create_knowledge_graph(model, _kb())
        reply = (await graph.ainvoke({"messages": history}))["messages"][-1]
    assert reply.content == "ok"
    assert "Policy alpha" in injected_text(model.received[-1])


class Broken(BaseDocumentCompressor):
    """A reranker that fails, quoting what it was given (as an exception message may)."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        raise RuntimeError(documents[0].page_content)


def test_a_failing_reranker_keeps_the_retrieval_order_and_says_so(caplog):
    turn = KnowledgeInjector(_kb(), top_k=2, reranker=Broken()).prepare([HumanMessage("q")])
    assert turn.manifest.chunk_ids == ["alpha", "beta"]  # the retrieval's order
    assert {"stage": "rerank", "error": "RuntimeError"} in turn.manifest.errors
    assert "reranker failed (RuntimeError)" in caplog.text and "Policy" not in caplog.text


@pytest.mark.parametrize("restricted", [False, True])
def test_a_failing_reranker_raises_when_asked_and_restricted_mode_drops_its_message(restricted):
    injector = KnowledgeInjector(
        _kb(), reranker=Broken(), on_error="raise", restricted=restricted,
        summarizer_model=make_summarizer("honest"),
    )  # fmt: skip
    with pytest.raises(RetrievalError, match=r"reranker failed \(RuntimeError\)") as info:
        injector.prepare([HumanMessage("q")])
    chain = []
    error: BaseException | None = info.value
    while error is not None:
        chain.append(str(error))
        error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    assert any("Policy" in text for text in chain) is not restricted


# --- sources back ---------------------------------------------------------------------------


def test_the_answer_comes_back_with_the_documents_it_was_given_and_the_cited_ones():
    cid = citation_id(DOCS[1])
    model = NumberedChatModel(script=[AIMessage(f"Beta says so [{cid}].")])
    result = KnowledgeInjector(_kb(), top_k=3).with_sources(model).invoke("Which policy?")
    assert result["answer"].content == f"Beta says so [{cid}]."
    assert [d.id for d in result["context"]] == ["alpha", "beta", "gamma"]
    assert result["manifest"]["chunk_ids"] == ["alpha", "beta", "gamma"]
    assert [d.id for d in cited_documents(result)] == ["beta"]
    assert cited_documents("no citation here", result["context"]) == []


async def test_restricted_sources_back_are_stubs_and_the_released_summary():
    model = NumberedChatModel()
    chain = KnowledgeInjector(_kb(), restricted=True, summarizer_model=make_summarizer("honest"))
    result = await chain.with_sources(model).ainvoke("Which policy?")
    assert result["context"] and all(d.page_content == "" for d in result["context"])
    assert result["safe_summary"]["decision"] == "answer"
    assert "Policy" not in repr(result["context"]) and "Policy" not in repr(result["manifest"])


# --- strict role alternation ----------------------------------------------------------------


class AlternatingOnly(BaseChatModel):
    """A model that, like many chat templates, refuses two user messages in a row."""

    received: list[list[BaseMessage]] = []  # noqa: RUF012

    @property
    def _llm_type(self) -> str:
        return "alternating-only"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        roles = [m.type for m in messages if m.type != "system"]
        if any(a == b == "human" for a, b in pairwise(roles)):
            msg = "Conversation roles must alternate user/assistant/user/assistant"
            raise ValueError(msg)
        self.received.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])


def test_the_default_placement_keeps_roles_strictly_alternating():
    model = AlternatingOnly()
    graph = create_knowledge_graph(model, _kb(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for question in ("first?", "second?", "third?"):
        assert (
            graph.invoke({"messages": [HumanMessage(question)]}, config)["messages"][-1].content
            == "ok"
        )
    assert "Policy alpha" in injected_text(model.received[-1])
    with pytest.raises(ValueError, match="alternate"):  # the old default was rejected
        create_knowledge_graph(model, _kb(), placement="dynamic_context").invoke(
            {"messages": [HumanMessage("first?")]}
        )
    reply = (KnowledgeInjector(_kb()) | model).invoke([HumanMessage("first?")])
    assert reply.content == "ok"


# --- merged results: one document, several chunks ---------------------------------------------


MERGED = [
    Document("Leave: 25 days. [...] Carry over 5.", id="a1",
             metadata={"source": "leave.md", "score": 0.9, "chunk_ids": ["a1", "a2"]}),
    Document("Travel: economy class.", id="t1",
             metadata={"source": "travel.md", "score": 0.8, "chunk_ids": ["t1"]}),
]  # fmt: skip


@pytest.mark.parametrize("restricted", [False, True])
def test_the_tool_skips_a_document_any_of_whose_chunks_was_shown(restricted):
    injector = KnowledgeInjector(
        FakeKB(MERGED), restricted=restricted, summarizer_model=make_summarizer("honest")
    )
    pipeline = injector.pipeline
    request = pipeline.request()
    seen = shown_keys([MERGED[0].model_copy(update={"id": "a2"})], restricted)
    assert seen == shown_keys([MERGED[0]], restricted)  # the same chunks, whichever leads
    found = pipeline.search("leave", request, skip=sorted(seen))
    kept = found.documents
    assert [d.metadata["source"] for d in kept] == ["travel.md"]


def test_a_turn_remembers_every_chunk_of_what_it_injected():
    injector = KnowledgeInjector(FakeKB(MERGED), top_k=1)
    messages = [HumanMessage("How many leave days?", id="m1")]
    injector.prepare(messages, {"configurable": {"thread_id": "merged"}})
    shown = shown_this_turn({"configurable": {"thread_id": "merged"}}, messages)
    assert shown == {"a1", "a2"}


def test_the_middleware_streams_the_manifest_on_the_custom_stream_mode():
    agent = create_agent(NumberedChatModel(), middleware=[KnowledgeInjectionMiddleware(_kb())])
    parts = list(agent.stream({"messages": [HumanMessage("q")]}, stream_mode="custom"))
    manifests = [p["knowledge_injection"] for p in parts if "knowledge_injection" in p]
    assert len(manifests) == 1 and manifests[0]["chunk_ids"][:2] == ["alpha", "beta"]


def test_cited_documents_reads_source_citations_as_the_knowledge_prompt_asks():
    docs = [d.model_copy(update={"metadata": {**d.metadata, "source": f"policies/{d.id}.md"}})
            for d in DOCS]  # fmt: skip
    answer = f"Beta applies (Source: beta.md), see also [{citation_id(docs[3])}]."
    assert [d.id for d in cited_documents(answer, docs)] == ["beta", "delta"]
    assert cited_documents("(Source: policies/alpha.md)", docs) == [docs[0]]
    assert cited_documents("(Source: unknown.md)", docs) == []
