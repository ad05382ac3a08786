"""The notebooks: public API only, scripted chat models, and what their outputs show.

Each notebook is executed in a fresh kernel on the real embedded store (a temporary
``KINJECT_HOME``) with the bundled embedding model offline and no chat-model key, and
the text it prints is checked for the facts the notebook is there to show.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import langchain_knowledge_inject

pytestmark = [pytest.mark.integration]

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = [
    "01_quickstart.ipynb",
    "02_langgraph_agent.ipynb",
    "03_restricted_mode.ipynb",
    "04_memory_blocks.ipynb",
    "05_presets.ipynb",
]
PUBLIC_MODULES = {"langchain_knowledge_inject." + m for m in ("settings", "errors", "presets")}
MAX_BYTES = 64_000


def _code(notebook: nbformat.NotebookNode) -> str:
    return "\n".join(c.source for c in notebook.cells if c.cell_type == "code")


def _markdown(notebook: nbformat.NotebookNode) -> str:
    """The markdown cells' text, whitespace folded."""
    return " ".join(" ".join(c.source.split()) for c in notebook.cells if c.cell_type == "markdown")


def _stdout(notebook: nbformat.NotebookNode) -> list[str]:
    """The text each code cell printed (stdout), one string per code cell."""
    return [
        "".join(
            out.get("text", "")
            for out in cell.get("outputs", [])
            if out.get("output_type") == "stream" and out.get("name") == "stdout"
        )
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]


def _errors(notebook: nbformat.NotebookNode) -> list[str]:
    return [
        f"{out.get('ename')}: {out.get('evalue')}"
        for cell in notebook.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]


def test_the_five_notebooks_are_there():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_notebook_uses_the_public_api_only(name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    tree = ast.parse(_code(notebook).replace("\nawait ", "\n").replace("async for", "for"))
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "langchain_knowledge_inject"
        ):
            imported.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("langchain_knowledge_inject.") for a in node.names)
    assert imported, "the notebook imports nothing from the package"
    for module, names in imported:
        if module == "langchain_knowledge_inject":
            assert set(names) <= set(langchain_knowledge_inject.__all__), names
        else:
            assert module in PUBLIC_MODULES, module


@pytest.mark.parametrize("name", NAMES)
def test_saved_notebook_is_executed_small_and_says_its_models_are_scripted(name):
    path = NOTEBOOKS / name
    notebook = nbformat.read(path, as_version=4)
    assert path.stat().st_size < MAX_BYTES
    assert _errors(notebook) == []
    printed = _stdout(notebook)
    assert sum(bool(text) for text in printed) >= len(printed) // 2  # outputs are saved
    assert "scripted stand-in" in _markdown(notebook)
    assert "no API key" in _markdown(notebook)
    CHECKS[name](printed)  # the saved outputs show what a fresh run shows


def _check_01(out: list[str]) -> None:
    text = "\n".join(out)
    assert "hr-demo: 22 chunks, embeddings sentence-transformers/all-MiniLM-L6-v2" in text
    assert "2 chunks added" in text and "2 files unchanged" in text
    # current_message: the knowledge, the label and the question are one user message
    assert (
        "[3] human  3 content blocks: ['[Retrieved Knowledge]', '[User Message]', "
        "'How many days of annual leave do I get?']"
    ) in text
    assert re.search(r"^\[K[0-9a-f]{4}\] Source: leave_policy\.md$", text, re.MULTILINE)
    assert "Full-time employees receive 25 days of paid annual leave" in text
    # the other placements
    assert "[3] human  '[Retrieved Knowledge]'\n[4] human  'How many days" in text
    assert "[1] system '[Retrieved Knowledge]'" in text
    # the answer with its sources, and the cited document
    assert re.search(r"answer:  Full-time employees receive 25 days .*\[K[0-9a-f]{4}\]", text)
    assert "cited:   [('leave_policy.md', 'Annual leave policy > Entitlement')]" in text
    # a follow-up is searched with the terms of the turn before it
    assert "(heuristic)" in text and "answer:  Up to 5 unused days may be carried over" in text
    assert "history restored for current_message, dynamic_context and postfix" in text


