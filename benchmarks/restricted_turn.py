"""What does a restricted turn cost beside another tree's (sealing, the sealed-text check)?

Two worker processes, one per tree (this one, and ``--baseline DIR`` through
``PYTHONPATH=DIR``, e.g. ``/work/base``), each build the same knowledge base (the sample
HR policies plus ``--docs`` SciFact abstracts, the real model) and the paths of
``injection_overhead.py``; in ``--restricted`` mode the knowledge base is restricted
(sealed, where the tree seals) and every surface has a fake summarizer with a fixed
honest reply, so a turn includes its safe summary and leak guard. The driver then
times one call at a time, alternating the two workers query by query (the order of
the trees flips each time), so both see the same machine load: each path's median
turn per tree (every call embeds its query) and their ratio. Targets (issue 31): a
restricted turn (``injector``, ``graph``, ``middleware``) <= 1.20x the baseline's;
an open one pays nothing (about 1.00x). ``bare`` is the owner's own ``kb.search``.

Run: ``OMP_NUM_THREADS=1 python benchmarks/restricted_turn.py --baseline /work/base
[--docs 100] [--queries 30] [--rounds 2] [--modes open,restricted]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER = textwrap.dedent(
    """
    import gc, json, sys, tempfile, time
    sys.path.insert(0, sys.argv[3])
    from _common import sample_kb, scifact_documents
    from injection_overhead import build_paths, clear_query_cache
    restricted, docs = sys.argv[1] == "restricted", int(sys.argv[2])
    kb = sample_kb(tempfile.mkdtemp())
    kb.add_documents(scifact_documents(docs))
    if restricted:
        kb.restrict()
    paths = build_paths(kb, top_k=4, restricted=restricted)
    print("READY", json.dumps(sorted(paths)), flush=True)
    for line in sys.stdin:
        name, query = json.loads(line)
        clear_query_cache(kb)
        gc.collect()
        start = time.perf_counter()
        paths[name](query)
        print(json.dumps(time.perf_counter() - start), flush=True)
    """
)


class Worker:
    """One tree's worker process: it times a path on a query when asked."""

    def __init__(self, tree: Path, mode: str, docs: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER, mode, str(docs), str(HERE)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=HERE,
        )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("READY"):
            raise RuntimeError(f"{tree}: the worker did not start ({line!r})")
        self.paths: list[str] = json.loads(line.split(" ", 1)[1])

    def time(self, path: str, query: str) -> float:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps([path, query]) + "\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", default="open,restricted")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from _common import machine_load, scifact_queries

    from langchain_knowledge_inject._ingest.sample_data import SAMPLE_QUESTIONS

    queries = [q.question for q in SAMPLE_QUESTIONS]
    queries += scifact_queries(max(0, args.queries - len(queries)))
    trees = {"this tree": HERE.parent, "baseline": args.baseline.resolve()}
    for mode in args.modes.split(","):
        print(f"{mode}: building both knowledge bases ({machine_load()})", flush=True)
        workers = {name: Worker(tree, mode, args.docs) for name, tree in trees.items()}
        paths = workers["this tree"].paths
        times: dict[tuple[str, str], list[float]] = {}
        try:
            for query in queries[:3]:  # warm-up
                for path in paths:
                    for worker in workers.values():
                        worker.time(path, query)
            flip = False
            for _ in range(args.rounds):
                for query in queries:
                    for path in paths:
                        order = list(workers) if flip else list(reversed(workers))
                        flip = not flip
                        for name in order:
                            times.setdefault((name, path), []).append(
                                workers[name].time(path, query)
                            )
        finally:
            for worker in workers.values():
                worker.close()
        print(f"\n{mode} turns ({len(queries)} queries x {args.rounds} rounds, alternating; "
              f"{machine_load()}): median ms, this tree / baseline, paired ratio")  # fmt: skip
        for path in paths:
            mine, base = times[("this tree", path)], times[("baseline", path)]
            paired = statistics.median(a / b for a, b in zip(mine, base, strict=True))
            target = "  (target <= 1.20x)" if mode == "restricted" and path != "bare" else ""
            m, b = statistics.median(mine) * 1000, statistics.median(base) * 1000
            print(f"  {path:<11} {m:8.2f} {b:8.2f}  {m / b:5.2f}x  {paired:5.2f}x{target}")


if __name__ == "__main__":
    main()
