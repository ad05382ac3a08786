"""Ingestion input that used to degrade badly: guessed encodings, pathological HTML."""

# ruff: noqa: RUF001 - the test data is non-ASCII text on purpose

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject import KnowledgeBase, ingest
from langchain_knowledge_inject._ingest.html_text import html_to_text
from langchain_knowledge_inject._ingest.text_decoding import decode_bytes


@pytest.fixture
def kb(tmp_path: Path):
    with KnowledgeBase(
        "docs", path=tmp_path / "store", embeddings=DeterministicFakeEmbedding(size=32)
    ) as knowledge_base:
        yield knowledge_base


def _texts(kb: KnowledgeBase, path: Path) -> str:
    """The stored text of one file's chunks, as Chroma holds them."""
    got = kb.vectorstore().get(where={"source_path": str(path.resolve())})
    return " ".join(got["documents"])


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("La règle: les employés reçoivent 25 jours de congé.", "latin-1"),
        ("règle", "latin-1"),
        ("Die Straße ist schön; Grüße aus München.", "latin-1"),
        ("Cost: 50€ – “quoted” text…", "cp1252"),
        ("Привет, как дела? Всё хорошо, спасибо большое.", "cp1251"),
        ("Příliš žluťoučký kůň úpěl ďábelské ódy.", "cp1250"),
        ("Γειά σου κόσμε, αυτό είναι ελληνικό κείμενο.", "cp1253"),
    ],
)
def test_single_byte_encodings_are_read_right(text: str, encoding: str) -> None:
    decoded = decode_bytes(text.encode(encoding))
    assert decoded is not None and decoded.text == text and decoded.detected


def test_utf8_and_boms_are_sure_and_not_reported() -> None:
    for data in ("règle".encode(), "règle".encode("utf-8-sig"), "règle".encode("utf-16")):
        decoded = decode_bytes(data)
        assert decoded.text == "règle" and decoded.confident and not decoded.detected


def test_a_latin1_file_is_read_right_and_the_report_says_how(kb, tmp_path) -> None:
    path = tmp_path / "regle.txt"
    path.write_bytes("La règle des congés: 25 jours.".encode("latin-1"))
    report = ingest(kb, [path])
    assert "règle" in _texts(kb, path) and "rčgle" not in _texts(kb, path)
    assert report.warnings == [(str(path.resolve()), "not UTF-8: read as cp1252")]
    assert "read as cp1252" in report.summary()


def test_an_ambiguous_guess_is_flagged_low_confidence_and_logged(kb, tmp_path, caplog) -> None:
    path = tmp_path / "turkish.txt"
    path.write_bytes("Türkçe metin: işçiler yıllık izin alır.".encode("cp1254"))
    with caplog.at_level(logging.WARNING, logger="langchain_knowledge_inject"):
        report = ingest(kb, [path])
    [(source, message)] = report.warnings
    assert source == str(path.resolve()) and "low confidence" in message
    assert "low confidence" in caplog.text


def test_a_utf8_file_has_no_warning(kb, tmp_path) -> None:
    path = tmp_path / "utf8.txt"
    path.write_text("La règle des congés: 25 jours.", encoding="utf-8")
    assert ingest(kb, [path]).warnings == []


def test_html_declared_charset_is_honoured(kb, tmp_path) -> None:
    path = tmp_path / "page.html"
    head = '<html><head><meta charset="iso-8859-1"><title>Règle</title></head>'
    page = head + "<body><p>Congé payé</p>"
    path.write_bytes(page.encode("latin-1"))
    report = ingest(kb, [path])
    assert report.warnings == []
    assert "Congé payé" in _texts(kb, path)


def test_twenty_thousand_unclosed_divs_are_ingested_whole(kb, tmp_path) -> None:
    path = tmp_path / "divs.html"
    path.write_text("<html><body>" + "".join(f"<div>item{i} " for i in range(20_000)))
    report = ingest(kb, [path])
    assert report.files_read == 1 and not report.files_skipped
    text = _texts(kb, path)
    assert all(f"item{i}" in text for i in (0, 9_999, 19_999))
    # the time it takes (linear, against BeautifulSoup's quadratic): benchmarks/html_parse.py


@pytest.mark.parametrize(
    ("markup", "expected"),
    [
        ("<h2>Leave</h2><p>25 days.</p>", "## Leave\n\n25 days."),
        ("<ul><li>One</li><li>Two &amp; three</li></ul>", "- One\n- Two & three"),
        ("a<br>b<br/>c", "a\nb\nc"),
        ("<p>x<script>alert('y')</script><style>p{}</style>z</p>", "xz"),
        ("<head><title>T</title><p>in an unclosed head</p><body><p>body</p>", "body"),
        ("<table><tr><td>a</td><td>b</td></tr></table>", "a b"),
        ("<h1>Unclosed heading<p>text", "# Unclosed heading text"),
        ("<svg><text>drawing</text></svg><p>after</p>", "after"),
        ("<p>1 &lt; 2 &amp;&amp; 3 &gt; 2</p>", "1 < 2 && 3 > 2"),
        ("<div><div><p>deep</div></div>tail", "deep\ntail"),
    ],
)
def test_html_text_extraction(markup: str, expected: str) -> None:
    assert html_to_text(markup)[1] == expected


def test_html_title() -> None:
    assert html_to_text("<title> A  page </title><p>x</p>")[0] == "A page"
    assert html_to_text("<p>no title</p>")[0] is None


@pytest.mark.parametrize(
    ("markup", "expected"),
    [
        ("<p>a < b and c > d</p>", "a < b and c > d"),
        ("<div class='x' <div class='y'>text</div>", "<div class='x'\ntext"),
        ("<p>x<!-- a < b --> y</p>", "x y"),
        ("<p>open <a", "open <a"),
    ],
)
def test_a_lone_angle_bracket_is_text(markup: str, expected: str) -> None:
    assert html_to_text(markup)[1] == expected


def test_unterminated_start_tags_are_read_in_one_pass() -> None:
    # the standard library's parser alone rescans each of these to the end
    # (quadratic); the time is in benchmarks/html_parse.py, the text is checked here
    _, text = html_to_text("<p>" + "<div class='x' item " * 20_000 + "<p>end</p>")
    assert text.endswith("end") and text.count("item") == 20_000


@pytest.mark.parametrize("paths", [5, [5], ["docs/", None]])
def test_paths_that_are_not_paths_are_an_ingest_error(kb, paths) -> None:
    from langchain_knowledge_inject.errors import IngestError

    with pytest.raises(IngestError, match="paths must be"):
        ingest(kb, paths)
