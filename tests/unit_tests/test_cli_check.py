"""`kinject check`: drift between the keyword cache and Chroma, reported and repaired."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._surfaces.cli import main

# Every KnowledgeBase opened without ``embeddings=`` gets the same fake model.
pytestmark = pytest.mark.usefixtures("fake_default_model")


def test_check_reports_and_repairs_drift(tmp_path, fake_default_model, capsys):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=fake_default_model)
    ids = kb.add_documents(
        [
            Document(f"Rule {i} of the leave policy.", metadata={"source": "leave.md"})
            for i in range(4)
        ]
    ).ids
    # a row swapped in the cache itself: the same count, so no catch-up can notice it
    swapped = [("not-in-chroma", "Rule 9 of the leave policy.", "")]
    kb._cache._part("").chunks.write(swapped, ids[:1])
    kb.close()

    assert main(["check", "--kb", "hr", "--path", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "DRIFT" in out and "keyword missing 1, extra 1" in out

    assert main(["check", "--kb", "hr", "--path", str(tmp_path), "--repair"]) == 0
    assert "repaired" in capsys.readouterr().out

    assert main(["check", "--kb", "hr", "--path", str(tmp_path)]) == 0
    assert "consistent" in capsys.readouterr().out


def test_check_of_a_missing_kb_is_a_clear_error(tmp_path, capsys):
    assert main(["check", "--kb", "nope", "--path", str(tmp_path)]) == 2
    assert "No knowledge base named 'nope'" in capsys.readouterr().err


def test_check_prints_the_same_without_chromadb(tmp_path, default_named_model, monkeypatch, capsys):
    from langchain_knowledge_inject._store import peek

    with KnowledgeBase("hr", path=tmp_path) as kb:
        kb.add_documents([Document("Leave is 25 days.", metadata={"source": "leave.md"})])
        kb.add_documents([Document("Pay day.", metadata={"source": "p.md"})], tenant_id="acme")
    argv = ["check", "--kb", "hr", "--path", str(tmp_path)]
    fast = [(main(argv), capsys.readouterr()), (main([*argv, "--repair"]), capsys.readouterr())]
    assert peek.check(tmp_path, "hr") is not None  # so the lines above took the fast path

    monkeypatch.setattr(peek, "check", lambda *_: None)
    full = [(main(argv), capsys.readouterr()), (main([*argv, "--repair"]), capsys.readouterr())]
    assert fast == full
    assert fast[0][0] == 0
    assert "acme: 1 chunks in Chroma; keyword missing 0, extra 0" in fast[0][1].out
