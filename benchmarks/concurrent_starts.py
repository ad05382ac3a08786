"""Processes that start together: paired starts on one store directory and one Chroma server.

A real ``chroma run`` server holds one knowledge base (``--chunks`` chunks, deterministic
fake embeddings: the mechanism measured is the keyword cache, not the model). Each
round gives ``--processes`` fresh worker processes one fresh, empty store directory;
each opens the knowledge base on the server and searches at once (a file barrier
releases them together), so every worker builds or catches up the same keyword cache
at the same moment. Counted: searches that raised, and searches whose hits differ from
the expected ones. Target: 0 of each (issue 32). ``--restricted`` runs it on a
restricted (sealed) knowledge base, the key file in the shared store directory.

Run: ``python benchmarks/concurrent_starts.py [--rounds 50] [--processes 2]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import machine_load
from _server import chroma_server, client
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase

WORKER = textwrap.dedent(
    """
    import os, sys, time, chromadb
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_knowledge_inject import KnowledgeBase
    port, path, barrier = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    http = chromadb.HttpClient(host="127.0.0.1", port=port)
    open(f"{barrier}.{os.getpid()}", "w").close()
    while not os.path.exists(barrier):
        time.sleep(0.002)
    try:
        kb = KnowledgeBase("starts", path=path, client=http, create=False, timeout=60,
                           embeddings=DeterministicFakeEmbedding(size=64))
        hits = kb.search("unique word w7x", k=3, min_score=0.0, mode="keyword")
        print("OK", ",".join(d.id for d in hits), flush=True)
    except Exception as exc:
        print("FAIL", type(exc).__name__, str(exc)[:300].replace(chr(10), " "), flush=True)
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=400)
    parser.add_argument("--restricted", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kinject-starts-"))
    try:
        with chroma_server(work / "server") as (_, port):
            owner_store = work / "owner"
            kb = KnowledgeBase("starts", path=owner_store, client=client(port), timeout=60,
                               embeddings=DeterministicFakeEmbedding(size=64))  # fmt: skip
            docs = [
                Document(f"Note {i}: the word w{i}x is unique to this chunk, beside common words.",
                         metadata={"source": f"notes/{i % 40}.md", "chunk_index": i})
                for i in range(args.chunks)
            ]  # fmt: skip
            kb.add_documents(docs)
            if args.restricted:
                kb.restrict()
            expected = [d.id for d in kb.search("unique word w7x", k=3, min_score=0.0,
                                                mode="keyword")]  # fmt: skip
            key = next((owner_store / "keys").glob("*.key"), None) if args.restricted else None
            kb.close()
            failed = wrong = 0
            messages: dict[str, int] = {}
            started = time.perf_counter()
            for round_ in range(args.rounds):
                store = work / f"store-{round_}"
                store.mkdir()
                if key is not None:
                    (store / "keys").mkdir(mode=0o700)
                    shutil.copy2(key, store / "keys" / key.name)
                barrier = str(work / f"go-{round_}")
                command = [sys.executable, "-c", WORKER, str(port), str(store), barrier]
                procs = [
                    subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
                    for _ in range(args.processes)
                ]
                deadline = time.monotonic() + 120
                while len(list(work.glob(f"go-{round_}.*"))) < args.processes:
                    if time.monotonic() > deadline:
                        raise RuntimeError("workers did not start")
                    time.sleep(0.01)
                Path(barrier).touch()
                for proc in procs:
                    out, _ = proc.communicate(timeout=300)
                    line = (out.strip().splitlines() or ["FAIL no output"])[-1]
                    if line.startswith("OK"):
                        wrong += line.split(" ", 1)[1:] != [",".join(expected)]
                    else:
                        failed += 1
                        messages[line[:160]] = messages.get(line[:160], 0) + 1
                shutil.rmtree(store, ignore_errors=True)
            seconds = time.perf_counter() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)
    searches = args.rounds * args.processes
    kind = "restricted (sealed)" if args.restricted else "open"
    print(f"{args.rounds} rounds of {args.processes} processes starting together, {kind} "
          f"knowledge base of {args.chunks} chunks: {searches} first searches")  # fmt: skip
    print(f"failed searches: {failed}   wrong results: {wrong}   ({seconds:.0f} s)")
    for message, count in sorted(messages.items(), key=lambda m: -m[1]):
        print(f"  {count:3d}x {message}")
    print(f"load: {machine_load()}")


if __name__ == "__main__":
    main()
