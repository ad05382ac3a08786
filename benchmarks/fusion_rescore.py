"""Round two of the fusion lab: every candidate abstract rescored, changed one part at a time.

Run through ``fusion_lab.py`` (``--rescore`` on train, ``--trees-on-test``
on test); its docstring lists the variants, ``retrieval_quality.py``'s the
train figures. An abstract scores ``0.75 * (0.75 * cosine + 0.25 * keyword)
+ 0.25 * its best fused chunk``, which ranks as ``fusion.fuse_with_documents``
does (the lab's default line is reproduced), so a variant changes one part.
Grids print each setting's train figure, on how many of :data:`FOLDS` fixed
query folds it beats the default, and a held-out figure (each fold scored
with the setting best on the others); learned fusions are trained on four
folds and scored on the fifth. scikit-learn (not a dependency) is needed for
the learned part only.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from dataclasses import dataclass

import numpy as np
from fusion_lab import Collected, Lab, ranked_sources
from retrieval_quality import ndcg_at_10

from langchain_knowledge_inject._store import fusion

FOLDS = 5


def folds_of(queries) -> list[list[str]]:
    """Train queries in ``FOLDS`` fixed folds (sorted ids dealt round-robin)."""
    ordered = sorted(queries, key=lambda q: (len(q), q))
    return [ordered[i::FOLDS] for i in range(FOLDS)]


def held_out(per_query: dict[object, dict[str, float]], folds: list[list[str]]) -> float:
    """Cross-validated figure of a grid: each fold scored with the setting best on the others."""
    values = []
    for i, fold in enumerate(folds):
        rest = [q for j, f in enumerate(folds) if j != i for q in f]
        choice = max(per_query, key=lambda p: statistics.mean(per_query[p][q] for q in rest))
        values.extend(per_query[choice][q] for q in fold)
    return statistics.mean(values)


def folds_won(per_query: dict[str, float], base: dict[str, float], folds: list[list[str]]) -> int:
    """On how many folds ``per_query``'s mean beats the default's (``base``)."""
    return sum(
        statistics.mean(per_query[q] for q in f) > statistics.mean(base[q] for q in f)
        for f in folds
    )


def held_out_line(held: dict[str, float], base: dict[str, float], folds: list[list[str]]) -> str:
    """``held-out X (+d, w/5 folds)`` of a learned model's per-query held-out figures."""
    value = statistics.mean(held.values())
    return (
        f"held-out {value:.4f} ({value - statistics.mean(base.values()):+.4f},"
        f" {folds_won(held, base, folds)}/{FOLDS} folds)"
    )


class Bm25:
    """BM25 over the document index's text, outside FTS5 (FTS5's IDF, k1 1.2, b 0.75)."""

    def __init__(self, data: Collected) -> None:
        from langchain_knowledge_inject._store.keyword_tokens import Fts5Tokenizer

        from langchain_knowledge_inject._store.keyword import STOPWORDS, TOKENIZER, query_terms

        self.query_terms = query_terms
        self.sources = sorted(data.documents)
        self.position = {s: i for i, s in enumerate(self.sources)}
        self.tokenizer = Fts5Tokenizer(TOKENIZER)
        self.docs = self.tokenizer.term_ids([data.documents[s] for s in self.sources])
        self.lengths = np.array([len(t) for t in self.docs], dtype=np.float64)
        self.norm = 1.2 * (0.25 + 0.75 * self.lengths / self.lengths.mean())
        self.counts: list[dict[int, int]] = []
        frequency: dict[int, int] = {}
        for ids in self.docs:
            terms, counts = np.unique(ids, return_counts=True)
            self.counts.append(dict(zip(terms.tolist(), counts.tolist(), strict=True)))
            for term in terms.tolist():
                frequency[term] = frequency.get(term, 0) + 1
        total = len(self.sources)
        self.idf = {
            t: max(math.log((total - n + 0.5) / (n + 0.5)), 1e-6) for t, n in frequency.items()
        }
        stop = [ids[0] for ids in self.tokenizer.lookup(sorted(STOPWORDS)) if len(ids) == 1]
        self.stop = set(stop)

    def score(self, weights: dict[int, float], sources: list[str]) -> np.ndarray:
        """Weighted BM25 of each source for the weighted query terms."""
        out = np.zeros(len(sources))
        for i, source in enumerate(sources):
            d = self.position[source]
            counts = self.counts[d]
            for term, w in weights.items():
                f = counts.get(term, 0)
                if f:
                    out[i] += w * self.idf[term] * f * 2.2 / (f + self.norm[d])
        return out

    def feedback(self, top: list[str], n_terms: int) -> dict[int, float]:
        """RM3-style feedback terms: mean term probability over the top documents, rarest kept."""
        mass: dict[int, float] = {}
        for source in top:
            d = self.position[source]
            for term, f in self.counts[d].items():
                if term in self.stop or term < 0:
                    continue
                mass[term] = mass.get(term, 0.0) + f / self.lengths[d] / len(top)
        ranked = sorted(mass.items(), key=lambda item: -item[1] * self.idf[item[0]])[:n_terms]
        total = sum(w for _, w in ranked) or 1.0
        return {t: w / total for t, w in ranked}


