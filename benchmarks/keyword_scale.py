"""Keyword side at scale: FTS5 against the in-memory BM25 copy, side by side in one process.

The keyword side is what grows with a partition in hybrid search (dense HNSW
stays under 3 ms p95 up to 1M chunks, see ``scale.py``). This benchmark fills
a bare :class:`KeywordIndex` (no Chroma, so 1M chunks build in minutes) with
the same synthetic chunks as ``scale.py`` (60 words of a Zipf-distributed
50k-word vocabulary, one partition) and times ``search(k=100)`` (the depth
of a hybrid search) with three arms over the same tables, the queries
interleaved:

* ``copy``: the default, the in-memory copy (``keyword_mirror``);
* ``fts5``: FTS5 only, as before the copy (bounded above 100,000 postings);
* ``fts5 exact``: FTS5's plain OR query, unbounded (a sample of queries).

It reports p50/p95 per arm, the copy's build time and the resident memory it
adds, and the agreement of the top 100: the copy against the exact ranking
(scores equal to 1e-9, same ids up to ties at the cut) and the bounded FTS5
path against it. Fixtures are cached under ``--cache`` (built once).

With ``--scifact DIR`` it first checks quality on BEIR SciFact: keyword
nDCG@10 with the copy forced on against FTS5, and whether the two return the
same ranked ids and scores (then hybrid search, which fuses them, is unchanged).

Run: ``OMP_NUM_THREADS=1 python benchmarks/keyword_scale.py [--sizes 10000,100000,1000000]
[--scifact ../shared/bench/scifact]``
"""

from __future__ import annotations

import argparse
import gc
import os
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import Corpus

from langchain_knowledge_inject._store import keyword
from langchain_knowledge_inject._store.keyword import KeywordIndex

K = 100


def _fixture(cache: Path, size: int) -> Path:
    path = cache / f"keyword-scale-{size}.sqlite3"
    done = path.with_suffix(".done")
    if done.exists():
        return path
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    index = KeywordIndex(conn, postings_above=10**12)
    corpus = Corpus()
    start = time.perf_counter()
    for lo in range(0, size, 10_000):
        docs = corpus.chunks(lo, min(size, lo + 10_000))
        index.add("kb", "", [(f"id{lo + i}", d.page_content) for i, d in enumerate(docs)])
        conn.commit()
    conn.close()
    done.write_text(str(size))
    print(f"# built {size:,} chunks in {time.perf_counter() - start:.0f} s: {path}", flush=True)
    return path


def _rss_mb() -> float:
    gc.collect()
    return psutil.Process().memory_info().rss / 2**20


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000


