"""Offline fakes shared by unit tests."""

from __future__ import annotations

import hashlib
import math
import re

from langchain_core.embeddings import Embeddings

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an and are at be by do for how i in is it my of on or the to what with".split())


class WordHashEmbedding(Embeddings):
    """A bag-of-words embedding: each word hashed into one of ``size`` dimensions.

    Deterministic and offline like ``DeterministicFakeEmbedding``, but the cosine
    of two texts reflects the words they share, so relevance thresholds behave
    as they do with a real model: unrelated texts score about 0.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = size

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self.size
        for word in _WORD.findall(text.lower()):
            if word in _STOP:
                continue
            stem = word[:-1] if word.endswith("s") and len(word) > 3 else word
            slot = int(hashlib.md5(stem.encode()).hexdigest(), 16) % self.size
            vector[slot] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)
