"""Median per-query latency of KnowledgeBase.search against the bare Chroma path.

On a ~10k-chunk knowledge base built from SciFact abstracts (split into
chunks), each test query is timed through ``kb.search(mode="dense")`` and
through the bare path a user would write (``embeddings.embed_query`` +
``collection.query`` on the same collection), interleaved query by query in
one run, alternating which goes first. The query-embedding cache is cleared
before each of our searches so that it does not flatter us; the cached figure
is reported separately. Hybrid, keyword, metadata-filtered and tenant searches are
reported beside it: a tenant's search reads its partition and the shared one
(``hybrid_tenant``), or its own alone (``hybrid_tenant_alone``, ``include_shared=False``;
the starting code has only that kind, as ``hybrid_tenant``). The script runs on the
starting code too (``PYTHONPATH=/work/baseline``): compare the ratios to the bare path of two
runs, never their absolute times. Chunk embeddings are cached on disk
(``_embedding_cache.py``); queries are always embedded.

Run: ``python benchmarks/search_latency.py [--data ../shared/bench/scifact] [--chunks 10000]``
Target: dense ratio <= 1.15.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import tempfile
import time
from pathlib import Path

from _embedding_cache import DiskCachedEmbeddings
from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_knowledge_inject import KnowledgeBase

try:
    from langchain_knowledge_inject._store.embeddings import DEFAULT_MODEL_NAME, default_embeddings
except ImportError:  # the starting code (PYTHONPATH=/work/baseline)
    from langchain_knowledge_inject.store.embeddings import DEFAULT_MODEL_NAME, default_embeddings

ROOT = Path(__file__).resolve().parents[1]
ALONE = "include_shared" in inspect.signature(KnowledgeBase.search).parameters
CATEGORIES = ("biology", "medicine", "chemistry", "physics")


def load_chunks(data: Path, limit: int) -> list[Document]:
    splitter = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=50)
    docs: list[Document] = []
    with (data / "corpus.jsonl").open() as fh:
        for n, line in enumerate(fh):
            row = json.loads(line)
            text = f"{row['title']} {row['text']}"
            for i, piece in enumerate(splitter.split_text(text)):
                meta = {"source": row["_id"], "category": CATEGORIES[n % 4], "chunk_index": i}
                docs.append(Document(piece, metadata=meta))
                if len(docs) >= limit:
                    return docs
    return docs


class _CachedDocuments(DiskCachedEmbeddings):
    """Chunks from the disk cache; every query embedded by the model."""

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "scifact")
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()

    embeddings = _CachedDocuments(default_embeddings(), DEFAULT_MODEL_NAME)
    chunks = load_chunks(args.data, args.chunks)
    queries = [json.loads(line)["text"] for line in (args.data / "queries.jsonl").open()]
    queries = queries[-args.queries :]
    with tempfile.TemporaryDirectory() as tmp:
        kb = KnowledgeBase("latency", path=tmp, embeddings=embeddings, text_splitter=None)
        start = time.perf_counter()
        kb.add_documents(chunks)
        tenant = [
            Document(d.page_content, metadata=d.metadata) for d in chunks[: len(chunks) // 10]
        ]
        kb.add_documents(tenant, tenant_id="tenant-a")
        print(f"built: {kb.info.chunk_count} chunks in {time.perf_counter() - start:.1f}s")
        client = kb._chroma.client  # the shared partition's collection, bare: the largest
        mine = [c for c in client.list_collections() if kb.id in c.name]
        collection = max(mine, key=lambda c: c.count())
        clear = getattr(kb._query_vector, "cache_clear", None) or kb._query_vector.clear

        def bare(q: str) -> None:
            vector = embeddings.embed_query(q)
            collection.query(query_embeddings=[vector], n_results=args.k)

        def ours(q: str, **kw) -> None:
            clear()
            kb.search(q, k=args.k, min_score=0.0, **kw)

        for q in queries[:10]:  # warm up both paths
            bare(q)
            ours(q, mode="dense")
        times: dict[str, list[float]] = {
            name: []
            for name in (
                "bare",
                "dense",
                "dense_cached",
                "hybrid",
                "keyword",
                "dense_filtered",
                "hybrid_filtered",
                "hybrid_tenant",
                *(["hybrid_tenant_alone"] if ALONE else []),
            )
        }
        for i, q in enumerate(queries):
            pair = [("bare", lambda q=q: bare(q)), ("dense", lambda q=q: ours(q, mode="dense"))]
            for name, fn in pair if i % 2 == 0 else reversed(pair):
                times[name].append(timed(fn))
            times["dense_cached"].append(
                timed(lambda q=q: kb.search(q, k=args.k, min_score=0.0, mode="dense"))
            )
            times["hybrid"].append(timed(lambda q=q: ours(q, mode="hybrid")))
            times["keyword"].append(
                timed(lambda q=q: kb.search(q, k=args.k, min_score=0.0, mode="keyword"))
            )
            flt = {"category": "medicine"}
            times["dense_filtered"].append(
                timed(lambda q=q, flt=flt: ours(q, mode="dense", filter=flt))
            )
            times["hybrid_filtered"].append(
                timed(lambda q=q, flt=flt: ours(q, mode="hybrid", filter=flt))
            )
            times["hybrid_tenant"].append(
                timed(lambda q=q: ours(q, mode="hybrid", tenant_id="tenant-a"))
            )
            if ALONE:
                alone = {"tenant_id": "tenant-a", "include_shared": False}
                times["hybrid_tenant_alone"].append(
                    timed(lambda q=q, alone=alone: ours(q, mode="hybrid", **alone))
                )
        base = statistics.median(times["bare"])
        print(
            f"{len(queries)} queries, k={args.k}, median per query "
            "(ratio to bare embed_query + collection.query)"
        )
        for name, values in times.items():
            med = statistics.median(values)
            print(f"  {name:16s} {med * 1000:7.2f} ms   {med / base:5.2f}x")
        ratio = statistics.median(times["dense"]) / base
        print(f"dense ratio {ratio:.3f} (target <= 1.15): {'PASS' if ratio <= 1.15 else 'FAIL'}")
        kb.close()


if __name__ == "__main__":
    main()
