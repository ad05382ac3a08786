r"""Ingest files and folders into a knowledge base: load, split, fingerprint, add.

How files are read and cut (PDF pages, Markdown and HTML sections, one split
with the knowledge base's own ``text_splitter``): docs/knowledge-base.md, "Ingest".
Decoding: :mod:`~._ingest.text_decoding`; which files a folder holds:
:mod:`~._ingest.folders`.

Chunk metadata: ``source`` (the name the model cites), ``source_path`` (the
resolved path, the source's identity), ``file_name``, ``file_type``,
``chunk_index``, ``page`` (PDF), ``headers`` (Markdown, HTML), ``title`` (HTML),
``category`` and ``tenant_id``. A source's fingerprint is ``sha256:<file
hash>;settings:<hash of splitter, category, tenant>;chunks:<count>``: an
unchanged file is skipped unparsed. A file is read whole (a bad one is reported; a large
text decoded by blocks), split a window at a time and committed batch by batch: a stopped
ingest keeps every batch, the next embeds only what is missing (``add_documents(unfinished=)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import ctypes
import hashlib
import io
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_text_splitters import Language, RecursiveCharacterTextSplitter, TextSplitter

from langchain_knowledge_inject._ingest.folders import FileType, collect_files
from langchain_knowledge_inject._ingest.html_text import html_to_text
from langchain_knowledge_inject._ingest.text_decoding import BOMS, decode_blocks, decode_bytes
from langchain_knowledge_inject._store.calls import check_seconds
from langchain_knowledge_inject._store.chroma import SOURCE_PATH_KEY, source_key
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)
logging.getLogger("pypdf").addHandler(logging.NullHandler())  # its warnings: to the log alone

DEFAULT_CHUNK_SIZE = 1000
DEFAULT_CHUNK_OVERLAP = 150

LARGE_FILE_MB = 10.0  # files larger than this (MB) are named before an ingest starts
_PIPELINE_VERSION = 3  # bump when loading or splitting changes, to re-ingest everything
_WINDOW_CHARS = 100_000  # a longer section is split a window at a time, each cut at a break
_BLOCKS_OVER = 4 << 20  # a plain text over this many bytes is decoded a block at a time
# glibc keeps freed heap in its arenas: RSS grew ~250 MB in 1,000 chunks, trimmed after a batch
_TRIM = getattr(ctypes.CDLL(None), "malloc_trim", None) if sys.platform == "linux" else None
_COMMIT_S, _MIN_BATCH, _MAX_BATCH = 3.0, 32, 256  # a batch commits in ~3 s: the bar moves
_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_TITLE_LINE = re.compile(r"\s*([^\n]+)\n[ \t]*\n")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_DEFAULT_SEPARATORS = RecursiveCharacterTextSplitter()._separators
_MARKDOWN_SEPARATORS = RecursiveCharacterTextSplitter.get_separators_for_language(Language.MARKDOWN)


@dataclass
class IngestReport:
    """What one ``ingest`` call did.

    Attributes:
        files_read: Files loaded, split and written; ``files_unchanged``: their
            fingerprint matched; ``files_skipped``: ``(path, reason)``.
        chunks_added: Chunks embedded and written; ``chunks_unchanged``: already
            stored; ``chunks_updated``: relabelled (a new ``category``), not embedded
            again; ``chunks_replaced``: removed because their file changed.
        warnings: ``(path, message)`` of files read with a caveat (not UTF-8).
        links_skipped: ``(link, reason)`` of each symbolic link not followed.
        seconds: Wall-clock time of the whole call.
    """

    files_read: int = 0
    files_unchanged: int = 0
    files_skipped: list[tuple[str, str]] = field(default_factory=list)
    chunks_added: int = 0
    chunks_unchanged: int = 0
    chunks_updated: int = 0
    chunks_replaced: int = 0
    warnings: list[tuple[str, str]] = field(default_factory=list)
    links_skipped: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        """Return a short human-readable summary, one skipped file per line.

        Example:
            >>> IngestReport(files_read=2, chunks_added=7, seconds=1.3).summary()
            'Read 2 files in 1.3 s: 7 chunks added, 0 unchanged, 0 replaced; 0 files unchanged.'
        """
        relabelled = f", {self.chunks_updated} relabelled" if self.chunks_updated else ""
        lines = [
            f"Read {_plural(self.files_read, 'file')} in {self.seconds:.1f} s: "
            f"{_plural(self.chunks_added, 'chunk')} added, {self.chunks_unchanged} unchanged"
            f"{relabelled}, {self.chunks_replaced} replaced; "
            f"{_plural(self.files_unchanged, 'file')} unchanged."
        ]
        for title, rows in (
            (f"Skipped {len(self.files_skipped)}", self.files_skipped),
            (f"Symbolic links not followed ({len(self.links_skipped)})", self.links_skipped),
            (f"Warnings ({len(self.warnings)})", self.warnings),
        ):
            lines.extend([f"{title}:", *(f"  {path}: {why}" for path, why in rows)] if rows else [])
        return "\n".join(lines)


class _SkipFile(Exception):
    """This file cannot be ingested; the message is the reason shown to the user."""


def split_documents(
    documents: Iterable[Document],
    *,
    file_type: FileType = "text",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
    splitter: TextSplitter | None = None,
) -> list[Document]:
    r"""Split documents into chunks the way ``ingest`` does: one split, one overlap.

    Markdown and HTML-derived text is sectioned at headings first (the path goes to
    ``metadata["headers"]``), a section's heading lines (or a text's short title
    line) opening its first chunk. Each section is cut once to ``splitter`` (a
    knowledge base's ``text_splitter``: its chunks are then stored as they are;
    a ``RecursiveCharacterTextSplitter`` cuts Markdown at its structure first,
    any other splitter gets each section whole) or, without one, to
    ``chunk_size`` characters. Each chunk copies its document's metadata and
    gets ``chunk_index``, counted per ``metadata["source"]``.

    Args:
        documents: Documents to split (each should carry ``metadata["source"]``).
        file_type: ``"markdown"`` or ``"html"`` (converted to text) for heading-aware
            splitting; ``"text"`` or ``"pdf"`` for plain splitting.
        chunk_size: Most characters per chunk, without ``splitter``.
        chunk_overlap: Characters shared by consecutive chunks, without ``splitter``.
        splitter: Cut to this splitter's size, overlap and length function instead.

    Raises:
        ConfigurationError: If ``chunk_size`` or ``chunk_overlap`` is out of range.

    Example:
        >>> doc = Document("# Leave\n\nYou get 25 days.", metadata={"source": "leave.md"})
        >>> [c.metadata["headers"] for c in split_documents([doc], file_type="markdown")]
        ['Leave']
    """
    splitter = ingest_splitter(None, chunk_size, chunk_overlap) if splitter is None else splitter
    return [chunk for chunk, _ in _chunks(list(documents), file_type, splitter)]


def _chunks(
    documents: Sequence[Document], file_type: FileType, splitter: TextSplitter,
    blocks: Iterable[str] = (), length: int = 0,
) -> Iterator[tuple[Document, float]]:  # fmt: skip
    """The chunks of :func:`split_documents`, a window at a time, with the share of text read.

    With ``length``, the one document's text is ``blocks`` (``length`` characters in all).
    """
    markdown = file_type in ("markdown", "html")
    total, read = length or sum(len(doc.page_content) for doc in documents) or 1, 0
    counters: dict[object, int] = {}
    for doc in documents:
        text = doc.page_content
        sections = _markdown_sections(text) if markdown else [([], "", blocks if length else text)]
        for headers, head, body in sections:
            for window, first in _windows(body):
                read += len(window) + len(head) * first
                for piece in _split_section(head * first, window, markdown, splitter):
                    source = doc.metadata.get("source")
                    counters[source] = index = counters.get(source, -1) + 1
                    heading = {"headers": " > ".join(headers)} if headers else {}
                    metadata = {**doc.metadata, **heading, "chunk_index": index}
                    yield Document(page_content=piece, metadata=metadata), read / total


def _windows(text: str | Iterable[str]) -> Iterator[tuple[str, bool]]:
    """``text`` (or its blocks) in windows of ``_WINDOW_CHARS`` at most, cut after a break."""
    rest, start, first = "", 0, True
    for block in [text] if isinstance(text, str) else text:
        rest, start = rest[start:] + block, 0  # the whole text: one block, never copied
        while len(rest) - start > _WINDOW_CHARS:
            end, half = start + _WINDOW_CHARS, start + _WINDOW_CHARS // 2
            cuts = (rest.rfind(sep, half, end) + len(sep) for sep in ("\n\n", "\n", " "))
            cut = next((at for at in cuts if at > half), end)
            yield rest[start:cut], first
            start, first = cut, False
    yield rest[start:], first


def _split_section(head: str, body: str, markdown: bool, splitter: TextSplitter) -> list[str]:
    """Split one section; its heading lines (or a short title line) open the first chunk.

    The first chunk is cut with room left for the head (else a long first paragraph
    would leave a heading-only chunk), the rest of the body at full size, in the
    splitter's own lengths.
    """
    if not isinstance(splitter, RecursiveCharacterTextSplitter):
        return [piece for piece in splitter.split_text(head + body) if piece.strip()]
    size, length = splitter._chunk_size, splitter._length_function
    title = _TITLE_LINE.match(body)
    if not head.strip() and title and length(title.group(1)) < size // 2:
        head, body = body[: title.end()], body[title.end() :]
    room = size - length(head)
    if room < size // 2:
        head, body, room = "", head + body, size
    full = _resized(splitter, size, markdown)
    if not head.strip():
        return [piece for piece in full.split_text(body) if piece.strip()]
    pieces = _resized(splitter, room, markdown).split_text(body)
    if len(pieces) > 1:
        start = body.find(pieces[1], 1)  # where the second chunk, with its overlap, begins
        if start > 0:
            pieces = [pieces[0], *full.split_text(body[start:])]
    pieces = [piece for piece in pieces if piece.strip()]
    return [(head + pieces[0]).strip(), *pieces[1:]] if pieces else [head.strip()]


def _resized(
    splitter: RecursiveCharacterTextSplitter, room: int, markdown: bool
) -> RecursiveCharacterTextSplitter:
    """``splitter`` cut to ``room`` (overlap at most half); Markdown's default separators."""
    resized = copy.copy(splitter)
    if room < splitter._chunk_size:
        resized._chunk_size = room
        resized._chunk_overlap = min(splitter._chunk_overlap, room // 2)
    if markdown and splitter._separators == _DEFAULT_SEPARATORS:
        resized._separators = _MARKDOWN_SEPARATORS
        resized._is_separator_regex = True
    return resized


def _splitter_settings(splitter: TextSplitter) -> list[Any]:
    """What a splitter's chunks depend on, for the fingerprint of an ingested file."""
    length = getattr(splitter, "_length_function", len)
    kind = length if hasattr(length, "__qualname__") else type(length)
    return [
        type(splitter).__qualname__, getattr(splitter, "_chunk_size", None),
        getattr(splitter, "_chunk_overlap", None),
        "len" if length is len else f"{getattr(kind, '__module__', '')}.{kind.__qualname__}",
        getattr(splitter, "_separators", None),
    ]  # fmt: skip


def ingest(
    kb: KnowledgeBase,
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    category: str | None = None,
    tenant_id: str | None = None,
    progress: bool | None = None,
    recursive: bool = True,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    large_file_mb: float = LARGE_FILE_MB,
    skip_large: bool = False,
) -> IngestReport:
    """Load, split and add files and folders to a knowledge base.

    Supported: ``.txt``, ``.md``/``.markdown``, ``.html``/``.htm``, ``.pdf``, each
    file cut along its structure and each part once into the knowledge base's own
    chunks, committed batch by batch (module docstring: stopped, it resumes). A file
    whose fingerprint matches the stored one is skipped unparsed; a changed file
    replaces all its chunks; a file that cannot be ingested is listed in
    ``files_skipped`` and never aborts the run. Every path is checked first.

    Args:
        kb: The knowledge base.
        paths: Files and folders (walked; hidden entries ignored; symbolic links
            followed inside the folder only, reported otherwise).
        category: Stored as ``metadata["category"]`` on every chunk.
        tenant_id: Tenant partition to write to; also stored in metadata.
        progress: A tqdm bar on stderr (default: stderr a terminal, over 5 files).
        recursive: Walk sub-folders of the folders given.
        chunk_size: Character chunks of this size (default 1000 when only
            ``chunk_overlap`` is given); the knowledge base's splitter still applies
            after, so open it with ``text_splitter=None`` to keep larger ones.
        chunk_overlap: Characters shared by consecutive chunks (default 150, at
            most half of ``chunk_size``).
        large_file_mb: Files over this many MB are named before the work starts
            (logged, and in ``warnings``).
        skip_large: Refuse those files instead (in ``files_skipped``).

    Raises:
        IngestError: A path does not exist, no path is given, or a folder holds no files.
        ConfigurationError: ``chunk_size``, ``chunk_overlap``, ``large_file_mb`` out of range.

    Example:
        >>> from langchain_knowledge_inject import KnowledgeBase, ingest
        >>> kb = KnowledgeBase("handbook")  # doctest: +SKIP
        >>> print(ingest(kb, ["docs/"], category="hr").summary())  # doctest: +SKIP
        Read 12 files in 4.1 s: 96 chunks added, 0 unchanged, 0 replaced; 0 files unchanged.
    """
    splitter = ingest_splitter(kb, chunk_size, chunk_overlap)
    check_seconds("large_file_mb", large_file_mb)  # a number > 0, as seconds are
    start = time.perf_counter()
    report = IngestReport()
    names: dict[Path, str] = {}
    files = collect_files(paths, recursive=recursive, report=report, names=names)
    sized = _screen(files, large_file_mb, skip_large, report)
    settings = [_PIPELINE_VERSION, _splitter_settings(splitter), category, tenant_id]
    settings_hash = hashlib.sha256(json.dumps(settings, default=str).encode()).hexdigest()[:16]
    extra = {k: v for k, v in (("category", category), ("tenant_id", tenant_id)) if v is not None}
    with _progress_bar(sized, progress) as bar:
        batch, done = _Batch(kb, tenant_id, report, bar), 0
        for path, file_type, size in sized:
            opened = _open_file(kb, path, file_type, extra, settings_hash, splitter, report,
                                name=names.get(path, path.name))  # fmt: skip
            count = 0
            for chunk, read in opened[0] if opened else ():
                count += 1
                batch.add(chunk, done + int(read * size))
            if opened is not None:
                batch.finish(str(path), f"{opened[1]}chunks:{count}")
            batch.read, done = done + size, done + size
            batch.commit(full=False)  # commits only a full batch; the bar moves
        batch.commit()
    report.seconds = time.perf_counter() - start
    return report


async def aingest(
    kb: KnowledgeBase,
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    category: str | None = None,
    tenant_id: str | None = None,
    progress: bool | None = None,
    recursive: bool = True,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    large_file_mb: float = LARGE_FILE_MB,
    skip_large: bool = False,
) -> IngestReport:
    """Async twin of ``ingest``, run in a worker thread: the event loop stays free.

    Reading, parsing and embedding block, so nothing is awaited but the thread;
    the arguments, result and errors are those of ``ingest``.

    Example:
        >>> report = await aingest(kb, ["docs/"])  # doctest: +SKIP
    """
    return await asyncio.to_thread(ingest, **locals())  # every argument, passed on


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def ingest_splitter(
    kb: object, chunk_size: int | None = None, chunk_overlap: int | None = None
) -> TextSplitter:
    """The splitter ``ingest`` cuts with: ``kb.text_splitter``, or characters when sizes are given.

    Without one: ``chunk_size`` 1000, ``chunk_overlap`` 150 (at most half the chunk).

    Raises:
        ConfigurationError: If ``chunk_size`` or ``chunk_overlap`` is out of range.
    """
    if chunk_size is None and chunk_overlap is None:
        own = getattr(kb, "text_splitter", None)
        if own is not None:
            return own
    size = DEFAULT_CHUNK_SIZE if chunk_size is None else chunk_size
    if chunk_overlap is None:
        chunk_overlap = min(DEFAULT_CHUNK_OVERLAP, size // 2) if isinstance(size, int) else 0
    _check_chunking(size, chunk_overlap)
    return RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=chunk_overlap)


def _check_chunking(chunk_size: int, chunk_overlap: int) -> None:
    if not isinstance(chunk_size, int) or chunk_size < 1:
        msg = f"chunk_size must be a positive integer (characters), got {chunk_size!r}"
        raise ConfigurationError(msg, option="chunk_size", value=chunk_size)
    if not isinstance(chunk_overlap, int) or not 0 <= chunk_overlap < chunk_size:
        msg = f"chunk_overlap must be an integer in [0, chunk_size), got {chunk_overlap!r}"
        raise ConfigurationError(msg, option="chunk_overlap", value=chunk_overlap)


def _progress_bar(files: Sequence[tuple[Path, FileType, int]], progress: bool | None) -> Any:
    """A bar in bytes of the files (with the time left), the chunks stored beside it."""
    from tqdm.auto import tqdm

    total = sum(size for *_, size in files)
    if progress is None:
        progress = sys.stderr.isatty() and (len(files) > 5 or total > 1 << 20)  # files, MiB
    bar = {"unit": "B", "unit_scale": True, "unit_divisor": 1024, "desc": "Ingesting"}
    return tqdm(total=total, file=sys.stderr, disable=not progress, **bar)


def _screen(
    files: Sequence[tuple[Path, FileType]], large_mb: float, skip: bool, report: IngestReport
) -> list[tuple[Path, FileType, int]]:
    """The files with their sizes; those over ``large_mb`` named now (refused with ``skip``)."""
    sized = []
    for path, file_type in files:
        size = path.stat().st_size if path.is_file() else 0  # gone: reported when read
        if size > large_mb * 1e6:
            why = f"large file: {size / 1e6:.1f} MB, over large_file_mb={large_mb:g}"
            logger.warning("%s: %s", path, why + (" (skip_large)" if skip else ", read first"))
            (report.files_skipped if skip else report.warnings).append((str(path), why))
            if skip:
                continue
        sized.append((path, file_type, size))
    return sized


def _stored_chunk_count(fingerprint: str) -> int:
    _, _, count = fingerprint.rpartition(";chunks:")
    return int(count) if count.isdigit() else 0


class _Batch:
    """Chunks on their way in, committed when full; a file's last batch stores its fingerprint."""

    def __init__(self, kb: KnowledgeBase, tenant: Any, report: IngestReport, bar: Any) -> None:
        self.kb, self.tenant_id, self.report, self.bar = kb, tenant, report, bar
        self.docs: list[Document] = []
        self.unfinished: set[str] = set()
        self.fingerprints: dict[str, str] = {}
        self.stored, self.size, self.read = 0, _MIN_BATCH, 0  # read: bytes the docs reach

    def add(self, chunk: Document, read: int) -> None:
        self.commit(full=False)
        self.docs.append(chunk)
        self.unfinished.add(source_key(chunk.metadata))
        self.read = read

    def finish(self, source: str, fingerprint: str) -> None:
        self.unfinished.discard(source)
        self.fingerprints[source] = fingerprint
        self.report.files_read += 1

    def commit(self, *, full: bool = True) -> None:
        if self.docs and (full or len(self.docs) >= self.size):
            start, docs, report = time.perf_counter(), self.docs, self.report
            result = self.kb.add_documents(
                docs, tenant_id=self.tenant_id, fingerprints=self.fingerprints,
                unfinished=frozenset(self.unfinished),
            )  # fmt: skip
            if _TRIM is not None:  # the heap the batch's embedding freed goes back to the system
                _TRIM(0)
            report.chunks_added += result.added
            report.chunks_unchanged += result.unchanged
            report.chunks_updated += result.updated
            report.chunks_replaced += result.replaced
            self.stored, self.docs, self.fingerprints = self.stored + len(docs), [], {}
            rate = len(docs) / max(time.perf_counter() - start, 1e-3)
            self.size = max(_MIN_BATCH, min(_MAX_BATCH, int(rate * _COMMIT_S)))
        if not self.docs:  # all read so far is stored: shown at once
            self.bar.update(max(0, self.read - self.bar.n))
            self.bar.set_postfix_str(f"{self.stored} chunks")


def _open_file(
    kb: KnowledgeBase, path: Path, file_type: FileType, extra: Mapping[str, str],
    settings_hash: str, splitter: TextSplitter, report: IngestReport, *, name: str,
) -> tuple[Iterator[tuple[Document, float]], str] | None:  # fmt: skip
    """A new or changed file's chunks (split lazily) and fingerprint prefix; else None."""
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        report.files_skipped.append((source, f"unreadable: {exc.strerror or exc}"))
        return None
    prefix = f"sha256:{hashlib.sha256(data).hexdigest()};settings:{settings_hash};"
    stored = kb.get_source_fingerprint(source, tenant_id=extra.get("tenant_id"))
    if stored is not None and stored.startswith(prefix):
        report.files_unchanged += 1
        report.chunks_unchanged += _stored_chunk_count(stored)
        return None
    try:
        notes: list[str] = []
        chunks = _load_and_split(path, data, file_type, extra, splitter, name=name, notes=notes)
    except _SkipFile as exc:
        report.files_skipped.append((source, str(exc)))
        return None
    report.warnings.extend((source, note) for note in notes)
    return chunks, prefix


def _load_and_split(
    path: Path, data: bytes, file_type: FileType, extra: Mapping[str, str],
    splitter: TextSplitter, *, name: str, notes: list[str],
) -> Iterator[tuple[Document, float]]:  # fmt: skip
    """One file's bytes as chunks (split lazily), or ``_SkipFile``; caveats go to ``notes``."""
    if not data:
        raise _SkipFile("empty file")
    base = {"source": name, SOURCE_PATH_KEY: str(path), "file_name": path.name}
    base.update(file_type=file_type, **extra)
    length = 0  # of a text that reaches _chunks as blocks
    if file_type == "pdf":
        docs = [Document(text, metadata={**base, "page": page}) for page, text in _pdf_pages(data)]
    elif file_type == "html":
        title, text = html_to_text(_decode(data, notes, html=True)[0])
        docs = [Document(text, metadata={**base, "title": title} if title else base)]
    else:  # a large plain text: decoded a block at a time when it is UTF-8 or marked
        text, length = _decode(data, notes, blocks=file_type == "text" and len(data) > _BLOCKS_OVER)
        docs = [Document(text, metadata=base)]
    docs = [doc for doc in docs if length or (doc.page_content and not doc.page_content.isspace())]
    if not docs:
        raise _SkipFile("no text found" + (" (scanned PDF?)" if file_type == "pdf" else ""))
    return _chunks(docs, file_type, splitter, decode_blocks(data) if length else (), length)


def _decode(
    data: bytes, notes: list[str], *, html: bool = False, blocks: bool = False
) -> tuple[str, int]:
    """A text file's bytes as ``(text, 0)``; a guessed encoding is noted, an unsure guess logged.

    With ``blocks``: ``("", length)`` when :func:`decode_blocks` reads a text of that length.
    """
    if not data.startswith(BOMS) and b"\x00" in data[:8192]:
        raise _SkipFile("binary content (not text)")
    sizes: list[tuple[int, bool]] = []  # of decode_blocks' blocks, and if each is blank
    with contextlib.suppress(UnicodeDecodeError):
        sizes = [(len(block), not block.strip()) for block in decode_blocks(data)] if blocks else []
    length = 0 if all(blank for _, blank in sizes) else sum(size for size, _ in sizes)
    decoded = None if length else decode_bytes(data, html=html)
    if not length and decoded is None:
        raise _SkipFile("cannot decode text (unknown encoding)")
    text = next(decode_blocks(data)) if decoded is None else decoded.text  # a block: the sample
    sample = text[:8192]
    controls = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f")
    if sample and controls / len(sample) > 0.05:
        raise _SkipFile("binary content (not text)")
    if decoded and decoded.detected:
        note = f"not UTF-8: read as {decoded.encoding}"
        if not decoded.confident:
            note += " (low confidence: other encodings fit as well; save the file as UTF-8)"
            logger.warning("%s", note)
        notes.append(note)
    return ("", length) if length else (text, 0)


def _pdf_pages(data: bytes) -> list[tuple[int, str]]:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise _SkipFile("encrypted PDF (password required)")
        return [(number, page.extract_text() or "") for number, page in enumerate(reader.pages, 1)]
    except _SkipFile:
        raise
    except Exception as exc:  # pypdf raises many types for damaged files
        msg = f"unreadable PDF: {type(exc).__name__}: {exc}"
        raise _SkipFile(msg) from exc


def _markdown_sections(text: str) -> Iterator[tuple[list[str], str, str]]:
    """Cut Markdown at ATX headings (not inside code fences), keeping text verbatim.

    Yields ``(heading path, heading lines, body)`` per section. A heading
    directly followed by another heading joins the next section's heading lines.
    """
    stack: list[tuple[int, str]] = []
    head: list[str] = []
    body: list[str] = []
    fence = ""
    for line in text.splitlines(keepends=True):
        fence_match = _FENCE.match(line)
        heading = None if fence or fence_match else _ATX_HEADING.match(line.rstrip("\r\n"))
        if fence_match and (not fence or fence_match.group(1).startswith(fence)):
            fence = "" if fence else fence_match.group(1)
        if heading is None:
            (body if body or line.strip() else head).append(line)
            continue
        if body:
            yield [title for _, title in stack], "".join(head), "".join(body)
            head, body = [], []
        level = len(heading.group(1))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading.group(2).strip()))
        head.append(line)
    if body:
        yield [title for _, title in stack], "".join(head), "".join(body)
