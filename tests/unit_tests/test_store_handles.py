"""The store's one registry+keyword transaction, its cached flags, and its layering."""

from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

import chromadb
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store.catalog import ChunkRow
from langchain_knowledge_inject._store.handles import KEYWORD_PAGE, StoreHandles
from langchain_knowledge_inject._store.metadata import RestrictionFlags
from langchain_knowledge_inject.errors import KnowledgeBaseNotFoundError, StoreTimeoutError

STORE = Path(__file__).resolve().parents[2] / "langchain_knowledge_inject" / "store"


@pytest.fixture
def handles(tmp_path) -> StoreHandles:
    h = StoreHandles("t", tmp_path, read_only=False)
    h.open()
    h.kb_id = "kb1"
    return h


def _row(cid: str, text: str, source: str = "a.md", partition: str = "") -> ChunkRow:
    return ChunkRow(cid, partition, source, text, {"source": source})


def _state(h: StoreHandles, partition: str = "") -> tuple[set[str], set[str]]:
    return h.catalog.partition_ids(h.kb_id, partition), h.keyword.ids(h.kb_id, partition)


def test_rows_land_in_the_registry_and_the_keyword_index_together(handles):
    handles.write_rows([_row("c1", "annual leave"), _row("c2", "expense receipts", "b.md")])
    assert _state(handles) == ({"c1", "c2"}, {"c1", "c2"})
    assert handles.keyword.search("kb1", "", "receipts", k=3)[0][0] == "c2"
    handles.write_rows(remove={"": ["c1"]})
    assert _state(handles) == ({"c2"}, {"c2"})


def test_a_failure_half_way_commits_nothing(handles, monkeypatch):
    handles.write_rows([_row("c1", "annual leave")])

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(handles.keyword, "add", full)  # after the registry rows were written
    with pytest.raises(sqlite3.OperationalError):
        handles.write_rows([_row("c2", "expense receipts")], remove={"": ["c1"]})
    assert _state(handles) == ({"c1"}, {"c1"})  # neither the new row nor the removal


def test_indexed_rows_can_be_fewer_than_registry_rows(handles):
    """A metadata-only update rewrites the registry row and leaves its keyword row alone."""
    handles.write_rows([_row("c1", "annual leave")])
    updated = ChunkRow("c1", "", "a.md", "annual leave", {"source": "a.md", "v": 2})
    handles.write_rows([updated], indexed=[])
    assert handles.catalog.get_chunks("kb1", "", ["c1"])["c1"].metadata["v"] == 2
    assert _state(handles) == ({"c1"}, {"c1"})


def test_sources_register_without_overwriting_a_fingerprint(handles):
    handles.write_rows([_row("c1", "x", "a.md")], sources={("", "a.md"): "hash-a"})
    handles.write_rows([_row("c2", "y", "a.md"), _row("c3", "z", "b.md")], sources="register")
    assert handles.catalog.get_fingerprint("kb1", "", "a.md") == "hash-a"
    assert handles.catalog.chunk_ids_for_source("kb1", "", "b.md")  # its chunk is there
    handles.write_rows([_row("c4", "w", "c.md")])  # "unchanged": catch-up leaves sources alone
    assert handles.catalog.get_fingerprint("kb1", "", "c.md") is None


def test_clear_empties_one_partition_first(handles):
    handles.write_rows([_row("c1", "x"), _row("t1", "y", partition="acme")])
    handles.write_rows([_row("c9", "fresh")], clear=[""], sources="register")
    assert _state(handles) == ({"c9"}, {"c9"})
    assert _state(handles, "acme") == ({"t1"}, {"t1"})


def test_keyword_writes_are_paged(handles, monkeypatch):
    sizes: list[int] = []
    real = handles.keyword.add

    def counting(kb_id, partition, rows):
        sizes.append(len(rows))
        return real(kb_id, partition, rows)

    monkeypatch.setattr(handles.keyword, "add", counting)
    rows = [_row(f"c{i}", f"text number {i}") for i in range(KEYWORD_PAGE + 5)]
    handles.write_rows(rows)
    assert sizes == [KEYWORD_PAGE, 5]
    assert len(_state(handles)[1]) == KEYWORD_PAGE + 5


def test_generation_counts_changes_only(handles):
    start = handles.generation
    handles.write_rows()
    assert handles.generation == start
    handles.write_rows([_row("c1", "x")])
    assert handles.generation == start + 1


