"""The package's hybrid search beside its peers on the same chunks: latency, build time, quality.

Systems, the default first, all in one process on the same chunks and vectors:

1. **ours**: ``KnowledgeBase`` with every default, ``search(query, k=10,
   min_score=0.0)`` (no threshold, as the peers have none). On a store whose
   search does not group chunks by document yet, a second line groups them
   as ``fusion.group_by_document`` does, over ``search_hits``.
2. **bm25s + Chroma RRF**: a ``bm25s`` index (k1 1.2, b 0.75, English stop
   words, Snowball stemming when PyStemmer is installed) and a plain chromadb
   collection (cosine) over the chunk texts and vectors; the top 100 of each
   (ids only) fused by reciprocal rank fusion (60), the first 10 returned as
   Documents, their texts from memory.
3. **EnsembleRetriever**: LangChain's ``EnsembleRetriever`` over
   ``langchain_community``'s ``BM25Retriever`` and a ``langchain_chroma.Chroma``
   retriever (cosine), both at ``k=10``, as its documentation sets it up.

The chunks are the package's default chunks: the abstracts go through
``KnowledgeBase.add_documents`` once, and its chunk texts and vectors, read
back from its Chroma collection, are what the peers index. Every query is
embedded once up front (the disk cache, ``_embedding_cache.py``); searches
look their vector up, so latency excludes the query embedding. Build time
excludes embedding too: time spent inside ``embed_documents`` (a table
lookup) is subtracted.

Sizes: SciFact's 5,183 abstracts, and with ``--copies N`` the corpus grown
to ``(N + 1) x 5,183`` abstracts: each copy of an abstract has each word
replaced, with probability 0.3, by a word drawn from the corpus vocabulary
(seeded), and each of its chunks gets the vector of the original chunk with
the most words in common, plus Gaussian noise scaled to cosine 0.9 with it
(renormalized), so no encoder runs. Relevance stays with the originals: the
copies are distractors for every system alike.

Printed per size: p50 / p95 search latency over the split's queries (test by
default; each query runs on every system, in rotating order, after 10
warm-up queries), index build time, nDCG@10 at k=10 by document (each abstract at its
first result) and distinct abstracts per answer, and ratios to bm25s + Chroma
RRF. The figures and their history are in docs/performance.md.

Run: ``OMP_NUM_THREADS=1 python benchmarks/peers.py [--copies 0,9]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from _embedding_cache import DEFAULT_CACHE, DiskCachedEmbeddings
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from retrieval_quality import SCIFACT, load, ndcg_at_10

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store import fusion
from langchain_knowledge_inject._store.embeddings import DEFAULT_MODEL_NAME, default_embeddings

K = 10
DEPTH = 100  # candidates per side for bm25s + Chroma, as the package fetches
RRF_K = 60
WORD = re.compile(r"\w+")


class TimedEmbeddings(Embeddings):
    """Wraps an ``Embeddings`` and adds up the time spent in it (subtracted from build times).

    ``model`` is the default model, never called: the knowledge base reads its
    window and tokenizer from it, so it splits into the default chunks.
    """

    def __init__(self, inner: Embeddings, model: Embeddings) -> None:
        self.inner = inner
        self.model = model
        self.model_name = DEFAULT_MODEL_NAME
        self.seconds = 0.0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        start = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - start

    def embed_query(self, text: str) -> list[float]:
        start = time.perf_counter()
        try:
            return self.inner.embed_query(text)
        finally:
            self.seconds += time.perf_counter() - start


class TableEmbeddings(Embeddings):
    """Vectors looked up by text; a text not in the table gets a perturbed neighbour's vector."""

    def __init__(self, table: dict[str, np.ndarray], originals: dict[str, np.ndarray]) -> None:
        self.table = table
        self.texts = list(originals)
        self.vectors = np.vstack([originals[t] for t in self.texts]).astype(np.float32)
        self.words = [set(WORD.findall(t.lower())) for t in self.texts]
        postings: dict[str, list[int]] = {}
        for i, words in enumerate(self.words):
            for word in words:
                postings.setdefault(word, []).append(i)
        self.postings = postings

    def _synthetic(self, text: str) -> np.ndarray:
        words = set(WORD.findall(text.lower()))
        rare = sorted((w for w in words if w in self.postings), key=lambda w: len(self.postings[w]))
        votes: Counter[int] = Counter()
        for word in rare[:8]:
            votes.update(self.postings[word])
        nearest = max(votes, key=lambda i: (len(words & self.words[i]), -i)) if votes else 0
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        noise = np.random.default_rng(seed).normal(0.0, 0.0247, self.vectors.shape[1])
        vector = self.vectors[nearest] + noise  # cosine about 0.9 with the original
        return (vector / np.linalg.norm(vector)).astype(np.float32)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            if text not in self.table:
                self.table[text] = self._synthetic(text)
            out.append(self.table[text].tolist())
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def perturbed_copies(docs: list[Document], copies: int, seed: int = 7) -> list[Document]:
    """``copies`` perturbed copies of each document (30% of words replaced), sources apart."""
    rng = random.Random(seed)
    vocabulary = sorted({w for doc in docs for w in doc.page_content.split()})
    out = []
    for n in range(1, copies + 1):
        for doc in docs:
            words = [
                rng.choice(vocabulary) if rng.random() < 0.3 else w
                for w in doc.page_content.split()
            ]
            out.append(
                Document(" ".join(words), metadata={"source": f"{doc.metadata['source']}~{n}"})
            )
    return out


