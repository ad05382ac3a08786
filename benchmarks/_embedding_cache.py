"""A disk cache of embeddings for benchmarks that embed the same corpus run after run.

Vectors are keyed by the model name and the SHA-256 of the text, in one SQLite
file (default ``/tmp/kinject-bench-cache/embeddings.sqlite3``), so a second run
of a benchmark spends no CPU on the encoder. The torch and ONNX backends of the
default model share entries: their vectors agree to cosine 0.9999999.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

DEFAULT_CACHE = Path("/tmp/kinject-bench-cache/embeddings.sqlite3")


class DiskCachedEmbeddings(Embeddings):
    """Wraps an ``Embeddings``; documents already embedded once are read from disk."""

    def __init__(self, inner: Embeddings, model_name: str, path: Path = DEFAULT_CACHE) -> None:
        self.inner = inner
        self.model_name = model_name  # what the knowledge base records
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, check_same_thread=False)  # a writer thread embeds too
        self.lock = threading.Lock()
        self.conn.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, v BLOB)")
        self.hits = self.misses = 0

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_name}\x00{text}".encode()).hexdigest()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self.lock:
            return self._embed(texts)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        keys = [self._key(t) for t in texts]
        found: dict[str, list[float]] = {}
        for start in range(0, len(keys), 500):
            batch = keys[start : start + 500]
            marks = ",".join("?" * len(batch))
            for key, blob in self.conn.execute(
                f"SELECT key, v FROM vectors WHERE key IN ({marks})", batch
            ):
                found[key] = np.frombuffer(blob, dtype=np.float32).tolist()
        missing = sorted({i for i, k in enumerate(keys) if k not in found})
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            vectors = self.inner.embed_documents([texts[i] for i in missing])
            rows = [
                (keys[i], np.asarray(v, dtype=np.float32).tobytes())
                for i, v in zip(missing, vectors, strict=True)
            ]
            self.conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)
            self.conn.commit()
            for (key, _), vector in zip(rows, vectors, strict=True):
                found[key] = list(vector)
        return [found[k] for k in keys]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]
