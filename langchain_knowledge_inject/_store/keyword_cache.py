"""The keyword cache: each partition's keyword indexes, kept in step with Chroma, never trusted.

Chroma is the record. The keyword side of a partition (a chunk index and a
document index of one row per source, :class:`~.keyword.KeywordIndex`) is a cache
on local disk, ``<store>/keyword/<kb id>/<partition>/``, rebuilt from Chroma
whenever it is missing, damaged, built from another collection, or behind. The
same catch-up serves crash recovery, a lost cache and other processes' writes.

How it knows it is behind: every chunk carries a write stamp
(:data:`~.chroma.STAMP`, the writer's clock), and ``state.json`` beside the
indexes records the collection it was built from, ``synced`` (every chunk
stamped before ``synced - overlap`` is in the cache) and the ids and stamps of
the chunks it holds that were stamped since. A catch-up asks Chroma for the
metadata of the chunks stamped since ``synced - overlap`` and indexes those it
does not hold in that version; the overlap (the knowledge base's ``timeout``
plus :data:`CLOCK_SKEW_S`) covers a write committed late and machines' clocks
that differ. Then Chroma's count is compared with the cache's: a difference (a
delete by another process, a write by a client that does not stamp) is settled
by an ids-only scan. Records without text cannot be searched by keyword; they
are counted (``unexplained``) and left in place.

When: the embedded store belongs to one process, so each partition is caught
up once, when first used, and afterwards changes only through this process's
writes (:meth:`KeywordCache.apply`). With a Chroma server, before a keyword or
hybrid search at most every ``interval`` seconds. Processes on one machine
that share a store directory share the cache: writes and catch-ups hold its
``lock`` file, and readers reload the indexes.

:class:`KeywordBackend` is what the knowledge base asks of its keyword side; a
backend that lets the Chroma server rank by BM25 (Chroma's distributed and
hosted deployments) would be one more class with nothing to catch up.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from langchain_knowledge_inject._store import documents
from langchain_knowledge_inject._store.chroma import STAMP
from langchain_knowledge_inject._store.keyword import STOPWORDS, KeywordIndex

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.chroma import ChromaSide, Chunk

logger = logging.getLogger(__name__)

CLOCK_SKEW_S = 10.0
"""Allowed difference between the clocks of the machines that write to one server."""
FORMAT = 1
"""Version of the cache's layout and tokenization: another version is rebuilt."""
MAX_OPEN = 64
"""Partitions whose indexes stay open at once (the least recently used are closed)."""
_HEAL_INTERVAL = 60.0


class KeywordBackend(Protocol):
    """What a knowledge base asks of its keyword side, per partition."""

    def search(
        self, partition: str, query: str, *, k: int, stopwords: AbstractSet[str]
    ) -> list[tuple[str, float, str]]:
        """``(chunk id, BM25, source)``, best first."""

    def search_documents(
        self, partition: str, query: str, *, k: int, stopwords: AbstractSet[str], sources: set[str]
    ) -> tuple[list[tuple[str, float]], set[str]]:
        """``(source, BM25)`` of whole documents, best first, and which of ``sources`` are scored."""

    def apply(
        self,
        partition: str,
        *,
        upserted: Sequence[Chunk] = (),
        deleted: Sequence[str] = (),
        complete: Mapping[str, Sequence[Chunk]] | None = None,
    ) -> None:
        """Take this process's write, just made to Chroma."""

    def ensure(self, partition: str, *, wait: bool = True) -> None:
        """Bring the partition up to date with Chroma when it may be behind."""


@dataclass
class PartitionDrift:
    """How one partition's keyword cache differs from its Chroma collection."""

    partition: str
    """The tenant partition ("" is the shared one)."""
    chunks: int
    """Chunks in Chroma."""
    keyword_missing: list[str] = field(default_factory=list)
    """Chroma chunks the keyword cache lacks."""
    keyword_extra: list[str] = field(default_factory=list)
    """Keyword rows of chunks Chroma does not hold."""
    unexplained: list[str] = field(default_factory=list)
    """Chroma records without text: not searchable by keyword, left in place."""

    @property
    def clean(self) -> bool:
        """True when the cache holds exactly Chroma's chunks."""
        return not (self.keyword_missing or self.keyword_extra)


