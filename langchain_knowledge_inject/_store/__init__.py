"""The store: one named knowledge base in Chroma, its catalog, keyword index and search.

Chroma holds every chunk with its vector; the SQLite catalog (``catalog``) and the keyword
index (``keyword``) are derived from it. ``knowledge_base`` is the entry point (a facade) and
the only module that knows ``KnowledgeBase`` (its methods grouped in ``knowledge_base_metadata``,
``knowledge_base_writes``, ``knowledge_base_search`` and ``knowledge_base_healing``, parts of
its class); below it, each helper gets named parts:
``handles`` (the SQLite side and its one registry+keyword transaction), ``chroma`` (the
client and partition collections), ``writes``, ``opening``, ``sync``, ``recovery`` and
``consistency``. ``fusion`` merges the dense and keyword rankings.
"""
