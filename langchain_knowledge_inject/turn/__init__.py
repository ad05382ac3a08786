"""One turn: the retrieval query, the searched sources, the blocks, the budget and placement.

The data of a turn flows through these modules in order: ``query`` (what to search for),
``sources`` (searching), ``blocks`` / ``formatting`` / ``tokens`` (the knowledge block under
one budget), ``assemble`` (the dynamic_context text), ``placement`` (where the message goes)
and ``manifest`` (what was injected).
"""
