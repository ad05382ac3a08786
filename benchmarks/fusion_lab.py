"""A fast lab for hybrid-search variants on SciFact train: collect the candidates once, fuse often.

``retrieval_quality.py`` measures variants through ``KnowledgeBase.search``
(each costs a full pass over the queries). Here the default store is built
once (kept in ``--store``; the benchmark's embedding cache makes it quick),
and for each query the search path's own inputs are collected once: the dense
candidates (Chroma's nearest chunks), the keyword candidates (``KeywordIndex``),
the document-level keyword hits (``DocumentIndex``) and the chunks' sources,
plus every chunk's vector and text and the query vector. A variant is then a
function of these inputs, evaluated in-process in seconds. The first line
printed is ``fusion.fuse_with_documents`` on the collected inputs: the
default path's hybrid nDCG@10, as ``KnowledgeBase.search`` ranks on this
store (the same code, the same candidates; a store built anew differs by a
few thousandths, HNSW builds differ run to run), with the queries that score
0. Then each variant beside it, labelled:

* **exact cosines**: Chroma's HNSW candidates replaced by the exact top 100
  (brute force over every chunk vector); every candidate document's cosine the
  exact best of all its chunks (not the floor of the dense list); every
  candidate chunk's cosine exact too.
* **document vectors**: a vector per document beside its chunks' (its
  ``documents.lead``, the first 24 words, or its SciFact title), its cosine
  taking the document's place (``max``: the better of the two; ``mix g``:
  ``(1 - g) * best chunk + g * lead``; ``bonus g``: the best chunk plus ``g``
  times the lead's excess over it).
* **dense feedback (Rocchio)**: the query vector plus ``alpha`` times the
  mean vector of the best chunks of the top ``m`` documents of the default
  ranking, searched again (exact), fused as the default.
* **BM25 of the document index** (``--keyword``, printed instead of the
  others): documents ranked by keyword alone, over the text the
  ``documents.DocumentIndex`` holds, with FTS5's tokens and no phrase part:
  FTS5's ``bm25()`` (k1 1.2, b 0.75, its IDF) against other k1 / b, Lucene's
  IDF, BM25+ and other query stop lists.
* **query-adaptive dense weight**: both cosine weights moved from 0.75 by
  ``slope`` standard deviations of the query's margin (clipped to 0.4-0.95):
  the document-index keyword margin (best minus second BM25, over the best)
  lowers it, the dense margin (best minus second document cosine) raises it.
* **weights**: the document part's cosine weight, the chunk part's cosine
  weight and the document weight over a grid (the best few printed).

* **rescoring** (``--rescore``, printed instead of the others; the code is
  in ``fusion_rescore.py``): each candidate abstract scored directly,
  ``0.75 * (0.75 cosine + 0.25 keyword) + 0.25 * its best fused chunk`` (the
  default's ranking, to the tie; it reproduces the default line), then
  changed one part at a time. Each grid prints every setting's train figure,
  on how many of 5 fixed query folds it beats the default, and a held-out
  figure (each fold scored with the setting best on the other four). The
  variants: per-query normalisation of the three parts before the blend
  (min-max, z-score, distribution-based: mean plus or minus 3 standard
  deviations, clipped), over cosine weights 0.3-0.8 and document shares 0.75
  / 1; the document keyword as a share of the query's highest possible BM25
  (the sum of its terms' ``idf * (k1 + 1)``, BM25 outside FTS5) and that
  BM25 relative to the best instead of FTS5's; a reciprocal-rank term ``c *
  (1 / (k + dense rank) + 1 / (k + keyword rank))`` added to the score, and
  one side's ``c / (k + rank)`` alone (dense, document keyword, best chunk);
  RM3-style keyword feedback (the top ``m`` default abstracts' term
  distribution, ``T`` terms, most probable times IDF, mixed into the
  document keyword part at ``lambda``); the lead vector (the better of its
  cosine and the best chunk's), RM3 and that BM25 combined; dense pooling over an abstract's
  chunks with exact cosines (best plus ``f`` times the second best, ``(1 -
  f)`` best plus ``f`` second, log-sum-exp with temperature ``tau``, by mean
  or sum); a bonus ``b`` for an abstract in both sides' top ``n``; and
  learned fusion over 14 per-abstract features (cosine, document keyword,
  best chunk, best chunk keyword, second cosine, lead cosine, RM3 score,
  both z-scores, both reciprocal ranks and log ranks, the default score),
  trained on four folds and scored on the fifth: logistic regression
  (pointwise, and pairwise over each query's default top 30) and
  scikit-learn's gradient-boosted trees (pointwise, ties broken by the
  default score). ``--trees-on-test`` (with ``--split test``) fits the trees
  with the settings fixed on train (``fusion_rescore.TREES``) on every train
  query and reports them on the test queries.

Train figures of these runs are in ``retrieval_quality.py``'s docstring.

Run: ``python benchmarks/fusion_lab.py --data ../shared/bench/scifact --split train``
(never tune on test). ``--store`` keeps the built store and the collected
inputs between runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import pickle
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from _embedding_cache import DEFAULT_CACHE, DiskCachedEmbeddings
from retrieval_quality import ROOT, load, ndcg_at_10

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store import documents, fusion
from langchain_knowledge_inject._store.embeddings import DEFAULT_MODEL_NAME, default_embeddings

DEPTH = 100


@dataclass
class Collected:
    """The search path's inputs for every query, and the store's chunks."""

    chunk_ids: list[str]
    sources: list[str]
    texts: list[str]
    vectors: np.ndarray  # chunk vectors, unit length, in chunk_ids order
    documents: dict[str, str] = field(default_factory=dict)  # source -> indexed document text
    queries: dict[str, str] = field(default_factory=dict)
    query_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    dense: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    keyword: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    document_hits: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    indexed: dict[str, set[str]] = field(default_factory=dict)


def open_store(docs, path: Path, embeddings) -> KnowledgeBase:
    fresh = not path.exists()
    kb = KnowledgeBase("scifact", path=str(path), embeddings=embeddings)
    if fresh:
        start = time.perf_counter()
        for i in range(0, len(docs), 500):
            kb.add_documents(docs[i : i + 500])
        print(f"built in {time.perf_counter() - start:.0f}s: {kb.info.chunk_count} chunks")
    return kb


def collect(kb: KnowledgeBase, queries: dict[str, str]) -> Collected:
    searcher = kb._searcher
    collection = kb._collection("", create=False)
    got = collection.get(include=["embeddings"])
    ids = list(got["ids"])
    vectors = np.asarray(got["embeddings"], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    parents = searcher.parents("", set(ids))
    rows = kb._catalog.get_chunks(kb._handles.kb_id, "", ids)
    data = Collected(
        chunk_ids=ids,
        sources=[parents.get(c, c) for c in ids],
        texts=[rows[c].text for c in ids],
        vectors=vectors,
    )
    index = kb._document_index
    for source in sorted(set(data.sources)):
        data.documents[source] = index.indexed_text(kb._handles.kb_id, "", source)
    for n, (query_id, text) in enumerate(queries.items()):
        dense, keyword = searcher.candidates("", text, DEPTH, None, "hybrid")
        candidate_parents = {parents[c] for c, _ in [*dense, *keyword] if c in parents}
        whole, indexed = index.search(
            kb._handles.kb_id, "", text, k=DEPTH, sources=candidate_parents
        )
        data.queries[query_id] = text
        data.query_vectors[query_id] = np.asarray(searcher.query_vector(text), dtype=np.float32)
        data.dense[query_id] = dense
        data.keyword[query_id] = keyword
        data.document_hits[query_id] = whole
        data.indexed[query_id] = indexed
        if n % 200 == 0:
            print(f"  collected {n}/{len(queries)}", flush=True)
    return data


def ranked_sources(ranked: list[tuple[str, float]], parent: dict[str, str]) -> list[str]:
    """The documents of a chunk ranking, in order, first occurrence kept."""
    out: list[str] = []
    seen: set[str] = set()
    for chunk_id, _ in ranked:
        source = parent.get(chunk_id, chunk_id)
        if source not in seen:
            seen.add(source)
            out.append(source)
    return out


class Lab:
    """The collected inputs, indexed for the variants."""

    def __init__(self, data: Collected, doc_vectors: dict[str, np.ndarray]) -> None:
        self.data = data
        self.parent = dict(zip(data.chunk_ids, data.sources, strict=True))
        self.row = {c: i for i, c in enumerate(data.chunk_ids)}
        self.doc_rows: dict[str, list[int]] = {}
        for i, source in enumerate(data.sources):
            self.doc_rows.setdefault(source, []).append(i)
        self.query_vectors = {q: v / np.linalg.norm(v) for q, v in data.query_vectors.items()}
        self.doc_vectors = doc_vectors  # name -> (source -> unit vector), aligned by position
        self.doc_position = {s: i for i, s in enumerate(sorted(self.doc_rows))}
        self._cosines: tuple[str, np.ndarray] = ("", np.zeros(0))

    def cosines(self, q: str, vector: np.ndarray | None = None) -> np.ndarray:
        """Cosine of every chunk to the query (or to ``vector``)."""
        if vector is not None:
            return self.data.vectors @ vector
        if self._cosines[0] != q:
            self._cosines = (q, self.data.vectors @ self.query_vectors[q])
        return self._cosines[1]

    def exact_dense(self, q: str, vector: np.ndarray | None = None) -> list[tuple[str, float]]:
        cos = self.cosines(q, vector)
        top = np.argpartition(-cos, DEPTH)[:DEPTH]
        top = top[np.argsort(-cos[top])]
        return [(self.data.chunk_ids[i], max(0.0, float(cos[i]))) for i in top]

    def default(self, q: str, dense: list[tuple[str, float]] | None = None) -> list[str]:
        """``fusion.fuse_with_documents`` as hybrid search calls it."""
        d = self.data
        ranked = fusion.fuse_with_documents(
            d.dense[q] if dense is None else dense,
            d.keyword[q],
            self.parent,
            document_keyword=d.document_hits[q],
            indexed=d.indexed[q],
        )
        return ranked_sources(ranked, self.parent)

    def blended(
        self,
        q: str,
        document_cosine,
        *,
        dense: list[tuple[str, float]] | None = None,
        document_dense_weight: float | None = None,
        chunk_dense_weight: float | None = None,
        document_weight: float | None = None,
    ) -> list[str]:
        """The default blend, with the document's cosine from ``document_cosine(q, source, best)``.

        ``best`` is the default's document cosine (its best chunk in the dense
        list, else that list's lowest cosine).
        """
        d = self.data
        dense = d.dense[q] if dense is None else dense
        wd = fusion.DENSE_WEIGHT if document_dense_weight is None else document_dense_weight
        wc = fusion.DENSE_WEIGHT if chunk_dense_weight is None else chunk_dense_weight
        share = fusion.DOCUMENT_WEIGHT if document_weight is None else document_weight
        chunk_scores = fusion.fuse(dense, d.keyword[q], dense_weight=wc)
        best: dict[str, float] = {}
        for chunk_id, cosine in dense:
            source = self.parent[chunk_id]
            best[source] = max(best.get(source, 0.0), cosine)
        floor = min(best.values(), default=0.0)
        whole = dict(fusion.keyword_unit_scores(d.document_hits[q]))
        scores = {}
        for source in {self.parent[c] for c, _ in chunk_scores}:
            cosine = document_cosine(q, source, best.get(source, floor))
            scores[source] = wd * cosine + (1 - wd) * whole.get(source, 0.0)
        order = {c: i for i, (c, _) in enumerate(chunk_scores)}
        mixed = [(c, share * scores[self.parent[c]] + (1 - share) * s) for c, s in chunk_scores]
        mixed.sort(key=lambda item: (-item[1], order[item[0]]))
        return ranked_sources(mixed, self.parent)

    def exact_document(self, q: str, source: str, best: float) -> float:
        return max(0.0, float(self.cosines(q)[self.doc_rows[source]].max()))

    def exact_candidates(self, q: str) -> list[str]:
        cos = self.cosines(q)
        ids = {c for c, _ in self.data.dense[q]} | {c for c, _ in self.data.keyword[q]}
        dense = sorted(((c, max(0.0, float(cos[self.row[c]]))) for c in ids), key=lambda x: -x[1])
        return self.blended(q, self.exact_document, dense=dense)

    def with_vector(self, name: str, how: str, g: float):
        vectors = self.doc_vectors[name]

        def document_cosine(q: str, source: str, best: float) -> float:
            other = float(vectors[self.doc_position[source]] @ self.query_vectors[q])
            if how == "max":
                return max(best, other)
            if how == "mix":
                return (1 - g) * best + g * other
            return best + g * max(0.0, other - best)  # bonus

        return lambda q: self.blended(q, document_cosine)

    def adaptive(self, side: str, slope: float):
        """Both cosine weights moved by ``slope`` standard deviations of a per-query margin."""

        def margin(q: str) -> float:
            if side == "keyword":
                hits = [s for _, s in self.data.document_hits[q]]
                return (hits[0] - hits[1]) / hits[0] if len(hits) > 1 else 1.0
            documents: dict[str, float] = {}  # the first two documents of the dense list
            for chunk_id, cosine in self.data.dense[q]:
                documents.setdefault(self.parent[chunk_id], cosine)
                if len(documents) == 2:
                    break
            top = list(documents.values())
            return top[0] - top[1] if len(top) > 1 else 0.0

        margins = {q: margin(q) for q in self.data.queries}
        middle = statistics.median(margins.values())
        spread = statistics.pstdev(margins.values()) or 1.0
        sign = -1.0 if side == "keyword" else 1.0

        def run(q: str) -> list[str]:
            shift = sign * slope * (margins[q] - middle) / spread
            w = min(0.95, max(0.4, fusion.DENSE_WEIGHT + shift))
            return self.blended(
                q, lambda _q, _s, best: best, document_dense_weight=w, chunk_dense_weight=w
            )

        return run

    def rocchio(self, q: str, alpha: float, m: int) -> list[str]:
        top = []
        for source in self.default(q)[:m]:
            rows = self.doc_rows[source]
            top.append(rows[int(np.argmax(self.cosines(q)[rows]))])
        vector = self.query_vectors[q] + alpha * self.data.vectors[top].mean(axis=0)
        vector /= np.linalg.norm(vector)
        return self.default(q, dense=self.exact_dense(q, vector))


def document_vectors(data: Collected, data_dir: Path) -> dict[str, np.ndarray]:
    """Each document's lead and SciFact title embedded (cached), rows in sorted source order."""
    titles = {}
    with (data_dir / "corpus.jsonl").open() as fh:
        for row in map(json.loads, fh):
            titles[row["_id"]] = row["title"]
    sources = sorted(set(data.sources))
    embeddings = DiskCachedEmbeddings(default_embeddings(), DEFAULT_MODEL_NAME, DEFAULT_CACHE)
    out = {}
    for name, texts in (
        ("lead", [documents.lead(data.documents[s]) for s in sources]),
        ("title", [titles[s] for s in sources]),
    ):
        vectors = np.asarray(embeddings.embed_documents(texts), dtype=np.float32)
        out[name] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return out


