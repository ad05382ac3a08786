"""The store: one named knowledge base in Chroma, its catalog, keyword index and search.

Chroma holds every chunk with its vector; the SQLite catalog (``catalog``) and the keyword
index (``keyword``) are derived from it. ``knowledge_base`` is the entry point (a facade) and
the only module that knows ``KnowledgeBase``; below it, each helper gets named parts:
``handles`` (the SQLite side and its one registry+keyword transaction), ``chroma`` (the
client and partition collections), ``writes``, ``opening``, ``sync``, ``recovery`` and
``consistency``. ``fusion`` merges the dense and keyword rankings.
"""
