"""Test-wide settings and collection rules.

- Hypothesis runs without its per-example deadline (200 ms by default) and without the
  "too slow" health check: both are wall-clock assertions, which a loaded machine fails.
  A property test asserts properties; timing belongs in ``benchmarks/``.
- Every property-based test (Hypothesis ``@given``) is marked ``slow``: it runs many
  examples. Slow tests stay in the default run and in ``.ci/run``; deselect them locally
  with ``pytest -m "not slow"`` (see CONTRIBUTING.md).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "no-wall-clock", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("no-wall-clock")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.slow)
