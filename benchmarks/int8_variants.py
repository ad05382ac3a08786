"""Quality of int8 quantization variants of the default model against fp32, on SciFact.

Each variant is a dynamic int8 quantization of the same fp32 ONNX export of
all-MiniLM-L6-v2 (the ``onnx`` extra is required):

* ``st-avx2`` (or the machine's target): sentence-transformers' string target,
  what ``onnx-int8`` exported before: every MatMul (the 12 that multiply two
  activations included) and the embedding tables' ``Gather``;
* ``weights``: only the 36 MatMuls that multiply by a weight matrix;
* ``unsmoothed``: what ``onnx-int8`` exported before smoothing: ``weights``
  minus the feed-forward output projections, kept in fp32;
* ``default``: what ``onnx-int8`` exports now
  (``store/embedding_quantization.py``): ``unsmoothed`` with the inputs of the
  query/key/value and feed-forward input projections smoothed first
  (SmoothQuant, scales from the module's calibration texts);
* ``weights-no-ffn-out-0-2``: ``weights`` minus the feed-forward output projections of
  layers 0 to 2 only; ``smoothed-no-ffn-out-0-2``: the same, smoothed.

Every abstract of the corpus (``title + " " + text``, one vector each, the
model reading its first 256 word pieces) and every test claim are embedded
through the package's own batches (``TokenBatchedEmbeddings``, up to 256 padded
word pieces per batch on ONNX Runtime, as ``onnx-int8`` ingests); vectors are
cached per variant under ``--cache`` (a full corpus takes minutes per variant on
one thread). Printed per variant: dense nDCG@10 over the test claims and its
difference to fp32, the mean and lowest cosine to the fp32 vector of the same
abstract, and process CPU seconds per 100 abstracts (when not cached; ingest
speed itself is ``benchmarks/ingest.py``'s, side by side with the bare path).

Run: ``OMP_NUM_THREADS=1 python benchmarks/int8_variants.py [--variants fp32 default]
[--docs 0] [--cache /tmp/kinject-int8-variants]``
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from embedding_speed import load, ndcg_at_10
from langchain_knowledge_inject._store.embedding_quantization import (
    FP32_MATMULS,
    SMOOTH_MATMULS,
    write_quantized,
)

from langchain_knowledge_inject._store.embeddings import (
    _export_folder,
    _quantization_target,
    default_embeddings,
    onnx_available,
    onnx_file_embeddings,
)

ROOT = Path(__file__).resolve().parents[1]
NO_NODE = re.compile(r"(?!)")  # matches no node: every weight MatMul quantized
FFN_OUT_0_2 = re.compile(r"/layer\.[0-2]/output/dense/")
VARIANTS = {  # MatMuls kept in fp32, and whether the inputs are smoothed first
    "weights": (NO_NODE, False),
    "unsmoothed": (FP32_MATMULS, False),
    "default": (FP32_MATMULS, True),
    "weights-no-ffn-out-0-2": (FFN_OUT_0_2, False),
    "smoothed-no-ffn-out-0-2": (FFN_OUT_0_2, True),
}


def build(folder: Path, variant: str, target: str) -> str:
    """Quantize ``folder``'s fp32 export as ``variant``; return the file name."""
    file_name = f"onnx/model_{variant}.onnx"
    if (folder / file_name).is_file():
        return file_name
    if variant.startswith("st-"):
        from optimum.onnxruntime import ORTQuantizer
        from optimum.onnxruntime.configuration import AutoQuantizationConfig

        # what the string target means in sentence-transformers
        config = getattr(AutoQuantizationConfig, target)(is_static=False)
        quantizer = ORTQuantizer.from_pretrained(str(folder / "onnx"), file_name="model.onnx")
        quantizer.quantize(config, str(folder / "onnx"), file_suffix=variant)
        return file_name
    from transformers import AutoTokenizer

    keep_fp32, smoothed = VARIANTS[variant]
    write_quantized(
        folder / "onnx" / "model.onnx",
        folder / file_name,
        target,
        tokenizer=AutoTokenizer.from_pretrained(str(folder)),
        keep_fp32=keep_fp32,
        smooth=SMOOTH_MATMULS if smoothed else None,
    )
    return file_name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "scifact")
    parser.add_argument("--variants", nargs="+", default=["fp32", "st", *VARIANTS])
    parser.add_argument("--docs", type=int, default=0, help="limit the corpus (0: all)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/kinject-int8-variants"))
    args = parser.parse_args()
    if not onnx_available():
        print('needs the onnx extra: pip install "langchain-knowledge-inject[onnx]"')
        return
    torch.set_num_threads(1)
    target = _quantization_target()
    default_embeddings(backend="onnx", cache_dir=args.cache)  # the fp32 export
    folder = args.cache / "variants"
    if not folder.exists():
        shutil.copytree(
            _export_folder(args.cache), folder, ignore=shutil.ignore_patterns("model_*.onnx")
        )
    docs, queries, qrels = load(args.data, 10**9)
    ids = list(docs)[: args.docs or None]
    print(
        f"{len(ids)} abstracts, {len(queries)} test claims, target {target}; "
        f"load average {os.getloadavg()}"
    )
    results: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for variant in [v if v != "st" else f"st-{target}" for v in args.variants]:
        cached = args.cache / f"{variant}-{len(ids)}.npz"
        seconds = ""
        if cached.is_file():
            data = np.load(cached)
            doc_vectors, query_vectors = data["docs"], data["queries"]
        else:
            file_name = "onnx/model.onnx" if variant == "fp32" else build(folder, variant, target)
            model = onnx_file_embeddings(folder, file_name, threads=1)
            start = time.process_time()
            doc_vectors = np.asarray(model.embed_documents([docs[i] for i in ids]), np.float32)
            cpu = time.process_time() - start
            seconds = f"  {100 * cpu / len(ids):5.2f} CPU s per 100 abstracts"
            query_vectors = np.asarray([model.embed_query(q) for q in queries.values()], np.float32)
            np.savez(cached, docs=doc_vectors, queries=query_vectors)
        results[variant] = (doc_vectors, query_vectors)
        scores = query_vectors @ doc_vectors.T
        ndcg = statistics.mean(
            ndcg_at_10([ids[j] for j in np.argsort(-row)[:10]], qrels[qid])
            for qid, row in zip(queries, scores, strict=True)
        )
        line = f"  {variant:24s} nDCG@10 {ndcg:.4f}"
        if "fp32" in results and variant != "fp32":
            reference, base_queries = results["fp32"]
            base = statistics.mean(
                ndcg_at_10([ids[j] for j in np.argsort(-row)[:10]], qrels[qid])
                for qid, row in zip(queries, base_queries @ reference.T, strict=True)
            )
            cosines = np.sum(doc_vectors * reference, axis=1)
            line += (
                f" ({ndcg - base:+.4f} vs fp32)  cosine to fp32 mean {cosines.mean():.5f} "
                f"min {cosines.min():.5f}"
            )
        print(line + seconds, flush=True)
    print(f"load average at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
