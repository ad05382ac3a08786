"""What does injection cost on top of the retrieval it wraps?

On a knowledge base of realistic size (the sample HR policies plus a few
hundred SciFact abstracts, real embedding model, hybrid search), each query is
timed through five paths, interleaved in one run with the order rotated from
query to query and from round to round:

- ``bare``: ``kb.search(query, k, min_score, mode, tenant_id)`` with the
  injector's settings: the retrieval the injector wraps;
- ``injector``: ``KnowledgeInjector.invoke([system, user])``: retrieval, the
  knowledge block cut to the token budget, placement, the manifest;
- ``graph``: ``create_knowledge_graph(...).invoke`` with a fake chat model
  (``retrieve -> build_context -> call_model`` on an open turn, no checkpointer);
- ``node``: a ``StateGraph(MessagesState)`` whose one node is
  ``create_knowledge_node`` with the same fake model;
- ``middleware``: ``create_agent`` with ``KnowledgeInjectionMiddleware`` and the
  same fake model;
- ``restricted``: the injector with ``restricted=True`` and a scripted summarizer (an
  honest summary): retrieval, the boundary, the leak guard, the ledger (reported;
  ``benchmarks/restricted_cost.py`` compares it with another checkout side by side).

The knowledge base's query-embedding cache is cleared before every call of
every path, so each one embeds its query. Reported: the median time per path
and its ratio to the median of ``bare`` (the median of per-query ratios is
printed beside it). Targets: injector <= 1.10x, graph <= 1.3x; the node and
middleware paths are reported.

Beside the ratios, the fixed cost each path adds to the retrieval is measured
with the query embedding cached (best of 5 calls per query, minus the bare
search's best): it does not depend on the embedding model or the machine's
load. The load average is printed: on a shared machine the medians move a lot.

Each tree runs in a worker process of its own (``PYTHONPATH`` set to the tree),
with its own copy of the knowledge base. ``--baseline DIR`` adds another tree
(for example ``/work/base``, the code before a change): its worker measures the
same paths in the same run, round by round alternating with this tree's, so
both see the same load.

``--restricted`` restricts the knowledge base (sealed, where the code seals) and gives
every surface a fake summarizer with a fixed honest reply: a restricted turn, its safe
summary and leak guard included; ``restricted_turn.py`` times it beside another tree.

Run: ``OMP_NUM_THREADS=1 python benchmarks/injection_overhead.py [--docs 400]
[--queries 60] [--rounds 3] [--baseline DIR]`` (about two minutes per tree on
2 CPU cores, most of it embedding the knowledge base).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import (
    ROOT,
    SYSTEM_PROMPT,
    ScriptedReplyModel,
    machine_load,
    sample_kb,
    scifact_documents,
    scifact_queries,
)
from langchain_core.messages import HumanMessage, SystemMessage

TARGETS = {"injector": 1.10, "graph": 1.3}
REPLY = "@@"  # a worker's protocol lines start with this; anything else is its log


HONEST = json.dumps({
    "decision": "answer", "reason": "answerable", "confidence": 0.8,
    "summary": "The policy sets rules for this; plan ahead and ask the owner.",
    "answer_guidance": "Give general advice and suggest checking the policy.",
})  # fmt: skip


def build_paths(kb, *, top_k: int, restricted: bool = False) -> dict[str, Callable[[str], object]]:
    from langchain.agents import create_agent
    from langgraph.graph import START, MessagesState, StateGraph

    from langchain_knowledge_inject import (
        KnowledgeInjectionMiddleware,
        KnowledgeInjector,
        create_knowledge_graph,
        create_knowledge_node,
    )
    from langchain_knowledge_inject._turn.formatting import KNOWLEDGE_SYSTEM_PROMPT

    summarizer = ScriptedReplyModel(record=False, default=HONEST) if restricted else None
    options = {"top_k": top_k, "summarizer_model": summarizer}
    injector = KnowledgeInjector(kb, **options)
    settings = injector.settings
    system = SystemMessage(f"{SYSTEM_PROMPT}\n\n{KNOWLEDGE_SYSTEM_PROMPT}")
    graph = create_knowledge_graph(
        ScriptedReplyModel(record=False), kb, system_prompt=SYSTEM_PROMPT, **options
    )
    builder = StateGraph(MessagesState)
    node = create_knowledge_node(
        ScriptedReplyModel(record=False), kb, system_prompt=SYSTEM_PROMPT, **options
    )
    builder.add_node("model", node)
    builder.add_edge(START, "model")
    node_graph = builder.compile()
    agent = create_agent(
        ScriptedReplyModel(record=False),
        tools=[],
        system_prompt=SYSTEM_PROMPT,
        middleware=[KnowledgeInjectionMiddleware(kb, **options)],
    )

    def bare(query: str) -> object:
        return kb.search(
            query, k=settings.top_k, min_score=settings.min_score,
            mode=settings.mode, tenant_id=settings.tenant_id,
        )  # fmt: skip

    summary = (
        '{"decision": "answer", "reason": "answerable", "summary": "Plan requests early and '
        'follow the documented approval route.", "answer_guidance": "Give general advice.", '
        '"confidence": 0.8}'
    )
    guarded = KnowledgeInjector(
        kb, top_k=top_k, restricted=True, summarizer_model=ScriptedReplyModel(
            record=False, default=summary),
    )  # fmt: skip
    return {
        "bare": bare,
        "injector": lambda q: injector.invoke([system, HumanMessage(q)]),
        "restricted": lambda q: guarded.invoke([system, HumanMessage(q)]),
        "graph": lambda q: graph.invoke({"messages": [HumanMessage(q)]}),
        "node": lambda q: node_graph.invoke({"messages": [HumanMessage(q)]}),
        "middleware": lambda q: agent.invoke({"messages": [HumanMessage(q)]}),
    }


def clear_query_cache(kb) -> None:
    """Empty the knowledge base's query-embedding cache."""
    cache = kb._query_vector
    (getattr(cache, "cache_clear", None) or cache.clear)()