@dataclass
class Query:
    """One query's candidate documents and their parts of the default score, aligned."""

    docs: list[str]
    cosine: np.ndarray  # best cosine in the dense list (its floor when absent)
    in_dense: np.ndarray
    keyword: np.ndarray  # document-index BM25 relative to the best hit (0 when absent)
    chunk: np.ndarray  # best fused chunk score of the document (``fusion.fuse``)
    chunk_keyword: np.ndarray  # best chunk BM25 relative to the best chunk hit
    exact: list[np.ndarray]  # every chunk's exact cosine, per document: sorted, best first
    lead: np.ndarray


class Rescore:
    """Document-level rescoring: the default is ``0.75 * (0.75 cos + 0.25 kw) + 0.25 * chunk``."""

    def __init__(self, lab: Lab, qrels) -> None:
        self.lab, self.qrels = lab, qrels
        self.queries: dict[str, Query] = {q: self._query(q) for q in lab.data.queries}

    def _query(self, q: str) -> Query:
        lab, d = self.lab, self.lab.data
        chunk_scores = fusion.fuse(d.dense[q], d.keyword[q])
        docs = ranked_sources(chunk_scores, lab.parent)  # first chunk of each = its best
        chunk = {}
        for chunk_id, s in chunk_scores:
            chunk.setdefault(lab.parent[chunk_id], s)
        best: dict[str, float] = {}
        for chunk_id, cosine in d.dense[q]:
            source = lab.parent[chunk_id]
            best[source] = max(best.get(source, 0.0), cosine)
        floor = min(best.values(), default=0.0)
        whole = dict(fusion.keyword_unit_scores(d.document_hits[q]))
        chunk_kw: dict[str, float] = {}
        for chunk_id, s in fusion.keyword_unit_scores(d.keyword[q]):
            chunk_kw.setdefault(lab.parent[chunk_id], s)
        cos = lab.cosines(q)
        lead = lab.doc_vectors.get("lead")
        return Query(
            docs=docs,
            cosine=np.array([best.get(s, floor) for s in docs]),
            in_dense=np.array([s in best for s in docs]),
            keyword=np.array([whole.get(s, 0.0) for s in docs]),
            chunk=np.array([chunk[s] for s in docs]),
            chunk_keyword=np.array([chunk_kw.get(s, 0.0) for s in docs]),
            exact=[np.sort(cos[lab.doc_rows[s]])[::-1] for s in docs],
            lead=np.array(
                [float(lead[lab.doc_position[s]] @ lab.query_vectors[q]) for s in docs]
                if lead is not None
                else np.zeros(len(docs))
            ),
        )

    def ndcg(self, q: str, scores: np.ndarray) -> float:
        docs = self.queries[q].docs
        order = np.argsort(-scores, kind="stable")[:10]
        return ndcg_at_10([docs[i] for i in order], self.qrels[q])

    def per_query(self, scorer) -> dict[str, float]:
        return {q: self.ndcg(q, scorer(q, v)) for q, v in self.queries.items()}


def default_score(v: Query, cosine=None, keyword=None, chunk=None, w=0.75, share=0.75):
    cosine = v.cosine if cosine is None else cosine
    keyword = v.keyword if keyword is None else keyword
    chunk = v.chunk if chunk is None else chunk
    return share * (w * cosine + (1 - w) * keyword) + (1 - share) * chunk


