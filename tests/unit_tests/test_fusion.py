import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_knowledge_inject._store.fusion import (
    CANDIDATE_DEPTH,
    DEFAULT_MIN_SCORE,
    DENSE_WEIGHT,
    dense_score,
    fuse,
    group_by_document,
    keyword_unit_scores,
    merge_chunks,
)
from tests.unit_tests.fakes import ranked_hits

ids = st.sampled_from([f"c{i}" for i in range(12)])
dense_lists = ranked_hits(ids, low=0, high=1, max_size=12)
keyword_lists = ranked_hits(ids, low=0.01, high=1e4, max_size=12)


def test_constants_are_sane():
    assert isinstance(CANDIDATE_DEPTH, int)
    assert CANDIDATE_DEPTH >= 10
    assert 0 < DEFAULT_MIN_SCORE < 1
    assert 0 < DENSE_WEIGHT < 1


@pytest.mark.parametrize(
    ("distance", "score"), [(0.0, 1.0), (0.25, 0.75), (1.0, 0.0), (1.7, 0.0), (-1e-7, 1.0)]
)
def test_dense_score_is_the_clipped_cosine(distance, score):
    assert dense_score(distance) == pytest.approx(score)


def test_keyword_unit_scores_are_relative_to_the_best_hit():
    hits = [("a", 40.0), ("b", 10.0), ("c", 1.0), ("d", 0.0), ("e", -3.0)]
    assert keyword_unit_scores(hits) == [("a", 1.0), ("b", 0.25), ("c", 0.025)]
    # Tiny BM25 scores (FTS5 floors common words in small corpora) still rank.
    assert keyword_unit_scores([("x", 2e-6), ("y", 1e-6)]) == [("x", 1.0), ("y", 0.5)]
    assert keyword_unit_scores([]) == []


def test_keyword_unit_scores_sort_and_deduplicate():
    assert keyword_unit_scores([("b", 1.0), ("a", 4.0), ("b", 3.0)]) == [("a", 1.0), ("b", 0.25)]


def test_fuse_empty_inputs():
    assert fuse([], []) == []
    assert fuse([("a", 0.5)], []) == [("a", pytest.approx(DENSE_WEIGHT * 0.5))]
    assert fuse([], [("a", 3.0)]) == [("a", pytest.approx(1 - DENSE_WEIGHT))]


def test_fuse_agreement_beats_a_single_side():
    dense = [("both", 0.7), ("dense-only", 0.7)]
    keyword = [("both", 10.0), ("keyword-only", 10.0)]
    ranked = [c for c, _ in fuse(dense, keyword)]
    assert ranked[0] == "both"
    assert set(ranked) == {"both", "dense-only", "keyword-only"}


def test_keyword_only_chunk_gets_the_lowest_dense_cosine():
    fused = dict(fuse([("a", 0.9), ("b", 0.4)], [("c", 5.0)]))
    assert fused["c"] == pytest.approx(DENSE_WEIGHT * 0.4 + (1 - DENSE_WEIGHT) * 1.0)
    assert fused["b"] == pytest.approx(DENSE_WEIGHT * 0.4)


def test_extreme_weights_reproduce_each_side():
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    keyword = [("c", 30.0), ("b", 20.0), ("a", 10.0)]
    assert [c for c, _ in fuse(dense, keyword, dense_weight=1.0)] == ["a", "b", "c"]
    assert [c for c, _ in fuse(dense, keyword, dense_weight=0.0)] == ["c", "b", "a"]


def test_ties_keep_dense_order():
    dense = [("x", 0.5), ("y", 0.5)]
    assert [c for c, _ in fuse(dense, [])] == ["x", "y"]


def test_duplicates_in_an_input_count_once():
    fused = fuse([("a", 0.8), ("a", 0.1)], [("a", 4.0), ("a", 1.0)])
    assert fused == [("a", pytest.approx(DENSE_WEIGHT * 0.8 + 1 - DENSE_WEIGHT))]


