"""``ingest`` and ``kinject ingest`` cut each file once, to the knowledge base's own splitter.

The default model is a fake registered as the default (so the knowledge base's
default splitter counts the real model's word pieces); the tokenizer is local.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._ingest import loading
from langchain_knowledge_inject._ingest.loading import ingest, ingest_splitter, split_documents
from langchain_knowledge_inject._store import embeddings as emb_module
from langchain_knowledge_inject._store import knowledge_base
from langchain_knowledge_inject._surfaces.cli import main

DEFAULT_CHUNK_TOKENS = 128  # half the default model's window: the default splitter's chunks
# Numbered words: each occurs once in a file, so counting chunks per word measures overlap.
PROSE = " ".join(f"cell{i} infiltration was quantified (p<0.001)." for i in range(150))
SECTIONED = (
    "# Immunology report\n\n"
    + " ".join(f"alpha{i} lymphocytes were counted." for i in range(60))
    + "\n\n## Methods\n\n"
    + " ".join(f"beta{i} samples were stained." for i in range(60))
    + "\n"
)


class _WindowedFake(DeterministicFakeEmbedding):
    max_seq_length: int = 256

    @property
    def tokenizer(self):
        return emb_module.default_embeddings().tokenizer


@pytest.fixture
def default_model(monkeypatch: pytest.MonkeyPatch) -> DeterministicFakeEmbedding:
    """A fake with the default model's window and tokenizer, opened by name too."""
    fake = _WindowedFake(size=16)
    monkeypatch.setattr(knowledge_base, "default_embeddings", lambda **_: fake)
    return fake


@pytest.fixture
def files(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "prose.txt").write_text(PROSE + "\n", encoding="utf-8")
    (folder / "report.md").write_text(SECTIONED, encoding="utf-8")
    return folder


def stored(store: Path | str, name: str = "papers") -> dict[str, list[Document]]:
    """The chunks of each file (by file name), in chunk order."""
    with KnowledgeBase(name, path=store, create=False) as kb:
        got = kb.vectorstore().get()
    by_file: dict[str, list[Document]] = {}
    for text, meta in zip(got["documents"], got["metadatas"], strict=True):
        by_file.setdefault(meta["file_name"], []).append(Document(text, metadata=meta))
    return {
        name: sorted(chunks, key=lambda c: c.metadata["chunk_index"])
        for name, chunks in by_file.items()
    }


def chunks_per_word(chunks: list[Document], pattern: str) -> Counter[str]:
    return Counter(w for c in chunks for w in set(re.findall(pattern, c.page_content)))


