"""Damage and drift of :class:`~.knowledge_base.KnowledgeBase`: a damaged catalog healed, check.

A catalog SQLite reports as damaged is set aside and rebuilt from Chroma (at
most once a minute); ``check`` reports, and repairs, drift between registry,
keyword index and Chroma (:mod:`~.consistency`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._store.consistency import ConsistencyReport, check_knowledge_base
from langchain_knowledge_inject._store.storage import classify_store_error
from langchain_knowledge_inject.errors import KnowledgeInjectError

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from langchain_core.embeddings import Embeddings

    from langchain_knowledge_inject._store.chroma import ChromaSide
    from langchain_knowledge_inject._store.handles import StoreHandles
    from langchain_knowledge_inject._store.metadata import RestrictionFlags
    from langchain_knowledge_inject._store.opening import StoredFlags

# the logger of the class it is part of: log records keep the name they had
logger = logging.getLogger("langchain_knowledge_inject._store.knowledge_base")

_HEAL_INTERVAL = 60.0


class HealingMixin:
    """Damage and drift of ``KnowledgeBase`` (a part of its class, not used alone)."""

    if TYPE_CHECKING:  # what it uses of the facade
        path: Path
        embeddings: Embeddings
        _handles: StoreHandles
        _chroma: ChromaSide
        _flags_state: StoredFlags
        _restriction: tuple[tuple[Any, ...], RestrictionFlags] | None
        _healed_at: float
        _open: Callable[..., StoredFlags]

        @property
        def read_only(self) -> bool: ...
        def _check_process(self) -> None: ...

    def _heal_damaged_catalog(self, exc: BaseException) -> bool:
        """Rebuild the catalog from Chroma when ``exc`` says it is damaged; True when done.

        At most once a minute, so that a store that keeps failing is reported, not looped on.
        """
        cause = exc.__cause__ if isinstance(exc, KnowledgeInjectError) and exc.__cause__ else exc
        if self.read_only or classify_store_error(cause) != "damaged":
            return False
        now = time.monotonic()
        if now - getattr(self, "_healed_at", -_HEAL_INTERVAL) < _HEAL_INTERVAL:
            return False
        self._healed_at = now
        self._rebuild_catalog()
        return True

    def _rebuild_catalog(self) -> None:
        """Keep a damaged catalog aside and rebuild this knowledge base's rows from Chroma."""
        with self._handles.lock:
            kept = self._handles.set_aside()
            logger.warning(
                "The catalog of %s was damaged; it is kept as %s and rebuilt from Chroma",
                self.path,
                kept.name,
            )
            self._chroma.forget()
            self._flags_state = self._open(create=False, description=None, topics=None, given={})
            self._restriction = None

    def check(self, *, repair: bool = False) -> ConsistencyReport:
        """Report (and with ``repair=True`` fix) drift between registry, keyword index and Chroma.

        See :mod:`langchain_knowledge_inject._store.consistency`.
        """
        self._check_process()
        return check_knowledge_base(
            self._handles,
            self._chroma,
            self.embeddings,
            repair=repair,
            rebuild_catalog=self._rebuild_catalog,
        )
