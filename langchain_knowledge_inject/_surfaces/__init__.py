"""The surfaces: Runnable, LangGraph graph and node, agent middleware, tool and CLI.

Each surface file is one way in: ``runnable`` (LCEL), ``graph`` and ``node``
(LangGraph), ``middleware`` (``create_agent``), ``tools`` (``knowledge_base_search``),
``cli`` and ``chat`` (``kinject``). Every one runs the same turn pipeline
(``pipeline``: ``KnowledgePipeline``); ``hosting`` is what the graph, the node and the
middleware do around the model call. Surfaces never import each other, except the
search tool, which the graph and the middleware build.
"""
