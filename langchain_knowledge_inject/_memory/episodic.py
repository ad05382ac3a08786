"""Episodic memory: past turns per user, recalled when they bear on the current message.

Storage: a :class:`~langchain_knowledge_inject._store.knowledge_base.KnowledgeBase`
kept for memory (by default ``<store>/episodes``, apart from your knowledge
bases), one tenant partition per user, so a search for one user cannot reach
another's episodes. An episode is one chunk (a single turn, an exchange, or a
saved note) with its date, thread, speaker, turn and your own metadata; it is
searched with the knowledge base's hybrid search (dense + BM25), which on a
long-conversation benchmark recalled the evidence turns far better than the
previous per-user vector store (see ``benchmarks/episodic_recall.py``).

Ranking: the hybrid score (``similarity``, in [0, 1]) of the question without
the names of known speakers (in a dialogue, "Rosa" in "What did Rosa cook?"
would otherwise match every greeting addressed to her), its keyword side
without the words of ``keyword_stopwords`` (by default
:data:`~.episode_query.QUESTION_STOPWORDS`: Lucene's 33 and the English
function words, so "what", "did", "you" do not match every short turn);
plus ``speaker_weight``
for episodes of a speaker the question names; plus ``date_weight``
for episodes inside a date named in the question ("last May", "two weeks ago",
"in 2023", resolved against the reference time ``now``; those episodes are also
searched on their own, so that they reach the candidates); plus, unless the
question asks about the past ("when did", "used to", a date), a recency bonus
``recency_weight * 0.5 ** (age_days / recency_half_life_days)`` counted back
from ``now`` (``current_weight`` instead when the question asks about the
present: "where does she live now?"); plus ``session_weight`` times the
score of the episode's session (see :mod:`~.episode_rank`). A single turn is
indexed with the question it answers (``context_turn``: the previous turn of
its thread when that is another speaker's question; kept in memory per
thread, and looked up in the store, when written, for the first turn of a
thread after a reopen); results return the turn alone. The candidates are
always the same ``MAX_K`` best, whatever ``k``: the top 5 is the start of the
top 20. They come from the knowledge base as ``(chunk id, score)`` pairs,
ranked by fields kept per user (:mod:`~.episode_fields`); only the returned
episodes are read back whole.

Threshold: ``min_score`` is judged on the better of an episode's hybrid score
and its cosine alone (:attr:`~.episode_fields.Candidate.evidence`), not on
the hybrid score alone. The hybrid score is ``0.75 * cosine + 0.25 *
keyword``; a paraphrase shares no content word with its question, so it keeps
only three quarters of its cosine, and with the question words left out of
the keyword side nothing lifts it ("Which city am I based in?" for "I live in
Porto now": cosine 0.163, hybrid 0.122 with the question stopwords, 0.37 with
Lucene's 33, where "which", "am" and "i" matched). Judged on the better of the
two, a keyword match can only help and a question with no keyword hit is
judged on its vectors. On ``benchmarks/episodic_recall.py`` this keeps 100%
of the evidence hits of the top 10 at the default 0.14 (seed 11; seed 7
99.8%), and 19% (seed 7 22%) of off-topic questions recall nothing, against
99.0% and 17% for the earlier default (Lucene's 33, hybrid score, 0.15).

Writing: :meth:`EpisodicMemory.record`, :meth:`~EpisodicMemory.record_exchange`,
:meth:`~EpisodicMemory.record_turn` (called by the graph and the middleware
after each turn) and :meth:`~EpisodicMemory.remember` (the ``store_memory``
tool) return at once: the episode is appended to a local journal and a worker
thread embeds and writes it (see :mod:`~langchain_knowledge_inject._memory.episode_journal`).
A search waits for the same user's pending writes. :meth:`~EpisodicMemory.flush`
/ :meth:`~EpisodicMemory.aflush` wait for all of them, and run at exit;
:meth:`~EpisodicMemory.add_episodes` imports old conversations in bulk. These
methods live in :mod:`~langchain_knowledge_inject._memory.episode_recording`.

Restricted mode: snippets are the same user's own conversations, so they are
injected (neutralized, one line each) in restricted mode too. Without a user
id nothing is read or written.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import BaseMessage

from langchain_knowledge_inject._memory import temporal as _temporal
from langchain_knowledge_inject._memory.episode_fields import Candidate, EpisodeFields
from langchain_knowledge_inject._memory.episode_format import format_episodes
from langchain_knowledge_inject._memory.episode_journal import EpisodeWriter
from langchain_knowledge_inject._memory.episode_query import (
    QUESTION_STOPWORDS,
    aware,
    both,
    stopword_set,
    strip_names,
)
from langchain_knowledge_inject._memory.episode_query import named as names_in
from langchain_knowledge_inject._memory.episode_query import where as build_where
from langchain_knowledge_inject._memory.episode_rank import rank
from langchain_knowledge_inject._memory.episode_recording import RecordingMixin
from langchain_knowledge_inject._memory.episode_store import (
    Episode,
    EpisodeRecord,
    Visible,
    from_document,
    user_key,
)
from langchain_knowledge_inject._store.search_args import MODES, SearchMode
from langchain_knowledge_inject._turn.blocks import DEFAULT_PRIORITIES, BlockText, config_user_id
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    KnowledgeBaseOpenError,
    KnowledgeInjectError,
    RetrievalError,
)

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.runnables import RunnableConfig

    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

__all__ = [
    "DEFAULT_EPISODIC_MIN_SCORE",
    "MAX_K",
    "Episode",
    "EpisodeRecord",
    "EpisodicMemory",
    "format_episodes",
]

logger = logging.getLogger(__name__)

DEFAULT_EPISODIC_MIN_SCORE = 0.14
"""Score an episode needs: its hybrid score or its cosine alone, whichever is better.

