"""The real default model batches by word pieces and gives the vectors of batches of 32."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.documents import Document

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._ingest.sample_data import SAMPLE_DOCUMENTS
from langchain_knowledge_inject._store.embedding_batches import (
    DEFAULT_BATCH_TOKENS,
    ONNX_BATCH_TOKENS,
    TokenBatchedEmbeddings,
)

pytestmark = pytest.mark.integration

# long paragraphs: the default splitter turns them into chunks near the model's window
_CLAUSE = "Clause {n}: staff on {kind} leave keep their pay for {weeks} weeks."
_LONG = [
    " ".join(_CLAUSE.format(n=n, kind=kind, weeks=n + 2) for n in range(40))
    for kind in ("annual", "parental", "sick")
]


def _texts() -> list[str]:
    short = [d.page_content for d in SAMPLE_DOCUMENTS]
    return [*short, *_LONG, "How many days of annual leave do I get?", "a\nb"]


def _check(model: TokenBatchedEmbeddings) -> None:
    texts = _texts()
    lengths = model.token_lengths(texts)
    assert max(lengths) == model._client.max_seq_length  # the long texts fill the window
    ours = np.asarray(model.embed_documents(texts))
    usual = model._client.encode(
        [t.replace("\n", " ") for t in texts], batch_size=32, normalize_embeddings=True
    )
    cosines = np.sum(ours * usual, axis=1)
    assert ours.shape == (len(texts), 384)
    assert float(cosines.min()) > 0.99999  # the batch does not change a text's vector


def test_torch_backend_batches_by_word_pieces_with_the_same_vectors() -> None:
    from langchain_knowledge_inject._store.embeddings import default_embeddings

    model = default_embeddings(backend="torch")
    assert isinstance(model, TokenBatchedEmbeddings)
    assert model.batch_tokens == DEFAULT_BATCH_TOKENS
    _check(model)


def test_onnx_backend_batches_by_word_pieces_with_the_same_vectors(tmp_path) -> None:
    pytest.importorskip("optimum.onnxruntime", reason="the 'onnx' extra is not installed")
    from langchain_knowledge_inject._store.embeddings import default_embeddings

    model = default_embeddings(backend="onnx", cache_dir=tmp_path)
    assert isinstance(model, TokenBatchedEmbeddings)
    assert model.batch_tokens == ONNX_BATCH_TOKENS
    _check(model)


def test_ingest_of_full_window_chunks_finds_them(tmp_path) -> None:
    from langchain_knowledge_inject._store.embeddings import default_embeddings

    docs = [Document(text, metadata={"source": f"policy-{i}.md"}) for i, text in enumerate(_LONG)]
    with KnowledgeBase("batches", path=tmp_path, embeddings=default_embeddings()) as kb:
        result = kb.add_documents(docs)
        assert result.added == kb.info.chunk_count > len(docs)  # split near the window
        hit = kb.search("parental leave pay", k=1, mode="dense")[0]
        assert hit.metadata["source"] == "policy-1.md"
