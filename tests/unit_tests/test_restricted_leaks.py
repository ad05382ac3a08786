"""Raw restricted text must reach no observer: run collectors, tracers, callbacks, events.

``callbacks=[]`` does not keep a run unobserved: LangChain adds the handlers of its
configure hooks (``collect_runs``, ``tracing_v2_enabled``, LangSmith tracing) to
every run, and a runnable called without a config (an LLM reranker) inherits the
caller's callbacks from the context. Everything that handles raw chunks of a
restricted turn (the source's own search, the reranker, the summarizer) runs where
none of these sees it.
"""

from __future__ import annotations

import asyncio
import json
import traceback
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.globals import set_debug
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.tracers.context import collect_runs

from langchain_knowledge_inject import KnowledgeInjector
from langchain_knowledge_inject.errors import RestrictedKnowledgeError, RetrievalError

SECRET = "Zanzibar"
NUMBER = "7348912"
DOCS = [
    Document(
        f"Project {SECRET} has a budget of {NUMBER} euros. Only the CFO may approve spending.",
        metadata={"source": "budget.md"},
    )
]
QUESTION = "What is the budget of the project?"
REPLY = json.dumps(
    {
        "decision": "answer",
        "reason": "answerable",
        "summary": "Spending needs approval from finance leadership before it goes ahead.",
        "answer_guidance": "Advise asking finance.",
        "confidence": 0.8,
    }
)
OPTIONS: dict[str, Any] = {"top_k": 3, "min_score": 0.0, "mode": "keyword"}


def _summarizer() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(REPLY)] * 4))


def _leaks(text: str) -> bool:
    return SECRET in text or NUMBER in text


def _runs_text(runs: list[Any]) -> str:
    out: list[str] = []

    def walk(run: Any) -> None:
        out.append(f"{run.name} {run.inputs!r} {run.outputs!r}")
        for child in run.child_runs:
            walk(child)

    for run in runs:
        walk(run)
    return "\n".join(out)


class _Recorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.seen.append(str(messages))

    def on_retriever_end(self, documents: Any, **kwargs: Any) -> None:
        self.seen.append(str(documents))


def _llm_reranker() -> Any:
    judge = GenericFakeChatModel(messages=iter([AIMessage("1")] * 20))

    def rerank(query: str, docs: list[Document]) -> list[Document]:
        for doc in docs:  # the way an LLM reranker asks a model, with no config of its own
            judge.invoke(f"How relevant is this to {query}? {doc.page_content}")
        return docs

    return rerank


def test_run_collector_sees_no_raw_text_of_summarizer_or_source(make_kb) -> None:
    kb = make_kb(DOCS, restricted=True)
    injector = KnowledgeInjector(kb.as_retriever(), summarizer_model=_summarizer(), **OPTIONS)
    with collect_runs() as collector:
        messages = injector.invoke(QUESTION)
    assert "[Restricted Knowledge Summary]" in messages[-1].text
    assert collector.traced_runs  # the injector's own run is still collected
    assert not _leaks(_runs_text(collector.traced_runs))


def test_async_run_collector_sees_no_raw_text(make_kb) -> None:
    kb = make_kb(DOCS, restricted=True)
    injector = KnowledgeInjector(kb.as_retriever(), summarizer_model=_summarizer(), **OPTIONS)

    async def run() -> Any:
        with collect_runs() as collector:
            await injector.ainvoke(QUESTION)
        return collector.traced_runs

    runs = asyncio.run(run())
    assert runs
    assert not _leaks(_runs_text(runs))


def test_llm_reranker_of_a_restricted_turn_is_unobserved(make_kb) -> None:
    kb = make_kb(DOCS, restricted=True)
    options = {**OPTIONS, "reranker": _llm_reranker()}
    injector = KnowledgeInjector(kb, summarizer_model=_summarizer(), **options)
    recorder = _Recorder()
    injector.invoke(QUESTION, config={"callbacks": [recorder]})
    assert recorder.seen  # the retrieval run (stubs) is still reported
    assert not _leaks("\n".join(recorder.seen))

    async def events() -> str:
        return "\n".join([repr(e) async for e in injector.astream_events(QUESTION)])

    assert not _leaks(asyncio.run(events()))


# --- errors of a restricted turn ------------------------------------------------------------


class _CheckingRetriever(BaseRetriever):
    """A retriever of the user's whose validation error quotes the chunk it read."""

    retriever: Any

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        docs = self.retriever.invoke(query)
        msg = f"chunk failed validation: {docs[0].page_content!r}"
        raise ValueError(msg)


def _chain(error: BaseException) -> str:
    """The error, its causes and contexts, and its formatted traceback, as one text."""
    parts = ["".join(traceback.format_exception(error))]
    seen: BaseException | None = error
    while seen is not None and len(parts) < 10:
        parts.append(repr(seen))
        seen = seen.__cause__ or seen.__context__
    return "\n".join(parts)


def _raised(injector: KnowledgeInjector) -> BaseException:
    with pytest.raises(RetrievalError) as info:
        injector.invoke(QUESTION)
    return info.value


def test_failing_source_of_a_restricted_turn_raises_without_its_text(make_kb) -> None:
    kb = make_kb(DOCS, restricted=True)
    sources = [kb, _CheckingRetriever(retriever=kb.as_retriever())]
    options = {**OPTIONS, "on_error": "raise"}
    error = _raised(KnowledgeInjector(sources, summarizer_model=_summarizer(), **options))
    assert "ValueError" in str(error)  # the class still says what failed
    assert not _leaks(_chain(error))


def test_failing_reranker_of_a_restricted_turn_raises_without_its_text(make_kb) -> None:
    kb = make_kb(DOCS, restricted=True)

    def reranker(query: str, docs: list[Document]) -> list[Document]:
        msg = f"cannot rank {docs[0].page_content}"
        raise ValueError(msg)

    options = {**OPTIONS, "on_error": "raise", "reranker": reranker}
    error = _raised(KnowledgeInjector(kb, summarizer_model=_summarizer(), **options))
    assert "ValueError" in str(error)
    assert not _leaks(_chain(error))


# --- restriction turned on by another object or process ----------------------------------


def test_restrict_by_another_object_applies_to_the_next_turn(make_kb, tmp_path) -> None:
    reader = make_kb(DOCS, path=tmp_path / "shared")
    injector = KnowledgeInjector(reader, **OPTIONS)
    assert _leaks(injector.invoke(QUESTION)[-1].text)  # unrestricted: raw text, as it should
    retriever = reader.as_retriever()
    assert _leaks(str(retriever.invoke(QUESTION)))
    make_kb(path=tmp_path / "shared").restrict()  # another process's KnowledgeBase
    assert reader.restriction.restricted is True  # no stale cached flag
    assert not _leaks(injector.invoke(QUESTION)[-1].text)
    with pytest.raises(RestrictedKnowledgeError):
        retriever.invoke(QUESTION)


def test_langchain_debug_printer_sees_no_raw_text(make_kb, capsys) -> None:
    kb = make_kb(DOCS, restricted=True)
    options = {**OPTIONS, "reranker": _llm_reranker()}
    injector = KnowledgeInjector(kb.as_retriever(), summarizer_model=_summarizer(), **options)
    set_debug(True)
    try:
        injector.invoke(QUESTION)
        asyncio.run(injector.ainvoke(QUESTION))
    finally:
        set_debug(False)
    printed = capsys.readouterr().out
    assert "[chain/start]" in printed  # the debug printer still runs for the turn itself
    assert not _leaks(printed)
