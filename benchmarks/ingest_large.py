"""A large file among small ones: memory, progress, a kill at any moment, and the resume.

A folder holds a large text file (``--mb``, default 50 MB of SciFact abstracts
repeated, each sentence marked with its repetition so that every chunk is
distinct) between small files: ``a-*.txt`` sort before it, ``z-*.txt`` after.
A child process runs ``ingest(kb, folder, progress=True)`` with the default model,
as ``kinject ingest`` does; this process samples the child's RSS
(``/proc/<pid>/status``, every 0.2 s) and times every change of the progress bar's
count of stored chunks on its stderr.

1. ``--kills`` runs (default 2), each killed with SIGKILL at a random moment
   between ``--kill-min`` and ``--kill-max`` seconds. After each, this process
   opens the knowledge base and checks what the kill left: every small file read
   before the large one is found, the chunks stored are at least those the bar
   reported, ``kb.check()`` is clean (the keyword side holds exactly Chroma's
   chunks), and sampled stored chunks are found by keyword search.
2. A resume run for ``--resume-seconds`` (``--finish``: to the end): how long it
   takes to pass the chunks already stored (nothing is embedded again) against
   the time the first run took to store them, then the same checks.

Printed: each run's peak RSS (target < 1 GB), the longest interval between two
moves of the bar (target <= 10 s), the checks, and the resume ratio. With
``--baseline DIR`` the tree in ``DIR`` runs the first ``--kill-max`` seconds of
the same ingest side by side, first (on ``PYTHONPATH``, its own store): its RSS,
its bar, what its kill left.

Run: ``OMP_NUM_THREADS=1 python benchmarks/ingest_large.py [--mb 50] [--baseline /work/base]``
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import sys
from langchain_knowledge_inject import KnowledgeBase, ingest
kb = KnowledgeBase("large", path=sys.argv[1])
print(ingest(kb, sys.argv[2], progress=True).summary(), flush=True)
"""
CHUNKS = re.compile(r"(\d+) chunks")
FILES = re.compile(r"\|\s*(\d+)/(\d+) \[")


def make_folder(folder: Path, data: Path, megabytes: float) -> dict[str, str]:
    """The large file and six small ones; returns each small file's marker word."""
    rows = [json.loads(line) for line in (data / "corpus.jsonl").open(encoding="utf-8")]
    folder.mkdir(parents=True)
    markers = {}
    for index, name in enumerate(["a-1", "a-2", "a-3", "z-1", "z-2", "z-3"]):
        marker = f"zqmarker{index}"
        row = rows[index]
        (folder / f"{name}.txt").write_text(f"{marker} {row['title']}\n\n{row['text']}\n")
        markers[f"{name}.txt"] = marker
    written, repeat = 0, 0
    with (folder / "large.txt").open("w", encoding="utf-8") as out:
        while written < megabytes * 1e6:
            for row in rows:
                text = row["text"].replace(". ", f". [r{repeat}] ")
                block = f"{row['title']} [r{repeat}]\n\n{text}\n\n"
                out.write(block)
                written += len(block)
                if written >= megabytes * 1e6:
                    break
            repeat += 1
    return markers


class Run:
    """One child ingest: its RSS samples and the moves of its progress bar."""

    def __init__(self, tree: Path, store: Path, folder: Path) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONPATH=str(tree))
        env["KINJECT_HOME"] = str(store)
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(store), str(folder)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=store,
        )  # fmt: skip
        self.rss: list[int] = []
        self.moves: list[tuple[float, int]] = [(0.0, 0)]  # (seconds, count) at each change
        self.stdout = b""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._sample, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        while chunk := self.process.stderr.read1(4096):  # type: ignore[union-attr]
            buffer += chunk
            *updates, buffer = re.split(rb"[\r\n]", buffer)
            for update in updates:
                text = update.decode("utf-8", "replace")
                found = CHUNKS.search(text) or FILES.search(text)
                if found and int(found.group(1)) != self.moves[-1][1]:
                    self.moves.append((time.monotonic() - self.started, int(found.group(1))))

    def _sample(self) -> None:
        status = Path(f"/proc/{self.process.pid}/status")
        while self.process.poll() is None:
            try:
                line = next(x for x in status.read_text().splitlines() if x.startswith("VmRSS"))
                self.rss.append(int(line.split()[1]) * 1024)
            except (OSError, StopIteration):
                pass
            time.sleep(0.2)

    def kill_after(self, seconds: float) -> None:
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.stdout = self.process.stdout.read() if self.process.stdout else b""  # type: ignore[assignment]
        self.seconds = time.monotonic() - self.started

    def describe(self) -> str:
        times = [t for t, _ in self.moves] + [self.seconds]
        longest = max(b - a for a, b in itertools.pairwise(times))
        first = self.moves[1][0] if len(self.moves) > 1 else float("nan")
        return (
            f"peak RSS {max(self.rss, default=0) / 2**20:6.0f} MiB; bar moved "
            f"{len(self.moves) - 1} times, first after {first:.1f} s, longest interval "
            f"{longest:.1f} s (to the end included); last count {self.moves[-1][1]}"
        )


