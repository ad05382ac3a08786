"""Running one restricted turn on each surface and collecting everything it exposes.

Shared by ``test_restricted_adversarial.py`` (every smuggling case x 5 surfaces, and
secrets split over the turns of a thread: :func:`run_thread`) and
``test_restricted_matrix.py`` (where restriction is set x surface x tool origin).

A turn's *channels* are every place a caller or an end user can read:

- ``main_model``: every message the main model received (and, for the tool, the
  tool's content);
- ``output``: what ``invoke()`` returned (the final state, the injector's messages,
  the tool's message);
- ``checkpoint``: every checkpoint and pending write of an ``InMemorySaver``;
- ``values``, ``updates``, ``messages``, ``custom``, ``debug``: each stream mode;
- ``events``: ``astream_events(version="v2")``;
- ``logs``: every log record (DEBUG and up, ``KINJECT_LOG_MODEL_IO=1``).

:func:`count_secret` and :func:`count_raw` count what leaked into a channel's text.
:func:`collection_readers` builds every way of reading a restricted collection without
the package (``test_restricted_sealed.py`` and its integration twin).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from langchain.agents import create_agent
from langchain_chroma import Chroma
from langchain_classic.retrievers import EnsembleRetriever
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import BaseModel

from langchain_knowledge_inject import (
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
)
from langchain_knowledge_inject._surfaces.node import create_knowledge_node
from tests.unit_tests.fakes import RecordingChatModel
from tests.unit_tests.restricted_fixtures import ScriptedSummarizer, count_raw_passages

SURFACES = ("injector", "graph", "node", "middleware", "tool")
STREAM_MODES = ("values", "updates", "messages", "custom", "debug")
CHANNELS = ("main_model", "output", "checkpoint", *STREAM_MODES, "events", "logs")
TOOL_NAME = "knowledge_base_search"


# --- test doubles ----------------------------------------------------------------------------


def tool_calling_model(query: str) -> RecordingChatModel:
    """A main model that first calls ``knowledge_base_search(query, k=8)``, then answers.

    ``k=8`` asks for more than injection showed, so the tool has fresh chunks to
    summarize (it skips the chunks already injected this turn).
    """
    args = {"query": query, "k": 8}
    call = {"name": TOOL_NAME, "args": args, "id": "call-1", "type": "tool_call"}
    return RecordingChatModel(script=[AIMessage("", tool_calls=[call]), AIMessage("done")])


class ListKB:
    """A knowledge base that returns ``chunks`` for every search (contract: search/asearch/info)."""

    def __init__(
        self,
        chunks: tuple[str, ...] | list[str],
        *,
        name: str = "vault",
        restricted: bool = False,
        sensitive_sources: bool = False,
    ) -> None:
        self.name = name
        self.documents = [
            Document(
                text,
                id=f"{name}-{i}",
                metadata={
                    "source": f"/kb/{name}/{name}_memo_{i}_2024.md",
                    "score": round(0.9 - 0.05 * i, 2),
                    "chunk_id": f"{name}-{i}",
                    "kb_name": name,
                },
            )
            for i, text in enumerate(chunks)
        ]
        self.info = SimpleNamespace(
            name=name, id=f"kb-{name}", description="", topics=[], restricted=restricted,
            sensitive_sources=sensitive_sources, routing_hint="", routing_keywords=[],
        )  # fmt: skip
        self.calls: list[dict[str, Any]] = []

    def search(self, query: str, **kwargs: Any) -> list[Document]:
        self.calls.append({"query": query, **kwargs})
        return [d.model_copy() for d in self.documents]

    async def asearch(self, query: str, **kwargs: Any) -> list[Document]:
        return self.search(query, **kwargs)


def hostile_summarizer(reply: Mapping[str, Any] | Callable[..., str]) -> ScriptedSummarizer:
    """A summarizer that answers ``reply`` (a dict, or a function of its messages)."""
    if callable(reply):
        return ScriptedSummarizer(reply=reply)
    text = json.dumps({"confidence": 0.9, **reply}, ensure_ascii=False)
    return ScriptedSummarizer(reply=lambda messages: text)


# --- collecting the text of a channel --------------------------------------------------------


def strings_of(value: Any, _seen: set[int] | None = None, _depth: int = 0) -> list[str]:
    """Every string inside ``value`` (dict keys and values, lists, models, dataclasses)."""
    seen = _seen if _seen is not None else set()
    if isinstance(value, str):
        return [value]
    if value is None or isinstance(value, (bool, int, float, bytes)) or _depth > 40:
        return []
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, BaseModel):
        try:
            value = value.model_dump()
        except Exception:
            value = vars(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        out: list[str] = []
        for key, item in value.items():
            out += strings_of(key, seen, _depth + 1) + strings_of(item, seen, _depth + 1)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        return [s for item in value for s in strings_of(item, seen, _depth + 1)]
    if hasattr(value, "__dict__") and not callable(value):
        return strings_of(vars(value), seen, _depth + 1)
    return []


# Ids, hashes, timestamps and counts the package and LangGraph write: a short secret such
# as "529" must not be "found" in a run id, a sha256 prefix or "529 characters".
_INCIDENTAL = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|sha256 [0-9a-f]+"
    r"|\b\d{4}-\d{2}-\d{2}T[\d:.+\-Z]+"
    r"|\b\d+ (?:chars|characters|chunks|tokens|words)\b"
    r"|max_tokens=\d+"
    r"|\b(?:tokens|query_chars|history_removed|ms)=\d+(?:\.\d+)?",  # the turn log's counts
    re.IGNORECASE,
)


def channel_text(value: Any) -> str:
    """The text of a channel, with incidental ids and counts removed."""
    return _INCIDENTAL.sub(" ", "\n".join(strings_of(value)))


def count_secret(text: str, secret: str) -> int:
    """Occurrences of ``secret`` as the chunk writes it (case-insensitive, as a whole token)."""
    pattern = rf"(?<![0-9A-Za-z]){re.escape(secret.casefold())}(?![0-9A-Za-z])"
    return len(re.findall(pattern, text.casefold()))


_WORD = re.compile(r"[^\W_]+")


def count_raw(text: str, chunks: list[str] | tuple[str, ...], question: str = "") -> int:
    """Chunks sharing a run of 6 consecutive words with ``text``.

    Runs the user's question also holds are the user's own words, not a leak.
    """
    if not question:
        return count_raw_passages(text, list(chunks))
    words = _WORD.findall(text.casefold())
    own = f" {' '.join(_WORD.findall(question.casefold()))} "
    shared = {" ".join(words[i : i + 6]) for i in range(len(words) - 5)}
    leaked = 0
    for chunk in chunks:
        cw = _WORD.findall(chunk.casefold())
        runs = {" ".join(cw[i : i + 6]) for i in range(len(cw) - 5)}
        leaked += any(run in shared and f" {run} " not in own for run in runs)
    return leaked


# --- one turn on one surface -----------------------------------------------------------------


@dataclasses.dataclass
class Turn:
    """Everything one restricted turn exposed, channel by channel."""

    channels: dict[str, Any] = dataclasses.field(default_factory=dict)
    reasons: list[str] = dataclasses.field(default_factory=list)
    """Reason codes of the safe summaries shown to the main model, in order."""

    def text(self, channel: str) -> str:
        return channel_text(self.channels.get(channel))


def _main_text(model: RecordingChatModel, question: str) -> list[str]:
    return [m.text for received in model.received for m in received if m.text != question]


_REASON_RE = re.compile(r"Decision: (?:answer|refuse) \(reason: ([a-z_]+)\)")


def _reasons(texts: list[str]) -> list[str]:
    return [m for text in texts for m in _REASON_RE.findall(text)]


def _events(runnable: Any, inp: Any, config: dict[str, Any]) -> list[Any]:
    async def collect() -> list[Any]:
        return [e async for e in runnable.astream_events(inp, config, version="v2")]

    return asyncio.run(collect())


def _checkpoints(saver: InMemorySaver, thread: str) -> list[Any]:
    return list(saver.list({"configurable": {"thread_id": thread}}))


def _stream_graph(graph: Any, inp: Any, config: dict[str, Any], turn: Turn) -> None:
    for mode in STREAM_MODES:
        turn.channels[mode] = []
    for mode, chunk in graph.stream(inp, config, stream_mode=list(STREAM_MODES)):
        turn.channels[mode].append(chunk)


def _node_graph(
    model: Any, kb: Any, summarizer: Any, flag: dict[str, Any], saver: InMemorySaver
) -> Any:
    """A one-node ``MessagesState`` graph around :func:`create_knowledge_node`."""
    builder = StateGraph(MessagesState)
    node = create_knowledge_node(model, kb, summarizer_model=summarizer, **flag)
    builder.add_node("answer", node)
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=saver)


def run_thread(surface: str, *, kb: Any, questions: list[str], summarizer: Any) -> list[Turn]:
    """Several turns of one thread (``surface="tool"``: several calls of one tool).

    Restriction is set on the surface. Each returned :class:`Turn` has the
    ``main_model`` channel of its turn and the reason codes shown to the main model.
    """
    config: dict[str, Any] = {"configurable": {"thread_id": "t-thread"}}
    model = RecordingChatModel()
    turns: list[Turn] = []
    if surface == "tool":
        tool = create_knowledge_base_search_tool(kb, summarizer_model=summarizer, restricted=True)
        for i, question in enumerate(questions):
            call = {"name": TOOL_NAME, "args": {"query": question}, "id": f"c-{i}",
                    "type": "tool_call"}  # fmt: skip
            texts = [tool.invoke(call, config).text]
            turns.append(Turn(channels={"main_model": texts}, reasons=_reasons(texts)))
        return turns
    saver = InMemorySaver()
    flag = {"restricted": True}
    if surface == "node":
        runnable = _node_graph(model, kb, summarizer, flag, saver)
    elif surface == "graph":
        runnable = create_knowledge_graph(
            model, kb, summarizer_model=summarizer, checkpointer=saver, **flag
        )
    else:
        middleware = KnowledgeInjectionMiddleware(kb, summarizer_model=summarizer, **flag)
        runnable = create_agent(model, tools=[], middleware=[middleware], checkpointer=saver)
    for question in questions:
        seen = len(model.received)
        runnable.invoke({"messages": [HumanMessage(question)]}, config)
        texts = [m.text for r in model.received[seen:] for m in r if m.text != question]
        turns.append(Turn(channels={"main_model": texts}, reasons=_reasons(texts)[-1:]))
    return turns


def run_surface(
    surface: str,
    *,
    kb: Any,
    question: str,
    summarizer: BaseChatModel | None,
    where: str = "surface",
    tool_origin: str | None = None,
    events: bool = True,
    search: dict[str, Any] | None = None,
) -> Turn:
    """One turn of ``surface`` over ``kb`` with restriction set at ``where``.

    Args:
        surface: ``injector``, ``graph``, ``node``, ``middleware`` or ``tool``.
        kb: The knowledge base (its stored flag counts when ``where == "kb"``).
        question: The user's question.
        summarizer: The secondary model.
        where: ``"kb"`` (the knowledge base's flag must already be on), ``"surface"``
            (``restricted=True``) or ``"request"`` (``configurable["restricted"]``).
        tool_origin: For graph and middleware (the node has none): ``None`` (no
            tool), ``"surface"`` (built with the surface's settings) or ``"separate"`` (a plain
            ``create_knowledge_base_search_tool(kb)``, no summarizer of its own).
        events: Also run ``astream_events`` (a second turn, on a fresh thread).
        search: ``min_score`` / ``mode`` for every surface and tool.
    """
    search = dict(search or {})
    flag = {"restricted": True, **search} if where == "surface" else dict(search)
    configurable: dict[str, Any] = {"thread_id": "t-1"}
    if where == "request":
        configurable["restricted"] = True
    config: dict[str, Any] = {"configurable": configurable}
    turn = Turn()
    inp = {"messages": [HumanMessage(question)]}
    if surface == "injector":
        injector = KnowledgeInjector(kb, summarizer_model=summarizer, **flag)
        model = RecordingChatModel()
        out = injector.invoke([HumanMessage(question)], config)
        model.invoke(out)
        turn.channels["output"] = out
        texts = _main_text(model, question)
        if events:
            turn.channels["events"] = _events(injector, [HumanMessage(question)], config)
    elif surface == "tool":
        tool = create_knowledge_base_search_tool(kb, summarizer_model=summarizer, **flag)
        call = {"name": TOOL_NAME, "args": {"query": question}, "id": "c-1", "type": "tool_call"}
        message = tool.invoke(call, config)
        turn.channels["output"] = message
        texts = [message.text]
        if events:
            turn.channels["events"] = _events(tool, call, config)
    else:
        model = tool_calling_model(question) if tool_origin else RecordingChatModel()
        saver = InMemorySaver()
        tools = []
        if tool_origin == "separate":
            tools = [create_knowledge_base_search_tool(kb, **search)]
        if surface == "node":
            runnable = _node_graph(model, kb, summarizer, flag, saver)
        elif surface == "graph":
            if tool_origin == "surface":
                tools = [create_knowledge_base_search_tool(kb, summarizer_model=summarizer, **flag)]
            runnable = create_knowledge_graph(
                model, kb, summarizer_model=summarizer, tools=tools or None, checkpointer=saver,
                keep_manifest=True, **flag,
            )  # fmt: skip
        else:
            middleware = KnowledgeInjectionMiddleware(
                kb, summarizer_model=summarizer, search_tool=tool_origin == "surface",
                keep_manifest=True, **flag,
            )  # fmt: skip
            runnable = create_agent(model, tools=tools, middleware=[middleware], checkpointer=saver)
        _stream_graph(runnable, inp, config, turn)
        turn.channels["output"] = runnable.get_state(config).values
        turn.channels["checkpoint"] = _checkpoints(saver, "t-1")
        texts = _main_text(model, question)
        if events:
            model.script = [m for m in tool_calling_model(question).script] if tool_origin else []
            events_config = {**config, "configurable": {**configurable, "thread_id": "t-2"}}
            received = len(model.received)
            turn.channels["events"] = _events(runnable, inp, events_config)
            texts += [m.text for r in model.received[received:] for m in r if m.text != question]
    turn.channels["main_model"] = texts
    turn.reasons = _reasons(texts)
    return turn


# --- readers of a restricted collection that are not the package -------------------------------


class UserRetriever(BaseRetriever):
    """A user's own retriever: its store sits under a field name no list knows."""

    archive_backend: Any

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return self.archive_backend.similarity_search(query, k=8)


class RawClientRetriever(BaseRetriever):
    """A retriever over a raw ``chromadb`` collection, queried by vector as any app would."""

    raw_collection: Any
    embeddings: Any

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        got = self.raw_collection.query(
            query_embeddings=[self.embeddings.embed_query(query)], n_results=8,
            include=["documents"],
        )  # fmt: skip
        rows = zip(got["ids"][0], got["documents"][0], strict=True)
        return [Document(text, id=cid) for cid, text in rows]


def collection_readers(client: Any, name: str, embeddings: Any) -> dict[str, Any]:
    """Every way of :data:`READERS` to read the collection ``name`` without the package."""

    def plain() -> Chroma:
        return Chroma(client=client, collection_name=name, embedding_function=embeddings)

    def raw() -> RawClientRetriever:
        return RawClientRetriever(raw_collection=client.get_collection(name), embeddings=embeddings)

    nested: Any = plain().as_retriever()
    for _ in range(3):
        nested = EnsembleRetriever(retrievers=[nested])
    return {
        "plain Chroma": plain(),
        "Chroma.as_retriever()": plain().as_retriever(search_kwargs={"k": 8}),
        "raw chromadb client": raw(),
        "ensemble of them": EnsembleRetriever(retrievers=[plain().as_retriever(), raw()]),
        "ensemble in an ensemble in an ensemble": nested,
        "a user's retriever, unlisted field": UserRetriever(archive_backend=plain()),
        "a RunnableLambda in an ensemble": EnsembleRetriever(
            retrievers=[RunnableLambda(lambda q: plain().similarity_search(q, k=8))]
        ),
    }


READERS = (
    "plain Chroma",
    "Chroma.as_retriever()",
    "raw chromadb client",
    "ensemble of them",
    "ensemble in an ensemble in an ensemble",
    "a user's retriever, unlisted field",
    "a RunnableLambda in an ensemble",
)
"""The readers of :func:`collection_readers`, by name."""
UNSEEN = READERS[2:3] + READERS[4:]
"""Readers whose store the flag walk of ``_restricted/scope.py`` does not reach."""
