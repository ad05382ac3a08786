"""Placeholder of store-core's flags module (lead's branch only; replaced at merge)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RestrictionFlags:
    """The stored restriction flags of a knowledge base."""

    restricted: bool = False
    sensitive_sources: bool = False
    routing_hint: str = ""
    routing_keywords: tuple[str, ...] = ()


def read_flags(metadata: Mapping[str, Any] | None) -> RestrictionFlags:
    """The flags in a Chroma collection's metadata."""
    meta = dict(metadata or {})
    return RestrictionFlags(
        restricted=bool(meta.get("kinject:restricted", False)),
        sensitive_sources=bool(meta.get("kinject:sensitive_sources", False)),
    )


_RAW: contextvars.ContextVar[bool] = contextvars.ContextVar("kinject_raw_access", default=False)


@contextlib.contextmanager
def raw_access() -> Iterator[None]:
    """Raw text of restricted knowledge bases may be read inside this block."""
    token = _RAW.set(True)
    try:
        yield
    finally:
        _RAW.reset(token)