def stored_chunks(kb: KnowledgeBase) -> tuple[list[str], list[str], np.ndarray, list[dict]]:
    """Every chunk of ``kb``'s shared partition: ids, texts, vectors (float32), metadata."""
    store = kb.vectorstore()
    ids: list[str] = []
    texts: list[str] = []
    vectors: list[np.ndarray] = []
    metas: list[dict] = []
    offset = 0
    while True:
        page = store.get(
            include=["documents", "embeddings", "metadatas"], limit=5000, offset=offset
        )
        if not page["ids"]:
            break
        ids += page["ids"]
        texts += page["documents"]
        vectors.append(np.asarray(page["embeddings"], dtype=np.float32))
        metas += page["metadatas"]
        offset += len(page["ids"])
    return ids, texts, np.vstack(vectors), metas


def timed_build(build: Callable[[], object], embeddings: TimedEmbeddings) -> tuple[object, float]:
    embeddings.seconds = 0.0
    start = time.perf_counter()
    built = build()
    return built, time.perf_counter() - start - embeddings.seconds


def build_ours(docs, path, embeddings):
    kb = KnowledgeBase("peers", path=path, embeddings=embeddings)
    for i in range(0, len(docs), 2000):
        kb.add_documents(docs[i : i + 2000])
    return kb


def sources_of(found: list[Document]) -> list[str]:
    return [d.metadata["source"] for d in found]


def merges(kb: KnowledgeBase) -> bool:
    """Whether ``search`` already returns one result per document (``chunk_ids`` in metadata)."""
    found = kb.search("cell", k=3, min_score=0.0)
    return bool(found) and "chunk_ids" in found[0].metadata


def merged_search(kb: KnowledgeBase, query: str) -> list[str]:
    """Results grouped by document on a store whose search does not group: ``search_hits`` + merge.

    An upper bound on the cost: it reads back every candidate chunk to learn its
    source, where the search path knows them already.
    """
    hits = kb.search_hits(query, k=fusion.CANDIDATE_DEPTH, min_score=0.0)
    chunks = {d.id: d for d in kb.get_by_ids([cid for cid, _ in hits])}
    parents = {cid: d.metadata.get("source", "") for cid, d in chunks.items()}
    groups = fusion.group_by_document(hits, parents, K)
    needed = [fusion.merge_chunks([chunks[c] for c in ids], score) for score, ids in groups]
    return sources_of(needed)


