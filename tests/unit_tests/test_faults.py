"""Faults, offline: bounded store calls, a forked process, filters, catch-up, manifest errors.

The real frozen ``chroma run`` server and two real processes on one server are
in ``tests/integration_tests/test_reliability_faults.py``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
import uuid
from types import SimpleNamespace

import chromadb
import httpx
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.messages import HumanMessage

from langchain_knowledge_inject import (
    ConfigurationError,
    KnowledgeBase,
    KnowledgeInjector,
    RetrievalError,
)
from langchain_knowledge_inject._store import calls as calls_module
from langchain_knowledge_inject._store.calls import (
    BoundedCalls,
    Deadline,
    submit,
    within,
    worker_pool,
)
from langchain_knowledge_inject._store.chroma import STAMP
from langchain_knowledge_inject._store.filters import MAX_FILTER_DEPTH
from langchain_knowledge_inject.errors import (
    ForkedProcessError,
    KnowledgeBaseOpenError,
    StoreError,
    StoreTimeoutError,
)

HANG_GUARD = 60  # seconds: only against a hang, never a measurement

DOCS = [
    Document("Employees receive 25 days of annual leave.", metadata={"source": "leave.md"}),
    Document("Expenses above 50 euros need a receipt.", metadata={"source": "expenses.md"}),
]


@pytest.fixture
def emb() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=16)


# -- bounded calls -----------------------------------------------------------------------


@pytest.mark.slow
def test_a_stuck_call_raises_store_timeout_and_frees_the_caller():
    release = threading.Event()
    calls = BoundedCalls(0.05, kb_name="kb")
    with pytest.raises(StoreTimeoutError) as info:
        calls.call("query", release.wait, HANG_GUARD)
    assert isinstance(info.value, TimeoutError) and isinstance(info.value, RetrievalError)
    assert info.value.operation == "query" and info.value.kb_name == "kb"
    release.set()
    calls.timeout = HANG_GUARD  # no race with the released thread on a loaded machine
    assert calls.call("query", lambda: 42) == 42  # the pool serves again


@pytest.mark.slow
def test_calls_queued_behind_stuck_ones_never_run():
    release = threading.Event()
    ran: list[int] = []
    calls = BoundedCalls(0.05, kb_name="kb", size=1)
    with pytest.raises(StoreTimeoutError):
        calls.call("query", release.wait, HANG_GUARD)
    with pytest.raises(StoreTimeoutError):  # the one worker is stuck: this one waits, then gives up
        calls.call("query", ran.append, 1)
    release.set()
    calls.timeout = HANG_GUARD
    assert calls.call("query", lambda: "ok") == "ok"
    assert ran == []  # cancelled while queued


@pytest.mark.slow
def test_one_deadline_covers_every_call_of_an_operation():
    release = threading.Event()
    calls = BoundedCalls(0.1, kb_name="kb")
    with calls.operation(), pytest.raises(StoreTimeoutError):
        calls.call("get", release.wait, 0.06)
        calls.call("get", release.wait, 0.06)  # 0.12 s in all: past the one deadline
    release.set()


def test_no_timeout_runs_inline():
    calls = BoundedCalls(None, kb_name="kb")
    assert calls.call("query", threading.get_ident) == threading.get_ident()


@pytest.mark.parametrize("timeout", [None, HANG_GUARD])
def test_a_refused_or_dropped_connection_is_a_store_error_with_its_cause(timeout):
    def refused():
        raise httpx.ConnectError("[Errno 111] Connection refused")

    def slow():
        raise httpx.ReadTimeout("timed out")

    calls = BoundedCalls(timeout, kb_name="kb")
    with pytest.raises(StoreError) as info:
        calls.call("count", refused)
    assert info.value.reason == "unreachable" and info.value.kb_name == "kb"
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    with pytest.raises(StoreTimeoutError) as late:
        calls.call("query", slow)
    assert late.value.operation == "query" and isinstance(late.value.__cause__, httpx.ReadTimeout)


def test_a_deadline_counts_the_calls_waits_once_and_never_the_work_between(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(calls_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    deadline = Deadline(5.0)
    with deadline.waiting() as left:
        assert left == 5.0
        now[0] += 2.0  # a call waits 2 s
    now[0] += 10.0  # local work (embedding, a query model): not the store's time
    assert deadline.left() == 3.0
    with deadline.waiting() as first, deadline.waiting() as second:
        now[0] += 1.0  # two calls side by side: counted once
    assert first == second == 3.0 and deadline.left() == 2.0
    with within(deadline), within(Deadline(1.0)) as inner:
        assert inner is deadline  # nested: the outer one


def _recording_deadlines(monkeypatch) -> list[tuple[Deadline, float]]:
    """Record each bounded call's deadline and what it was allowed to wait."""
    seen: list[tuple[Deadline, float]] = []
    real = Deadline.waiting

    @contextlib.contextmanager
    def waiting(self):
        with real(self) as left:
            seen.append((self, left))
            yield left

    monkeypatch.setattr(Deadline, "waiting", waiting)
    return seen


