"""The keyword cache: each partition's keyword indexes, kept in step with Chroma, never trusted.

A partition's keyword side (a chunk index, and a document index of one row per
source: :class:`~.keyword.KeywordIndex`) is a cache on local disk,
``<store>/keyword/<kb id>/<partition>/``, rebuilt from Chroma whenever it is
missing, damaged, built from another collection or of another format. Its
``state.json`` records the collection it was built from, ``synced`` (every chunk
stamped before ``synced - overlap`` is in it) and the ids and stamps of the
chunks stamped since. A catch-up indexes the chunks stamped since then that it
does not hold in that version, then compares counts: a difference (a delete by
another process, a client that does not stamp) is settled by an ids-only scan.
Crash recovery, a lost cache and other processes' writes all go this way
(docs/reliability.md). :class:`KeywordBackend` is what the knowledge base asks of
its keyword side; a server-side BM25 (Chroma's distributed deployments) would
be one more class with nothing to catch up.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from langchain_knowledge_inject._store import documents
from langchain_knowledge_inject._store.chroma import STAMP
from langchain_knowledge_inject._store.keyword import STOPWORDS, KeywordIndex
from langchain_knowledge_inject._store.peek import ConsistencyReport, PartitionDrift
from langchain_knowledge_inject._store.storage import keyword_folder

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.chroma import ChromaSide, Chunk

logger = logging.getLogger(__name__)

CLOCK_SKEW_S = 10.0
"""Allowed difference between the clocks of the machines that write to one server."""
FORMAT = 1
"""Version of the cache's layout and tokenization: a cache of another version is rebuilt."""
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
        self, partition: str, query: str, *, k: int, stopwords: AbstractSet[str]
    ) -> list[tuple[str, float]]:
        """``(source, BM25)`` of whole documents, best first."""

    def sources(self, partition: str, ids: Sequence[str]) -> dict[str, str]:
        """The source of each of ``ids`` that the keyword side holds."""

    def apply(
        self, partition: str, *, upserted: Sequence[Chunk], deleted: Sequence[str], complete: Any
    ) -> None:
        """Take this process's write, just made to Chroma."""

    def ensure(self, partition: str, *, wait: bool = True) -> None:
        """Catch up with Chroma when it may be behind."""


