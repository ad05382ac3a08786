"""Batches of the default model sized in word pieces (pure grouping, and a fake model)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from langchain_knowledge_inject import ConfigurationError
from langchain_knowledge_inject._store.embedding_batches import (
    DEFAULT_BATCH_TOKENS,
    ONNX_BATCH_TOKENS,
    TokenBatchedEmbeddings,
    token_batches,
)


def _padded(batch: list[int], lengths: list[int]) -> int:
    return len(batch) * max(lengths[i] for i in batch)


@pytest.mark.parametrize(
    "lengths",
    [
        [256, 250, 240, 256, 12, 30, 7, 7, 7],
        [25] * 100,
        [600, 3, 256],
        list(range(1, 300, 7)),
    ],
)
def test_every_text_once_and_each_batch_within_the_budget(lengths: list[int]) -> None:
    batches = token_batches(lengths, 512)

    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) == 1 or _padded(batch, lengths) <= 512
        assert len(batch) <= 64


def test_full_window_chunks_go_two_at_a_time_and_short_texts_fill_the_budget() -> None:
    assert [len(b) for b in token_batches([256] * 5, 512)] == [2, 2, 1]
    assert [len(b) for b in token_batches([25] * 50, 512)] == [20, 20, 10]


def test_texts_are_taken_longest_first() -> None:
    lengths = [10, 256, 40, 200]

    assert token_batches(lengths, 512) == [[1, 3], [2, 0]]


def test_a_text_longer_than_the_budget_goes_alone() -> None:
    assert token_batches([900, 10, 10], 512) == [[0], [1, 2]]


def test_max_texts_caps_a_batch_of_tiny_texts() -> None:
    assert [len(b) for b in token_batches([1] * 10, 512, max_texts=4)] == [4, 4, 2]


def test_no_texts_no_batches() -> None:
    assert token_batches([], 512) == []


@pytest.mark.parametrize(("budget", "max_texts"), [(0, 64), (512, 0), (-5, 1)])
def test_a_budget_below_one_is_a_configuration_error(budget: int, max_texts: int) -> None:
    with pytest.raises(ConfigurationError, match="at least 1"):
        token_batches([10], budget, max_texts=max_texts)


class FakeTokenizer:
    """Whitespace 'word pieces' plus [CLS]/[SEP], truncated like a real tokenizer."""

    def __call__(self, texts: list[str], *, truncation: bool, max_length: int) -> dict[str, Any]:
        ids = [[0] * min(len(t.split()) + 2, max_length if truncation else 10**9) for t in texts]
        return {"input_ids": ids}


class FakeSentenceModel:
    """Stands in for SentenceTransformer: records batches, vectors from the text alone."""

    max_seq_length = 16

    def __init__(self) -> None:
        self.tokenizer = FakeTokenizer()
        self.calls: list[tuple[list[str], int]] = []

    def encode(self, texts: list[str], *, batch_size: int, **kwargs: Any) -> np.ndarray:
        self.calls.append((list(texts), batch_size))
        return np.array([[float(len(t)), float(t.count("x")), 1.0] for t in texts])


def _fake_embeddings(batch_tokens: int = 24) -> tuple[TokenBatchedEmbeddings, FakeSentenceModel]:
    model = FakeSentenceModel()
    emb = TokenBatchedEmbeddings.model_construct(
        encode_kwargs={"normalize_embeddings": True, "batch_size": 32},
        multi_process=False,
        show_progress=False,
        batch_tokens=batch_tokens,
    )
    emb._client = model
    return emb, model


def test_embed_documents_calls_the_model_per_batch_and_keeps_the_input_order() -> None:
    emb, model = _fake_embeddings(batch_tokens=24)
    texts = ["a b c d e f g h i j", "x", "x x\nx", "b " * 30, "c c c"]

    vectors = emb.embed_documents(texts)

    flat = [t.replace("\n", " ") for t in texts]
    assert vectors == [[float(len(t)), float(t.count("x")), 1.0] for t in flat]
    seen = [text for batch, _ in model.calls for text in batch]
    assert sorted(seen) == sorted(flat)  # every text embedded once
    for batch, size in model.calls:
        assert size == len(batch)  # one model call per batch, batch_size set to it
        lengths = [min(len(t.split()) + 2, 16) for t in batch]
        assert len(batch) == 1 or len(batch) * max(lengths) <= 24
    assert len(model.calls) > 1


def test_one_text_goes_straight_to_the_model_with_its_usual_batch_size() -> None:
    emb, model = _fake_embeddings()

    assert emb.embed_documents(["only"]) == [[4.0, 0.0, 1.0]]
    assert model.calls == [(["only"], 32)]


def test_token_lengths_fall_back_to_characters_without_a_tokenizer_call() -> None:
    emb, model = _fake_embeddings()
    model.tokenizer = object()  # type: ignore[assignment]

    assert emb.token_lengths(["x" * 40, ""]) == [12, 2]


def test_budgets_two_full_windows_on_torch_and_one_on_onnx() -> None:
    assert DEFAULT_BATCH_TOKENS == 2 * 256
    assert ONNX_BATCH_TOKENS == 256
    assert [len(b) for b in token_batches([256, 256, 30, 30], ONNX_BATCH_TOKENS)] == [1, 1, 2]
