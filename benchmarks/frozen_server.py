"""A frozen Chroma server (SIGSTOP) and a stopped one: how long a turn and each call take.

A real ``chroma run`` server holds knowledge base ``remote`` (timeout = the
bound, default 5 s); an embedded knowledge base ``local`` lives in the same
process; both hold the sample HR documents, with the real embedding model.
The server is frozen with ``kill -STOP``. Measured, side by side in one run:

* a sync turn (``KnowledgeInjector([remote, local]).prepare``) and an async
  turn (``aprepare``) against the frozen server, vs the bound: the restriction
  flags (read fresh each turn) and the search share the turn's one deadline
  (target: <= 1.5x the bound); and a turn of ``create_knowledge_graph`` over the
  same sources, whose ``safe_summarize`` waits on what ``retrieve`` left;
* ``local.asearch`` before the freeze and during it, while ``--crowd``
  concurrent ``remote.asearch`` calls wait on the frozen server (target: ratio ~1);
* the server stopped (SIGTERM): each public call of ``remote``, timed, and the
  error it raises (target: a package error within 3 s each).

Run: ``OMP_NUM_THREADS=1 python benchmarks/frozen_server.py [--timeout 5] [--crowd 32]``
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _server import chroma_server, client
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage

from langchain_knowledge_inject import KnowledgeBase, KnowledgeInjector, create_knowledge_graph
from langchain_knowledge_inject._ingest.sample_data import SAMPLE_DOCUMENTS, SAMPLE_QUESTIONS
from langchain_knowledge_inject._store.embeddings import default_embeddings

QUESTIONS = [q.question for q in SAMPLE_QUESTIONS]


async def local_search_times(local: KnowledgeBase, rounds: int, phase: str) -> list[float]:
    times = []
    for i in range(rounds):  # distinct questions: the query-embedding cache never answers
        start = time.perf_counter()
        await local.asearch(f"{QUESTIONS[i % len(QUESTIONS)]} ({phase} {i})")
        times.append(time.perf_counter() - start)
    return times


async def during_freeze(remote, local, crowd: int, rounds: int) -> tuple[list[float], float]:
    start = time.perf_counter()
    stuck = [asyncio.ensure_future(remote.asearch(QUESTIONS[0])) for _ in range(crowd)]
    await asyncio.sleep(0.05)
    times = await local_search_times(local, rounds, "during")
    await asyncio.gather(*stuck, return_exceptions=True)
    return times, time.perf_counter() - start


def stopped_calls(remote: KnowledgeBase) -> list[tuple[str, float, str]]:
    """Each public call of ``remote`` with its server stopped: seconds, and what it raised."""
    from langchain_core.documents import Document

    doc = Document("Interns get 10 days of leave.", metadata={"source": "interns.md"})
    calls = {
        "search": lambda: remote.search(QUESTIONS[3]),
        "asearch": lambda: asyncio.run(remote.asearch(QUESTIONS[4])),
        "add_documents": lambda: remote.add_documents([doc]),
        "count": remote.count,
        "info": lambda: remote.info,
        "check": remote.check,
        "restriction": lambda: remote.restriction,
        "get_source_fingerprint": lambda: remote.get_source_fingerprint("interns.md"),
        "delete_source": lambda: remote.delete_source("interns.md"),
        "turn (injector.prepare)": lambda: KnowledgeInjector(remote).prepare(
            [HumanMessage(QUESTIONS[5])]
        ),
    }
    rows = []
    for name, call in calls.items():
        start = time.perf_counter()
        try:
            call()
            error = "no error (a degraded turn)" if name.startswith("turn") else "no error"
        except Exception as exc:
            chain, cause = [], exc
            while cause is not None:
                chain.append(type(cause).__name__)
                cause = cause.__cause__
            error = " <- ".join(chain)
        rows.append((name, time.perf_counter() - start, error))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=5.0, help="the bound (KB timeout=)")
    parser.add_argument("--crowd", type=int, default=32, help="concurrent frozen asearch calls")
    parser.add_argument("--rounds", type=int, default=20, help="healthy searches per phase")
    args = parser.parse_args()
    embeddings = default_embeddings()
    tmp = Path(tempfile.mkdtemp(prefix="kinject-frozen-"))
    with chroma_server(tmp / "server") as (process, port):
        remote = KnowledgeBase("remote", path=tmp / "catalog", client=client(port),
                               embeddings=embeddings, timeout=args.timeout)  # fmt: skip
        remote.add_documents(SAMPLE_DOCUMENTS)
        local = KnowledgeBase("local", path=tmp / "local", embeddings=embeddings)
        local.add_documents(SAMPLE_DOCUMENTS)
        injector = KnowledgeInjector([remote, local])
        injector.prepare([HumanMessage(QUESTIONS[0])])  # warm up
        model = GenericFakeChatModel(messages=itertools.repeat(AIMessage("OK.")))
        graph = create_knowledge_graph(model, [remote, local])  # its four steps, one deadline
        graph.invoke({"messages": [HumanMessage(QUESTIONS[0])]})
        asyncio.run(local_search_times(local, args.rounds, "warm-up"))
        before = asyncio.run(local_search_times(local, args.rounds, "before"))

        os.kill(process.pid, signal.SIGSTOP)
        try:
            start = time.perf_counter()
            turn = injector.prepare([HumanMessage(QUESTIONS[1])])
            sync_turn = time.perf_counter() - start
            start = time.perf_counter()
            aturn = asyncio.run(injector.aprepare([HumanMessage(QUESTIONS[2])]))
            async_turn = time.perf_counter() - start
            start = time.perf_counter()
            state = graph.invoke({"messages": [HumanMessage(QUESTIONS[1])]})
            graph_turn = time.perf_counter() - start
            during, crowd_s = asyncio.run(during_freeze(remote, local, args.crowd, args.rounds))
        finally:
            os.kill(process.pid, signal.SIGCONT)
        after = asyncio.run(local_search_times(local, args.rounds, "after"))
        process.terminate()
        process.wait(timeout=30)
        stopped = stopped_calls(remote)
        load = os.getloadavg()[0]
    print(f"load average (1 min): {load:.2f}")
    print(f"bound (timeout=): {args.timeout:.1f} s; target: turn <= {1.5 * args.timeout:.1f} s")
    for name, took, made in (("sync", sync_turn, turn), ("async", async_turn, aturn)):
        print(f"{name} turn, frozen server: {took:6.2f} s = {took / args.timeout:.2f}x the bound"
              f"  errors={[e['stage'] + ':' + e['error'] for e in made.manifest.errors]} "
              f"injected={made.manifest.injected}")  # fmt: skip
    print(f"graph turn, frozen server: {graph_turn:6.2f} s = {graph_turn / args.timeout:.2f}x "
          f"the bound  restricted={state['safe_summary'] is not None}")  # fmt: skip
    print(f"{args.crowd} concurrent frozen asearch calls all returned after {crowd_s:.2f} s")
    b, d, a = statistics.median(before), statistics.median(during), statistics.median(after)
    print(f"healthy embedded asearch, median of {args.rounds}: before the freeze "
          f"{b * 1000:.1f} ms, during {d * 1000:.1f} ms (ratio {d / b:.2f}), after "
          f"{a * 1000:.1f} ms; max during {max(during) * 1000:.1f} ms")  # fmt: skip
    print("server stopped (target: a package error within 3 s each):")
    for name, took, error in stopped:
        print(f"  {name:<24} {took:6.3f} s  {error}")


if __name__ == "__main__":
    main()
