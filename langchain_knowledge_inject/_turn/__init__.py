"""One turn: the retrieval query, the searched sources, the blocks, the budget and placement.

The data of a turn flows through these modules in order: ``query`` and
``conversation`` (what to search for), ``retrieval`` (every source searched, the
reranker), ``blocks`` / ``formatting`` / ``tokens`` / ``assemble`` (the blocks under
one budget, the injected text), ``placement`` (where it goes) and ``manifest`` (what
was injected). Every step is a plain function over plain data; the pipeline that calls
them is ``_surfaces.pipeline``. Text tools (``tokens``, ``neutralize``,
``model_call``) are used by restricted mode too; nothing here imports restricted mode.
"""
