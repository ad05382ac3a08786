"""What does a restricted turn cost beside another tree's (sealing, the sealed-text check)?

Runs ``injection_overhead.py`` with and without ``--restricted`` for this tree and for
``--baseline DIR`` (``PYTHONPATH=DIR``, e.g. ``/work/base``), alternating the trees run
by run, and prints each path's median turn (every path embeds its query) and its ratio
to the other tree's, per mode. Targets (issue 31): a restricted turn (``injector``,
``graph``, ``middleware`` with ``--restricted``) <= 1.20x the other tree's; an open one
pays nothing (about 1.00x). ``bare`` is the owner's own ``kb.search``.

Run: ``OMP_NUM_THREADS=1 python benchmarks/restricted_turn.py --baseline /work/base
[--runs 2] [--docs 100] [--queries 30] [--rounds 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(tree: Path, restricted: bool, args: argparse.Namespace) -> dict[str, float]:
    command = [sys.executable, str(HERE / "injection_overhead.py"), "--docs", str(args.docs),
               "--queries", str(args.queries), "--rounds", str(args.rounds)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [*command, *(["--restricted"] if restricted else [])],
        capture_output=True, text=True, env=env, cwd=HERE,
    )  # fmt: skip
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("MEDIANS ")), None)
    if line is None:
        raise RuntimeError(f"{tree}: {done.stdout[-1500:]}\n{done.stderr[-1500:]}")
    return dict(json.loads(line.removeprefix("MEDIANS ")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    trees = {"this tree": HERE.parent, "baseline": args.baseline.resolve()}
    found: dict[tuple[str, bool], list[dict[str, float]]] = {}
    for n in range(args.runs):
        for restricted in (False, True):
            names = list(trees) if n % 2 == 0 else list(reversed(trees))
            for name in names:
                found.setdefault((name, restricted), []).append(run(trees[name], restricted, args))
                print(f"run {n + 1}: {name}, {'restricted' if restricted else 'open'}: done "
                      f"(load {os.getloadavg()[0]:.2f})", flush=True)  # fmt: skip
    for restricted in (False, True):
        print(f"\n{'restricted' if restricted else 'open'} turns: median ms, this tree / baseline")
        for path in found[("this tree", restricted)][0]:
            mine = statistics.median(r[path] for r in found[("this tree", restricted)]) * 1000
            base = statistics.median(r[path] for r in found[("baseline", restricted)]) * 1000
            target = "  (target <= 1.20x)" if restricted and path != "bare" else ""
            print(f"  {path:<11} {mine:8.2f} {base:8.2f}  {mine / base:5.2f}x{target}")
    print(f"\nload: {os.getloadavg()}")


if __name__ == "__main__":
    main()
