"""Opening a knowledge base: its catalog row and its record in Chroma, reconciled.

The settings that decide what the main model may see (``restricted`` and
``sensitive_sources``) are kept twice: in the catalog and in a record
collection in Chroma (``storage.write_kb_record``). Opening reads both, and
"on" wins wherever they disagree, so losing, emptying or replacing one file
cannot turn restriction off. Only an explicit ``restricted=False`` given when
opening turns it off (in both places, with a warning).

When the catalog has no row for the knowledge base but Chroma holds it (the
catalog was lost, emptied, damaged and set aside, or this is another machine
on the same Chroma server), the row, the registry and the keyword index are
rebuilt from Chroma. A knowledge base found in Chroma without a record (made
by a version before the record existed) cannot prove it was unrestricted, so
it opens restricted unless ``restricted=False`` is given.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject.errors import KnowledgeBaseNotFoundError, KnowledgeBaseOpenError
from langchain_knowledge_inject.store.embeddings import embedding_model_name
from langchain_knowledge_inject.store.recovery import chroma_partitions, rebuild_from_chroma
from langchain_knowledge_inject.store.storage import (
    RECORD_KEYS,
    classify_store_error,
    read_kb_record,
    set_aside_damaged,
    write_kb_record,
)

if TYPE_CHECKING:
    from langchain_knowledge_inject.store.knowledge_base import KnowledgeBase

logger = logging.getLogger(__name__)

RECORD_RETRY_SECONDS = 30.0
"""While Chroma could not be asked for the record, ask again at most this often."""


def read_row(kb: KnowledgeBase) -> dict[str, Any] | None:
    """The catalog row of ``kb``; a catalog found damaged now is set aside and started anew."""
    try:
        return kb._catalog.get_kb(kb.name)
    except sqlite3.DatabaseError as exc:
        if classify_store_error(exc) != "damaged" or kb.read_only:
            raise
        kb._conn.close()
        kept = set_aside_damaged(kb.path / "catalog.sqlite3")
        logger.warning(
            "The catalog of %s was damaged (%s); it is kept as %s and rebuilt from Chroma",
            kb.path,
            exc,
            kept.name,
        )
        kb._open_catalog()
        return kb._catalog.get_kb(kb.name)


def read_record(kb: KnowledgeBase) -> tuple[dict[str, Any] | None, bool]:
    """The record of ``kb`` in Chroma, and whether Chroma could be asked at all."""
    kb._record_checked_at = time.monotonic()
    try:
        return kb._calls.call("read_record", read_kb_record, kb._client, kb.id), True
    except Exception as exc:
        logger.warning(
            "Knowledge base %r: its settings record in Chroma could not be read (%s); it is "
            "treated as restricted with sensitive sources until it can be",
            kb.name,
            exc,
        )
        return None, False


def open_knowledge_base(
    kb: KnowledgeBase,
    *,
    create: bool,
    description: str | None,
    topics: Sequence[str] | None,
    given: Mapping[str, Any],
) -> None:
    """Find or create the catalog row of ``kb``, reconciled with its record in Chroma."""
    from langchain_knowledge_inject.store.knowledge_base import knowledge_base_id

    model_name = embedding_model_name(kb.embeddings)
    row = read_row(kb)
    kb.id = row["id"] if row is not None else knowledge_base_id(kb.name)
    record, known = read_record(kb)
    kb._record_known = known
    if row is None:
        _open_without_row(kb, record, known, create, description, topics, given, model_name)
        return
    if row["embedding_model"] != model_name:
        msg = (
            f"Knowledge base {kb.name!r} was built with the embedding model "
            f"{row['embedding_model']!r}; it cannot be searched with {model_name!r}. "
            "Open it with the same model, or ingest into a new knowledge base."
        )
        raise KnowledgeBaseOpenError(msg, kb_name=kb.name)
    settings = dict(row["settings"])
    for key in RECORD_KEYS:
        stored = bool(settings.get(key)) or bool(record and record[key])
        if stored and given.get(key) is False:
            logger.warning("Knowledge base %r: %s turned off by the caller", kb.name, key)
        if stored or key in settings:
            settings[key] = stored
    settings.update(given)
    changes: dict[str, Any] = {}
    if description is not None and description != row["description"]:
        changes["description"] = description
    if topics is not None and list(topics) != row["topics"]:
        changes["topics"] = list(topics)
    if settings != row["settings"]:
        changes["settings"] = settings
    kb._pinned = {key: bool(settings.get(key)) or not known for key in RECORD_KEYS}
    if kb.read_only:
        return
    merged = {**row, **changes, "settings": settings}
    try:
        kb._catalog.update_kb(kb.id, **changes)
        if known and (
            record is None or any(record[k] != bool(settings.get(k)) for k in RECORD_KEYS)
        ):
            kb._calls.call("write_record", write_kb_record, kb._client, kb.id, kb.name, merged)
    except Exception as exc:
        if classify_store_error(exc) not in ("disk_full", "read_only"):
            raise
        kb._conn.rollback()
        logger.warning(  # the flags hold in memory (on wins); written on a later open
            "Knowledge base %r: its settings could not be written (%s)", kb.name, exc
        )


def _open_without_row(
    kb: KnowledgeBase,
    record: dict[str, Any] | None,
    known: bool,
    create: bool,
    description: str | None,
    topics: Sequence[str] | None,
    given: Mapping[str, Any],
    model_name: str,
) -> None:
    if not known:
        msg = (
            f"Knowledge base {kb.name!r} is not in the catalog {kb.path / 'catalog.sqlite3'} "
            "and Chroma could not be asked whether it holds it (and whether it is restricted). "
            "Open it again once the Chroma server answers."
        )
        raise KnowledgeBaseOpenError(msg, kb_name=kb.name)
    partitions = kb._calls.call("list_collections", chroma_partitions, kb._client, kb.id)
    if record is None and not partitions:
        if not create:
            names = ", ".join(r["name"] for r in kb._catalog.list_kbs()) or "none"
            msg = f"No knowledge base named {kb.name!r} in {kb.path} (existing: {names})"
            raise KnowledgeBaseNotFoundError(msg, kb_name=kb.name)
        _refuse_read_only(kb, "create it")
        row = _create_row(kb, description or "", list(topics or []), model_name, dict(given))
        kb._calls.call("write_record", write_kb_record, kb._client, kb.id, kb.name, row)
        kb._pinned = {key: bool(given.get(key)) for key in RECORD_KEYS}
        return
    if record is not None and record["embedding_model"] not in ("", model_name):
        msg = (
            f"Knowledge base {kb.name!r} (found in Chroma) was built with the embedding model "
            f"{record['embedding_model']!r}; it cannot be searched with {model_name!r}. "
            "Open it with the same model."
        )
        raise KnowledgeBaseOpenError(msg, kb_name=kb.name)
    _refuse_read_only(kb, "rebuild its catalog from Chroma")
    if record is None:
        settings: dict[str, Any] = {key: True for key in RECORD_KEYS}
        logger.warning(
            "Knowledge base %r was found in Chroma without a settings record, so whether it "
            "is restricted cannot be established: it opens restricted with sensitive sources "
            "(pass restricted=False and sensitive_sources=False to open it unrestricted)",
            kb.name,
        )
    else:
        settings = {k: record[k] for k in (*RECORD_KEYS, "routing_hint", "routing_keywords")}
    settings.update(given)
    row = _create_row(
        kb,
        description if description is not None else (record or {}).get("description", ""),
        list(topics) if topics is not None else list((record or {}).get("topics", [])),
        model_name,
        settings,
    )
    rebuild_from_chroma(kb)
    kb._calls.call("write_record", write_kb_record, kb._client, kb.id, kb.name, row)
    kb._pinned = {key: bool(settings.get(key)) for key in RECORD_KEYS}


def _create_row(
    kb: KnowledgeBase,
    description: str,
    topics: list[str],
    model_name: str,
    settings: dict[str, Any],
) -> dict[str, Any]:
    kb._catalog.create_kb(
        kb.id,
        kb.name,
        description=description,
        topics=topics,
        embedding_model=model_name,
        settings=settings,
    )
    return {
        "description": description,
        "topics": topics,
        "embedding_model": model_name,
        "settings": settings,
    }


def _refuse_read_only(kb: KnowledgeBase, action: str) -> None:
    if kb.read_only:
        msg = (
            f"Knowledge base {kb.name!r} is not in the catalog of the read-only store "
            f"{kb.path}, and a read-only store cannot {action}. Open it from a writable copy."
        )
        raise KnowledgeBaseOpenError(msg, kb_name=kb.name)


def refresh_record(kb: KnowledgeBase) -> None:
    """Ask Chroma again for a record that could not be read when ``kb`` was opened."""
    if kb._record_known or time.monotonic() - kb._record_checked_at < RECORD_RETRY_SECONDS:
        return
    record, known = read_record(kb)
    if not known:
        return
    row = kb._catalog.get_kb(kb.name) or {}
    settings = dict(row.get("settings") or {})
    kb._pinned = {
        key: bool(settings.get(key)) or bool(record and record[key]) for key in RECORD_KEYS
    }
    kb._record_known = True
