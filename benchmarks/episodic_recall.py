"""Episodic recall on long two-person dialogues: EpisodicMemory against plain baselines.

Data: ``_dialogue_data.py`` (deterministic, generated in code): 6 conversations
between two friends, 26 sessions over about a year, ~630 turns each, 454
questions (single facts, dates in the question, "when did", current values of
changed facts, aggregates over sessions, two-hop bridges), each with its
evidence turns. Questions are asked after the last session; the reference time
is the day after it.

Every retriever holds exactly the same turns, one per episode, as
``"<speaker>: <text>"``:

- ``dense``: cosine over the turn vectors (all-MiniLM-L6-v2);
- ``bm25``: Okapi BM25 (k1=1.2, b=0.75, lowercase word tokens);
- ``rrf``: reciprocal rank fusion of dense and bm25 (k=60);
- ``kb hybrid``: the memory's knowledge base searched directly (the package's
  hybrid search, no memory features);
- ``EpisodicMemory``: ``search(question, user_id=..., k=..., now=reference)``
  with its defaults, and ablations without date resolution and without recency.

Metric: per question, the fraction of its evidence turns in the top k,
averaged (recall@5, recall@10), overall and per question kind. Also: the cost
of recording a turn on the caller's thread (background writer vs writing at
once), and episode search latency against a knowledge-base search of the same
partition, medians measured alternately in one run.

Run: ``python benchmarks/episodic_recall.py`` (about 3 minutes on 2 cores; the
turn vectors are cached under /tmp).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _dialogue_data as data
import numpy as np
from langchain_core.embeddings import Embeddings

from langchain_knowledge_inject.memory.episodic import EpisodeRecord, EpisodicMemory
from langchain_knowledge_inject.store.embeddings import default_embeddings

KS = (5, 10)
OFF_TOPIC = [
    "How many grams are in an ounce?",
    "What's the capital of Australia?",
    "Explain the difference between TCP and UDP.",
    "Can you summarize the plot of Hamlet?",
    "How do vaccines train the immune system?",
    "What is the Pythagorean theorem?",
]
CACHE = Path(tempfile.gettempdir()) / "kinject-episodic-recall-vectors.npz"


class CachedEmbeddings(Embeddings):
    """The real model behind a text cache kept on disk."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.cache: dict[str, list[float]] = {}
        if CACHE.exists():
            with np.load(CACHE) as stored:
                self.cache = dict(
                    zip(stored["keys"].tolist(), stored["vectors"].tolist(), strict=True)
                )
        self.calls = 0

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if self.key(t) not in self.cache]
        if missing:
            self.calls += 1
            for text, vec in zip(missing, self.inner.embed_documents(missing), strict=True):
                self.cache[self.key(text)] = list(vec)
        return [self.cache[self.key(t)] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def save(self) -> None:
        keys = list(self.cache)
        np.savez(CACHE, keys=np.array(keys), vectors=np.array([self.cache[k] for k in keys]))


_TOKEN = re.compile(r"[a-z0-9]+")


class BM25:
    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(_TOKEN.findall(t.lower())) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=float)
        self.avg = float(self.lengths.mean())
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(texts)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
        self.k1, self.b = k1, b

    def rank(self, query: str) -> list[int]:
        scores = np.zeros(len(self.docs))
        terms = set(_TOKEN.findall(query.lower()))
        for i, d in enumerate(self.docs):
            s = 0.0
            for t in terms:
                tf = d.get(t)
                if tf:
                    norm = tf + self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                    s += self.idf[t] * tf * (self.k1 + 1) / norm
            scores[i] = s
        return list(np.argsort(-scores, kind="stable"))


def rrf(*rankings: list[int], k: int = 60) -> list[int]:
    score: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for r, i in enumerate(ranking):
            score[i] += 1 / (k + r + 1)
    return sorted(score, key=lambda i: -score[i])


