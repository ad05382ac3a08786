"""Offline fakes shared by the tests (unit and integration): one definition each.

- ``RecordingChatModel`` / ``NumberedChatModel``: the main model of a graph, agent or
  Runnable; records every message list it receives and replies from a script.
- ``FakeKB``: a scripted knowledge base (the ``search``/``asearch``/``info`` contract).
- ``WordHashEmbedding``: an offline embedding whose cosine reflects shared words.
- ``CountingEmbedding``: ``DeterministicFakeEmbedding`` that counts what it embeds.
- ``DefaultNamedEmbedding``: ``DeterministicFakeEmbedding`` recorded as the default model.
- ``CallbackRecorder``: a callback handler that records custom events, chat-model runs
  and retriever runs.
- ``dump_messages`` / ``user_config``: small helpers the surface tests share.
- ``LEAVE``, ``SICK``, ``EXPENSES``, ``REMOTE``, ``PARKING``: the HR policy texts the
  unit tests search, and ``hr_documents(...)`` to make documents of them.
- ``ranked_hits``: a Hypothesis strategy of ranked ``(id, score)`` lists for fusion tests.

Fixtures (``fake_default_model``, ``make_kb``) are in ``tests/unit_tests/conftest.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

from hypothesis import strategies as st
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from langchain_knowledge_inject._store.flags import DEFAULT_MODEL_NAME

__all__ = [
    "EXPENSES",
    "LEAVE",
    "PARKING",
    "REMOTE",
    "SICK",
    "CallbackRecorder",
    "CountingEmbedding",
    "DefaultNamedEmbedding",
    "FakeKB",
    "NumberedChatModel",
    "RecordingChatModel",
    "WordHashEmbedding",
    "dump_messages",
    "hr_documents",
    "injected_text",
    "ranked_hits",
    "user_config",
]

LEAVE = "Employees receive 25 days of annual leave per calendar year."
SICK = "Sick leave requires a doctor's note after three consecutive days."
EXPENSES = "Expenses above 50 euros need a receipt and manager approval."
REMOTE = "Remote work is allowed two days per week with manager approval."
PARKING = "The parking garage opens at 7am; badges are issued by facilities."

_POLICIES = {
    "leave": (LEAVE, "leave"),
    "sick": (SICK, "leave"),
    "expenses": (EXPENSES, "finance"),
    "remote": (REMOTE, "work"),
    "parking": (PARKING, "facilities"),
}


def hr_documents(*topics: str) -> list[Document]:
    """Documents of the HR policies named (``"leave"``, ``"sick"``, ``"expenses"``, ...).

    Each has ``source`` ``<topic>.md`` and a ``category`` (leave, finance, work, facilities).
    """
    return [
        Document(_POLICIES[t][0], metadata={"source": f"{t}.md", "category": _POLICIES[t][1]})
        for t in topics
    ]


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are at be by do for how i in is it my of on or the to what with".split()  # noqa: SIM905
)


class WordHashEmbedding(Embeddings):
    """A bag-of-words embedding: each word hashed into one of ``size`` dimensions.

    Deterministic and offline like ``DeterministicFakeEmbedding``, but the cosine
    of two texts reflects the words they share, so relevance thresholds behave
    as they do with a real model: unrelated texts score about 0.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = size

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self.size
        for word in _WORD.findall(text.lower()):
            if word in _STOP:
                continue
            stem = word[:-1] if word.endswith("s") and len(word) > 3 else word
            slot = int(hashlib.md5(stem.encode()).hexdigest(), 16) % self.size
            vector[slot] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


class DefaultNamedEmbedding(DeterministicFakeEmbedding):
    """A fake recorded as the default model: what ``kinject`` opens, so its fast paths apply."""

    model_name: str = DEFAULT_MODEL_NAME


class CountingEmbedding(DeterministicFakeEmbedding):
    """Deterministic fake vectors that count what they embed.

    ``documents_embedded`` counts the texts embedded as documents, ``queries_embedded``
    the queries, and ``longest_query`` is the length of the longest query (characters).
    """

    documents_embedded: int = 0
    queries_embedded: int = 0
    longest_query: int = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents_embedded += len(texts)
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.queries_embedded += 1
        self.longest_query = max(self.longest_query, len(text))
        return super().embed_query(text)


