"""The Chroma side of the episodic memory (private to :mod:`~langchain_knowledge_inject.episodic`).

One collection per user, named ``<prefix>-<sha256(user id)[:32]>``, cosine
space. An episode is stored as one head record (``rec="x"`` for an exchange,
``"m"`` for a saved note; its document is the whole exchange) plus one record
per sentence of the user's message (``rec="s"``). Every record carries
``episode_id``, ``user_id``, ``thread_id``, ``kind`` and ``ts`` (epoch seconds);
the head also carries the texts shown in the block.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_knowledge_inject.errors import ConfigurationError, RetrievalError
from langchain_knowledge_inject.placement import query_text, strip_injected

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_MAX_SENTENCES = 16


@dataclass(frozen=True)
class Episode:
    """A recalled exchange or saved note.

    Attributes:
        episode_id: Stable id of the episode.
        kind: ``"exchange"`` (a recorded turn) or ``"memory"`` (a note saved
            with ``store_memory``).
        user_message: The user's message, or the note for a memory.
        assistant_reply: The assistant's reply (empty for a memory).
        date: When it was said (UTC).
        user_id: Whose memory it is.
        thread_id: The conversation it came from, if known.
        similarity: Cosine similarity with the query (whole exchange and best
            sentence, averaged).
        score: ``similarity`` plus the recency bonus: the ranking key.
    """

    episode_id: str
    kind: Literal["exchange", "memory"]
    user_message: str
    assistant_reply: str
    date: datetime
    user_id: str
    thread_id: str | None = None
    similarity: float = 0.0
    score: float = 0.0


@dataclass(frozen=True)
class Prepared:
    """An episode ready to embed: its head metadata and the texts to embed."""

    head: dict[str, Any]
    texts: list[str]


def user_key(user_id: object) -> str:
    """The user id as a non-empty string."""
    text = str(user_id).strip() if user_id is not None else ""
    if not text:
        msg = "a user id must be a non-empty string"
        raise ConfigurationError(msg, option="user_id", value=user_id)
    return text


def prepare(
    kind: str,
    user_message: str,
    assistant_reply: str,
    *,
    user_id: str,
    thread_id: str | None,
    turn: str | int | None,
    date: datetime | None,
) -> Prepared | None:
    """Build the records of an episode (``None`` for an empty user message)."""
    user_message, assistant_reply = user_message.strip(), (assistant_reply or "").strip()
    if not user_message:
        return None
    user = user_key(user_id)
    date = (date or datetime.now(timezone.utc)).astimezone(timezone.utc)
    parts = [kind, user, thread_id or "", str(turn or ""), user_message, assistant_reply]
    head = {
        "episode_id": hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32],
        "user_id": user,
        "thread_id": thread_id or "",
        "kind": kind,
        "ts": date.timestamp(),
        "user_message": user_message,
        "assistant_reply": assistant_reply,
    }
    whole = (
        f"User: {user_message}\nAssistant: {assistant_reply}" if assistant_reply else user_message
    )
    sentences = [s.strip() for s in _SENTENCE.split(user_message) if s.strip()]
    return Prepared(head, [whole, *sentences[:_MAX_SENTENCES]])


class EpisodeStore:
    """Per-user Chroma collections of episodes."""

    def __init__(self, *, path: Path | None, client: Any | None, prefix: str) -> None:
        self.path = path
        self._client = client
        self.prefix = prefix

    @property
    def client(self) -> Any:
        """The Chroma client (opened on first use)."""
        if self._client is None:
            import chromadb

            if self.path is None:
                from langchain_knowledge_inject.knowledge_base import default_store_path

                self.path = default_store_path()
            self._client = chromadb.PersistentClient(path=str(self.path / "episodes"))
        return self._client

    def collection_name(self, user_id: str) -> str:
        """The collection holding ``user_id``'s episodes."""
        digest = hashlib.sha256(user_key(user_id).encode()).hexdigest()[:32]
        return f"{self.prefix}-{digest}"

    def collection(self, user_id: str, *, create: bool) -> Any:
        """The user's collection; ``None`` when it does not exist and ``create`` is false."""
        name = self.collection_name(user_id)
        if create:
            return self.client.get_or_create_collection(
                name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
            )
        try:
            return self.client.get_collection(name, embedding_function=None)
        except Exception:  # chromadb raises NotFoundError (a ValueError in older releases)
            return None

    def upsert(self, prepared: Prepared, vectors: list[list[float]]) -> None:
        """Write (or rewrite) an episode's records."""
        head, texts = prepared.head, prepared.texts
        episode_id = head["episode_id"]
        small = {k: v for k, v in head.items() if k not in ("user_message", "assistant_reply")}
        ids = [f"{episode_id}:x"] + [f"{episode_id}:s{i}" for i in range(len(texts) - 1)]
        metas = [{**head, "rec": "m" if head["kind"] == "memory" else "x"}]
        metas += [{**small, "rec": "s"} for _ in texts[1:]]
        col = self.collection(head["user_id"], create=True)
        col.upsert(ids=ids, embeddings=[unit(v) for v in vectors], documents=texts,
                   metadatas=metas)  # fmt: skip

    def candidates(self, query: list[float], user_id: str, k: int) -> dict[str, Any] | None:
        """Every record of the episodes nearest to ``query`` (metadatas and embeddings)."""
        try:
            col = self.collection(user_id, create=False)
            if col is None:
                return None
            n = min(max(30, 10 * k), col.count())
            if n == 0:
                return None
            hits = col.query(query_embeddings=[query], n_results=n, where={"user_id": user_id},
                             include=["metadatas"])  # fmt: skip
            ids = list(dict.fromkeys(m["episode_id"] for m in hits["metadatas"][0]))
            if not ids:
                return None
            where = {"$and": [{"user_id": user_id}, {"episode_id": {"$in": ids}}]}
            return col.get(where=where, include=["metadatas", "embeddings"])
        except Exception as exc:
            msg = f"episodic memory search failed: {exc}"
            raise RetrievalError(msg, kb_name=self.prefix) from exc

    def delete_user(self, user_id: str) -> None:
        """Drop the user's collection."""
        if self.collection(user_id, create=False) is not None:
            self.client.delete_collection(self.collection_name(user_id))

    def count(self, user_id: str) -> int:
        """How many episodes the user has."""
        col = self.collection(user_id, create=False)
        if col is None:
            return 0
        return len(col.get(where={"rec": {"$in": ["x", "m"]}}, include=[])["ids"])


