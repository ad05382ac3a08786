"""The fields an episode search ranks by, kept per user (private to :mod:`~.episodic`).

A search ranks a pool of :data:`~.episodic.MAX_K` knowledge-base hits by their
episode's date, thread and speaker (:mod:`~.episode_rank`). Reading those back
from the store as whole documents for every hit of every search cost about as
much as the rest of the search beyond the knowledge base's own; so the hits
come as ``(chunk id, score, cosine)`` triples (``KnowledgeBase.search_hits``
with ``with_dense=True``: the cosine is what ``min_score`` falls back on), their
fields are read from the store once per chunk and kept here, and only the
episodes a search returns are read back whole.

Kept fields are dropped when their episode is written again (a new date,
thread or speaker under the same id) or deleted: the memory calls
:meth:`EpisodeFields.forget` after each write. A read that overlaps a write of
the same user is used for that search but not kept, so a kept field is never
older than the last write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from langchain_core.documents import Document

__all__ = ["Candidate", "EpisodeFields"]

MAX_KEPT = 200_000
"""Most chunks whose fields are kept, over all users (then all are dropped and read again)."""


class Candidate(NamedTuple):
    """One hit of an episode search, with the fields it is ranked by."""

    chunk_id: str
    episode_id: str
    similarity: float
    """The knowledge base's score for the query, in [0, 1]."""
    ts: float
    """When the episode was said (epoch seconds)."""
    thread: str
    speaker: str
    dense: float = 0.0
    """The dense side's score alone (the cosine), when the search gave it; else 0."""

    @property
    def evidence(self) -> float:
        """What ``min_score`` is judged on: the better of the hybrid score and the cosine alone.

        A hybrid score is ``0.75 * cosine + 0.25 * keyword``: an episode that
        shares no word with the question (a paraphrase) keeps only three
        quarters of its cosine, and how much the keyword side adds depends on
        which question words count as keywords. Judged on the better of the
        two, such an episode is judged on its cosine, and a keyword match
        can only help.
        """
        return max(self.similarity, self.dense)


_Fields = tuple[str, float, str, str]  # episode id, ts, thread, speaker


class EpisodeFields:
    """Episode id, date, thread and speaker per chunk, per user, read from the store once.

    Args:
        read: Reads chunks back as documents: ``read(chunk_ids, user)``
            (``KnowledgeBase.get_by_ids`` with the user's tenant).
        max_kept: Most chunks kept over all users.
    """

    def __init__(
        self,
        read: Callable[[Sequence[str], str], list[Document]],
        *,
        max_kept: int = MAX_KEPT,
    ) -> None:
        self._read = read
        self._max_kept = max_kept
        self._lock = threading.Lock()
        self._fields: dict[str, dict[str, _Fields]] = {}  # user -> chunk id -> fields
        self._chunks: dict[str, dict[str, list[str]]] = {}  # user -> episode id -> chunk ids
        self._writes: dict[str, int] = {}  # user -> writes so far (older reads are not kept)
        self._kept = 0

    def candidates(
        self, hits: Iterable[tuple[str, float] | tuple[str, float, float]], user: str
    ) -> list[Candidate]:
        """The hits of one search with their fields, in order (chunks gone since are left out).

        ``hits``: ``(chunk id, score)`` pairs, or ``(chunk id, score, cosine)``
        triples (``KnowledgeBase.search_hits(..., with_dense=True)``).
        """
        rows = [(hit[0], hit[1], hit[2] if len(hit) == 3 else 0.0) for hit in hits]
        with self._lock:
            known = self._fields.get(user, {})
            got = {cid: known[cid] for cid, _, _ in rows if cid in known}
            writes = self._writes.get(user, 0)
        missing = [cid for cid, _, _ in rows if cid not in got]
        if missing:
            read = {str(d.id): _fields_of(d) for d in self._read(missing, user) if d.id}
            got.update(read)
            self._keep(user, read, writes)
        return [
            Candidate(cid, fields[0], float(score), *fields[1:], dense=float(dense))
            for cid, score, dense in rows
            if (fields := got.get(cid)) is not None
        ]

    def forget(self, user: str, episode_ids: Iterable[str] | None = None) -> None:
        """Drop what is kept of these episodes of ``user`` (all of the user's with ``None``)."""
        with self._lock:
            self._writes[user] = self._writes.get(user, 0) + 1
            fields, chunks = self._fields.get(user), self._chunks.get(user)
            if fields is None or chunks is None:
                return
            if episode_ids is None:
                self._kept -= len(fields)
                del self._fields[user], self._chunks[user]
                return
            for episode_id in episode_ids:
                for cid in chunks.pop(episode_id, ()):
                    if fields.pop(cid, None) is not None:
                        self._kept -= 1

    def _keep(self, user: str, read: dict[str, _Fields], writes: int) -> None:
        with self._lock:
            if self._writes.get(user, 0) != writes:  # written meanwhile: maybe older than that
                return
            if self._kept + len(read) > self._max_kept:
                self._fields.clear()
                self._chunks.clear()
                self._kept = 0
            fields = self._fields.setdefault(user, {})
            chunks = self._chunks.setdefault(user, {})
            for cid, value in read.items():
                if cid not in fields:
                    self._kept += 1
                    chunks.setdefault(value[0], []).append(cid)
                fields[cid] = value


def _fields_of(doc: Document) -> _Fields:
    meta = doc.metadata
    return (
        str(meta["ep_id"]),
        float(meta["ep_ts"]),
        str(meta.get("ep_thread") or ""),
        str(meta.get("ep_speaker") or ""),
    )