@dataclass
class ConsistencyReport:
    """Result of ``KnowledgeBase.check``: the keyword cache against Chroma."""

    kb_name: str
    """The knowledge base checked."""
    partitions: list[PartitionDrift]
    """Per-partition findings (before repair)."""
    repaired: bool = False
    """Whether drift was found and the partitions with it rebuilt from Chroma."""

    @property
    def unexplained(self) -> list[str]:
        """Chroma records left in place because they hold no text, in every partition."""
        return [cid for p in self.partitions for cid in p.unexplained]

    @property
    def clean(self) -> bool:
        """True when every partition's cache agrees with Chroma."""
        return all(p.clean for p in self.partitions)

    def summary(self) -> str:
        """A human-readable report, one line per partition."""
        lines = [f"knowledge base {self.kb_name!r}: {'consistent' if self.clean else 'DRIFT'}"]
        for p in self.partitions:
            name = p.partition or "(shared)"
            lines.append(
                f"  {name}: {p.chunks} chunks in Chroma; keyword missing "
                f"{len(p.keyword_missing)}, extra {len(p.keyword_extra)}"
            )
            if p.unexplained:
                lines.append(
                    f"  {name}: {len(p.unexplained)} Chroma records hold no text and were left "
                    "in place (not searchable by keyword, not deleted)"
                )
        if self.repaired:
            lines.append("  repaired: the keyword cache was rebuilt from Chroma")
        return "\n".join(lines)


class _Partition:
    """One partition's open indexes and state."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.lock = threading.RLock()
        self.checked_at: float | None = None
        self.healed_at = -_HEAL_INTERVAL
        self.state: dict[str, Any] | None = None
        self.reopen()

    def reopen(self) -> None:
        """Open the indexes, or start them afresh when the cache is missing or damaged."""
        if self.folder is not None:
            try:
                self.state = json.loads((self.folder / "state.json").read_text(encoding="utf-8"))
                self.chunks = KeywordIndex(self.folder / "chunks")
                self.documents = KeywordIndex(self.folder / "documents")
                return
            except FileNotFoundError:
                pass
            except Exception as exc:
                logger.warning("keyword cache %s is damaged (%s): rebuilt", self.folder, exc)
            self.wipe()
        self.state = None
        self.chunks = KeywordIndex(None if self.folder is None else self.folder / "chunks")
        self.documents = KeywordIndex(None if self.folder is None else self.folder / "documents")

    def wipe(self) -> None:
        """Delete the cache's files (the caller reopens and rebuilds)."""
        self.state = None
        if self.folder is not None:
            for name in ("chunks", "documents"):
                shutil.rmtree(self.folder / name, ignore_errors=True)
            (self.folder / "state.json").unlink(missing_ok=True)

    def save(self) -> None:
        """Write the state atomically."""
        if self.folder is None or self.state is None:
            return
        scratch = self.folder / f"state.json.{os.getpid()}.tmp"
        scratch.write_text(json.dumps(self.state), encoding="utf-8")
        os.replace(scratch, self.folder / "state.json")

    @contextlib.contextmanager
    def exclusive(self, *, wait: bool) -> Iterator[bool]:
        """Hold the partition against other threads and processes; False when not waiting."""
        if not self.lock.acquire(blocking=wait):
            yield False
            return
        handle = None
        try:
            if self.folder is not None:
                import fcntl

                self.folder.mkdir(parents=True, exist_ok=True)
                handle = (self.folder / "lock").open("a")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except BlockingIOError:
                    yield False
                    return
                try:  # what another process sharing the folder committed
                    self.state = json.loads((self.folder / "state.json").read_text("utf-8"))
                except (OSError, ValueError):
                    self.state = None
                self.chunks.reload()
                self.documents.reload()
            yield True
        finally:
            if handle is not None:
                handle.close()
            self.lock.release()