def normalise(x: np.ndarray, how: str) -> np.ndarray:
    if how == "minmax":
        span = x.max() - x.min()
        return (x - x.min()) / span if span > 0 else np.zeros_like(x)
    sd = x.std()
    if sd == 0:
        return np.zeros_like(x)
    if how == "z":
        return (x - x.mean()) / sd
    return np.clip((x - x.mean() + 3 * sd) / (6 * sd), 0.0, 1.0)  # "dbsf"


def ranks(x: np.ndarray, present: np.ndarray) -> np.ndarray:
    """1-based rank by descending ``x`` among the present entries; inf for the others."""
    out = np.full(len(x), np.inf)
    idx = np.flatnonzero(present)
    out[idx[np.argsort(-x[idx], kind="stable")]] = np.arange(1, idx.size + 1)
    return out


def rescore_variants(lab: Lab, data: Collected, qrels) -> None:
    """Round two: normalisation, rank terms, keyword feedback, chunk pooling, agreement, learned."""
    start = time.perf_counter()
    rs = Rescore(lab, qrels)
    folds = folds_of(data.queries)
    base = rs.per_query(lambda q, v: default_score(v))
    base_mean = statistics.mean(base.values())
    fold_means = [statistics.mean(base[q] for q in f) for f in folds]
    print(f"  (rescoring inputs built in {time.perf_counter() - start:.0f}s)")
    print(
        f"  default, rescored per document: {base_mean:.4f}"
        f" (folds {' '.join(f'{m:.4f}' for m in fold_means)})"
    )

    def grid(label: str, settings: dict[object, object]) -> None:
        """Each setting's train figure, then the grid's held-out (5-fold) figure."""
        per = {}
        for key, scorer in settings.items():
            per[key] = rs.per_query(scorer)
        best = max(per, key=lambda k: statistics.mean(per[k].values()))
        for key in per:
            value = statistics.mean(per[key].values())
            wins = folds_won(per[key], base, folds)
            mark = " <" if key == best else ""
            print(
                f"    {label} {key}: {value:.4f} ({value - base_mean:+.4f}, beats default"
                f" on {wins}/{FOLDS} folds){mark}",
                flush=True,
            )
        print(
            f"    {label}: held-out {held_out(per, folds):.4f} (default {base_mean:.4f})",
            flush=True,
        )

    # 1. per-query normalisation of each part before the convex blend
    print("  1. per-query score normalisation (cosine, document keyword, chunk part):")
    for how in ("minmax", "z", "dbsf"):
        settings = {}
        for w, share in itertools.product((0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8), (0.75, 1.0)):
            settings[(w, share)] = lambda q, v, h=how, a=w, s=share: default_score(
                v, normalise(v.cosine, h), normalise(v.keyword, h), normalise(v.chunk, h), a, s
            )
        grid(f"{how} (w, share)", settings)
    print("  1a. document keyword as a share of the query's best possible BM25 (outside FTS5):")
    bm25 = Bm25(data)
    absolute = {}
    for q, v in rs.queries.items():
        weights = {}
        for stems in bm25.tokenizer.lookup(bm25.query_terms(data.queries[q])):
            if len(stems) == 1 and stems[0] in bm25.idf:
                weights[stems[0]] = 1.0
        ceiling = sum(bm25.idf[t] * 2.2 for t in weights) or 1.0
        absolute[q] = bm25.score(weights, v.docs) / ceiling
    grid(
        "BM25 / ceiling, w",
        {
            w: lambda q, v, a=w: default_score(v, keyword=absolute[q], w=a)
            for w in (0.4, 0.5, 0.6, 0.7, 0.75, 0.8)
        },
    )
    grid(
        "BM25 relative to the best, outside FTS5, w",
        {
            w: lambda q, v, a=w: default_score(
                v, keyword=absolute[q] / max(absolute[q].max(), 1e-9), w=a
            )
            for w in (0.7, 0.75, 0.8)
        },
    )
    # rank terms
    print(
        "  1b. reciprocal-rank term added to the default score, c * (1/(k+r_dense) + 1/(k+r_kw)):"
    )
    settings = {}
    for k, c in itertools.product((10, 60), (0.25, 0.5, 1.0, 2.0, 4.0)):

        def rrf_scorer(q, v, k=k, c=c):
            term = 1 / (k + ranks(v.cosine, v.in_dense)) + 1 / (k + ranks(v.keyword, v.keyword > 0))
            return default_score(v) + c * term

        settings[(k, c)] = rrf_scorer
    grid("RRF (k, c)", settings)
    for side in ("dense", "keyword", "chunk"):
        settings = {}
        for k, c in itertools.product((0, 1, 3, 10), (0.005, 0.01, 0.02, 0.04)):

            def one_side(q, v, k=k, c=c, side=side):
                if side == "dense":
                    r = ranks(v.cosine, v.in_dense)
                elif side == "keyword":
                    r = ranks(v.keyword, v.keyword > 0)
                else:
                    r = ranks(v.chunk, np.ones(len(v.docs), dtype=bool))
                return default_score(v) + c / (k + r)

            settings[(k, c)] = one_side
        grid(f"{side} rank alone, c / (k + rank) (k, c)", settings)

    # 2. keyword feedback (RM3-style) on the document-level BM25
    print("  2. RM3-style keyword feedback on the document BM25 (top m default documents):")
    default_order = {
        q: [v.docs[i] for i in np.argsort(-default_score(v), kind="stable")]
        for q, v in rs.queries.items()
    }
    expansion: dict[tuple[int, int], dict[str, np.ndarray]] = {}
    for m, n_terms in itertools.product((3, 5, 10), (10, 25)):
        table = {}
        for q, v in rs.queries.items():
            scores = bm25.score(bm25.feedback(default_order[q][:m], n_terms), v.docs)
            table[q] = scores / scores.max() if scores.max() > 0 else scores
        expansion[(m, n_terms)] = table
    settings = {}
    for (m, n_terms), lam in itertools.product(expansion, (0.1, 0.2, 0.35)):
        settings[(m, n_terms, lam)] = lambda q, v, e=expansion[(m, n_terms)], lam=lam: (
            default_score(v, keyword=(1 - lam) * v.keyword + lam * e[q])
        )
    grid("RM3 (m, terms, lambda)", settings)

    print("  2b. the lead vector (as the better of it and the best chunk) with RM3 and BM25:")
    lead_max = {q: np.maximum(v.cosine, v.lead) for q, v in rs.queries.items()}
    plain = {}  # BM25 of the query's terms outside FTS5, relative to the best (1a)
    for q, v in rs.queries.items():
        weights = {
            stems[0]: 1.0
            for stems in bm25.tokenizer.lookup(bm25.query_terms(data.queries[q]))
            if len(stems) == 1 and stems[0] in bm25.idf
        }
        scores = bm25.score(weights, v.docs)
        plain[q] = scores / max(scores.max(), 1e-9)
    settings = {}
    for lead, rm3, keyword, w in itertools.product(
        (False, True), (None, (3, 25, 0.35), (3, 10, 0.35)), ("fts5", "plain"), (0.75, 0.8)
    ):

        def combined(q, v, lead=lead, rm3=rm3, keyword=keyword, w=w):
            kw = v.keyword if keyword == "fts5" else plain[q]
            if rm3 is not None:
                kw = (1 - rm3[2]) * kw + rm3[2] * expansion[rm3[:2]][q]
            return default_score(v, cosine=lead_max[q] if lead else None, keyword=kw, w=w)

        settings[(lead, rm3, keyword, w)] = combined
    grid("combined (lead max, RM3, keyword BM25, w)", settings)

    # 3. dense pooling over an abstract's chunks (exact cosines)
    print("  3. dense pooling over each abstract's chunks (exact cosines):")
    exact_best = {q: np.array([e[0] for e in v.exact]) for q, v in rs.queries.items()}
    second = {
        q: np.array([e[1] if e.size > 1 else 0.0 for e in v.exact]) for q, v in rs.queries.items()
    }
    grid("exact best chunk", {"": lambda q, v: default_score(v, cosine=exact_best[q])})
    grid(
        "best + f * second (f)",
        {
            f: lambda q, v, f=f: default_score(v, cosine=v.cosine + f * second[q])
            for f in (0.05, 0.1, 0.2, 0.3)
        },
    )
    grid(
        "(1-f) best + f second, second = best if one chunk (f)",
        {
            f: lambda q, v, f=f: default_score(
                v, cosine=(1 - f) * v.cosine + f * np.where(second[q] > 0, second[q], v.cosine)
            )
            for f in (0.1, 0.2, 0.3)
        },
    )
    for pool in ("mean", "sum"):
        settings = {}
        for tau in (0.01, 0.02, 0.05, 0.1):

            def lse(q, v, tau=tau, pool=pool):
                values = []
                for e in v.exact:
                    top = e[0]
                    s = np.log(np.exp((e - top) / tau).sum() / (e.size if pool == "mean" else 1))
                    values.append(top + tau * s)
                return default_score(v, cosine=np.array(values))

            settings[tau] = lse
        grid(f"log-sum-exp over chunks, {pool} (tau)", settings)

    # 4. agreement between the sides
    print("  4. bonus b for an abstract in both the dense and the keyword top n:")
    settings = {}
    for n, b in itertools.product((5, 10, 20), (0.01, 0.02, 0.04)):

        def agree(q, v, n=n, b=b):
            both = (ranks(v.cosine, v.in_dense) <= n) & (ranks(v.keyword, v.keyword > 0) <= n)
            return default_score(v) + b * both

        settings[(n, b)] = agree
    grid("agreement (n, b)", settings)

    # 5. learned linear fusion, 5-fold cross-validated by query
    print("  5. logistic regression over per-abstract features, 5-fold by query (held-out figure):")
    learned(rs, folds, base, expansion)


