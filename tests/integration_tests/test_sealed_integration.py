"""Sealed text on a real store: the embedded one and a ``chroma run`` server, the real model.

* another application on the same Chroma server (its own ``HttpClient``), and every
  reader of ``collection_readers``, read ciphertext only; used as sources on every
  surface they give a restricted turn with nothing raw in any channel;
* a worker process that has no key (another store directory, one server): its turn
  refuses with ``key_unavailable`` in the manifest, its owner calls raise, and the key
  given through ``KINJECT_SEAL_KEY_<NAME>`` opens it;
* processes starting together on one store directory and one server, open and
  restricted: every first search answers, and the same (issue 32).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store import sealing
from langchain_knowledge_inject._store.storage import collection_name
from tests.unit_tests.restricted_fixtures import RESTRICTED_DOCUMENTS, make_summarizer
from tests.unit_tests.restricted_harness import (
    CHANNELS,
    READERS,
    SURFACES,
    collection_readers,
    count_raw,
    run_surface,
)

pytestmark = pytest.mark.integration

QUESTION = "What are the rules on annual leave, support targets and commission?"
CHUNKS = [d.page_content for d in RESTRICTED_DOCUMENTS]
ROOT = Path(__file__).resolve().parents[2]


def _documents() -> list[Document]:
    return [Document(d.page_content, metadata=dict(d.metadata)) for d in RESTRICTED_DOCUMENTS]


@pytest.fixture(scope="module", params=["embedded", "server"])
def sealed(request, tmp_path_factory, real_embeddings):
    """A restricted knowledge base, and a client of another application on its store."""
    root = tmp_path_factory.mktemp(f"sealed-{request.param}")
    server = request.getfixturevalue("chroma_server") if request.param == "server" else None
    kb = KnowledgeBase("sealed-ops", path=root, embeddings=real_embeddings,
                       client=server.client() if server else None)  # fmt: skip
    kb.add_documents(_documents())
    kb.restrict()
    other = server.client() if server else kb._chroma.client  # embedded: one per process
    yield kb, other
    kb.drop()
    kb.close()


def _readers(sealed_kb, other) -> dict:
    return collection_readers(other, collection_name(sealed_kb.id, ""), sealed_kb.embeddings)


@pytest.mark.parametrize("reader", READERS)
def test_another_application_reads_ciphertext_only(sealed, reader):
    kb, other = sealed
    source = _readers(kb, other)[reader]
    found = (source.similarity_search(QUESTION, k=8) if reader == "plain Chroma"
             else source.invoke(QUESTION))  # fmt: skip
    texts = [d.page_content for d in found]
    assert texts and all(sealing.is_sealed(t) for t in texts)
    assert count_raw("\n".join(texts), CHUNKS) == 0
    stored = other.get_collection(collection_name(kb.id, "")).get(include=["documents"])
    assert count_raw("\n".join(stored["documents"]), CHUNKS) == 0
    assert {d.page_content for d in kb.search(QUESTION, k=8, min_score=0.0)} <= set(CHUNKS)


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize(
    "reader", ["kb", "raw chromadb client", "a user's retriever, unlisted field"]
)
def test_sources_on_every_surface_expose_nothing_raw(sealed, reader, surface, caplog, monkeypatch):
    kb, other = sealed
    monkeypatch.setenv("KINJECT_LOG_MODEL_IO", "1")
    caplog.set_level(logging.DEBUG)
    source = kb if reader == "kb" else _readers(kb, other)[reader]
    summarizer = make_summarizer("copying")
    turn = run_surface(surface, kb=source, question=QUESTION, where="kb", summarizer=summarizer,
                       search={"min_score": 0.0})  # fmt: skip
    turn.channels["logs"] = [r.getMessage() for r in caplog.records]
    assert turn.reasons and set(turn.reasons) <= {"leak_detected"}
    raw = {c: count_raw(turn.text(c), CHUNKS) for c in CHANNELS if c in turn.channels}
    assert raw == dict.fromkeys(raw, 0)


# --- a worker without the key -------------------------------------------------------------------

KEYLESS = textwrap.dedent(
    """
    import json, sys, chromadb
    from langchain_knowledge_inject import KnowledgeBase, KnowledgeInjector
    from langchain_knowledge_inject.errors import SealedKnowledgeError
    from tests.unit_tests.restricted_fixtures import make_summarizer
    port, path, question = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    kb = KnowledgeBase("sealed-worker", path=path, create=False,
                       client=chromadb.HttpClient(host="127.0.0.1", port=port))
    out = {}
    turn = KnowledgeInjector(kb, summarizer_model=make_summarizer("honest"),
                             min_score=0.0).prepare([("human", question)])
    out["reason"], out["context"] = turn.manifest.summary_reason, turn.dynamic_context
    try:
        out["search"] = [d.page_content for d in kb.search(question, min_score=0.0)]
    except SealedKnowledgeError as exc:
        out["search"], out["message"] = exc.reason, str(exc)
    print(json.dumps(out))
    """
)


def _keyless_worker(port: int, store: Path, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", KEYLESS, str(port), str(store), QUESTION],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_worker_without_the_key_refuses_and_one_given_the_key_reads(
    chroma_server, tmp_path, real_embeddings
):
    kb = KnowledgeBase("sealed-worker", path=tmp_path / "owner", client=chroma_server.client(),
                       embeddings=real_embeddings)  # fmt: skip
    kb.add_documents(_documents())
    kb.restrict()
    key = kb._sealer.file.read_text().strip()
    try:
        without = _keyless_worker(chroma_server.port, tmp_path / "worker", {})
        assert without["reason"] == "key_unavailable"
        assert count_raw(without["context"] or "", CHUNKS) == 0
        assert (
            without["search"] == "no_key" and "KINJECT_SEAL_KEY_SEALED_WORKER" in without["message"]
        )
        given = _keyless_worker(
            chroma_server.port, tmp_path / "worker2", {"KINJECT_SEAL_KEY_SEALED_WORKER": key}
        )
        assert given["reason"] != "key_unavailable"
        assert given["search"] and set(given["search"]) <= set(CHUNKS)
    finally:
        kb.drop()
        kb.close()


# --- processes that start together (issue 32) ---------------------------------------------------

STARTER = textwrap.dedent(
    """
    import os, sys, time, chromadb
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_knowledge_inject import KnowledgeBase
    port, path, barrier = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    http = chromadb.HttpClient(host="127.0.0.1", port=port)
    open(f"{barrier}.{os.getpid()}", "w").close()
    while not os.path.exists(barrier):
        time.sleep(0.002)
    kb = KnowledgeBase("starts", path=path, client=http, create=False, timeout=60,
                       embeddings=DeterministicFakeEmbedding(size=32))
    print(",".join(d.id for d in kb.search("unique word w7x", k=3, min_score=0.0,
                                           mode="keyword")))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("restricted", [False, True], ids=["open", "restricted"])
