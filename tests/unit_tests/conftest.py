"""Fixtures shared by the unit tests (the fakes themselves are in ``fakes.py``)."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject.store import knowledge_base


@pytest.fixture
def fake_default_model(monkeypatch: pytest.MonkeyPatch) -> DeterministicFakeEmbedding:
    """Every KnowledgeBase opened without ``embeddings=`` gets this one offline fake.

    A test module that opens knowledge bases by name only (the CLI) uses it for every
    test: ``pytestmark = pytest.mark.usefixtures("fake_default_model")``.
    """
    fake = DeterministicFakeEmbedding(size=64)
    monkeypatch.setattr(knowledge_base, "default_embeddings", lambda **_: fake)
    return fake
