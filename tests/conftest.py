"""Test-wide collection rules.

Every property-based test (Hypothesis ``@given``) is marked ``slow``: it runs many
examples. Slow tests stay in the default run and in ``.ci/run``; deselect them locally
with ``pytest -m "not slow"`` (see CONTRIBUTING.md).
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.slow)