def test_processes_starting_together_all_search(chroma_server, tmp_path, restricted):
    from langchain_core.embeddings import DeterministicFakeEmbedding

    owner = tmp_path / "owner"
    kb = KnowledgeBase("starts", path=owner, client=chroma_server.client(), timeout=60,
                       embeddings=DeterministicFakeEmbedding(size=32))  # fmt: skip
    notes = [f"Note {i}: the word w{i}x is unique to this chunk." for i in range(200)]
    kb.add_documents(
        [Document(t, metadata={"source": f"n/{i % 20}.md"}) for i, t in enumerate(notes)]
    )
    if restricted:
        kb.restrict()
    expected = ",".join(d.id for d in kb.search("unique word w7x", k=3, min_score=0.0,
                                                mode="keyword"))  # fmt: skip
    try:
        for round_ in range(3):
            store = tmp_path / f"store-{round_}"
            (store / "keys").mkdir(parents=True)
            if restricted:  # one store directory: the key file is shared with it
                (store / "keys" / kb._sealer.file.name).write_text(kb._sealer.file.read_text())
            barrier = str(tmp_path / f"go-{round_}")
            command = [sys.executable, "-c", STARTER, str(chroma_server.port), str(store), barrier]
            procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True) for _ in range(6)]  # fmt: skip
            deadline = time.monotonic() + 300  # a hang guard, not a timing assertion
            while len(list(tmp_path.glob(f"go-{round_}.*"))) < len(procs):
                assert time.monotonic() < deadline, "the workers did not start"
                time.sleep(0.05)
            Path(barrier).touch()
            for proc in procs:
                out, err = proc.communicate(timeout=600)
                assert proc.returncode == 0, err[-2000:]
                assert out.strip() == expected
    finally:
        kb.drop()
        kb.close()
