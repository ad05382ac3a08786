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


def user_key(user_id: object) -> str:
    """The user id as a non-empty string."""
    text = "" if user_id is None else str(user_id).strip()
    require([("user_id", user_id, bool(text), "a non-empty string")])
    return text
