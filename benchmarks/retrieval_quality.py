"""Retrieval quality on BEIR SciFact through the public API: modes, document scoring, grouping.

Each abstract (``title + " " + text``, as BEIR indexes it) is added as one
``Document`` with ``source`` = its id, through ``KnowledgeBase.add_documents``
with every default, exactly as a user would add it. Then, on the queries of
one split (``--split train`` to tune, ``test`` to report):

1. **modes**: dense, keyword and hybrid nDCG@10 / R@10 / R@100 of the ranked
   abstracts (``search(k=100)``, each abstract at its first chunk's place),
   median time per search and the share of queries that get nothing at the
   default ``min_score``.
2. **document scoring** (hybrid): the default (each chunk blended with its
   document's score, the document's keyword side from the document-level
   index), the document keyword pooled from chunks
   (``fusion.DOCUMENT_KEYWORD = "pool"``) and chunk-level fusion
   (``fusion.DOCUMENT_WEIGHT = 0``), with the median search time of each.
3. **grouping at k=10** (hybrid, the chunk ranking from ``search_hits(k=100)``):
   what a user asking for 10 results gets, by document: the chunks as ranked,
   at most ``c`` chunks per document, and the chunks of one document merged
   into one result (``fusion.group_by_document`` + ``fusion.merge_chunks``,
   holding its best ``m`` chunks). Printed per variant: nDCG@10, distinct
   abstracts, characters returned, and two passage figures: the share of the
   chunks that the plain top 10 returned from relevant abstracts that the
   variant still returns ("kept"), and the share of the relevant abstracts'
   best-ranked chunks it returns ("best").
4. **exact dense side** (hybrid, ``search(k=10)``): the default beside the
   same search with Chroma's HNSW query replaced by an exact one over every
   stored vector (numpy), and the HNSW query's recall@100 against it: how much
   of the figure's spread between builds the approximate index explains.

5. **candidate depth** (``--only depth``, not in the default run; hybrid,
   ``search(k=10)``): nDCG@10 and median search time when each side hands the
   fusion 50, 100 (the default, ``fusion.CANDIDATE_DEPTH``), 150 or 200
   candidates, one depth after another.

``--sweep`` (train only) prints hybrid nDCG@10 over the fusion weights. The
figures and their history are in docs/performance.md. Embeddings are cached on
disk (``_embedding_cache.py``), so a second run spends no CPU on the encoder.

Run: ``python benchmarks/retrieval_quality.py [--data ../shared/bench/scifact] [--split test]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _embedding_cache import DEFAULT_CACHE, DiskCachedEmbeddings
from langchain_core.documents import Document

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store import fusion
from langchain_knowledge_inject._store.embeddings import DEFAULT_MODEL_NAME, default_embeddings

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "bench" / "scifact"
MODES = ("dense", "keyword", "hybrid")
ANCHORS = {  # published nDCG@10 on the SciFact test queries (../shared/bench/README.md)
    "dense": "0.645 all-MiniLM-L6-v2 (MTEB)",
    "keyword": "0.679 BM25 Lucene flat (Pyserini)",
    "hybrid": "0.714 RRF / 0.734 tuned convex",
}


def load(data: Path, split: str) -> tuple[list[Document], dict[str, str], dict[str, set[str]]]:
    """SciFact's abstracts as Documents, one split's queries and their relevant abstracts."""
    docs = []
    with (data / "corpus.jsonl").open() as fh:
        for line in fh:
            row = json.loads(line)
            text = f"{row['title']} {row['text']}"
            docs.append(Document(text, metadata={"source": row["_id"]}))
    with (data / "queries.jsonl").open() as fh:
        queries = {row["_id"]: row["text"] for row in map(json.loads, fh)}
    qrels = read_qrels(data, split)
    return docs, {q: queries[q] for q in qrels}, qrels


def read_qrels(data: Path, split: str) -> dict[str, set[str]]:
    """``{query id: relevant abstract ids}`` of one split (judgments scoring above 0)."""
    qrels: dict[str, set[str]] = {}
    with (data / "qrels" / f"{split}.tsv").open() as fh:
        next(fh)
        for line in fh:
            query_id, doc_id, score = line.split("\t")
            if int(score) > 0:
                qrels.setdefault(query_id, set()).add(doc_id)
    return qrels


def ndcg_at_10(ranked: Sequence[str], relevant: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, doc in enumerate(ranked[:10]) if doc in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return dcg / ideal


def recall_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    return len(set(ranked[:k]) & relevant) / len(relevant)


def build(docs: list[Document], path: str, embeddings) -> KnowledgeBase:
    """The default store: every abstract through ``add_documents``, 500 at a time."""
    kb = KnowledgeBase("scifact", path=path, embeddings=embeddings)
    start = time.perf_counter()
    for i in range(0, len(docs), 500):
        kb.add_documents(docs[i : i + 500])
    print(
        f"built in {time.perf_counter() - start:.0f}s: {kb.info.chunk_count} chunks"
        f" (embedding cache: {embeddings.hits} hits, {embeddings.misses} computed)",
        flush=True,
    )
    return kb


def first_sources(found: list[Document]) -> list[str]:
    """The sources of ``found`` in order, each at its first occurrence."""
    return list(dict.fromkeys(doc.metadata["source"] for doc in found))


def hybrid_ndcg(
    kb: KnowledgeBase, queries: dict[str, str], qrels: dict[str, set[str]], *, k: int = 100
) -> tuple[float, float]:
    """Mean nDCG@10 of hybrid ``search(k)`` (abstracts by first occurrence), median ms a search."""
    ndcg, times = [], []
    for query_id, text in queries.items():
        start = time.perf_counter()
        found = kb.search(text, k=k, min_score=0.0)
        times.append(time.perf_counter() - start)
        ndcg.append(ndcg_at_10(first_sources(found), qrels[query_id]))
    return statistics.mean(ndcg), 1000 * statistics.median(times)


def evaluate(kb, queries, qrels, *, label: str, modes: Sequence[str] = MODES) -> None:
    print(f"\n{label}: {len(queries)} queries; default min_score = {fusion.DEFAULT_MIN_SCORE}")
    header = f"{'mode':8s} {'nDCG@10':>8s} {'R@10':>6s} {'R@100':>6s} {'ms/query':>8s}"
    print(f"{header} {'empty@default':>13s}  published nDCG@10")
    for mode in modes:
        ndcg, r10, r100, times, empty = [], [], [], [], 0
        for query_id, text in queries.items():
            start = time.perf_counter()
            found = kb.search(text, k=100, mode=mode, min_score=0.0)
            times.append(time.perf_counter() - start)
            ranked = first_sources(found)
            relevant = qrels[query_id]
            ndcg.append(ndcg_at_10(ranked, relevant))
            r10.append(recall_at(ranked, relevant, 10))
            r100.append(recall_at(ranked, relevant, 100))
            # Same as searching with the default min_score: it filters the ranked list.
            empty += not any(d.metadata["score"] >= fusion.DEFAULT_MIN_SCORE for d in found)
        print(
            f"{mode:8s} {statistics.mean(ndcg):8.4f} {statistics.mean(r10):6.3f}"
            f" {statistics.mean(r100):6.3f} {1000 * statistics.median(times):8.1f}"
            f" {empty / len(queries):13.1%}  {ANCHORS[mode]}",
            flush=True,
        )


def document_scoring(kb, queries, qrels) -> None:
    """Hybrid nDCG@10 and median search time: the default, pooled document keyword, chunk level."""
    print("\ndocument scoring (hybrid, search(k=100), by first occurrence):")
    variants = (("default (document index)", "index", None), ("pooled from chunks", "pool", None))
    saved = fusion.DOCUMENT_KEYWORD, fusion.DOCUMENT_WEIGHT
    try:
        for label, keyword, weight in (*variants, ("chunk-level fusion", "index", 0.0)):
            fusion.DOCUMENT_KEYWORD = keyword  # type: ignore[assignment]
            fusion.DOCUMENT_WEIGHT = saved[1] if weight is None else weight
            ndcg, median = hybrid_ndcg(kb, queries, qrels)
            print(f"  {label:26s} nDCG@10 {ndcg:.4f}  median {median:.1f} ms", flush=True)
    finally:
        fusion.DOCUMENT_KEYWORD, fusion.DOCUMENT_WEIGHT = saved


def chunk_rankings(kb, queries) -> dict[str, list[Document]]:
    """Each query's hybrid chunk ranking (top 100), as Documents with ``score``, best first."""
    rankings = {}
    for query_id, text in queries.items():
        hits = kb.search_hits(text, k=100, min_score=0.0)
        found = {d.id: d for d in kb.get_by_ids([cid for cid, _ in hits])}
        rankings[query_id] = [
            Document(found[cid].page_content, id=cid, metadata={**found[cid].metadata, "score": s})
            for cid, s in hits
            if cid in found
        ]
    return rankings


