"""The graphs that ``langgraph.json`` serves, over a knowledge base in a Chroma server.

- ``graph``: :func:`create_knowledge_graph`, the package's own chat graph, whose nodes are
  its steps: ``retrieve -> [safe_summarize] -> build_context -> call_model``;
- ``agent``: ``langchain.agents.create_agent`` with :class:`KnowledgeInjectionMiddleware`.

The LangGraph server gives both their checkpointer and store, so neither is set here.
Everything comes from the environment (see ``README.md``): the knowledge base
(``shared_kb.py``, warmed when the server starts by ``webapp.py``), the main model
(``KINJECT_EXAMPLE_MODEL``) and restricted mode's summarizer
(``KINJECT_EXAMPLE_SUMMARIZER_MODEL``, default: the main model). A restricted
knowledge base is served restricted: the flag is the store's.
"""

from __future__ import annotations

import os

from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from scripted_models import ScriptedChatModel, scripted_summarizer
from shared_kb import knowledge_base

from langchain_knowledge_inject import KnowledgeInjectionMiddleware, create_knowledge_graph

SYSTEM_PROMPT = "You are the HR assistant. Answer from the knowledge you are given."


def _chat_model(
    variable: str, *, default: str | None = None, summarizer: bool = False
) -> BaseChatModel:
    """The model ``variable`` names: ``provider:model`` (``init_chat_model``) or ``scripted``."""
    name = os.environ.get(variable) or default
    if not name:
        msg = (
            f"Set {variable} to a model for init_chat_model (for example "
            f"'openai:gpt-4o-mini', with its provider package and API key) or to 'scripted' "
            f"(the offline stand-in of scripted_models.py)"
        )
        raise RuntimeError(msg)
    if name == "scripted":
        return scripted_summarizer() if summarizer else ScriptedChatModel()
    return init_chat_model(name)


model = _chat_model("KINJECT_EXAMPLE_MODEL")
summarizer = _chat_model(
    "KINJECT_EXAMPLE_SUMMARIZER_MODEL",
    default=os.environ.get("KINJECT_EXAMPLE_MODEL"),
    summarizer=True,
)

graph = create_knowledge_graph(
    model, knowledge_base, system_prompt=SYSTEM_PROMPT, summarizer_model=summarizer
)
agent = create_agent(
    model,
    system_prompt=SYSTEM_PROMPT,
    middleware=[KnowledgeInjectionMiddleware(knowledge_base, summarizer_model=summarizer)],
)
