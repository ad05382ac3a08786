"""Unit tests for the ``kinject`` CLI, offline: the default model is replaced by a fake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._ingest.sample_data import SAMPLE_QUESTIONS
from langchain_knowledge_inject._surfaces.cli import main

# Every KnowledgeBase opened without ``embeddings=`` gets the same fake model.
pytestmark = pytest.mark.usefixtures("fake_default_model")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "leave.md").write_text(
        "# Annual leave\n\nEmployees get 25 days of annual leave.\n", encoding="utf-8"
    )
    (folder / "kitchen.txt").write_text("The kitchen closes at 18:00.\n", encoding="utf-8")
    (folder / "slides.pptx").write_bytes(b"PK\x03\x04")
    return folder


def test_ingest_then_search_then_kbs(store, docs, capsys) -> None:
    assert main(["ingest", str(docs), "--kb", "hr", "--path", str(store), "--category", "hr"]) == 0
    out = capsys.readouterr().out
    assert "Read 2 files" in out
    assert "2 chunks added" in out
    assert "slides.pptx: unsupported file type '.pptx'" in out
    assert "Knowledge base 'hr' now holds 2 chunks." in out

    code = main(
        [
            "--path",
            str(store),
            "search",
            "kitchen closes",
            "--kb",
            "hr",
            "--mode",
            "keyword",
            "--min-score",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out.lstrip().startswith("1. ")
    assert "kitchen.txt" in out.splitlines()[0]
    assert "The kitchen closes at 18:00." in out

    assert main(["kbs", "--path", str(store)]) == 0
    listing = capsys.readouterr().out
    assert "hr" in listing
    assert " 2  " in listing


def test_reingest_reports_unchanged(store, docs, capsys) -> None:
    main(["ingest", str(docs), "--kb", "hr", "--path", str(store)])
    capsys.readouterr()

    assert main(["ingest", str(docs), "--kb", "hr", "--path", str(store)]) == 0
    out = capsys.readouterr().out
    assert "Read 0 files" in out
    assert "0 chunks added, 2 unchanged" in out
    assert "2 files unchanged" in out


def test_search_json_output(store, docs, capsys) -> None:
    main(["ingest", str(docs), "--kb", "hr", "--path", str(store)])
    capsys.readouterr()

    argv = ["search", "annual leave", "--kb", "hr", "--path", str(store), "--json", "--k", "1"]
    assert main([*argv, "--mode", "keyword", "--min-score", "0"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["metadata"]["source"] == "leave.md"  # what the model cites
    assert row["metadata"]["source_path"] == str((docs / "leave.md").resolve())
    assert 0 <= row["metadata"]["score"] <= 1


def test_search_missing_kb_is_a_clear_error_and_creates_nothing(store, capsys) -> None:
    code = main(["search", "anything", "--kb", "nope", "--path", str(store)])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("kinject: error: No knowledge base named 'nope'")
    assert "`kinject kbs` lists the knowledge bases" in err
    assert len(err.strip().splitlines()) == 1
    assert not store.exists()


def test_search_missing_kb_lists_existing(store, docs, capsys) -> None:
    main(["ingest", str(docs), "--kb", "hr", "--path", str(store)])
    capsys.readouterr()

    assert main(["search", "leave", "--kb", "HR2", "--path", str(store)]) == 2
    assert "(existing: hr)" in capsys.readouterr().err
    assert [info.name for info in KnowledgeBase.list(store)] == ["hr"]


def test_ingest_missing_path_fails_before_creating_the_kb(store, tmp_path, capsys) -> None:
    code = main(["ingest", str(tmp_path / "missing"), "--kb", "hr", "--path", str(store)])

    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f"kinject: error: path not found: {tmp_path / 'missing'}"
    )
    assert KnowledgeBase.list(store) == []


def test_ingest_empty_folder(store, tmp_path, capsys) -> None:
    (tmp_path / "empty").mkdir()

    assert main(["ingest", str(tmp_path / "empty"), "--kb", "hr", "--path", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kinject: error: folder is empty:")
    assert KnowledgeBase.list(store) == []


def test_ingest_bad_chunk_overlap(store, docs, capsys) -> None:
    argv = ["ingest", str(docs), "--kb", "hr", "--path", str(store)]

    assert main([*argv, "--chunk-size", "100", "--chunk-overlap", "100"]) == 2
    assert "chunk_overlap must be an integer in [0, chunk_size)" in capsys.readouterr().err


def test_search_without_results_suggests_a_lower_min_score(store, docs, capsys) -> None:
    main(["ingest", str(docs), "--kb", "hr", "--path", str(store)])
    capsys.readouterr()

    argv = ["search", "zebra", "--kb", "hr", "--path", str(store), "--mode", "keyword"]
    assert main(argv) == 0
    assert capsys.readouterr().out == "No results. Try a lower --min-score.\n"


def test_kbs_on_an_empty_store(tmp_path, capsys) -> None:
    assert main(["kbs", "--path", str(tmp_path / "nothing")]) == 0
    assert "No knowledge bases in" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "q"], "the following arguments are required: --kb"),
        (["search", "q", "--kb", "x", "--mode", "fuzzy"], "invalid choice: 'fuzzy'"),
        (["search", "q", "--kb", "x", "--k", "0"], "must be a positive integer"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_usage_errors_exit_2(argv, message, capsys) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_help_and_version_exit_0(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("ingest", "search", "kbs", "demo", "chat"):
        assert command in out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("kinject ")


def test_demo_runs_offline_with_the_fake_model(store, capsys) -> None:
    assert main(["demo", "--path", str(store)]) == 0
    out = capsys.readouterr().out

    for sample in SAMPLE_QUESTIONS:
        assert f"Q: {sample.question}" in out
    assert "Top result from the expected policy for" in out
    assert [info.name for info in KnowledgeBase.list(store)] == ["hr-demo"]


def test_path_after_the_subcommand_wins_over_the_global_one(store, tmp_path, docs) -> None:
    other = tmp_path / "other"
    main(["--path", str(other), "ingest", str(docs), "--kb", "hr", "--path", str(store)])

    assert [info.name for info in KnowledgeBase.list(store)] == ["hr"]
    assert KnowledgeBase.list(other) == []


def test_ingest_keeps_chunks_larger_than_the_kb_default_splitter(store, tmp_path, capsys) -> None:
    (tmp_path / "big.txt").write_text("word " * 300, encoding="utf-8")  # 1500 characters

    argv = ["ingest", str(tmp_path / "big.txt"), "--kb", "big", "--path", str(store)]
    assert main([*argv, "--chunk-size", "2000"]) == 0
    assert "1 chunk added" in capsys.readouterr().out


def test_ingest_lists_the_links_it_did_not_follow(store, docs, tmp_path, capsys) -> None:
    (tmp_path / "secret.txt").write_text("The door code is 7294.", encoding="utf-8")
    (docs / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (docs / "loop").symlink_to(".")

    assert main(["ingest", str(docs), "--kb", "hr", "--path", str(store)]) == 0
    out = capsys.readouterr().out
    assert "Read 2 files" in out
    assert "Symbolic links not followed (2):" in out
    assert f"  {docs / 'leak.txt'}: link to {tmp_path / 'secret.txt'}, outside {docs}" in out
    assert f"  {docs / 'loop'}: link to {docs}, a folder that holds it (a loop)" in out


def test_kbs_says_which_knowledge_bases_are_restricted(store, docs, capsys) -> None:
    main(["ingest", str(docs), "--kb", "open-kb", "--path", str(store)])
    main(["ingest", str(docs), "--kb", "secret-kb", "--path", str(store)])
    with KnowledgeBase("secret-kb", path=store) as kb:
        kb.restrict()
    capsys.readouterr()

    assert main(["kbs", "--path", str(store)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "CHUNKS", "ACCESS"]
    rows = {line.split()[0]: line.split()[2] for line in lines[1:] if line[:1].strip()}
    assert rows == {"open-kb": "open", "secret-kb": "restricted"}


def test_large_files_are_named_first_and_refused_on_request(store, docs, capsys, caplog) -> None:
    argv = ["ingest", str(docs), "--kb", "hr", "--path", str(store), "--large-file-mb", "0.00001"]
    assert main([*argv, "--skip-large"]) == 0
    assert "Read 0 files" in capsys.readouterr().out
    named = [r for r in caplog.records if "large file" in r.getMessage()]
    assert len(named) == 2 and all(r.levelname == "WARNING" for r in named)  # shown by default
    assert main(argv) == 0
    assert "Read 2 files" in capsys.readouterr().out


@pytest.mark.parametrize("verbose", [False, True])
def test_quiet_by_default_and_the_log_with_v(store, docs, capsys, monkeypatch, verbose) -> None:
    import logging

    monkeypatch.setattr(logging.root, "handlers", [])  # as in a console script: none yet
    monkeypatch.setattr(logging.root, "level", logging.root.level)
    argv = ["-v"] * verbose + ["kbs", "--path", str(store)]
    assert main(argv) == 0
    logging.getLogger("pypdf").warning("pypdf: a damaged xref table")
    logging.getLogger("langchain_knowledge_inject._ingest.loading").warning("a large file")
    logging.getLogger("langchain_knowledge_inject._store.embeddings").info("loading the model")
    err = capsys.readouterr().err
    assert "a large file" in err  # the package's warnings: always
    assert ("a damaged xref table" in err) is verbose  # pypdf's: with -v only
    assert ("loading the model" in err) is verbose


def test_a_chroma_server_that_cannot_be_reached_is_one_line_and_exit_1(store, capsys) -> None:
    from tests.integration_tests.conftest import _free_port

    argv = ["kbs", "--host", "127.0.0.1", "--port", str(_free_port()), "--path", str(store)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("kinject: error: cannot reach the Chroma server at 127.0.0.1:")
    assert len(err.splitlines()) == 1