# -- the restriction flags, cached ------------------------------------------------------


def test_restriction_is_cached_and_follows_another_connection(tmp_path, monkeypatch):
    emb = DeterministicFakeEmbedding(size=8)
    kb = KnowledgeBase("flags", path=tmp_path, embeddings=emb)
    assert kb.restriction == RestrictionFlags(restricted=False, sensitive_sources=False)
    reads: list[str] = []
    real = kb._catalog.get_kb
    monkeypatch.setattr(kb._catalog, "get_kb", lambda name: reads.append(name) or real(name))
    for _ in range(5):
        assert kb.restriction.restricted is False
    assert reads == []  # nothing changed: no catalog read
    other = KnowledgeBase("flags", path=tmp_path, embeddings=emb, restricted=True)
    assert kb.restriction == RestrictionFlags(restricted=True, sensitive_sources=False)
    other.drop()
    with pytest.raises(KnowledgeBaseNotFoundError):
        _ = kb.restriction
    other.close()
    kb.close()


def test_restriction_follows_this_connections_writes(tmp_path):
    kb = KnowledgeBase("own", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=8))
    assert kb.restriction.restricted is False
    kb._catalog.update_kb(kb.id, settings={"restricted": True})
    assert kb.restriction.restricted is True
    kb.close()


# -- recovery goes through the bounded calls ----------------------------------------------


def test_adopting_a_replaced_collection_goes_through_the_bounded_calls(tmp_path):
    """A catalog that describes another collection is re-adopted with bounded calls."""
    client = chromadb.EphemeralClient()
    emb = DeterministicFakeEmbedding(size=8)
    kb = KnowledgeBase(
        "bounded", path=tmp_path, client=client, embeddings=emb, timeout=60, sync_interval=None
    )
    kb.add_documents([Document("annual leave", metadata={"source": "a.md"})])
    calls: list[str] = []
    real = kb._calls.call

    def recording(operation, fn, /, *args, **kwargs):
        calls.append(operation)
        return real(operation, fn, *args, **kwargs)

    kb._calls.call = recording  # type: ignore[method-assign]
    kb._forget_collections()
    kb._catalog.set_collection_id(kb.id, "", "another-collection")
    kb._conn.commit()
    hits = kb.search("annual leave", k=1, mode="keyword", min_score=0.0)
    assert "get" in calls  # the adoption read the collection through the bound
    assert [d.page_content for d in hits] == ["annual leave"]
    kb._calls.call = real  # type: ignore[method-assign]
    kb.close()


def test_a_frozen_server_during_a_rebuild_raises_store_timeout(tmp_path, monkeypatch):
    """Another machine's catalog is rebuilt from the server: a frozen read fails in time."""
    import threading

    client = chromadb.EphemeralClient()
    emb = DeterministicFakeEmbedding(size=8)
    first = KnowledgeBase("frozen", path=tmp_path / "a", client=client, embeddings=emb)
    first.add_documents([Document("annual leave", metadata={"source": "a.md"})])
    collection_class = type(client.get_collection(f"kinject-{first.id}-shared"))
    release = threading.Event()
    real_get = collection_class.get

    def frozen_get(self, *args, **kwargs):
        release.wait(60)  # only a hang guard
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(collection_class, "get", frozen_get)
    try:
        with pytest.raises(StoreTimeoutError):
            KnowledgeBase("frozen", path=tmp_path / "b", client=client, embeddings=emb, timeout=3)
    finally:
        release.set()
    monkeypatch.undo()
    first.close()


# -- layering ---------------------------------------------------------------------------


def _runtime_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    return {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and id(node) not in skip
    }


def test_no_store_helper_imports_the_knowledge_base_module():
    helpers = [p for p in STORE.glob("*.py") if p.stem not in ("knowledge_base", "__init__")]
    importing = [
        p.name
        for p in helpers
        if "langchain_knowledge_inject._store.knowledge_base" in _runtime_imports(p)
    ]
    assert importing == []


def test_no_store_helper_reaches_into_a_knowledge_base():
    """Helpers get named handles; none touches ``kb._...`` of a KnowledgeBase."""
    offenders = []
    for path in STORE.glob("*.py"):
        if path.stem == "knowledge_base":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in ("kb", "knowledge_base", "base")
            ):
                offenders.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    assert offenders == []
