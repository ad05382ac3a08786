"""Query-embedding latency and retrieval quality of the default model's backends, side by side.

The default model (all-MiniLM-L6-v2) runs on torch, on ONNX Runtime
(sentence-transformers' ``backend="onnx"``, the ``onnx`` extra) and on ONNX
Runtime with int8 dynamic quantization. In one run:

1. **Query latency.** Every SciFact test claim is embedded with
   ``embed_query`` by each backend in turn, the order rotating from query to
   query so that drift in machine load hits all alike. Printed: p50 and p95 per
   backend and the p50 ratio to torch (target for ONNX: <= 0.8).
2. **Quality.** The abstracts judged relevant to the test claims plus
   ``--distractors`` other abstracts (``title + " " + text``, one vector each)
   are embedded by each backend; dense nDCG@10 over the test claims, and the
   lowest cosine between a backend's vector and torch's for the same text.
   Target for ONNX: within 0.002 of torch. int8 is reported as an option, with
   its quality cost.

All backends use the same intra-op thread count (``KINJECT_TORCH_THREADS`` or
the usable cores). ONNX exports go to a temporary folder.

Run: ``python benchmarks/embedding_speed.py [--distractors 700]`` (needs the
``onnx`` extra for the ONNX rows).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from langchain_knowledge_inject.store.embeddings import (
    configure_torch_threads,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "scifact")
    parser.add_argument("--distractors", type=int, default=700)
    args = parser.parse_args()
    threads = configure_torch_threads()
    models_dir = tempfile.mkdtemp(prefix="kinject-models-")
    backends = ["torch"] + (["onnx", "onnx-int8"] if onnx_available() else [])
    if len(backends) == 1:
        print('the onnx extra is not installed (pip install "langchain-knowledge-inject[onnx]")')
    models = {}
    for name in backends:
        start = time.perf_counter()
        models[name] = default_embeddings(backend=name, cache_dir=models_dir)
        print(f"{name}: loaded (exporting if needed) in {time.perf_counter() - start:.1f} s")
    docs, queries, qrels = load(args.data, args.distractors)
    print(
        f"threads {threads}; load average {os.getloadavg()[0]:.1f}; "
        f"{len(queries)} test claims, {len(docs)} abstracts"
    )

    texts = list(queries.values())
    for model in models.values():  # warm-up
        for text in texts[:10]:
            model.embed_query(text)
    times: dict[str, list[float]] = {name: [] for name in backends}
    for i, text in enumerate(texts):
        order = backends[i % len(backends) :] + backends[: i % len(backends)]
        for name in order:
            start = time.perf_counter()
            models[name].embed_query(text)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["torch"])
    print("\nquery embedding (embed_query, one claim at a time)")
    for name, values in times.items():
        values.sort()
        p50, p95 = statistics.median(values), values[int(0.95 * len(values))]
        print(
            f"  {name:10s} p50 {1000 * p50:6.2f} ms  p95 {1000 * p95:6.2f} ms  "
            f"p50 ratio to torch {p50 / base:.3f}" + ("  (target <= 0.8)" if name == "onnx" else "")
        )

    ids = list(docs)
    print("\ndense retrieval quality on the subset")
    reference = None
    base_ndcg = None
    for name in backends:
        start = time.perf_counter()
        doc_vectors = np.asarray(models[name].embed_documents([docs[i] for i in ids]))
        seconds = time.perf_counter() - start
        query_vectors = np.asarray([models[name].embed_query(q) for q in queries.values()])
        scores = query_vectors @ doc_vectors.T
        ndcg = statistics.mean(
            ndcg_at_10([ids[j] for j in np.argsort(-row)[:10]], qrels[qid])
            for qid, row in zip(queries, scores, strict=True)
        )
        if reference is None:
            reference, base_ndcg = doc_vectors, ndcg
        agreement = float(np.min(np.sum(doc_vectors * reference, axis=1)))
        print(
            f"  {name:10s} nDCG@10 {ndcg:.4f} ({ndcg - base_ndcg:+.4f} vs torch)  "
            f"lowest cosine to torch {agreement:.6f}  "
            f"{len(ids) / seconds:6.1f} abstracts/s"
            + ("  (target |diff| <= 0.002)" if name == "onnx" else "")
        )


if __name__ == "__main__":
    main()