def _check_02(out: list[str]) -> None:
    text = "\n".join(out)
    # the four steps, drawn; each streams its own update (restricted: safe_summarize too)
    assert "retrieve -.-> safe_summarize;" in text and "retrieve -.-> build_context;" in text
    assert "safe_summarize --> build_context;" in text and "build_context --> call_model;" in text
    steps = re.findall(r"^  (retrieve|safe_summarize|build_context|call_model) +\{", text, re.M)
    assert steps == ["retrieve", "build_context", "call_model", "retrieve", "safe_summarize",
                     "build_context", "call_model"]  # fmt: skip
    assert "'safe_summary': {'decision': 'refuse', 'reason': 'summarizer_error'}" in text
    # a graph of one's own: a permission check between the steps, a person's review
    assert "retrieve --> permission_check;" in text
    assert "permission_check -.-> safe_summarize;" in text
    assert "permission_check kept: ['travel_policy.md']" in text
    assert "paused before: ('call_model',)" in text
    assert re.search(r"for review: \['\[K[0-9a-f]{4}\] Source: travel_policy\.md'\]", text)
    assert "model: Hotels are capped at EUR 160 per night." in text
    assert "injected=True sources=['leave_policy.md'" in text
    assert "query='and can I carry them over? " in text
    assert "model: Up to 5 unused days may be carried over" in text
    assert "injected=False sources=[] scores=[]" in text
    assert "stored messages: 8 - none carries knowledge" in text
    assert "every prompt starts with the previous prompt's messages; roles alternate" in text
    assert "knowledge_injection: {'injected': True, 'sources': ['bike_service.md']" in text
    assert "context top_k=1:        ['travel_policy.md']" in text
    assert "knowledge_enabled=False: injected = False" in text
    assert "messages after restart: 14" in text and "knowledge_manifest in state: None" in text
    assert "injected this turn: ['travel_policy.md'] (context top_k=1)" in text
    assert "agent history: ['human', 'ai', 'tool', 'ai'] - no knowledge stored" in text
    assert "knowledge_injection: ['sick_leave_policy.md'" in text


def _check_03(out: list[str]) -> None:
    text = "\n".join(out)
    assert "after:  RestrictionFlags(restricted=True" in text
    assert "ConfigurationError: Knowledge base 'hr-confidential' is restricted" in text
    assert "      confidence: 'high'" in text  # the model said 0.85: only the bucket crosses
    assert "raw documents in the turn: [] | stubs: ['']" in text
    assert "[Restricted Knowledge Summary]\nDecision: answer (reason: answerable)" in text
    assert "raw passages in what the main model receives: 0" in text
    assert "--- copying: decision=refuse reason=leak_detected" in text
    assert "--- raising: decision=refuse reason=summarizer_error codes=['model_error']" in text
    assert "released? decision=refuse reason=leak_detected" in text
    rows = re.findall(
        r"^(injector|graph|node|middleware|tool) +(\w+) +(\w+) +(\w+) +(\d+)$", text, re.MULTILINE
    )
    expected = {"honest": "answerable", "copying": "leak_detected", "raising": "summarizer_error"}
    surfaces = {"injector", "graph", "node", "middleware", "tool"}
    assert len(rows) == 15 and {r[0] for r in rows} == surfaces
    assert all(r[3] == expected[r[1]] and r[4] == "0" for r in rows), rows
    assert text.count("RestrictedKnowledgeError: Knowledge base 'hr-confidential'") == 2
    assert "KnowledgeInjector(kb.as_retriever()): restricted = True" in text
    assert "restricted=False on a restricted knowledge base: restricted = True" in text
    channels = re.findall(r"^([a-z_ ]+?) +(\d+) +(\d+) +(\d+)$", text, re.MULTILINE)
    assert {c[0] for c in channels} >= {"final state", "checkpoints", "messages", "astream_events"}
    assert all(c[2] == "0" and c[3] == "0" for c in channels), channels
    assert "log WARNING: Knowledge base 'hr-confidential': restricted mode turned off" in text
    assert "injector:  [Retrieved Knowledge] | raw documents: 1" in text


def _check_04(out: list[str]) -> None:
    text = "\n".join(out)
    assert "-> Request leave" in text and "-> no procedure" in text
    assert "ben's memory is his own: [\"I'm planning a trip to Iceland.\"]" in text
    assert "model: Done: Saved: home_office=Lisbon" in text
    assert "manifest blocks: ['procedure', 'knowledge', 'episodic', 'facts']" in text
    assert "[User Message]\nHow do I request leave for my trip?" in text
    assert "user: My home office is Lisbon." in text  # session 4 recalls session 3
    assert "cut list:" in text and "'reason': 'token_budget'" in text
    assert "Decision: refuse (reason: summarizer_error)" in text
    assert "facts now: {'preferred_name': 'Ana', 'team': 'Payroll'}" in text


def _check_05(out: list[str]) -> None:
    text = "\n".join(out)
    assert "5 0.74 2000 system" in text
    assert "[facts: location=Lisbon, name=Ana]\n[context: " in text
    assert "\nThanks!\n" in text
    assert "[Current time: 2025-06-02 09:30 UTC]" in text
    assert "[Restricted Knowledge Bases]" in text
    assert "Decision: answer (reason: answerable)" in text
    assert "placement='current_message'" in text and "query_window=3" in text


CHECKS = {
    "01_quickstart.ipynb": _check_01,
    "02_langgraph_agent.ipynb": _check_02,
    "03_restricted_mode.ipynb": _check_03,
    "04_memory_blocks.ipynb": _check_04,
    "05_presets.ipynb": _check_05,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_and_shows_what_it_is_about(name, tmp_path, monkeypatch):
    monkeypatch.setenv("KINJECT_HOME", str(tmp_path / "store"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("KINJECT_CHAT_MODEL", raising=False)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    assert _errors(notebook) == []
    CHECKS[name](_stdout(notebook))
