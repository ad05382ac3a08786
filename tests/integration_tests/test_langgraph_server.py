"""The deployment example ``examples/langgraph_server`` served by a real LangGraph server.

A real ``chroma run`` server holds the knowledge base, built here with the bundled
embedding model; ``langgraph dev`` (the in-memory LangGraph API server, with its
default checks that raise on blocking I/O inside the event loop: no
``--allow-blocking``) serves the example's two graphs, the knowledge graph and the
agent with the middleware; the ``langgraph_sdk`` client runs a thread of several
turns on each, offline (the example's scripted model, no LangSmith, no analytics).

- The knowledge graph, as the server draws it (the studio's picture), has its four steps;
  its turns stream one update from each of its steps: ``retrieve``,
  ``build_context`` and ``call_model`` on the open knowledge base, and ``safe_summarize``
  between the first two on the restricted one.
- Open knowledge base: each reply carries a fact found only in the knowledge base
  (the scripted model answers from the injected block alone), and the conversation
  the client reads back (thread state and every checkpoint of its history) holds the
  user's words and the replies, never an injected block.
- Restricted knowledge base (with the scripted summarizer): the safe summary is
  injected, and nothing the client can read (every part streamed in every stream
  mode the server offers, the thread, its state and history, the runs) holds a
  distinctive piece of a raw chunk.

Both servers bind to 127.0.0.1 and are stopped by the fixtures; on a failure the
message carries the tail of the server's log, where the package logs why a turn
injected nothing.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.documents import Document

from langchain_knowledge_inject import KnowledgeBase
from tests.integration_tests.conftest import _free_port, stop_process

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_server"
HANG_GUARD = 300.0  # seconds: only against a hang (a loaded machine starts slowly), never a measure
INJECTED_HEADERS = ("[Retrieved Knowledge]", "[Restricted Knowledge Summary]")

OPEN_DOCUMENTS = [
    Document(
        "The office parrot is called Captain Zephyr and lives on the fourth floor.",
        metadata={"source": "office.md"},
    ),
    Document(
        "Staff get 27 days of annual leave; up to five days carry over to the next year.",
        metadata={"source": "leave.md"},
    ),
]
# question -> a fact that only the knowledge base holds, which the reply must carry
OPEN_TURNS = [
    ("What is the office parrot called?", "Captain Zephyr"),
    ("How many days of annual leave do staff get?", "27 days"),
    ("On which floor does the parrot live?", "fourth floor"),
]

RESTRICTED_DOCUMENTS = [
    Document(
        "The server room door code is 58213 and it changes every quarter.",
        metadata={"source": "security.md"},
    ),
    Document(
        "Project Halvorsen ships the Tarn upgrade to Brekke Maritime on 14 March.",
        metadata={"source": "projects.md"},
    ),
]
RESTRICTED_QUESTIONS = [
    "What is the door code of the server room?",
    "When does the project ship its upgrade, and to whom?",
    "How often does the door code change?",
]
# distinctive pieces of the raw chunks, none of them in a question or the safe summary;
# each a whole word, so that a random id or timestamp the client reads cannot hold one
SECRETS = ["58213", "Halvorsen", "Tarn", "Brekke", "14 March", "every quarter"]
# the scripted model's reply when nothing was injected (examples/.../scripted_models.py)
NO_KNOWLEDGE = "I have no knowledge about that."


@dataclass
class LangGraphDev:
    """A ``langgraph dev`` process serving a copy of the example on a loopback port."""

    workdir: Path
    env: dict[str, str]
    port: int = field(default_factory=_free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir.parent / f"langgraph-dev-{self.port}.log"

    def start(self) -> None:
        langgraph = shutil.which("langgraph") or str(Path(sys.executable).parent / "langgraph")
        # --no-reload: one process, stopped by terminate(); the blocking checks stay on
        command = [langgraph, "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
                   "--port", str(self.port)]  # fmt: skip
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                command, cwd=self.workdir, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + HANG_GUARD
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"langgraph dev exited early:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/ok", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:  # not up yet
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"langgraph dev did not answer within {HANG_GUARD}s:\n{self.log_tail()}")

    def stop(self) -> None:
        stop_process(self.process, timeout=30)
        self.process = None

    def log_tail(self, lines: int = 40) -> str:
        """The server log's last warnings, errors and lines of the package's loggers."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        wanted = ("[warning", "[error", "Traceback", "Error", "langchain_knowledge_inject")
        kept = [line[:1500] for line in text.splitlines() if any(w in line for w in wanted)]
        return "\n".join(kept[-lines:])


def _offline_env(**values: str) -> dict[str, str]:
    """This process's environment without LangSmith credentials, offline, plus ``values``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LANGSMITH_", "LANGCHAIN_", "KINJECT_", "CHROMA_"))
    }
    env.update(
        HF_HUB_OFFLINE="1",
        LANGSMITH_TRACING="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        ANONYMIZED_TELEMETRY="False",
        OMP_NUM_THREADS="1",
        LOG_COLOR="false",
        **values,
    )
    return env


@dataclass
class Served:
    """A running example server over one knowledge base."""

    server: LangGraphDev
    restricted: bool

    def client(self) -> Any:
        from langgraph_sdk import get_sync_client

        return get_sync_client(url=self.server.url, timeout=HANG_GUARD)

    def stream_modes(self) -> list[str]:
        """Every stream mode the server accepts, read from its own OpenAPI schema."""
        schema = httpx.get(f"{self.server.url}/openapi.json", timeout=HANG_GUARD).json()
        declared = schema["components"]["schemas"]["RunCreateStateful"]["properties"]
        return next(
            option["enum"] for option in declared["stream_mode"]["anyOf"] if "enum" in option
        )


@pytest.fixture(scope="module", params=["open", "restricted"])
def served(request, chroma_server, tmp_path_factory, real_embeddings) -> Iterator[Served]:
    """The example served over an open, then a restricted knowledge base in Chroma."""
    restricted = request.param == "restricted"
    name = f"langgraph-example-{request.param}"
    key = secrets.token_urlsafe(32) if restricted else None  # sealed text: both processes
    builder = KnowledgeBase(
        name,
        path=tmp_path_factory.mktemp("builder-catalog"),
        client=chroma_server.client(),
        embeddings=real_embeddings,
        restricted=restricted or None,
        seal_key=key,
    )
    root = tmp_path_factory.mktemp(f"langgraph-{request.param}")
    workdir = root / "langgraph_server"
    ignore = shutil.ignore_patterns("__pycache__", ".langgraph_api")
    shutil.copytree(EXAMPLE, workdir, ignore=ignore)  # the server writes into its folder
    env = _offline_env(
        CHROMA_HOST=chroma_server.host,
        CHROMA_PORT=str(chroma_server.port),
        KINJECT_EXAMPLE_KB=name,
        KINJECT_EXAMPLE_MODEL="scripted",
        KINJECT_HOME=str(root / "server-home"),  # the server's own keyword index
        **({"KINJECT_SEAL_KEY_" + name.upper().replace("-", "_"): key} if key else {}),
    )
    server = LangGraphDev(workdir=workdir, env=env)
    try:
        builder.add_documents(RESTRICTED_DOCUMENTS if restricted else OPEN_DOCUMENTS)
        server.start()
        yield Served(server=server, restricted=restricted)
    finally:
        server.stop()
        builder.drop()
        builder.close()


def _injected(text: str) -> bool:
    return any(header in text for header in INJECTED_HEADERS)


def _conversation(values: dict[str, Any]) -> list[tuple[str, str]]:
    return [(message["type"], message["content"]) for message in values.get("messages", [])]


def _run_thread(served: Served, graph: str, questions: list[str]) -> dict[str, Any]:
    """One thread of ``questions`` on ``graph``: the replies and all the client read."""
    client = served.client()
    modes = served.stream_modes()
    thread = client.threads.create()
    thread_id = thread["thread_id"]
    replies, parts, steps = [], [], []
    for question in questions:
        streamed = list(
            client.runs.stream(
                thread_id,
                graph,
                input={"messages": [{"role": "user", "content": question}]},
                stream_mode=modes,
                stream_subgraphs=True,
            )
        )
        errors = [part.data for part in streamed if part.event == "error"]
        assert not errors, f"{graph}: the run failed: {errors}\n{served.server.log_tail()}"
        parts.extend({"event": part.event, "data": part.data} for part in streamed)
        updates = [part.data for part in streamed if part.event == "updates"]
        steps.append([node for update in updates for node in update])
        state = client.threads.get_state(thread_id)
        replies.append(state["values"]["messages"][-1]["content"])
    return {
        "replies": replies,
        "steps": steps,
        "streamed": parts,
        "modes": {part["event"].split("|")[0] for part in parts},
        "state": client.threads.get_state(thread_id),
        "history": client.threads.get_history(thread_id, limit=1000),
        "thread": client.threads.get(thread_id),
        "runs": client.runs.list(thread_id, limit=100),
    }


def test_the_served_knowledge_graph_draws_its_four_steps(served):
    """What ``langgraph dev``'s studio draws: the server's drawing of the graph."""
    client = served.client()
    assistant = client.assistants.search(graph_id="knowledge")[0]
    drawn = client.assistants.get_graph(assistant["assistant_id"])
    steps = ["retrieve", "safe_summarize", "build_context", "call_model"]
    assert [node["id"] for node in drawn["nodes"]] == ["__start__", *steps, "__end__"]
    edges = {(edge["source"], edge["target"]) for edge in drawn["edges"]}
    assert {("retrieve", "safe_summarize"), ("safe_summarize", "build_context")} <= edges
    assert {("retrieve", "build_context"), ("build_context", "call_model")} <= edges


@pytest.mark.parametrize("graph", ["knowledge", "agent"])
def test_a_served_thread_gets_the_knowledge_and_keeps_its_history_clean(served, graph):
    questions = RESTRICTED_QUESTIONS if served.restricted else [q for q, _ in OPEN_TURNS]
    read = _run_thread(served, graph, questions)
    assert {"values", "updates", "events", "debug", "checkpoints", "tasks"} <= read["modes"]

    for question, reply in zip(questions, read["replies"], strict=True):
        assert reply != NO_KNOWLEDGE, (
            f"{graph}: {question!r} was answered {reply!r}: nothing was injected"
            f"\n--- server log ---\n{served.server.log_tail()}"
        )
    if served.restricted:  # a safe summary was injected, and no raw text reached the client
        dumped = json.dumps({k: v for k, v in read.items() if k != "modes"}, default=str)
        found = [re.search(rf"(?<![^\W_]){secret}(?![^\W_])", dumped, re.I) for secret in SECRETS]
        leaked = [dumped[max(0, at.start() - 300) : at.end() + 100] for at in found if at]
        assert not leaked, f"{graph}: raw chunk text reached the client: {leaked}"
        if graph == "knowledge":  # the graph's state says the summary was released
            assert read["state"]["values"]["safe_summary"]["decision"] == "answer"
    else:  # each reply carries a fact that only the knowledge base holds
        for (question, fact), reply in zip(OPEN_TURNS, read["replies"], strict=True):
            assert fact in reply, f"{graph}: {question!r} was answered {reply!r}"

    if graph == "knowledge":  # every turn's updates come from each of its steps, in order
        expected = ["retrieve", "build_context", "call_model"]
        if served.restricted:
            expected.insert(1, "safe_summarize")
        assert read["steps"] == [expected] * len(questions), read["steps"]

    conversation = _conversation(read["state"]["values"])
    assert [text for kind, text in conversation if kind == "human"] == questions
    assert [kind for kind, _ in conversation] == ["human", "ai"] * len(questions)
    checkpoints = [_conversation(step["values"]) for step in read["history"]]
    assert len(checkpoints) > len(questions)
    for messages in [conversation, *checkpoints]:
        assert not [text for _, text in messages if _injected(str(text))], "history not clean"
