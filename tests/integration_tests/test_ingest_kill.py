"""An ingest killed with SIGKILL keeps every committed batch, and the next run resumes.

A child process ingests a folder (two small files, a large one, a small one after
it) with the real model and kills itself with SIGKILL at a chosen point: between
two batches of the large file, then, in a second run, just before the large file's
fingerprint is written (its last chunks stored). After each kill the knowledge base
is opened again here: the small files read before the large one and every committed
chunk are searchable, the keyword side holds exactly Chroma's chunks, and the large
file does not look finished. A last run finishes the work, embedding only what was
not stored. The same at any moment on a 50 MB file: ``benchmarks/ingest_large.py``.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_knowledge_inject import KnowledgeBase, ingest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HANG_GUARD = 900.0  # seconds: only against a hang, never a measure
CHILD = """
import os, signal, sys
from langchain_knowledge_inject import KnowledgeBase, ingest
from langchain_knowledge_inject._store.chroma import ChromaSide

kb = KnowledgeBase("kill", path=sys.argv[1])
point, committed = sys.argv[3], []
add_documents, upsert = kb.add_documents, ChromaSide.upsert

def counted(docs, **kwargs):
    result = add_documents(docs, **kwargs)
    committed.append(len(docs))
    print(sum(committed), flush=True)
    if point == "between" and len(committed) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return result

def stopping(self, partition, chunks, vectors):
    if point == "fingerprint" and any(c.fingerprint and "large" in c.source for c in chunks):
        os.kill(os.getpid(), signal.SIGKILL)  # its last chunks are stored, the fingerprint not
    return upsert(self, partition, chunks, vectors)

kb.add_documents, ChromaSide.upsert = counted, stopping
ingest(kb, sys.argv[2])
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    rnd = random.Random(7)
    words = [
        f"{stem}{n}" for stem in ("leave", "claim", "laptop", "hotel", "policy") for n in range(40)
    ]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a-1.txt").write_text("Apples: the apple allowance is 25 days.\n", encoding="utf-8")
    (docs / "a-2.txt").write_text(
        "Bicycles: the bicycle scheme pays 300 euros.\n", encoding="utf-8"
    )
    paragraphs = (
        f"Rule {i}: " + " ".join(rnd.choice(words) for _ in range(40)) for i in range(500)
    )
    (docs / "large.txt").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    (docs / "z-1.txt").write_text("Zebras: the zebra crossing rule holds.\n", encoding="utf-8")
    return docs


def killed_run(store: Path, docs: Path, point: str) -> int:
    """Run the child until it kills itself at ``point``; the chunks it reported committed."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(store), str(docs), point],
        env=env, capture_output=True, text=True, timeout=HANG_GUARD, check=False,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


def found(kb: KnowledgeBase, query: str) -> list[str]:
    return [d.metadata["source"] for d in kb.search(query, k=1, min_score=0.0, mode="keyword")]


def test_a_killed_ingest_keeps_its_batches_and_the_next_run_resumes(
    tmp_path, folder, real_embeddings
):
    store = tmp_path / "store"
    large = str((folder / "large.txt").resolve())

    committed = killed_run(store, folder, "between")
    with KnowledgeBase("kill", path=store, embeddings=real_embeddings) as kb:
        assert kb.count() == committed  # every committed chunk, nothing half-written
        assert found(kb, "apple allowance") == ["a-1.txt"]  # read before the large file
        assert found(kb, "bicycle scheme") == ["a-2.txt"]
        stored = kb.vectorstore().get(include=["documents"])
        for chunk_id, text in zip(stored["ids"][-5:], stored["documents"][-5:], strict=True):
            hits = kb.search(" ".join(text.split()[:12]), k=10, min_score=0.0, mode="keyword")
            assert chunk_id in {d.id for d in hits}
        assert kb.get_source_fingerprint(large) is None  # not finished: read again next time
        assert kb.check().clean
        first = kb.count()

    killed_run(store, folder, "fingerprint")
    with KnowledgeBase("kill", path=store, embeddings=real_embeddings) as kb:
        assert kb.count() > first
        assert kb.get_source_fingerprint(large) is None  # its last chunk and fingerprint: not
        assert kb.check().clean
        before = kb.count()

        report = ingest(kb, folder)
        assert kb.count() > before
        assert report.chunks_added == kb.count() - before  # nothing stored is embedded again
        assert report.chunks_added + report.chunks_unchanged == kb.count()
        assert report.chunks_replaced == 0
        assert kb.get_source_fingerprint(large) is not None
        assert found(kb, "zebra crossing") == ["z-1.txt"]
        assert kb.check().clean
        again = ingest(kb, folder)
        assert (again.files_unchanged, again.chunks_added) == (4, 0)
