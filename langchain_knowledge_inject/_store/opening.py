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

import hashlib
import logging
import re
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._store.recovery import chroma_partitions, rebuild_from_chroma
from langchain_knowledge_inject._store.storage import (
    RECORD_KEYS,
    classify_store_error,
    read_kb_record,
    write_kb_record,
)
from langchain_knowledge_inject.errors import KnowledgeBaseNotFoundError, KnowledgeBaseOpenError

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.chroma import ChromaSide
    from langchain_knowledge_inject._store.handles import StoreHandles

__all__ = [
    "NAME_PATTERN",
    "RECORD_RETRY_SECONDS",
    "StoredFlags",
    "is_valid_name",
    "knowledge_base_id",
    "open_knowledge_base",
]

logger = logging.getLogger(__name__)

RECORD_RETRY_SECONDS = 30.0
"""While Chroma could not be asked for the record, ask again at most this often."""


NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
"""A knowledge base's name: 1-63 letters, digits, '.', '_' or '-'; a letter or digit first."""


def is_valid_name(name: object) -> bool:
    """Whether ``name`` is allowed as a knowledge base's name (see :data:`NAME_PATTERN`)."""
    return isinstance(name, str) and NAME_PATTERN.match(name) is not None


def knowledge_base_id(name: str) -> str:
    """The id of the knowledge base ``name``: derived from the name, the same everywhere.

    So every machine that opens ``name`` on one Chroma server, each with its own
    catalog, uses the same collections.
    """
    return hashlib.sha256(f"kinject-kb\x1f{name}".encode()).hexdigest()[:12]


@dataclass
class StoredFlags:
    """What opening learned of the restriction flags, held in memory ("on" wins).

    ``pinned`` flags are on whatever the catalog says later: on in the Chroma
    record, or unknown because Chroma could not be asked.
    """

    pinned: dict[str, bool] = field(default_factory=dict)
    """Flags held on in memory, by key of ``RECORD_KEYS``."""
    known: bool = True
    """Whether the Chroma record could be read."""
    checked_at: float = 0.0
    """When Chroma was last asked (``time.monotonic()``)."""
    version: int = 0
    """Counts changes to ``pinned`` (caches of the flags compare it)."""

    def pin(self, pinned: Mapping[str, bool]) -> None:
        """Replace the pinned flags."""
        self.pinned = dict(pinned)
        self.version += 1

    def refresh(self, handles: StoreHandles, chroma: ChromaSide) -> None:
        """Ask Chroma again for a record that could not be read when opening."""
        if self.known or time.monotonic() - self.checked_at < RECORD_RETRY_SECONDS:
            return
        record, known = read_record(handles, chroma, self)
        if not known:
            return
        row = handles.catalog.get_kb(handles.name) or {}
        settings = dict(row.get("settings") or {})
        self.pin(
            {key: bool(settings.get(key)) or bool(record and record[key]) for key in RECORD_KEYS}
        )
        self.known = True


def read_row(handles: StoreHandles) -> dict[str, Any] | None:
    """The catalog row of the knowledge base; a catalog found damaged now is set aside anew."""
    try:
        return handles.catalog.get_kb(handles.name)
    except sqlite3.DatabaseError as exc:
        if classify_store_error(exc) != "damaged" or handles.read_only:
            raise
        kept = handles.set_aside()
        logger.warning(
            "The catalog of %s was damaged (%s); it is kept as %s and rebuilt from Chroma",
            handles.path,
            exc,
            kept.name,
        )
        return handles.catalog.get_kb(handles.name)


def read_record(
    handles: StoreHandles, chroma: ChromaSide, flags: StoredFlags
) -> tuple[dict[str, Any] | None, bool]:
    """The record of the knowledge base in Chroma, and whether Chroma could be asked at all."""
    flags.checked_at = time.monotonic()
    try:
        record = chroma.calls.call("read_record", read_kb_record, chroma.client, handles.kb_id)
    except Exception as exc:
        logger.warning(
            "Knowledge base %r: its settings record in Chroma could not be read (%s); it is "
            "treated as restricted with sensitive sources until it can be",
            handles.name,
            exc,
        )
        return None, False
    return record, True


