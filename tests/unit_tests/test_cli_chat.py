"""``kinject chat``: the dry run, a model's turns, and the one-line errors of a bad model."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage, SystemMessage

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._store import knowledge_base
from langchain_knowledge_inject._surfaces.chat import MODEL_ENV_VAR, run_chat
from langchain_knowledge_inject._surfaces.cli import main
from tests.unit_tests.fakes import NumberedChatModel, RecordingChatModel, WordHashEmbedding

# Every KnowledgeBase opened without ``embeddings=`` gets the same fake model.
pytestmark = pytest.mark.usefixtures("fake_default_model")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    with KnowledgeBase("hr", path=path, embeddings=WordHashEmbedding()) as kb:
        kb.add_documents(
            [Document("Employees get 25 days of annual leave.", metadata={"source": "leave.md"})]
        )
    return path


def chat(store: Path, lines: str, model=None) -> str:
    out = io.StringIO()
    with KnowledgeBase("hr", path=store, embeddings=WordHashEmbedding(), create=False) as kb:
        assert run_chat(kb, model, stdin=io.StringIO(lines), stdout=out) == 0
    return out.getvalue()


def test_the_dry_run_shows_the_messages_with_the_knowledge_marked(store) -> None:
    out = chat(store, "how many days of annual leave?\n\nexit\nnot read\n")

    assert "(dry run)" in out
    assert "--- turn 1: 3 messages would be sent ---" in out
    assert "[human (injected)]" in out and "25 days of annual leave" in out
    assert "[human]\nhow many days of annual leave?" in out
    assert "turn 2" not in out and "not read" not in out  # the blank line skipped, exit ends


def test_a_model_answers_with_the_history_and_names_its_sources(store) -> None:
    model = NumberedChatModel()

    out = chat(store, "annual leave days?\nand the days of annual leave again?\n", model=model)

    assert "assistant> reply 1" in out and "assistant> reply 2" in out
    assert out.count("(knowledge given to the model: leave.md)") == 2
    second = model.received[1]
    assert isinstance(second[0], SystemMessage)
    assert next(m.text for m in second if isinstance(m, HumanMessage)) == "annual leave days?"
    assert second[-1].text == "and the days of annual leave again?"


def test_a_failing_model_call_is_one_line_and_the_chat_goes_on(store) -> None:
    def reply(messages) -> str:
        if "fail" in messages[-1].text:
            msg = "provider unreachable\nretry later"
            raise ConnectionError(msg)
        return "fine"

    model = RecordingChatModel(reply=reply)

    out = chat(store, "please fail\nannual leave?\n", model=model)

    assert (
        "  (the model call failed: ConnectionError: provider unreachable retry later; ask again)\n"
        in out
    )
    assert "assistant> fine" in out
    humans = [m.text for m in model.received[-1] if isinstance(m, HumanMessage)]
    assert "please fail" not in humans  # the failed question is not in the history


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("nonsense", "Unable to infer model provider for model='nonsense'"),
        ("nosuchprovider:x", "Supported providers: "),
    ],
)
def test_a_bad_model_name_is_one_line_saying_which_forms_are_allowed(
    store, model, expected, capsys
) -> None:
    assert main(["chat", "--kb", "hr", "--path", str(store), "--model", model]) == 2

    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith(f"kinject: error: cannot use the chat model {model!r}: ")
    assert expected in err
    assert "--model takes PROVIDER:MODEL, for example openai:gpt-4o-mini" in err


def test_a_missing_provider_package_is_one_line_naming_what_to_install(store, capsys) -> None:
    if importlib.util.find_spec("langchain_openai") is not None:
        pytest.skip("langchain-openai is installed here")

    argv = ["chat", "--kb", "hr", "--path", str(store), "--model", "openai:gpt-4o-mini"]
    assert main(argv) == 2

    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "pip install langchain-openai" in err
    assert "Traceback" not in err


def test_a_bad_model_fails_before_the_knowledge_base_is_looked_up(tmp_path, capsys) -> None:
    argv = ["chat", "--kb", "nope", "--path", str(tmp_path), "--model", "nonsense"]
    assert main(argv) == 2
    assert "cannot use the chat model 'nonsense'" in capsys.readouterr().err


def test_kinject_chat_runs_the_dry_run_on_the_tenant_asked(store, monkeypatch, capsys) -> None:
    # the CLI opens the knowledge base with the default model: here the store's own
    monkeypatch.setattr(knowledge_base, "default_embeddings", lambda **_: WordHashEmbedding())
    with KnowledgeBase("hr", path=store) as kb:
        kb.add_documents(
            [Document("Acme staff get 30 days of annual leave.", metadata={"source": "acme.md"})],
            tenant_id="acme",
        )
    monkeypatch.delenv(MODEL_ENV_VAR, raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO("annual leave days?\n"))

    assert main(["--path", str(store), "chat", "--kb", "hr", "--tenant", "acme"]) == 0

    out = capsys.readouterr().out
    assert "kinject chat: knowledge base 'hr' (dry run)." in out
    assert "30 days" in out and "25 days" not in out


def test_chat_of_a_missing_kb_is_a_clear_error(tmp_path, capsys) -> None:
    assert main(["chat", "--kb", "nope", "--path", str(tmp_path)]) == 2
    assert "No knowledge base named 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["ingest", "search", "kbs", "check", "demo", "chat"])
def test_every_commands_help_shows_examples(command, capsys) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:\n" in out
    assert f"  kinject {command}" in out.split("examples:\n", 1)[1]


def test_chat_kb_has_help_text(capsys) -> None:
    main(["chat", "--help"])
    assert "--kb NAME             knowledge base the answers draw on" in capsys.readouterr().out