class Recall:
    def __init__(self) -> None:
        self.rows: list[tuple[str, dict[int, float]]] = []

    def add(self, kind: str, ranked: list[str], evidence: tuple[str, ...]) -> None:
        self.rows.append(
            (kind, {k: len(set(ranked[:k]) & set(evidence)) / len(evidence) for k in KS})
        )

    def mean(self, k: int, kind: str | None = None) -> float:
        vals = [r[k] for kd, r in self.rows if kind is None or kd == kind]
        return sum(vals) / max(len(vals), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover
        pass

    convs = data.generate(args.conversations, seed=args.seed)
    kinds = sorted({q.kind for c in convs for q in c.questions})
    n_q = sum(len(c.questions) for c in convs)
    print(f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, {n_q} questions "
          f"({', '.join(f'{k} {sum(q.kind == k for c in convs for q in c.questions)}' for k in kinds)})")  # fmt: skip  # noqa: E501
    embeddings = CachedEmbeddings(default_embeddings())
    tmp = Path(tempfile.mkdtemp(prefix="episodic-recall-"))
    memory = EpisodicMemory(path=tmp, embeddings=embeddings, min_score=0.0)
    kb = memory.knowledge_base
    plain = ("dense", "bm25", "rrf", "dense, text only", "bm25, text only", "rrf, text only")
    arms = {name: Recall() for name in
            (*plain, "kb hybrid, text only", "EpisodicMemory", "  no date resolution",
             "  no speaker handling", "  no recency", "  none of the three")}  # fmt: skip
    sims: list[float] = []
    off: list[float] = []
    t0 = time.perf_counter()
    for conv in convs:
        texts = [f"{t.speaker}: {t.text}" for t in conv.turns]
        bare = [t.text for t in conv.turns]
        ids = [t.turn_id for t in conv.turns]
        memory.add_episodes(
            [EpisodeRecord(t.text, speaker=t.speaker, thread_id=f"{conv.conv_id}:s{t.session}",
                           episode_id=t.turn_id, date=t.date, metadata={"session": t.session})
             for t in conv.turns], user_id=conv.conv_id)  # fmt: skip
        sides = []
        for suffix, corpus in (("", texts), (", text only", bare)):
            sides.append((suffix, np.asarray(embeddings.embed_documents(corpus)), BM25(corpus)))
        for q in conv.questions:
            qv = np.asarray(embeddings.embed_query(q.text))
            for suffix, vectors, bm25 in sides:
                dense = list(np.argsort(-(vectors @ qv), kind="stable"))
                sparse = bm25.rank(q.text)
                for name, order in (
                    ("dense", dense),
                    ("bm25", sparse),
                    ("rrf", rrf(dense, sparse)),
                ):
                    arms[name + suffix].add(q.kind, [ids[i] for i in order[:10]], q.evidence)
            docs = kb.search(q.text, k=10, min_score=0.0, tenant_id=conv.conv_id)
            arms["kb hybrid, text only"].add(
                q.kind, [d.metadata["ep_id"] for d in docs], q.evidence
            )
            default_speaker = memory.speaker_weight
            for name, opts, speaker in (
                ("EpisodicMemory", {}, True),
                ("  no date resolution", {"resolve_dates": False}, True),
                ("  no speaker handling", {}, False),
                ("  no recency", {"recency": "off"}, True),
                ("  none of the three", {"resolve_dates": False, "recency": "off"}, False),
            ):
                memory.speaker_weight = default_speaker if speaker else 0.0
                found = memory.search(q.text, user_id=conv.conv_id, k=10, now=q.now, **opts)
                arms[name].add(q.kind, [e.episode_id for e in found], q.evidence)
                if name == "EpisodicMemory":
                    sims += [e.similarity for e in found if e.episode_id in q.evidence]
            memory.speaker_weight = default_speaker
        for question in OFF_TOPIC:
            found = memory.search(question, user_id=conv.conv_id, k=1)
            off.append(found[0].similarity if found else 0.0)
    print(f"evaluated in {time.perf_counter() - t0:.0f} s")
    print()
    header = (
        f"{'retriever':24s} "
        + " ".join(f"R@{k:<5d}" for k in KS)
        + "  | R@10 by kind: "
        + " ".join(f"{k:>8s}" for k in kinds)
    )
    print(header)
    for name, rec in arms.items():
        by_kind = " ".join(f"{rec.mean(10, k):8.3f}" for k in kinds)
        print(
            f"{name:24s} "
            + " ".join(f"{rec.mean(k):.3f} " for k in KS)
            + f"  |                {by_kind}"
        )
    best = max(plain, key=lambda n: arms[n].mean(10))
    gain = arms["EpisodicMemory"].mean(10) - arms[best].mean(10)
    mine = arms["EpisodicMemory"].mean(10)
    print(f"\nrecall@10: EpisodicMemory {mine:.3f} vs best plain baseline ({best}) "
          f"{arms[best].mean(10):.3f}: {gain:+.3f} (target >= +0.10)")  # fmt: skip
    from langchain_knowledge_inject.memory.episodic import DEFAULT_EPISODIC_MIN_SCORE as floor

    print(f"min_score (default {floor}): evidence hits in the top 10 kept / off-topic questions "
          f"with nothing recalled (evidence similarity median {statistics.median(sims):.2f}, "
          f"off-topic best hit median {statistics.median(off):.2f}):")  # fmt: skip
    for t in (0.1, 0.15, 0.2, 0.25, 0.3, 0.35):
        print(f"  {t:.2f}: {sum(s >= t for s in sims) / len(sims):.0%} / "
              f"{sum(s < t for s in off) / len(off):.0%}")  # fmt: skip
    embeddings.save()
    _speed(tmp, embeddings, convs[0])
    memory.close()
    kb.close()
    shutil.rmtree(tmp, ignore_errors=True)


def _speed(tmp: Path, embeddings: CachedEmbeddings, conv: data.Conversation) -> None:
    """Recording cost on the caller's thread, and search latency, side by side."""
    live = EpisodicMemory(path=tmp / "live", embeddings=embeddings.inner, min_score=0.0)
    sync = EpisodicMemory(path=tmp / "sync", embeddings=embeddings.inner, min_score=0.0,
                          background=False)  # fmt: skip
    live.knowledge_base, sync.knowledge_base  # noqa: B018 - open both before timing
    turns = conv.turns[:120]
    bg, fg = [], []
    for i, t in enumerate(turns):  # alternate, so both arms see the same load
        for memory, out in ((live, bg), (sync, fg)) if i % 2 == 0 else ((sync, fg), (live, bg)):
            start = time.perf_counter()
            memory.record(t.text, user_id="u", speaker=t.speaker, episode_id=t.turn_id,
                          date=t.date, thread_id=str(t.session))  # fmt: skip
            out.append(time.perf_counter() - start)
        time.sleep(0.02)  # a turn does not follow the previous one at once
    live.flush()
    ms = lambda xs, q=0.5: sorted(xs)[int(q * (len(xs) - 1))] * 1000  # noqa: E731
    print(f"\nrecording a turn on the caller's thread ({len(turns)} turns, real model): "
          f"background median {ms(bg):.2f} ms, p95 {ms(bg, 0.95):.2f} ms; written at once "
          f"median {ms(fg):.1f} ms (target <= 2 ms)")  # fmt: skip
    kb = live.knowledge_base
    questions = conv.questions[:60]
    ep, kbt = [], []
    for i, q in enumerate(questions):
        pair = [
            (lambda q=q: live.search(q.text, user_id="u", k=10, now=q.now), ep),
            (lambda q=q: kb.search(q.text, k=10, tenant_id="u"), kbt),
        ]
        for fn, out in pair if i % 2 == 0 else pair[::-1]:
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    dated = sum(1 for q in questions if q.kind == "temporal")
    print(f"search latency, {len(questions)} questions ({dated} with a date: two searches), "
          f"k=10: episode search median {ms(ep):.1f} ms, knowledge-base search median "
          f"{ms(kbt):.1f} ms, ratio {statistics.median(ep) / statistics.median(kbt):.2f} "
          "(target <= 1.0)")  # fmt: skip
    live.close()
    sync.close()


if __name__ == "__main__":
    main()
