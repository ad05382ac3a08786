"""The surfaces: Runnable, LangGraph graph and node, agent middleware, tool and CLI.

Each surface file is one way in: ``runnable`` (LCEL), ``graph`` and ``node``
(LangGraph), ``middleware`` (``create_agent``), ``tools`` (``knowledge_base_search``),
``cli`` and ``chat`` (``kinject``). Surfaces never import each other; what they share is
in ``engine`` (the configured turn pipeline, ``InjectionEngine``), ``hosting`` (tool
calls of a restricted turn, the custom stream) and ``search`` (the search tool's
machinery), which are not surfaces.
"""