@given(dense_lists, keyword_lists, st.floats(0, 1))
def test_fused_scores_are_bounded_sorted_and_cover_the_union(dense, keyword, weight):
    fused = fuse(dense, keyword, dense_weight=weight)
    scores = [s for _, s in fused]
    assert all(0 <= s <= 1 + 1e-12 and not math.isnan(s) for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert [c for c, _ in fused] == list(dict.fromkeys(c for c, _ in fused))
    assert {c for c, _ in fused} == {c for c, _ in dense} | {c for c, _ in keyword}


@given(dense_lists, keyword_lists)
def test_raising_a_keyword_score_never_lowers_a_chunk(dense, keyword):
    if not keyword:
        return
    before = dict(fuse(dense, keyword))
    boosted = [(c, s * 2 if i == len(keyword) - 1 else s) for i, (c, s) in enumerate(keyword)]
    boosted.sort(key=lambda h: -h[1])
    target = keyword[-1][0]
    after = dict(fuse(dense, boosted))
    others = [c for c in before if c != target]
    # The boosted chunk's score never falls relative to any other chunk.
    for other in others:
        assert after[target] - after[other] >= before[target] - before[other] - 1e-9


def _chunk(cid: str, index: int, text: str, source: str = "leave.md") -> Document:
    return Document(
        text, id=cid, metadata={"chunk_id": cid, "chunk_index": index, "source": source}
    )


def test_group_by_document_keeps_the_first_k_documents_at_their_best_chunk():
    ranked = [("a2", 0.9), ("b1", 0.8), ("a1", 0.7), ("c1", 0.6), ("b2", 0.5), ("a3", 0.4)]
    parents = {"a1": "A", "a2": "A", "a3": "A", "b1": "B", "b2": "B", "c1": "C"}
    assert group_by_document(ranked, parents, 2, max_chunks=2) == [
        (0.9, ["a2", "a1"]),
        (0.8, ["b1", "b2"]),
    ]
    assert group_by_document(ranked, parents, 5, max_chunks=1) == [
        (0.9, ["a2"]),
        (0.8, ["b1"]),
        (0.6, ["c1"]),
    ]
    # Chunks without a source are documents of their own; repeated ids count once.
    assert group_by_document([("x", 0.5), ("y", 0.4), ("x", 0.3)], {"y": ""}, 5) == [
        (0.5, ["x"]),
        (0.4, ["y"]),
    ]
    assert group_by_document([], parents, 3) == []


@given(dense_lists, st.dictionaries(ids, st.sampled_from("ABC"), max_size=12), st.integers(1, 5))
def test_grouping_returns_distinct_documents_best_first(ranked, parents, k):
    groups = group_by_document(ranked, parents, k, max_chunks=2)
    assert len(groups) <= k
    documents = [parents.get(ids[0]) or ids[0] for _, ids in groups]
    assert len(set(documents)) == len(documents)
    assert [s for s, _ in groups] == sorted((s for s, _ in groups), reverse=True)
    assert all(1 <= len(ids) <= 2 for _, ids in groups)
    # every group is led by its document's best chunk in the ranking
    first = {}
    for cid, score in ranked:
        first.setdefault(parents.get(cid) or cid, (cid, score))
    for score, chunk_ids in groups:
        assert first[parents.get(chunk_ids[0]) or chunk_ids[0]] == (chunk_ids[0], score)


def test_merge_chunks_puts_chunks_in_document_order_and_says_the_overlap_once():
    first = _chunk("a", 0, "Parental leave lasts sixteen weeks at full pay.")
    second = _chunk("b", 1, "weeks at full pay. Either parent may take it.")
    later = _chunk("d", 3, "Unused weeks lapse after a year.")
    merged = merge_chunks([second, later, first], 0.8)
    assert merged.page_content == (
        "Parental leave lasts sixteen weeks at full pay. Either parent may take it."
        "\n[...]\nUnused weeks lapse after a year."
    )
    assert merged.metadata["chunk_ids"] == ["a", "b", "d"]
    assert merged.metadata["chunk_id"] == "b"  # the best chunk's metadata
    assert merged.id == "b"
    assert merged.metadata["score"] == 0.8
    assert merged.metadata["source"] == "leave.md"


def test_merge_chunks_without_overlap_or_index_loses_no_text():
    one = _chunk("a", 0, "Leave is sixteen weeks.")
    two = _chunk("b", 1, "Requests go to HR.")
    merged = merge_chunks([one, two], 0.5).page_content
    assert merged == "Leave is sixteen weeks.\nRequests go to HR."
    # a shared run shorter than MIN_OVERLAP is no overlap
    three = _chunk("c", 1, "weeks. HR answers.")
    merged = merge_chunks([one, three], 0.5).page_content
    assert merged == "Leave is sixteen weeks.\nweeks. HR answers."
    # a heading that opens the next chunk keeps its own line
    heading = _chunk("d", 1, "## Pay\nPay is full.")
    assert merge_chunks([one, heading], 0.5).page_content.splitlines()[1] == "## Pay"
    plain = Document("Only text.", id="z", metadata={"chunk_id": "z"})
    merged = merge_chunks([plain], 0.3)
    assert merged.page_content == "Only text."
    assert merged.metadata == {"chunk_id": "z", "score": 0.3, "chunk_ids": ["z"]}
