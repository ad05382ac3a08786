"""CHANGELOG.md's [Unreleased] section lists every deprecated module path and root name.

Each old path or name kept by ``_compat`` (for one release) must be written there with
its new home, so a user upgrading learns where everything went.
"""

from __future__ import annotations

import re
from pathlib import Path

import langchain_knowledge_inject  # noqa: F401  (fills MOVED_NAMES)
from langchain_knowledge_inject._compat import MOVED_MODULES, MOVED_NAMES

ROOT = Path(__file__).resolve().parents[2]


def _unreleased() -> str:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    start = text.index("## [Unreleased]")
    end = text.find("\n## [", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_every_moved_module_is_listed_with_its_new_path():
    section = _unreleased()
    missing = [
        f"`{old}` -> `{new}`"
        for old, new in MOVED_MODULES.items()
        if f"`{old}` -> `{new}`" not in section
    ]
    assert not missing, f"module moves missing from CHANGELOG [Unreleased]: {missing}"


def test_every_name_that_left_the_root_is_listed_under_its_new_home():
    section = _unreleased()
    missing = []
    for name, home in MOVED_NAMES.items():
        line = re.search(rf"^\s*- `{re.escape(home)}`: (.*)$", section, re.MULTILINE)
        if line is None or f"`{name}`" not in line.group(1):
            missing.append(f"{name} (now in {home})")
    assert not missing, f"root names missing from CHANGELOG [Unreleased]: {missing}"
