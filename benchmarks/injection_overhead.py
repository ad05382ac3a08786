"""What does injection cost on top of the retrieval it wraps?

On a knowledge base of realistic size (the sample HR policies plus a few
hundred SciFact abstracts, real embedding model, hybrid search), each query is
timed through four paths, interleaved in one run with the order rotated from
query to query and from round to round:

- ``bare``: ``kb.search(query, k, min_score, mode, tenant_id)`` with the
  injector's settings: the retrieval the injector wraps;
- ``injector``: ``KnowledgeInjector.invoke([system, user])``: retrieval, the
  knowledge block cut to the token budget, placement, the manifest;
- ``graph``: ``create_knowledge_graph(...).invoke`` with a fake chat model
  (``retrieve -> build_context -> call_model``, no checkpointer);
- ``middleware``: ``create_agent`` with ``KnowledgeInjectionMiddleware`` and the
  same fake model.

The knowledge base's query-embedding cache is cleared before every call of
every path, so each one embeds its query. Reported: the median time per path
and its ratio to the median of ``bare`` (the median of per-query ratios is
printed beside it). Targets: injector <= 1.10x, graph <= 1.5x; the middleware
path is reported.

Beside the ratios, the fixed cost each path adds to the retrieval is measured
with the query embedding cached (best of 5 calls per query, minus the bare
search's best): it does not depend on the embedding model or the machine's
load. The load average is printed: on a shared machine the medians move a lot.

``--restricted`` restricts the knowledge base (sealed, where the code seals) and gives
every surface a fake summarizer with a fixed honest reply: a restricted turn, its safe
summary and leak guard included; ``restricted_turn.py`` times it beside another tree.

Run: ``python benchmarks/injection_overhead.py [--docs 400] [--queries 60] [--rounds 3]``
(about two minutes on 2 CPU cores, most of it embedding the knowledge base).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

from _common import (
    SYSTEM_PROMPT,
    ScriptedReplyModel,
    machine_load,
    sample_kb,
    scifact_documents,
    scifact_queries,
)
from langchain_core.messages import HumanMessage, SystemMessage

from langchain_knowledge_inject import (
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    create_knowledge_graph,
)

try:
    from langchain_knowledge_inject._ingest.sample_data import SAMPLE_QUESTIONS
    from langchain_knowledge_inject._turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
except ImportError:  # the starting code (PYTHONPATH=/work/baseline)
    from langchain_knowledge_inject.ingest.sample_data import SAMPLE_QUESTIONS
    from langchain_knowledge_inject.turn.formatting import KNOWLEDGE_SYSTEM_PROMPT

TARGETS = {"injector": 1.10, "graph": 1.5}


HONEST = json.dumps({
    "decision": "answer", "reason": "answerable", "confidence": 0.8,
    "summary": "The policy sets rules for this; plan ahead and ask the owner.",
    "answer_guidance": "Give general advice and suggest checking the policy.",
})  # fmt: skip


def build_paths(kb, *, top_k: int, restricted: bool = False) -> dict[str, Callable[[str], object]]:
    from langchain.agents import create_agent

    summarizer = ScriptedReplyModel(record=False, default=HONEST) if restricted else None
    options = {"top_k": top_k, "summarizer_model": summarizer}
    injector = KnowledgeInjector(kb, **options)
    settings = injector.settings
    system = SystemMessage(f"{SYSTEM_PROMPT}\n\n{KNOWLEDGE_SYSTEM_PROMPT}")
    graph = create_knowledge_graph(
        ScriptedReplyModel(record=False), kb, system_prompt=SYSTEM_PROMPT, **options
    )
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

    return {
        "bare": bare,
        "injector": lambda q: injector.invoke([system, HumanMessage(q)]),
        "graph": lambda q: graph.invoke({"messages": [HumanMessage(q)]}),
        "middleware": lambda q: agent.invoke({"messages": [HumanMessage(q)]}),
    }


def clear_query_cache(kb) -> None:
    """Empty the knowledge base's query-embedding cache (this code's or the starting code's)."""
    cache = kb._query_vector
    (getattr(cache, "cache_clear", None) or cache.clear)()


def measure(kb, paths, queries: list[str], rounds: int) -> dict[str, list[float]]:
    names = list(paths)
    times: dict[str, list[float]] = {name: [] for name in names}
    for query in queries[:3]:  # warm-up: imports, compiled graphs, Chroma's index in memory
        for name in names:
            clear_query_cache(kb)
            paths[name](query)
    for round_ in range(rounds):
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=400, help="SciFact abstracts added")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top-k", type=int, default=4)
    parser.add_argument("--restricted", action="store_true", help="restricted turns (see above)")
    args = parser.parse_args()

    print(f"before: {machine_load()}")
    queries = [q.question for q in SAMPLE_QUESTIONS]
    queries += scifact_queries(max(0, args.queries - len(queries)))
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        kb = sample_kb(tmp)
        kb.add_documents(scifact_documents(args.docs))
        if args.restricted:
            kb.restrict()
        print(
            f"knowledge base: {kb.info.chunk_count} chunks (sample HR + {args.docs} SciFact "
            f"abstracts), built in {time.perf_counter() - start:.0f} s"
        )
        try:
            paths = build_paths(kb, top_k=args.top_k, restricted=args.restricted)
            times = measure(kb, paths, queries, args.rounds)
            extra = fixed_costs(kb, paths, queries[:20])
        finally:
            kb.close()
    print(f"after:  {machine_load()}")

    bare = times["bare"]
    base = statistics.median(bare)
    print(f"\n{len(queries)} queries x {args.rounds} rounds, top_k={args.top_k}, hybrid search")
    print(
        f"{'path':<11} {'median ms':>9} {'p90 ms':>7} {'ratio':>6} {'paired':>7} "
        f"{'fixed ms':>8}  target"
    )
    ok = True
    for name, samples in times.items():
        median = statistics.median(samples)
        p90 = statistics.quantiles(samples, n=10)[-1]
        ratio = median / base
        paired = statistics.median(t / b for t, b in zip(samples, bare, strict=True))
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            passed = ratio <= target
            ok = ok and passed
            verdict = f"<= {target:.2f}x {'PASS' if passed else 'FAIL'}"
        elif name != "bare":
            verdict = "(reported)"
        print(
            f"{name:<11} {median * 1000:>9.2f} {p90 * 1000:>7.2f} {ratio:>5.2f}x {paired:>6.2f}x "
            f"{extra[name] * 1000:>8.2f}  {verdict}"
        )
    print(
        "ratio: median / median of bare; paired: median of per-call ratios to bare (same query);\n"
        "fixed: time added to the bare search with the query vector cached (best of 5, median)"
    )
    print(f"\noverall: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
