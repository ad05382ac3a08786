"""Source names: relative to the ingest root for the model, full path as the source's identity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase, ingest
from langchain_knowledge_inject._ingest import loading as ingestion_module
from langchain_knowledge_inject._store.chroma import source_key
from langchain_knowledge_inject._turn.formatting import format_knowledge_block


@pytest.fixture
def kb(tmp_path: Path):
    emb = DeterministicFakeEmbedding(size=32)
    with KnowledgeBase("docs", path=tmp_path / "store", embeddings=emb) as knowledge_base:
        yield knowledge_base


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "leave.md").write_text("# Leave\n\n25 days of annual leave.\n")
    (folder / "travel.txt").write_text("Hotel cap is EUR 160 per night.\n")
    return folder


def _rows(kb: KnowledgeBase) -> list[tuple[str, dict[str, Any]]]:
    got = kb.vectorstore().get()
    return list(zip(got["ids"], got["metadatas"], strict=True))


def test_sources_are_relative_to_the_folder_and_the_full_path_is_kept(kb, docs):
    ingest(kb, docs)
    names = {m["source"]: m["source_path"] for _, m in _rows(kb)}
    assert names == {
        "hr/leave.md": str((docs / "hr" / "leave.md").resolve()),
        "travel.txt": str((docs / "travel.txt").resolve()),
    }


def test_a_single_file_is_named_by_its_file_name(kb, docs):
    ingest(kb, docs / "hr" / "leave.md")
    assert {m["source"] for _, m in _rows(kb)} == {"leave.md"}


def test_the_model_cites_the_short_name(kb, docs):
    ingest(kb, docs)
    hits = kb.search("annual leave", k=1, mode="keyword", min_score=0)
    block = format_knowledge_block(hits)
    assert "Source: hr/leave.md" in block and str(docs) not in block


def test_two_files_with_the_same_name_in_two_folders_stay_two_sources(kb, tmp_path):
    for team in ("a", "b"):
        (tmp_path / team).mkdir()
        (tmp_path / team / "leave.md").write_text(f"Team {team}: 25 days of leave.\n")
    report = ingest(kb, [tmp_path / "a", tmp_path / "b"])
    assert report.files_read == 2
    rows = _rows(kb)
    assert {m["source"] for _, m in rows} == {"leave.md"}
    assert len({source_key(m) for _, m in rows}) == 2
    again = ingest(kb, [tmp_path / "a", tmp_path / "b"])
    assert again.files_unchanged == 2 and again.chunks_added == 0
    assert kb.delete_source(str((tmp_path / "a" / "leave.md").resolve())) == 1
    left = [m["source_path"] for _, m in _rows(kb)]
    assert left == [str((tmp_path / "b" / "leave.md").resolve())]


def _old_version_ingest(kb: KnowledgeBase, paths: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ingest as the previous version did: ``source`` is the absolute path, no ``source_path``."""
    real = ingestion_module._load_and_split

    def old_metadata(path, *args, **kwargs):
        for chunk, read in real(path, *args, **kwargs):
            chunk.metadata["source"] = chunk.metadata.pop("source_path")
            yield chunk, read

    with monkeypatch.context() as patch:
        patch.setattr(ingestion_module, "_load_and_split", old_metadata)
        patch.setattr(ingestion_module, "_PIPELINE_VERSION", 1)
        ingest(kb, paths)


def test_reingesting_a_store_of_the_old_version_renames_in_place_without_duplicates(
    kb, docs, monkeypatch
):
    _old_version_ingest(kb, docs, monkeypatch)
    before = dict(_rows(kb))
    assert all(Path(m["source"]).is_absolute() and "source_path" not in m for m in before.values())

    report = ingest(kb, docs)

    after = dict(_rows(kb))
    assert sorted(after) == sorted(before)  # same chunk ids: nothing duplicated, nothing embedded
    assert report.chunks_added == 0 and report.chunks_updated == len(before)
    assert {m["source"] for m in after.values()} == {"hr/leave.md", "travel.txt"}
    assert all(m["source_path"] == before[cid]["source"] for cid, m in after.items())
    assert kb.info.chunk_count == len(before)
    again = ingest(kb, docs)
    assert again.files_unchanged == 2 and again.chunks_updated == again.chunks_added == 0


def test_a_file_changed_since_the_old_version_replaces_its_chunks(kb, docs, monkeypatch):
    _old_version_ingest(kb, docs, monkeypatch)
    (docs / "travel.txt").write_text("Hotel cap is EUR 180 per night.\n")

    report = ingest(kb, docs)

    rows = _rows(kb)
    assert report.chunks_replaced == 1 and report.chunks_added == 1
    assert len(rows) == 2 and kb.info.chunk_count == 2
    hits = kb.search("hotel cap", k=1, mode="keyword", min_score=0)
    assert "EUR 180" in hits[0].page_content and hits[0].metadata["source"] == "travel.txt"


def test_source_key_prefers_the_full_path():
    assert source_key({"source": "leave.md", "source_path": "/d/leave.md"}) == "/d/leave.md"
    assert source_key({"source": "leave.md"}) == "leave.md"
    assert source_key({}) == ""