@pytest.mark.parametrize("surface", ["sync", "async", "tool"])
async def test_a_turn_reads_its_flags_and_searches_within_one_deadline(
    tmp_path, emb, monkeypatch, surface
):
    kb = _server_kb(tmp_path, emb, f"srv-{uuid.uuid4().hex[:8]}", _FreezableClient())
    kb.add_documents(DOCS)
    injector = KnowledgeInjector(kb, min_score=0.0)
    seen = _recording_deadlines(monkeypatch)
    if surface == "sync":
        assert injector.prepare([HumanMessage("annual leave days")]).manifest.injected
    elif surface == "async":
        assert (await injector.aprepare([HumanMessage("annual leave days")])).manifest.injected
    else:
        pipeline = injector.pipeline
        found = pipeline.search("annual leave days", pipeline.request())
        assert found.documents
    deadlines = {id(deadline) for deadline, _ in seen}
    assert len(seen) >= 2 and len(deadlines) == 1  # the flags read and the search: one deadline
    assert seen[0][0].seconds == kb.timeout == HANG_GUARD


@pytest.mark.slow
def test_a_frozen_server_costs_a_turn_one_timeout_flag_read_and_search_together(
    tmp_path, emb, monkeypatch
):
    client = _FreezableClient()
    frozen = _server_kb(tmp_path, emb, f"srv-{uuid.uuid4().hex[:8]}", client)
    frozen.add_documents(DOCS)
    gated = client.get_collection  # the flag read asks for the collection: it waits too

    def get_collection(*args, **kwargs):
        if client.frozen.is_set():
            client.release.wait(HANG_GUARD)
        return gated(*args, **kwargs)

    client.get_collection = get_collection
    seen = _recording_deadlines(monkeypatch)
    client.frozen.set()
    _bound(frozen, 0.2)
    injector = KnowledgeInjector(frozen, min_score=0.0)  # its turns: the timeout of now
    try:
        turn = injector.prepare([HumanMessage("annual leave days")])
    finally:
        client.release.set()
        _bound(frozen, HANG_GUARD)
    assert turn.manifest.restricted  # the flags could not be read: it fails closed
    assert {e["stage"] for e in turn.manifest.errors} == {"flags", "retrieval"}
    assert len({id(deadline) for deadline, _ in seen}) == 1
    assert 0 < seen[0][1] <= 0.2  # the flag read: the whole timeout to wait
    assert all(left <= 0 for _, left in seen[1:])  # then nothing was left: no second wait


def test_a_server_down_fails_a_cold_search_before_the_model_loads(tmp_path, monkeypatch):
    from langchain_knowledge_inject._store import embeddings as emb_module

    client = _FreezableClient()
    model = emb_module.DefaultEmbeddings()
    kb = _server_kb(tmp_path, model, f"srv-{uuid.uuid4().hex[:8]}", client)

    def must_not_load(self):
        raise AssertionError("the model was loaded for a search the server cannot answer")

    def refused():
        raise httpx.ConnectError("[Errno 111] Connection refused")

    monkeypatch.setattr(emb_module.DefaultEmbeddings, "_load", must_not_load)
    client.heartbeat = refused
    with pytest.raises(RetrievalError) as info:
        kb.search("annual leave")
    assert isinstance(info.value.__cause__, StoreError)
    assert info.value.__cause__.reason == "unreachable" and not model.loaded


