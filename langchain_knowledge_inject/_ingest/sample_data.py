"""A small HR-policy knowledge base, written for this project, for demos and tests.

Seven policies of a fictional company ("Northwind Labs", ``sample_policies/*.md``),
each with concrete figures (days, amounts, deadlines) that ``SAMPLE_QUESTIONS``
check retrieval against; ``kinject demo`` and the notebooks use them.

Example:
    >>> SAMPLE_DOCUMENTS[0].metadata["source"], SAMPLE_QUESTIONS[0].expected_source
    ('leave_policy.md', 'leave_policy.md')
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from langchain_knowledge_inject._ingest.loading import split_documents

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

_POLICIES = Path(__file__).with_name("sample_policies")
_FILES = [f"{topic}_policy.md" for topic in (
    "leave", "sick_leave", "expenses", "remote_work", "travel", "parental_leave", "equipment"
)]  # fmt: skip


def _policy(source: str) -> Document:
    text = (_POLICIES / source).read_text(encoding="utf-8")
    title = text.split("\n", 1)[0].removeprefix("# ")
    return Document(text, metadata={"source": source, "category": "hr", "title": title})


SAMPLE_DOCUMENTS: list[Document] = [_policy(source) for source in _FILES]
"""The seven policies, whole, with ``source``, ``category`` and ``title`` (the first heading)."""


@dataclass(frozen=True)
class SampleQuestion:
    """A question a user might ask, the ``source`` that answers it and a phrase of the answer."""

    question: str
    expected_source: str
    answer: str


SAMPLE_QUESTIONS: list[SampleQuestion] = [
    SampleQuestion(question, f"{topic}_policy.md", answer)
    for question, topic, answer in [
        ("How many days of annual leave do I get?", "leave", "25 days"),
        ("When do I need a doctor's note when I'm off sick?", "sick_leave", "8th"),
        ("How long do I have to submit an expense claim?", "expenses", "within 30 days"),
        ("Can I work from another country for a few weeks?", "remote_work", "20 working days"),
        ("What is the hotel limit per night in London?", "travel", "EUR 250 per night"),
        ("How much paid leave does a new father get?", "parental_leave", "6 weeks"),
        ("What should I do if my laptop is stolen?", "equipment", "within 24 hours"),
    ]
]
"""Questions with the source that answers each; used by ``kinject demo`` and tests."""


def build_sample_knowledge_base(
    *,
    path: str | Path | None = None,
    name: str = "hr-demo",
    embeddings: Embeddings | None = None,
    client: Any = None,
) -> KnowledgeBase:
    """Create (or reopen) the sample HR knowledge base holding ``SAMPLE_DOCUMENTS``' chunks.

    Idempotent: chunk ids derive from source and content, so calling it again adds
    nothing. ``path`` is the store (default: the per-user one), ``client`` a
    ``chromadb`` client (a server), ``embeddings`` the model (default: the offline one).

    Example:
        >>> kb = build_sample_knowledge_base(path=tmp_path)  # doctest: +SKIP
        >>> kb.search("annual leave carry-over", k=1)[0].metadata["source"]  # doctest: +SKIP
        'leave_policy.md'
    """
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

    kb = KnowledgeBase(
        name,
        path=path,
        client=client,
        embeddings=embeddings,
        description="Sample HR policies of a fictional company: leave, sick leave, "
        "expenses, remote work, travel, parental leave and equipment.",
        topics=sorted(doc.metadata["title"] for doc in SAMPLE_DOCUMENTS),
    )
    kb.add_documents(
        split_documents(SAMPLE_DOCUMENTS, file_type="markdown", splitter=kb.text_splitter)
    )
    return kb
