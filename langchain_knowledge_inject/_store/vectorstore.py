"""The vector store returned by ``KnowledgeBase.vectorstore()``: Chroma, writing through the KB.

It is a ``langchain_chroma.Chroma`` over one partition's collection, so every
read (similarity search, MMR, raw scores, ``get``) is langchain-chroma's. Those
reads go through one guard on the collection's ``query``, ``get`` and ``peek``:
on a restricted knowledge base they raise ``RestrictedKnowledgeError`` outside
the package's surfaces (:func:`~.flags.raw_access`). Every write goes through
the knowledge base instead of straight to Chroma, so the keyword cache stays in
step: a document added here is found by keyword and hybrid search too.

Writes are by id (the VectorStore contract): adding a document with an id that
exists replaces it; ids not given are generated. Unlike
``KnowledgeBase.add_documents``, nothing is split and a source's other chunks
are not replaced. Dropping or resetting the whole collection is refused: use
``KnowledgeBase.drop()``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from langchain_chroma import Chroma
from langchain_core.documents import Document

from langchain_knowledge_inject._store.sealing import kept_sealed, unsealed
from langchain_knowledge_inject.errors import ConfigurationError, KnowledgeBaseError

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase


class KnowledgeBaseVectorStore(Chroma):
    """``langchain_chroma.Chroma`` over a knowledge base's partition; writes go through the KB.

    Args:
        knowledge_base: The knowledge base.
        tenant_id: Its tenant partition (None: the shared one).
        **kwargs: Passed to ``langchain_chroma.Chroma``.
    """

    def __init__(
        self, knowledge_base: KnowledgeBase, *, tenant_id: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._knowledge_base = knowledge_base
        self._tenant_id = tenant_id

    @property
    def _collection(self) -> Any:
        return _GuardedCollection(Chroma._collection.fget(self), self._knowledge_base)  # type: ignore[attr-defined]

    @property
    def knowledge_base(self) -> KnowledgeBase:
        """The knowledge base this store writes through."""
        return self._knowledge_base

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict] | None = None,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Embed and store texts through the knowledge base (an existing id is replaced).

        Args:
            texts: The texts.
            metadatas: One metadata dict per text.
            ids: One id per text; missing ones (None) are generated.
            **kwargs: Ignored.

        Returns:
            The id of every text, in order.
        """
        texts = list(texts)
        if metadatas is not None and len(metadatas) != len(texts):
            msg = f"Got {len(metadatas)} metadatas for {len(texts)} texts"
            raise ConfigurationError(msg, option="metadatas", value=len(metadatas))
        if ids is not None and len(ids) != len(texts):
            msg = f"Got {len(ids)} ids for {len(texts)} texts"
            raise ConfigurationError(msg, option="ids", value=len(ids))
        given = list(ids) if ids is not None else [None] * len(texts)
        chosen = [str(i) if i is not None else str(uuid.uuid4()) for i in given]
        records = [
            (cid, text, dict(metadatas[n] or {}) if metadatas is not None else {})
            for n, (cid, text) in enumerate(zip(chosen, texts, strict=True))
        ]
        self._knowledge_base.upsert_records(records, tenant_id=self._tenant_id)
        return chosen

    def update_document(self, document_id: str, document: Document) -> None:
        """Replace one stored document (through the knowledge base)."""
        self.update_documents([document_id], [document])

    def update_documents(self, ids: list[str], documents: list[Document]) -> None:
        """Replace stored documents by id (through the knowledge base)."""
        self.add_texts(
            [d.page_content for d in documents],
            [dict(d.metadata) for d in documents],
            ids=list(ids),
        )

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> None:
        """Delete documents by id (through the knowledge base); unknown ids are ignored."""
        if ids is None:
            msg = (
                "delete() needs ids on kb.vectorstore(); to remove the whole knowledge base "
                "use kb.drop()"
            )
            raise ConfigurationError(msg, option="ids", value=None)
        self._knowledge_base.delete(list(ids), tenant_id=self._tenant_id)

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """Stored documents by id (missing ids are left out)."""
        self._knowledge_base.check_raw_read(_VIA)
        with kept_sealed():  # sealed text stays sealed outside raw_access(), as Chroma's reads
            return self._knowledge_base.get_by_ids(ids, tenant_id=self._tenant_id)

    def add_images(self, *args: Any, **kwargs: Any) -> list[str]:
        """Refused: a knowledge base stores text."""
        self._refuse("add_images", "a knowledge base stores text chunks")

    def delete_collection(self) -> None:
        """Refused: use ``kb.drop()``."""
        self._refuse("delete_collection", "use kb.drop() to remove the knowledge base")

    def reset_collection(self) -> None:
        """Refused: use ``kb.drop()``."""
        self._refuse("reset_collection", "use kb.drop() to remove the knowledge base")

    def _refuse(self, method: str, why: str) -> NoReturn:
        msg = f"{method}() is not available on kb.vectorstore(): {why}"
        raise KnowledgeBaseError(msg, kb_name=self._knowledge_base.name)


_VIA = "kb.vectorstore()"


class _GuardedCollection:
    """A Chroma collection whose reads check restriction first and hide the package's own keys."""

    def __init__(self, collection: Any, knowledge_base: KnowledgeBase) -> None:
        self._inner = collection
        self._knowledge_base = knowledge_base

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in ("query", "get", "peek"):
            return attr

        def guarded(*args: Any, **kwargs: Any) -> Any:
            self._knowledge_base.check_raw_read(_VIA)
            result = attr(*args, **kwargs)
            texts = result.get("documents") if isinstance(result, dict) else None
            if texts:  # opened inside raw_access() (a list per query for query())
                result["documents"] = [
                    [unsealed(t) for t in row] if isinstance(row, list) else unsealed(row)
                    for row in texts
                ]
            metadatas = result.get("metadatas") if isinstance(result, dict) else None
            for row in metadatas or []:  # a list per query for query(), one list for get()
                for meta in row if isinstance(row, list) else [row]:
                    for key in [k for k in meta or {} if str(k).startswith("kinject_")]:
                        del meta[key]
            return result

        return guarded
