"""The arguments of a knowledge-base search: modes, limits, and their validation."""

from __future__ import annotations

from typing import Any, Literal

from langchain_knowledge_inject._store import fusion
from langchain_knowledge_inject.errors import ConfigurationError

SearchMode = Literal["dense", "keyword", "hybrid"]
MODES: tuple[SearchMode, ...] = ("dense", "keyword", "hybrid")
"""Every search mode."""
MAX_QUERY_CHARS = 2000
"""Queries are cut to this many characters: all-MiniLM-L6-v2 reads 256 word pieces."""


def check_search_args(k: Any, min_score: Any, mode: Any) -> tuple[int, float, SearchMode]:
    """Validate ``k``, ``min_score`` and ``mode``; ``min_score=None`` becomes the default.

    Raises:
        ConfigurationError: A value that is not allowed, naming what is.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        msg = f"k must be an integer >= 1, got {k!r}"
        raise ConfigurationError(msg, option="k", value=k)
    min_score = fusion.DEFAULT_MIN_SCORE if min_score is None else min_score
    if (
        isinstance(min_score, bool)
        or not isinstance(min_score, (int, float))
        or not 0 <= min_score <= 1
    ):
        msg = f"min_score must be a number in [0, 1], got {min_score!r}"
        raise ConfigurationError(msg, option="min_score", value=min_score)
    if mode not in MODES:
        msg = f"mode must be one of {', '.join(MODES)}; got {mode!r}"
        raise ConfigurationError(msg, option="mode", value=mode)
    return k, float(min_score), mode
