"""A 1 MB user message costs about what a normal question costs (the query is cut).

The timing half of two tests that now assert behaviour only (unit:
``test_one_megabyte_message_is_cut``; integration:
``test_one_megabyte_message_is_cut_to_what_the_model_reads``).
The sample HR knowledge base with the real embedding model; for the injector,
the search tool and the graph, the median time of a normal question and of a
distinct 1 MiB message (so the query-embedding cache never answers) is taken
side by side in one run. Target: ratio <= 5 (it used to be asserted so).

Run: ``OMP_NUM_THREADS=1 python benchmarks/huge_message.py [--runs 5]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import ScriptedReplyModel, sample_kb
from langchain_core.messages import HumanMessage

from langchain_knowledge_inject import (
    KnowledgeInjector,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
)


def median_seconds(calls: list[Callable[[], object]]) -> float:
    times = []
    for call in calls:
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    kb = sample_kb(tempfile.mkdtemp(prefix="kinject-huge-"))
    injector = KnowledgeInjector(kb, min_score=0.0)
    tool = create_knowledge_base_search_tool(kb, min_score=0.0)
    graph = create_knowledge_graph(ScriptedReplyModel(record=False), kb, min_score=0.0)
    injector.invoke([HumanMessage("warm up the model")])
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    surfaces: dict[str, Callable[[str], object]] = {
        "injector": lambda q: injector.invoke([HumanMessage(q)]),
        "tool": lambda q: tool.invoke({"query": q}),
        "graph": lambda q: graph.invoke({"messages": [HumanMessage(q)]}),
    }
    for name, run in surfaces.items():  # distinct texts per surface: no cache hit anywhere
        normal = [f"{name} {i}: how many days of annual leave?" for i in range(args.runs)]
        huge = [(f"{name} {i}: how many days of annual leave? " * 30_000)[: 1 << 20]
                for i in range(args.runs)]  # fmt: skip
        a = median_seconds([lambda q=q, run=run: run(q) for q in normal])
        b = median_seconds([lambda q=q, run=run: run(q) for q in huge])
        print(f"{name:>9}: normal {a * 1000:7.1f} ms, 1 MiB {b * 1000:7.1f} ms, "
              f"ratio {b / a:.2f} (target <= 5)")  # fmt: skip


if __name__ == "__main__":
    main()
