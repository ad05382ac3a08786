"""The ``kinject`` CLI and the sample knowledge base with the real embedding model."""

from __future__ import annotations

import os
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
        found = kb.search("CD8 T-cell infiltration", k=5, min_score=0.0, mode="keyword")
        chunks = kb.get_by_ids(found[0].metadata["chunk_ids"])  # search merges a document's
        stored = kb.vectorstore().get()["documents"]
    assert len(stored) > 1  # the file was cut into several chunks
    assert {chunk.page_content for chunk in chunks} <= set(stored)
    assert max(count(text) for text in stored) <= half_window


def test_the_reading_commands_load_neither_chromadb_nor_the_model(tmp_path) -> None:
    """On a store the real model filled, ``kbs``, ``check`` and the unknown-KB error read it
    without chromadb, torch or the model, and print what the chromadb path prints."""
    from langchain_knowledge_inject._store import peek

    store = tmp_path / "store"
    build_sample_knowledge_base(path=store).close()
    heavy = ("chromadb", "torch", "sentence_transformers", "transformers", "langchain.agents")
    probe = (
        "import json, sys\nfrom langchain_knowledge_inject._surfaces.cli import main\n"
        "code = main(sys.argv[1:])\n"
        f"print(json.dumps([code, [m for m in sys.modules if m.startswith({heavy!r})]]))\n"
    )
    for argv, code in ((["kbs"], 0), (["check", "--kb", "hr-demo"], 0), (["chat", "--kb", "x"], 2)):
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv, "--path", str(store)],
            capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
        )  # fmt: skip
        *printed, loaded = done.stdout.strip().splitlines()
        assert loaded == f"[{code}, []]", (argv, done.stderr)
        full = subprocess.run(  # the same command, peek made to step aside
            [sys.executable, "-c", "from langchain_knowledge_inject._store import peek\n"
             "peek.collections = peek.check = lambda *a: None\n" + probe, *argv, "--path",
             str(store)], capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
        )  # fmt: skip
        *full_printed, full_loaded = full.stdout.strip().splitlines()
        assert '"chromadb"' in full_loaded  # so this one took the chromadb path
        assert (full_printed, full.stderr) == (printed, done.stderr)
    assert peek.collections(store) is not None


@pytest.mark.slow
def test_every_command_on_a_chroma_server(chroma_server, tmp_path, monkeypatch) -> None:
    """``--host``/``--port`` or ``KINJECT_CHROMA_HOST``/``_PORT``: a real ``chroma run``."""
    exe = shutil.which("kinject") or shutil.which("kinject", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the console script `kinject` is not installed (pip install -e .)")
    (tmp_path / "faq.txt").write_text("The office Wi-Fi password changes every Monday.\n")
    server = ["--host", chroma_server.host, "--port", str(chroma_server.port)]

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [exe, *args, "--path", str(tmp_path / "cache")],
            capture_output=True, text=True, timeout=600, env=env, check=False,
        )  # fmt: skip

    ingested = run("ingest", str(tmp_path / "faq.txt"), "--kb", "cli-faq", *server)
    assert ingested.returncode == 0, ingested.stderr
    assert ingested.stderr == ""  # quiet: no progress bar for one small file, no model bars
    found = run("search", "wifi password", "--kb", "cli-faq", "--mode", "keyword", *server)
    assert found.returncode == 0 and "faq.txt" in found.stdout, found.stderr
    with KnowledgeBase("cli-faq", path=tmp_path / "other", client=chroma_server.client()) as kb:
        assert kb.count() == 1  # it is in the server, not in a local store
        kb.restrict()
    env = {**os.environ, "KINJECT_CHROMA_HOST": chroma_server.host,
           "KINJECT_CHROMA_PORT": str(chroma_server.port)}  # fmt: skip
    listed = run("kbs", env=env)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("cli-faq"))
    assert row.split()[1:3] == ["1", "restricted"]
    checked = run("check", "--kb", "cli-faq", env=env)
    assert checked.returncode == 0, checked.stderr
    assert not (tmp_path / "cache" / "chroma").exists()  # no embedded store was made
    with KnowledgeBase("cli-faq", path=tmp_path / "other", client=chroma_server.client()) as kb:
        kb.drop()  # the session's server is shared