def _overlap(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> float:
    """Share of ``want``'s ids in ``got``; ids tied with ``want``'s last score count as found."""
    if not want:
        return 1.0 if not got else 0.0
    found = {cid for cid, _ in got}
    cut = want[-1][1]
    tied = 1e-9 * max(1.0, abs(cut))
    return sum(1 for cid, s in want if cid in found or abs(s - cut) <= tied) / len(want)


def measure(path: Path, queries: int, exact_sample: int) -> dict[str, float]:
    conn = sqlite3.connect(path)
    fts5 = KeywordIndex(conn, postings_above=10**12)
    qs = Corpus().queries(queries, 1)
    rss_before = _rss_mb()
    copy = KeywordIndex(conn, postings_above=0, background_build=False)
    start = time.perf_counter()
    copy.search("kb", "", "warm", k=K)  # builds the copy on this thread
    build_s = time.perf_counter() - start
    rss_after = _rss_mb()
    for q in Corpus().queries(10, 2):  # warm-up, both arms
        copy.search("kb", "", q, k=K)
        fts5.search("kb", "", q, k=K)
    times: dict[str, list[float]] = {"copy": [], "fts5": []}
    results: dict[str, list[list[tuple[str, float]]]] = {"copy": [], "fts5": []}
    for q in qs:
        for name, index in (("copy", copy), ("fts5", fts5)):
            t0 = time.perf_counter()
            hits = index.search("kb", "", q, k=K)
            times[name].append(time.perf_counter() - t0)
            results[name].append(hits)
    exact_times: list[float] = []
    agree_copy: list[float] = []
    agree_fts5: list[float] = []
    score_ok = True
    saved = keyword.BOUNDED_ABOVE
    keyword.BOUNDED_ABOVE = 10**12  # the plain OR query at every size
    try:
        for i, q in enumerate(qs[:exact_sample]):
            t0 = time.perf_counter()
            exact = fts5.search("kb", "", q, k=K)
            exact_times.append(time.perf_counter() - t0)
            agree_copy.append(_overlap(results["copy"][i], exact))
            agree_fts5.append(_overlap(results["fts5"][i], exact))
            want = dict(exact)
            for cid, score in results["copy"][i]:
                if cid in want and abs(want[cid] - score) > 1e-9 * max(1.0, abs(score)):
                    score_ok = False
    finally:
        keyword.BOUNDED_ABOVE = saved
    conn.close()
    out = {
        "copy_build_s": build_s,
        "copy_rss_mb": rss_after - rss_before,
        "copy_scores_equal_exact": float(score_ok),
        "copy_top100_vs_exact": float(np.mean(agree_copy)) if agree_copy else float("nan"),
        "fts5_top100_vs_exact": float(np.mean(agree_fts5)) if agree_fts5 else float("nan"),
    }
    for name, values in times.items():
        out[f"{name}_p50_ms"] = _pct(values, 50)
        out[f"{name}_p95_ms"] = _pct(values, 95)
    if exact_times:
        out["exact_p50_ms"] = _pct(exact_times, 50)
        out["exact_p95_ms"] = _pct(exact_times, 95)
    return out


def scifact(data: Path, split: str) -> None:
    """Keyword nDCG@10 on SciFact with the copy forced on, against FTS5, and list identity."""
    from retrieval_quality import load, ndcg_at_10

    docs, queries, qrels = load(data, split)
    conn = sqlite3.connect(":memory:")
    fts5 = KeywordIndex(conn, postings_above=10**12)
    copy = KeywordIndex(conn, postings_above=0, background_build=False)
    fts5.add("kb", "", [(d.metadata["source"], d.page_content) for d in docs])
    conn.commit()
    ndcg: dict[str, list[float]] = {"copy": [], "fts5": []}
    same_ids = same_scores = 0
    for query_id, text in queries.items():
        a = copy.search("kb", "", text, k=K)
        b = fts5.search("kb", "", text, k=K)
        ndcg["copy"].append(ndcg_at_10([c for c, _ in a], qrels[query_id]))
        ndcg["fts5"].append(ndcg_at_10([c for c, _ in b], qrels[query_id]))
        same_ids += [c for c, _ in a] == [c for c, _ in b]
        same_scores += len(a) == len(b) and all(
            abs(x - y) <= 1e-9 * max(1.0, abs(y)) for (_, x), (_, y) in zip(a, b, strict=True)
        )
    n = len(queries)
    print(
        f"# SciFact {split} ({len(docs):,} abstracts, {n} queries), keyword side k={K}: "
        f"nDCG@10 copy {np.mean(ndcg['copy']):.4f}, FTS5 {np.mean(ndcg['fts5']):.4f}; "
        f"same ranked ids {same_ids}/{n}, same scores {same_scores}/{n}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per arm")
    parser.add_argument("--exact-sample", type=int, default=30, help="queries also run exactly")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/kinject-keyword-scale"))
    parser.add_argument("--scifact", type=Path, default=None, help="also check SciFact quality")
    parser.add_argument("--split", choices=("test", "train"), default="test")
    args = parser.parse_args()
    if args.scifact is not None:
        scifact(args.scifact, args.split)
    args.cache.mkdir(parents=True, exist_ok=True)
    print(f"# keyword scale: k={K}, {args.queries} queries per arm, interleaved")
    print(f"# machine: {os.cpu_count()} CPUs, load average at start {os.getloadavg()}")
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        row = {"size": size, **measure(_fixture(args.cache, size), args.queries, args.exact_sample)}
        rows.append(row)
        print("# " + ", ".join(f"{k} {v:.3f}" for k, v in row.items() if k != "size"), flush=True)
    print()
    print(
        f"{'chunks':>9} {'copy p50/p95':>15} {'fts5 p50/p95':>17} {'exact p50/p95':>17} "
        f"{'speed-up p95':>12} {'copy top100':>11} {'fts5 top100':>11} {'build':>7} {'RSS':>8}"
    )
    for r in rows:
        print(
            f"{r['size']:>9,} {r['copy_p50_ms']:>6.1f}/{r['copy_p95_ms']:>6.1f}ms "
            f"{r['fts5_p50_ms']:>7.1f}/{r['fts5_p95_ms']:>7.1f}ms "
            f"{r.get('exact_p50_ms', 0):>7.1f}/{r.get('exact_p95_ms', 0):>7.1f}ms "
            f"{r['fts5_p95_ms'] / r['copy_p95_ms']:>11.1f}x "
            f"{r['copy_top100_vs_exact']:>11.3f} {r['fts5_top100_vs_exact']:>11.3f} "
            f"{r['copy_build_s']:>6.1f}s {r['copy_rss_mb']:>6.0f}MB"
        )
    print(f"\n# load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
