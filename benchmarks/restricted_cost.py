"""What does a restricted turn cost, this checkout beside another (``/work/base``)?

Each round runs one worker process per checkout, alternately (``PYTHONPATH`` set to
the checkout, the order swapped from round to round). A worker builds the sample
HR knowledge base (real embedding model), then times, with the query vectors
cached after a warm-up:

- ``open``: ``KnowledgeInjector(kb)`` turns (an open knowledge base);
- ``restricted``: ``KnowledgeInjector(kb, restricted=True)`` turns with a scripted
  summarizer (an honest summary): retrieval, the boundary, the leak guard, the ledger;
- ``guard``: ``check_leak`` alone on the 160 honest summaries of
  ``tests/unit_tests/honest_summaries.py`` (this checkout's file), per summary.

Printed: the median of each measure per checkout and the ratio this/other. Targets
(issue 31): restricted <= 1.2x, open <= 1.05x (pays nothing).

Run: ``OMP_NUM_THREADS=1 python benchmarks/restricted_cost.py [--other /work/base]
[--rounds 3] [--turns 40]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import machine_load

HERE = Path(__file__).resolve().parents[1]
FIXTURE = HERE / "tests" / "unit_tests" / "honest_summaries.py"
SUMMARY = json.dumps({
    "decision": "answer", "reason": "answerable", "answer_guidance": "Give general advice.",
    "summary": "Plan requests early and follow the documented approval route.", "confidence": 0.8,
})  # fmt: skip

WORKER = r"""
import json, statistics, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/benchmarks")
from _common import ScriptedReplyModel, sample_kb
from langchain_core.messages import HumanMessage
from langchain_knowledge_inject import KnowledgeInjector
from langchain_knowledge_inject._restricted.guard import check_leak
import runpy
HONEST = runpy.run_path(sys.argv[4])["HONEST"]  # this checkout's fixture, whatever the code
try:
    from langchain_knowledge_inject._ingest.sample_data import SAMPLE_QUESTIONS
except ImportError:
    from langchain_knowledge_inject.ingest.sample_data import SAMPLE_QUESTIONS
turns, summary = int(sys.argv[2]), sys.argv[3]
questions = [q.question for q in SAMPLE_QUESTIONS]
out = {}
with tempfile.TemporaryDirectory() as tmp:
    kb = sample_kb(tmp)
    paths = {
        "open": KnowledgeInjector(kb),
        "restricted": KnowledgeInjector(kb, restricted=True, summarizer_model=ScriptedReplyModel(
            record=False, default=summary)),
    }
    for name, injector in paths.items():
        for q in questions:
            injector.invoke([HumanMessage(q)])  # warm-up: vectors cached, word lists loaded
        times = []
        for i in range(turns):
            start = time.perf_counter()
            injector.invoke([HumanMessage(questions[i % len(questions)])])
            times.append(time.perf_counter() - start)
        out[name] = statistics.median(times)
    kb.close()
for case in HONEST[:8]:
    check_leak({"summary": case.summary}, [case.chunk], question=case.question)
times = []
for case in HONEST:
    start = time.perf_counter()
    check_leak({"summary": case.summary, "answer_guidance": case.guidance}, [case.chunk],
               question=case.question)
    times.append(time.perf_counter() - start)
out["guard"] = statistics.median(times)
print(json.dumps(out))
"""


def run(checkout: str, turns: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": checkout, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as home:
        env["KINJECT_HOME"] = home
        done = subprocess.run(
            [sys.executable, "-c", WORKER, checkout, str(turns), SUMMARY, str(FIXTURE)],
            env=env, capture_output=True, text=True, check=True, cwd=str(HERE),
        )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", default="/work/base")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    print(f"before: {machine_load()}")
    checkouts = {"this": str(HERE), "other": args.other}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for round_ in range(args.rounds):
        order = list(checkouts) if round_ % 2 == 0 else list(checkouts)[::-1]
        for name in order:
            results[name].append(run(checkouts[name], args.turns))
    print(f"after:  {machine_load()}")
    print(f"\n{args.rounds} rounds x {args.turns} turns; other = {args.other}")
    print(f"{'measure':<11} {'this ms':>8} {'other ms':>9} {'ratio':>6}  target")
    targets = {"restricted": 1.2, "open": 1.05}
    ok = True
    for measure in ("open", "restricted", "guard"):
        this = statistics.median(r[measure] for r in results["this"]) * 1000
        other = statistics.median(r[measure] for r in results["other"]) * 1000
        target = targets.get(measure)
        verdict = "(reported)" if target is None else f"<= {target:.2f}x " + (
            "PASS" if this / other <= target else "FAIL")  # fmt: skip
        ok = ok and (target is None or this / other <= target)
        print(f"{measure:<11} {this:>8.2f} {other:>9.2f} {this / other:>5.2f}x  {verdict}")
    print(f"\noverall: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