def score(
    query: list[float],
    rows: dict[str, Any],
    *,
    now: datetime,
    recency_weight: float,
    half_life_days: float,
) -> list[Episode]:
    """Score each episode of ``rows`` from its exchange and best sentence, plus recency."""
    heads: dict[str, dict[str, Any]] = {}
    whole: dict[str, float] = {}
    best: dict[str, float] = {}
    sims = np.asarray(rows["embeddings"], dtype=float) @ np.asarray(query, dtype=float)
    for meta, sim in zip(rows["metadatas"], sims.tolist(), strict=True):
        eid = meta["episode_id"]
        if meta["rec"] == "s":
            best[eid] = max(best.get(eid, -1.0), sim)
        else:
            heads[eid], whole[eid] = meta, sim
    out = []
    for eid, meta in heads.items():
        similarity = (whole[eid] + best.get(eid, whole[eid])) / 2
        age_days = max(0.0, (now.timestamp() - meta["ts"]) / 86400)
        bonus = recency_weight * 0.5 ** (age_days / half_life_days)
        out.append(
            Episode(
                episode_id=eid,
                kind=meta["kind"],
                user_message=meta["user_message"],
                assistant_reply=meta.get("assistant_reply", ""),
                date=datetime.fromtimestamp(meta["ts"], timezone.utc),
                user_id=meta["user_id"],
                thread_id=meta["thread_id"] or None,
                similarity=round(similarity, 6),
                score=round(similarity + bonus, 6),
            )
        )
    return out


class Visible:
    """The texts of the visible history, to leave out episodes already in it."""

    def __init__(self, messages: Sequence[BaseMessage]) -> None:
        clean = strip_injected(messages)
        self.humans = {norm(text_of(m)) for m in clean if isinstance(m, HumanMessage)}
        self.ais = {norm(text_of(m)) for m in clean if isinstance(m, AIMessage)}
        calls = [
            str(c.get("args", "")) for m in clean if isinstance(m, AIMessage) for c in m.tool_calls
        ]
        self.blob = norm(" ".join([*self.humans, *self.ais, *calls]))

    def has(self, episode: Episode) -> bool:
        """Whether ``episode`` is already in the visible history."""
        if episode.kind == "memory":
            return norm(episode.user_message) in self.blob
        reply = norm(episode.assistant_reply)
        return norm(episode.user_message) in self.humans and (not reply or reply in self.ais)


def text_of(message: BaseMessage) -> str:
    """The text of a message (text parts of multimodal content), or ``""``."""
    return query_text(message) or ""


def norm(text: str) -> str:
    """Lowercase with whitespace collapsed, for comparing texts."""
    return " ".join(text.lower().split())


def unit(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to length 1."""
    length = math.sqrt(sum(float(x) * float(x) for x in vector)) or 1.0
    return [float(x) / length for x in vector]