def open_knowledge_base(
    handles: StoreHandles,
    chroma: ChromaSide,
    *,
    model_name: str,
    create: bool,
    description: str | None,
    topics: Sequence[str] | None,
    given: Mapping[str, Any],
) -> StoredFlags:
    """Find or create the catalog row of a knowledge base, reconciled with its record in Chroma.

    Sets ``handles.kb_id``; returns the flags held in memory.
    """
    row = read_row(handles)
    handles.kb_id = row["id"] if row is not None else knowledge_base_id(handles.name)
    flags = StoredFlags()
    record, known = read_record(handles, chroma, flags)
    flags.known = known
    if row is None:
        _open_without_row(
            handles, chroma, flags, record, create, description, topics, given, model_name
        )
        return flags
    name = handles.name
    if row["embedding_model"] != model_name:
        msg = (
            f"Knowledge base {name!r} was built with the embedding model "
            f"{row['embedding_model']!r}; it cannot be searched with {model_name!r}. "
            "Open it with the same model, or ingest into a new knowledge base."
        )
        raise KnowledgeBaseOpenError(msg, kb_name=name)
    settings = dict(row["settings"])
    for key in RECORD_KEYS:
        stored = bool(settings.get(key)) or bool(record and record[key])
        if stored and given.get(key) is False:
            logger.warning("Knowledge base %r: %s turned off by the caller", name, key)
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
    flags.pin({key: bool(settings.get(key)) or not known for key in RECORD_KEYS})
    if handles.read_only:
        return flags
    merged = {**row, **changes, "settings": settings}
    try:
        handles.catalog.update_kb(handles.kb_id, **changes)
        if known and (
            record is None or any(record[k] != bool(settings.get(k)) for k in RECORD_KEYS)
        ):
            _write_record(handles, chroma, merged)
    except Exception as exc:
        if classify_store_error(exc) not in ("disk_full", "read_only"):
            raise
        handles.conn.rollback()
        logger.warning(  # the flags hold in memory (on wins); written on a later open
            "Knowledge base %r: its settings could not be written (%s)", name, exc
        )
    return flags


def _write_record(handles: StoreHandles, chroma: ChromaSide, row: Mapping[str, Any]) -> None:
    chroma.calls.call(
        "write_record", write_kb_record, chroma.client, handles.kb_id, handles.name, row
    )


def _open_without_row(
    handles: StoreHandles,
    chroma: ChromaSide,
    flags: StoredFlags,
    record: dict[str, Any] | None,
    create: bool,
    description: str | None,
    topics: Sequence[str] | None,
    given: Mapping[str, Any],
    model_name: str,
) -> None:
    name = handles.name
    if not flags.known:
        msg = (
            f"Knowledge base {name!r} is not in the catalog {handles.path / 'catalog.sqlite3'} "
            "and Chroma could not be asked whether it holds it (and whether it is restricted). "
            "Open it again once the Chroma server answers."
        )
        raise KnowledgeBaseOpenError(msg, kb_name=name)
    partitions = chroma.calls.call(
        "list_collections", chroma_partitions, chroma.client, handles.kb_id
    )
    if record is None and not partitions:
        if not create:
            names = ", ".join(r["name"] for r in handles.catalog.list_kbs()) or "none"
            msg = f"No knowledge base named {name!r} in {handles.path} (existing: {names})"
            raise KnowledgeBaseNotFoundError(msg, kb_name=name)
        _refuse_read_only(handles, "create it")
        row = _create_row(handles, description or "", list(topics or []), model_name, dict(given))
        _write_record(handles, chroma, row)
        flags.pin({key: bool(given.get(key)) for key in RECORD_KEYS})
        return
    if record is not None and record["embedding_model"] not in ("", model_name):
        msg = (
            f"Knowledge base {name!r} (found in Chroma) was built with the embedding model "
            f"{record['embedding_model']!r}; it cannot be searched with {model_name!r}. "
            "Open it with the same model."
        )
        raise KnowledgeBaseOpenError(msg, kb_name=name)
    _refuse_read_only(handles, "rebuild its catalog from Chroma")
    if record is None:
        settings: dict[str, Any] = {key: True for key in RECORD_KEYS}
        logger.warning(
            "Knowledge base %r was found in Chroma without a settings record, so whether it "
            "is restricted cannot be established: it opens restricted with sensitive sources "
            "(pass restricted=False and sensitive_sources=False to open it unrestricted)",
            name,
        )
    else:
        settings = {k: record[k] for k in (*RECORD_KEYS, "routing_hint", "routing_keywords")}
    settings.update(given)
    row = _create_row(
        handles,
        description if description is not None else (record or {}).get("description", ""),
        list(topics) if topics is not None else list((record or {}).get("topics", [])),
        model_name,
        settings,
    )
    rebuild_from_chroma(handles, chroma.client, chroma.calls, bounded=chroma.bounded)
    _write_record(handles, chroma, row)
    flags.pin({key: bool(settings.get(key)) for key in RECORD_KEYS})


def _create_row(
    handles: StoreHandles,
    description: str,
    topics: list[str],
    model_name: str,
    settings: dict[str, Any],
) -> dict[str, Any]:
    handles.catalog.create_kb(
        handles.kb_id,
        handles.name,
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


def _refuse_read_only(handles: StoreHandles, action: str) -> None:
    if handles.read_only:
        msg = (
            f"Knowledge base {handles.name!r} is not in the catalog of the read-only store "
            f"{handles.path}, and a read-only store cannot {action}. Open it from a writable copy."
        )
        raise KnowledgeBaseOpenError(msg, kb_name=handles.name)