def features(v: Query, rm3: np.ndarray) -> np.ndarray:
    r_dense = ranks(v.cosine, v.in_dense)
    r_kw = ranks(v.keyword, v.keyword > 0)
    second = np.array([e[1] if e.size > 1 else 0.0 for e in v.exact])
    return np.column_stack(
        [
            v.cosine,
            v.keyword,
            v.chunk,
            v.chunk_keyword,
            second,
            v.lead,
            rm3,
            normalise(v.cosine, "z"),
            normalise(v.keyword, "z"),
            1 / (60 + r_dense),
            1 / (60 + r_kw),
            np.log1p(np.minimum(r_dense, 200)),
            np.log1p(np.minimum(r_kw, 200)),
            default_score(v),
        ]
    )


TREES = {"max_leaf_nodes": 15, "early_stopping": False}
"""The trees' settings reported on test (``--trees-on-test``), fixed on train."""


def tree_inputs(lab: Lab, data: Collected, qrels):
    """Each query's 14 features and relevance labels, RM3 from the top 5 with 25 terms."""
    rs = Rescore(lab, qrels)
    bm25 = Bm25(data)
    table, labels = {}, {}
    for q, v in rs.queries.items():
        top = [v.docs[i] for i in np.argsort(-default_score(v), kind="stable")[:5]]
        rm3 = bm25.score(bm25.feedback(top, 25), v.docs)
        table[q] = features(v, rm3 / rm3.max() if rm3.max() > 0 else rm3)
        labels[q] = np.array([s in qrels[q] for s in v.docs])
    return rs, table, labels


