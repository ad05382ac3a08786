"""A store written by version 1 (SQLite catalog, record collection, FTS5) opens and is migrated.

The fixture was written by version 1 itself (``scripts/make_legacy_store.py``).
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

import chromadb
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import ConfigurationError, KnowledgeBase
from langchain_knowledge_inject._store.flags import RestrictionFlags, read_flags

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_store_v1.zip"


@pytest.fixture
def store(tmp_path) -> Path:
    target = tmp_path / "store"
    with zipfile.ZipFile(FIXTURE) as archive:
        archive.extractall(target)
    return target


@pytest.fixture
def emb() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=8)  # the model version 1 wrote the fixture with


def _collections(store: Path) -> dict[str, dict]:
    client = chromadb.PersistentClient(path=str(store / "chroma"))
    return {c.name: dict(c.metadata or {}) for c in client.list_collections()}


def test_a_version_1_store_opens_with_its_settings_and_chunks(store, emb, caplog):
    with caplog.at_level(logging.WARNING):
        kb = KnowledgeBase("legacy", path=store, embeddings=emb)
    assert kb.restriction == RestrictionFlags(True, True, "Ask about deals.", ("merger", "price"))
    info = kb.info
    assert (info.description, info.topics, info.chunk_count) == ("Deal room", ["mergers"], 3)
    hit = kb.search("amber walrus pilot", k=1, mode="keyword", min_score=0.0)[0]
    assert hit.page_content == "The merger code is amber-walrus-pilot."
    assert kb.search("bonus pool", k=1, mode="keyword", min_score=0.0, tenant_id="acme")
    assert kb.check().clean
    # the old files: the catalog kept aside, never read again; the record collection gone
    assert not (store / "catalog.sqlite3").exists()
    assert (store / "catalog.sqlite3.migrated").is_file()
    assert "catalog.sqlite3.migrated" in caplog.text
    names = _collections(store)
    assert not [n for n in names if n.endswith("-kb")]
    for name, metadata in names.items():  # every partition of both knowledge bases
        assert metadata["kinject:format"] == 2
        assert read_flags(metadata).restricted is (name.startswith(f"kinject-{kb.id}-"))
    kb.close()
    other = KnowledgeBase("open", path=store, embeddings=emb, create=False)
    assert other.restriction.restricted is False and other.info.chunk_count == 1
    assert [i.name for i in KnowledgeBase.list(store)] == ["legacy", "open"]


def test_listing_migrates_too_and_the_old_model_check_holds(store, emb):
    assert [(i.name, i.restricted) for i in KnowledgeBase.list(store)] == [
        ("legacy", True),
        ("open", False),
    ]
    with pytest.raises(Exception, match="built with the embedding model"):
        KnowledgeBase("legacy", path=store, embeddings=DeterministicFakeEmbedding(size=4))


def test_restriction_is_on_when_catalog_or_record_says_so_and_an_argument_cannot_undo_it(
    store, emb
):
    import sqlite3

    conn = sqlite3.connect(store / "catalog.sqlite3")
    conn.execute("UPDATE kbs SET settings = '{}' WHERE name = 'legacy'")  # a stale catalog
    conn.commit()
    conn.close()
    with pytest.raises(ConfigurationError, match=r"kb\.unrestrict\(\)"):
        KnowledgeBase("legacy", path=store, embeddings=emb, restricted=False)
    kb = KnowledgeBase("legacy", path=store, embeddings=emb)
    assert kb.restriction.restricted and kb.restriction.sensitive_sources  # the record said so


def test_a_server_side_knowledge_base_without_a_local_catalog_is_migrated(store, emb, tmp_path):
    """Another machine on the same Chroma: no catalog here, the record collection there."""
    (store / "catalog.sqlite3").unlink()
    client = chromadb.PersistentClient(path=str(store / "chroma"))
    kb = KnowledgeBase("legacy", path=tmp_path / "elsewhere", client=client, embeddings=emb)
    assert kb.restriction.restricted is True
    assert kb.search("amber walrus pilot", k=1, mode="keyword", min_score=0.0)


def test_a_knowledge_base_found_without_its_settings_opens_restricted(store, emb, caplog):
    (store / "catalog.sqlite3").unlink()
    client = chromadb.PersistentClient(path=str(store / "chroma"))
    record = next(c.name for c in client.list_collections() if c.name.endswith("-kb")
                  and "open" in str(c.metadata))  # fmt: skip
    client.delete_collection(record)
    del client
    kb = KnowledgeBase("open", path=store, embeddings=emb)
    assert kb.restriction == RestrictionFlags(True, True)
    assert "cannot be established" in caplog.text
    kb.unrestrict()
    assert kb.restriction.restricted is False


def test_the_fixture_is_what_the_script_writes():
    script = Path(__file__).resolve().parents[2] / "scripts" / "make_legacy_store.py"
    assert "legacy_store_v1" in script.read_text() and FIXTURE.is_file()
    with zipfile.ZipFile(FIXTURE) as archive:
        assert {"catalog.sqlite3", "chroma/chroma.sqlite3"} <= set(archive.namelist())
