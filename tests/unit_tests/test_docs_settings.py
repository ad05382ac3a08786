"""docs/configuration.md documents every setting and every per-request key the code has."""

from __future__ import annotations

import re
from pathlib import Path

from langchain_knowledge_inject.settings import CONSTRUCTION_ONLY, REQUEST_KEYS, KnowledgeSettings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_settings_table_has_one_row_per_field():
    rows = re.findall(r"^\|\s*`(\w+)`\s*\|", _section("Settings"), re.MULTILINE)
    fields = set(KnowledgeSettings.model_fields)
    assert not fields - set(rows), f"settings missing from the table: {sorted(fields - set(rows))}"
    assert not set(rows) - fields, f"rows naming no setting: {sorted(set(rows) - fields)}"


def test_every_per_request_key_and_construction_only_setting_is_named():
    section = _section("Per-request overrides")
    named = set(re.findall(r"`(\w+)`", section))
    missing = sorted((set(REQUEST_KEYS) | set(CONSTRUCTION_ONLY)) - named)
    assert not missing, f"per-request keys missing from docs/configuration.md: {missing}"
