"""Memory tools for the model: ``store_memory``, ``set_user_fact``, ``forget_user_fact``.

The model decides what is worth remembering: a note for the episodic memory
or a ``key=value`` fact about the user. The user is read from the run's
config (hidden from the model's schema), never filled in by the model, so it
cannot write into another user's memory; without a user id nothing is
stored. Errors come back to the model as the tool's answer. Awaited, a tool
runs in a worker thread (LangChain's default without a coroutine), so the
store's I/O stays off the event loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, ConfigDict, Field

from langchain_knowledge_inject._turn.blocks import config_user_id
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_knowledge_inject._memory.episodic import EpisodicMemory
    from langchain_knowledge_inject._memory.facts import UserFacts


class StoreMemoryInput(BaseModel):
    """Arguments of ``store_memory``."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(
        description="The information to remember, as one self-contained sentence "
        "(e.g. 'The user prefers aisle seats on long flights.').",
        min_length=1,
        max_length=2000,
    )


class SetUserFactInput(BaseModel):
    """Arguments of ``set_user_fact``."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="Short snake_case name of the fact, e.g. 'home_city'.")
    value: str = Field(description="The value, short, e.g. 'Lisbon'.")


class ForgetUserFactInput(BaseModel):
    """Arguments of ``forget_user_fact``."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(description="Name of the fact to remove.")


def _user_id(config: RunnableConfig, key: str) -> str:
    user_id = config_user_id(config, key=key)
    if not user_id:
        msg = "No user id is configured for this conversation; nothing was stored."
        raise ToolException(msg)
    return user_id


def _tool(func: Callable[..., str], **kwargs: Any) -> BaseTool:
    """A tool over ``func``; a refused value comes back to the model as the tool's answer.

    No coroutine is given: LangChain runs ``func`` in a worker thread when the
    tool is awaited, so its store I/O never blocks the event loop.
    """

    @functools.wraps(func)
    def run(*args: Any, **call: Any) -> str:
        try:
            return func(*args, **call)
        except ConfigurationError as exc:
            raise ToolException(str(exc)) from exc

    return StructuredTool.from_function(func=run, handle_tool_error=True, **kwargs)


def create_store_memory_tool(
    memory: EpisodicMemory,
    *,
    name: str = "store_memory",
    description: str = (
        "Save a piece of information about the user that will be useful in future "
        "conversations (a preference, a plan, a personal detail they shared). Do not save "
        "secrets or passwords."
    ),
) -> BaseTool:
    """A tool with which the model saves a note in the user's episodic memory.

    Args:
        memory: The episodic memory to write to.
        name: The tool's name.
        description: The tool's description, shown to the model.

    Returns:
        A ``StructuredTool`` taking ``content``.

    Example:
        >>> import tempfile
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> from langchain_knowledge_inject._memory.episodic import EpisodicMemory, EpisodicOptions
        >>> memory = EpisodicMemory(path=tempfile.mkdtemp(),
        ...                         embeddings=DeterministicFakeEmbedding(size=16),
        ...                         options=EpisodicOptions(background=False))
        >>> tool = create_store_memory_tool(memory)
        >>> tool.invoke({"content": "Prefers aisle seats."},
        ...             config={"configurable": {"user_id": "u1"}})
        'Saved to memory.'
    """

    def store_memory(content: str, config: RunnableConfig) -> str:
        user_id = _user_id(config, memory.user_id_key)
        thread_id = config_user_id(config, key="thread_id")
        memory.record(content, user_id=user_id, thread_id=thread_id, kind="memory")
        return "Saved to memory."

    return _tool(store_memory, name=name, description=description, args_schema=StoreMemoryInput)


def create_user_fact_tools(
    facts: UserFacts,
    *,
    set_name: str = "set_user_fact",
    forget_name: str = "forget_user_fact",
) -> list[BaseTool]:
    """The ``set_user_fact`` and ``forget_user_fact`` tools over ``facts``.

    Args:
        facts: The user-facts store to write to.
        set_name: Name of the tool that sets a fact.
        forget_name: Name of the tool that removes a fact.

    Returns:
        ``[set_user_fact, forget_user_fact]``.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> from langchain_knowledge_inject._memory.facts import UserFacts
        >>> facts = UserFacts(InMemoryStore())
        >>> set_fact, _ = create_user_fact_tools(facts)
        >>> set_fact.invoke({"key": "city", "value": "Porto"}, {"configurable": {"user_id": "u1"}})
        'Saved: city=Porto'
    """

    def set_fact(key: str, value: str, config: RunnableConfig) -> str:
        fact = facts.set(_user_id(config, facts.user_id_key), key, value)
        return f"Saved: {fact.key}={fact.value}"

    def forget_fact(key: str, config: RunnableConfig) -> str:
        existed = facts.forget(_user_id(config, facts.user_id_key), key)
        return f"Forgot {key}." if existed else f"There was no fact named {key}."

    set_tool = _tool(
        set_fact, name=set_name, args_schema=SetUserFactInput,
        description=(
            "Remember a lasting fact about the user as key=value (their name, city, "
            "preferences, ...). Setting an existing key replaces its value. Shown to you at "
            "the start of later turns under [User Facts]."
        ),
    )  # fmt: skip
    forget_tool = _tool(
        forget_fact, name=forget_name, args_schema=ForgetUserFactInput,
        description="Remove a fact about the user that is wrong or that they asked you to forget.",
    )  # fmt: skip
    return [set_tool, forget_tool]


def create_memory_tools(
    *, memory: EpisodicMemory | None = None, facts: UserFacts | None = None
) -> list[BaseTool]:
    """Every memory tool for the given stores: ``store_memory`` and/or the two fact tools."""
    tools: list[BaseTool] = []
    if memory is not None:
        tools.append(create_store_memory_tool(memory))
    if facts is not None:
        tools.extend(create_user_fact_tools(facts))
    return tools
