"""The default ``min_score`` against questions people type, over the sample knowledge base.

``data/typed_questions.csv`` holds 86 questions written for this benchmark by the
package's developers (not collected from users; a small set, read the rates as
rough): one-word and short ones ("vacation", "time off", "wfh", "how much
holiday"), longer questions, and off-topic ones, each labelled with the sample
policy (``_ingest/sample_policies/``) that answers it, or ``none``. Each is searched
as a turn searches by default (``KnowledgeBase.search``: hybrid, ``top_k`` = 4, the
real embedding model), and for each threshold counted as

* a false negative: an on-topic question whose policy is not among the results
  scoring at least the threshold (nothing, or only other policies, injected);
* a false positive: an off-topic question that injects anything;
* wrong only: an on-topic question that injects other policies and not its own.

Printed per threshold (the default marked), then the false negatives by kind of
question and the questions each threshold gets wrong. ``--scifact`` adds, on the
SciFact train queries (``retrieval_quality.py``'s store), the share of the relevant
top-10 hybrid results each threshold keeps, the share of all top-10 results kept
and the share of queries left with nothing: the measure ``DEFAULT_MIN_SCORE`` was
first chosen by.

Run: ``OMP_NUM_THREADS=1 python benchmarks/threshold_calibration.py [--scifact]``
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from langchain_knowledge_inject import build_sample_knowledge_base
from langchain_knowledge_inject._ingest.sample_data import SAMPLE_DOCUMENTS
from langchain_knowledge_inject._store.fusion import DEFAULT_MIN_SCORE

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = Path(__file__).with_name("data") / "typed_questions.csv"
CANDIDATES = (0.25, 0.30, 0.325, 0.35, 0.375, 0.40, 0.425, 0.45, 0.47, 0.50, 0.55)
TOP_K = 4


def load_questions(path: Path = QUESTIONS) -> list[dict[str, str]]:
    """The labelled questions, checked: every label a sample policy or ``none``."""
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    policies = {doc.metadata["source"] for doc in SAMPLE_DOCUMENTS} | {"none"}
    bad = [row for row in rows if row["expected"] not in policies]
    if bad or len(rows) < 60:
        msg = f"{path}: {len(rows)} rows (at least 60), labels not a policy: {bad[:3]}"
        raise SystemExit(msg)
    return rows


def outcomes(rows, results, threshold: float) -> dict[str, list[str]]:
    """The questions each threshold gets wrong, by kind of error."""
    wrong: dict[str, list[str]] = {"fn": [], "fp": [], "wrong_only": []}
    for row, hits in zip(rows, results, strict=True):
        kept = {source for score, source in hits if score >= threshold}
        if row["expected"] == "none":
            if kept:
                wrong["fp"].append(row["question"])
        elif row["expected"] not in kept:
            wrong["fn"].append(row["question"])
            if kept:
                wrong["wrong_only"].append(row["question"])
    return wrong


def typed_questions() -> None:
    rows = load_questions()
    on_topic = [r for r in rows if r["expected"] != "none"]
    kinds = Counter(r["kind"] for r in on_topic)
    with tempfile.TemporaryDirectory() as tmp:
        kb = build_sample_knowledge_base(path=tmp)
        results = [
            [(d.metadata["score"], d.metadata["source"]) for d in kb.search(r["question"], k=TOP_K,
                                                                          min_score=0.0)]
            for r in rows
        ]  # fmt: skip
        kb.close()
    off = len(rows) - len(on_topic)
    print(
        f"{len(rows)} questions ({len(on_topic)} on topic: {dict(kinds)}; {off} off topic), "
        f"hybrid, top {TOP_K}, the real model; load {os.getloadavg()[0]:.1f}"
    )
    header = f"{'min_score':>12s} {'false neg.':>11s} {'false pos.':>11s} {'wrong only':>11s}"
    print(f"{header}   false negatives by kind ({', '.join(kinds)})")
    errors = {}
    for threshold in sorted({*CANDIDATES, DEFAULT_MIN_SCORE}):
        wrong = errors[threshold] = outcomes(rows, results, threshold)
        by_kind = Counter(r["kind"] for r in on_topic if r["question"] in wrong["fn"])
        label = f"{threshold:g}" + (" (default)" if threshold == DEFAULT_MIN_SCORE else "")
        print(
            f"{label:>12s} {len(wrong['fn']) / len(on_topic):11.1%}"
            f" {len(wrong['fp']) / off:11.1%} {len(wrong['wrong_only']) / len(on_topic):11.1%}"
            f"   {', '.join(f'{by_kind[k]}/{kinds[k]}' for k in kinds)}"
        )
    for threshold, wrong in errors.items():
        print(f"\nmin_score {threshold:g}: false negatives {wrong['fn']}")
        print(f"    false positives {wrong['fp']}")


def scifact(data: Path) -> None:
    """Relevant top-10 hybrid results kept per threshold on SciFact train, and empty queries."""
    from _embedding_cache import DEFAULT_CACHE, DiskCachedEmbeddings
    from retrieval_quality import build, load

    from langchain_knowledge_inject._store.embeddings import DEFAULT_MODEL_NAME, default_embeddings

    docs, queries, qrels = load(data, "train")
    embeddings = DiskCachedEmbeddings(default_embeddings(), DEFAULT_MODEL_NAME, DEFAULT_CACHE)
    with tempfile.TemporaryDirectory() as tmp:
        kb = build(docs, os.path.join(tmp, "scifact"), embeddings)
        tops = {}
        for query_id, text in queries.items():
            found = kb.search(text, k=10, min_score=0.0)
            tops[query_id] = [(d.metadata["score"], d.metadata["source"]) for d in found]
        kb.close()
    print(f"\nSciFact train, {len(queries)} queries, hybrid top 10; load {os.getloadavg()[0]:.1f}")
    print(f"{'min_score':>12s} {'relevant kept':>14s} {'all kept':>9s} {'empty queries':>14s}")
    relevant = sum(source in qrels[q] for q, hits in tops.items() for _, source in hits)
    total = sum(len(hits) for hits in tops.values())
    for threshold in sorted({*CANDIDATES, DEFAULT_MIN_SCORE}):
        kept = [(q, s) for q, hits in tops.items() for score, s in hits if score >= threshold]
        kept_relevant = sum(source in qrels[q] for q, source in kept)
        empty = sum(not any(score >= threshold for score, _ in hits) for hits in tops.values())
        label = f"{threshold:g}" + (" (default)" if threshold == DEFAULT_MIN_SCORE else "")
        print(
            f"{label:>12s} {kept_relevant / relevant:14.1%} {len(kept) / total:9.1%}"
            f" {empty / len(tops):14.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scifact", action="store_true", help="also the SciFact train check")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "scifact")
    args = parser.parse_args()
    typed_questions()
    if args.scifact:
        scifact(args.data)


if __name__ == "__main__":
    main()