class CallbackRecorder(BaseCallbackHandler):
    """A callback handler that records what a run reports.

    ``events``: the custom events as ``(name, data)``; ``chat_model_runs``: how many chat
    model runs started; ``retriever_queries`` / ``retriever_results``: each retriever run's
    query and the documents it returned.
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.chat_model_runs = 0
        self.retriever_queries: list[str] = []
        self.retriever_results: list[list[Document]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.events.append((name, data))

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.chat_model_runs += 1

    def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
        self.retriever_queries.append(query)

    def on_retriever_end(self, documents: Any, **kwargs: Any) -> None:
        self.retriever_results.append(list(documents))


class RecordingChatModel(BaseChatModel):
    """A main model that records what it receives and replies from a script.

    Every call appends its message list to ``received``. The reply is the next message of
    ``script`` (tool calls included); once the script is spent it is ``reply`` with ``{n}``
    replaced by the call's number (1, 2, ...), or ``reply(messages)`` when ``reply`` is a
    function, with the id ``reply_id`` formatted alike (no id when ``None``).
    ``bind_tools`` returns the model itself, so it serves agents.
    """

    script: list[AIMessage] = Field(default_factory=list)
    received: list[list[BaseMessage]] = Field(default_factory=list)
    reply: str | Callable[[list[BaseMessage]], str] = "ok"
    reply_id: str | None = None

    @property
    def _llm_type(self) -> str:
        return "recording"

    @property
    def calls(self) -> int:
        """How many times the model was called."""
        return len(self.received)

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingChatModel:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.received.append(list(messages))
        if self.script:
            message = self.script.pop(0)
        else:
            n = len(self.received)
            message_id = None if self.reply_id is None else self.reply_id.format(n=n)
            text = self.reply(messages) if callable(self.reply) else self.reply.format(n=n)
            message = AIMessage(text, id=message_id)
        return ChatResult(generations=[ChatGeneration(message=message)])


class NumberedChatModel(RecordingChatModel):
    """A ``RecordingChatModel`` whose replies are numbered: "reply 1" (id "ai-1"), ..."""

    reply: str = "reply {n}"
    reply_id: str | None = "ai-{n}"


class FakeKB:
    """A scripted knowledge base: its documents, whatever the query (at most ``k``).

    Each call's arguments are recorded in ``calls`` (``queries`` lists the queries). A
    ``filter`` keeps the documents whose metadata match it; with ``fail`` every search
    raises ``ConnectionError``, as a store that is down would. Each search returns fresh
    copies, as a real store does, so a caller that edits them changes nothing here.
    """

    def __init__(
        self,
        docs: Iterable[Document] = (),
        *,
        name: str = "hr",
        fail: bool = False,
        restricted: bool = False,
        sensitive_sources: bool = False,
    ) -> None:
        self.name = name
        self.docs = list(docs)
        self.fail = fail
        self.calls: list[dict[str, Any]] = []
        self.info = SimpleNamespace(
            name=name, id=f"{name}-id", description="HR policies", topics=["leave"],
            restricted=restricted, sensitive_sources=sensitive_sources,
            routing_hint="", routing_keywords=[],
        )  # fmt: skip

    @property
    def queries(self) -> list[str]:
        """The query of every call, in order."""
        return [call["query"] for call in self.calls]

    def search(self, query: str, **kwargs: Any) -> list[Document]:
        self.calls.append({"query": query, **kwargs})
        if self.fail:
            msg = "chroma is down"
            raise ConnectionError(msg)
        wanted = kwargs.get("filter") or {}
        docs = [d for d in self.docs if all(d.metadata.get(k) == v for k, v in wanted.items())]
        return [d.model_copy(deep=True) for d in docs[: kwargs.get("k", 4)]]

    async def asearch(self, query: str, **kwargs: Any) -> list[Document]:
        return self.search(query, **kwargs)


def dump_messages(messages: Iterable[BaseMessage], *, tool_ids: bool = True) -> str:
    """The messages as canonical JSON, to compare two histories byte for byte.

    ``tool_ids=False`` leaves out the ids of tool messages (``ToolNode`` draws them at random).
    """
    rows = [
        m.model_dump(exclude=None if tool_ids or not isinstance(m, ToolMessage) else {"id"})
        for m in messages
    ]
    return json.dumps(rows, sort_keys=True, default=str)


def injected_text(messages: Iterable[BaseMessage]) -> str | None:
    """The injected knowledge in ``messages``, whatever the placement (``None``: none)."""
    for message in messages:
        marker = message.additional_kwargs.get("knowledge_inject")
        if not isinstance(marker, dict):
            continue
        content = message.content
        if marker.get("placement") == "current_message":
            return str(content[0]["text"])  # type: ignore[index]  # then the label, the question
        if marker.get("placement") == "postfix" and isinstance(content, str):
            return content[-len(marker.get("suffix", "")) :]
        return content if isinstance(content, str) else str(content[-1])
    return None


def user_config(user_id: str | None = "u1", **extra: Any) -> dict[str, Any]:
    """A run config whose ``configurable`` carries ``user_id`` (and ``extra``)."""
    return {"configurable": {"user_id": user_id, **extra}}


def ranked_hits(
    ids: st.SearchStrategy[str], *, low: float, high: float, max_size: int
) -> st.SearchStrategy[list[tuple[str, float]]]:
    """Lists of ``(id, score)`` with distinct ids, best score first."""
    hits = st.lists(
        st.tuples(ids, st.floats(low, high)), max_size=max_size, unique_by=lambda h: h[0]
    )
    return hits.map(lambda found: sorted(found, key=lambda h: -h[1]))
