"""The restriction matrix: where it is set x surface x where the tool came from.

Restriction is set on the knowledge base (its stored flag), on the surface
(``restricted=True``) or on the request (``configurable["restricted"]``). The
surfaces are the injector, the tool alone, and the graph and the agent middleware
each with a ``knowledge_base_search`` tool built by the surface (with its settings;
``search_tool=True`` for the middleware) or built separately (a plain
``create_knowledge_base_search_tool(kb)``). The main model calls the tool.

A copying summarizer (it returns the excerpts it was given) stands in for the
worst secondary model. In every cell: the main model gets safe summaries only, for
the injection and for the tool result, and no raw passage reaches the main model
or any channel a caller can read. Target: 0 everywhere.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from langchain_chroma import Chroma
from langchain_classic.retrievers import ContextualCompressionRetriever, EnsembleRetriever
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.messages import ToolMessage
from langchain_core.retrievers import BaseRetriever
from pydantic import PrivateAttr

from langchain_knowledge_inject import KnowledgeBase, RestrictedKnowledgeError
from tests.unit_tests.fakes import WordHashEmbedding
from tests.unit_tests.restricted_fixtures import (
    RESTRICTED_DOCUMENTS,
    count_copied_values,
    make_summarizer,
)
from tests.unit_tests.restricted_harness import CHANNELS, SURFACES, count_raw, run_surface

QUESTION = "What are the rules on annual leave, support targets and commission?"
CHUNKS = [d.page_content for d in RESTRICTED_DOCUMENTS]
WHERE = ("kb", "surface", "request")
CELLS = [
    ("injector", None),
    ("tool", None),
    ("graph", "surface"),
    ("graph", "separate"),
    ("middleware", "surface"),
    ("middleware", "separate"),
]
FIGURES: Counter[str] = Counter()


def _documents() -> list[Document]:
    return [d.model_copy(update={"id": None}) for d in RESTRICTED_DOCUMENTS]


@pytest.fixture(scope="module")
def kbs(tmp_path_factory):
    root = tmp_path_factory.mktemp("matrix")
    plain = KnowledgeBase("ops", path=root / "plain", embeddings=WordHashEmbedding())
    stored = KnowledgeBase(
        "ops", path=root / "stored", embeddings=WordHashEmbedding(), restricted=True
    )
    for kb in (plain, stored):
        kb.add_documents(_documents())
    yield {"plain": plain, "stored": stored}
    plain.close()
    stored.close()


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(("surface", "tool_origin"), CELLS)
def test_no_raw_text_in_any_cell(kbs, where, surface, tool_origin, caplog, monkeypatch):
    monkeypatch.setenv("KINJECT_LOG_MODEL_IO", "1")
    caplog.set_level(logging.DEBUG)
    kb = kbs["stored" if where == "kb" else "plain"]
    turn = run_surface(
        surface,
        kb=kb,
        question=QUESTION,
        summarizer=make_summarizer("copying"),
        where=where,
        tool_origin=tool_origin,
        search={"min_score": 0.0},
    )
    turn.channels["logs"] = [r.getMessage() for r in caplog.records]
    raw = {c: count_raw(turn.text(c), CHUNKS) for c in CHANNELS if c in turn.channels}
    values = count_copied_values(turn.text("main_model"), CHUNKS)
    FIGURES["cells"] += 1
    FIGURES["raw"] += sum(raw.values()) + values
    assert turn.reasons, "the turn did not go through restricted mode"
    assert set(turn.reasons) <= {"leak_detected", "summarizer_error"}
    if tool_origin is not None:
        tool_messages = [
            m for m in turn.channels["output"]["messages"] if isinstance(m, ToolMessage)
        ]
        assert tool_messages, "the main model did not get a tool result"
        for message in tool_messages:
            assert message.text.startswith("[Restricted Knowledge Summary]")
            assert message.artifact["reason"] == "leak_detected"  # the host lent its summarizer
    assert values == 0
    assert raw == dict.fromkeys(raw, 0)


def test_matrix_figures():
    """Prints the matrix total (run after the cells: ``pytest -s``)."""
    print(f"\nrestriction matrix: {FIGURES['cells']} cells, raw found {FIGURES['raw']}")
    assert FIGURES["raw"] == 0


# --- Wegent-style: the restricted knowledge-base list every turn, the model searches -------------

TOOL_DRIVEN = {
    "min_score": 0.0,
    "retrieval": "tool",
    "include_kb_meta": True,
    "kb_meta_every_turn": True,
    "log_model_io": True,
}
TOOL_CELLS = [
    ("graph", "surface"),
    ("graph", "separate"),
    ("middleware", "surface"),
    ("middleware", "separate"),
]


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(("surface", "tool_origin"), TOOL_CELLS)
def test_tool_driven_restricted_cells_leak_nothing(
    kbs, where, surface, tool_origin, caplog, monkeypatch
):
    """Nothing retrieved automatically; the tool's safe summary only; 0 raw anywhere, logs too."""
    monkeypatch.setenv("KINJECT_LOG_MODEL_IO", "1")
    caplog.set_level(logging.DEBUG)
    kb = kbs["stored" if where == "kb" else "plain"]
    turn = run_surface(
        surface,
        kb=kb,
        question=QUESTION,
        summarizer=make_summarizer("copying"),
        where=where,
        tool_origin=tool_origin,
        search=TOOL_DRIVEN,
    )
    logs = [r.getMessage() for r in caplog.records]
    turn.channels["logs"] = logs
    raw = {c: count_raw(turn.text(c), CHUNKS) for c in CHANNELS if c in turn.channels}
    values = count_copied_values(turn.text("main_model"), CHUNKS)
    FIGURES["tool_cells"] += 1
    FIGURES["tool_raw"] += sum(raw.values()) + values
    main = turn.channels["main_model"]
    assert any(t.startswith("[Restricted Knowledge Bases]\nSearch these") for t in main)
    assert not any("[Knowledge Bases]" in t for t in main)  # never the full description
    tool_messages = [m for m in turn.channels["output"]["messages"] if isinstance(m, ToolMessage)]
    assert tool_messages
    for message in tool_messages:
        assert message.text.startswith("[Restricted Knowledge Summary]")
    # the only summaries are the tool's results, one per run (invoke, astream_events):
    # no automatic search was summarized into the dynamic context
    assert sum(t.startswith("[Restricted Knowledge Summary]") for t in main) == 2
    assert any(line.startswith("LLM_REQUEST") for line in logs)
    assert values == 0
    assert raw == dict.fromkeys(raw, 0)


