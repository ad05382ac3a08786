"""The store: one named knowledge base in Chroma, its catalog, keyword index and search.

Chroma holds every chunk with its vector; the SQLite catalog (``catalog``) and the keyword
index (``keyword``) are derived from it. ``knowledge_base`` is the entry point; ``fusion``
merges the dense and keyword rankings; ``consistency``, ``recovery`` and ``sync`` keep the
derived parts in step with Chroma.
"""
