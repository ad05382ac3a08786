"""Query-embedding latency and retrieval quality of the default model's backends, side by side.

The default model (all-MiniLM-L6-v2) runs on torch, on ONNX Runtime
(sentence-transformers' ``backend="onnx"``, the ``onnx`` extra) and on ONNX
Runtime with int8 dynamic quantization. In one run:

1. **Query latency.** Every SciFact test claim is embedded with
   ``embed_query`` by each arm in turn: each backend at each thread count of
   ``--threads`` (default ``1 2``), the order rotating from query to query so
   that drift in machine load hits all arms alike. Torch's intra-op count is
   set before each call; each ONNX arm has its own session with that many
   intra-op threads. Printed per arm: p50/p95 wall time, p50 process CPU time
   (less sensitive to other processes on the machine), and the p50 ratios to
   torch at the same thread count (target for ONNX: <= 0.8). The load average
   is printed before and after.
2. **Quality.** The abstracts judged relevant to the test claims plus
   ``--distractors`` other abstracts (``title + " " + text``, one vector each)
   are embedded by each backend (first thread count); dense nDCG@10 over the
   test claims, the lowest and mean cosine between a backend's vector and
   torch's for the same text, and abstracts per second (wall and CPU).
   Target for ONNX: nDCG within 0.002 of torch. int8 is an option, reported
   with its quality cost.
3. **Batch throughput by text length.** ``embed_documents`` of each backend
   (first thread count; the default model's batches of up to 512 padded word
   pieces) and, first, the bare ``SentenceTransformer.encode(batch_size=32)``
   on torch, on short texts (the test claims, about 25 word pieces) and on
   full-window chunks (``--throughput-docs`` abstracts split by the default
   splitter, about 250 word pieces each), ``--rounds`` rounds in rotating
   order: texts per second (wall and CPU) and the ratio to the bare encode per
   length. ONNX Runtime's gain over torch is a per-call overhead gain (one
   text per call: a query); on batches the same matrix products dominate on
   either runtime, and the batch size matters more than the runtime.

ONNX exports go to a temporary folder. Without the ``onnx`` extra only torch
runs (the thread-count comparison still applies).

Run: ``python benchmarks/embedding_speed.py [--threads 1 2] [--distractors 0]
[--throughput-docs 40] [--rounds 2]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from langchain_knowledge_inject._store.embeddings import (
    ONNX_EXPORT_DIR,
    default_embeddings,
    onnx_available,
)

ROOT = Path(__file__).resolve().parents[1]


def load(data: Path, distractors: int):
    queries = {r["_id"]: r["text"] for r in map(json.loads, (data / "queries.jsonl").open())}
    qrels: dict[str, set[str]] = {}
    with (data / "qrels" / "test.tsv").open() as fh:
        next(fh)
        for line in fh:
            qid, did, score = line.split("\t")
            if int(score) > 0:
                qrels.setdefault(qid, set()).add(did)
    relevant = set().union(*qrels.values())
    docs: dict[str, str] = {}
    others = 0
    with (data / "corpus.jsonl").open() as fh:
        for line in fh:
            row = json.loads(line)
            if row["_id"] in relevant or others < distractors:
                others += row["_id"] not in relevant
                docs[row["_id"]] = f"{row['title']} {row['text']}"
    return docs, {q: queries[q] for q in qrels}, qrels


def ndcg_at_10(ranked: list[str], relevant: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, doc in enumerate(ranked[:10]) if doc in relevant)
    return dcg / sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))


def load_arms(backends: list[str], thread_counts: list[int]) -> dict[tuple[str, int], object]:
    """One model per (backend, threads); ONNX sessions are created with that intra-op count."""
    arms: dict[tuple[str, int], object] = {}
    first_dir = None
    for threads in thread_counts:
        os.environ["KINJECT_TORCH_THREADS"] = str(threads)  # ONNX sessions read it at creation
        models_dir = tempfile.mkdtemp(prefix=f"kinject-models-{threads}t-")
        exported = Path(first_dir or models_dir) / "models" / ONNX_EXPORT_DIR
        if first_dir is not None and exported.is_dir():  # export once, copy for the others
            shutil.copytree(
                Path(first_dir) / "models" / ONNX_EXPORT_DIR,
                Path(models_dir) / "models" / ONNX_EXPORT_DIR,
            )
        for name in backends:
            start = time.perf_counter()
            if name == "torch":
                model = default_embeddings(backend="torch")  # one model; threads set per call
            else:
                model = default_embeddings(backend=name, cache_dir=models_dir)
            arms[(name, threads)] = model
            print(f"{name} ({threads} thread): loaded in {time.perf_counter() - start:.1f} s")
        first_dir = first_dir or models_dir
    os.environ.pop("KINJECT_TORCH_THREADS")
    return arms


def throughput(arms, backends, threads, claims, docs, args) -> None:
    """Part 3: embed_documents texts/s of each backend on short and on full-window texts."""
    from langchain_core.documents import Document

    from langchain_knowledge_inject._ingest.loading import split_documents

    abstracts = [Document(text, metadata={"source": i}) for i, text in list(docs.items())]
    chunks = [c.page_content for c in split_documents(abstracts[: args.throughput_docs])]
    torch.set_num_threads(threads)
    bare = arms[("torch", threads)]._client  # the SentenceTransformer itself
    encoders = {
        "bare encode(batch_size=32), torch": lambda texts: bare.encode(
            texts, batch_size=32, normalize_embeddings=True
        ),
        **{name: arms[(name, threads)].embed_documents for name in backends},
    }
    names = list(encoders)
    print(f"\nbatch throughput by text length ({threads} thread, rotating)")
    for label, texts in (("short (claims)", claims), ("full-window chunks", chunks)):
        wall = dict.fromkeys(names, 0.0)
        cpu = dict.fromkeys(names, 0.0)
        for n in range(args.rounds):
            for name in names[n % len(names) :] + names[: n % len(names)]:
                start, start_cpu = time.perf_counter(), time.process_time()
                encoders[name](texts)
                wall[name] += time.perf_counter() - start
                cpu[name] += time.process_time() - start_cpu
        done = args.rounds * len(texts)
        chars = sum(map(len, texts)) / len(texts)
        print(f"  {label}: {len(texts)} texts, mean {chars:.0f} chars, load {os.getloadavg()}")
        for name in names:
            print(
                f"    {name:34s} {done / wall[name]:7.1f} texts/s ({done / cpu[name]:7.1f} per "
                f"CPU s)  | x bare {wall[names[0]] / wall[name]:.2f} "
                f"(CPU {cpu[names[0]] / cpu[name]:.2f})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "scifact")
    parser.add_argument("--distractors", type=int, default=0)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--queries", type=int, default=0, help="limit the claims (0: all)")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument(
        "--throughput-docs", type=int, default=40, help="abstracts chunked for part 3 (0: skip)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of part 3")
    args = parser.parse_args()
    backends = ["torch"] + (["onnx", "onnx-int8"] if onnx_available() else [])
    if len(backends) == 1:
        print('the onnx extra is not installed (pip install "langchain-knowledge-inject[onnx]")')
    arms = load_arms(backends, args.threads)
    docs, queries, qrels = load(args.data, args.distractors)
    texts = list(queries.values())[: args.queries or None]
    print(
        f"cores available {len(os.sched_getaffinity(0))}; {len(texts)} test claims, "
        f"{len(docs)} abstracts; load average before {os.getloadavg()}"
    )

    names = list(arms)
    for name, threads in names:  # warm-up
        torch.set_num_threads(threads)
        for text in texts[:10]:
            arms[(name, threads)].embed_query(text)
    wall: dict[tuple[str, int], list[float]] = {arm: [] for arm in names}
    cpu: dict[tuple[str, int], list[float]] = {arm: [] for arm in names}
    for i, text in enumerate(texts):
        for arm in names[i % len(names) :] + names[: i % len(names)]:
            torch.set_num_threads(arm[1])
            start, start_cpu = time.perf_counter(), time.process_time()
            arms[arm].embed_query(text)
            wall[arm].append(time.perf_counter() - start)
            cpu[arm].append(time.process_time() - start_cpu)
    print(f"load average after {os.getloadavg()}")
    print("\nquery embedding (embed_query, one claim at a time, arms interleaved)")
    for arm in names:
        name, threads = arm
        values = sorted(wall[arm])
        p50, p95 = statistics.median(values), values[int(0.95 * len(values))]
        c50 = statistics.median(cpu[arm])
        base = statistics.median(wall[("torch", threads)])
        base_cpu = statistics.median(cpu[("torch", threads)])
        base1 = statistics.median(wall[(name, args.threads[0])])
        print(
            f"  {name:10s} {threads} thr  p50 {1000 * p50:7.2f} ms  p95 {1000 * p95:7.2f} ms  "
            f"cpu p50 {1000 * c50:6.2f} ms  | p50/torch {p50 / base:.3f}  "
            f"cpu/torch {c50 / base_cpu:.3f}  | p50 vs {args.threads[0]} thr {p50 / base1:.2f}"
            + ("  (target p50/torch <= 0.8)" if name == "onnx" else "")
        )
    if args.throughput_docs:
        throughput(arms, backends, args.threads[0], list(queries.values()), docs, args)
    if args.skip_quality:
        return

    threads = args.threads[0]
    torch.set_num_threads(threads)
    ids = list(docs)
    print(f"\ndense retrieval quality ({len(ids)} abstracts, {threads} thread)")
    reference = None
    base_ndcg = 0.0
    for name in backends:
        model = arms[(name, threads)]
        start, start_cpu = time.perf_counter(), time.process_time()
        doc_vectors = np.asarray(model.embed_documents([docs[i] for i in ids]))
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
        query_vectors = np.asarray([model.embed_query(q) for q in queries.values()])
        scores = query_vectors @ doc_vectors.T
        ndcg = statistics.mean(
            ndcg_at_10([ids[j] for j in np.argsort(-row)[:10]], qrels[qid])
            for qid, row in zip(queries, scores, strict=True)
        )
        if reference is None:
            reference, base_ndcg = doc_vectors, ndcg
        cosines = np.sum(doc_vectors * reference, axis=1)
        print(
            f"  {name:10s} nDCG@10 {ndcg:.4f} ({ndcg - base_ndcg:+.4f} vs torch)  "
            f"cosine to torch min {float(np.min(cosines)):.6f} mean {float(np.mean(cosines)):.6f}  "
            f"{len(ids) / seconds:6.1f} abstracts/s ({len(ids) / cpu_seconds:6.1f} per CPU s)"
            + ("  (target |diff| <= 0.002)" if name == "onnx" else "")
        )
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
