"""HTML to text in one linear pass, with headings as Markdown headings.

The standard library's ``HTMLParser`` streams events, no tree is built: scripts,
styles, ``<head>`` and the like are skipped, block elements become line breaks,
list items get a ``- `` bullet and ``<h1>``...``<h6>`` become ``#`` headings, so
HTML is split as Markdown is. An unclosed element costs nothing; a ``<`` that
cannot start a tag is escaped first (the parser would rescan to the end of the
input each time). BeautifulSoup grows quadratically on unclosed elements and
``lxml`` drops text past 256 nesting levels (``benchmarks/html_parse.py``).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SKIPPED = frozenset({"head", "script", "style", "noscript", "template", "svg", "iframe", "object"})
_BLOCKS = frozenset(
    """p div section article header footer nav aside main li tr table ul ol dl dt dd pre
    blockquote figure figcaption form hr address details summary fieldset legend h1 h2 h3
    h4 h5 h6 caption body html""".split()  # noqa: SIM905
)
_CELLS = frozenset({"td", "th"})
_HEADING = re.compile(r"^h([1-6])$")


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title: list[str] = []
        self._skip: list[str] = []
        self._in_title = False
        self._heading: tuple[int, list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":  # an unclosed <head> ends where the body starts
            self._skip = [t for t in self._skip if t != "head"]
        if tag == "title":
            self._in_title = True
            return
        if tag in _SKIPPED:
            self._skip.append(tag)
            return
        if self._skip:
            return
        heading = _HEADING.match(tag)
        if heading:
            self._end_heading()
            self._heading = (int(heading.group(1)), [])
        elif tag == "br":
            self._emit("\n")
        elif tag in _CELLS:
            self._emit(" ")
        elif tag in _BLOCKS:
            self._break()
            if tag == "li":
                self._emit("- ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "br" and not self._skip:
            self._emit("\n")
        elif tag in _BLOCKS and not self._skip:
            self._break()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
            return
        if tag in _SKIPPED:
            if tag in self._skip:  # close the innermost open one of that name
                index = len(self._skip) - 1 - self._skip[::-1].index(tag)
                del self._skip[index:]
            return
        if self._skip:
            return
        if _HEADING.match(tag):
            self._end_heading()
        elif tag in _BLOCKS:
            self._break()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._skip:
            self._emit(data)

    def _emit(self, text: str) -> None:
        if self._heading is not None:
            self._heading[1].append(text)
        else:
            self.out.append(text)

    def _break(self) -> None:
        """A line break, unless the text already ends one."""
        target = self._heading[1] if self._heading is not None else self.out
        if target and not target[-1].endswith("\n"):
            target.append("\n")

    def _end_heading(self) -> None:
        if self._heading is None:
            return
        level, parts = self._heading
        self._heading = None
        words = " ".join("".join(parts).split())
        if words:
            self.out.append(f"\n\n{'#' * level} {words}\n\n")

    def close(self) -> None:
        super().close()
        self._end_heading()


def _escape_unterminated(markup: str) -> str:
    """Escape every ``<`` that has no ``>`` before the next ``<`` (comments kept whole).

    Linear: the next ``>`` is looked up again only once the scan has passed it.
    """
    out: list[str] = []
    start, end, gt = 0, len(markup), -1
    lt = markup.find("<")
    while lt != -1:
        if markup.startswith("<!--", lt):
            close = markup.find("-->", lt + 4)
            if close == -1:
                break  # the rest is one comment
            lt = markup.find("<", close + 3)
            continue
        if gt != end and gt <= lt:
            found = markup.find(">", lt + 1)
            gt = end if found == -1 else found
        following = markup.find("<", lt + 1)
        if gt == end or (following != -1 and following < gt):
            out += [markup[start:lt], "&lt;"]
            start = lt + 1
        lt = following
    out.append(markup[start:])
    return "".join(out)


def html_to_text(markup: str) -> tuple[str | None, str]:
    r"""The title and the text of an HTML page, headings as Markdown headings.

    Args:
        markup: The page.

    Returns:
        ``(title or None, text)``; lines have their spaces collapsed, and runs
        of blank lines become one.

    Example:
        >>> html_to_text("<title>T</title><h2>Leave</h2><p>25 days.<script>x()</script></p>")
        ('T', '## Leave\n\n25 days.')
    """
    parser = _TextParser()
    parser.feed(_escape_unterminated(markup))
    parser.close()
    title = " ".join("".join(parser.title).split()) or None
    lines = (" ".join(line.split()) for line in "".join(parser.out).splitlines())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return title, text
