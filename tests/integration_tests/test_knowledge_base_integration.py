"""KnowledgeBase with the real embedding model, embedded and against a real Chroma server."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_knowledge_inject import KnowledgeBase, KnowledgeBaseRetriever
from langchain_knowledge_inject._store.embeddings import DEFAULT_MODEL_NAME

pytestmark = pytest.mark.integration

POLICIES = [
    ("Employees receive 25 days of paid annual leave per calendar year.", "leave.md", "leave"),
    (
        "Unused annual leave of up to 5 days may be carried over to the next year.",
        "leave.md",
        "leave",
    ),
    ("Sick leave longer than three days requires a doctor's certificate.", "sick.md", "leave"),
    (
        "Travel expenses are reimbursed within 30 days when submitted with receipts.",
        "expenses.md",
        "finance",
    ),
    ("Meals during business trips are covered up to 40 euros per day.", "expenses.md", "finance"),
    (
        "Staff may work remotely up to three days a week with manager approval.",
        "remote.md",
        "remote",
    ),
    ("The company provides a laptop and a monitor for home office use.", "equipment.md", "remote"),
]


def _docs() -> list[Document]:
    return [Document(t, metadata={"source": s, "category": c}) for t, s, c in POLICIES]


def test_semantic_search_with_real_model(tmp_path, real_embeddings):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=real_embeddings)
    assert kb.info.embedding_model == DEFAULT_MODEL_NAME
    kb.add_documents(_docs())
    for mode in ("dense", "keyword", "hybrid"):
        top = kb.search(
            "How many vacation days do I get?" if mode != "keyword" else "annual leave days",
            k=2,
            mode=mode,
            min_score=0.0,
        )
        assert top[0].metadata["source"] == "leave.md", mode
    remote = kb.search("How many days a week may I work remotely?", k=1, mode="hybrid")
    assert remote[0].metadata["source"] == "remote.md"


def test_default_model_is_used_without_arguments(tmp_path, monkeypatch):
    monkeypatch.setenv("KINJECT_HOME", str(tmp_path))
    kb = KnowledgeBase("defaults")
    assert kb.path == tmp_path
    assert kb.info.embedding_model == DEFAULT_MODEL_NAME
    kb.add_documents(_docs()[:2])
    assert kb.search("paid leave per year", k=1)[0].metadata["source"] == "leave.md"


@pytest.mark.slow
def test_persistence_across_process_restart(tmp_path, real_embeddings):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=real_embeddings)
    kb.add_documents(_docs())
    kb.close()
    script = textwrap.dedent(
        f"""
        from langchain_knowledge_inject import KnowledgeBase
        kb = KnowledgeBase("hr", path={str(tmp_path)!r}, create=False)
        again = kb.add_documents([])
        hits = kb.search("vacation days per year", k=1, mode="hybrid")
        print(kb.info.chunk_count, hits[0].metadata["source"])
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(len(POLICIES)), "leave.md"]
    reopened = KnowledgeBase("hr", path=tmp_path, embeddings=real_embeddings, create=False)
    assert reopened.add_documents(_docs()).added == 0


def test_against_a_real_chroma_server(tmp_path, real_embeddings, chroma_server):
    name = f"srv{uuid.uuid4().hex[:8]}"
    kb = KnowledgeBase(
        name, path=tmp_path, client=chroma_server.client(), embeddings=real_embeddings
    )
    first = kb.add_documents(_docs())
    assert first.added == len(POLICIES)
    assert kb.add_documents(_docs()).added == 0
    kb.add_documents(
        [Document("Acme staff get a 7 percent bonus.", metadata={"source": "acme.md"})],
        tenant_id="acme",
    )
    hits = kb.search("bonus percentage", k=5, min_score=0.0, tenant_id="acme")
    assert hits[0].metadata["source"] == "acme.md" and len(hits) == 5  # with the shared ones
    alone = kb.search("bonus percentage", k=5, min_score=0.0, tenant_id="acme",
                      include_shared=False)  # fmt: skip
    assert [d.metadata["source"] for d in alone] == ["acme.md"]
    shared = kb.search("bonus percentage", k=10, min_score=0.0)
    assert "acme.md" not in {d.metadata["source"] for d in shared}
    assert kb.search("How many vacation days do I get?", k=1)[0].metadata["source"] == "leave.md"
    names = {c.name for c in chroma_server.client().list_collections()}
    assert f"kinject-{kb.id}-shared" in names
    assert kb.delete_source("leave.md") == 2
    assert all(
        d.metadata["source"] != "leave.md" for d in kb.search("annual leave", k=10, min_score=0.0)
    )


class TestKnowledgeBaseRetrieverStandard(RetrieversIntegrationTests):
    """The langchain-tests retriever contract, with the real embedding model, at defaults."""

    _kb: KnowledgeBase | None = None

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return KnowledgeBaseRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        if TestKnowledgeBaseRetrieverStandard._kb is None:
            import tempfile

            from langchain_knowledge_inject._store.embeddings import default_embeddings

            kb = KnowledgeBase("standard", path=tempfile.mkdtemp(), embeddings=default_embeddings())
            kb.add_documents(_docs())
            TestKnowledgeBaseRetrieverStandard._kb = kb
        # the retriever's own defaults: pure top-k (see KnowledgeBaseRetriever)
        return {"knowledge_base": TestKnowledgeBaseRetrieverStandard._kb}

    @property
    def retriever_query_example(self) -> str:
        return "annual leave and expenses"
