"""Ingest that streams and commits: bounded batches, a stop that keeps them, a run that resumes.

A large file is split a window at a time and written batch by batch
(``add_documents(unfinished=...)``); a stop between two batches (here an exception
from the third commit, as a kill would leave it) keeps every committed batch
searchable, the next run embeds only what is missing, and a file's stale chunks
and fingerprint wait until the file is whole. The real SIGKILL is
``tests/integration_tests/test_ingest_kill.py``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_knowledge_inject import KnowledgeBase, ingest
from langchain_knowledge_inject._ingest import loading, text_decoding
from langchain_knowledge_inject._ingest.loading import split_documents
from langchain_knowledge_inject._store import documents
from langchain_knowledge_inject._store.embeddings import default_embeddings, default_token_counter
from langchain_knowledge_inject.errors import ConfigurationError
from tests.unit_tests.fakes import CountingEmbedding

WORDS = [
    "leave",
    "travel",
    "expense",
    "laptop",
    "parental",
    "remote",
    "sick",
    "hotel",
    "claim",
    "receipt",
    "policy",
]
SIZES = {"chunk_size": 300, "chunk_overlap": 30}


def paragraphs(seed: int, count: int) -> str:
    rnd = random.Random(seed)
    return "".join(
        f"Paragraph {seed}-{i}: " + " ".join(rnd.choice(WORDS) for _ in range(50)) + "\n\n"
        for i in range(count)
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Apples: the apple allowance is 25 days.\n", encoding="utf-8")
    (docs / "big.txt").write_text(paragraphs(1, 700), encoding="utf-8")  # ~250 KB: 3 windows
    (docs / "z.txt").write_text("Zebras: the zebra rule holds.\n", encoding="utf-8")
    return docs


@pytest.fixture
def kb(tmp_path: Path):
    with KnowledgeBase(
        "docs", path=tmp_path / "store", embeddings=CountingEmbedding(size=32), text_splitter=None
    ) as knowledge_base:
        yield knowledge_base


def stop_at_commit(monkeypatch: pytest.MonkeyPatch, kb: KnowledgeBase, number: int) -> list[int]:
    """Make the ``number``-th ``add_documents`` of ``kb`` fail, as a kill would stop it there."""
    committed: list[int] = []
    real = kb.add_documents

    def add_documents(documents, **kwargs):
        if len(committed) + 1 == number:
            raise KeyboardInterrupt
        result = real(documents, **kwargs)
        committed.append(len(documents))
        return result

    monkeypatch.setattr(kb, "add_documents", add_documents)
    return committed


def search_sources(kb: KnowledgeBase, query: str) -> list[str]:
    return [d.metadata["source"] for d in kb.search(query, k=1, min_score=0.0, mode="keyword")]


def test_a_stopped_ingest_keeps_every_committed_batch_and_the_next_run_resumes(
    kb, folder, monkeypatch
):
    big = str((folder / "big.txt").resolve())
    committed = stop_at_commit(monkeypatch, kb, 3)
    with pytest.raises(KeyboardInterrupt):
        ingest(kb, folder, **SIZES)
    monkeypatch.undo()

    assert len(committed) == 2 and kb.count() == sum(committed)  # two batches, nothing else
    assert search_sources(kb, "apple allowance") == ["a.txt"]  # read before the large file
    assert kb.get_source_fingerprint(big) is None  # the large file is not finished
    assert kb.check().clean  # the keyword side holds exactly what Chroma holds

    embedded = kb.embeddings.documents_embedded
    report = ingest(kb, folder, **SIZES)
    total = len(split_documents([Document((folder / "big.txt").read_text())], **SIZES)) + 2
    assert kb.count() == total
    assert report.chunks_added == total - sum(committed)  # nothing embedded again
    assert kb.embeddings.documents_embedded - embedded == report.chunks_added
    assert (report.files_read, report.files_unchanged, report.chunks_replaced) == (2, 1, 0)
    assert kb.get_source_fingerprint(big) is not None
    assert search_sources(kb, "zebra rule") == ["z.txt"]
    assert kb.check().clean

    again = ingest(kb, folder, **SIZES)
    assert (again.files_unchanged, again.chunks_added, again.chunks_unchanged) == (3, 0, total)


def test_a_changed_large_file_drops_its_old_chunks_only_once_it_is_whole(kb, folder, monkeypatch):
    big = folder / "big.txt"
    ingest(kb, folder, **SIZES)
    first = kb.get_source_fingerprint(str(big.resolve()))
    big.write_text(paragraphs(2, 400) + paragraphs(1, 100), encoding="utf-8")  # new, then old
    old_ids = set(kb.vectorstore().get()["ids"])

    stop_at_commit(monkeypatch, kb, 2)
    with pytest.raises(KeyboardInterrupt):
        ingest(kb, folder, **SIZES)
    monkeypatch.undo()
    assert old_ids <= set(kb.vectorstore().get()["ids"])  # the old version is still whole
    assert kb.get_source_fingerprint(str(big.resolve())) in (None, first)

    report = ingest(kb, folder, **SIZES)
    expected = [d.page_content for d in split_documents([Document(big.read_text())], **SIZES)]
    stored = kb.vectorstore().get(where={"source_path": str(big.resolve())})["documents"]
    assert sorted(stored) == sorted(expected)  # the old version's other chunks are gone
    assert report.chunks_replaced == len(old_ids - set(kb.vectorstore().get()["ids"]))
    assert kb.get_source_fingerprint(str(big.resolve())) not in (None, first)
    assert kb.check().clean


def test_add_documents_takes_a_source_in_several_calls(kb):
    def doc(text: str) -> Document:
        return Document(text, metadata={"source": "big.txt"})

    kb.add_documents([doc("old one"), doc("old two")], fingerprints={"big.txt": "v1"})
    kb.add_documents([doc("new one")], unfinished={"big.txt"})
    assert kb.count() == 3  # nothing removed yet
    assert kb.get_source_fingerprint("big.txt") == "v1"  # the new version is not finished
    result = kb.add_documents([doc("new two")], fingerprints={"big.txt": "v2"})
    assert result.replaced == 2
    texts = sorted(kb.vectorstore().get()["documents"])
    assert texts == ["new one", "new two"]
    assert kb.get_source_fingerprint("big.txt") == "v2"
    again = kb.add_documents([doc("new one"), doc("new two")], fingerprints={"big.txt": "v2"})
    assert (again.added, again.unchanged, again.updated, again.replaced) == (0, 2, 0, 0)


def test_large_files_are_named_before_the_work_and_refused_with_skip_large(
    kb, folder, caplog, monkeypatch
):
    calls = stop_at_commit(monkeypatch, kb, 0)  # counts the commits, stops none
    with caplog.at_level(logging.WARNING, logger="langchain_knowledge_inject"):
        report = ingest(kb, folder, large_file_mb=0.1, skip_large=True, **SIZES)
    [record] = [r for r in caplog.records if "big.txt" in r.getMessage()]
    assert "large file" in record.getMessage() and "skip_large" in record.getMessage()
    assert [Path(p).name for p, _ in report.files_skipped] == ["big.txt"]
    assert report.files_read == 2 and kb.count() == 2 and len(calls) == 1

    report = ingest(kb, folder, large_file_mb=0.1, **SIZES)
    assert [Path(p).name for p, _ in report.warnings] == ["big.txt"]
    assert report.files_read == 1
    with pytest.raises(ConfigurationError) as info:
        ingest(kb, folder, large_file_mb=0)
    assert info.value.option == "large_file_mb"


def test_a_long_text_reaches_the_splitter_a_window_at_a_time() -> None:
    longest = [0]

    def length(text: str) -> int:
        longest[0] = max(longest[0], len(text))
        return len(text)

    splitter = RecursiveCharacterTextSplitter(
        chunk_size=300, chunk_overlap=30, length_function=length
    )
    text = paragraphs(3, 1500)  # ~540 KB
    chunks = loading._chunks([Document(text, metadata={"source": "t"})], "text", splitter)
    first, share = next(chunks)
    assert longest[0] <= loading._WINDOW_CHARS and 0 < share < 0.5  # split lazily
    rest = [chunk for chunk, _ in chunks]
    assert all(len(c.page_content) <= 300 for c in [first, *rest])
    words = " ".join(c.page_content for c in [first, *rest]).split()
    assert set(words) == set(text.split())
    assert [c.metadata["chunk_index"] for c in [first, *rest]] == list(range(len(rest) + 1))


def test_the_default_splitter_counts_word_pieces_as_the_tokenizer_does() -> None:
    count, tokenizer = default_token_counter(), default_embeddings().tokenizer  # files only
    for text in [paragraphs(4, 3), "naïve café 東京タワー, 25 days!", "x\u00a0y\tz\n\nw"]:
        assert count(text) == len(tokenizer.encode(text, add_special_tokens=False).ids)


def test_a_large_documents_row_holds_its_start_written_once_it_is_whole(kb, tmp_path, monkeypatch):
    monkeypatch.setattr(documents, "MAX_CHARS", 5000)
    docs = tmp_path / "long"
    docs.mkdir()
    (docs / "long.txt").write_text(f"openingword {paragraphs(5, 300)} closingword\n")
    report = ingest(kb, docs, **SIZES)
    assert report.chunks_added > 3 * loading._MIN_BATCH  # several batches
    source = str((docs / "long.txt").resolve())
    assert [s for s, _ in kb._cache.search_documents("", "openingword", k=5)] == [source]
    assert kb._cache.search_documents("", "closingword", k=5) == []  # past the row's start
    assert search_sources(kb, "closingword") == ["long.txt"]  # every chunk is searchable


@pytest.mark.parametrize(
    ("encoding", "blocks"),
    [("utf-8", True), ("utf-8-sig", True), ("utf-16", True), ("cp1252", False)],
)
def test_a_large_text_decoded_a_block_at_a_time_gives_the_chunks_of_the_whole_text(
    tmp_path, monkeypatch, encoding, blocks
) -> None:
    greek = encoding != "cp1252"  # then blocks cut inside characters of 2 and 4 bytes
    alpha, beta, math_alpha = "\u03b1", "\u03b2", "\U0001d6fc"
    text = "".join(
        f"\u00c9tude {i} \u2013 "
        + (f"{beta}-Catenin {math_alpha} " if greek else "cr\u00e8me ")
        + paragraphs(i, 3)
        .replace("\n\n", "\n" if i % 3 else "\n\n")
        .replace("a", alpha if greek else "a")
        + "x" * (700 * (i % 5 == 0))  # a long word: a window cut inside it
        for i in range(150)
    )
    path = tmp_path / "big.txt"
    path.write_bytes(text.encode(encoding))
    splitter = RecursiveCharacterTextSplitter(chunk_size=300, chunk_overlap=30)
    monkeypatch.setattr(loading, "_WINDOW_CHARS", 5000)  # ~40 windows
    decoded: list[int] = []

    def small_blocks(data: bytes) -> Iterator[str]:  # cut inside characters, windows, lines
        for block in text_decoding.decode_blocks(data, size=4099):
            decoded.append(len(block))
            yield block

    monkeypatch.setattr(loading, "decode_blocks", small_blocks)

    def load(over: int) -> tuple[list[tuple[str, dict, float]], list[str]]:
        monkeypatch.setattr(loading, "_BLOCKS_OVER", over)
        notes: list[str] = []
        chunks = loading._load_and_split(
            path, path.read_bytes(), "text", {"category": "c"}, splitter, name="big.txt",
            notes=notes,
        )  # fmt: skip
        return [(c.page_content, c.metadata, read) for c, read in chunks], notes

    whole, whole_notes = load(10**9)
    assert not decoded
    windowed, notes = load(1000)
    assert windowed == whole and notes == whole_notes and bool(notes) is not blocks
    assert (sum(decoded) > 2 * len(text)) is blocks  # counted, then split, a block at a time
    assert len(whole) > 100 and whole[-1][2] == 1.0
    assert [m["chunk_index"] for _, m, _ in whole] == list(range(len(whole)))


def test_a_large_blank_or_binary_text_is_skipped_as_the_whole_text_is(tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "_BLOCKS_OVER", 1000)
    for content, why in [(" \n\t" * 2000, "no text found"), ("\x01\x02ab" * 2000, "binary")]:
        path = tmp_path / "big.txt"
        path.write_text(content, encoding="utf-8")
        with pytest.raises(loading._SkipFile, match=why):
            loading._load_and_split(
                path, path.read_bytes(), "text", {}, loading.ingest_splitter(None), name="big.txt",
                notes=[],
            )  # fmt: skip


def test_the_heap_is_trimmed_after_every_committed_batch(kb, folder, monkeypatch):
    trims: list[int] = []
    committed = stop_at_commit(monkeypatch, kb, 10**6)  # counts the commits, stops none
    monkeypatch.setattr(loading, "_TRIM", trims.append)
    ingest(kb, folder, **SIZES)
    assert len(committed) > 3 and trims == [0] * len(committed)