def test_tool_driven_restricted_fails_closed_without_a_summarizer(kbs):
    turn = run_surface(
        "graph", kb=kbs["plain"], question=QUESTION, summarizer=None, where="surface",
        tool_origin="surface", events=False, search=TOOL_DRIVEN,
    )  # fmt: skip
    tool_messages = [m for m in turn.channels["output"]["messages"] if isinstance(m, ToolMessage)]
    assert [m.artifact["reason"] for m in tool_messages] == ["summarizer_error"]
    assert count_raw(turn.text("main_model"), CHUNKS) == 0


def test_tool_driven_matrix_figures():
    """Prints the tool-driven cells' total (run after the cells: ``pytest -s``)."""
    print(f"\ntool-driven restricted: {FIGURES['tool_cells']} cells, raw {FIGURES['tool_raw']}")
    assert FIGURES["tool_raw"] == 0


# --- the wrapper matrix: each way of deriving a source from a restricted knowledge base --------


class _FirstFour(BaseDocumentCompressor):
    """A user's compressor: keeps the first four documents."""

    def compress_documents(
        self, documents: Any, query: str, callbacks: Any = None
    ) -> list[Document]:
        return list(documents)[:4]


class _HiddenRetriever(BaseRetriever):
    """A user's own retriever that keeps the inner one where the package cannot see it."""

    _inner: Any = PrivateAttr()

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self._inner = inner

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return self._inner.invoke(query)


def _plain_chroma(kb: KnowledgeBase) -> Chroma:
    """``langchain_chroma.Chroma`` opened by hand on the knowledge base's own collection."""
    own = kb.vectorstore()
    return Chroma(
        client=own._client,
        collection_name=own._collection.name,
        embedding_function=kb.embeddings,
    )


def _adopted(kb: KnowledgeBase, root: Any) -> KnowledgeBase:
    """``KnowledgeBase.from_chroma`` on the restricted knowledge base's collection."""
    own = kb.vectorstore()
    return KnowledgeBase.from_chroma(
        own._collection.name, name="adopted", client=own._client, path=root / "adopted",
        embeddings=kb.embeddings,
    )  # fmt: skip