def test_the_pool_is_bounded_and_carries_the_callers_context():
    import contextvars

    pool = worker_pool(2, "test")
    release = threading.Event()
    futures = [pool.submit(release.wait, HANG_GUARD) for _ in range(5)]
    names = [t for t in threading.enumerate() if t.name.startswith("test_")]
    assert len(names) == 2
    release.set()
    assert all(f.result(timeout=HANG_GUARD) for f in futures)
    var = contextvars.ContextVar("var", default="unset")
    var.set("caller's")
    assert submit(pool, var.get).result(timeout=HANG_GUARD) == "caller's"
    pool.shutdown()


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "5", True])
def test_invalid_timeout_is_a_configuration_error(tmp_path, emb, bad):
    with pytest.raises(ConfigurationError, match="timeout"):
        KnowledgeBase("hr", path=tmp_path, embeddings=emb, timeout=bad)


class _FrozenCollection:
    """A collection whose every data call blocks until released (a frozen server)."""

    def __init__(self, inner, release: threading.Event) -> None:
        self._inner = inner
        self._release = release

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name in ("query", "get", "upsert", "count"):

            def frozen(*args, **kwargs):
                self._release.wait(HANG_GUARD)
                return attr(*args, **kwargs)

            return frozen
        return attr


class _FreezableClient:
    """An in-process Chroma client that can be frozen like a stopped server."""

    def __init__(self) -> None:
        self._inner = chromadb.EphemeralClient()
        self.frozen = threading.Event()
        self.release = threading.Event()
        self._in_flight = 0
        self._settled = threading.Condition()

    def enter(self) -> None:
        with self._settled:
            self._in_flight += 1

    def leave(self) -> None:
        with self._settled:
            self._in_flight -= 1
            self._settled.notify_all()

    def wait_settled(self, timeout: float) -> bool:
        """Wait until every call that was held while frozen has run (abandoned ones too)."""
        with self._settled:
            return self._settled.wait_for(lambda: self._in_flight == 0, timeout)

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name in ("get_collection", "get_or_create_collection"):

            def wrapped(*args, **kwargs):
                found = attr(*args, **kwargs)
                return _Gate(found, self)

            return wrapped
        return attr


class _Gate:
    def __init__(self, inner, client: _FreezableClient) -> None:
        self._inner = inner
        self._client = client

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        def gated(*args, **kwargs):
            self._client.enter()
            try:
                if self._client.frozen.is_set():
                    self._client.release.wait(HANG_GUARD)
                return attr(*args, **kwargs)
            finally:
                self._client.leave()

        return gated


def _server_kb(tmp_path, emb, name: str, client) -> KnowledgeBase:
    return KnowledgeBase(
        name, path=tmp_path / name, client=client, embeddings=emb, timeout=HANG_GUARD
    )


def _bound(kb: KnowledgeBase, seconds: float) -> None:
    """Set the timeout of an open knowledge base: short only while the server is frozen,
    so that no call of a healthy server can fail on a loaded machine."""
    kb.timeout = seconds
    kb._chroma.calls.timeout = seconds


@pytest.mark.slow
def test_frozen_server_degrades_the_turn_and_records_the_error(tmp_path, emb):
    client = _FreezableClient()
    frozen = _server_kb(tmp_path, emb, f"srv-{uuid.uuid4().hex[:8]}", client)
    frozen.add_documents(DOCS)
    healthy = KnowledgeBase("local", path=tmp_path / "local", embeddings=emb)
    healthy.add_documents(DOCS)
    injector = KnowledgeInjector([frozen, healthy], min_score=0.0)
    client.frozen.set()
    _bound(frozen, 0.2)
    try:
        turn = injector.prepare([HumanMessage("annual leave days")])
        assert {"stage": "retrieval", "error": "StoreTimeoutError", "source": frozen.name} in (
            turn.manifest.errors
        )
        assert turn.manifest.retrieval_error
        # the healthy knowledge base still answered: its chunks were injected
        assert turn.manifest.injected
        assert {d.metadata["kb_name"] for d in turn.documents} == {"local"}
        with pytest.raises(StoreTimeoutError):
            frozen.search("annual leave", min_score=0.0)
        with pytest.raises(StoreTimeoutError):
            frozen.add_documents([Document("New rule.", metadata={"source": "new.md"})])
        with pytest.raises(RetrievalError):
            KnowledgeInjector(frozen, on_error="raise").prepare([HumanMessage("leave")])
    finally:
        client.release.set()
        client.frozen.clear()
        _bound(frozen, HANG_GUARD)
    # The timed-out write's abandoned request lands on the server once it thaws; wait for it,
    # so that the keyword search's catch-up below meets it (otherwise a race with check()).
    assert client.wait_settled(HANG_GUARD)
    assert frozen.search("annual leave", min_score=0.0, mode="keyword")  # thawed: answers again
    assert frozen.check().clean  # the timed-out write left nothing half done locally


