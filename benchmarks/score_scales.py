"""Map the reference designs' score thresholds onto the package's hybrid score, by measurement.

Portal filters on ``SemanticMinScore = 0.7``, a cosine similarity, over its top 5;
Shepherd on ``rag_relevance_threshold = 0.3``, a full-text relevance in [0, 1], over
its top 3. Our default search is hybrid (``0.x * cosine + ... * keyword``, see
``store/fusion.py``), whose numbers mean something else. For each design this script
takes the share of results the design's threshold keeps *on the design's own kind of
score* and finds the hybrid threshold that keeps the same share of the hybrid
results, on the 809 BEIR SciFact **train** queries through the default path:

* Portal: our dense score is the cosine similarity itself (the same metric; the
  embedding model is ours): share of the dense top 5 with cosine >= 0.7.
* Shepherd: our keyword score is BM25 relative to the best hit, in [0, 1] (Shepherd
  does not publish its normalization; ours is the closest scale we have): share of
  the keyword top 3 with score >= 0.3.

It also prints the precision (share of kept results that are relevant per the
qrels) of each side, so the mapping can be judged on quality as well as quantity.

Run: ``OMP_NUM_THREADS=1 python benchmarks/score_scales.py [--data ../shared/bench/scifact]``
(embeddings come from the disk cache of ``_embedding_cache.py``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _embedding_cache import DiskCachedEmbeddings
from retrieval_quality import build, load

from langchain_knowledge_inject._store.embeddings import DEFAULT_MODEL_NAME, default_embeddings

ROOT = Path(__file__).resolve().parents[1]
DESIGNS = {  # name: (their threshold, their top k, our mode standing for their score)
    "portal": (0.7, 5, "dense"),
    "shepherd": (0.3, 3, "keyword"),
}


def top_results(
    kb, queries: dict[str, str], mode: str, k: int
) -> list[tuple[str, list[tuple[float, str]]]]:
    """``(query_id, [(score, source), ...])`` of each query's top ``k`` documents."""
    out = []
    for query_id, text in queries.items():
        seen: list[tuple[float, str]] = []
        for doc in kb.search(text, k=4 * k, min_score=0.0, mode=mode):
            source = doc.metadata["source"]
            if source not in {s for _, s in seen}:
                seen.append((float(doc.metadata["score"]), source))
            if len(seen) == k:
                break
        out.append((query_id, seen))
    return out


def share_and_precision(
    results: Sequence[tuple[str, list[tuple[float, str]]]],
    qrels: dict[str, set[str]],
    threshold: float,
) -> tuple[float, float]:
    total = kept = relevant = 0
    for query_id, hits in results:
        for score, source in hits:
            total += 1
            if score >= threshold:
                kept += 1
                relevant += source in qrels[query_id]
    return kept / max(total, 1), relevant / max(kept, 1)


def matching_threshold(
    results: Sequence[tuple[str, list[tuple[float, str]]]], share: float
) -> float:
    """The hybrid threshold (2 decimals) whose kept share is closest to ``share``."""
    scores = sorted((s for _, hits in results for s, _ in hits), reverse=True)
    if share <= 0 or not scores:
        return 1.0
    index = min(len(scores) - 1, max(0, round(share * len(scores)) - 1))
    return round(scores[index], 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "scifact")
    args = parser.parse_args()
    docs, queries, qrels = load(args.data, "train")
    print(f"SciFact train: {len(docs)} documents, {len(queries)} queries")
    embeddings = DiskCachedEmbeddings(default_embeddings(), DEFAULT_MODEL_NAME)
    with tempfile.TemporaryDirectory() as tmp:
        kb = build(docs, os.path.join(tmp, "default"), embeddings)
        for name, (threshold, k, mode) in DESIGNS.items():
            theirs = top_results(kb, queries, mode, k)
            share, precision = share_and_precision(theirs, qrels, threshold)
            hybrid = top_results(kb, queries, "hybrid", k)
            mapped = matching_threshold(hybrid, share)
            h_share, h_precision = share_and_precision(hybrid, qrels, mapped)
            print(
                f"{name}: {mode} top {k} >= {threshold}: keeps {share:.1%} "
                f"(precision {precision:.3f}) -> hybrid min_score {mapped:.2f}: keeps "
                f"{h_share:.1%} (precision {h_precision:.3f})"
            )
            for t in (mapped - 0.05, mapped + 0.05):
                s, p = share_and_precision(hybrid, qrels, t)
                print(f"    hybrid >= {t:.2f}: keeps {s:.1%} (precision {p:.3f})")
        kb.close()


if __name__ == "__main__":
    main()
