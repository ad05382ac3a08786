"""Start-up time: importing the package and the ``kinject`` commands that do not embed.

Each case runs in a fresh interpreter (``sys.executable``, ``OMP_NUM_THREADS=1``,
``HF_HUB_OFFLINE=1``); the cases are run round-robin, ``--repeat`` times each, so
a change of load touches all of them alike, and the median wall time of each is
printed with its ratio to a reference measured in the same run:

* ``import langchain_knowledge_inject`` against ``import langgraph.graph``
  (target: at most 1.3x);
* ``kinject --help``, ``kinject kbs``, ``kinject check --kb hr-demo`` and the
  error for an unknown knowledge base (``kinject search q --kb nope``) against
  ``import langchain_core`` (target: each under 1.5x). ``kbs``, ``check`` and
  the error read the store without chromadb (``_store/peek.py``);
* ``kinject search`` in keyword mode (no model) and hybrid (the model loads),
  without a target.

``import chromadb`` is timed too, as a reference: it is the floor of any
command that opens the embedded Chroma store.

``kinject`` runs as its console script does (``from ..._surfaces.cli import
main; sys.exit(main())``) on a store that ``kinject demo`` fills first (the
sample knowledge base, the default model), outside the timings. With
``--baseline DIR`` (repeatable) the same cases run for the tree in ``DIR`` too
(on ``PYTHONPATH``, its own store), side by side: one column per tree, this
tree first, each ratio to the reference measured in its own column. Every interpreter starts in a
temporary folder, so the tree on ``PYTHONPATH`` is the one imported. The load
average is printed before and after.

Run: ``OMP_NUM_THREADS=1 python benchmarks/startup.py [--repeat 9] [--baseline DIR ...]``
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
NO_TARGET = {"kinject search --mode keyword", "kinject search (hybrid: the model)"}


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
        "kinject search --mode keyword": [
            "-c", cli, "search", "annual leave", "--kb", "hr-demo", "--mode", "keyword", *path,
        ],
        "kinject search (hybrid: the model)": [
            "-c", cli, "search", "annual leave", "--kb", "hr-demo", *path,
        ],
    }  # fmt: skip


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
    parser.add_argument(
        "--baseline", type=Path, action="append", default=[], help="another tree (repeatable)"
    )
    options = parser.parse_args()
    trees = {"this tree": ROOT} | {str(tree): tree.resolve() for tree in options.baseline}
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="kinject-startup-") as tmp:
        plan: list[tuple[str, str, list[str], dict[str, str]]] = []
        for label, tree in trees.items():
            store = Path(tmp) / f"store-{len(plan)}"
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
    for label, tree in trees.items():
        print(f"  {label}: {tree}")
    median = {key: statistics.median(t) for key, t in times.items()}
    names = list(cases(Path(), ""))
    print(f"\n{'case':<38}" + "".join(f"{label[-24:]:>26}" for label in trees) + "  target")
    for name in names:
        reference = None
        if name == "import langchain_knowledge_inject":
            reference, target = PACKAGE_REFERENCE
        elif name.startswith("kinject") and name not in NO_TARGET:
            reference, target = CLI_REFERENCE
        cells = []
        for label in trees:
            ms = median[label, name] * 1000
            ratio = f"{median[label, name] / median[label, reference]:6.2f}x" if reference else ""
            cells.append(f"{ms:>10.0f} ms {ratio:>8}")
        goal = f"<= {target}x {reference}" if reference else "(reference)"
        goal = "(no target)" if name in NO_TARGET else goal
        print(f"{name:<38}" + "".join(f"{cell:>26}" for cell in cells) + f"  {goal}")


if __name__ == "__main__":
    main()