@pytest.mark.slow
async def test_frozen_server_async_turn_degrades_and_healthy_kb_answers(tmp_path, emb):
    client = _FreezableClient()
    frozen = _server_kb(tmp_path, emb, f"srv-{uuid.uuid4().hex[:8]}", client)
    frozen.add_documents(DOCS)
    healthy = KnowledgeBase("local", path=tmp_path / "local", embeddings=emb)
    healthy.add_documents(DOCS)
    client.frozen.set()
    _bound(frozen, 0.2)
    try:
        import asyncio

        stuck = [asyncio.ensure_future(frozen.asearch("leave", min_score=0.0)) for _ in range(20)]
        assert await healthy.asearch("annual leave", min_score=0.0)  # not queued behind them
        results = await asyncio.gather(*stuck, return_exceptions=True)
        assert all(isinstance(r, StoreTimeoutError) for r in results)
        turn = await KnowledgeInjector([frozen, healthy], min_score=0.0).aprepare(
            [HumanMessage("annual leave days")]
        )
        assert [{k: e[k] for k in ("stage", "error")} for e in turn.manifest.errors] == [
            {"stage": "retrieval", "error": "StoreTimeoutError"}
        ]
        assert turn.manifest.injected
    finally:
        client.release.set()


def test_a_healthy_turn_records_no_error(tmp_path, emb):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    kb.add_documents(DOCS)
    turn = KnowledgeInjector(kb, min_score=0.0).prepare([HumanMessage("annual leave")])
    assert turn.manifest.injected and turn.manifest.errors == []
    assert turn.manifest.to_dict()["errors"] == []


def test_the_manifest_error_names_the_class_never_the_text(tmp_path, emb):
    class Broken:
        name = "broken"

        def search(self, query, **kwargs):
            msg = f"secret text {query}"
            raise RuntimeError(msg)

        async def asearch(self, query, **kwargs):
            return self.search(query)

    turn = KnowledgeInjector(Broken(), min_score=0.0).prepare([HumanMessage("hello")])
    assert turn.manifest.errors == [{"stage": "retrieval", "error": "RuntimeError",
                                     "source": "broken"}]  # fmt: skip
    assert "secret" not in str(turn.manifest.errors)


# -- fork safety --------------------------------------------------------------------------


def _use_in_child(kb: KnowledgeBase, path, queue) -> None:
    outcome = []
    for attempt in (
        lambda: kb.search("annual leave", min_score=0.0),
        lambda: kb.add_documents([Document("x", metadata={"source": "x.md"})]),
        lambda: kb.info,
    ):
        try:
            attempt()
            outcome.append("ran")
        except ForkedProcessError as exc:
            outcome.append("forked" if str(os.getppid()) in str(exc) else "wrong-pid")
    try:
        KnowledgeBase("hr", path=path, embeddings=kb.embeddings)
        outcome.append("opened")
    except KnowledgeBaseOpenError:
        outcome.append("refused")
    kb.close()  # must not close the parent's connection or release its lock
    queue.put(outcome)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_clear_error_and_never_hangs(tmp_path, emb):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    kb.add_documents(DOCS)
    before = [d.id for d in kb.search("annual leave", min_score=0.0)]
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_use_in_child, args=(kb, tmp_path, queue))
    child.start()
    try:
        outcome = queue.get(timeout=HANG_GUARD)
    finally:
        child.join(HANG_GUARD)
        if child.is_alive():
            child.kill()
    assert outcome == ["forked", "forked", "forked", "refused"]
    # the parent is untouched: same results, lock still held, records consistent
    assert [d.id for d in kb.search("annual leave", min_score=0.0)] == before
    assert kb.check().clean


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_os_fork_child_search_raises(tmp_path, emb):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    kb.add_documents(DOCS)
    pid = os.fork()
    if pid == 0:  # the child: exit code 3 on the expected error
        code = 1
        try:
            kb.search("annual leave", min_score=0.0)
        except ForkedProcessError:
            code = 3
        except BaseException:
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 3


