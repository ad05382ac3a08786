"""Write the store-format-1 fixture that the migration tests open (``tests/fixtures``).

Run with the code of version 1 (before Chroma became the one record) on the path::

    PYTHONPATH=/path/to/version-1 .venv/bin/python scripts/make_legacy_store.py

It writes a restricted knowledge base ``legacy`` (sensitive sources, routing
hint and keywords, a description and topics, a tenant partition, fingerprints)
and an unrestricted ``open``, with an 8-dimension fake embedding, and zips the
store directory into ``tests/fixtures/legacy_store_v1.zip``.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase

TARGET = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "legacy_store_v1"


def main() -> None:
    """Write the fixture."""
    emb = DeterministicFakeEmbedding(size=8)
    store = Path(tempfile.mkdtemp()) / "store"
    with KnowledgeBase(
        "legacy", path=store, embeddings=emb, restricted=True, sensitive_sources=True,
        description="Deal room", topics=["mergers"], routing_hint="Ask about deals.",
        routing_keywords=["merger", "price"],
    ) as kb:  # fmt: skip
        kb.add_documents(
            [
                Document("The merger code is amber-walrus-pilot.", metadata={"source": "deal.md"}),
                Document("The price is 7,350,000 euros.", metadata={"source": "price.md"}),
            ],
            fingerprints={"deal.md": "fp-deal"},
        )
        kb.add_documents(
            [Document("Acme's bonus pool is 7 percent.", metadata={"source": "acme.md"})],
            tenant_id="acme",
        )
    with KnowledgeBase("open", path=store, embeddings=emb) as kb:
        kb.add_documents([Document("Staff get 25 days of annual leave.", metadata={"source": "a"})])
    shutil.make_archive(str(TARGET), "zip", store)
    print(f"wrote {TARGET}.zip")


if __name__ == "__main__":
    main()
