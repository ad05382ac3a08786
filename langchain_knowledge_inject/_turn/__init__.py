"""One turn: the retrieval query, the searched sources, the blocks, the budget and placement.

The data of a turn flows through these modules in order: ``query`` (what to search for),
``sources`` and ``retrieval`` (searching, a ``RetrievalOutcome``), ``blocks`` /
``formatting`` / ``tokens`` (the blocks under one budget), ``assemble`` (the
dynamic_context text, then placement and manifest: a ``PreparedTurn``), ``placement``
(where the message goes) and ``manifest`` (what was injected). Every step is a plain
function over plain data; the configured pipeline that calls them is
``integrations.engine``. Text tools (``tokens``, ``neutralize``,
``model_call``) are used by restricted mode too; nothing here imports restricted mode.

Words: "context" is the dynamic_context message only; a "context block" is one block of
it (procedure, knowledge, past conversation, facts).
"""