# -- filters ------------------------------------------------------------------------------


def _nested(depth: int) -> dict:
    where: dict = {"category": "hr"}
    for _ in range(depth):
        where = {"$and": [where]}
    return where


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (_nested(5000), "nested deeper"),
        (_nested(MAX_FILTER_DEPTH + 1), "nested deeper"),
        ("category = 'hr'", "must be a dict"),
        (["category", "hr"], "must be a dict"),
        ({"category": ["hr", "ops"]}, "string, number or boolean"),
        ({"category": None}, "string, number or boolean"),
        ({"year": {"$gt": "2020"}}, "number"),
        ({"category": {"$in": []}}, "non-empty list"),
        ({"category": {"$in": "hr"}}, "non-empty list"),
        ({"$or": [{"a": 1}, "b"]}, "list of non-empty filters"),
        ({"$not": {"a": 1}}, "Unknown filter operator"),
        ({"a": {"$regex": "x"}}, "must be one of"),
        ({"$or": [{"a": i} for i in range(5000)]}, "more than"),
    ],
)
def test_bad_filters_are_configuration_errors_on_every_mode(tmp_path, emb, bad, match):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    kb.add_documents(DOCS)
    for mode in ("dense", "keyword", "hybrid"):
        with pytest.raises(ConfigurationError, match=match):
            kb.search("annual leave", filter=bad, mode=mode)


def test_a_filter_at_the_depth_limit_still_works(tmp_path, emb):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    kb.add_documents(
        [Document("Annual leave rules.", metadata={"source": "a.md", "category": "hr"})]
    )
    hits = kb.search("annual leave", filter=_nested(MAX_FILTER_DEPTH - 1), min_score=0.0)
    assert [d.metadata["category"] for d in hits] == ["hr"]


def test_a_bad_filter_in_the_injector_raises_rather_than_degrades(tmp_path, emb):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=emb)
    kb.add_documents(DOCS)
    injector = KnowledgeInjector(kb, min_score=0.0)
    with pytest.raises(ConfigurationError):
        kb.as_retriever().invoke("leave", filter="category = hr")
    assert injector.prepare([HumanMessage("annual leave")]).manifest.injected


# -- keyword catch-up in server mode (two keyword caches on one Chroma) ------------------


def _two_caches(tmp_path, emb, *, sync_interval):
    """Two keyword caches over one Chroma collection: ``first`` writes, ``second`` catches up."""
    client = chromadb.EphemeralClient()
    name = f"shared-{uuid.uuid4().hex[:8]}"
    first = KnowledgeBase(name, path=tmp_path / "a", client=client, embeddings=emb)
    second = KnowledgeBase(name, path=tmp_path / "b", client=client, embeddings=emb,
                           sync_interval=sync_interval)  # fmt: skip
    return first, second


def test_another_caches_writes_reach_the_keyword_index(tmp_path, emb):
    first, second = _two_caches(tmp_path, emb, sync_interval=0)
    first.add_documents(DOCS)
    hits = second.search("receipt euros", k=1, mode="keyword", min_score=0.0)
    assert hits and hits[0].metadata["source"] == "expenses.md"
    assert STAMP not in hits[0].metadata
    # incremental: a new write, an update of metadata, then a delete
    first.add_documents([Document("Parking badges are issued by security.",
                                  metadata={"source": "parking.md"})])  # fmt: skip
    assert (
        second.search("parking badge", k=1, mode="hybrid", min_score=0.0)[0].metadata["source"]
        == "parking.md"
    )
    first.add_documents([Document(DOCS[0].page_content,
                                  metadata={"source": "leave.md", "category": "hr"})])  # fmt: skip
    hits = second.search("annual leave", k=1, mode="keyword", filter={"category": "hr"},
                         min_score=0.0)  # fmt: skip
    assert hits and hits[0].metadata["source"] == "leave.md"
    first.delete_source("parking.md")
    assert not second.search("parking badge", k=3, mode="keyword", min_score=0.0)
    assert second.check().clean


