"""Unit tests for ingestion: loaders, splitting, skip reasons, report, idempotence."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase
from langchain_knowledge_inject._ingest import loading as ingestion
from langchain_knowledge_inject._ingest.folders import collect_files
from langchain_knowledge_inject._ingest.loading import (
    IngestReport,
    aingest,
    ingest,
    split_documents,
)
from langchain_knowledge_inject._ingest.sample_data import (
    SAMPLE_DOCUMENTS,
    SAMPLE_QUESTIONS,
    build_sample_knowledge_base,
)
from langchain_knowledge_inject.errors import ConfigurationError, IngestError


def make_pdf(pages: list[str]) -> bytes:
    """A minimal valid PDF with one line of Helvetica text per page ("" = no text)."""
    page_ids = [4 + 2 * i for i in range(len(pages))]
    kids = " ".join(f"{p} 0 R" for p in page_ids)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for page_id, text in zip(page_ids, pages, strict=True):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode() if text else b""
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
            f"<< /Font << /F1 3 0 R >> >> /Contents {page_id + 1} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return out


class CountingKB(KnowledgeBase):
    """The real knowledge base, counting its ``add_documents`` calls."""

    add_calls = 0

    def add_documents(self, *args, **kwargs):
        self.add_calls += 1
        return super().add_documents(*args, **kwargs)


def stored(kb: KnowledgeBase, path: Path | str, tenant_id: str | None = None) -> list[Document]:
    """The chunks stored for one file, in chunk order."""
    source = str(Path(path).resolve())
    got = kb.vectorstore(tenant_id=tenant_id).get(where={"source_path": source})
    docs = [
        Document(t, metadata=m) for t, m in zip(got["documents"], got["metadatas"], strict=True)
    ]
    return sorted(docs, key=lambda d: d.metadata.get("chunk_index", 0))


def all_sources(kb: KnowledgeBase, tenant_id: str | None = None) -> set[str]:
    return {m["source_path"] for m in kb.vectorstore(tenant_id=tenant_id).get()["metadatas"]}


@pytest.fixture
def kb(tmp_path: Path):
    with CountingKB(
        "docs", path=tmp_path / "store", embeddings=DeterministicFakeEmbedding(size=64)
    ) as knowledge_base:
        yield knowledge_base


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("Plain notes about the office kitchen.\n", encoding="utf-8")
    (folder / "leave.md").write_text(
        "# Leave\n\nIntro.\n\n## Carry-over\n\nUp to 5 days carry over.\n", encoding="utf-8"
    )
    (folder / "sub" / "page.html").write_text(
        "<html><head><title>Travel</title><style>p{color:red}</style></head>"
        "<body><h1>Hotels</h1><p>Cap is <b>EUR 160</b> per night.</p>"
        "<script>alert('x')</script></body></html>",
        encoding="utf-8",
    )
    (folder / "sub" / "manual.pdf").write_bytes(make_pdf(["First page text", "Second page text"]))
    return folder


def test_ingest_reads_every_supported_type_with_metadata(kb: CountingKB, corpus: Path) -> None:
    report = ingest(kb, corpus, category="hr", tenant_id="acme")

    assert report.files_read == 4
    assert report.files_skipped == []
    chunks = [
        d
        for f in ("notes.txt", "leave.md", "sub/page.html", "sub/manual.pdf")
        for d in stored(kb, corpus / f, "acme")
    ]
    assert report.chunks_added == len(chunks) == kb.info.chunk_count == 6  # a chunk per PDF page
    assert {c.metadata["file_type"] for c in chunks} == {"text", "markdown", "html", "pdf"}
    for chunk in chunks:
        assert Path(chunk.metadata["source_path"]).is_absolute()
        assert (
            chunk.metadata["source"]
            == Path(chunk.metadata["source_path"]).relative_to(corpus.resolve()).as_posix()
        )
        assert chunk.metadata["category"] == "hr"
        assert chunk.metadata["tenant_id"] == "acme"
    pdf = stored(kb, corpus / "sub" / "manual.pdf", "acme")
    assert [(c.metadata["page"], c.metadata["chunk_index"]) for c in pdf] == [(1, 0), (2, 1)]
    assert "Second page text" in pdf[1].page_content
    md = stored(kb, corpus / "leave.md", "acme")
    assert [c.metadata["headers"] for c in md] == ["Leave", "Leave > Carry-over"]
    assert md[1].page_content == "## Carry-over\n\nUp to 5 days carry over."
    [html] = stored(kb, corpus / "sub" / "page.html", "acme")
    assert html.metadata["title"] == "Travel"
    assert html.metadata["headers"] == "Hotels"
    assert "Cap is EUR 160 per night." in html.page_content
    assert "alert" not in html.page_content
    assert "color" not in html.page_content


def test_markdown_sections_keep_text_and_ignore_headings_in_code(kb: CountingKB) -> None:
    text = "Preface.\n\n# A\n\n## B\n\nbody b\n\n```\n# not a heading\n```\n\n## C\nbody c\n"
    chunks = split_documents([Document(text, metadata={"source": "x.md"})], file_type="markdown")

    assert [c.metadata.get("headers") for c in chunks] == [None, "A > B", "A > C"]
    assert "# A\n\n## B\n\nbody b\n\n```\n# not a heading\n```" in chunks[1].page_content
    assert [c.metadata["chunk_index"] for c in chunks] == [0, 1, 2]


def test_a_heading_or_title_opens_the_next_chunk_instead_of_standing_alone() -> None:
    long_paragraph = " ".join(f"w{i}" for i in range(300))  # over one chunk
    md = Document(f"# Policy\n\n## Scope\n\n{long_paragraph}\n", metadata={"source": "p.md"})
    txt = Document(f"A title line\n\n{long_paragraph}", metadata={"source": "t.txt"})

    md_chunks = split_documents([md], file_type="markdown", chunk_size=500, chunk_overlap=50)
    txt_chunks = split_documents([txt], chunk_size=500, chunk_overlap=50)

    assert md_chunks[0].page_content.startswith("# Policy\n\n## Scope\n\nw0 w1")
    assert txt_chunks[0].page_content.startswith("A title line\n\nw0 w1")
    for chunk in [*md_chunks, *txt_chunks]:
        assert "w" in chunk.page_content  # no chunk holds only a heading or title
        assert len(chunk.page_content) <= 500


def test_long_text_is_split_with_overlap() -> None:
    words = " ".join(f"word{i}" for i in range(400))
    chunks = split_documents(
        [Document(words, metadata={"source": "long.txt"})], chunk_size=200, chunk_overlap=50
    )

    assert len(chunks) > 5
    assert all(len(c.page_content) <= 200 for c in chunks)
    for first, second in itertools.pairwise(chunks):
        assert first.page_content.split()[-1] in second.page_content.split()


def test_bad_files_are_skipped_with_reasons_and_never_written(
    kb: CountingKB, tmp_path_factory
) -> None:
    tmp_path = tmp_path_factory.mktemp("files")
    (tmp_path / "good.txt").write_text("Good content.", encoding="utf-8")
    (tmp_path / "empty.md").write_bytes(b"")
    (tmp_path / "blank.md").write_text("   \n\n  ", encoding="utf-8")
    (tmp_path / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 10)
    (tmp_path / "report.docx").write_bytes(b"PK\x03\x04")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf")
    (tmp_path / "scan.pdf").write_bytes(make_pdf(["", ""]))

    report = ingest(kb, [tmp_path])

    reasons = {Path(path).name: reason for path, reason in report.files_skipped}
    assert set(reasons) == {
        "empty.md",
        "blank.md",
        "image.txt",
        "report.docx",
        "broken.pdf",
        "scan.pdf",
    }
    assert reasons["empty.md"] == "empty file"
    assert reasons["blank.md"] == "no text found"
    assert reasons["image.txt"] == "binary content (not text)"
    assert reasons["report.docx"].startswith("unsupported file type '.docx'")
    assert reasons["broken.pdf"].startswith("unreadable PDF")
    assert reasons["scan.pdf"] == "no text found (scanned PDF?)"
    assert report.files_read == 1
    assert all_sources(kb) == {str((tmp_path / "good.txt").resolve())}
    assert kb.get_source_fingerprint(str((tmp_path / "good.txt").resolve())) is not None
    for path, _ in report.files_skipped:
        assert kb.get_source_fingerprint(path) is None
    assert "report.docx: unsupported file type" in report.summary()


def test_unreadable_file_is_skipped(kb: CountingKB, tmp_path_factory, monkeypatch) -> None:
    tmp_path = tmp_path_factory.mktemp("files")
    (tmp_path / "ok.txt").write_text("fine", encoding="utf-8")
    locked = tmp_path / "locked.txt"
    locked.write_text("secret", encoding="utf-8")
    real_read = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self.name == "locked.txt":
            raise PermissionError(13, "Permission denied")
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    report = ingest(kb, tmp_path)

    assert report.files_read == 1
    assert report.files_skipped == [(str(locked.resolve()), "unreadable: Permission denied")]


def test_reingest_of_unchanged_folder_adds_nothing_and_loads_nothing(
    kb: CountingKB, corpus: Path, monkeypatch
) -> None:
    first = ingest(kb, corpus)
    calls_before = kb.add_calls

    def must_not_load(*args, **kwargs):
        raise AssertionError("an unchanged file was loaded again")

    monkeypatch.setattr(ingestion, "_load_and_split", must_not_load)
    second = ingest(kb, corpus)

    assert first.chunks_added == 6
    assert (second.files_read, second.chunks_added, second.chunks_replaced) == (0, 0, 0)
    assert second.files_unchanged == 4
    assert second.chunks_unchanged == first.chunks_added
    assert kb.add_calls == calls_before


def test_changed_file_replaces_its_chunks(kb: CountingKB, corpus: Path) -> None:
    ingest(kb, corpus)
    notes = corpus / "notes.txt"
    notes.write_text("The kitchen closes at 18:00.\n", encoding="utf-8")

    report = ingest(kb, corpus)

    assert (report.files_read, report.files_unchanged) == (1, 3)
    assert (report.chunks_added, report.chunks_replaced) == (1, 1)
    assert [d.page_content for d in stored(kb, notes)] == ["The kitchen closes at 18:00."]
    assert kb.info.chunk_count == 6


def test_changed_settings_reingest_the_file(kb: CountingKB, corpus: Path) -> None:
    ingest(kb, corpus)
    report = ingest(kb, corpus, category="policies")

    assert report.files_read == 4
    assert report.files_unchanged == 0
    assert report.chunks_updated == 6  # same text, new metadata: relabelled, not re-embedded
    assert report.chunks_added == 0
    assert {m["category"] for m in kb.vectorstore().get()["metadatas"]} == {"policies"}


def test_tenants_have_their_own_fingerprints(kb: CountingKB, corpus: Path) -> None:
    ingest(kb, corpus, tenant_id="a")
    report = ingest(kb, corpus, tenant_id="b")

    assert report.files_read == 4
    assert len(all_sources(kb, "a")) == len(all_sources(kb, "b")) == 4
    assert kb.info.chunk_count == 12


def test_missing_path_fails_before_anything_is_written(kb: CountingKB, corpus: Path) -> None:
    with pytest.raises(IngestError, match=r"path not found: .*nope") as info:
        ingest(kb, [corpus, corpus / "nope"])

    assert info.value.path == corpus / "nope"
    assert kb.add_calls == 0


def test_empty_folder_fails(kb: CountingKB, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".hidden").write_text("x", encoding="utf-8")

    with pytest.raises(IngestError, match="folder is empty"):
        ingest(kb, tmp_path / "empty")
    with pytest.raises(IngestError, match="no path given"):
        ingest(kb, [])


def test_hidden_entries_and_non_recursive(kb: CountingKB, corpus: Path) -> None:
    (corpus / ".git").mkdir()
    (corpus / ".git" / "HEAD.txt").write_text("ref", encoding="utf-8")
    (corpus / ".draft.md").write_text("# draft", encoding="utf-8")

    report = ingest(kb, corpus, recursive=False)

    assert report.files_read == 2  # notes.txt and leave.md; sub/ and hidden entries ignored
    assert report.files_skipped == []


def test_same_file_given_twice_is_read_once(kb: CountingKB, corpus: Path) -> None:
    report = ingest(kb, [corpus / "notes.txt", str(corpus / "notes.txt"), corpus])

    assert report.files_read == 4


def test_text_encodings(kb: CountingKB, tmp_path_factory) -> None:
    tmp_path = tmp_path_factory.mktemp("files")
    (tmp_path / "latin.txt").write_bytes("Le café est fermé pendant les congés.".encode("latin-1"))
    (tmp_path / "wide.txt").write_bytes("Überstunden".encode("utf-16"))
    (tmp_path / "bom.md").write_bytes("\ufeff# Titel\n\nInhalt".encode())

    ingest(kb, tmp_path)

    def texts(name: str) -> list[str]:
        return [d.page_content for d in stored(kb, tmp_path / name)]

    assert texts("latin.txt") == ["Le café est fermé pendant les congés."]
    assert texts("wide.txt") == ["Überstunden"]
    assert texts("bom.md") == ["# Titel\n\nInhalt"]


@pytest.mark.parametrize(
    ("size", "overlap", "option"),
    [(0, 0, "chunk_size"), (100, 100, "chunk_overlap"), (100, -1, "chunk_overlap")],
)
def test_invalid_chunking_is_a_configuration_error(kb, corpus, size, overlap, option) -> None:
    with pytest.raises(ConfigurationError) as info:
        ingest(kb, corpus, chunk_size=size, chunk_overlap=overlap)

    assert info.value.option == option
    assert kb.add_calls == 0


def test_progress_bar_goes_to_stderr(kb: CountingKB, corpus: Path, capsys) -> None:
    ingest(kb, corpus, progress=True)
    shown = capsys.readouterr().err
    ingest(kb, corpus, progress=False)

    assert "Ingesting" in shown
    assert "100%" in shown  # in bytes of the files, the chunks stored beside it
    assert "6 chunks" in shown
    assert capsys.readouterr().err == ""


def test_report_summary() -> None:
    report = IngestReport(
        files_read=1,
        chunks_added=3,
        chunks_unchanged=2,
        chunks_replaced=1,
        files_unchanged=4,
        files_skipped=[("/x/a.docx", "unsupported")],
        seconds=0.5,
    )

    assert report.summary() == (
        "Read 1 file in 0.5 s: 3 chunks added, 2 unchanged, 1 replaced; 4 files unchanged.\n"
        "Skipped 1:\n  /x/a.docx: unsupported"
    )


async def test_aingest_matches_ingest(kb: CountingKB, corpus: Path) -> None:
    report = await aingest(kb, corpus)

    assert report.files_read == 4
    assert report.chunks_added == 6


def test_sample_documents_hold_the_answers_to_the_sample_questions() -> None:
    by_source = {doc.metadata["source"]: doc for doc in SAMPLE_DOCUMENTS}

    assert 5 <= len(SAMPLE_DOCUMENTS) <= 8
    assert all(doc.metadata["category"] == "hr" for doc in SAMPLE_DOCUMENTS)
    for sample in SAMPLE_QUESTIONS:
        assert sample.answer in by_source[sample.expected_source].page_content


def test_build_sample_knowledge_base_is_idempotent(tmp_path: Path) -> None:
    fake = DeterministicFakeEmbedding(size=64)
    with build_sample_knowledge_base(path=tmp_path, embeddings=fake) as kb:
        info = kb.info
        hits = kb.search("carry over unused days", k=1, mode="keyword", min_score=0.0)
    with build_sample_knowledge_base(path=tmp_path, embeddings=fake) as again:
        assert again.info.chunk_count == info.chunk_count

    assert info.name == "hr-demo"
    assert info.chunk_count > len(SAMPLE_DOCUMENTS)  # split at headings
    assert "Annual leave policy" in info.topics
    assert hits[0].metadata["source"] == "leave_policy.md"
    assert hits[0].metadata["headers"] == "Annual leave policy > Carry-over"


# Symbolic links: followed inside the folder ingested only, each folder walked once.


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """A folder with links that loop, leave it, break, and stay inside it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    (root / ".drafts").mkdir()
    outside.mkdir()
    (root / "a.txt").write_text("Alpha policy text.", encoding="utf-8")
    (root / "sub" / "b.md").write_text("# Beta\n\nBeta policy text.", encoding="utf-8")
    (root / ".drafts" / "c.txt").write_text("Gamma draft text.", encoding="utf-8")
    (outside / "secret.txt").write_text("The door code is 7294.", encoding="utf-8")
    for name, target in {
        "self": ".",  # two links to the folder itself: an exponential walk, followed
        "again": ".",
        "sub/up": "..",
        "out": "../outside",
        "leak.txt": "../outside/secret.txt",
        "alias": "sub",  # inside, but walked already
        "a-copy.txt": "a.txt",  # inside: read once, under its real name
        "drafts": ".drafts",  # inside, reached only through the link: followed
        "broken.txt": "nowhere.txt",
    }.items():
        (root / name).symlink_to(target)
    return root


