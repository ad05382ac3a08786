"""Scale of the embedded default: query latency, memory and ingest rate from 10k to 1M chunks.

The knowledge base is filled through the public ``KnowledgeBase.add_documents``
path (Chroma and the keyword index, exactly as a user's ingest), but with
:class:`SyntheticEmbeddings` instead of the model, so that the figures measure
the store and not the encoder: each chunk's vector is drawn around one of a few
hundred random centroids (so HNSW sees clustered data, as with real text), and
each chunk's text is 60 words drawn from a Zipf-distributed 50k-word vocabulary
(so the keyword index sees realistic posting lists). Queries are embedded the
same way and carry 3 to 6 words of the same vocabulary.

The store grows in steps (10k, then up to 100k, then up to 1M); at each size:

* ingest rate: chunks per second of the ``add_documents`` calls of that step;
* query latency: p50 and p95 of ``search`` in ``dense`` and ``hybrid`` mode,
  measured in a fresh serving process that opens the store (the embedded store
  allows one process at a time, so the builder closes it first), after warm-up;
* memory: resident set size (RSS) of that serving process after its dense
  queries and again after its hybrid ones (the difference is what the keyword
  side holds in memory), its open time, first dense and first hybrid query
  (loading the HNSW index, opening or rebuilding the keyword cache), the RSS of
  the builder, and the store's size on disk, in all and per top-level entry
  (Chroma's files apart from the keyword cache's).

A time budget (``--budget-min``, default 25) bounds the run: a step predicted
to end past it is not run, and its figures are extrapolated from the measured
curve (a power law through the last two sizes) and printed as EXTRAPOLATED.
Figures: docs/performance.md and docs/scale.md.

Run: ``python benchmarks/scale.py [--sizes 10000,100000,1000000] [--queries 200]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

KB_NAME = "scale"
DIM = 384
WORDS_PER_CHUNK = 60
VOCAB_SIZE = 50_000
STOP_RANKS = 50  # the most frequent ranks stand for stopwords, which the keyword side drops
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def _word(rank: int) -> str:
    out = []
    rank += 71  # at least two syllables
    while rank:
        rank, digit = divmod(rank, len(_SYLLABLES))
        out.append(_SYLLABLES[digit])
    return "".join(out)


class Corpus:
    """Deterministic synthetic chunks and queries."""

    def __init__(self, seed: int = 0) -> None:
        self.vocab = np.array([_word(r) for r in range(VOCAB_SIZE)], dtype=object)
        ranks = np.arange(STOP_RANKS + 1, VOCAB_SIZE + STOP_RANKS + 1, dtype=np.float64)
        weights = 1.0 / ranks
        self.p = weights / weights.sum()
        self.seed = seed

    def chunks(self, start: int, stop: int) -> list[Document]:
        rng = np.random.default_rng([self.seed, start])
        words = rng.choice(VOCAB_SIZE, size=(stop - start, WORDS_PER_CHUNK), p=self.p)
        return [
            Document(
                f"c{start + i} " + " ".join(self.vocab[row]),
                metadata={
                    "source": f"doc{(start + i) // 8}.txt",
                    "category": f"cat{(start + i) % 7}",
                },
            )
            for i, row in enumerate(words)
        ]

    def queries(self, count: int, salt: int) -> list[str]:
        rng = np.random.default_rng([self.seed, 10**9 + salt])
        out = []
        for j in range(count):
            words = rng.choice(VOCAB_SIZE, size=int(rng.integers(3, 7)), p=self.p)
            out.append(f"q{salt}-{j} " + " ".join(self.vocab[words]))
        return out


class SyntheticEmbeddings(Embeddings):
    """Vectors around random centroids, keyed by the leading id of the text (``c123``, ``q1-4``).

    A chunk ``c<i>`` belongs to centroid ``i % centroids``; a query to a centroid
    drawn from its id. Vectors are normalized, like the default model's.
    """

    def __init__(
        self, *, dim: int = DIM, centroids: int = 300, spread: float = 0.6, seed: int = 0
    ) -> None:
        rng = np.random.default_rng(seed)
        c = rng.normal(size=(centroids, dim)).astype(np.float32)
        self.centroids = c / np.linalg.norm(c, axis=1, keepdims=True)
        self.spread = spread
        self.seed = seed
        self.model_name = f"synthetic-{dim}d-{centroids}c"

    def _vectors(self, keys: list[int], salt: int) -> list[list[float]]:
        rng = np.random.default_rng([self.seed, salt, keys[0] if keys else 0, len(keys)])
        ids = np.asarray(keys) % len(self.centroids)
        noise = rng.normal(size=(len(keys), self.centroids.shape[1])).astype(np.float32)
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        v = self.centroids[ids] + self.spread * noise
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return v.tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        keys = [
            int(t[1 : t.index(" ")]) if t.startswith("c") else zlib.crc32(t.encode()) for t in texts
        ]
        return self._vectors(keys, 1)

    def embed_query(self, text: str) -> list[float]:
        return self._vectors([zlib.crc32(text.encode())], 2)[0]


def _open(path: Path, *, create: bool) -> Any:
    from langchain_knowledge_inject import KnowledgeBase

    return KnowledgeBase(
        KB_NAME, path=path, embeddings=SyntheticEmbeddings(), text_splitter=None, create=create
    )


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000


def serve(path: Path, queries: int, salt: int) -> dict[str, Any]:
    """Open the store in this (fresh) process, query it, report latency and memory."""
    corpus = Corpus()
    rss_before = _rss_mb()
    start = time.perf_counter()
    kb = _open(path, create=False)
    open_s = time.perf_counter() - start
    start = time.perf_counter()
    kb.search("warm " + corpus.queries(1, salt + 99)[0], k=4, mode="dense", min_score=0.0)
    first_s = time.perf_counter() - start
    out: dict[str, Any] = {"open_s": open_s, "first_query_s": first_s}
    for mode in ("dense", "hybrid"):
        if mode == "hybrid":
            out["dense_rss_mb"] = _rss_mb()
            start = time.perf_counter()
            kb.search("warm " + corpus.queries(1, salt + 98)[0], k=4, min_score=0.0)
            out["first_hybrid_s"] = time.perf_counter() - start
        for q in corpus.queries(20, salt + 50):  # warm-up
            kb.search(q, k=4, mode=mode, min_score=0.0)
        times = []
        for q in corpus.queries(queries, salt + (0 if mode == "dense" else 1)):
            t0 = time.perf_counter()
            kb.search(q, k=4, mode=mode, min_score=0.0)
            times.append(time.perf_counter() - t0)
        out[f"{mode}_p50_ms"] = _pct(times, 50)
        out[f"{mode}_p95_ms"] = _pct(times, 95)
        out[f"{mode}_mean_ms"] = statistics.fmean(times) * 1000
    out["serve_rss_mb"] = _rss_mb()
    out["serve_rss_import_mb"] = rss_before
    kb.close()
    return out


def _serve_in_child(path: Path, queries: int, salt: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--serve",
        str(path),
        "--queries",
        str(queries),
        "--salt",
        str(salt),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _grow(kb: Any, corpus: Corpus, start: int, stop: int, batch: int) -> float:
    """Add chunks ``start..stop``; returns the seconds spent in ``add_documents`` only."""
    spent = 0.0
    for lo in range(start, stop, batch):
        docs = corpus.chunks(lo, min(stop, lo + batch))  # text generation is not timed
        t0 = time.perf_counter()
        kb.add_documents(docs)
        spent += time.perf_counter() - t0
    return spent


def _extrapolate(rows: list[dict[str, Any]], size: int) -> dict[str, Any] | None:
    """A power law through the last two measured sizes; None with fewer than two."""
    measured = [r for r in rows if not r["extrapolated"]]
    if len(measured) < 2:
        return None
    a, b = measured[-2], measured[-1]
    out: dict[str, Any] = {"size": size, "extrapolated": True}
    for key, value in b.items():
        if key in ("size", "extrapolated") or not isinstance(value, (int, float)):
            continue
        lo = a.get(key)
        if not isinstance(lo, (int, float)) or lo <= 0 or value <= 0:
            out[key] = value
            continue
        slope = math.log(value / lo) / math.log(b["size"] / a["size"])
        out[key] = value * (size / b["size"]) ** slope
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="10000,100000,1000000", help="comma-separated chunk counts"
    )
    parser.add_argument("--queries", type=int, default=200, help="timed queries per mode and size")
    parser.add_argument("--batch", type=int, default=5000, help="documents per add_documents call")
    parser.add_argument(
        "--budget-min", type=float, default=25.0, help="time budget of the whole run"
    )
    parser.add_argument(
        "--path", type=Path, default=None, help="store directory (default: a temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the store directory")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--serve", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--salt", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        print(json.dumps(serve(args.serve, args.queries, args.salt)))
        return

    import chromadb

    sizes = sorted(int(s) for s in args.sizes.split(","))
    budget = args.budget_min * 60
    path = args.path or Path(tempfile.mkdtemp(prefix="kinject-scale-"))
    print(f"# scale benchmark: sizes {sizes}, {args.queries} queries per mode, store {path}")
    load = os.getloadavg()
    print(
        f"# machine: {os.cpu_count()} CPUs, load average at start {load}, "
        f"chromadb {chromadb.__version__}"
    )
    run_start = time.perf_counter()
    corpus = Corpus()
    rows: list[dict[str, Any]] = []
    current = 0
    try:
        for step, size in enumerate(sizes):
            elapsed = time.perf_counter() - run_start
            if rows:
                last = rows[-1]
                rate = last["ingest_chunks_per_s"] / 1.25  # inserts slow down as the index grows
                predicted = (size - current) / rate + 60
                if elapsed + predicted > budget:
                    minutes = predicted / 60
                    print(
                        f"# {size}: predicted {minutes:.1f} min more, past the budget: "
                        "extrapolating"
                    )
                    guess = _extrapolate(rows, size)
                    if guess is None:
                        print(f"# {size}: needs two measured sizes to extrapolate from; skipped")
                        break
                    rows.append(guess)
                    continue
            kb = _open(path, create=True)
            step_s = _grow(kb, corpus, current, size, args.batch)
            builder_rss = _rss_mb()
            kb.close()
            row: dict[str, Any] = {
                "size": size,
                "extrapolated": False,
                "step_ingest_s": step_s,
                "ingest_chunks_per_s": (size - current) / step_s,
                "builder_rss_mb": builder_rss,
                "disk_mb": _dir_mb(path),
                **{f"disk_{p.name}_mb": _dir_mb(p) for p in path.iterdir() if p.is_dir()},
            }
            current = size
            row.update(_serve_in_child(path, args.queries, step * 10))
            rows.append(row)
            shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
            print(f"# measured {size}: {json.dumps(shown)}", flush=True)
    finally:
        if not args.keep and args.path is None:
            shutil.rmtree(path, ignore_errors=True)

    print()
    header = (
        f"{'chunks':>9} {'ingest/s':>9} {'dense p50':>10} {'dense p95':>10} {'hybrid p50':>11} "
        f"{'hybrid p95':>11} {'serve RSS':>10} {'kw RSS':>8} "
        f"{'open+1st q':>11} {'1st hybrid':>10} {'disk':>8}"
    )
    print(header)
    for r in rows:
        mark = "  EXTRAPOLATED" if r["extrapolated"] else ""
        print(
            f"{r['size']:>9,} {r['ingest_chunks_per_s']:>9,.0f} "
            f"{r['dense_p50_ms']:>8.1f}ms {r['dense_p95_ms']:>8.1f}ms "
            f"{r['hybrid_p50_ms']:>9.1f}ms {r['hybrid_p95_ms']:>9.1f}ms "
            f"{r['serve_rss_mb']:>8,.0f}MB "
            f"{r['serve_rss_mb'] - r['dense_rss_mb']:>6,.0f}MB "
            f"{r['open_s'] + r['first_query_s']:>10.1f}s "
            f"{r['first_hybrid_s']:>9.1f}s {r['disk_mb']:>6,.0f}MB{mark}"
        )
    total = time.perf_counter() - run_start
    print(f"\n# total {total / 60:.1f} min; load average at end {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "load_end": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    main()