def keyword_variants(data: Collected, qrels) -> None:
    """Document-level BM25 variants, keyword alone, over the document index's own text."""
    from langchain_knowledge_inject._store.keyword_tokens import Fts5Tokenizer

    from langchain_knowledge_inject._store.keyword import STOPWORDS, TOKENIZER, query_terms

    sources = sorted(data.documents)
    tokenizer = Fts5Tokenizer(TOKENIZER)
    term_ids = tokenizer.term_ids([data.documents[s] for s in sources])
    lengths = np.array([len(t) for t in term_ids], dtype=np.float64)
    postings: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    pairs: dict[int, tuple[list[int], list[int]]] = {}
    for doc, ids in enumerate(term_ids):
        terms, counts = np.unique(ids, return_counts=True)
        for term, count in zip(terms.tolist(), counts.tolist(), strict=True):
            entry = pairs.setdefault(term, ([], []))
            entry[0].append(doc)
            entry[1].append(count)
    postings = {t: (np.array(d), np.array(f, dtype=np.float64)) for t, (d, f) in pairs.items()}
    total = len(sources)

    def run(terms_of, k1=1.2, b=0.75, idf="fts5", delta=0.0) -> float:
        norm = k1 * (1 - b + b * lengths / lengths.mean())
        values = []
        for q, text in data.queries.items():
            scores = np.zeros(total)
            for stems in tokenizer.lookup(terms_of(text)):
                if len(stems) != 1 or stems[0] not in postings:
                    continue
                docs, freqs = postings[stems[0]]
                n = docs.size
                if idf == "fts5":
                    weight = max(math.log((total - n + 0.5) / (n + 0.5)), 1e-6)
                else:  # Lucene
                    weight = math.log(1 + (total - n + 0.5) / (n + 0.5))
                scores[docs] += weight * (freqs * (k1 + 1) / (freqs + norm[docs]) + delta)
            order = np.argsort(-scores, kind="stable")[:100]
            ranked = [sources[i] for i in order if scores[i] > 0]
            values.append(ndcg_at_10(ranked, qrels[q]))
        return statistics.mean(values)

    def words(text: str) -> list[str]:
        return [w.casefold() for w in re.findall(r"[^\W_]+", text)]

    print("  document-level BM25, keyword alone (nDCG@10):")
    print(f"    FTS5 bm25() k1 1.2 b 0.75 (the index's): {run(query_terms):.4f}")
    for k1, b in itertools.product((0.9, 1.2, 1.5, 2.0), (0.4, 0.6, 0.9)):
        print(f"    k1 {k1} b {b}: {run(query_terms, k1, b):.4f}")
    print(f"    Lucene IDF: {run(query_terms, idf='lucene'):.4f}")
    for delta in (0.5, 1.0):
        print(f"    BM25+ delta {delta}: {run(query_terms, delta=delta):.4f}")
    lists: list[tuple[str, frozenset[str]]] = [("no stop list", frozenset())]
    try:  # not a dependency
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        lists.append(("scikit-learn's 318", ENGLISH_STOP_WORDS))
    except ImportError:
        print("    (scikit-learn not installed: its stop list skipped)")
    for label, stop in lists:
        terms = lambda t, s=stop: list(dict.fromkeys(w for w in words(t) if w not in s))  # noqa: E731
        print(f"    query stop words, {label}: {run(terms):.4f}")
    repeated = lambda t: [w for w in words(t) if w not in STOPWORDS]  # noqa: E731
    print(f"    repeated query words counted again: {run(repeated):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "bench" / "scifact")
    parser.add_argument("--split", choices=("test", "train"), default="train")
    parser.add_argument("--store", type=Path, default=Path("/tmp/kinject-fusion-lab"))
    parser.add_argument("--keyword", action="store_true", help="document-level BM25 variants only")
    parser.add_argument(
        "--rescore", action="store_true", help="round two: document-level rescoring variants only"
    )
    parser.add_argument(
        "--trees-on-test",
        action="store_true",
        help="report the trees fixed on train (TREES), fitted on train, on the test split",
    )
    parser.add_argument("--default-only", action="store_true", help="print the default line only")
    args = parser.parse_args()
    docs, queries, qrels = load(args.data, args.split)
    args.store.mkdir(parents=True, exist_ok=True)
    pickled = args.store / f"collected-{args.split}.pickle"
    if pickled.exists():
        data = pickle.loads(pickled.read_bytes())
    else:
        embeddings = DiskCachedEmbeddings(default_embeddings(), DEFAULT_MODEL_NAME, DEFAULT_CACHE)
        kb = open_store(docs, args.store / "default", embeddings)
        data = collect(kb, queries)
        kb.close()
        pickled.write_bytes(pickle.dumps(data))
    print(f"SciFact {args.split}: {len(data.queries)} queries, {len(data.chunk_ids)} chunks")

    def show(label: str, run) -> float:
        value = statistics.mean(ndcg_at_10(run(q), qrels[q]) for q in data.queries)
        print(f"  {label:58s} {value:.4f}", flush=True)
        return value

    lab = Lab(data, {} if args.default_only or args.keyword else document_vectors(data, args.data))
    show("default path: fuse_with_documents (hybrid nDCG@10)", lab.default)
    missed = [q for q in data.queries if ndcg_at_10(lab.default(q), qrels[q]) == 0]
    found = {q: {lab.parent[c] for c, _ in [*data.dense[q], *data.keyword[q]]} for q in missed}
    print(
        f"  queries at nDCG@10 0: {len(missed)}, {sum(not found[q] & qrels[q] for q in missed)}"
        " of them with no relevant document among either side's candidates"
    )
    if args.default_only:
        return
    if args.keyword:
        keyword_variants(data, qrels)
        return
    if args.rescore:
        from fusion_rescore import rescore_variants

        rescore_variants(lab, data, qrels)
        return
    if args.trees_on_test:
        from fusion_rescore import tree_inputs, trees_on_test

        if args.split != "test":
            parser.error("--trees-on-test reports on --split test")
        _, _, train_qrels = load(args.data, "train")
        train_data = pickle.loads((args.store / "collected-train.pickle").read_bytes())
        train_lab = Lab(train_data, document_vectors(train_data, args.data))
        trees_on_test(
            tree_inputs(train_lab, train_data, train_qrels), tree_inputs(lab, data, qrels)
        )
        return
    show(
        "dense alone (Chroma HNSW candidates)", lambda q: ranked_sources(data.dense[q], lab.parent)
    )
    show("dense alone, exact", lambda q: ranked_sources(lab.exact_dense(q), lab.parent))
    show("exact dense top 100", lambda q: lab.default(q, dense=lab.exact_dense(q)))
    show("exact cosine of every candidate document", lambda q: lab.blended(q, lab.exact_document))
    show("exact cosine of every candidate chunk and document", lab.exact_candidates)
    for name in ("lead", "title"):
        for how, g in (("max", 0), ("mix", 0.15), ("mix", 0.3), ("mix", 0.5), ("bonus", 0.5)):
            show(f"{name} vector, {how} {g}", lab.with_vector(name, how, g))
    for alpha, m in itertools.product((0.25, 0.5, 1.0), (3, 5, 10)):
        show(f"Rocchio alpha {alpha} top {m}", lambda q, a=alpha, n=m: lab.rocchio(q, a, n))
    for side, slope in itertools.product(("keyword", "dense"), (-0.1, -0.05, 0.05, 0.1, 0.2)):
        show(f"adaptive dense weight, {side} margin, slope {slope}", lab.adaptive(side, slope))
    grid = []
    for wd, wc, share in itertools.product(
        (0.65, 0.7, 0.75, 0.8), (0.6, 0.75, 0.9), (0.6, 0.75, 0.9, 1.0)
    ):
        run = lambda q, a=wd, b=wc, c=share: lab.blended(  # noqa: E731
            q,
            lambda _q, _s, best: best,
            document_dense_weight=a,
            chunk_dense_weight=b,
            document_weight=c,
        )
        grid.append(
            (statistics.mean(ndcg_at_10(run(q), qrels[q]) for q in data.queries), wd, wc, share)
        )
    grid.sort(reverse=True)
    print("  weights (document cosine, chunk cosine, document share), best five:")
    for value, wd, wc, share in grid[:5]:
        print(f"    {wd:.2f} {wc:.2f} {share:.2f}: {value:.4f}")


if __name__ == "__main__":
    main()
