"""The vector store returned by ``KnowledgeBase.vectorstore()``: Chroma, for reading only.

A write made through a plain ``langchain_chroma.Chroma`` over a knowledge
base's collection would reach the vectors but not the registry or the keyword
index: the document would be found by dense search and missed by keyword
search. So every write method refuses with a clear error naming the knowledge
base's own methods; every read method (similarity search, MMR, scores,
``get``) is langchain-chroma's.
"""

from __future__ import annotations

from typing import Any, NoReturn

from langchain_chroma import Chroma

from langchain_knowledge_inject.errors import KnowledgeBaseError


class ReadOnlyChroma(Chroma):
    """``langchain_chroma.Chroma`` over a knowledge base's partition; writes are refused."""

    def _refuse(self, method: str) -> NoReturn:
        msg = (
            f"{method}() is not available on kb.vectorstore(): it is read-only, because a write "
            "through it would bypass the knowledge base's registry and keyword index. Write "
            "with kb.add_documents(...), kb.delete(...) or kb.delete_source(...)."
        )
        raise KnowledgeBaseError(msg)

    def add_texts(self, *args: Any, **kwargs: Any) -> list[str]:
        self._refuse("add_texts")

    def add_documents(self, *args: Any, **kwargs: Any) -> list[str]:
        self._refuse("add_documents")

    async def aadd_texts(self, *args: Any, **kwargs: Any) -> list[str]:
        self._refuse("aadd_texts")

    async def aadd_documents(self, *args: Any, **kwargs: Any) -> list[str]:
        self._refuse("aadd_documents")

    def add_images(self, *args: Any, **kwargs: Any) -> list[str]:
        self._refuse("add_images")

    def update_document(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("update_document")

    def update_documents(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("update_documents")

    def delete(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("delete")

    async def adelete(self, *args: Any, **kwargs: Any) -> None:
        self._refuse("adelete")

    def delete_collection(self) -> None:
        self._refuse("delete_collection")

    def reset_collection(self) -> None:
        self._refuse("reset_collection")
