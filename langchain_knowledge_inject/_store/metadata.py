"""What a knowledge base says about itself: its info, restriction flags, add results, topics."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_knowledge_inject._store.catalog import Catalog
from langchain_knowledge_inject._store.keyword import query_terms
from langchain_knowledge_inject._store.storage import default_store_path, open_store_dir
from langchain_knowledge_inject.errors import KnowledgeBaseNotFoundError, KnowledgeBaseOpenError

__all__ = [
    "AddResult",
    "KnowledgeBaseInfo",
    "RestrictionFlags",
    "derive_topics",
    "info_from_row",
    "list_knowledge_bases",
]


@dataclass(frozen=True)
class KnowledgeBaseInfo:
    """Metadata of a knowledge base, persisted in its store directory."""

    name: str
    """The name given by the user."""
    id: str
    """A short stable id, generated once."""
    description: str
    """What the knowledge base holds."""
    topics: list[str]
    """Topics set by the user, or derived from the content when none were set."""
    chunk_count: int
    """Number of chunks across all partitions."""
    embedding_model: str
    """Name of the embedding model its vectors were made with."""
    topics_derived: bool = False
    """True when ``topics`` were derived from the content."""
    restricted: bool = False
    """Whether restricted mode is on by default for this knowledge base."""
    sensitive_sources: bool = False
    """Whether source names must be hidden from the main model in restricted mode."""
    routing_hint: str = ""
    """Restricted mode: one line telling the main model what to ask this knowledge base."""
    routing_keywords: list[str] = field(default_factory=list)
    """Restricted mode: keywords that route questions to this knowledge base."""


@dataclass(frozen=True)
class RestrictionFlags:
    """The stored restriction flags of a knowledge base (see :attr:`KnowledgeBase.restriction`)."""

    restricted: bool
    """Whether restricted mode is on by default for this knowledge base."""
    sensitive_sources: bool
    """Whether source names must be hidden from the main model in restricted mode."""


@dataclass(frozen=True)
class AddResult:
    """What ``add_documents`` did."""

    added: int
    """Chunks embedded and stored."""
    unchanged: int
    """Chunks already stored with the same content and metadata (not re-embedded)."""
    updated: int
    """Chunks whose content was stored already but whose metadata changed."""
    replaced: int
    """Stale chunks removed because their source was added again with other content."""
    skipped: int
    """Empty chunks that were not stored."""
    ids: list[str]
    """The chunk id of every stored chunk of this call, in input order."""


def info_from_row(
    row: Mapping[str, Any], *, chunk_count: int, derived_topics: Sequence[str] | None = None
) -> KnowledgeBaseInfo:
    """A catalog row as :class:`KnowledgeBaseInfo` (``derived_topics`` stand in for none set)."""
    settings = row["settings"]
    return KnowledgeBaseInfo(
        name=row["name"],
        id=row["id"],
        description=row["description"],
        topics=list(derived_topics if derived_topics is not None else row["topics"]),
        chunk_count=chunk_count,
        embedding_model=row["embedding_model"],
        topics_derived=derived_topics is not None,
        restricted=bool(settings.get("restricted", False)),
        sensitive_sources=bool(settings.get("sensitive_sources", False)),
        routing_hint=settings.get("routing_hint") or "",
        routing_keywords=list(settings.get("routing_keywords") or []),
    )


def list_knowledge_bases(path: str | os.PathLike[str] | None = None) -> list[KnowledgeBaseInfo]:
    """Every knowledge base in a store directory, without loading any model.

    Args:
        path: Store directory. Defaults to :func:`default_store_path`.
    """
    store = Path(path).expanduser() if path is not None else default_store_path()
    if not (store / "catalog.sqlite3").exists():
        return []
    conn = open_store_dir(store)
    try:
        catalog = Catalog(conn, threading.RLock())
        return [
            info_from_row(row, chunk_count=catalog.count(row["id"])) for row in catalog.list_kbs()
        ]
    finally:
        conn.close()


def require_knowledge_base(name: str, path: str | os.PathLike[str] | None = None) -> None:
    """Raise if the store holds no knowledge base ``name``, creating nothing (not even the folder).

    A damaged or lost catalog is not "missing": opening the knowledge base rebuilds the
    catalog from Chroma, or says the knowledge base is not there.

    Raises:
        KnowledgeBaseNotFoundError: No knowledge base of that name; the message lists the
            ones that exist.
    """
    store = Path(path).expanduser() if path is not None else default_store_path()
    try:
        names = [info.name for info in list_knowledge_bases(path)]
    except KnowledgeBaseOpenError:
        return  # a damaged catalog: opening the knowledge base rebuilds it from Chroma
    if name in names or (store / "chroma").is_dir():
        return  # present, or a lost catalog: opening it finds it in Chroma, or says no
    existing = ", ".join(names) or "none"
    msg = f"No knowledge base named {name!r} in {store} (existing: {existing})"
    raise KnowledgeBaseNotFoundError(msg, kb_name=name)


_FUNCTION_WORDS = frozenset(
    """about above after again against also although among another because been before being
    below between both cannot could does doing down during each either else every from further
    have having here hers herself himself however into itself just least less many more most
    much must myself neither never none only other otherwise ours ourselves over same shall
    should since some such than that their theirs them themselves then there these they this
    those though through thus under unless until upon very were what whatever when whenever
    where whereas whether which while whom whose will with within without would your yours
    yourself""".split()  # noqa: SIM905
)


def derive_topics(texts: Sequence[str], *, n: int = 8) -> list[str]:
    """Derive up to ``n`` topic words: content words in many chunks, but not in nearly all."""
    if not texts:
        return []
    df: dict[str, int] = {}
    for text in texts:
        terms = query_terms(text[:4000])
        for term in {t for t in terms if len(t) > 3 and t.isalpha() and t not in _FUNCTION_WORDS}:
            df[term] = df.get(term, 0) + 1
    limit = max(2, int(0.6 * len(texts)))
    candidates = [(c, t) for t, c in df.items() if c <= limit or len(texts) < 3]
    candidates.sort(key=lambda ct: (-ct[0], ct[1]))
    return [t for _, t in candidates[:n]]
