"""HTML to text: the ingest's streaming pass against tree parsers, on bad and normal pages.

Pages: ``N`` unclosed ``<div>`` elements (N = 1,000 ... 20,000: BeautifulSoup
with ``html.parser`` is quadratic there), ``N`` start tags that never end
(``<div class='x'`` with no ``>``: the standard library's parser rescans each
one), and a normal page (headings, paragraphs, lists, a table, scripts).
Parsers, side by side in one run, median of ``--repeat``:

* ``stream``: :func:`langchain_knowledge_inject._ingest.html_text.html_to_text` (the
  ingest's choice: stdlib ``html.parser`` events, no tree);
* ``bs4-html.parser``: the previous extraction (BeautifulSoup tree rewrite);
* ``bs4-lxml``, ``lxml``, ``selectolax``: these and BeautifulSoup run when
  importable (``--extra-path DIR`` adds a folder where they are installed; none
  is a dependency). ``lxml`` and
  ``selectolax`` here only extract text (less work than the others); whether
  their text is complete is printed too (libxml2 stops at 256 levels).

Run: ``python benchmarks/html_parse.py [--extra-path /tmp/alt] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable

from langchain_knowledge_inject._ingest.html_text import html_to_text

_BLOCKS = re.compile(
    r"^(p|div|section|article|header|footer|nav|aside|main|li|tr|table|ul|ol|dl|dt|dd|pre"
    r"|blockquote|figure|figcaption|form|hr)$"
)


def bs4_tree(markup: str, parser: str = "html.parser") -> str:
    """The extraction ``ingest`` used before (BeautifulSoup tree rewrite)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(markup, parser)
    for tag in soup(["head", "script", "style", "noscript", "template", "svg"]):
        tag.decompose()
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for level in range(1, 7):
        for heading in soup.find_all(f"h{level}"):
            heading.string = f"\n\n{'#' * level} {' '.join(heading.get_text().split())}\n\n"
    for tag in soup.find_all(_BLOCKS):
        if tag.name == "li":
            tag.insert(0, "- ")
        tag.insert_after("\n")
    return soup.get_text()


def lxml_text(markup: str) -> str:
    import lxml.html

    return lxml.html.fromstring(markup).text_content()


def selectolax_text(markup: str) -> str:
    from selectolax.lexbor import LexborHTMLParser as HTMLParser

    tree = HTMLParser(markup)
    for node in tree.css("script, style, head"):
        node.decompose()
    return tree.body.text(separator="\n") if tree.body else ""


def normal_page() -> str:
    section = (
        "<h2>Section {i}</h2><p>Employees receive {i} days of leave. <b>Requests</b> go to "
        "the <a href='/hr'>HR desk</a> two weeks ahead.</p><ul><li>Item one</li><li>Item two"
        "</li></ul><table><tr><td>Grade</td><td>{i}</td></tr></table>"
    )
    body = "".join(section.format(i=i) for i in range(150))
    return (f"<html><head><title>Handbook</title><style>p{{color:red}}</style></head><body>"
            f"<h1>Handbook</h1>{body}<script>track()</script></body></html>")  # fmt: skip


def timed(fn: Callable[[str], object], markup: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(markup)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra-path", default=None, help="folder holding lxml / selectolax")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-bs4", type=int, default=8000, help="largest N for bs4 (slow)")
    args = parser.parse_args()
    if args.extra_path:
        sys.path.insert(0, args.extra_path)
    parsers: dict[str, Callable[[str], object]] = {"stream": html_to_text}
    try:
        import bs4  # noqa: F401  (not a dependency: pip install beautifulsoup4)

        parsers["bs4-html.parser"] = bs4_tree
    except ImportError:
        print("bs4 not importable: skipped")
    try:
        import lxml.html  # noqa: F401

        if "bs4-html.parser" in parsers:
            parsers["bs4-lxml"] = lambda m: bs4_tree(m, "lxml")
        parsers["lxml"] = lxml_text
    except ImportError:
        print("lxml not importable: skipped")
    try:
        import selectolax  # noqa: F401

        parsers["selectolax"] = selectolax_text
    except ImportError:
        print("selectolax not importable: skipped")
    print("seconds, median of", args.repeat)
    print(f"{'page':>22} " + " ".join(f"{name:>16}" for name in parsers))
    pages = [(f"{n} unclosed <div>", n,
              "<html><body>" + "".join(f"<div>text{i} " for i in range(n))) for n in
             (1000, 2000, 4000, 8000, 20000)]  # fmt: skip
    for n in (2000, 20000):  # start tags that never end: the stdlib parser rescans each one
        pages.append((f"{n} unterminated <div", n, "<p>" + "<div class='x' text " * n))
    pages.append((f"normal page ({len(normal_page()) // 1024} KB)", 0, normal_page()))
    for label, n, markup in pages:
        cells = []
        for name, fn in parsers.items():
            if name.startswith("bs4") and n > args.max_bs4:
                cells.append(f"{'(skipped)':>16}")
                continue
            cells.append(f"{timed(fn, markup, args.repeat):16.4f}")
        print(f"{label:>22} " + " ".join(cells))
    print("text complete (the last <div>'s text is in the output) at 20000 unclosed <div>:")
    markup = "<html><body>" + "".join(f"<div>text{i} " for i in range(20000))
    for name, fn in parsers.items():
        if not name.startswith("bs4"):
            print(f"  {name}: {'text19999' in str(fn(markup))}")


if __name__ == "__main__":
    main()