def trees_on_test(train: tuple, test: tuple) -> None:
    """Trees with :data:`TREES`, fitted on every train query, scored on the test queries."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    _, train_table, train_labels = train
    rs, table, _ = test
    base = statistics.mean(rs.per_query(lambda q, v: default_score(v)).values())
    print(f"  default, rescored per document: {base:.4f}")
    for label, cols in (
        ("all 14 features", list(range(14))),
        ("at search time (no 2nd cos, lead cos, rm3)", [0, 1, 2, 3, 7, 8, 9, 10, 11, 12, 13]),
    ):
        model = HistGradientBoostingClassifier(
            **{"max_iter": 200, "learning_rate": 0.05, "random_state": 0, **TREES}
        )
        model.fit(
            np.vstack([t[:, cols] for t in train_table.values()]),
            np.concatenate(list(train_labels.values())),
        )
        scores = {
            q: rs.ndcg(
                q,
                model.predict_proba(table[q][:, cols])[:, 1] + 1e-6 * default_score(v),
            )
            for q, v in rs.queries.items()
        }
        value = statistics.mean(scores.values())
        print(f"  gradient-boosted trees {TREES}, {label}: {value:.4f} ({value - base:+.4f})")


def learned(rs: Rescore, folds, base, expansion) -> None:
    try:  # not a dependency
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler
    except ImportError:
        print("    (scikit-learn not installed: skipped)")
        return
    rm3 = expansion[(5, 25)]
    table = {q: features(v, rm3[q]) for q, v in rs.queries.items()}
    labels = {q: np.array([s in rs.qrels[q] for s in v.docs]) for q, v in rs.queries.items()}
    subsets = {
        "cos, kw, chunk": [0, 1, 2],
        "+ chunk kw, 2nd cos, lead cos": [0, 1, 2, 3, 4, 5],
        "+ z-scores, rank terms, rm3": list(range(13)),
        "all, with the default score": list(range(14)),
    }
    for label, cols in subsets.items():
        for c_reg in (0.1, 1.0):
            held = {}
            for i, fold in enumerate(folds):
                rest = [q for j, f in enumerate(folds) if j != i for q in f]
                x = np.vstack([table[q][:, cols] for q in rest])
                y = np.concatenate([labels[q] for q in rest])
                scaler = StandardScaler().fit(x)
                model = LogisticRegression(C=c_reg, max_iter=1000).fit(scaler.transform(x), y)
                for q in fold:
                    held[q] = rs.ndcg(
                        q, model.decision_function(scaler.transform(table[q][:, cols]))
                    )
            print(f"    {label} (C {c_reg}): {held_out_line(held, base, folds)}", flush=True)
    print("    pairwise (each relevant abstract against each other in the default top 30):")
    for label, cols in subsets.items():
        for c_reg in (0.01, 1.0):
            held = {}
            for i, fold in enumerate(folds):
                rest = [q for j, f in enumerate(folds) if j != i for q in f]
                scaler = StandardScaler().fit(np.vstack([table[q][:, cols] for q in rest]))
                diffs = []
                for q in rest:
                    x = scaler.transform(table[q][:, cols])
                    top = np.argsort(-default_score(rs.queries[q]), kind="stable")[:30]
                    good = [i for i in top if labels[q][i]]
                    bad = [i for i in top if not labels[q][i]]
                    diffs.extend(x[g] - x[b] for g in good for b in bad)
                d = np.array(diffs)
                model = LogisticRegression(C=c_reg, fit_intercept=False, max_iter=1000).fit(
                    np.vstack([d, -d]), np.concatenate([np.ones(len(d)), np.zeros(len(d))])
                )
                for q in fold:
                    held[q] = rs.ndcg(
                        q, model.decision_function(scaler.transform(table[q][:, cols]))
                    )
            print(
                f"    pairwise {label} (C {c_reg}): {held_out_line(held, base, folds)}",
                flush=True,
            )
    from sklearn.ensemble import HistGradientBoostingClassifier

    trees = {  # "at search time": what hybrid search has without new vectors or a second pass
        "all": list(range(14)),
        "at search time (no 2nd cos, lead cos, rm3)": [0, 1, 2, 3, 7, 8, 9, 10, 11, 12, 13],
        "cos, kw, chunk and the rank terms": [0, 1, 2, 9, 10, 11, 12],
    }
    runs = [
        (label, cols, {"max_leaf_nodes": leaves})
        for label, cols in trees.items()
        for leaves in (7, 15)
    ]
    runs += [  # how much the figure moves with the settings
        ("all", trees["all"], {"max_leaf_nodes": 15, **other})
        for other in (
            {"random_state": 1},
            {"random_state": 2},
            {"early_stopping": False},
            {"learning_rate": 0.1},
        )
    ]
    runs.append(("all", trees["all"], {"max_leaf_nodes": 31}))
    search_time = "at search time (no 2nd cos, lead cos, rm3)"
    runs.append((search_time, trees[search_time], TREES))
    for label, cols, settings in runs:
        held = {}
        for i, fold in enumerate(folds):
            rest = [q for j, f in enumerate(folds) if j != i for q in f]
            model = HistGradientBoostingClassifier(
                **{"max_iter": 200, "learning_rate": 0.05, "random_state": 0, **settings}
            )
            model.fit(
                np.vstack([table[q][:, cols] for q in rest]),
                np.concatenate([labels[q] for q in rest]),
            )
            for q in fold:  # ties (trees score in steps) broken by the default score
                tie = 1e-6 * default_score(rs.queries[q])
                held[q] = rs.ndcg(q, model.predict_proba(table[q][:, cols])[:, 1] + tie)
        print(
            f"    gradient-boosted trees (pointwise, {settings}), {label}:"
            f" {held_out_line(held, base, folds)}",
            flush=True,
        )
