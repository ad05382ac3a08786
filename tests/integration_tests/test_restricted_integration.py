"""Restricted mode end to end: a real Chroma store, the real embedding model, real LangGraph.

A knowledge base stored as restricted (with sensitive sources) is served by a
restricted graph with a separately built ``knowledge_base_search`` tool and by a
``create_agent`` agent with the middleware; the secondary model copies the
excerpts it is given (the worst case). Nothing raw may reach the main model, the
state, any stream mode, ``astream_events``, the logs, or the bytes of the SQLite
checkpoint file.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3

import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from langchain_knowledge_inject import (
    KnowledgeBase,
    KnowledgeInjectionMiddleware,
    RestrictionFlags,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
)
from tests.unit_tests.fakes import RecordingChatModel
from tests.unit_tests.restricted_fixtures import RESTRICTED_DOCUMENTS, make_summarizer
from tests.unit_tests.restricted_harness import (
    STREAM_MODES,
    channel_text,
    count_raw,
    tool_calling_model,
)

pytestmark = pytest.mark.integration

QUESTION = "What are the rules on annual leave, support targets and commission?"
CHUNKS = [d.page_content for d in RESTRICTED_DOCUMENTS]
SOURCES = [str(d.metadata["source"]) for d in RESTRICTED_DOCUMENTS]


@pytest.fixture(scope="module")
def restricted_kb(tmp_path_factory, real_embeddings):
    kb = KnowledgeBase(
        "ops",
        path=tmp_path_factory.mktemp("restricted-store"),
        embeddings=real_embeddings,
        restricted=RestrictionFlags(restricted=True, sensitive_sources=True),
    )
    kb.add_documents([Document(d.page_content, metadata=dict(d.metadata)) for d in
                      RESTRICTED_DOCUMENTS])  # fmt: skip
    yield kb
    kb.close()


def _leaks(text: str) -> dict[str, int]:
    return {
        "raw_passages": count_raw(text, CHUNKS),
        "source_names": sum(text.count(s.rsplit("/", 1)[-1]) for s in SOURCES),
    }


def test_restricted_graph_and_agent_expose_nothing_raw(restricted_kb, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    seen: dict[str, object] = {}
    with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite")) as saver:
        model = tool_calling_model(QUESTION)
        graph = create_knowledge_graph(
            model, restricted_kb, summarizer_model=make_summarizer("copying"),
            tools=[create_knowledge_base_search_tool(restricted_kb, min_score=0.0)],
            checkpointer=saver, min_score=0.0,
        )  # fmt: skip
        config = {"configurable": {"thread_id": "g"}}
        inp = {"messages": [HumanMessage(QUESTION)]}
        seen["streams"] = list(graph.stream(inp, config, stream_mode=list(STREAM_MODES)))
        seen["state"] = graph.get_state(config).values
        seen["main_model"] = [m.text for r in model.received for m in r if m.text != QUESTION]

        agent_model = RecordingChatModel()

        def agent(checkpointer: object = None) -> object:
            middleware = KnowledgeInjectionMiddleware(
                restricted_kb, summarizer_model=make_summarizer("copying"), min_score=0.0
            )
            return create_agent(agent_model, middleware=[middleware], checkpointer=checkpointer)

        run = {"configurable": {"thread_id": "a"}}
        seen["agent_streams"] = list(agent(saver).stream(inp, run, stream_mode=list(STREAM_MODES)))

        async def events() -> list[object]:
            return [e async for e in agent().astream_events(inp, run, version="v2")]

        seen["events"] = asyncio.run(events())
        seen["agent_main_model"] = [m.text for r in agent_model.received for m in r]
    seen["logs"] = [r.getMessage() for r in caplog.records]
    with sqlite3.connect(tmp_path / "checkpoints.sqlite") as db:
        blobs = [
            value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")
            for table in ("checkpoints", "writes")
            for row in db.execute(f"SELECT * FROM {table}")
            for value in row
            if isinstance(value, (bytes, str))
        ]
    seen["checkpoint_file"] = blobs
    assert QUESTION in "\n".join(blobs)  # the scan reads the stored strings

    main = "\n".join(seen["main_model"])
    assert main.count("[Restricted Knowledge Summary]") >= 2  # injection and tool result
    tool_message = next(m for m in seen["state"]["messages"] if m.type == "tool")
    assert tool_message.artifact["reason"] == "leak_detected"  # the graph lent its summarizer
    assert "[Restricted Knowledge Summary]" in "\n".join(seen["agent_main_model"])
    found = {channel: _leaks(channel_text(value)) for channel, value in seen.items()}
    print(f"\nrestricted integration, raw found per channel: {found}")
    assert found == {channel: {"raw_passages": 0, "source_names": 0} for channel in seen}