def capped(ranked: list[Document], k: int, cap: int) -> list[Document]:
    """The first ``k`` chunks, at most ``cap`` of each document."""
    seen: dict[str, int] = {}
    kept = []
    for doc in ranked:
        source = doc.metadata["source"]
        if seen.get(source, 0) < cap:
            seen[source] = seen.get(source, 0) + 1
            kept.append(doc)
    return kept[:k]


def merged(ranked: list[Document], k: int, chunks: int) -> list[Document]:
    """The first ``k`` documents, each one result holding its best ``chunks`` chunks."""
    by_id = {doc.id: doc for doc in ranked}
    parents = {doc.id: doc.metadata["source"] for doc in ranked}
    pairs = [(doc.id, doc.metadata["score"]) for doc in ranked]
    groups = fusion.group_by_document(pairs, parents, k, max_chunks=chunks)
    return [fusion.merge_chunks([by_id[c] for c in ids], score) for score, ids in groups]


def grouping(rankings: dict[str, list[Document]], qrels, k: int = 10) -> None:
    """What ``k`` results hold under each grouping: nDCG by document, passages, size."""
    print(f"\ngrouping at k={k} (hybrid; the chunk ranking of search_hits(k=100)):")
    print(f"  {'variant':24s} {'nDCG@10':>8s} {'docs':>5s} {'chars':>6s} {'kept':>6s} {'best':>6s}")
    variants: list[tuple[str, Callable[[list[Document]], list[Document]]]] = [
        ("chunks as ranked", lambda r: r[:k]),
        *((f"cap {c} per document", lambda r, c=c: capped(r, k, c)) for c in (1, 2, 3)),
        *((f"merged, {m} chunk(s) each", lambda r, m=m: merged(r, k, m)) for m in (1, 2, 3, 100)),
    ]
    for label, run in variants:
        ndcg, docs, chars, kept, best = [], [], [], [], []
        for query_id, ranked in rankings.items():
            relevant = qrels[query_id]
            results = run(ranked)
            ids = {c for d in results for c in d.metadata.get("chunk_ids", [d.id])}
            ndcg.append(ndcg_at_10(first_sources(results), relevant))
            docs.append(len(first_sources(results)))
            chars.append(sum(len(d.page_content) for d in results))
            plain = {d.id for d in ranked[:k] if d.metadata["source"] in relevant}
            if plain:
                kept.append(len(plain & ids) / len(plain))
            firsts = {d.metadata["source"]: d.id for d in reversed(ranked)}
            tops = [firsts[s] for s in relevant if s in firsts]
            if tops:
                best.append(sum(t in ids for t in tops) / len(tops))
        print(
            f"  {label:24s} {statistics.mean(ndcg):8.4f} {statistics.mean(docs):5.1f}"
            f" {statistics.mean(chars):6.0f} {statistics.mean(kept):6.1%}"
            f" {statistics.mean(best):6.1%}",
            flush=True,
        )


