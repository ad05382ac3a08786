"""The store: one named knowledge base, kept in Chroma, searched by vector and by keyword.

Chroma is the one record: chunks, their metadata and the knowledge base's own
settings (``flags``) live there (``chroma``); the keyword side (``keyword``, a
tantivy index) is a cache of it on local disk, caught up or rebuilt from Chroma
whenever it may be behind (``keyword_cache``). ``knowledge_base`` is the entry
point; it hands the work to ``writes``, ``search`` and ``keyword_cache``;
``fusion`` merges the dense and keyword rankings; ``migration`` brings in stores
written elsewhere.
"""
