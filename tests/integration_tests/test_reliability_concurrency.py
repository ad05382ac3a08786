"""Concurrency and load over one knowledge base, with the real embedding model.

* 200 concurrent ``asearch`` / ``ainvoke`` calls (asyncio.gather) and threaded
  ``batch`` calls give exactly the results of the same calls made one by one;
* ingestion while queries run: no error, no half-written chunk ever returned,
  and afterwards the three records agree and every new chunk is found;
* a second process on the same embedded store is refused, and the store stays intact;
* a 1 MB message is cut to the query the model reads (its cost: benchmarks/huge_message.py).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading

import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, HumanMessage

from langchain_knowledge_inject import (
    KnowledgeBase,
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    create_knowledge_graph,
)
from langchain_knowledge_inject._ingest.sample_data import SAMPLE_DOCUMENTS, SAMPLE_QUESTIONS
from langchain_knowledge_inject._store.knowledge_base import MAX_QUERY_CHARS
from tests.unit_tests.fakes import RecordingChatModel

pytestmark = pytest.mark.integration

TOPICS = [
    "parental leave", "travel expenses", "remote work", "sick leave", "laptop security",
    "pension plan", "parking badge", "training budget", "overtime pay", "probation period",
]  # fmt: skip
CONCURRENT = 200


def _questions() -> list[str]:
    """About 40 distinct questions, each asked about 5 times: 200 calls."""
    distinct = [q.question for q in SAMPLE_QUESTIONS]
    for topic in TOPICS:
        distinct += [f"What is the rule on {topic}?", f"Who approves {topic}?", f"{topic} limits"]
    distinct = distinct[:40]
    return [distinct[i % len(distinct)] for i in range(CONCURRENT)]


@pytest.fixture(scope="module")
def store(tmp_path_factory, real_embeddings):
    path = tmp_path_factory.mktemp("concurrency")
    kb = KnowledgeBase("hr", path=path, embeddings=real_embeddings)
    extra = [
        Document(
            f"Policy note {i} on {topic}: requests go to the {topic} desk within {i + 2} days.",
            metadata={"source": f"notes/{i:03d}.md", "category": topic.split()[0]},
        )
        for i, topic in enumerate(TOPICS * 12)
    ]  # fmt: skip
    kb.add_documents([*SAMPLE_DOCUMENTS, *extra])
    kb.close()
    return path


def _fresh_kb(store, real_embeddings) -> KnowledgeBase:
    """A new KnowledgeBase object: its query-embedding cache is empty, so calls really embed."""
    return KnowledgeBase("hr", path=store, embeddings=real_embeddings, create=False)


def _key(docs: list[Document]) -> list[tuple[str, float]]:
    return [(d.id, round(float(d.metadata["score"]), 5)) for d in docs]


def _contents(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.type, str(m.content)) for m in messages]


async def test_200_concurrent_asearch_equal_sequential_search(store, real_embeddings):
    questions = _questions()
    with _fresh_kb(store, real_embeddings) as kb:
        sequential = {q: _key(kb.search(q, k=5, min_score=0.0)) for q in dict.fromkeys(questions)}
    with _fresh_kb(store, real_embeddings) as kb:
        concurrent = await asyncio.gather(*(kb.asearch(q, k=5, min_score=0.0) for q in questions))
        dense = await asyncio.gather(*(kb.asearch(q, k=5, mode="dense") for q in questions))
    assert len(concurrent) == CONCURRENT
    for question, docs in zip(questions, concurrent, strict=True):
        assert _key(docs) == sequential[question], question
    assert all(docs for docs in concurrent)
    with _fresh_kb(store, real_embeddings) as kb:
        for question, docs in zip(questions[:40], dense[:40], strict=True):
            assert _key(docs) == _key(kb.search(question, k=5, mode="dense"))


async def test_200_concurrent_injector_ainvoke_equal_sequential_invoke(store, real_embeddings):
    questions = _questions()
    inputs = [[HumanMessage(q)] for q in questions]
    with _fresh_kb(store, real_embeddings) as kb:
        injector = KnowledgeInjector(kb)
        sequential = {
            q: _contents(injector.invoke(m)) for q, m in zip(questions, inputs, strict=True)
        }
    with _fresh_kb(store, real_embeddings) as kb:
        injector = KnowledgeInjector(kb)
        concurrent = await asyncio.gather(*(injector.ainvoke(m) for m in inputs))
        batched = await injector.abatch(inputs, config={"max_concurrency": 32})
    injected = 0
    for question, out, out_batch in zip(questions, concurrent, batched, strict=True):
        assert _contents(out) == sequential[question], question
        assert _contents(out_batch) == sequential[question], question
        injected += len(out) > 1
    assert injected >= CONCURRENT // 2  # most questions get knowledge: this is not vacuous


def test_threaded_batch_equals_sequential_on_every_surface(store, real_embeddings):
    questions = _questions()
    inputs = [[HumanMessage(q)] for q in questions]
    with _fresh_kb(store, real_embeddings) as kb:
        retriever = kb.as_retriever(k=4)
        injector = KnowledgeInjector(kb)
        expected_docs = {q: _key(retriever.invoke(q)) for q in dict.fromkeys(questions)}
        expected_msgs = [_contents(injector.invoke(m)) for m in inputs]
    with _fresh_kb(store, real_embeddings) as kb:
        retriever = kb.as_retriever(k=4)
        injector = KnowledgeInjector(kb)
        docs = retriever.batch(questions, config={"max_concurrency": 16})
        msgs = injector.batch(inputs, config={"max_concurrency": 16})
        assert [_key(d) for d in docs] == [expected_docs[q] for q in questions]
        assert [_contents(m) for m in msgs] == expected_msgs

        model = RecordingChatModel()
        graph = create_knowledge_graph(model, kb)
        states = graph.batch([{"messages": m} for m in inputs[:60]], config={"max_concurrency": 16})
        for state, expected in zip(states, expected_msgs[:60], strict=True):
            injected = any("[Retrieved Knowledge]" in content for _, content in expected)
            assert (state["dynamic_context"] is not None) == injected
            assert state["messages"][-1].content == "ok"


async def test_concurrent_agent_turns_with_the_middleware(store, real_embeddings):
    questions = _questions()[:50]
    with _fresh_kb(store, real_embeddings) as kb:
        injector = KnowledgeInjector(kb)
        expected = [injector.prepare([HumanMessage(q)]).manifest.chunk_ids for q in questions]
        agent = create_agent(
            RecordingChatModel(),
            tools=[],
            middleware=[KnowledgeInjectionMiddleware(kb, keep_manifest=True)],
        )
        results = await asyncio.gather(
            *(agent.ainvoke({"messages": [HumanMessage(q)]}) for q in questions)
        )
    assert [r["knowledge_manifest"]["chunk_ids"] for r in results] == expected


def test_ingestion_while_queries_run(tmp_path, real_embeddings):
    kb = KnowledgeBase("live", path=tmp_path, embeddings=real_embeddings)
    kb.add_documents(SAMPLE_DOCUMENTS)
    base_count = kb.info.chunk_count
    new_docs = [
        Document(
            f"Bulletin {i}: item marker{i}z about {TOPICS[i % len(TOPICS)]} changes next month.",
            metadata={"source": f"bulletin/{i:03d}.md"},
        )
        for i in range(160)
    ]  # fmt: skip
    texts = {d.page_content for d in [*SAMPLE_DOCUMENTS, *new_docs]}
    errors: list[BaseException] = []
    searches = [0]
    done = threading.Event()
    progress = threading.Condition()
    batches = range(0, len(new_docs), 20)

    def write() -> None:
        try:
            for start in batches:
                # a search between every two batches, by construction (not by timing)
                with progress:
                    seen = searches[0]
                    progress.wait_for(lambda seen=seen: searches[0] > seen, timeout=300)
                kb.add_documents(new_docs[start : start + 20])
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def read(worker: int) -> None:
        i = 0
        try:
            while not done.is_set():
                question = f"{TOPICS[(worker + i) % len(TOPICS)]} bulletin marker{i % 160}z"
                for doc in kb.search(question, k=8, min_score=0.0):
                    # a result is made of whole chunks: each text is one that was written
                    chunks = kb.get_by_ids(doc.metadata["chunk_ids"])
                    assert len(chunks) == len(doc.metadata["chunk_ids"])
                    for chunk in chunks:
                        assert any(chunk.page_content in text for text in texts)
                        assert chunk.page_content in doc.page_content
                    assert doc.metadata["chunk_id"] == doc.id
                with progress:
                    searches[0] += 1
                    progress.notify_all()
                i += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write)] + [
        threading.Thread(target=read, args=(w,)) for w in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors[:3]
    assert searches[0] >= len(batches)  # the readers really ran during the writes
    report = kb.check()
    assert report.clean, report.summary()
    assert kb.info.chunk_count == base_count + len(new_docs)
    for i in range(0, 160, 17):
        hit = kb.search(f"marker{i}z", k=1, mode="keyword", min_score=0.0)
        assert hit and hit[0].metadata["source"] == f"bulletin/{i:03d}.md"
    kb.close()


def test_second_process_on_the_same_store_is_refused(store, real_embeddings):
    script = textwrap.dedent(
        f"""
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_knowledge_inject import KnowledgeBase
        from langchain_knowledge_inject.errors import KnowledgeBaseOpenError
        try:
            KnowledgeBase("hr", path={str(store)!r}, embeddings=DeterministicFakeEmbedding(size=8))
        except KnowledgeBaseOpenError as exc:
            print("REFUSED", exc)
        else:
            print("OPENED")
        """
    )
    with _fresh_kb(store, real_embeddings) as kb:
        before = _key(kb.search("annual leave", k=3))
        child = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
        )
        assert "REFUSED" in child.stdout, child.stdout + child.stderr[-2000:]
        assert "chroma run" in child.stdout  # the message points to the server mode
        assert _key(kb.search("annual leave", k=3)) == before
        assert kb.check().clean


def test_one_megabyte_message_is_cut_to_what_the_model_reads(store, real_embeddings):
    """The query is cut: the turn still injects. Its cost next to a normal question is
    measured in ``benchmarks/huge_message.py`` (no wall-clock assertion here)."""
    with _fresh_kb(store, real_embeddings) as kb:
        injector = KnowledgeInjector(kb, min_score=0.0)
        huge = [HumanMessage(("How many days of annual leave? " * 40_000)[: 1 << 20])]
        turn = injector.prepare(huge)
        assert turn.manifest.injected
        assert len(turn.manifest.query or "") <= MAX_QUERY_CHARS
        content = turn.messages[-1].content  # the message itself is kept, beside the knowledge
        blocks = content if isinstance(content, list) else [{"text": content}]
        assert huge[0].content in [b.get("text") for b in blocks if isinstance(b, dict)]
