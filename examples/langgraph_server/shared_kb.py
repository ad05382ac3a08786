"""The knowledge base the graphs serve, opened once per server process.

``graphs.py`` and ``webapp.py`` import it from here, so both hold the same object:
the web app's start-up hook warms the very knowledge base the graphs search. It
lives in a Chroma server (``CHROMA_HOST``, ``CHROMA_PORT``) and must exist
(``KINJECT_EXAMPLE_KB``: build it with ``ingest``). Opening it loads no model, so
importing the graphs stays fast.
"""

from __future__ import annotations

import os

import chromadb

from langchain_knowledge_inject import KnowledgeBase

knowledge_base = KnowledgeBase(
    os.environ.get("KINJECT_EXAMPLE_KB", "hr"),
    client=chromadb.HttpClient(
        host=os.environ.get("CHROMA_HOST", "127.0.0.1"),
        port=int(os.environ.get("CHROMA_PORT", "8000")),
    ),
    create=False,
)
