"""CONTRIBUTING.md's module map names every file of the package, and only those.

The map is the tables under "## Module map": one row per file, its path relative to
``langchain_knowledge_inject/`` in the first cell (```store/keyword.py```).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "langchain_knowledge_inject"
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|", re.MULTILINE)


def _map_section() -> str:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    start = text.index("## Module map")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _mapped() -> list[str]:
    return _ROW.findall(_map_section())


def _package_files() -> set[str]:
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def test_the_map_names_every_package_file_and_nothing_else():
    mapped = set(_mapped())
    files = _package_files()
    missing = sorted(files - mapped)
    unknown = sorted(mapped - files)
    assert not missing and not unknown, (
        "CONTRIBUTING.md's module map is out of step with the package.\n"
        f"Files with no row in the map (add one line each): {missing}\n"
        f"Rows naming files that do not exist (remove or rename): {unknown}"
    )


def test_each_file_has_one_row_with_a_description():
    rows = _mapped()
    repeated = sorted({r for r in rows if rows.count(r) > 1})
    assert not repeated, f"files with more than one row in the map: {repeated}"
    empty = re.findall(r"^\|\s*`([^`]+)`\s*\|\s*\|", _map_section(), re.MULTILINE)
    assert not empty, f"rows without a description: {empty}"


def test_each_file_sits_under_its_subpackage_heading():
    section = _map_section()
    misplaced = []
    for block in re.split(r"^### ", section, flags=re.MULTILINE)[1:]:
        heading = block.splitlines()[0]
        folder = re.match(r"`([a-z_]+)/`", heading)
        for path in _ROW.findall(block):
            if folder and folder.group(1) != "langchain_knowledge_inject":
                expected = folder.group(1)
                if path.split("/")[0] != expected:
                    misplaced.append(f"{path} under {heading!r}")
            elif "/" in path:
                misplaced.append(f"{path} under {heading!r}")
    assert not misplaced, f"rows under the wrong heading: {misplaced}"
