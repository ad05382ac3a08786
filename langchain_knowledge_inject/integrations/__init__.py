"""The surfaces: Runnable, LangGraph graph and node, agent middleware, tool and CLI.

Each file is one way in: ``runnable`` (LCEL), ``graph`` and ``node`` (LangGraph),
``middleware`` (``create_agent``), ``tools`` (``knowledge_base_search``), ``cli`` and
``chat`` (``kinject``).
"""