def build_bm25s_chroma(ids, texts, vectors, sources, path):
    import bm25s
    import chromadb

    try:
        import Stemmer

        stemmer = Stemmer.Stemmer("english")
    except ImportError:
        stemmer = None
    tokenizer = bm25s.tokenization.Tokenizer(stemmer=stemmer, stopwords="en")
    corpus = tokenizer.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False)
    index = bm25s.BM25(k1=1.2, b=0.75)
    index.index(corpus, show_progress=False)
    client = chromadb.PersistentClient(path=path)
    collection = client.create_collection("peer", metadata={"hnsw:space": "cosine"})
    step = client.get_max_batch_size()
    for i in range(0, len(ids), step):
        collection.add(
            ids=ids[i : i + step],
            embeddings=vectors[i : i + step],
            documents=texts[i : i + step],
            metadatas=[{"source": s} for s in sources[i : i + step]],
        )

    def search(query: str, vector: list[float]) -> list[str]:
        dense = collection.query(query_embeddings=[vector], n_results=DEPTH, include=[])["ids"][0]
        query_ids = tokenizer.tokenize(
            [query], update_vocab=False, return_as="ids", show_progress=False
        )
        keyword: list[str] = []
        if query_ids and len(query_ids[0]) > 0:
            found, scores = index.retrieve(
                query_ids, k=min(DEPTH, len(ids)), show_progress=False, n_threads=1
            )
            keyword = [ids[i] for i, s in zip(found[0], scores[0], strict=True) if s > 0]
        fused: dict[str, float] = {}
        for ranking in (dense, keyword):
            for rank, cid in enumerate(ranking):
                fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + rank + 1)
        top = sorted(fused, key=lambda c: -fused[c])[:K]
        found = [Document(texts[row[c]], metadata={"source": sources[row[c]]}) for c in top]
        return sources_of(found)

    row = {cid: i for i, cid in enumerate(ids)}
    return search


def build_ensemble(texts, sources, path, embeddings):
    from langchain_chroma import Chroma
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever

    metadatas = [{"source": s} for s in sources]
    bm25 = BM25Retriever.from_texts(texts, metadatas=metadatas, k=K)
    store = Chroma(
        "ensemble",
        embedding_function=embeddings,
        persist_directory=path,
        collection_metadata={"hnsw:space": "cosine"},
    )
    step = 5000
    for i in range(0, len(texts), step):
        store.add_texts(texts[i : i + step], metadatas=metadatas[i : i + step])
    ensemble = EnsembleRetriever(
        retrievers=[bm25, store.as_retriever(search_kwargs={"k": K})], weights=[0.5, 0.5]
    )

    def search(query: str, vector: list[float]) -> list[str]:
        return [d.metadata["source"] for d in ensemble.invoke(query)[:K]]

    return search


def measure(systems, queries, vectors, qrels) -> dict[str, dict[str, float]]:
    """Each system on every query, the systems in rotating order per query (load drifts alike)."""
    times: dict[str, list[float]] = {name: [] for name, _, _ in systems}
    ndcg: dict[str, list[float]] = {name: [] for name, _, _ in systems}
    distinct: dict[str, list[int]] = {name: [] for name, _, _ in systems}
    for i, ((qid, text), vector) in enumerate(zip(queries.items(), vectors, strict=True)):
        for name, search, _ in systems[i % len(systems) :] + systems[: i % len(systems)]:
            start = time.perf_counter()
            sources = search(text, vector)
            times[name].append(time.perf_counter() - start)
            ranked = list(dict.fromkeys(sources))
            ndcg[name].append(ndcg_at_10(ranked, qrels[qid]))
            distinct[name].append(len(ranked))
    out = {}
    for name, spent in times.items():
        spent.sort()
        out[name] = {
            "p50": 1000 * statistics.median(spent),
            "p95": 1000 * spent[int(0.95 * (len(spent) - 1))],
            "ndcg": statistics.mean(ndcg[name]),
            "docs": statistics.mean(distinct[name]),
        }
    return out


