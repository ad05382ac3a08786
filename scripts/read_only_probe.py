r"""Open a knowledge base whose store is a real read-only mount: search works, writes refuse.

Run as root (a private mount namespace; nothing outside it changes)::

    python scripts/read_only_probe.py make /tmp/kinject-ro
    unshare -m sh -c 'mount --bind /tmp/kinject-ro /tmp/kinject-ro && \
        mount -o remount,bind,ro /tmp/kinject-ro && \
        python scripts/read_only_probe.py use /tmp/kinject-ro'
"""

from __future__ import annotations

import sys
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase


def main(step: str, store: Path) -> int:
    """``make`` a restricted knowledge base in ``store``, or ``use`` it read-only."""
    emb = DeterministicFakeEmbedding(size=16)
    if step == "make":
        with KnowledgeBase("hr", path=store, embeddings=emb, restricted=True) as kb:
            kb.add_documents([Document("Annual leave is 25 days.", metadata={"source": "a.md"})])
        return 0
    with KnowledgeBase("hr", path=store, embeddings=emb) as kb:
        print(f"opened: read_only={kb.read_only} restricted={kb.info.restricted}")
        for mode in ("hybrid", "keyword", "dense"):
            hits = kb.search("annual leave", k=1, min_score=0.0, mode=mode)
            print(f"{mode} search: {[d.page_content for d in hits]}")
        print(f"check(): clean={kb.check().clean}")
        writes = {
            "add_documents": lambda: kb.add_documents([Document("x", metadata={"source": "b"})]),
            "delete": lambda: kb.delete(["x"]),
            "check(repair=True)": lambda: kb.check(repair=True),
        }
        for name, call in writes.items():
            try:
                call()
                print(f"{name}: succeeded")
            except Exception as exc:
                print(f"{name}: {type(exc).__name__}({getattr(exc, 'reason', '')}): {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], Path(sys.argv[2])))
