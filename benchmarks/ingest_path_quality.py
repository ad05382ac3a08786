"""Retrieval quality of ``kinject ingest`` (files) beside the KnowledgeBase default path.

Both stores hold the BEIR SciFact corpus (5,183 abstracts) with every default
(default embedding model and splitter, default fusion):

1. **direct**: each abstract added with ``KnowledgeBase.add_documents`` as one
   ``Document`` (``title + " " + text``, ``source`` = its id), as
   ``benchmarks/retrieval_quality.py`` measures the default path.
2. **files**: each abstract written as one file in a temporary folder, then
   ingested by ``kinject ingest FOLDER --kb scifact`` (``integrations.cli.main``,
   the code the console script runs). ``--format markdown`` (default) writes
   ``<id>.md`` as ``# <title>``, a blank line, the abstract; ``--format text``
   writes ``<id>.txt`` as the title on the first line, a blank line, the
   abstract. A file's ranked id is its file name without the suffix.

Both splits' queries (train: 809, test: 300) run against the same two stores
in dense, keyword and hybrid mode (``k=100, min_score=0.0``, a ranked list of
abstracts is the chunks' sources in order, first occurrence kept); printed:
nDCG@10 of each path and files - direct. The corpus is the same for both
splits: anything chosen is chosen on train, test is reported beside it.
Chunk statistics of the files path: chunks, the longest chunk in word pieces,
chunks over the splitter's limit, chunks holding nothing but a heading.

Embeddings go through the disk cache (``_embedding_cache.py``): a chunk text
embedded once, by any benchmark, is read back; the ``embedding cache`` lines
say how many were computed. Run it with ``OMP_NUM_THREADS=1``.

Run: ``python benchmarks/ingest_path_quality.py --data ../shared/bench/scifact
[--format markdown|text] [--skip-direct]``. Target: files within 0.003
nDCG@10 of direct in every mode.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _embedding_cache import DEFAULT_CACHE, DiskCachedEmbeddings
from langchain_core.documents import Document
from retrieval_quality import MODES, build, ndcg_at_10, read_qrels

from langchain_knowledge_inject._store import knowledge_base
from langchain_knowledge_inject._store.embeddings import (
    DEFAULT_MODEL_NAME,
    default_embeddings,
    default_token_counter,
    model_window,
)
from langchain_knowledge_inject._surfaces import cli

ROOT = Path(__file__).resolve().parents[1]
CHUNK_TOKENS = model_window(default_embeddings())[0] // 2  # the default splitter's chunk size


def load(data: Path) -> tuple[list[dict[str, str]], dict[str, str], dict[str, dict[str, set[str]]]]:
    with (data / "corpus.jsonl").open() as fh:
        rows = [json.loads(line) for line in fh]
    with (data / "queries.jsonl").open() as fh:
        queries = {row["_id"]: row["text"] for row in map(json.loads, fh)}
    return rows, queries, {split: read_qrels(data, split) for split in ("train", "test")}


def write_files(rows: list[dict[str, str]], folder: Path, fmt: str) -> None:
    folder.mkdir()
    for row in rows:
        if fmt == "markdown":
            (folder / f"{row['_id']}.md").write_text(f"# {row['title']}\n\n{row['text']}\n")
        else:
            (folder / f"{row['_id']}.txt").write_text(f"{row['title']}\n\n{row['text']}\n")


def ingest_files(folder: Path, store: str, embeddings: DiskCachedEmbeddings) -> None:
    """``kinject ingest FOLDER --kb scifact --path STORE``, its model's vectors cached on disk."""
    original = knowledge_base.KnowledgeBase

    class CachedKnowledgeBase(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("embeddings", embeddings)
            super().__init__(*args, **kwargs)

    knowledge_base.KnowledgeBase = CachedKnowledgeBase  # cli imports it when it runs
    try:
        start = time.perf_counter()
        code = cli.main(["ingest", str(folder), "--kb", "scifact", "--path", store])
    finally:
        knowledge_base.KnowledgeBase = original
    if code != 0:
        raise SystemExit(f"kinject ingest failed with exit code {code}")
    print(
        f"kinject ingest took {time.perf_counter() - start:.0f}s"
        f" (embedding cache: {embeddings.hits} hits, {embeddings.misses} computed)",
        flush=True,
    )


def chunk_stats(kb: Any, titles: set[str]) -> None:
    """Chunk sizes of a store, read from its shared partition's Chroma collection."""
    count = default_token_counter()
    texts = kb._chroma.collection("", create=False).get(include=["documents"])["documents"]
    sizes = [count(text) for text in texts]
    heading_only = sum(1 for text in texts if text.strip().lstrip("# ") in titles)
    print(
        f"files path: {len(texts)} chunks, longest {max(sizes)} word pieces,"
        f" {sum(s > CHUNK_TOKENS for s in sizes)} over {CHUNK_TOKENS},"
        f" {heading_only} holding a title alone, mean {statistics.mean(sizes):.0f}"
    )


def scores(
    kb: Any, queries: dict[str, str], qrels: dict[str, set[str]], mode: str, strip_suffix: bool
) -> float:
    values = []
    for query_id, relevant in qrels.items():
        ranked: list[str] = []
        for doc in kb.search(queries[query_id], k=100, mode=mode, min_score=0.0):
            source = doc.metadata["source"]
            source = Path(source).stem if strip_suffix else source
            if source not in ranked:
                ranked.append(source)
        values.append(ndcg_at_10(ranked, relevant))
    return statistics.mean(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "scifact")
    parser.add_argument("--format", choices=("markdown", "text"), default="markdown")
    parser.add_argument("--skip-direct", action="store_true", help="files path only")
    args = parser.parse_args()
    rows, queries, qrels = load(args.data)
    print(
        f"SciFact: {len(rows)} abstracts as {args.format} files;"
        f" load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    embeddings = DiskCachedEmbeddings(default_embeddings(), DEFAULT_MODEL_NAME, DEFAULT_CACHE)
    results: dict[str, dict[tuple[str, str], float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "abstracts"
        write_files(rows, folder, args.format)
        ingest_files(folder, os.path.join(tmp, "files"), embeddings)
        stores = {"files": (os.path.join(tmp, "files"), True)}
        if not args.skip_direct:
            docs = [
                Document(f"{row['title']} {row['text']}", metadata={"source": row["_id"]})
                for row in rows
            ]
            build(docs, os.path.join(tmp, "direct"), embeddings).close()
            stores["direct"] = (os.path.join(tmp, "direct"), False)
        for name, (path, strip_suffix) in stores.items():
            with knowledge_base.KnowledgeBase("scifact", path=path, embeddings=embeddings) as kb:
                if name == "files":
                    chunk_stats(kb, {row["title"].strip() for row in rows})
                results[name] = {
                    (split, mode): scores(kb, queries, qrels[split], mode, strip_suffix)
                    for split in ("train", "test")
                    for mode in MODES
                }
            print(f"{name} path evaluated; load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\nnDCG@10, {args.format} files through `kinject ingest` vs KnowledgeBase direct")
    print(f"{'split':6s} {'mode':8s} {'files':>7s} {'direct':>7s} {'files-direct':>12s}")
    for split in ("train", "test"):
        for mode in MODES:
            files = results["files"][(split, mode)]
            direct = results.get("direct", {}).get((split, mode))
            tail = "" if direct is None else f" {direct:7.4f} {files - direct:+12.4f}"
            print(f"{split:6s} {mode:8s} {files:7.4f}{tail}")


if __name__ == "__main__":
    main()