def measure_round(kb, paths, queries: list[str], round_: int) -> dict[str, list[float]]:
    """One round: every query through every path, the order rotated by query and round."""
    names = list(paths)
    times: dict[str, list[float]] = {name: [] for name in names}
    for i, query in enumerate(queries):
        shift = (i + round_) % len(names)
        for name in names[shift:] + names[:shift]:
            clear_query_cache(kb)
            gc.collect()
            start = time.perf_counter()
            paths[name](query)
            times[name].append(time.perf_counter() - start)
    return times


def fixed_costs(kb, paths, queries: list[str], repeats: int = 5) -> dict[str, float]:
    """Median over queries of (best time of a path - best time of bare), query vectors cached."""
    best: dict[str, list[float]] = {name: [] for name in paths}
    for query in queries:
        kb.search(query)  # caches the query vector
        for name, path in paths.items():
            samples = []
            for _ in range(repeats):
                start = time.perf_counter()
                path(query)
                samples.append(time.perf_counter() - start)
            best[name].append(min(samples))
    bare = best["bare"]
    return {
        name: statistics.median(t - b for t, b in zip(times, bare, strict=True))
        for name, times in best.items()
    }


def queries_for(count: int) -> list[str]:
    try:
        from langchain_knowledge_inject._ingest.sample_data import SAMPLE_QUESTIONS
    except ImportError:  # an older layout
        from langchain_knowledge_inject.ingest.sample_data import SAMPLE_QUESTIONS
    queries = [q.question for q in SAMPLE_QUESTIONS]
    return queries + scifact_queries(max(0, count - len(queries)))


