"""The ``kinject`` CLI and the sample knowledge base with the real embedding model."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._ingest.sample_data import (
    SAMPLE_QUESTIONS,
    build_sample_knowledge_base,
)
from langchain_knowledge_inject._surfaces.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("demo-store")


@pytest.mark.slow
def test_demo_finds_the_expected_policy_for_every_question(demo_store, capsys) -> None:
    assert main(["demo", "--path", str(demo_store)]) == 0
    out = capsys.readouterr().out

    assert f"for {len(SAMPLE_QUESTIONS)} of {len(SAMPLE_QUESTIONS)} questions" in out
    assert "model sentence-transformers/all-MiniLM-L6-v2" in out


@pytest.mark.parametrize("sample", SAMPLE_QUESTIONS, ids=lambda s: s.expected_source)
def test_sample_question_top_chunk_holds_the_answer(demo_store, sample) -> None:
    with build_sample_knowledge_base(path=demo_store) as kb:
        [top] = kb.search(sample.question, k=1)

    assert top.metadata["source"] == sample.expected_source
    assert sample.answer in top.page_content
    assert top.metadata["category"] == "hr"


def test_demo_is_idempotent(demo_store) -> None:
    with build_sample_knowledge_base(path=demo_store) as kb:
        before = kb.info.chunk_count
    with build_sample_knowledge_base(path=demo_store) as kb:
        assert kb.info.chunk_count == before > 7


def test_ingest_and_search_a_folder(tmp_path, capsys) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bikes.md").write_text(
        "# Cycle to work\n\nThe cycle-to-work scheme pays up to EUR 1,500 towards a bicycle.\n",
        encoding="utf-8",
    )
    (docs / "canteen.html").write_text(
        "<html><body><h1>Canteen</h1><p>Lunch is served from 12:00 to 14:00.</p></body></html>",
        encoding="utf-8",
    )
    (docs / "notes.bin").write_bytes(b"\x00\x01")
    store = str(tmp_path / "store")

    assert main(["ingest", str(docs), "--kb", "perks", "--path", store, "--tenant", "acme"]) == 0
    out = capsys.readouterr().out
    assert "Read 2 files" in out
    assert "notes.bin: unsupported file type" in out

    argv = ["search", "when is lunch served", "--kb", "perks", "--path", store, "--k", "1"]
    assert main([*argv, "--tenant", "acme"]) == 0
    out = capsys.readouterr().out
    assert "canteen.html [Canteen]" in out
    assert "Lunch is served from 12:00 to 14:00." in out

    assert main(argv) == 0  # the shared partition holds nothing: tenants are separate
    assert capsys.readouterr().out.startswith("No results.")


@pytest.mark.slow
def test_installed_console_script(tmp_path) -> None:
    exe = shutil.which("kinject") or shutil.which("kinject", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the console script `kinject` is not installed (pip install -e .)")
    store = tmp_path / "store"
    (tmp_path / "faq.txt").write_text(
        "The office Wi-Fi password changes every Monday.", encoding="utf-8"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [exe, *args, "--path", str(store)], capture_output=True, text=True, timeout=300
        )

    missing = run("search", "wifi", "--kb", "faq")
    assert missing.returncode == 2
    assert "kinject kbs" in missing.stderr

    bad_model = run("chat", "--kb", "faq", "--model", "nonsense")
    assert bad_model.returncode == 2
    assert bad_model.stderr.startswith("kinject: error: cannot use the chat model 'nonsense'")
    assert len(bad_model.stderr.splitlines()) == 1  # one line, no traceback

    assert run("ingest", str(tmp_path / "faq.txt"), "--kb", "faq").returncode == 0
    found = run("search", "wifi password", "--kb", "faq")
    assert found.returncode == 0, found.stderr
    assert "faq.txt" in found.stdout
    assert [info.name for info in KnowledgeBase.list(store)] == ["faq"]


def test_cli_ingest_fits_chunks_to_the_default_models_window(tmp_path) -> None:
    from langchain_knowledge_inject._store.embeddings import default_token_counter

    half_window = 128  # the default splitter: half the default model's 256 word pieces

    docs = tmp_path / "docs"
    docs.mkdir()
    # Dense technical prose: about 1000 characters hold well over 128 word pieces.
    sentence = "Immunohistochemical quantification of CD8+ T-cell infiltration (p<0.001). "
    (docs / "long.txt").write_text(sentence * 60, encoding="utf-8")
    store = str(tmp_path / "store")

    assert main(["ingest", str(docs), "--kb", "papers", "--path", store]) == 0
    count = default_token_counter()
    with KnowledgeBase("papers", path=store) as kb:
        chunks = kb.vectorstore().get()["documents"]  # chunks, not search's merged documents
    assert len(chunks) > 1  # the file was cut into several chunks
    assert max(count(text) for text in chunks) <= half_window