def test_links_out_of_the_folder_and_loops_are_not_followed_and_are_reported(
    kb: CountingKB, linked: Path
) -> None:
    report = ingest(kb, linked)

    assert report.files_read == 3 and report.files_skipped == []
    assert {kb_source.rsplit("/", 1)[-1] for kb_source in all_sources(kb)} == {
        "a.txt",
        "b.md",
        "c.txt",
    }
    assert not any("outside" in source for source in all_sources(kb))
    reasons = {Path(link).relative_to(linked).as_posix(): why for link, why in report.links_skipped}
    assert sorted(reasons) == ["again", "alias", "broken.txt", "leak.txt", "out", "self", "sub/up"]
    for loop in ("self", "again", "sub/up"):
        assert "a folder that holds it (a loop)" in reasons[loop]
    assert "already walked" in reasons["alias"]
    assert reasons["broken.txt"] == "broken link (to nowhere.txt)"
    for out in ("out", "leak.txt"):
        assert f"outside {linked}" in reasons[out]
    summary = report.summary()
    assert "Symbolic links not followed (7):" in summary
    assert f"{linked / 'leak.txt'}: link to {linked.parent / 'outside' / 'secret.txt'}" in summary


def test_links_inside_the_folder_are_followed_with_their_names(
    kb: CountingKB, linked: Path
) -> None:
    names: dict[Path, str] = {}
    files = collect_files([linked], recursive=True, report=IngestReport(), names=names)

    assert [names[path] for path, _ in files] == ["a.txt", "sub/b.md", "drafts/c.txt"]
    assert [path for path, _ in files] == [
        linked / "a.txt",
        linked / "sub" / "b.md",
        linked / ".drafts" / "c.txt",
    ]


