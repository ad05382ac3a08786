"""Episodic memory: recording off the turn's path, the write-ahead journal, crash replay."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from langchain_knowledge_inject._memory.episodic import EpisodicMemory, EpisodicOptions
from langchain_knowledge_inject.errors import MemoryWriteError


class GatedEmbeddings(Embeddings):
    """Embeds documents only once ``gate`` is set; queries always."""

    def __init__(self) -> None:
        self.inner = DeterministicFakeEmbedding(size=32)
        self.gate, self.entered = threading.Event(), threading.Event()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.entered.set()
        self.gate.wait()
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


class FlakyEmbeddings(Embeddings):
    """Fails the first ``failures`` document calls."""

    def __init__(self, failures: int) -> None:
        self.inner = DeterministicFakeEmbedding(size=32)
        self.failures = failures

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.failures > 0:
            self.failures -= 1
            msg = "embedding service down"
            raise RuntimeError(msg)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def journal_lines(path: Path) -> list[dict]:
    files = sorted((path / "episodes" / "journal").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines() if line]


@pytest.mark.slow
def test_record_returns_before_the_write_and_a_search_waits_for_it(tmp_path) -> None:
    emb = GatedEmbeddings()
    memory = EpisodicMemory(path=tmp_path, embeddings=emb, min_score=0)
    memory.knowledge_base  # noqa: B018 - open it (its check embeds a query only)

    eid = memory.record("I adopted a cat.", user_id="u1", speaker="Ana", episode_id="t1")

    assert eid == "t1"  # returned while the writer is blocked in the embedding model
    assert emb.entered.wait(10)
    assert memory.recorder.writer.pending == 1
    assert [e["meta"]["ep_id"] for e in journal_lines(tmp_path)] == ["t1"]  # journalled first
    emb.gate.set()
    assert [e.episode_id for e in memory.search("cat", user_id="u1")] == ["t1"]
    memory.flush()
    assert (
        memory.recorder.writer.pending == 0 and journal_lines(tmp_path) == []
    )  # emptied when idle
    memory.close()


def test_flush_writes_everything_and_close_flushes(tmp_path) -> None:
    memory = EpisodicMemory(path=tmp_path, embeddings=DeterministicFakeEmbedding(size=32))
    for i in range(30):
        memory.record(f"turn {i}", user_id="u1" if i % 2 else "u2", episode_id=f"t{i}")
    memory.close()

    reopened = EpisodicMemory(path=tmp_path, embeddings=DeterministicFakeEmbedding(size=32))
    assert reopened.count("u1") == 15 and reopened.count("u2") == 15
    with pytest.raises(MemoryWriteError):
        memory.record("after close", user_id="u1")
    reopened.close()


async def test_aflush(tmp_path) -> None:
    memory = EpisodicMemory(path=tmp_path, embeddings=DeterministicFakeEmbedding(size=32))
    await memory.arecord("hello", user_id="u1")
    await memory.aflush()
    assert memory.recorder.writer.pending == 0 and memory.count("u1") == 1
    memory.close()


def test_a_failing_write_is_logged_kept_and_retried(tmp_path, caplog) -> None:
    emb = FlakyEmbeddings(failures=2)
    memory = EpisodicMemory(path=tmp_path, embeddings=emb, min_score=0)
    caplog.set_level(logging.WARNING, logger="langchain_knowledge_inject")

    memory.record("I like tea.", user_id="u1", episode_id="tea")
    memory.flush()

    assert memory.count("u1") == 1
    assert sum("kept in the journal" in r.getMessage() for r in caplog.records) == 2
    memory.close()


@pytest.mark.slow
def test_flush_raises_when_the_writes_keep_failing_and_nothing_is_lost(tmp_path) -> None:
    # flush_timeout_s bounds close() too (default 30 s): the writes never succeed here
    memory = EpisodicMemory(
        path=tmp_path,
        embeddings=FlakyEmbeddings(failures=10**6),
        options=EpisodicOptions(flush_timeout_s=3),
    )
    memory.record("I like tea.", user_id="u1", episode_id="tea")

    with pytest.raises(MemoryWriteError, match="embedding service down"):
        memory.flush()
    assert [e["meta"]["ep_id"] for e in journal_lines(tmp_path)] == ["tea"]
    with pytest.raises(MemoryWriteError):
        memory.close()  # still cannot write: it says so, the journal keeps the episode
    assert [e["meta"]["ep_id"] for e in journal_lines(tmp_path)] == ["tea"]

    healed = EpisodicMemory(path=tmp_path, embeddings=FlakyEmbeddings(failures=0))
    assert healed.count("u1") == 1  # replayed from the journal
    healed.close()


CRASH = textwrap.dedent(
    """
    import os, sys, threading
    from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
    from langchain_knowledge_inject._memory.episodic import EpisodicMemory

    class Stuck(DeterministicFakeEmbedding):
        def embed_documents(self, texts):
            threading.Event().wait()  # the write never finishes: the process dies first

    memory = EpisodicMemory(path=sys.argv[1], embeddings=Stuck(size=32))
    for i in range(3):
        memory.record(f"turn {i} before the crash", user_id="u1", speaker="Ana",
                      episode_id=f"t{i}", metadata={"n": i})
    os._exit(0)  # no flush, no atexit: a crash
    """
)


@pytest.mark.slow
def test_a_crash_loses_nothing_recorded_the_journal_is_replayed_on_open(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", CRASH, str(tmp_path)], check=True, env=env,
                   timeout=300)  # fmt: skip
    assert len(journal_lines(tmp_path)) == 3

    memory = EpisodicMemory(path=tmp_path, embeddings=DeterministicFakeEmbedding(size=32),
                            min_score=0)  # fmt: skip
    found = memory.search("turn before the crash", user_id="u1", k=10, recency="off")

    assert sorted(e.episode_id for e in found) == ["t0", "t1", "t2"]
    assert {e.metadata["n"] for e in found} == {0, 1, 2} and {e.speaker for e in found} == {"Ana"}
    memory.flush()
    assert journal_lines(tmp_path) == []
    memory.close()


def test_a_torn_last_line_is_skipped_and_the_rest_replayed(tmp_path) -> None:
    first = EpisodicMemory(path=tmp_path, embeddings=DeterministicFakeEmbedding(size=32),
                           options=EpisodicOptions(background=False))  # fmt: skip
    first.knowledge_base  # noqa: B018
    first.close()
    journal = tmp_path / "episodes" / "journal"
    journal.mkdir(parents=True, exist_ok=True)
    entry = {"user": "u1", "text": "kept", "meta": {"ep_id": "k", "ep_kind": "turn",
             "ep_ts": 1.7e9, "ep_text": "kept", "source": "k"}}  # fmt: skip
    (journal / "kinject-episodes.jsonl").write_text(json.dumps(entry) + '\n{"user": "u1", "te')

    memory = EpisodicMemory(path=tmp_path, embeddings=DeterministicFakeEmbedding(size=32))

    assert memory.count("u1") == 1
    memory.close()


def test_a_second_memory_on_the_same_store_gets_its_own_journal(tmp_path) -> None:
    emb = DeterministicFakeEmbedding(size=32)
    first = EpisodicMemory(path=tmp_path, embeddings=emb)
    second = EpisodicMemory(path=tmp_path, embeddings=emb)

    assert first.recorder.writer.path != second.recorder.writer.path
    first.record("a", user_id="u1")
    first.close()
    second.close()


def test_without_background_the_write_happens_in_the_call(tmp_path) -> None:
    memory = EpisodicMemory(path=tmp_path, embeddings=DeterministicFakeEmbedding(size=32),
                            options=EpisodicOptions(background=False))  # fmt: skip
    memory.record("hello", user_id="u1")

    assert memory.recorder.writer is None and memory.knowledge_base.count(tenant_id="u1") == 1
    assert not (tmp_path / "episodes" / "journal").exists()
    memory.close()
