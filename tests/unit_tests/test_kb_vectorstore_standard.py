"""``kb.vectorstore()`` against langchain-tests' standard ``VectorStoreIntegrationTests``.

The store writes through the knowledge base (registry, keyword index and Chroma
in step); the suite runs with its own ``DeterministicFakeEmbedding`` in a fresh
embedded store per test, and each test ends with ``check()`` clean.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store.vectorstore import KnowledgeBaseVectorStore


class TestKnowledgeBaseVectorStore(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self, tmp_path) -> Iterator[KnowledgeBaseVectorStore]:  # type: ignore[override]
        kb = KnowledgeBase("standard", path=tmp_path, embeddings=self.get_embeddings())
        try:
            yield kb.vectorstore()
            report = kb.check()
            assert report.clean, report.summary()
        finally:
            kb.close()
