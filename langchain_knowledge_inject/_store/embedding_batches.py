"""Batches of the default model sized in word pieces, not in texts.

On a CPU, encoding a batch of full-window chunks (about 256 word pieces each)
costs more per chunk the larger the batch: a batch of 32 holds 32 x 12 attention
maps of 256 x 256 floats per layer (about 100 MB) and the activations of its
feed-forward layers, far beyond the CPU caches, while a batch of 2 fits. Short
texts are the other way round: each call carries a fixed overhead that a large
batch spreads. Measured on SciFact chunks, one thread, process CPU time per
chunk against sentence-transformers' usual batches of 32: batches of 2 were
1.30x (torch), 1.39x (ONNX) and 1.73x (ONNX int8) cheaper
(``benchmarks/ingest.py``, ``benchmarks/embedding_speed.py``).

So the default model fills each batch up to a budget of padded word pieces,
:data:`DEFAULT_BATCH_TOKENS` on torch and :data:`ONNX_BATCH_TOKENS` on ONNX
Runtime: the texts are sorted by length (as sentence-transformers does), and a
batch takes texts while ``size x longest`` stays within the budget. On torch
full-window chunks go two at a time and 25-word-piece texts about twenty at a
time; on ONNX Runtime, one chunk and about ten short texts. The vectors are
the model's own: padding is masked, so a text's vector does not depend on its
batch (to float rounding, cosine 0.99999+).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_huggingface import HuggingFaceEmbeddings
from pydantic import Field

from langchain_knowledge_inject.errors import ConfigurationError

__all__ = [
    "DEFAULT_BATCH_TOKENS",
    "MAX_BATCH_TEXTS",
    "ONNX_BATCH_TOKENS",
    "TokenBatchedEmbeddings",
    "token_batches",
]

logger = logging.getLogger(__name__)

DEFAULT_BATCH_TOKENS = 512
"""Padded word pieces per batch of the default model on torch: two full-window chunks."""

ONNX_BATCH_TOKENS = 256
"""Padded word pieces per batch on ONNX Runtime: one full-window chunk.

Its per-call overhead is small, and one chunk per batch measured cheapest
(1.46x and 1.56x torch's CPU time at batches of 32, against 1.39x and 1.33x for
two chunks per batch, in two runs).
"""

MAX_BATCH_TEXTS = 64
"""Most texts in one batch, however short they are."""


def token_batches(
    lengths: Sequence[int], budget: int, *, max_texts: int = MAX_BATCH_TEXTS
) -> list[list[int]]:
    """Group text indices into batches of at most ``budget`` padded word pieces.

    The texts are taken longest first; a batch takes the next text while its
    size times its longest text (the padded length) stays within ``budget``
    and it holds fewer than ``max_texts``. A text longer than the budget goes
    alone.

    Args:
        lengths: Word pieces of each text.
        budget: Padded word pieces allowed in one batch (>= 1).
        max_texts: Most texts in one batch (>= 1).

    Returns:
        Lists of indices into ``lengths``, each index exactly once.

    Raises:
        ConfigurationError: ``budget`` or ``max_texts`` is below 1.
    """
    if budget < 1 or max_texts < 1:
        msg = f"batch budget and size must be at least 1; got {budget} and {max_texts}"
        raise ConfigurationError(msg, option="batch_tokens", value=budget)
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    longest = 0
    for index in order:
        batch = batches[-1] if batches else None
        if batch is not None and len(batch) < max_texts and (len(batch) + 1) * longest <= budget:
            batch.append(index)
            continue
        batches.append([index])
        longest = max(1, lengths[index])  # longest first: the batch's padded length
    return batches


class TokenBatchedEmbeddings(HuggingFaceEmbeddings):
    """``HuggingFaceEmbeddings`` whose ``embed_documents`` batches by word pieces.

    Attributes:
        batch_tokens: Padded word pieces per batch (see :func:`token_batches`).
    """

    batch_tokens: int = Field(default=DEFAULT_BATCH_TOKENS, ge=1)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed ``texts`` in batches of at most ``batch_tokens`` padded word pieces."""
        if len(texts) <= 1:
            return super().embed_documents(texts)
        vectors: list[list[float]] = [[] for _ in texts]
        for batch in token_batches(self.token_lengths(texts), self.batch_tokens):
            kwargs: dict[str, Any] = {**self.encode_kwargs, "batch_size": len(batch)}
            for index, vector in zip(
                batch, self._embed([texts[i] for i in batch], kwargs), strict=True
            ):
                vectors[index] = vector
        return vectors

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Word pieces the model reads of each text (special tokens in, its window at most)."""
        model = self._client
        try:
            encoded = model.tokenizer(
                [t.replace("\n", " ") for t in texts],
                truncation=True,
                max_length=model.max_seq_length,
            )["input_ids"]
            return [len(ids) for ids in encoded]
        except Exception as exc:  # a tokenizer without this call: about 4 characters a piece
            logger.debug("counting word pieces by characters (%s)", exc)
            return [len(t) // 4 + 2 for t in texts]
