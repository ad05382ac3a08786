"""Every source on one score scale, or honestly unscored; a passage from several sources once.

Real parts with fake embeddings: a ``langchain_chroma.Chroma`` store (in memory) and its
``as_retriever()``, LangChain's ``BM25Retriever`` and ``EnsembleRetriever``, a
``KnowledgeBase``. ``WordHashEmbedding`` makes a cosine reflect shared words, so an
unrelated question scores about 0, as it does with the real model.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain_classic.retrievers import EnsembleRetriever
from langchain_community.retrievers import BM25Retriever
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage

from langchain_knowledge_inject import KnowledgeInjector, create_knowledge_base_search_tool
from langchain_knowledge_inject._turn.retrieval import (
    ChromaSource,
    RetrieverSource,
    SearchSpec,
    as_sources,
    merge_results,
)
from tests.unit_tests.fakes import EXPENSES, LEAVE, SICK, WordHashEmbedding, hr_documents

UNRELATED = "What is the capital of France?"
LEAVE_QUESTION = "How many days of annual leave per calendar year?"


def _chroma() -> Any:
    from langchain_chroma import Chroma

    store = Chroma(f"c-{uuid.uuid4().hex[:8]}", WordHashEmbedding())
    store.add_documents(hr_documents("leave", "sick", "expenses"))
    return store


def _bm25() -> BM25Retriever:
    return BM25Retriever.from_documents(hr_documents("leave", "sick", "expenses"), k=3)


def _block(source: Any, question: str, **options: Any) -> str:
    turn = KnowledgeInjector(source, **options).prepare([HumanMessage(question)])
    return turn.dynamic_context or ""


# --- a retriever over a vector store: its store's scores -------------------------------------


def test_chroma_as_retriever_with_min_score_injects_nothing_for_an_unrelated_question():
    retriever = _chroma().as_retriever()
    (source,) = as_sources(retriever)
    assert isinstance(source, ChromaSource) and source.given is retriever
    related = _block(retriever, LEAVE_QUESTION, min_score=0.5)
    assert LEAVE in related and "Relevance Score: 0.00" not in related
    assert "Relevance Score: 0." in related  # its real score, shown
    assert _block(retriever, UNRELATED, min_score=0.5) == ""


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_vector_store_retrievers_search_kwargs_hold(asynchronous):
    store = _chroma()

    async def found(retriever: Any, spec: SearchSpec) -> list[Document]:
        (source,) = as_sources(retriever)
        if asynchronous:
            return await source.asearch(LEAVE_QUESTION, spec)
        return source.search(LEAVE_QUESTION, spec)

    one = await found(store.as_retriever(search_kwargs={"k": 1}), SearchSpec(k=4))
    assert [d.page_content for d in one] == [LEAVE] and 0.3 < one[0].metadata["score"] < 1
    sick = await found(
        store.as_retriever(search_kwargs={"filter": {"source": "sick.md"}}), SearchSpec(k=4)
    )
    assert [d.page_content for d in sick] == [SICK]
    both = await found(  # the retriever's filter and the surface's, both
        store.as_retriever(search_kwargs={"filter": {"category": "leave"}}),
        SearchSpec(k=4, filter={"source": "leave.md"}),
    )
    assert [d.page_content for d in both] == [LEAVE]
    every = await found(store.as_retriever(search_kwargs={"k": 3}), SearchSpec(k=4))
    floor = sorted(d.metadata["score"] for d in every)[1]
    threshold = store.as_retriever(
        search_type="similarity_score_threshold", search_kwargs={"score_threshold": floor}
    )
    kept = await found(threshold, SearchSpec(k=4))
    assert [d.metadata["score"] for d in kept] == [
        d.metadata["score"] for d in every if d.metadata["score"] >= floor
    ]


def test_an_mmr_retriever_runs_itself_and_is_scored_by_its_stores_model():
    retriever = _chroma().as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 3})
    (source,) = as_sources(retriever)
    assert isinstance(source, RetrieverSource) and isinstance(source.embeddings, WordHashEmbedding)
    docs = source.search(LEAVE_QUESTION, SearchSpec(k=4, min_score=0.3))
    assert [d.page_content for d in docs] == [LEAVE] and docs[0].metadata["score"] > 0.3
    unscored = source.search(LEAVE_QUESTION, SearchSpec(k=4))  # no threshold: no scoring
    assert len(unscored) == 2 and all("score" not in d.metadata for d in unscored)


# --- retrievers without scores ------------------------------------------------------------------


def test_bm25_beside_a_knowledge_base_is_scored_with_the_knowledge_bases_model(make_kb, caplog):
    kb = make_kb(hr_documents("parking"))
    bm25 = _bm25()
    sources = as_sources([kb, bm25])
    assert sources[1].embeddings is kb.embeddings
    with caplog.at_level("WARNING"):
        block = _block([kb, bm25], LEAVE_QUESTION, min_score=0.4, top_k=4)
        off = _block([kb, bm25], "parking garage badges facilities", min_score=0.4)
    assert LEAVE in block and SICK not in block and EXPENSES not in block  # BM25's tail dropped
    assert "Relevance Score: 0.00" not in block and "Relevance Score: 0." in block
    assert LEAVE not in off  # BM25 always answers; the cosine says it is unrelated
    assert not [r for r in caplog.records if "is not applied" in r.getMessage()]


def test_an_ensemble_with_a_store_is_scored_by_that_stores_model():
    ensemble = EnsembleRetriever(retrievers=[_bm25(), _chroma().as_retriever()])
    (source,) = as_sources(ensemble)
    assert isinstance(source.embeddings, WordHashEmbedding)
    assert _block(ensemble, UNRELATED, min_score=0.3) == ""
    block = _block(ensemble, LEAVE_QUESTION, min_score=0.3)
    assert LEAVE in block and block.count(LEAVE) == 1 and "Relevance Score: 0.00" not in block


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_retriever_nothing_can_score_is_shown_without_a_score_and_said_once(
    asynchronous, caplog
):
    injector = KnowledgeInjector(_bm25(), min_score=0.5, top_k=3)
    with caplog.at_level("WARNING"):
        for _ in range(2):
            if asynchronous:
                turn = await injector.aprepare([HumanMessage(LEAVE_QUESTION)])
            else:
                turn = injector.prepare([HumanMessage(LEAVE_QUESTION)])
    assert LEAVE in turn.dynamic_context and "Relevance Score" not in turn.dynamic_context
    warned = [r.getMessage() for r in caplog.records if "is not applied" in r.getMessage()]
    assert len(warned) == 1 and "'BM25Retriever'" in warned[0] and LEAVE not in warned[0]


# --- one passage, several sources ---------------------------------------------------------------


def test_one_passage_from_two_sources_appears_once_with_both_names_and_the_best_score():
    store = _chroma()
    wiki = [
        Document(LEAVE, metadata={"source": "wiki/leave.txt"}),
        Document(SICK, metadata={"source": "sick.md"}),
    ]
    sources = [store.as_retriever(search_kwargs={"k": 2}), BM25Retriever.from_documents(wiki, k=2)]
    assert as_sources(sources)[1].embeddings is store.embeddings  # no KB: another source's model
    turn = KnowledgeInjector(sources, min_score=0.2, top_k=4).prepare(
        [HumanMessage(LEAVE_QUESTION)]
    )
    block = turn.dynamic_context
    assert block.count(LEAVE) == 1 and block.count(SICK) == 1
    assert "Source: leave.md, wiki/leave.txt" in block and "Relevance Score: 0.00" not in block
    assert len(turn.manifest.chunk_ids) == len(set(turn.manifest.chunk_ids)) == 2
    tool = create_knowledge_base_search_tool(sources, min_score=0.2)
    assert str(tool.invoke({"query": LEAVE_QUESTION})).count(LEAVE) == 1


def test_merging_keeps_each_text_once_with_its_best_score_and_every_source():
    a = [Document(" 25 days\nof leave ", id="a1", metadata={"source": "a.md", "score": 0.4})]
    b = [
        Document("25 days of leave", id="b1", metadata={"source": "b.md", "score": 0.7}),
        Document("sick notes", id="b2", metadata={"source": "b.md", "score": 0.5}),
    ]
    unscored = [Document("25 days of leave", id="u1", metadata={"source": "a.md"})]
    merged = merge_results([a, b, unscored], 5)
    assert [d.id for d in merged] == ["a1", "b2"]  # one unscored: rank by rank, first copy kept
    assert merged[0].metadata["score"] == 0.7 and merged[0].metadata["sources"] == ["a.md", "b.md"]
    scored = merge_results([a, b], 5)
    assert [(d.id, d.metadata["score"]) for d in scored] == [("b1", 0.7), ("b2", 0.5)]
    assert "sources" not in merge_results([a, a], 5)[0].metadata  # one name: nothing to add


def test_a_text_within_a_passage_kept_already_is_merged_into_it():
    """A knowledge base's result joins a document's chunks; a store returns one of them."""
    joined = Document(f"{LEAVE}\n{SICK}", id="kb1", metadata={"source": "policy.md", "score": 0.8})
    chunk = Document(SICK, id="s1", metadata={"source": "sick.md", "score": 0.6})
    other = Document(EXPENSES, id="s2", metadata={"source": "expenses.md", "score": 0.5})
    merged = merge_results([[joined], [chunk, other]], 5)
    assert [d.id for d in merged] == ["kb1", "s2"]
    assert merged[0].metadata["sources"] == ["policy.md", "sick.md"]
    assert merged[0].metadata["chunk_ids"] == ["kb1", "s1"]  # the tool skips either copy
