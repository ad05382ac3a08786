"""Episodic recall: EpisodicMemory against plain dense retrieval over the same turns.

The conversations come from ``_episodic_data.py``: per user about 450 turns
over about 150 sessions, a dozen personal facts planted in passing, four of
them (employer, city, manager, race, car, coffee) later updated, hard
negatives (the same kind of fact about someone else), and about 60 paraphrased
probes per user at distances from a few to 250+ turns.

The conversation is replayed in order. Before each probe, both retrievers hold
exactly the user's earlier turns:

- ``dense``: one vector per exchange (``"User: ...\\nAssistant: ..."``), top-k
  by cosine, nothing else (plain dense retrieval over the same turns);
- ``EpisodicMemory``: the package's memory with its defaults (exchange and
  sentence vectors, recency bonus, the probe's own visible session left out),
  plus an ablation without the recency bonus.

Metrics: recall@k of the evidence turn (the newest statement of the fact);
for updated facts, how often the newest statement ranks above the stale one;
recall@5 by distance; the similarity of the best hit for on-topic probes and
for off-topic questions (to calibrate ``min_score``); and per-user isolation
(no probe ever returns another user's turn).

Run: ``python benchmarks/episodic_recall.py [--users 2]`` (about 3 minutes on
2 CPU cores, all-MiniLM-L6-v2 offline).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _episodic_data as data  # noqa: E402
import chromadb  # noqa: E402
import numpy as np  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402

from langchain_knowledge_inject.embeddings import default_embeddings  # noqa: E402
from langchain_knowledge_inject.episodic import (  # noqa: E402
    DEFAULT_EPISODIC_MIN_SCORE,
    EpisodicMemory,
)

OFF_TOPIC = [
    "How many grams are in an ounce?",
    "What's the capital of Australia?",
    "Explain the difference between TCP and UDP.",
    "Can you summarize the plot of Hamlet?",
    "What is the boiling point of water at altitude?",
    "How do vaccines train the immune system?",
    "Write a haiku about autumn leaves.",
    "What's a good stretching routine for the morning?",
    "How does a bill become law in the United States?",
    "What is the Pythagorean theorem?",
]
KS = (1, 3, 5)
BUCKETS = ((0, 15), (15, 60), (60, 150), (150, 10**6))


class CachedEmbeddings(Embeddings):
    """The real model behind a text cache, so both retrievers embed each text once."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.cache: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            vectors = self.inner.embed_documents(missing)
            with self.lock:
                self.cache.update(zip(missing, vectors, strict=True))
        return [self.cache[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


@dataclass
class Score:
    hits: dict[int, int] = field(default_factory=lambda: dict.fromkeys(KS, 0))
    n: int = 0
    updates: int = 0
    newest_first: int = 0
    by_bucket: dict[tuple[int, int], list[int]] = field(
        default_factory=lambda: {b: [0, 0] for b in BUCKETS}
    )
    top_sims: list[float] = field(default_factory=list)

    def add(self, ranked: list[str], probe: data.Probe, top_sim: float) -> None:
        self.n += 1
        evidence = probe.evidence[0]
        for k in KS:
            self.hits[k] += evidence in ranked[:k]
        for bucket in BUCKETS:
            if bucket[0] <= probe.distance < bucket[1]:
                self.by_bucket[bucket][0] += evidence in ranked[:5]
                self.by_bucket[bucket][1] += 1
        if probe.kind == "update":
            self.updates += 1
            rank = {t: i for i, t in enumerate(ranked)}
            self.newest_first += rank.get(evidence, 10**6) < min(
                rank.get(s, 10**6) for s in probe.stale
            )
        self.top_sims.append(top_sim)

    def line(self, name: str) -> str:
        recall = "  ".join(f"R@{k}={self.hits[k] / self.n:.3f}" for k in KS)
        dist = "  ".join(
            f"{lo}+:{h / max(m, 1):.2f}" for (lo, _), (h, m) in self.by_bucket.items()
        )
        return (
            f"{name:28s} {recall}  newest-first={self.newest_first}/{self.updates}"
            f"  | R@5 by distance {dist}"
        )


def _dense_rank(
    vectors: np.ndarray, ids: list[str], query: np.ndarray, upto: int
) -> tuple[list[str], float]:
    sims = vectors[:upto] @ query
    order = np.argsort(-sims)
    return [ids[i] for i in order], float(sims[order[0]]) if upto else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    convs = data.generate(users=args.users, seed=args.seed)
    n_turns = sum(len(c.turns) for c in convs)
    n_probes = sum(len(c.probes) for c in convs)
    print(f"{args.users} users, {n_turns} turns, {n_probes} probes "
          f"({sum(p.kind == 'update' for c in convs for p in c.probes)} on updated facts)")

    embeddings = CachedEmbeddings(default_embeddings())
    tmp = tempfile.mkdtemp(prefix="episodic-bench-")
    memory = EpisodicMemory(client=chromadb.PersistentClient(path=tmp), embeddings=embeddings,
                            collection_prefix="bench", min_score=-1.0)  # fmt: skip
    default_recency = memory.recency_weight
    dense, episodic, no_recency = Score(), Score(), Score()
    record_s: list[float] = []
    search_s: list[float] = []
    off_topic: list[float] = []
    evidence_hits: list[tuple[str, list[tuple[str, float]]]] = []
    leaks = 0
    t0 = time.perf_counter()
    for conv in convs:
        texts = [f"User: {t.user}\nAssistant: {t.assistant}" for t in conv.turns]
        ids = [t.turn_id for t in conv.turns]
        by_episode: dict[str, str] = {}
        probes = sorted(conv.probes, key=lambda p: p.before_index)
        p = 0
        for turn in [*conv.turns, None]:
            upto = turn.index if turn else len(conv.turns)
            while p < len(probes) and probes[p].before_index == upto:
                probe = probes[p]
                p += 1
                visible = [m for t in conv.turns if t.turn_id in probe.visible
                           for m in (HumanMessage(t.user), AIMessage(t.assistant))]  # fmt: skip
                query = np.asarray(embeddings.embed_query(probe.question))
                vectors = np.asarray(embeddings.embed_documents(texts[:upto]))
                ranked, top = _dense_rank(vectors, ids, query, upto)
                dense.add(ranked, probe, top)
                for score, weight in ((episodic, default_recency), (no_recency, 0.0)):
                    memory.recency_weight = weight
                    start = time.perf_counter()
                    found = memory.search(probe.question, user_id=conv.user_id, k=20,
                                          exclude=visible, now=probe.date)  # fmt: skip
                    search_s.append(time.perf_counter() - start)
                    leaks += sum(e.user_id != conv.user_id for e in found)
                    ranked = [by_episode.get(e.episode_id, "?") for e in found]
                    score.add(ranked, probe, found[0].similarity if found else 0.0)
                    if score is episodic:
                        pairs = [(r, e.similarity) for r, e in zip(ranked, found, strict=True)]
                        evidence_hits.append((probe.evidence[0], pairs))
                memory.recency_weight = default_recency
            if turn is None:
                break
            start = time.perf_counter()
            eid = memory.record_exchange(turn.user, turn.assistant, user_id=conv.user_id,
                                         thread_id=turn.thread_id, turn=turn.index,
                                         date=turn.date)  # fmt: skip
            record_s.append(time.perf_counter() - start)
            by_episode[eid] = turn.turn_id
        for question in OFF_TOPIC:
            found = memory.search(question, user_id=conv.user_id, k=1)
            off_topic.append(found[0].similarity if found else 0.0)

    print(f"replayed in {time.perf_counter() - t0:.0f} s; record median "
          f"{statistics.median(record_s) * 1000:.1f} ms/turn, search median "
          f"{statistics.median(search_s) * 1000:.1f} ms/probe (cached query vectors)")  # fmt: skip
    print()
    print(dense.line("dense (exchange vectors)"))
    print(episodic.line("EpisodicMemory (default)"))
    print(no_recency.line("EpisodicMemory, no recency"))
    print()
    print(f"isolation: {leaks} episodes of another user returned")
    on = sorted(episodic.top_sims)
    print(f"best-hit similarity, on-topic probes: median {statistics.median(on):.2f}, "
          f"min {on[0]:.2f}; off-topic questions: median {statistics.median(off_topic):.2f}, "
          f"max {max(off_topic):.2f}")  # fmt: skip
    print(f"min_score sweep (k=3 injected; default {DEFAULT_EPISODIC_MIN_SCORE}):")
    for threshold in (0.1, 0.15, 0.2, 0.25, 0.3):
        injected = sum(
            evidence in [r for r, sim in pairs if sim >= threshold][:3]
            for evidence, pairs in evidence_hits
        )
        quiet = sum(s < threshold for s in off_topic)
        print(f"  {threshold:.2f}: evidence injected for {injected / len(evidence_hits):.0%} "
              f"of probes; nothing injected for {quiet / len(off_topic):.0%} of off-topic "
              "questions")  # fmt: skip
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