def check(tree: Path, store: Path, markers: dict[str, str], before_large: bool) -> str:
    """What the kill left, checked in a fresh interpreter of ``tree``."""
    code = """
import json, random, sys
from langchain_knowledge_inject import KnowledgeBase
kb = KnowledgeBase("large", path=sys.argv[1], create=False)
markers = json.loads(sys.argv[2])
found = {n: bool([d for d in kb.search(m, k=1, min_score=0.0, mode="keyword")
                  if d.metadata["source"] == n]) for n, m in markers.items()}
got = kb.vectorstore().get(include=["documents"])
sample = random.Random(0).sample(list(zip(got["ids"], got["documents"])), min(20, len(got["ids"])))
hits = sum(cid in {d.id for d in kb.search(" ".join(t.split()[:12]), k=10, min_score=0.0,
                                            mode="keyword")} for cid, t in sample)
print(json.dumps({"count": kb.count(), "clean": kb.check().clean, "found": found,
                  "sampled": len(sample), "sample_hits": hits}))
"""
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONPATH=str(tree))
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(store), json.dumps(markers)],
            env=env, cwd=store, capture_output=True, text=True, check=True, timeout=1800,
        )  # fmt: skip
    except subprocess.CalledProcessError as exc:
        return f"nothing to open ({exc.stderr.strip().splitlines()[-1][:120]})"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    small = {n: ok for n, ok in result["found"].items() if n.startswith("a-") or not before_large}
    return (
        f"{result['count']} chunks stored; keyword side clean: {result['clean']}; small files "
        f"read before the large one found: {all(small.values())} {small}; sampled stored "
        f"chunks found by keyword search: {result['sample_hits']}/{result['sampled']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "scifact")
    parser.add_argument("--mb", type=float, default=50.0, help="size of the large file")
    parser.add_argument("--kills", type=int, default=2, help="runs killed at a random moment")
    parser.add_argument("--kill-min", type=float, default=40.0)
    parser.add_argument("--kill-max", type=float, default=120.0)
    parser.add_argument("--resume-seconds", type=float, default=120.0)
    parser.add_argument("--finish", action="store_true", help="let the resume run to the end")
    parser.add_argument("--baseline", type=Path, default=None, help="another tree, side by side")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rnd = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="kinject-large-") as tmp:
        folder = Path(tmp) / "docs"
        markers = make_folder(folder, args.data, args.mb)
        size = sum(f.stat().st_size for f in folder.iterdir()) / 1e6
        print(f"python {sys.version.split()[0]}; folder: {size:.1f} MB, {len(markers) + 1} files")
        print(f"load average before: {os.getloadavg()}")
        trees = ([("baseline", args.baseline.resolve())] if args.baseline else []) + [
            ("this tree", ROOT)
        ]
        for label, tree in trees:
            store = Path(tmp) / f"store-{label.replace(' ', '-')}"
            store.mkdir()
            killed: list[Run] = []
            for number in range(1, (1 if label == "baseline" else args.kills) + 1):
                at = (
                    args.kill_max
                    if label == "baseline"
                    else rnd.uniform(args.kill_min, args.kill_max)
                )
                run = Run(tree, store, folder)
                run.kill_after(at)
                killed.append(run)
                print(f"{label}: run {number}, SIGKILL at {at:.0f} s: {run.describe()}")
                print(f"  after the kill: {check(tree, store, markers, before_large=True)}")
            if label == "baseline":
                continue
            stored = int(check_count(tree, store))
            run = Run(tree, store, folder)
            run.kill_after(float("inf") if args.finish else args.resume_seconds)
            passed = next((t for t, n in run.moves if n >= stored), None)
            then = sum(r.moves[-1][0] for r in killed)  # the killed runs' time to store them
            print(f"{label}: resume, {'to the end' if args.finish else 'killed'} after "
                  f"{run.seconds:.0f} s: {run.describe()}")  # fmt: skip
            if passed is not None and then:
                print(f"  passed the {stored} chunks stored before in {passed:.1f} s (the "
                      f"killed runs took {then:.1f} s to store them: {then / passed:.1f}x "
                      "faster)")  # fmt: skip
            print(f"  {run.stdout.decode().strip() or 'no report (killed)'}")
            print(f"  after it: {check(tree, store, markers, before_large=False)}")
        print(f"load average after: {os.getloadavg()}")


def check_count(tree: Path, store: Path) -> int:
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONPATH=str(tree))
    code = (
        "import sys; from langchain_knowledge_inject import KnowledgeBase; "
        "print(KnowledgeBase('large', path=sys.argv[1], create=False).count())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(store)], env=env, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    return int(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