def exact_dense(kb, queries, qrels) -> None:
    """Hybrid nDCG@10 at k=10 with HNSW and with an exact dense side; HNSW recall@100."""
    import numpy as np

    collection, ids, rows = kb._chroma.collection(""), [], []
    for offset in range(0, collection.count(), 5_000):  # Chroma refuses 32k+ ids at once
        got = collection.get(include=["embeddings"], limit=5_000, offset=offset)
        ids += got["ids"]
        rows.extend(got["embeddings"])
    vectors = np.asarray(rows, dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    searcher, approximate = kb._searcher, kb._searcher.dense

    def exact(partition, text, depth, where):
        query = np.asarray(searcher.query_vector(text), dtype=np.float32)
        cosines = vectors @ (query / np.linalg.norm(query))
        top = np.argsort(-cosines)[:depth]
        return [(ids[i], fusion.dense_score(1.0 - float(cosines[i]))) for i in top]

    def at_10() -> float:
        return hybrid_ndcg(kb, queries, qrels, k=10)[0]

    recall = statistics.mean(
        len({c for c, _ in approximate("", t, 100, None)} & {c for c, _ in exact("", t, 100, None)})
        / 100
        for t in queries.values()
    )
    print(f"\nexact dense side (hybrid, k=10): HNSW {at_10():.4f}", end="", flush=True)
    searcher.dense = exact
    try:
        print(f", exact {at_10():.4f}; HNSW recall@100 {recall:.3f}", flush=True)
    finally:
        searcher.dense = approximate


def candidate_depth(kb, queries, qrels) -> None:
    """Hybrid nDCG@10 at k=10 and median search time over the candidates each side gives."""
    print("\ncandidate depth (hybrid, search(k=10), fusion.CANDIDATE_DEPTH):")
    saved = fusion.CANDIDATE_DEPTH
    try:
        for depth in (50, 100, 150, 200):
            fusion.CANDIDATE_DEPTH = depth
            ndcg, median = hybrid_ndcg(kb, queries, qrels, k=10)
            label = f"{depth}{' (default)' if depth == saved else ''}"
            print(f"  {label:14s} nDCG@10 {ndcg:.4f}  median {median:.1f} ms", flush=True)
    finally:
        fusion.CANDIDATE_DEPTH = saved


def sweep(kb, queries, qrels) -> None:
    """Hybrid nDCG@10 of the default path over the fusion weights (use on train only)."""
    print("\nsweep of the fusion weights, hybrid nDCG@10 (default path)")
    saved = fusion.DOCUMENT_WEIGHT, fusion.DENSE_WEIGHT
    try:
        for document_weight in (0.5, 0.75, 1.0):
            for dense_weight in (0.7, 0.75, 0.8):
                fusion.DOCUMENT_WEIGHT, fusion.DENSE_WEIGHT = document_weight, dense_weight
                value, _ = hybrid_ndcg(kb, queries, qrels)
                print(f"  document {document_weight:.2f} dense {dense_weight:.2f}: {value:.4f}")
    finally:
        fusion.DOCUMENT_WEIGHT, fusion.DENSE_WEIGHT = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SCIFACT)
    parser.add_argument("--split", choices=("test", "train"), default="test")
    parser.add_argument("--sweep", action="store_true", help="tune the fusion weights (train!)")
    parser.add_argument(
        "--only", choices=("modes", "scoring", "grouping", "exact", "depth"), action="append"
    )
    args = parser.parse_args()
    parts = set(args.only or ("modes", "scoring", "grouping", "exact"))
    docs, queries, qrels = load(args.data, args.split)
    print(f"SciFact: {len(docs)} documents, split {args.split}; load {os.getloadavg()[0]:.1f}")
    embeddings = DiskCachedEmbeddings(default_embeddings(), DEFAULT_MODEL_NAME, DEFAULT_CACHE)
    with tempfile.TemporaryDirectory() as tmp:
        kb = build(docs, os.path.join(tmp, "default"), embeddings)
        for text in queries.values():  # query vectors into the disk cache first
            embeddings.embed_query(text)
        if "modes" in parts:
            evaluate(kb, queries, qrels, label="default path")
        if "scoring" in parts:
            document_scoring(kb, queries, qrels)
        if "grouping" in parts:
            grouping(chunk_rankings(kb, queries), qrels)
        if "exact" in parts:
            exact_dense(kb, queries, qrels)
        if "depth" in parts:
            candidate_depth(kb, queries, qrels)
        if args.sweep:
            sweep(kb, queries, qrels)
        print(f"load {os.getloadavg()[0]:.1f}")
        kb.close()


if __name__ == "__main__":
    main()
