"""Memory blocks: procedures, user facts and episodic memory, and their tools."""

from __future__ import annotations

from collections.abc import Iterable

from langchain_knowledge_inject.errors import ConfigurationError


def require(checks: Iterable[tuple[str, object, bool, str]]) -> None:
    """Raise ``ConfigurationError`` for the first ``(option, value, ok, allowed)`` not ok."""
    for option, value, ok, allowed in checks:
        if not ok:
            msg = f"{option} must be {allowed}, got {value!r}"
            raise ConfigurationError(msg, option=option, value=value)
