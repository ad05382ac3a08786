"""``kinject chat``: the dry run, a model's turns, and the one-line errors of a bad model."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_knowledge_inject import KnowledgeBase, strip_injected
from langchain_knowledge_inject._store import knowledge_base
from langchain_knowledge_inject._surfaces.chat import MODEL_ENV_VAR, run_chat
from langchain_knowledge_inject._surfaces.cli import main
from langchain_knowledge_inject._turn.placement import is_injected
from tests.unit_tests.fakes import LEAVE, NumberedChatModel, RecordingChatModel, WordHashEmbedding

# Every KnowledgeBase opened without ``embeddings=`` gets the same fake model.
pytestmark = pytest.mark.usefixtures("fake_default_model")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    with KnowledgeBase("hr", path=path, embeddings=WordHashEmbedding()) as kb:
        kb.add_documents([Document(LEAVE, metadata={"source": "leave.md"})])
    return path


@pytest.fixture
def by_name(monkeypatch) -> None:
    """``kinject chat`` opens the knowledge base with the default model: here the store's own."""
    monkeypatch.setattr(knowledge_base, "default_embeddings", lambda **_: WordHashEmbedding())
    monkeypatch.delenv(MODEL_ENV_VAR, raising=False)


def chat(store: Path, lines: str, model=None) -> str:
    out = io.StringIO()
    with KnowledgeBase("hr", path=store, embeddings=WordHashEmbedding(), create=False) as kb:
        assert run_chat(kb, model, stdin=io.StringIO(lines), stdout=out) == 0
    return out.getvalue()


def test_without_a_model_it_prints_the_messages_that_would_be_sent(store) -> None:
    out = chat(store, "How many days of annual leave?\n\nparking garage?\nexit\nignored\n")

    assert "(dry run)" in out
    first, second = out.split("--- turn 1:")[1].split("--- turn 2:")
    assert "2 messages would be sent" in first  # the knowledge travels with the question
    assert "[system]\nYou are a helpful assistant" in first
    assert "[human (injected)]\n[Retrieved Knowledge]" in first and LEAVE in first
    assert "say so honestly.\n\n[User Message]\n\nHow many days of annual leave?" in first
    # turn 2: history holds the user messages only, no earlier injection
    assert "3 messages would be sent" in second and "(injected)" not in second
    assert second.count("[human]") == 2 and LEAVE not in second
    assert "turn 3" not in out and "ignored" not in out  # the blank line skipped, exit ends


def test_a_model_answers_with_the_history_and_names_its_sources(store) -> None:
    model = NumberedChatModel()

    out = chat(store, "annual leave?\nparking garage?\n", model=model)

    assert "assistant> reply 1" in out and "(knowledge given to the model: leave.md)" in out
    assert "assistant> reply 2" in out and "(no knowledge retrieved for this message)" in out
    assert is_injected(model.received[0][1])
    assert [m.type for m in model.received[1]] == ["system", "human", "ai", "human"]
    assert model.received[1][1].text == "annual leave?"  # the history holds no injection


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
    sent = strip_injected(model.received[-1])
    assert [m.type for m in sent] == ["system", "human"]
    assert sent[-1].text == "annual leave?"  # the failed question was dropped


def test_kinject_chat_builds_the_model_with_init_chat_model(
    store, by_name, monkeypatch, capsys
) -> None:
    built: list[str] = []

    def fake_init(name: str, **kwargs: Any) -> NumberedChatModel:
        built.append(name)
        return NumberedChatModel()

    monkeypatch.setattr("langchain.chat_models.init_chat_model", fake_init)
    monkeypatch.setattr(sys, "stdin", io.StringIO("annual leave?\nquit\n"))

    argv = ["chat", "--kb", "hr", "--path", str(store), "--model", "fake:model-1"]
    assert main(argv) == 0

    assert built == ["fake:model-1"]
    out = capsys.readouterr().out
    assert "(model fake:model-1)" in out and "assistant> reply 1" in out


def test_kinject_chat_takes_the_model_from_the_environment(
    store, by_name, monkeypatch, capsys
) -> None:
    monkeypatch.setenv(MODEL_ENV_VAR, "nonsense")

    assert main(["chat", "--kb", "hr", "--path", str(store)]) == 2
    assert "cannot use the chat model 'nonsense'" in capsys.readouterr().err


def test_kinject_chat_runs_the_dry_run_on_the_tenant_asked(
    store, by_name, monkeypatch, capsys
) -> None:
    with KnowledgeBase("hr", path=store) as kb:
        kb.add_documents(
            [Document("Acme staff get 30 days of annual leave.", metadata={"source": "acme.md"})],
            tenant_id="acme",
        )
    monkeypatch.setattr(sys, "stdin", io.StringIO("annual leave days?\n"))

    assert main(["--path", str(store), "chat", "--kb", "hr", "--tenant", "acme"]) == 0

    out = capsys.readouterr().out
    assert "kinject chat: knowledge base 'hr' (dry run)." in out
    assert "30 days" in out and LEAVE in out  # the tenant's own and the shared documents


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


def test_chat_of_a_missing_kb_is_a_clear_error_and_creates_nothing(tmp_path, capsys) -> None:
    assert main(["chat", "--kb", "nope", "--path", str(tmp_path / "empty")]) == 2
    assert "No knowledge base named 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "empty").exists()


@pytest.mark.parametrize("command", ["ingest", "search", "kbs", "check", "demo", "chat"])
def test_every_commands_help_shows_examples(command, capsys) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "examples:\n" in out
    assert f"  kinject {command}" in out.split("examples:\n", 1)[1]


def test_chat_kb_has_help_text(capsys) -> None:
    main(["chat", "--help"])
    assert "--kb NAME             knowledge base the answers draw on" in capsys.readouterr().out
