"""The LangGraph server example: its first turn after start against a warm one.

A real ``chroma run`` server holds the sample HR knowledge base (the default model).
``examples/langgraph_server`` is served by ``langgraph dev`` (blocking checks on, the
offline scripted model); once it answers ``/ok``, the ``langgraph_sdk`` client runs
one turn on the ``knowledge`` graph (the first), then ``--turns`` more (warm), each
a new thread with another sample question. Printed: the seconds from start to
``/ok``, the slowest graph import the server warns about (none: under its 3 s
threshold), the first turn, the median warm
turn and their ratio (target: first <= 2x warm). With ``--baseline DIR`` the
example and package of the tree in ``DIR`` run the same, side by side, first.
``--restricted`` serves a restricted knowledge base (the scripted summarizer).

Run: ``OMP_NUM_THREADS=1 python benchmarks/langgraph_first_turn.py [--baseline /work/base]``
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _server import chroma_server, client, free_port

ROOT = Path(__file__).resolve().parents[1]
BUILD = """
import sys, chromadb
from langchain_knowledge_inject import build_sample_knowledge_base
kb = build_sample_knowledge_base(
    path=sys.argv[1], name="hr", client=chromadb.HttpClient(host="127.0.0.1", port=int(sys.argv[2]))
)
if sys.argv[3] == "1":
    kb.restrict()
"""


def serve(tree: Path, work: Path, port: int, restricted: bool) -> dict[str, float]:
    """Serve ``tree``'s example on the knowledge base in Chroma; time its turns."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "KINJECT_"))}
    env.update(
        HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH=str(tree), LANGSMITH_TRACING="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1", ANONYMIZED_TELEMETRY="False", CHROMA_HOST="127.0.0.1",
        CHROMA_PORT=str(port), KINJECT_EXAMPLE_KB="hr", KINJECT_EXAMPLE_MODEL="scripted",
        KINJECT_HOME=str(work / "home"),
    )  # fmt: skip
    example = work / "example"
    shutil.copytree(tree / "examples" / "langgraph_server", example,
                    ignore=shutil.ignore_patterns("__pycache__", ".langgraph_api"))  # fmt: skip
    http_port = free_port()
    langgraph = shutil.which("langgraph") or str(Path(sys.executable).parent / "langgraph")
    log = work / "langgraph.log"
    start = time.perf_counter()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [langgraph, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
             "--port", str(http_port)],
            cwd=example, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{http_port}"
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(log.read_text()[-3000:])
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        ready = time.perf_counter() - start
        from langgraph_sdk import get_sync_client

        sdk = get_sync_client(url=url, timeout=600)
        from langchain_knowledge_inject._ingest.sample_data import SAMPLE_QUESTIONS

        times = []
        for question in SAMPLE_QUESTIONS:
            began = time.perf_counter()
            result = sdk.runs.wait(
                None,
                "knowledge",
                input={"messages": [{"role": "user", "content": question.question}]},
            )
            times.append(time.perf_counter() - began)
            assert result["messages"][-1]["content"], result
        text = log.read_text(errors="replace")
        imported = re.findall(r"Graph import exceeded[^\n]*?elapsed=([\d.]+)", text)
        return {"ready": ready, "first": times[0], "warm": statistics.median(times[1:]),
                "import": max(map(float, imported), default=0.0)}  # fmt: skip
    finally:
        process.terminate()
        process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, default=None, help="another tree, side by side")
    parser.add_argument("--restricted", action="store_true")
    args = parser.parse_args()
    trees = ([("baseline", args.baseline.resolve())] if args.baseline else []) + [
        ("this tree", ROOT)
    ]
    print(f"load average before: {os.getloadavg()}")
    rows = {}
    with tempfile.TemporaryDirectory(prefix="kinject-lgdev-") as tmp:
        for label, tree in trees:
            work = Path(tmp) / label.replace(" ", "-")
            work.mkdir()
            with chroma_server(work / "chroma") as (_, port):
                env = dict(
                    os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT)
                )  # fmt: skip  (the same base for both trees)
                subprocess.run(
                    [sys.executable, "-c", BUILD, str(work / "store"), str(port),
                     "1" if args.restricted else "0"],
                    env=env, check=True, capture_output=True,
                )  # fmt: skip
                client(port)  # the server answers
                rows[label] = serve(tree, work, port, args.restricted)
    print(f"load average after: {os.getloadavg()}")
    print(f"{'':<12}{'to /ok':>9}{'import':>9}{'first turn':>12}{'warm turn':>11}{'ratio':>8}")
    for label, row in rows.items():
        ratio = row["first"] / row["warm"]
        imported = f"{row['import']:>8.1f}s" if row["import"] else "    < 3s"
        print(f"{label:<12}{row['ready']:>8.1f}s{imported}{row['first']:>11.2f}s"
              f"{row['warm']:>10.2f}s{ratio:>7.1f}x  (target <= 2x)")  # fmt: skip


if __name__ == "__main__":
    main()
