"""What a knowledge base says about itself: its info, add results, topics, and the listing."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_knowledge_inject._store.calls import server_errors
from langchain_knowledge_inject._store.flags import PREFIX, read_settings
from langchain_knowledge_inject._store.keyword import query_terms
from langchain_knowledge_inject._store.storage import (
    default_store_path,
    persistent_client,
    store_is_writable,
)
from langchain_knowledge_inject.errors import KnowledgeBaseNotFoundError


@dataclass(frozen=True)
class KnowledgeBaseInfo:
    """Metadata of a knowledge base, kept in its Chroma collections."""

    name: str
    """The name given by the user."""
    id: str
    """A short stable id, derived from the name."""
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
    """Whether restricted mode is on for this knowledge base."""
    sensitive_sources: bool = False
    """Whether source names must be hidden from the main model in restricted mode."""
    routing_hint: str = ""
    """Restricted mode: one line telling the main model what to ask this knowledge base."""
    routing_keywords: list[str] = field(default_factory=list)
    """Restricted mode: keywords that route questions to this knowledge base."""


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


def info_of(
    settings: Mapping[str, Any], *, chunk_count: int, derived: Sequence[str] | None = None
) -> KnowledgeBaseInfo:
    """Settings read from Chroma as :class:`KnowledgeBaseInfo` (``derived`` topics stand in)."""
    return KnowledgeBaseInfo(
        name=settings["kb"],
        id=settings["kb_id"],
        description=settings["description"],
        topics=list(derived if derived is not None else settings["topics"]),
        chunk_count=chunk_count,
        embedding_model=settings["model"],
        topics_derived=derived is not None,
        restricted=settings["restricted"],
        sensitive_sources=settings["sensitive_sources"],
        routing_hint=settings["routing_hint"],
        routing_keywords=list(settings["routing_keywords"]),
    )


def list_knowledge_bases(
    path: str | os.PathLike[str] | None = None, *, client: Any = None
) -> list[KnowledgeBaseInfo]:
    """Every knowledge base in a store directory (or on a Chroma client), without loading a model.

    Args:
        path: Store directory. Defaults to :func:`default_store_path`.
        client: A ``chromadb`` client to list instead of the store's embedded one.
    """
    store = Path(path).expanduser() if path is not None else default_store_path()
    collections: Any = None
    if client is None:
        if not (store / "chroma").is_dir():
            return []
        from langchain_knowledge_inject._store import peek

        collections = peek.collections(store)  # read without chromadb where it can be
        if collections is None:
            client = persistent_client(store, "", read_only=not store_is_writable(store))
    settings: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    with server_errors(None, "list_collections"):
        if collections is None:
            from langchain_knowledge_inject._store.migration import migrate_store

            migrate_store(store, client)
            collections = client.list_collections()
        for collection in collections:
            found = read_settings(getattr(collection, "metadata", None))
            if not found["kb_id"] or not collection.name.startswith(f"kinject-{found['kb_id']}-"):
                continue
            counts[found["kb_id"]] = counts.get(found["kb_id"], 0) + collection.count()
            if (collection.metadata or {}).get(PREFIX + "partition") == "":
                settings[found["kb_id"]] = found
    infos = [info_of(s, chunk_count=counts.get(kb_id, 0)) for kb_id, s in settings.items()]
    return sorted(infos, key=lambda info: info.name)


def require_knowledge_base(name: str, path: str | os.PathLike[str] | None = None) -> None:
    """Raise if the store holds no knowledge base ``name``, creating nothing (not even the folder).

    Raises:
        KnowledgeBaseNotFoundError: No knowledge base of that name; the message lists the
            ones that exist.
    """
    store = Path(path).expanduser() if path is not None else default_store_path()
    names = [info.name for info in list_knowledge_bases(store)]
    if name not in names:
        raise not_found(name, store, names)


def not_found(name: str, store: Path, names: Sequence[str]) -> KnowledgeBaseNotFoundError:
    """The error for a knowledge base ``name`` that ``store`` lacks (it lists ``names``)."""
    existing = ", ".join(names) or "none"
    msg = f"No knowledge base named {name!r} in {store} (existing: {existing})"
    return KnowledgeBaseNotFoundError(msg, kb_name=name)


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
