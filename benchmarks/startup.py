"""Start-up time: importing the package and the ``kinject`` commands that do not embed.

Each case runs in a fresh interpreter (``sys.executable``, ``OMP_NUM_THREADS=1``,
``HF_HUB_OFFLINE=1``); the cases are run round-robin, ``--repeat`` times each, so
a change of load touches all of them alike, and the median wall time of each is
printed with its ratio to a reference measured in the same run:

* ``import langchain_knowledge_inject`` against ``import langgraph.graph``
  (target: at most 1.3x);
* ``kinject --help``, ``kinject kbs``, ``kinject check --kb hr-demo`` and the
  error for an unknown knowledge base (``kinject search q --kb nope``) against
  ``import langchain_core`` (target: each under 1.5x).

``import chromadb`` is timed too, as a reference: it is the floor of any
command that opens the embedded Chroma store.

``kinject`` runs as its console script does (``from ..._surfaces.cli import
main; sys.exit(main())``) on a store that ``kinject demo`` fills first (the
sample knowledge base, the default model), outside the timings. With
``--baseline DIR`` the same cases run for the tree in ``DIR`` too (on
``PYTHONPATH``, its own store), side by side. Every interpreter starts in a
temporary folder, so the tree on ``PYTHONPATH`` is the one imported. The load
average is printed before and after.

Run: ``OMP_NUM_THREADS=1 python benchmarks/startup.py [--repeat 9] [--baseline /work/baseline]``
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENTRY = re.compile(r'^kinject = "([\w.]+):main"', re.MULTILINE)
PACKAGE_REFERENCE = ("import langgraph.graph", 1.3)
CLI_REFERENCE = ("import langchain_core", 1.5)


def console_script(tree: Path) -> str:
    """What the tree's ``kinject`` console script runs, as ``python -c`` code."""
    module = ENTRY.search((tree / "pyproject.toml").read_text(encoding="utf-8"))
    if module is None:
        msg = f"no kinject console script in {tree / 'pyproject.toml'}"
        raise SystemExit(msg)
    return f"import sys; from {module.group(1)} import main; sys.exit(main())"


def cases(store: Path, cli: str) -> dict[str, list[str]]:
    """The command lines timed for one tree, each after ``python``."""
    path = ["--path", str(store)]
    return {
        "import langchain_core": ["-c", "import langchain_core"],
        "import langgraph.graph": ["-c", "import langgraph.graph"],
        "import chromadb": ["-c", "import chromadb"],
        "import langchain_knowledge_inject": ["-c", "import langchain_knowledge_inject"],
        "kinject --help": ["-c", cli, "--help"],
        "kinject kbs": ["-c", cli, "kbs", *path],
        "kinject check --kb hr-demo": ["-c", cli, "check", "--kb", "hr-demo", *path],
        "kinject search q --kb nope (error)": ["-c", cli, "search", "q", "--kb", "nope", *path],
    }


def environment(tree: Path) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONPATH=str(tree))
    env.pop("PYTHONSTARTUP", None)
    return env


def run(args: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 2) or (done.returncode == 2 and "nope" not in args):
        msg = f"{args} exited {done.returncode}: {done.stderr[-2000:]}"
        raise RuntimeError(msg)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=9, help="runs of each case (median)")
    parser.add_argument("--baseline", type=Path, default=None, help="an older tree, side by side")
    options = parser.parse_args()
    trees = {"this tree": ROOT}
    if options.baseline is not None:
        trees["baseline"] = options.baseline.resolve()
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="kinject-startup-") as tmp:
        plan: list[tuple[str, str, list[str], dict[str, str]]] = []
        for label, tree in trees.items():
            store = Path(tmp) / label.replace(" ", "-")
            env, cli = environment(tree), console_script(tree)
            subprocess.run(  # the sample knowledge base, with the default model
                [sys.executable, "-c", cli, "demo", "--path", str(store)],
                env=env, cwd=tmp, capture_output=True, check=True,
            )  # fmt: skip
            plan += [(label, name, argv, env) for name, argv in cases(store, cli).items()]
        times: dict[tuple[str, str], list[float]] = {(label, name): [] for label, name, *_ in plan}
        for _ in range(options.repeat):
            for label, name, argv, env in plan:
                times[label, name].append(run(argv, env, tmp))
    print(f"load average after: {os.getloadavg()}; median of {options.repeat} fresh interpreters")
    for label in trees:
        median = {name: statistics.median(t) for (lab, name), t in times.items() if lab == label}
        package_ref, package_target = PACKAGE_REFERENCE
        cli_ref, cli_target = CLI_REFERENCE
        print(f"\n{label} ({trees[label]})")
        print(f"  {'case':<38} {'median ms':>10}  ratio to reference")
        for name, seconds in median.items():
            if name == "import langchain_knowledge_inject":
                ref, target = package_ref, package_target
            elif name.startswith("kinject"):
                ref, target = cli_ref, cli_target
            else:
                print(f"  {name:<38} {seconds * 1000:>10.0f}  (reference)")
                continue
            ratio = seconds / median[ref]
            verdict = "ok" if ratio <= target else "over"
            print(
                f"  {name:<38} {seconds * 1000:>10.0f}  {ratio:5.2f}x {ref} "
                f"(target {target}x: {verdict})"
            )


if __name__ == "__main__":
    main()
