"""Old import paths, kept working for one release with a ``DeprecationWarning``.

This release moved the flat modules into subpackages (``store``, ``ingest``, ``turn``,
``restricted``, ``memory``, ``integrations``) and cut the root namespace down to what a
user needs. ``import langchain_knowledge_inject.knowledge_base`` and
``from langchain_knowledge_inject import make_retrieve_node`` still work and warn with the
new location. They are removed in the next release.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED_MODULES", "MOVED_NAMES", "install_module_aliases", "moved_name"]

_PACKAGE = "langchain_knowledge_inject"

MOVED_MODULES: dict[str, str] = {
    "_context": "turn.assemble",
    "_episode_journal": "memory.episode_journal",
    "_episode_query": "memory.episode_query",
    "_episode_store": "memory.episode_store",
    "_leak_decode": "restricted.guard_decode",
    "_leak_numbers": "restricted.guard_numbers",
    "_leak_tokens": "restricted.guard_tokens",
    "_neutralize": "turn.neutralize",
    "_open": "store.opening",
    "_recovery": "store.recovery",
    "_store_calls": "store.calls",
    "_summarizer": "restricted.summarizer",
    "_temporal": "memory.temporal",
    "_textfold": "turn.textfold",
    "blocks": "turn.blocks",
    "catalog": "store.catalog",
    "chat": "integrations.chat",
    "cli": "integrations.cli",
    "consistency": "store.consistency",
    "embeddings": "store.embeddings",
    "episodic": "memory.episodic",
    "facts": "memory.facts",
    "filters": "store.filters",
    "formatting": "turn.formatting",
    "fusion": "store.fusion",
    "graph": "integrations.graph",
    "history": "turn.history",
    "html_text": "ingest.html_text",
    "ingestion": "ingest.loading",
    "injector": "integrations.runnable",
    "kb_vectorstore": "store.vectorstore",
    "keyword": "store.keyword",
    "knowledge_base": "store.knowledge_base",
    "leak_guard": "restricted.guard",
    "manifest": "turn.manifest",
    "memory_tools": "memory.tools",
    "middleware": "integrations.middleware",
    "node": "integrations.node",
    "placement": "turn.placement",
    "procedures": "memory.procedures",
    "restricted_scope": "restricted.scope",
    "restriction": "restricted.summary",
    "retrieval_query": "turn.query",
    "retriever": "store.retriever",
    "sample_data": "ingest.sample_data",
    "sources": "turn.sources",
    "storage": "store.storage",
    "sync": "store.sync",
    "text_decoding": "ingest.text_decoding",
    "tokens": "turn.tokens",
    "tools": "integrations.tools",
    "write_plan": "store.write_plan",
}
"""Old flat module name -> new dotted path below the package."""

MOVED_NAMES: dict[str, str] = {}
"""Names the root no longer exports -> the module that now holds them (filled by the root)."""


def _warn(old: str, new: str) -> None:
    msg = (
        f"{old} moved to {new}; the old path is deprecated and will be removed in the next release"
    )
    warnings.warn(msg, DeprecationWarning, stacklevel=4)


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``langchain_knowledge_inject.<old module>`` to the module's new home."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        prefix, _, old = fullname.rpartition(".")
        if prefix != _PACKAGE or old not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        old = spec.name.rpartition(".")[2]
        new = f"{_PACKAGE}.{MOVED_MODULES[old]}"
        _warn(spec.name, new)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module is already imported."""


def install_module_aliases() -> None:
    """Put the finder for the old module paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())


def moved_name(name: str) -> object:
    """The object behind a name the root used to export, with a ``DeprecationWarning``.

    Raises:
        AttributeError: ``name`` was never exported by the root.
    """
    if name in MOVED_MODULES:
        new = f"{_PACKAGE}.{MOVED_MODULES[name]}"
        _warn(f"{_PACKAGE}.{name}", new)
        return importlib.import_module(new)
    home = MOVED_NAMES.get(name)
    if home is None:
        msg = f"module {_PACKAGE!r} has no attribute {name!r}"
        raise AttributeError(msg)
    _warn(f"{_PACKAGE}.{name}", f"{_PACKAGE}.{home}.{name}")
    return getattr(importlib.import_module(f"{_PACKAGE}.{home}"), name)