def test_catch_up_is_rate_limited_by_the_interval(tmp_path, emb):
    first, second = _two_caches(tmp_path, emb, sync_interval=3600)
    first.add_documents(DOCS[:1])
    assert second.search("annual leave", mode="keyword", min_score=0.0)  # first catch-up
    first.add_documents(DOCS[1:])
    assert not second.search("receipt euros", mode="keyword", min_score=0.0)  # not yet due
    assert second._cache.catch_up("") == 1  # what the next due catch-up does
    assert second.search("receipt euros", mode="keyword", min_score=0.0)


def test_sync_interval_none_catches_up_once_when_first_used(tmp_path, emb):
    first, second = _two_caches(tmp_path, emb, sync_interval=None)
    first.add_documents(DOCS[:1])
    assert second.search("annual leave", mode="keyword", min_score=0.0)  # the one catch-up
    first.add_documents(DOCS[1:])
    assert not second.search("receipt euros", mode="keyword", min_score=0.0)
    assert second.search("receipt euros", mode="dense", min_score=0.0)  # Chroma has it


def test_every_surface_records_the_failure_class_in_the_manifest(tmp_path, emb):
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from langchain_knowledge_inject import KnowledgeInjectionMiddleware, create_knowledge_graph

    class Down:
        name = "down"

        def search(self, query, **kwargs):
            msg = "connection refused to 10.0.0.7 (secret host)"
            raise ConnectionError(msg)

        async def asearch(self, query, **kwargs):
            return self.search(query)

    healthy = KnowledgeBase("local", path=tmp_path / "local", embeddings=emb)
    healthy.add_documents(DOCS)
    expected = [{"stage": "retrieval", "error": "ConnectionError", "source": "down"}]

    def model():
        return GenericFakeChatModel(messages=iter([AIMessage("ok")] * 3))

    graph = create_knowledge_graph(model(), [Down(), healthy], min_score=0.0, keep_manifest=True)
    state = graph.invoke({"messages": [HumanMessage("annual leave days")]})
    assert state["knowledge_manifest"]["errors"] == expected
    assert state["knowledge_manifest"]["injected"]  # the healthy knowledge base answered
    agent = create_agent(
        model(),
        tools=[],
        middleware=[
            KnowledgeInjectionMiddleware([Down(), healthy], min_score=0.0, keep_manifest=True)
        ],
    )
    result = agent.invoke({"messages": [HumanMessage("annual leave days")]})
    assert result["knowledge_manifest"]["errors"] == expected
    assert "secret" not in str(result["knowledge_manifest"]["errors"])


class _SlowFirstQuery(Embeddings):
    """Embeddings whose first query embedding takes seconds, as a model's first load does."""

    def __init__(self, inner: Embeddings, seconds: float) -> None:
        self.inner, self.seconds, self.loaded = inner, seconds, False

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        if not self.loaded:
            time.sleep(self.seconds)
            self.loaded = True
        return self.inner.embed_query(text)


@pytest.mark.slow
@pytest.mark.parametrize("surface", ["sync", "async"])
async def test_a_models_first_load_is_not_a_store_timeout(tmp_path, emb, surface):
    """The timeout bounds the store: the query is embedded before its deadline starts."""
    # The load outlasts timeout + the local grace (1 s); the timeout stays long enough that
    # no call of this healthy server can miss it on a loaded machine.
    slow = _SlowFirstQuery(emb, seconds=5.0)
    kb = _server_kb(tmp_path, slow, f"srv-{uuid.uuid4().hex[:8]}", _FreezableClient())
    kb.add_documents(DOCS)
    _bound(kb, 2.0)
    if surface == "sync":
        found = kb.search("annual leave", min_score=0.0)
    else:
        found = await kb.asearch("annual leave", min_score=0.0)
    assert slow.loaded and found
    assert any("leave" in doc.page_content.lower() for doc in found)