def run_size(docs, queries, qrels, query_vectors, originals, model, copies, tmp, skip_ensemble):
    table = dict(originals)
    table.update(
        (q, np.asarray(v, dtype=np.float32))
        for q, v in zip(queries.values(), query_vectors, strict=True)
    )
    embeddings = TimedEmbeddings(TableEmbeddings(table, originals), model)
    corpus = docs + perturbed_copies(docs, copies)
    print(f"\n{len(corpus):,} abstracts ({copies} perturbed copies each); load {load_avg()}")
    kb, ours_build = timed_build(
        lambda: build_ours(corpus, os.path.join(tmp, f"ours{copies}"), embeddings), embeddings
    )
    ids, texts, vectors, metas = stored_chunks(kb)
    sources = [m["source"] for m in metas]
    synthetic = sum(text not in originals for text in texts)
    print(
        f"  {len(ids):,} chunks ({synthetic:,} with synthetic vectors);"
        f" ours built in {ours_build:.1f} s (embedding excluded)",
        flush=True,
    )
    if copies == 0 and synthetic:
        msg = "the abstracts alone were not cut into the default chunks"
        raise RuntimeError(msg)
    systems: list[tuple[str, Callable, float]] = [
        (
            "ours (hybrid, defaults)",
            lambda q, v: sources_of(kb.search(q, k=K, min_score=0.0)),
            ours_build,
        )
    ]
    if not merges(kb):
        systems.append(("ours, merged (prototype)", lambda q, v: merged_search(kb, q), ours_build))
    peer, seconds = timed_build(
        lambda: build_bm25s_chroma(
            ids, texts, vectors, sources, os.path.join(tmp, f"peer{copies}")
        ),
        embeddings,
    )
    systems.append(("bm25s + Chroma RRF", peer, seconds))
    if not skip_ensemble:
        ensemble, seconds = timed_build(
            lambda: build_ensemble(texts, sources, os.path.join(tmp, f"ens{copies}"), embeddings),
            embeddings,
        )
        systems.append(("EnsembleRetriever", ensemble, seconds))
    for _, search, _ in systems:  # warm-up
        for text, vector in list(zip(queries.values(), query_vectors, strict=True))[:10]:
            search(text, vector)
    measured = measure(systems, queries, query_vectors, qrels)
    results = {name: (measured[name], build) for name, _, build in systems}
    ref, ref_build = results["bm25s + Chroma RRF"]
    print(
        f"  {'system':26s} {'p50 ms':>8s} {'p95 ms':>8s} {'build s':>8s} {'nDCG@10':>8s}"
        f" {'docs':>5s} {'p50/peer':>9s} {'p95/peer':>9s} {'build/peer':>10s}"
    )
    for name, (r, build) in results.items():
        print(
            f"  {name:26s} {r['p50']:8.1f} {r['p95']:8.1f} {build:8.1f} {r['ndcg']:8.4f}"
            f" {r['docs']:5.1f} {r['p50'] / ref['p50']:8.2f}x {r['p95'] / ref['p95']:8.2f}x"
            f" {build / ref_build:9.2f}x",
            flush=True,
        )
    print(f"  load {load_avg()}")
    kb.close()


def load_avg() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SCIFACT)
    parser.add_argument("--split", choices=("test", "train"), default="test")
    parser.add_argument("--copies", default="0,9", help="perturbed copies per abstract, per size")
    parser.add_argument("--skip-ensemble-above", type=int, default=10**9, help="abstracts")
    parser.add_argument("--docs", type=int, default=None, help="first N abstracts (a quick try)")
    args = parser.parse_args()
    docs, queries, qrels = load(args.data, args.split)
    docs = docs[: args.docs]
    cached = DiskCachedEmbeddings(default_embeddings(), DEFAULT_MODEL_NAME, DEFAULT_CACHE)
    query_vectors = [cached.embed_query(text) for text in queries.values()]
    with tempfile.TemporaryDirectory() as tmp:
        # The default chunks and their vectors, once: what every size starts from.
        seed = build_ours(docs, os.path.join(tmp, "chunks"), cached)
        _, texts, vectors, _ = stored_chunks(seed)
        seed.close()
        originals = dict(zip(texts, vectors, strict=True))  # rows of one float32 array
        print(f"default chunks: {len(originals):,} distinct; embedding cache {cached.hits} hits")
        for copies in map(int, args.copies.split(",")):
            skip = len(docs) * (copies + 1) > args.skip_ensemble_above
            run_size(
                docs, queries, qrels, query_vectors, originals, cached.inner, copies, tmp, skip
            )


if __name__ == "__main__":
    main()
