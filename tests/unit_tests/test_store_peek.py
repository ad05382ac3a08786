"""The read-only fast path (``_store/peek.py``) reports what chromadb reports, or steps aside.

Every store state below is read both ways on a real Chroma store: the collections
(names, metadata, counts), the listing of knowledge bases, and ``check``'s report
(the fast one against ``kb.check()``). Where the fast path cannot be sure (another
process, another schema, a queued write, a version-1 store, drift), it answers None.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import chromadb
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store import peek
from langchain_knowledge_inject._store.metadata import list_knowledge_bases
from langchain_knowledge_inject._store.storage import collection_name

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_store_v1.zip"
HEAVY = ("chromadb", "torch", "sentence_transformers", "transformers", "langchain.agents")


pytestmark = pytest.mark.usefixtures("default_named_model")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


def _docs(source: str, *texts: str) -> list[Document]:
    return [Document(text, metadata={"source": source}) for text in texts]


def _files(store: Path) -> dict[str, str]:
    return {
        str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(store.rglob("*"))
        if p.is_file()
    }


def _assert_same(store: Path, *kbs: KnowledgeBase, cached: bool = True) -> None:
    """Fast and chromadb paths agree on collections, listing and every check report.

    ``cached=False``: a knowledge base has no keyword cache yet, so the fast check
    steps aside until the full one has built it.
    """
    before = _files(store)
    fast = peek.collections(store)
    fast_list = list_knowledge_bases(store)
    fast_checks = {kb.name: peek.check(store, kb.name) for kb in kbs}
    assert _files(store) == before  # nothing written
    assert fast is not None
    client = chromadb.PersistentClient(path=str(store / "chroma"))
    full = {c.name: (dict(c.metadata or {}), c.count()) for c in client.list_collections()}
    assert {c.name: (c.metadata, c.count()) for c in fast} == full
    assert fast_list == list_knowledge_bases(store, client=client)
    for kb in kbs:
        report = kb.check()
        if not cached:
            assert fast_checks[kb.name] is None
            fast_checks[kb.name] = peek.check(store, kb.name)
        assert fast_checks[kb.name] == report
        assert fast_checks[kb.name].summary() == report.summary()  # type: ignore[union-attr]


def test_the_fast_path_agrees_with_chromadb_across_store_states(store):
    hr = KnowledgeBase("hr", path=store)
    _assert_same(store, hr, cached=False)  # an empty knowledge base

    ids = hr.add_documents(_docs("leave.md", "Leave is 25 days.", "Carry over 5 days."))
    hr.add_documents(_docs("sick.md", "Sick leave needs a note after three days."))
    _assert_same(store, hr)

    hr.add_documents(_docs("pay.md", "Pay day is the 25th."), tenant_id="acme")
    hr.add_documents(_docs("pay.md", "Pay day is the 1st."), tenant_id="globex")
    ops = KnowledgeBase("ops", path=store, description="Operations", topics=["on-call"])
    ops.add_documents(_docs("pager.md", "The pager rotates weekly."))
    _assert_same(store, hr, ops)

    hr.delete_source("sick.md")
    hr.delete(ids.ids[:1])
    _assert_same(store, hr, ops)

    hr.add_documents(_docs("leave.md", "Leave is 30 days from 2026."))  # the source replaced
    hr.restrict(sensitive_sources=True)
    _assert_same(store, hr, ops)

    hr.delete_tenant("globex")
    client = chromadb.PersistentClient(path=str(store / "chroma"))
    notes = client.create_collection(
        "plain-notes", metadata={"owner": "me", "n": 3, "ratio": 0.5, "on": True, "off": False}
    )
    notes.add(ids=["a", "b"], embeddings=[[1.0, 0.0], [0.0, 1.0]], documents=["x", "y"])
    _assert_same(store, hr, ops)

    ops.drop()
    hr.unrestrict()
    _assert_same(store, hr)
    hr.close()


def test_records_without_text_are_reported_alike(store):
    kb = KnowledgeBase("hr", path=store)
    kb.add_documents(_docs("leave.md", "Leave is 25 days."))
    client = chromadb.PersistentClient(path=str(store / "chroma"))
    shared = client.get_collection(collection_name(kb.id, ""))
    shared.add(ids=["no-text"], embeddings=[[0.1] * 16])  # a client that stores no document

    _assert_same(store, kb)
    report = peek.check(store, "hr")
    assert report is not None
    assert report.unexplained == ["no-text"]
    kb.close()


def test_check_steps_aside_where_a_catch_up_or_a_repair_is_due(store):
    kb = KnowledgeBase("hr", path=store)
    ids = kb.add_documents(_docs("leave.md", "Leave is 25 days.", "Carry over 5 days.")).ids
    assert peek.check(store, "hr") is not None

    kb._cache._part("").chunks.write([("not-in-chroma", "Rule 9.", "")], ids[:1])  # drift
    assert peek.check(store, "hr") is None
    assert not kb.check().clean  # the full path reports it

    kb.check(repair=True)
    assert peek.check(store, "hr") == kb.check()
    kb.close()


def test_check_steps_aside_for_a_missing_cache_and_other_settings(store, monkeypatch):
    with KnowledgeBase("hr", path=store) as kb:
        kb.add_documents(_docs("leave.md", "Leave is 25 days."))
    KnowledgeBase("other", path=store, embeddings=DeterministicFakeEmbedding(size=4)).close()
    assert peek.check(store, "hr") is not None

    assert peek.check(store, "other") is None  # another model: opening it would refuse
    assert peek.check(store, "nope") is None
    monkeypatch.setenv("KINJECT_EMBEDDINGS_BACKEND", "torch")
    assert peek.check(store, "hr") is None
    monkeypatch.delenv("KINJECT_EMBEDDINGS_BACKEND")

    for folder in (store / "keyword").iterdir():
        for part in folder.iterdir():
            if part.is_dir():
                for name in ("chunks", "documents"):
                    for file in (part / name).iterdir():
                        file.unlink()
    assert peek.check(store, "hr") is None
    with KnowledgeBase("hr", path=store) as kb:  # the full path rebuilds the cache
        assert kb.check().clean
    assert peek.check(store, "hr") is not None


def test_another_process_holding_the_store_means_chromadb(store):
    KnowledgeBase("hr", path=store).close()
    with (store / ".kinject.lock").open("a") as held:  # another open file: another holder
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert peek.collections(store) is None
        assert peek.check(store, "hr") is None
        assert [i.name for i in list_knowledge_bases(store)] == ["hr"]  # through chromadb
    assert peek.collections(store) is not None


def _edit(store: Path, sql: str, *params: object) -> None:
    with sqlite3.connect(store / "chroma" / "chroma.sqlite3") as db:
        db.execute(sql, params)


def test_another_chroma_schema_means_chromadb(store):
    KnowledgeBase("hr", path=store).close()
    _edit(store, "INSERT INTO migrations VALUES ('sysdb', 11, 'x.sql', '', '')")
    assert peek.collections(store) is None
    _edit(store, "DELETE FROM migrations WHERE version >= 10 AND dir = 'sysdb'")
    assert peek.collections(store) is None  # older: chromadb would migrate it


def test_a_write_still_in_chromas_queue_means_chromadb(store):
    with KnowledgeBase("hr", path=store) as kb:
        kb.add_documents(_docs("leave.md", "Leave is 25 days."))
        collection_id = kb._chroma.collection("").id
    assert peek.collections(store) is not None
    _edit(
        store,
        "INSERT INTO embeddings_queue (seq_id, operation, topic, id) "
        "VALUES ((SELECT MAX(seq_id) + 1 FROM embeddings_queue), 0, ?, 'queued')",
        f"persistent://default_tenant/default_database/{collection_id}",
    )
    assert peek.collections(store) is None
    assert peek.check(store, "hr") is None


def test_a_damaged_file_means_chromadb(store):
    KnowledgeBase("hr", path=store).close()
    (store / "chroma" / "chroma.sqlite3").write_bytes(b"not a database" * 100)
    assert peek.collections(store) is None
    assert peek.check(store, "hr") is None


def test_a_version_1_store_is_migrated_by_chromadb_first(tmp_path):
    with zipfile.ZipFile(FIXTURE) as archive:
        archive.extractall(tmp_path / "v1")
        archive.extractall(tmp_path / "v1-no-catalog")
    (tmp_path / "v1-no-catalog" / "catalog.sqlite3").unlink()
    assert peek.collections(tmp_path / "v1") is None  # its catalog waits to be migrated
    assert peek.collections(tmp_path / "v1-no-catalog") is None  # record collections

    listed = list_knowledge_bases(tmp_path / "v1")  # through chromadb, which migrates it
    assert sorted(info.name for info in listed) == ["legacy", "open"]
    assert peek.collections(tmp_path / "v1") is not None
    assert list_knowledge_bases(tmp_path / "v1") == listed


def test_kinject_reads_without_chromadb_or_the_model(store, tmp_path):
    with KnowledgeBase("hr", path=store) as kb:
        kb.add_documents(_docs("leave.md", "Leave is 25 days."))
    probe = (
        "import json, sys\n"
        "from langchain_knowledge_inject._surfaces.cli import main\n"
        "code = main(sys.argv[1:])\n"
        f"heavy = [m for m in sys.modules if m.startswith({HEAVY!r})]\n"
        "print(json.dumps({'code': code, 'heavy': heavy}))\n"
    )
    for argv, code in (
        (["kbs"], 0),
        (["check", "--kb", "hr"], 0),
        (["search", "leave", "--kb", "nope"], 2),
    ):
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv, "--path", str(store)],
            capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
        )  # fmt: skip
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result == {"code": code, "heavy": []}, (argv, done.stderr)


def test_the_unknown_knowledge_base_error_reads_the_same_both_ways(store, monkeypatch, capsys):
    from langchain_knowledge_inject._surfaces.cli import main

    with KnowledgeBase("hr", path=store) as kb:
        kb.add_documents(_docs("leave.md", "Leave is 25 days."))
    KnowledgeBase("ops", path=store).close()
    argv = ["search", "leave", "--kb", "nope", "--path", str(store)]
    fast = (main(argv), capsys.readouterr().err)
    assert peek.collections(store) is not None  # so the line above took the fast path
    monkeypatch.setattr(peek, "collections", lambda _: None)
    assert (main(argv), capsys.readouterr().err) == fast
    message = f"No knowledge base named 'nope' in {store} (existing: hr, ops)"
    assert fast == (2, f"kinject: error: {message} (`kinject kbs` lists the knowledge bases)\n")


def test_a_store_of_an_older_chromadb_is_migrated_by_chromadb_first(tmp_path):
    """``chroma_1_0_store.zip``: knowledge base ``hr`` (three chunks, one in tenant ``acme``'s
    partition, a 8-dimension fake embedding) written by this package on chromadb 1.0.21,
    whose schema lacks the newer migrations (sysdb 10, metadb 6)."""
    with zipfile.ZipFile(FIXTURE.with_name("chroma_1_0_store.zip")) as archive:
        archive.extractall(tmp_path / "old")
    store = tmp_path / "old"
    before = _files(store)
    assert peek.collections(store) is None  # chromadb migrates it first
    assert peek.check(store, "hr") is None
    assert _files(store) == before

    listed = list_knowledge_bases(store)  # through chromadb
    assert [(info.name, info.chunk_count) for info in listed] == [("hr", 3)]
    _assert_same(store)