DERIVATIONS: dict[str, Callable[..., Any]] = {
    "kb": lambda kb, open_kb, root: kb,
    "kb.as_retriever()": lambda kb, open_kb, root: kb.as_retriever(k=8),
    "kb.vectorstore()": lambda kb, open_kb, root: kb.vectorstore(),
    "kb.vectorstore().as_retriever()": lambda kb, open_kb, root: kb.vectorstore().as_retriever(),
    "KnowledgeBase.from_chroma": lambda kb, open_kb, root: _adopted(kb, root),
    "langchain_chroma.Chroma": lambda kb, open_kb, root: _plain_chroma(kb),
    "Chroma.as_retriever()": lambda kb, open_kb, root: _plain_chroma(kb).as_retriever(),
    "EnsembleRetriever": lambda kb, open_kb, root: EnsembleRetriever(
        retrievers=[open_kb.as_retriever(k=4), kb.as_retriever(k=4)], weights=[0.5, 0.5]
    ),
    "ContextualCompressionRetriever": lambda kb, open_kb, root: ContextualCompressionRetriever(
        base_compressor=_FirstFour(),
        base_retriever=kb.vectorstore().as_retriever(search_kwargs={"k": 8}),
    ),
    "a retriever hiding kb.as_retriever()": lambda kb, open_kb, root: _HiddenRetriever(
        kb.as_retriever(k=8)
    ),
}
WRAPPER_FIGURES: Counter[str] = Counter()
OPEN_TEXT = "The cafeteria opens at eight and serves lunch until two."


@pytest.fixture(scope="module")
def restricted_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("wrappers")
    kb = KnowledgeBase("vault", path=root / "vault", embeddings=WordHashEmbedding())
    kb.add_documents(_documents())
    kb.restrict()
    open_kb = KnowledgeBase("canteen", path=root / "canteen", embeddings=WordHashEmbedding())
    open_kb.add_documents([Document(OPEN_TEXT, metadata={"source": "canteen.md"})])
    yield kb, open_kb, root
    kb.close()
    open_kb.close()


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("derivation", list(DERIVATIONS))
def test_every_derived_source_is_restricted_on_every_surface(
    restricted_store, derivation, surface, caplog, monkeypatch
):
    """Nothing on the surface says restricted: the stored flag travels with the derived source.

    Every cell either goes through restricted mode (the copying summarizer's summary is
    refused) or, where the package cannot see the knowledge base behind a source, the
    source's own read refuses and the turn goes on without it: never raw text.
    """
    monkeypatch.setenv("KINJECT_LOG_MODEL_IO", "1")
    caplog.set_level(logging.DEBUG)
    kb, open_kb, root = restricted_store
    source = DERIVATIONS[derivation](kb, open_kb, root)
    turn = run_surface(
        surface, kb=source, question=QUESTION, summarizer=make_summarizer("copying"),
        where="kb", search={"min_score": 0.0},
    )  # fmt: skip
    turn.channels["logs"] = [r.getMessage() for r in caplog.records]
    raw = {c: count_raw(turn.text(c), CHUNKS) for c in CHANNELS if c in turn.channels}
    values = count_copied_values(turn.text("main_model"), CHUNKS)
    WRAPPER_FIGURES["cells"] += 1
    WRAPPER_FIGURES["raw"] += sum(raw.values()) + values
    if derivation.startswith("a retriever hiding"):
        assert not turn.reasons  # not seen as restricted: its own read refused instead
        assert "RestrictedKnowledgeError" in turn.text("logs")
    else:
        assert turn.reasons, f"{derivation} on the {surface} was not restricted"
        assert set(turn.reasons) <= {"leak_detected"}
    assert values == 0
    assert raw == dict.fromkeys(raw, 0)


@pytest.mark.parametrize(
    "read",
    [
        lambda kb, open_kb: kb.as_retriever().invoke(QUESTION),
        lambda kb, open_kb: kb.vectorstore().similarity_search(QUESTION),
        lambda kb, open_kb: kb.vectorstore().as_retriever().invoke(QUESTION),
        lambda kb, open_kb: EnsembleRetriever(
            retrievers=[open_kb.as_retriever(), kb.as_retriever()]
        ).invoke(QUESTION),
        lambda kb, open_kb: asyncio.run(kb.as_retriever().ainvoke(QUESTION)),
    ],
    ids=["as_retriever", "vectorstore", "vectorstore-retriever", "ensemble", "async"],
)
def test_derived_sources_refuse_raw_reads_outside_the_surfaces(restricted_store, read):
    kb, open_kb, _ = restricted_store
    with pytest.raises(RestrictedKnowledgeError, match="is restricted"):
        read(kb, open_kb)


def test_wrapper_matrix_figures():
    """Prints the wrapper matrix total (run after the cells: ``pytest -s``)."""
    cells = WRAPPER_FIGURES["cells"]
    print(f"\nwrapper matrix: {cells} cells, raw found {WRAPPER_FIGURES['raw']}")
    assert WRAPPER_FIGURES["raw"] == 0
