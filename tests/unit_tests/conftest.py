"""Fixtures shared by the unit tests (the fakes themselves are in ``fakes.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._memory.episodic import EpisodicMemory
from langchain_knowledge_inject._store import knowledge_base
from tests.unit_tests.fakes import DefaultNamedEmbedding, WordHashEmbedding


@pytest.fixture
def fake_default_model(monkeypatch: pytest.MonkeyPatch) -> DeterministicFakeEmbedding:
    """Every KnowledgeBase opened without ``embeddings=`` gets this one offline fake.

    A test module that opens knowledge bases by name only (the CLI) uses it for every
    test: ``pytestmark = pytest.mark.usefixtures("fake_default_model")``.
    """
    fake = DeterministicFakeEmbedding(size=64)
    monkeypatch.setattr(knowledge_base, "default_embeddings", lambda **_: fake)
    return fake


@pytest.fixture
def default_named_model(monkeypatch: pytest.MonkeyPatch) -> DefaultNamedEmbedding:
    """Like ``fake_default_model``, with a fake recorded under the default model's name.

    Knowledge bases built with it are what ``kinject`` opens with the real model, so
    the commands' read-only fast paths (``_store/peek.py``) apply to them.
    """
    fake = DefaultNamedEmbedding(size=16)
    monkeypatch.setattr(knowledge_base, "default_embeddings", lambda **_: fake)
    return fake


@pytest.fixture
def make_kb(tmp_path: Path) -> Iterator[Callable[..., KnowledgeBase]]:
    """Opens knowledge bases under ``tmp_path`` (closed after the test).

    ``make_kb(docs, name="hr", embeddings=WordHashEmbedding(), path=tmp_path / "store",
    **options)`` adds ``docs`` and returns the open knowledge base.
    """
    opened: list[KnowledgeBase] = []

    def make(
        docs: Iterable[Document] = (),
        *,
        name: str = "hr",
        embeddings: Embeddings | None = None,
        path: Path | None = None,
        **options: Any,
    ) -> KnowledgeBase:
        kb = KnowledgeBase(
            name,
            path=tmp_path / "store" if path is None else path,
            embeddings=WordHashEmbedding() if embeddings is None else embeddings,
            **options,
        )
        opened.append(kb)
        if docs := list(docs):
            kb.add_documents(docs)
        return kb

    yield make
    for kb in reversed(opened):
        kb.close()


@pytest.fixture
def make_episodic_memory(tmp_path: Path) -> Iterator[Callable[..., EpisodicMemory]]:
    """Opens episodic memories, each in its own folder under ``tmp_path`` (closed after the test).

    ``make_episodic_memory(**options)``: the embeddings default to a 64-dimension
    ``DeterministicFakeEmbedding``; every other option is the memory's own default.
    """
    made: list[EpisodicMemory] = []

    def make(**kwargs: Any) -> EpisodicMemory:
        kwargs.setdefault("embeddings", DeterministicFakeEmbedding(size=64))
        kwargs.setdefault("path", tmp_path / uuid.uuid4().hex[:8])
        memory = EpisodicMemory(**kwargs)
        made.append(memory)
        return memory

    yield make
    for memory in made:
        memory.close()
