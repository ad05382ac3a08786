"""A frozen Chroma server, and several processes on one server, with the real model.

* ``kill -STOP`` on a real ``chroma run`` server: a turn degrades (the manifest's
  ``errors`` names ``StoreTimeoutError``), writes fail with ``StoreTimeoutError``,
  many concurrent ``asearch`` calls on the frozen knowledge base do not stop a
  healthy embedded one from answering, and after ``kill -CONT`` everything works.
* Two real processes, each with its own catalog, on one real server: a write in
  one is found by keyword and by hybrid search in the other without any manual
  step (polled with a hang guard; how fast is measured in
  ``benchmarks/multiprocess_staleness.py``, not asserted here).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from contextlib import contextmanager

import pytest
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage

from langchain_knowledge_inject import KnowledgeBase, KnowledgeInjector
from langchain_knowledge_inject._ingest.sample_data import SAMPLE_DOCUMENTS, SAMPLE_QUESTIONS
from langchain_knowledge_inject.errors import StoreTimeoutError

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HANG_GUARD = 120.0  # seconds: only against a hang, never a measurement
LEAVE = SAMPLE_QUESTIONS[0]


@contextmanager
def frozen(server):
    """SIGSTOP the server; SIGCONT it afterwards, whatever happens."""
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.process.pid, signal.SIGCONT)


def test_frozen_server_degrades_turns_and_never_slows_a_healthy_kb(
    chroma_server, tmp_path, real_embeddings
):
    name = f"frozen-{uuid.uuid4().hex[:8]}"
    remote = KnowledgeBase(name, path=tmp_path / "catalog", client=chroma_server.client(),
                           embeddings=real_embeddings, timeout=HANG_GUARD)  # fmt: skip
    remote.add_documents(SAMPLE_DOCUMENTS)
    local = KnowledgeBase("local", path=tmp_path / "local", embeddings=real_embeddings)
    local.add_documents(SAMPLE_DOCUMENTS)
    injector = KnowledgeInjector([remote, local])
    expected_local = [d.id for d in local.search(LEAVE.question)]

    with frozen(chroma_server):
        _bound(remote, 2.0)  # short only while frozen: a loaded machine never trips it
        outcome: dict = {}

        def turn() -> None:
            outcome["turn"] = injector.prepare([HumanMessage(LEAVE.question)])

        worker = threading.Thread(target=turn, daemon=True)
        worker.start()
        worker.join(HANG_GUARD)
        assert not worker.is_alive(), "a turn hung on the frozen server"
        manifest = outcome["turn"].manifest
        stages = [(e["stage"], e["error"]) for e in manifest.errors]
        assert ("retrieval", "StoreTimeoutError") in stages
        assert ("flags", "StoreTimeoutError") in stages  # its flags unreadable: counted restricted
        assert manifest.injected  # the healthy knowledge base still answered (summarized: the
        # frozen one's flags could not be read, so the turn counts as restricted)
        assert all(d.metadata.get("kb_name") != name for d in outcome["turn"].documents)

        async def crowd() -> list:
            stuck = [asyncio.ensure_future(remote.asearch(LEAVE.question)) for _ in range(24)]
            await asyncio.sleep(0)
            healthy = [d.id for d in await local.asearch(LEAVE.question)]
            return [healthy, *await asyncio.gather(*stuck, return_exceptions=True)]

        healthy, *results = asyncio.run(asyncio.wait_for(crowd(), HANG_GUARD))
        assert healthy == expected_local
        assert all(isinstance(r, StoreTimeoutError) for r in results)

        with pytest.raises(StoreTimeoutError):
            remote.add_documents([Document("Frozen-time rule.", metadata={"source": "new.md"})])

    # thawed: the same objects answer again, and the timed-out write left nothing half done
    _bound(remote, HANG_GUARD)
    assert LEAVE.expected_source in [
        d.metadata["source"] for d in remote.search(LEAVE.question, k=3)
    ]
    turn = injector.prepare([HumanMessage(LEAVE.question)])
    assert turn.manifest.errors == [] and turn.manifest.injected
    remote.add_documents([Document("Frozen-time rule.", metadata={"source": "new.md"})])
    assert remote.check().clean
    remote.drop()


def _bound(kb: KnowledgeBase, seconds: float) -> None:
    kb.timeout = seconds
    kb._chroma.calls.timeout = seconds


_WRITER = textwrap.dedent(
    """
    import sys, chromadb
    from langchain_core.documents import Document
    from langchain_knowledge_inject import KnowledgeBase
    from langchain_knowledge_inject._store.embeddings import default_embeddings
    host, port, path, name, text, source = sys.argv[1:7]
    kb = KnowledgeBase(name, path=path, client=chromadb.HttpClient(host=host, port=int(port)),
                       embeddings=default_embeddings())
    kb.add_documents([Document(text, metadata={"source": source})])
    print("WROTE", flush=True)
    """
)


def _poll(fn, guard: float = HANG_GUARD):
    deadline = time.monotonic() + guard
    while True:
        found = fn()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_another_process_writes_reach_keyword_and_hybrid_search(
    chroma_server, tmp_path, real_embeddings
):
    name = f"multi-{uuid.uuid4().hex[:8]}"
    reader = KnowledgeBase(name, path=tmp_path / "reader", client=chroma_server.client(),
                           embeddings=real_embeddings, sync_interval=1.0)  # fmt: skip
    reader.add_documents(SAMPLE_DOCUMENTS)
    assert not reader.search("zephyrine badge renewal", mode="keyword", min_score=0.0)

    text = "Zephyrine badges are renewed every March at the front desk."
    child = subprocess.run(
        [sys.executable, "-c", _WRITER, chroma_server.host, str(chroma_server.port),
         str(tmp_path / "writer"), name, text, "badges.md"],
        capture_output=True, text=True, timeout=HANG_GUARD, env={**os.environ},
    )  # fmt: skip
    assert "WROTE" in child.stdout, child.stderr[-3000:]

    def sources(mode: str) -> list[str]:
        hits = reader.search("zephyrine badge renewal", k=3, mode=mode, min_score=0.0)
        return [d.metadata["source"] for d in hits]

    assert "badges.md" in _poll(lambda: sources("keyword"))
    assert sources("hybrid")[0] == "badges.md"
    hit = reader.search("zephyrine badge renewal", k=1, mode="keyword", min_score=0.0)[0]
    assert hit.page_content == text and set(hit.metadata) >= {"source", "chunk_id"}
    assert reader.check().clean  # the registry adopted it: nothing left for --repair
    reader.drop()