def test_cli_ingest_cuts_once_to_the_models_window_with_one_overlap(
    default_model, files: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    assert main(["ingest", str(files), "--kb", "papers", "--path", str(store)]) == 0

    count = emb_module.default_token_counter()
    chunks = stored(store)
    for file_chunks in chunks.values():
        assert [c.metadata["chunk_index"] for c in file_chunks] == list(range(len(file_chunks)))
        for chunk in file_chunks:
            assert count(chunk.page_content) <= DEFAULT_CHUNK_TOKENS
            assert "chunk_part" not in chunk.metadata  # the knowledge base did not cut again
    prose = chunks["prose.txt"]
    assert len(prose) > 3
    # One overlap of at most 32 word pieces: a word is in one chunk, or two neighbours.
    assert max(chunks_per_word(prose, r"cell\d+").values()) == 2
    # An unstructured file gets exactly the chunks add_documents makes of its text.
    with KnowledgeBase("direct", path=store) as kb:
        assert [c.page_content for c in prose] == kb.text_splitter.split_text(PROSE)


def test_sections_keep_their_headings_as_metadata_and_as_their_first_chunk_opening(
    default_model, files: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    assert main(["ingest", str(files / "report.md"), "--kb", "papers", "--path", str(store)]) == 0

    report = stored(store)["report.md"]
    headers = [c.metadata["headers"] for c in report]
    intro = headers.count("Immunology report")
    assert intro > 1 and headers == ["Immunology report"] * intro + [
        "Immunology report > Methods"
    ] * (len(report) - intro)
    assert report[0].page_content.startswith("# Immunology report\n\nalpha0 lymphocytes")
    assert report[intro].page_content.startswith("## Methods\n\nbeta0 samples")
    assert all(re.search(r"(alpha|beta)\d+", c.page_content) for c in report)  # no heading alone
    assert max(chunks_per_word(report, r"(?:alpha|beta)\d+").values()) == 2
    assert not any(c.metadata.get("chunk_part") is not None for c in report)


def test_a_title_line_file_gets_the_chunks_add_documents_makes_of_title_and_text(
    default_model, tmp_path: Path
) -> None:
    title = "Tumour infiltrating lymphocytes predict survival in colorectal cancer"
    (tmp_path / "paper.txt").write_text(f"{title}\n\n{PROSE}\n", encoding="utf-8")
    with KnowledgeBase("papers", path=tmp_path / "store") as kb:
        ingest(kb, tmp_path / "paper.txt")
        direct = kb.text_splitter.split_text(f"{title} {PROSE}")
    chunks = stored(tmp_path / "store")["paper.txt"]

    assert len(direct) > 3
    assert chunks[0].page_content.startswith(f"{title}\n\ncell0 ")
    assert chunks[0].page_content.split() == direct[0].split()  # same words, same cut
    assert [c.page_content for c in chunks[1:]] == direct[1:]


def test_another_model_gets_the_knowledge_bases_character_chunks_once(tmp_path: Path) -> None:
    prose = " ".join(f"word{i} of a long plain text." for i in range(600))
    (tmp_path / "long.txt").write_text(prose, encoding="utf-8")
    with KnowledgeBase(
        "chars", path=tmp_path / "store", embeddings=DeterministicFakeEmbedding(size=8)
    ) as kb:
        ingest(kb, tmp_path / "long.txt")
        got = kb.vectorstore().get()
        own = kb.text_splitter.split_text(prose)

    chunks = sorted(
        zip(got["documents"], got["metadatas"], strict=True), key=lambda c: c[1]["chunk_index"]
    )
    assert [text for text, _ in chunks] == own  # 1000 characters, 150 overlap: its own split
    assert all(len(text) <= 1000 and "chunk_part" not in meta for text, meta in chunks)


def test_cli_chunk_size_is_characters_stored_as_asked(
    default_model, files: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    argv = ["ingest", str(files / "prose.txt"), "--kb", "papers", "--path", str(store)]
    assert main([*argv, "--chunk-size", "2000"]) == 0

    count = emb_module.default_token_counter()
    prose = stored(store)["prose.txt"]
    assert all(len(c.page_content) <= 2000 for c in prose)
    assert max(count(c.page_content) for c in prose) > DEFAULT_CHUNK_TOKENS  # not cut again
    assert len(prose[0].page_content) > 1800


def test_cli_chunk_overlap_alone_means_character_chunks_of_the_default_size(
    default_model, files: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    argv = ["ingest", str(files / "prose.txt"), "--kb", "papers", "--path", str(store)]
    assert main([*argv, "--chunk-overlap", "0"]) == 0

    prose = stored(store)["prose.txt"]
    assert all(len(c.page_content) <= loading.DEFAULT_CHUNK_SIZE for c in prose)
    assert max(len(c.page_content) for c in prose) > 900
    assert max(chunks_per_word(prose, r"cell\d+").values()) == 1  # no overlap, as asked


def test_a_new_splitter_reingests_the_files(tmp_path: Path, files: Path) -> None:
    emb = DeterministicFakeEmbedding(size=8)

    def run(size: int) -> tuple[int, int]:
        splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=size // 10)
        with KnowledgeBase(
            "docs", path=tmp_path / "s", embeddings=emb, text_splitter=splitter
        ) as kb:
            report = ingest(kb, files)
            return report.files_read, report.files_unchanged

    assert run(500) == (2, 0)
    assert run(500) == (0, 2)
    assert run(300) == (2, 0)  # the knowledge base's chunks changed: so do the files'


def test_ingest_splitter_choices(tmp_path: Path) -> None:
    own = RecursiveCharacterTextSplitter(chunk_size=50, chunk_overlap=5)
    with KnowledgeBase(
        "k", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=8), text_splitter=own
    ) as kb:
        assert ingest_splitter(kb) is own
        assert ingest_splitter(kb, 300)._chunk_size == 300
        assert ingest_splitter(kb, 300)._chunk_overlap == 150
    with KnowledgeBase(
        "w", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=8), text_splitter=None
    ) as whole:
        chars = ingest_splitter(whole)  # no splitter: files are still cut, by characters
        assert (chars._chunk_size, chars._chunk_overlap) == (1000, 150)


def test_split_documents_with_a_splitter_fits_it(default_model, tmp_path: Path) -> None:
    with KnowledgeBase("k", path=tmp_path) as kb:
        splitter = kb.text_splitter
    doc = Document(SECTIONED, metadata={"source": "r.md"})
    chunks = split_documents([doc], file_type="markdown", splitter=splitter)

    count = emb_module.default_token_counter()
    assert all(count(c.page_content) <= DEFAULT_CHUNK_TOKENS for c in chunks)
    assert chunks[0].page_content.startswith("# Immunology report\n\nalpha0")


def test_a_users_splitter_is_applied_as_it_is_to_text_without_a_head() -> None:
    splitter = RecursiveCharacterTextSplitter(chunk_size=100, chunk_overlap=60)
    text = " ".join(f"token{i}" for i in range(80))
    chunks = split_documents([Document(text, metadata={"source": "t.txt"})], splitter=splitter)

    assert [c.page_content for c in chunks] == splitter.split_text(text)  # its overlap kept
