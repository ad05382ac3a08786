"""Store integrity with real parts: a real `chroma run` server wiped under a keyword cache,
and a collection written by `langchain_chroma.Chroma` with the real embedding model, adopted."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from langchain_knowledge_inject import KnowledgeBase, RestrictionFlags
from langchain_knowledge_inject.errors import KnowledgeBaseOpenError

from .conftest import ChromaServer, _free_port

pytestmark = pytest.mark.integration

DOCS = [
    Document("Staff get 25 days of annual leave per year.", metadata={"source": "leave.md"}),
    Document("Sick leave needs a doctor's note after three days.", metadata={"source": "sick.md"}),
    Document("Expenses are reimbursed within a month.", metadata={"source": "expenses.md"}),
]


def test_a_store_pointed_at_a_fresh_server_rewrites_and_keeps_restriction(
    tmp_path, real_embeddings
):
    server = ChromaServer(path=tmp_path / "server-a", port=_free_port())
    server.start()
    try:
        kb = KnowledgeBase(
            "hr",
            path=tmp_path / "store",
            client=server.client(),
            embeddings=real_embeddings,
            restricted=True,
        )
        assert kb.add_documents(DOCS).added == len(DOCS)
        kb.close()
    finally:
        server.stop()
    # the server is wiped: it comes back on an empty path; the store directory still holds
    # the keyword cache of the earlier one
    server.path = tmp_path / "server-b"
    server.start()
    try:
        client = server.client()
        kb = KnowledgeBase("hr", path=tmp_path / "store", client=client, embeddings=real_embeddings)
        assert kb.info.restricted is True  # the store remembers it; the new collection says it too
        assert kb.search("how many days of annual leave?", k=2, mode="keyword", min_score=0.0) == []
        result = kb.add_documents(DOCS)
        assert result.added == len(DOCS) and result.unchanged == 0
        assert client.get_collection(f"kinject-{kb.id}-shared").count() == len(DOCS)
        hits = kb.search("how many days of annual leave?", k=1)
        assert hits and hits[0].metadata["source"] == "leave.md"
        kb.close()
        # the same server restarted (same data): the cache and server agree, nothing is redone
        server.stop()
        server.start()
        kb = KnowledgeBase(
            "hr", path=tmp_path / "store", client=server.client(), embeddings=real_embeddings
        )
        assert kb.add_documents(DOCS).unchanged == len(DOCS)
        assert kb.search("sick leave doctor's note", k=1)[0].metadata["source"] == "sick.md"
        assert kb.check().clean
        kb.drop()
        kb.close()
    finally:
        server.stop()


def test_from_chroma_adopts_a_real_langchain_chroma_collection(tmp_path, real_embeddings):
    from langchain_chroma import Chroma

    store = Chroma(
        collection_name="handbook",
        embedding_function=real_embeddings,
        persist_directory=str(tmp_path / "lc"),
    )
    ids = store.add_documents(DOCS)
    kb = KnowledgeBase.from_chroma(
        "handbook",
        persist_directory=tmp_path / "lc",
        embeddings=real_embeddings,
        path=tmp_path / "kb",
    )
    assert kb.info.chunk_count == len(DOCS)
    hits = kb.search("How long until I need a doctor's note?", k=1)
    assert hits[0].id == ids[1]
    keyword = kb.search("reimbursed", k=1, mode="keyword", min_score=0.0)
    assert keyword[0].id == ids[2]
    assert kb.check().clean
    kb.close()


def test_from_chroma_refuses_a_collection_made_by_another_model(tmp_path, real_embeddings):
    from langchain_chroma import Chroma
    from langchain_core.embeddings import DeterministicFakeEmbedding

    Chroma(
        collection_name="handbook",
        embedding_function=DeterministicFakeEmbedding(size=384),
        persist_directory=str(tmp_path / "lc"),
    ).add_documents(DOCS)
    with pytest.raises(KnowledgeBaseOpenError, match="not embedded with the model given"):
        KnowledgeBase.from_chroma(
            "handbook",
            persist_directory=tmp_path / "lc",
            embeddings=real_embeddings,
            path=tmp_path / "kb",
        )


def test_a_new_machine_on_a_server_sees_a_restricted_kb_restricted(
    tmp_path, real_embeddings, chroma_server
):
    kb = KnowledgeBase(
        "hr-lost",
        path=tmp_path / "machine-a",
        client=chroma_server.client(),
        embeddings=real_embeddings,
        restricted=RestrictionFlags(restricted=True, sensitive_sources=True),
    )
    ids = kb.add_documents(DOCS).ids
    kb.close()
    # a new deployment: an empty store directory, the same server
    again = KnowledgeBase(
        "hr-lost",
        path=tmp_path / "machine-b",
        client=chroma_server.client(),
        embeddings=real_embeddings,
    )
    info = again.info
    assert info.restricted is True and info.sensitive_sources is True
    assert info.chunk_count == len(DOCS)
    assert again.search("reimbursed", k=1, mode="keyword", min_score=0.0)[0].id == ids[2]
    report = again.check(repair=True)
    assert report.clean
    assert chroma_server.client().get_collection(f"kinject-{again.id}-shared").count() == len(DOCS)
    again.drop()
    again.close()


def _can_mount_tmpfs() -> bool:
    import os
    import shutil
    import subprocess

    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs root and unshare -m to mount a tmpfs")
def test_disk_full_on_a_real_tmpfs_is_a_store_error_and_recovers(tmp_path):
    """A real full file system: a 32 MiB tmpfs in a private mount namespace."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[2] / "scripts" / "disk_full_probe.py"
    mount = tmp_path / "fs"
    mount.mkdir()
    command = f"mount -t tmpfs -o size=32m tmpfs {mount} && {sys.executable} {script} {mount}"
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", command],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, done.stderr[-2000:]
    assert "error on the full disk: langchain_knowledge_inject.errors.StoreError" in out
    assert "is full" in out and "InternalError:" not in out.split("error on the full disk")[1][:80]
    assert "check() on the full disk: \"knowledge base 'full': consistent" in out
    assert "kinject ingest on the full disk: exit 1" in out
    assert "after freeing space, same process: add_documents added" in out
    assert "consistent" in out.rsplit("check:", 1)[1]