def worker(args: argparse.Namespace) -> int:
    """Build the knowledge base and the paths, then answer the coordinator's commands."""

    def reply(value: object) -> None:
        print(REPLY + json.dumps(value), flush=True)

    queries = queries_for(args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        kb = sample_kb(tmp)
        kb.add_documents(scifact_documents(args.docs))
        if args.restricted:
            kb.restrict()
        built = time.perf_counter() - start
        try:
            paths = build_paths(kb, top_k=args.top_k, restricted=args.restricted)
            for query in queries[:3]:  # warm-up: imports, compiled graphs, Chroma in memory
                for path in paths.values():
                    clear_query_cache(kb)
                    path(query)
            reply({"chunks": kb.info.chunk_count, "seconds": built})
            for line in sys.stdin:
                command = json.loads(line)
                if command["cmd"] == "round":
                    reply(measure_round(kb, paths, queries, command["round"]))
                elif command["cmd"] == "fixed":
                    reply(fixed_costs(kb, paths, queries[:20]))
                else:
                    break
        finally:
            kb.close()
    return 0


class Tree:
    """One tree's worker process and what it measured."""

    def __init__(self, label: str, path: Path, args: argparse.Namespace) -> None:
        self.label, self.path = label, path
        self.times: dict[str, list[float]] = {}
        self.fixed: dict[str, float] = {}
        command = [sys.executable, __file__, "--worker", "--docs", str(args.docs),
                   "--queries", str(args.queries), "--top-k", str(args.top_k),
                   *(["--restricted"] if args.restricted else [])]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(path)}
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def ask(self, command: dict[str, object] | None = None) -> object:
        assert self.process.stdin is not None and self.process.stdout is not None
        if command is not None:
            self.process.stdin.write(json.dumps(command) + "\n")
            self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(REPLY):
                return json.loads(line[len(REPLY) :])
        raise RuntimeError(f"the worker for {self.path} exited ({self.process.wait()})")

    def round(self, round_: int) -> None:
        for name, samples in self.ask({"cmd": "round", "round": round_}).items():  # type: ignore[union-attr]
            self.times.setdefault(name, []).extend(samples)

    def close(self) -> None:
        if self.process.poll() is None and self.process.stdin is not None:
            self.process.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.process.stdin.close()
            self.process.wait(timeout=120)


def report(tree: Tree, args: argparse.Namespace) -> dict[str, float]:
    bare = tree.times["bare"]
    base = statistics.median(bare)
    print(f"\n{tree.label} ({tree.path}): {len(bare)} calls per path, top_k={args.top_k}, hybrid")
    print(
        f"{'path':<11} {'median ms':>9} {'p90 ms':>7} {'ratio':>6} {'paired':>7} "
        f"{'fixed ms':>8}  target"
    )
    ratios = {}
    for name, samples in tree.times.items():
        median = statistics.median(samples)
        p90 = statistics.quantiles(samples, n=10)[-1]
        ratios[name] = ratio = median / base
        paired = statistics.median(t / b for t, b in zip(samples, bare, strict=True))
        target = TARGETS.get(name)
        verdict = "" if name == "bare" else "(reported)"
        if target is not None:
            verdict = f"<= {target:.2f}x {'PASS' if ratio <= target else 'FAIL'}"
        print(
            f"{name:<11} {median * 1000:>9.2f} {p90 * 1000:>7.2f} {ratio:>5.2f}x {paired:>6.2f}x "
            f"{tree.fixed[name] * 1000:>8.2f}  {verdict}"
        )
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=400, help="SciFact abstracts added")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top-k", type=int, default=4)
    parser.add_argument("--baseline", type=Path, help="another tree, measured alternately")
    parser.add_argument("--restricted", action="store_true", help="restricted turns (see above)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    print(f"before: {machine_load()}")
    trees = [Tree("this tree", ROOT, args)]
    if args.baseline is not None:
        trees.append(Tree("baseline", args.baseline.resolve(), args))
    try:
        for tree in trees:
            built = tree.ask()
            print(f"{tree.label}: {built['chunks']} chunks, built in {built['seconds']:.0f} s")  # type: ignore[index]
        for round_ in range(args.rounds):  # alternate which tree goes first
            for tree in trees if round_ % 2 == 0 else trees[::-1]:
                tree.round(round_)
        for tree in trees if args.rounds % 2 == 0 else trees[::-1]:
            tree.fixed = tree.ask({"cmd": "fixed"})  # type: ignore[assignment]
    finally:
        for tree in trees:
            tree.close()
    print(f"after:  {machine_load()}")

    ratios = [report(tree, args) for tree in trees]
    print(
        "ratio: median / median of bare; paired: median of per-call ratios to bare (same query);\n"
        "fixed: time added to the bare search with the query vector cached (best of 5, median)"
    )
    if len(trees) > 1:
        print("\nside by side (ratio to bare): " + ", ".join(
            f"{name} {ratios[0][name]:.2f}x vs {ratios[1][name]:.2f}x"
            for name in ratios[0] if name != "bare"
        ))  # fmt: skip
    ok = all(ratios[0][name] <= target for name, target in TARGETS.items())
    print(f"\noverall (this tree): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
