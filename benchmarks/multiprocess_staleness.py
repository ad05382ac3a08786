"""Several processes on one Chroma server: how stale is one process's keyword index?

A real ``chroma run`` server; a writer process and this (reader) process each
open the same knowledge base with their own keyword cache. Deterministic fake
embeddings (the mechanism measured is the keyword index's catch-up, not the
model). Measured:

* staleness: the writer adds one chunk with a unique word, at a random moment;
  from the moment its ``add_documents`` returned, this process polls a keyword
  search (every 20 ms) until the chunk is found. Median and max over
  ``--writes`` writes, against ``sync_interval`` (the bound);
* catch-up cost: the writer adds ``--batch`` (1,000) chunks to a collection of
  ``--base`` chunks; then the keyword cache's ``catch_up`` is timed here: per 1,000 new chunks, and
  with nothing new (what each interval costs in the steady state), beside a
  full ids-only scan of the partition (what a rescan per search would cost).

Run: ``python benchmarks/multiprocess_staleness.py [--interval 5] [--writes 12]``
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _server import chroma_server, client
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase

WRITER = textwrap.dedent(
    """
    import sys, time, chromadb
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_knowledge_inject import KnowledgeBase
    port, path = int(sys.argv[1]), sys.argv[2]
    kb = KnowledgeBase("multi", path=path, embeddings=DeterministicFakeEmbedding(size=384),
                       client=chromadb.HttpClient(host="127.0.0.1", port=port), timeout=60)
    print("READY", flush=True)
    for line in sys.stdin:
        kind, start, count = line.split()
        docs = [Document(f"Note {i}: the word w{kind}{i}x is unique to this chunk.",
                         metadata={"source": f"{kind}/{i}.md"})
                for i in range(int(start), int(start) + int(count))]
        kb.add_documents(docs)
        print("DONE", flush=True)
    """
)


class Writer:
    def __init__(self, port: int, path: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(port), str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stdout.readline().strip() == "READY"

    def write(self, kind: str, start: int, count: int) -> float:
        """Ask for a write; the time (perf_counter) when it returned in the writer."""
        self.process.stdin.write(f"{kind} {start} {count}\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "DONE"
        return time.perf_counter()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=5.0, help="sync_interval (the bound)")
    parser.add_argument("--writes", type=int, default=12)
    parser.add_argument("--base", type=int, default=10_000, help="chunks before the batch")
    parser.add_argument("--batch", type=int, default=1_000)
    args = parser.parse_args()
    rng = random.Random(7)
    tmp = Path(tempfile.mkdtemp(prefix="kinject-multi-"))
    with chroma_server(tmp / "server") as (_, port):
        writer = Writer(port, tmp / "writer")
        reader = KnowledgeBase("multi", path=tmp / "reader", client=client(port),
                               embeddings=DeterministicFakeEmbedding(size=384),
                               sync_interval=args.interval)  # fmt: skip
        writer.write("seed", 0, 1)
        reader.search("seed", mode="keyword")  # first catch-up
        stale: list[float] = []
        for i in range(args.writes):
            time.sleep(rng.uniform(0, args.interval))
            returned = writer.write("s", i, 1)
            while not reader.search(f"ws{i}x", mode="keyword", min_score=0.0):
                time.sleep(0.02)
            stale.append(time.perf_counter() - returned)
        print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
        print(f"staleness over {args.writes} writes (sync_interval={args.interval:g} s): "
              f"median {statistics.median(stale):.2f} s, max {max(stale):.2f} s")  # fmt: skip

        for start in range(0, args.base, 2000):
            writer.write("b", start, min(2000, args.base - start))
        base = timed(lambda: reader._cache.catch_up(""))
        writer.write("n", 0, args.batch)
        new = timed(lambda: reader._cache.catch_up(""))
        burst = statistics.median(timed(lambda: reader._cache.catch_up("")) for _ in range(5))
        time.sleep(reader._cache.overlap + 1)  # past the overlap: the steady state
        idle = statistics.median(timed(lambda: reader._cache.catch_up("")) for _ in range(5))
        scan = statistics.median(
            timed(lambda: [c for page in reader._chroma.pages("", fields="ids") for c in page])
            for _ in range(3)
        )
        total = reader.count()
        print(f"collection: {total} chunks; first catch-up of {args.base} chunks: {base:.2f} s")
        print(f"catch-up of {args.batch} new chunks: {new:.3f} s "
              f"({new / args.batch * 1000:.3f} s per 1,000)")  # fmt: skip
        print(f"catch-up with nothing new: {idle * 1000:.1f} ms in the steady state, "
              f"{burst * 1000:.1f} ms within {reader._cache.overlap:g} s of writing "
              f"{args.base + args.batch} chunks (their ids are checked again); "
              f"a full ids-only scan: {scan * 1000:.1f} ms")  # fmt: skip
        assert reader.search(f"wn{args.batch - 1}x", mode="keyword", min_score=0.0)
        writer.close()


if __name__ == "__main__":
    main()