class _Partition:
    """One partition's open indexes and state (``folder`` None: in memory)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder, self.lock = folder, threading.RLock()
        self.checked_at: float | None = None
        self.healed_at = -_HEAL_INTERVAL
        with self.exclusive(wait=True):  # no process opens or makes files another is making
            self.reopen()

    def _read_state(self) -> dict[str, Any] | None:
        assert self.folder is not None
        return dict(json.loads((self.folder / "state.json").read_text("utf-8")))

    def reopen(self) -> None:
        """Open the indexes (no state: a catch-up builds them); damaged: start them afresh."""
        self.state: dict[str, Any] | None = None
        if self.folder is not None:
            try:
                with contextlib.suppress(FileNotFoundError):
                    self.state = self._read_state()
                self.chunks = KeywordIndex(self.folder / "chunks")
                self.documents = KeywordIndex(self.folder / "documents")
                return
            except Exception as exc:
                logger.warning("keyword cache %s is damaged (%s): rebuilt", self.folder, exc)
            self.wipe()
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
        if self.folder is not None and self.state is not None:
            scratch = self.folder / f"state.json.{os.getpid()}.tmp"
            scratch.write_text(json.dumps(self.state), encoding="utf-8")
            os.replace(scratch, self.folder / "state.json")

    @contextlib.contextmanager
    def exclusive(self, *, wait: bool) -> Iterator[bool]:
        """Hold the partition against other threads and processes; False when not waiting.

        Its ``lock`` file is held for every opening, build and write of its files.
        """
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
                if hasattr(self, "chunks"):  # open: what another process committed
                    with contextlib.suppress(OSError, ValueError):
                        self.state = None
                        self.state = self._read_state()
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
        root: ``<store>/keyword/<kb id>``; None keeps it in memory (a read-only store).
        chroma: The knowledge base's Chroma side.
        exclusive: Only this process writes to the collections (the embedded store):
            each partition is caught up once, when first used, and then follows
            this process's writes.
        interval: Otherwise, most seconds between two catch-ups of a partition
            before a search; None: once, when first used.
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
        self.root, self.chroma, self.exclusive = root, chroma, exclusive
        self.interval, self.overlap = interval, overlap
        self._open: dict[str, _Partition] = {}
        self._guard = threading.Lock()

    def _folder(self, partition: str) -> Path | None:
        return None if self.root is None else keyword_folder(self.root, partition)

    def _part(self, partition: str) -> _Partition:
        with self._guard:
            part = self._open.pop(partition, None) or _Partition(self._folder(partition))
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
            self._open.clear() if partition is None else self._open.pop(partition, None)
        folder = self.root if partition is None else self._folder(partition)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    # -- reading -----------------------------------------------------------------------
    def search(
        self, partition: str, query: str, *, k: int, stopwords: AbstractSet[str] = STOPWORDS
    ) -> list[tuple[str, float, str]]:
        """``(chunk id, BM25, source)`` of the partition's best chunks."""
        return self._healing(partition, lambda p: p.chunks.search(query, k=k, stopwords=stopwords))

    def search_documents(
        self, partition: str, query: str, *, k: int, stopwords: AbstractSet[str] = STOPWORDS
    ) -> list[tuple[str, float]]:
        """``(source, BM25)`` of the best whole documents (every source with text has a row)."""

        def run(part: _Partition) -> list[tuple[str, float]]:
            hits = part.documents.search(query, k=k, stopwords=stopwords, phrases=False)
            return [(source, score) for source, score, _ in hits]

        return self._healing(partition, run) if documents.enabled() else []

    def sources(self, partition: str, ids: Sequence[str]) -> dict[str, str]:
        """The source of each of ``ids`` that the partition's chunk index holds."""
        return self._healing(partition, lambda p: p.chunks.sources(ids))

    def _healing(self, partition: str, fn: Any) -> Any:
        """``fn(part)``; an index that fails (damaged) is rebuilt once a minute at most."""
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
                self._rebuild(part, partition)
                part.checked_at = time.monotonic()
            return fn(part)

    # -- keeping up ----------------------------------------------------------------------
    def ensure(self, partition: str, *, wait: bool = True) -> None:
        """Catch the partition up with Chroma when it may be behind.

        Args:
            partition: The partition.
            wait: Wait for another thread or process that holds the partition; False
                searches with what the cache holds (it is caught up once already).
        """
        checked = self._part(partition).checked_at
        if checked is None or not (
            self.exclusive or self.interval is None or time.monotonic() - checked < self.interval
        ):
            self.catch_up(partition, wait=wait or checked is None)

    def catch_up(self, partition: str, *, wait: bool = True) -> int:
        """Catch the partition up with Chroma now; how many chunks were indexed or dropped."""
        part = self._part(partition)
        with part.exclusive(wait=wait) as held:
            if not held:
                return 0
            collection, state = self.chroma.collection(partition), part.state
            current = None if collection is None else str(collection.id)
            replaced = state is not None and state["collection"] not in (current, None)
            if replaced:
                logger.warning(
                    "The Chroma collection that the keyword cache of partition %r was built "
                    "from is gone (%s now): rebuilt from Chroma",
                    partition or "(shared)", "none" if current is None else "another",
                )  # fmt: skip
            if state is None or replaced or state.get("format") != FORMAT:
                changed = self._rebuild(part, partition)
            else:
                changed = self._follow(part, partition, collection, state) if collection else 0
            part.checked_at = time.monotonic()
            return changed

    def _follow(
        self, part: _Partition, partition: str, collection: Any, state: dict[str, Any]
    ) -> int:
        """Index what Chroma got since the last catch-up, then settle a count that differs."""
        started, since = time.time(), float(state["synced"]) - self.overlap
        recent = state.get("recent", {})
        window = {
            c.chunk_id: c.stamp
            for c in self.chroma.get(partition, where={STAMP: {"$gte": since}}, fields="meta")
        }
        stale = [cid for cid, stamp in window.items() if recent.get(cid) != stamp]
        fetched = self.chroma.get(partition, stale) if stale else []
        self._index(part, partition, fetched, ())
        state.update(collection=str(collection.id), synced=started, recent=window)
        unexplained = set(state.get("unexplained", []))
        changed = len(stale)
        if collection.count() != part.chunks.count() + len(unexplained):  # an ids-only scan
            pages = self.chroma.pages(partition, fields="ids")
            remote = {c.chunk_id for page in pages for c in page}
            local = part.chunks.ids()
            gone = sorted(local - remote)
            fetched = self.chroma.get(partition, sorted(remote - local - unexplained))
            self._index(part, partition, fetched, gone)
            empty = {c.chunk_id for c in fetched if not c.text.strip()}
            state["unexplained"] = sorted((unexplained & remote) | empty)
            changed += len(gone) + len(fetched)
        part.save()
        return changed

    def _rebuild(self, part: _Partition, partition: str) -> int:
        """Build one partition's cache afresh from its collection."""
        started, collection = time.time(), self.chroma.collection(partition)
        part.chunks.clear()
        part.documents.clear()
        state = part.state = {"format": FORMAT, "synced": started, "recent": {}, "unexplained": []}
        state["collection"] = None if collection is None else str(collection.id)
        sources: set[str] = set()

        def rows() -> Iterator[tuple[str, str, str]]:
            for page in self.chroma.pages(partition) if collection is not None else ():
                for chunk in page:
                    if not chunk.text.strip():
                        state["unexplained"].append(chunk.chunk_id)
                        continue
                    if chunk.stamp >= started - self.overlap:
                        state["recent"][chunk.chunk_id] = chunk.stamp
                    sources.add(chunk.source)
                    yield chunk.chunk_id, chunk.text, chunk.source

        part.chunks.write(rows())
        self._documents(part, partition, sources, {})
        part.save()
        if part.chunks.count():
            logger.info(
                "keyword cache of partition %r rebuilt from Chroma", partition or "(shared)"
            )
        return part.chunks.count()

    # -- writing -------------------------------------------------------------------------
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
            complete: Every chunk, by source, of the sources the write gave whole
                (``add_documents``): their document rows need no read from Chroma.
        """
        part = self._part(partition)
        with part.exclusive(wait=True):
            try:
                self._index(part, partition, upserted, deleted, complete or {})
            except BaseException:
                part.checked_at = None  # caught up from Chroma when next used
                raise
            if (state := part.state) is None:  # lost meanwhile: the next search rebuilds it
                part.checked_at = None
                return
            if state["collection"] is None and (collection := self.chroma.collection(partition)):
                state["collection"] = str(collection.id)
            recent = {cid: s for cid, s in state["recent"].items() if cid not in set(deleted)}
            recent.update({c.chunk_id: c.stamp for c in upserted})
            if self.exclusive and upserted and part.checked_at is not None:  # all before is in
                state["synced"] = max(state["synced"], min(c.stamp for c in upserted))
                recent = {
                    cid: s for cid, s in recent.items() if s >= state["synced"] - self.overlap
                }
            state["recent"] = recent
            part.save()

    def _index(
        self,
        part: _Partition,
        partition: str,
        upserted: Sequence[Chunk],
        deleted: Sequence[str],
        complete: Mapping[str, Sequence[Chunk]] | None = None,
    ) -> None:
        """Write chunks into both indexes (a chunk without text is only removed)."""
        ids = [*deleted, *(c.chunk_id for c in upserted)]
        affected = {c.source for c in upserted} | set(part.chunks.sources(ids).values())
        rows = ((c.chunk_id, c.text, c.source) for c in upserted if c.text.strip())
        part.chunks.write(rows, [*deleted, *(c.chunk_id for c in upserted if not c.text.strip())])
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
        grouped = {s: list(complete[s]) for s in sources if s in complete}
        missing = sorted(sources - set(grouped))
        for chunk in self.chroma.of_sources(partition, missing, fields="all"):
            grouped.setdefault(chunk.source, []).append(chunk)
        texts = {
            s: documents.document_text(c for c in grouped.get(s, []) if c.text.strip())
            for s in sources
        }
        part.documents.write(
            ((s, t, s) for s, t in texts.items() if t), [s for s, t in texts.items() if not t]
        )

    # -- checking ------------------------------------------------------------------------
    def check(self, partitions: Sequence[str], *, repair: bool, kb_name: str) -> ConsistencyReport:
        """Catch each partition up, then compare it with Chroma by id; ``repair`` rebuilds.

        What a catch-up cannot see is what is left to report: rows changed in the
        cache itself, or ids swapped one for one by a client that does not stamp.
        """
        report = ConsistencyReport(kb_name, [])
        for partition in partitions:
            part = self._part(partition)
            with contextlib.suppress(ValueError, OSError):  # a damaged cache is reported below
                self.catch_up(partition)
            with part.exclusive(wait=True):
                texts = {
                    c.chunk_id: bool(c.text.strip())
                    for page in self.chroma.pages(partition, fields="stored")
                    for c in page
                }
                searchable = {cid for cid, has_text in texts.items() if has_text}
                try:
                    local = part.chunks.ids()
                except (ValueError, OSError):  # damaged: nothing in it counts
                    local = set()
                drift = PartitionDrift(
                    partition, len(texts), sorted(searchable - local), sorted(local - searchable),
                    sorted(set(texts) - searchable),
                )  # fmt: skip
                report.partitions.append(drift)
                if repair and not drift.clean:
                    self._rebuild(part, partition)
                    part.checked_at = time.monotonic()
        report.repaired = repair and not report.clean
        return report