def test_a_link_loop_of_links_and_a_non_recursive_walk(kb: CountingKB, linked: Path) -> None:
    (linked / "ping").symlink_to("pong")
    (linked / "pong").symlink_to("ping")

    report = ingest(kb, linked, recursive=False)

    reasons = {Path(link).name: why for link, why in report.links_skipped}
    assert reasons["ping"] == reasons["pong"] == "link loop (it never reaches a file or folder)"
    assert sorted(reasons) == ["broken.txt", "leak.txt", "ping", "pong"]  # folders: not walked
    assert report.files_read == 1  # a.txt (and a-copy.txt, the same file)


def test_a_folder_of_links_out_only_is_empty(kb: CountingKB, linked: Path, tmp_path) -> None:
    only = tmp_path / "only-links"
    only.mkdir()
    (only / "leak.txt").symlink_to(linked.parent / "outside" / "secret.txt")

    with pytest.raises(IngestError, match="links out of the folder"):
        ingest(kb, only)
    assert kb.add_calls == 0


def test_a_file_link_given_by_name_is_read(kb: CountingKB, linked: Path) -> None:
    report = ingest(kb, linked / "leak.txt")  # the caller named it: read where it points

    assert report.files_read == 1 and report.links_skipped == []
    assert [d.page_content for d in stored(kb, linked / "leak.txt")] == ["The door code is 7294."]