The highest threshold that keeps, with the real model, the paraphrased
questions of ``tests/integration_tests/test_memory_integration.py`` (the
lowest: "What's my sibling's name again?" for "My sister Clara is flying
in...", cosine 0.147) and 99% of the evidence hits of ``episodic_recall.py``
(100% on seed 11, 99.8% on seed 7).
"""
MAX_K = 50
"""Largest ``k``: the candidate pool of every search, so results are stable in ``k``."""
Recency = Literal["auto", "on", "off"]
_RECENCY = ("auto", "on", "off")


class EpisodicMemory(RecordingMixin):
    """Past turns per user in a knowledge base kept for memory (a ``ContextBlock``).

    Args:
        path: Store directory; the memory lives in ``path / "episodes"``.
            Defaults to the package's store directory (``$KINJECT_HOME``...).
        client: A ``chromadb`` client instead of the embedded store (the
            catalog, keyword index and journal still live under ``path``).
        embeddings: Embedding model; defaults to the package's offline default.
        knowledge_base: A ``KnowledgeBase`` to keep the memory in (then
            ``path``, ``client``, ``embeddings`` and ``collection_prefix`` are unused).
        collection_prefix: Name of the memory's knowledge base.
        k: Snippets injected per turn at most.
        min_score: Minimum score, judged on the better of an episode's hybrid score
            and its cosine alone (scores are in ``[0, 1]``; 0 or less keeps all).
        recency_weight: Weight of the recency bonus (0 switches it off).
        recency_half_life_days: Age at which the recency bonus halves.
        date_weight: Bonus of episodes inside a date named in the question.
        speaker_weight: Bonus of episodes whose speaker the question names; those
            names are also left out of the text search (0 switches both off).
        session_weight: Share of its session's score (the mean hybrid score of
            the thread's two best candidates) added to an episode (0: off).
        current_weight: Recency weight for questions about the present ("where
            does she live now?"), when larger than ``recency_weight``.
        context_turn: Index a single turn with the turn it answers (the previous
            turn of its thread, when that is another speaker's question); the
            stored and returned text stays the turn itself.
        speaker_in_text: Index a turn as ``"<speaker>: <text>"`` (off by default:
            the names are matched as metadata by ``speaker_weight``).
        keyword_stopwords: Words the keyword side of a search leaves out
            (lowercase). Default :data:`~.episode_query.QUESTION_STOPWORDS`:
            Lucene's 33 and the English function words ("what", "did",
            "you"), which short dialogue turns are full of (R@10 0.769 ->
            0.803 on ``benchmarks/episodic_recall.py``, seed 11). ``None``:
            Lucene's 33 only, as the knowledge base.
        search_mode: The knowledge base's search: ``"hybrid"`` (dense + BM25),
            ``"dense"`` or ``"keyword"``. On the generated dialogues of
            ``benchmarks/episodic_recall.py`` ``"dense"`` recalls more; on real
            conversations with a strong lexical signal, hybrid is the safer default.
        background: Write recorded episodes in a worker thread (``False``: at once).
        journal: Keep the write-ahead journal (only with ``background``).
        journal_fsync: ``fsync`` the journal on each record (survives power loss).
        flush_timeout_s: How long a search or a flush waits for pending writes.
        auto_record: Whether :meth:`record_turn` records (per request:
            ``configurable["episodic_record"]``).
        user_id_key: Key of the user id in ``config["configurable"]``.
        max_snippet_chars: Longest text shown per message in the block.
        priority: Budget priority of the block (see :mod:`~._turn.blocks`).
        max_tokens: Cap of the block, or ``None``.

    Example:
        >>> import tempfile
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> memory = EpisodicMemory(path=tempfile.mkdtemp(), min_score=0,
        ...                         embeddings=DeterministicFakeEmbedding(size=32))
        >>> eid = memory.record("I adopted a dog called Rex.", speaker="Ana", user_id="u1",
        ...                     episode_id="s1:t4", metadata={"mood": "happy"})
        >>> [(e.episode_id, e.speaker, e.metadata) for e in memory.search("dog Rex", user_id="u1")]
        [('s1:t4', 'Ana', {'mood': 'happy'})]
        >>> memory.search("dog Rex", user_id="u2")
        []
        >>> memory.close()
    """

    name = "episodic"

    def __init__(
        self,
        *,
        path: str | os.PathLike[str] | None = None,
        client: Any | None = None,
        embeddings: Embeddings | None = None,
        knowledge_base: KnowledgeBase | None = None,
        collection_prefix: str = "kinject-episodes",
        k: int = 3,
        min_score: float = DEFAULT_EPISODIC_MIN_SCORE,
        recency_weight: float = 0.05,
        recency_half_life_days: float = 30.0,
        date_weight: float = 0.5,
        speaker_weight: float = 0.3,
        session_weight: float = 0.3,
        current_weight: float = 0.4,
        context_turn: bool = True,
        speaker_in_text: bool = False,
        keyword_stopwords: Iterable[str] | None = QUESTION_STOPWORDS,
        search_mode: SearchMode = "hybrid",
        background: bool = True,
        journal: bool = True,
        journal_fsync: bool = False,
        flush_timeout_s: float = 30.0,
        auto_record: bool = True,
        user_id_key: str = "user_id",
        max_snippet_chars: int = 300,
        priority: int = DEFAULT_PRIORITIES["episodic"],
        max_tokens: int | None = None,
    ) -> None:
        from langchain_knowledge_inject._store.opening import NAME_PATTERN

        checks = [
            ("collection_prefix", collection_prefix, bool(NAME_PATTERN.match(collection_prefix)),
             "1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"),
            ("k", k, 1 <= k <= MAX_K, f"between 1 and {MAX_K}"),
            ("min_score", min_score, -1.0 <= min_score <= 1.0,
             "a number in [-1, 1] (scores are in [0, 1]; 0 or less keeps every candidate)"),
            ("recency_weight", recency_weight, recency_weight >= 0, "0 or more"),
            ("recency_half_life_days", recency_half_life_days, recency_half_life_days > 0,
             "more than 0"),
            ("date_weight", date_weight, date_weight >= 0, "0 or more"),
            ("session_weight", session_weight, session_weight >= 0, "0 or more"),
            ("current_weight", current_weight, current_weight >= 0, "0 or more"),
            ("search_mode", search_mode, search_mode in MODES, f"one of {', '.join(MODES)}"),
            ("flush_timeout_s", flush_timeout_s, flush_timeout_s > 0, "more than 0"),
            ("max_snippet_chars", max_snippet_chars, max_snippet_chars >= 20, "at least 20"),
            ("max_tokens", max_tokens, max_tokens is None or max_tokens >= 1,
             "at least 1 or None"),
        ]  # fmt: skip
        for option, value, ok, allowed in checks:
            if not ok:
                msg = f"{option} must be {allowed}, got {value!r}"
                raise ConfigurationError(msg, option=option, value=value)
        self._kb = knowledge_base
        self._owns_kb = knowledge_base is None
        self._client = client
        self._embeddings = embeddings if knowledge_base is None else knowledge_base.embeddings
        if knowledge_base is not None:
            self.path = Path(knowledge_base.path)
        else:
            from langchain_knowledge_inject._store.storage import default_store_path

            base = Path(path).expanduser() if path is not None else default_store_path()
            self.path = base / "episodes"
        self.collection_prefix = knowledge_base.name if knowledge_base else collection_prefix
        self.k, self.min_score = k, min_score
        self.recency_weight, self.recency_half_life_days = recency_weight, recency_half_life_days
        self.date_weight, self.flush_timeout_s = date_weight, flush_timeout_s
        self.speaker_weight = speaker_weight
        self.session_weight, self.current_weight = session_weight, current_weight
        self.context_turn, self.speaker_in_text = context_turn, speaker_in_text
        self.keyword_stopwords = stopword_set(keyword_stopwords)
        self.search_mode: SearchMode = search_mode
        self._previous: dict[tuple[str, str], tuple[str, str]] = {}  # (user, thread): last turn
        self._previous_lock = threading.Lock()
        self.auto_record, self.user_id_key = auto_record, user_id_key
        self.max_snippet_chars, self.priority, self.max_tokens = (
            max_snippet_chars,
            priority,
            max_tokens,
        )
        self.background = background
        self._open_lock = threading.Lock()
        self._last_seq: dict[str, int] = {}
        self._speakers: dict[str, set[str]] = {}
        self._writer: EpisodeWriter | None = None
        self._fields = EpisodeFields(self._read)
        if background:
            journal_dir = self.path / "journal" if journal else None
            self._writer = EpisodeWriter(
                self._apply, journal_dir=journal_dir, name=self.collection_prefix,
                fsync=journal_fsync,
            )  # fmt: skip
            ref = weakref.ref(self)
            atexit.register(_flush_at_exit, ref)

    # -- the knowledge base ------------------------------------------------------------------
    @property
    def embeddings(self) -> Embeddings:
        """The embedding model (the default one is loaded on first use)."""
        if self._embeddings is None:
            from langchain_knowledge_inject._store.embeddings import default_embeddings

            self._embeddings = default_embeddings()
        return self._embeddings

    @property
    def knowledge_base(self) -> KnowledgeBase:
        """The knowledge base holding the episodes (opened on first use)."""
        with self._open_lock:
            if self._kb is None:
                from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

                if (self.path / "chroma.sqlite3").is_file():
                    logger.warning(
                        "episodic memory: %s holds episodes of an earlier version; "
                        "EpisodicMemory.import_legacy() copies them", self.path,
                    )  # fmt: skip
                self._kb = KnowledgeBase(
                    self.collection_prefix, path=self.path, client=self._client,
                    embeddings=self.embeddings, text_splitter=None,
                    description="Episodic memory: past conversation turns, one tenant per user",
                )  # fmt: skip
            return self._kb

    def collection_name(self, user_id: str) -> str:
        """The Chroma collection holding ``user_id``'s episodes."""
        from langchain_knowledge_inject._store.storage import collection_name

        return collection_name(self.knowledge_base.id, user_key(user_id))

    # -- closing and deleting ----------------------------------------------------------------
    def close(self) -> None:
        """Flush, stop the writer, and close the knowledge base if the memory opened it."""
        if self._writer is not None:
            self._writer.close(timeout=self.flush_timeout_s)
        if self._kb is not None and self._owns_kb:
            self._kb.close()

    def delete_user(self, user_id: str) -> None:
        """Delete every episode of ``user_id``."""
        self.flush()
        self.knowledge_base.delete_tenant(user_key(user_id))
        self._fields.forget(user_key(user_id))

    def count(self, user_id: str) -> int:
        """How many episodes ``user_id`` has."""
        self._wait_for(user_key(user_id))
        return self.knowledge_base.count(tenant_id=user_key(user_id))

    # -- reading -----------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        user_id: str,
        k: int | None = None,
        exclude: Sequence[BaseMessage] = (),
        now: datetime | None = None,
        recency: Recency = "auto",
        thread_id: str | Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        speaker: str | None = None,
        filter: Mapping[str, Any] | None = None,
        resolve_dates: bool = True,
    ) -> list[Episode]:
        """The ``user_id``'s episodes that bear on ``query``, best first.

        Args:
            query: The question or current message.
            user_id: Whose memory to search (only theirs is read).
            k: How many at most, up to :data:`MAX_K` (default: the instance's ``k``).
                The top ``k`` is always the start of the top ``k + 1``.
            exclude: Visible messages: episodes already among them are left out.
            now: The reference time of dates in the question and of recency
                (default: now).
            recency: ``"auto"`` prefers newer episodes unless the question asks
                about the past; ``"on"`` / ``"off"`` force it.
            thread_id: Only episodes of this thread (or of these threads).
            since: Only episodes said at or after this time.
            until: Only episodes said before this time.
            speaker: Only episodes of this speaker.
            filter: A filter on your own metadata (Chroma's ``where`` language).
            resolve_dates: Resolve dates named in the question ("last May").

        Raises:
            ConfigurationError: An argument has a value that is not allowed.
            RetrievalError: The store failed.
        """
        k = self.k if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            msg = f"k must be an integer between 1 and {MAX_K}, got {k!r}"
            raise ConfigurationError(msg, option="k", value=k)
        if recency not in _RECENCY:
            msg = f"recency must be one of {', '.join(_RECENCY)}; got {recency!r}"
            raise ConfigurationError(msg, option="recency", value=recency)
        user = user_key(user_id)
        if not query or not query.strip():
            return []
        now = aware(now) if now is not None else datetime.now(timezone.utc)
        where = build_where(thread_id, since, until, speaker, filter)
        found = _temporal.resolve(query, now=now) if resolve_dates else None
        text = found.rest if found is not None and found.rest.strip() else query
        self._wait_for(user)
        # a snapshot: the writer thread adds the speakers of what it writes
        known = set(self._speakers.get(user, ())) if self.speaker_weight else set()
        named = names_in(text, known)
        base = self._kb_search(strip_names(text, named), user, where)
        seen = {c.speaker for c in base if c.speaker} - known
        seen = seen if self.speaker_weight else set()
        if seen:  # speakers not known yet (a memory reopened): learn them, search again
            known |= seen
            self._speakers.setdefault(user, set()).update(seen)
            if names_in(text, seen):
                named = names_in(text, known)
                base = self._kb_search(strip_names(text, named), user, where)
        in_range, span = None, None
        if found is not None:
            span = (found.start.timestamp(), found.end.timestamp())
            dated = both(where, {"ep_ts": {"$gte": span[0]}}, {"ep_ts": {"$lt": span[1]}})
            in_range = self._kb_search(strip_names(text, named), user, dated)
        past = _temporal.asks_about_past(query, found=found)
        prefer_recent = recency == "on" or (recency == "auto" and not past)
        weight = self.recency_weight
        if recency == "auto" and not past and _temporal.asks_about_now(query):
            weight = max(weight, self.current_weight)  # "where does she live now?"
        ranked = rank(
            base, in_range, span=span, now=now if prefer_recent else None,
            recency_weight=weight, half_life_days=self.recency_half_life_days,
            date_weight=self.date_weight, named=frozenset(n.casefold() for n in named),
            speaker_weight=self.speaker_weight, session_weight=self.session_weight,
        )  # fmt: skip
        return self._episodes(ranked, user, k, exclude)

    def _kb_search(self, text: str, user: str, where: Mapping[str, Any] | None) -> list[Candidate]:
        """The pool of one search: its :data:`MAX_K` best hits with the fields they rank by."""
        hits = self._store().search_hits(
            text, k=MAX_K, min_score=0.0, filter=where, tenant_id=user, mode=self.search_mode,
            stopwords=self.keyword_stopwords, with_dense=True,
        )  # fmt: skip
        return self._fields.candidates(hits, user)

    def _episodes(
        self,
        ranked: Sequence[tuple[float, Candidate]],
        user: str,
        k: int,
        exclude: Sequence[BaseMessage],
    ) -> list[Episode]:
        """The best ``k`` of ``ranked`` read back as episodes, those already visible left out."""
        pool = [(score, c) for score, c in ranked if c.evidence >= self.min_score]
        visible = Visible(exclude) if exclude else None
        step = k if visible is None else 2 * k
        kept: list[Episode] = []
        for start in range(0, len(pool), step):
            batch = pool[start : start + step]
            docs = {d.id: d for d in self._read([c.chunk_id for _, c in batch], user)}
            for score, candidate in batch:
                doc = docs.get(candidate.chunk_id)
                if doc is None:  # deleted since the search
                    continue
                episode = from_document(doc, user_id=user, score=score,
                                        similarity=candidate.similarity)  # fmt: skip
                if visible is None or not visible.has(episode):
                    kept.append(episode)
                    if len(kept) == k:
                        return kept
        return kept

    def _store(self) -> KnowledgeBase:
        try:
            return self.knowledge_base
        except KnowledgeBaseOpenError as exc:  # a search fails with a search's error
            msg = f"episodic memory: its store could not be opened: {exc}"
            raise RetrievalError(msg, kb_name=self.collection_prefix) from exc

    def _read(self, chunk_ids: Sequence[str], user: str) -> list[Document]:
        """Chunks of ``user``'s partition read back (a store failure is a ``RetrievalError``)."""
        kb = self._store()
        try:
            return kb.get_by_ids(chunk_ids, tenant_id=user)
        except KnowledgeInjectError:
            raise
        except Exception as exc:
            msg = f"episodic memory: episodes could not be read back: {type(exc).__name__}: {exc}"
            raise RetrievalError(msg, kb_name=self.collection_prefix) from exc

    async def asearch(self, query: str, **kwargs: Any) -> list[Episode]:
        """Async twin of :meth:`search` (runs in a worker thread)."""
        return await asyncio.to_thread(lambda: self.search(query, **kwargs))

    # -- the block ---------------------------------------------------------------------------
    def render(
        self,
        *,
        query: str,
        messages: Sequence[BaseMessage] = (),
        config: RunnableConfig | None = None,
    ) -> str | None:
        """The ``[Past Conversation Snippets]`` block for this turn, or ``None``.

        The result is a :class:`~langchain_knowledge_inject._turn.blocks.BlockText`
        (one item per snippet), so the token budget can drop snippets one by one.
        """
        user_id = config_user_id(config, key=self.user_id_key)
        if not user_id:
            return None
        return self._block(self.search(query, user_id=user_id, exclude=messages))

    async def arender(
        self,
        *,
        query: str,
        messages: Sequence[BaseMessage] = (),
        config: RunnableConfig | None = None,
    ) -> str | None:
        """Async twin of :meth:`render`."""
        user_id = config_user_id(config, key=self.user_id_key)
        if not user_id:
            return None
        return self._block(await self.asearch(query, user_id=user_id, exclude=messages))

    def _block(self, episodes: Sequence[Episode]) -> BlockText | None:
        def render(items: Sequence[Episode]) -> str | None:
            return format_episodes(items, max_chars=self.max_snippet_chars)

        return BlockText.build(episodes, render)


def _flush_at_exit(ref: weakref.ReferenceType[EpisodicMemory]) -> None:
    memory = ref()
    if memory is None or memory._writer is None:
        return
    try:
        memory._writer.close(timeout=memory.flush_timeout_s)
    except Exception as exc:
        logger.warning("episodic memory: not everything was written at exit (%s); the journal "
                       "keeps it for the next start", exc)  # fmt: skip