class KeywordCache:
    """The keyword side of one knowledge base: a cache of its Chroma partitions.

    Args:
        root: ``<store>/keyword/<kb id>``; None keeps the cache in memory (a
            read-only store), built from Chroma when first used.
        chroma: The knowledge base's Chroma side.
        exclusive: Only this process writes to the collections (the embedded store).
        interval: With a server, most seconds between two catch-ups of a
            partition; None: once, when it is first used.
        overlap: How far back a catch-up looks beyond the last one, in seconds.
    """

    def __init__(
        self,
        root: Path | None,
        chroma: ChromaSide,
        *,
        exclusive: bool,
        interval: float | None,
        overlap: float,
    ) -> None:
        self.root = root
        self.chroma = chroma
        self.exclusive = exclusive
        self.interval = interval
        self.overlap = overlap
        self._open: dict[str, _Partition] = {}
        self._guard = threading.Lock()

    def _folder(self, partition: str) -> Path | None:
        if self.root is None:
            return None
        return self.root / (
            hashlib.sha256(partition.encode()).hexdigest()[:16] if partition else "shared"
        )

    def _part(self, partition: str) -> _Partition:
        with self._guard:
            part = self._open.pop(partition, None)
            if part is None:
                part = _Partition(self._folder(partition))
            self._open[partition] = part  # most recently used last
            while len(self._open) > MAX_OPEN:
                self._open.pop(next(iter(self._open)))
            return part

    def invalidate(self, partition: str) -> None:
        """A write to Chroma failed half way: catch the partition up before it is used again."""
        self._part(partition).checked_at = None

    def close(self) -> None:
        """Close every open index."""
        with self._guard:
            self._open.clear()

    def drop(self, partition: str | None = None) -> None:
        """Delete one partition's cache, or the whole knowledge base's."""
        with self._guard:
            if partition is None:
                self._open.clear()
            else:
                self._open.pop(partition, None)
        folder = self.root if partition is None else self._folder(partition)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    # -- reading -------------------------------------------------------------------
    def search(
        self, partition: str, query: str, *, k: int, stopwords: AbstractSet[str] = STOPWORDS
    ) -> list[tuple[str, float, str]]:
        """``(chunk id, BM25, source)`` of the partition's best chunks."""
        return self._healing(
            partition, lambda part: part.chunks.search(query, k=k, stopwords=stopwords)
        )

    def search_documents(
        self,
        partition: str,
        query: str,
        *,
        k: int,
        stopwords: AbstractSet[str] = STOPWORDS,
        sources: set[str],
    ) -> tuple[list[tuple[str, float]], set[str]]:
        """``(source, BM25)`` of the best whole documents, and which of ``sources`` have a row."""
        if not documents.enabled() or not sources:
            return [], set()

        def run(part: _Partition) -> tuple[list[tuple[str, float]], set[str]]:
            hits = part.documents.search(query, k=k, stopwords=stopwords, phrases=False)
            return [(s, score) for s, score, _ in hits], set(part.documents.sources(list(sources)))

        return self._healing(partition, run)

    def count(self, partition: str) -> int:
        """Chunks the partition's cache holds."""
        return self._part(partition).chunks.count()

    def _healing(self, partition: str, fn: Any) -> Any:
        part = self._part(partition)
        try:
            return fn(part)
        except (ValueError, OSError) as exc:
            if time.monotonic() - part.healed_at < _HEAL_INTERVAL:
                raise
            logger.warning("keyword cache of partition %r failed (%s): rebuilt", partition, exc)
            part.healed_at = time.monotonic()
            with part.exclusive(wait=True):
                part.wipe()
                part.reopen()
                self._rebuild(part, partition, self.chroma.collection(partition))
                part.checked_at = time.monotonic()
            return fn(part)

    # -- keeping up ------------------------------------------------------------------
    def ensure(self, partition: str, *, wait: bool = True) -> None:
        """Catch the partition up with Chroma when it may be behind (see the module docstring).

        Args:
            partition: The partition.
            wait: Wait for another thread or process that holds the partition; False
                searches with what the cache holds (it is caught up already once).
        """
        checked = self._part(partition).checked_at
        if checked is not None and (
            self.exclusive or self.interval is None or time.monotonic() - checked < self.interval
        ):
            return
        self.catch_up(partition, wait=wait or checked is None)

    def catch_up(self, partition: str, *, wait: bool = True) -> int:
        """Catch the partition up with Chroma now; how many chunks were indexed or dropped."""
        part = self._part(partition)
        with part.exclusive(wait=wait) as held:
            if not held:
                return 0
            changed = self._catch_up(part, partition)
            part.checked_at = time.monotonic()
            return changed

    def _catch_up(self, part: _Partition, partition: str) -> int:
        """Bring one partition up to date; how many chunks were indexed or dropped."""
        started = time.time()
        collection = self.chroma.collection(partition)
        state = part.state
        current = None if collection is None else str(collection.id)
        if state is not None and state.get("collection") not in (current, None):
            logger.warning(
                "The Chroma collection that the keyword cache of partition %r was built from "
                "is gone (%s now): the cache is rebuilt from Chroma",
                partition or "(shared)",
                "none" if current is None else "another one",
            )
        elif state is not None and state.get("format") == FORMAT:
            return self._follow(part, partition, collection, state, started)
        return self._rebuild(part, partition, collection)  # missing, old, or another collection

    def _follow(
        self, part: _Partition, partition: str, collection: Any, state: dict[str, Any], started: float
    ) -> int:
        """Index what Chroma got since the last catch-up (see the module docstring)."""
        if collection is None:
            return 0
        since = float(state["synced"]) - self.overlap
        recent: dict[str, float] = state.get("recent", {})
        window: dict[str, float] = {}
        for chunk in self.chroma.get(partition, where={STAMP: {"$gte": since}}, text=False):
            window[chunk.chunk_id] = chunk.stamp
        stale = [cid for cid, stamp in window.items() if recent.get(cid) != stamp]
        fetched = self.chroma.get(partition, stale) if stale else []
        self._index(part, partition, [c for c in fetched if c.text.strip()], ())
        state.update(collection=str(collection.id), synced=started, recent=window)
        changed = len(stale)
        unexplained = set(state.get("unexplained", []))
        if collection.count() != part.chunks.count() + len(unexplained):
            changed += self._reconcile(part, partition, unexplained)
        part.save()
        return changed

    def _reconcile(self, part: _Partition, partition: str, unexplained: set[str]) -> int:
        """Make the cache hold exactly the collection's ids (an ids-only scan)."""
        remote = {c.chunk_id for page in self.chroma.pages(partition, text=False) for c in page}
        local = part.chunks.ids()
        gone = sorted(local - remote)
        fetched = self.chroma.get(partition, sorted(remote - local - unexplained))
        with_text = [c for c in fetched if c.text.strip()]
        self._index(part, partition, with_text, gone)
        assert part.state is not None
        part.state["unexplained"] = sorted(
            (unexplained & remote) | {c.chunk_id for c in fetched if not c.text.strip()}
        )
        return len(gone) + len(fetched)

    def _rebuild(self, part: _Partition, partition: str, collection: Any) -> int:
        """Build one partition's cache afresh from its collection."""
        started = time.time()
        part.chunks.clear()
        part.documents.clear()
        part.state = _state(None if collection is None else str(collection.id), started)
        sources: set[str] = set()
        unexplained: list[str] = []
        recent: dict[str, float] = part.state["recent"]

        def rows() -> Iterator[tuple[str, str, str]]:
            for page in self.chroma.pages(partition) if collection is not None else ():
                for chunk in page:
                    if not chunk.text.strip():
                        unexplained.append(chunk.chunk_id)
                        continue
                    if chunk.stamp >= started - self.overlap:
                        recent[chunk.chunk_id] = chunk.stamp
                    sources.add(chunk.source)
                    yield chunk.chunk_id, chunk.text, chunk.source

        part.chunks.write(rows())
        self._documents(part, partition, sources, {})
        part.state["unexplained"] = unexplained
        part.save()
        if part.chunks.count():
            logger.info(
                "keyword cache of partition %r rebuilt from Chroma", partition or "(shared)"
            )
        return part.chunks.count()

    # -- writing ---------------------------------------------------------------------
    def apply(
        self,
        partition: str,
        *,
        upserted: Sequence[Chunk] = (),
        deleted: Sequence[str] = (),
        complete: Mapping[str, Sequence[Chunk]] | None = None,
    ) -> None:
        """Take a write this process just made to Chroma.

        Args:
            partition: Its partition.
            upserted: Chunks written (new text or new metadata), with their stamps.
            deleted: Ids deleted.
            complete: Every chunk, by source, of sources the write gave whole
                (``add_documents``): their document rows need no read from Chroma.
        """
        part = self._part(partition)
        with part.exclusive(wait=True):
            try:
                self._index(
                    part, partition, [c for c in upserted if c.text.strip()], deleted, complete
                )
            except BaseException:
                part.checked_at = None  # caught up from Chroma by the next search
                raise
            state = part.state
            if state is None:  # lost meanwhile: the next search rebuilds it
                part.checked_at = None
                return
            if state.get("collection") is None and (
                collection := self.chroma.collection(partition)
            ):
                state["collection"] = str(collection.id)
            recent = state.setdefault("recent", {})
            for cid in deleted:
                recent.pop(cid, None)
            recent.update({c.chunk_id: c.stamp for c in upserted})
            if self.exclusive and upserted and part.checked_at is not None:  # all before is in
                state["synced"] = max(state["synced"], min(c.stamp for c in upserted))
                floor = state["synced"] - self.overlap
                state["recent"] = {cid: s for cid, s in recent.items() if s >= floor}
            part.save()

    def _index(
        self,
        part: _Partition,
        partition: str,
        upserted: Sequence[Chunk],
        deleted: Sequence[str],
        complete: Mapping[str, Sequence[Chunk]] | None = None,
    ) -> None:
        if not upserted and not deleted:
            return
        affected = {c.source for c in upserted} | set(part.chunks.sources(list(deleted)).values())
        part.chunks.write(((c.chunk_id, c.text, c.source) for c in upserted), deleted)
        self._documents(part, partition, affected, complete or {})

    def _documents(
        self,
        part: _Partition,
        partition: str,
        sources: set[str],
        complete: Mapping[str, Sequence[Chunk]],
    ) -> None:
        """Rebuild the document rows of ``sources`` (from ``complete``, else from Chroma)."""
        sources = sources - {""}
        if not documents.enabled() or not sources:
            return
        grouped: dict[str, list[Chunk]] = {s: list(complete[s]) for s in sources if s in complete}
        for chunk in self.chroma.of_sources(partition, sorted(sources - set(grouped)), text=True):
            grouped.setdefault(chunk.source, []).append(chunk)
        texts = {
            s: documents.document_text(c for c in grouped.get(s, []) if c.text.strip())
            for s in sources
        }
        part.documents.write(
            ((s, t, s) for s, t in texts.items() if t), [s for s, t in texts.items() if not t]
        )

    # -- checking --------------------------------------------------------------------
    def check(self, partitions: Sequence[str], *, repair: bool, kb_name: str) -> ConsistencyReport:
        """Compare each partition's cache with Chroma id by id; rebuild those that differ."""
        report = ConsistencyReport(kb_name, [])
        for partition in partitions:
            part = self._part(partition)
            with part.exclusive(wait=True):
                remote: dict[str, bool] = {}
                for page in self.chroma.pages(partition):
                    remote.update((c.chunk_id, bool(c.text.strip())) for c in page)
                try:
                    local = part.chunks.ids()
                except (ValueError, OSError):  # damaged: nothing in it counts
                    local = set()
                searchable = {cid for cid, has_text in remote.items() if has_text}
                drift = PartitionDrift(
                    partition,
                    len(remote),
                    keyword_missing=sorted(searchable - local),
                    keyword_extra=sorted(local - searchable),
                    unexplained=sorted(set(remote) - searchable),
                )
                report.partitions.append(drift)
                if repair and not drift.clean:
                    self._rebuild(part, partition, self.chroma.collection(partition))
                    part.checked_at = time.monotonic()
        report.repaired = repair and not report.clean
        return report


def _state(collection: str | None, synced: float) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "collection": collection,
        "synced": synced,
        "recent": {},
        "unexplained": [],
    }
