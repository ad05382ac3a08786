"""``kinject chat``: a terminal chat over a knowledge base.

With a model (``--model provider:model``, or the ``KINJECT_CHAT_MODEL`` environment
variable) every turn runs the same pipeline as the graph and the Runnable, with the
history kept in memory: retrieval, the dynamic_context message, the model's
answer and the sources it was given. Any model ``init_chat_model`` can build
works (install its integration package, e.g. ``langchain-openai``).

Without a model the chat is a dry run: each turn it prints the exact messages
that would be sent (role and content, the injected message marked), which is
the quickest way to see what the injection does. The history then holds the
user messages only.

A bad ``--model`` (its provider package missing, or not ``provider:model``) is one
line on stderr and exit code 2; a model call that fails mid-chat is one line, and the
chat goes on. An empty line is ignored; ``exit``, ``quit`` or end of input (Ctrl-D)
ends the chat.
"""

from __future__ import annotations

import os
import sys
from typing import IO, TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_knowledge_inject._surfaces.engine import InjectionEngine
from langchain_knowledge_inject._surfaces.hosting import as_message
from langchain_knowledge_inject._turn.placement import is_injected
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    import argparse

    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

__all__ = ["MODEL_ENV_VAR", "run_chat"]

MODEL_ENV_VAR = "KINJECT_CHAT_MODEL"
"""Environment variable naming the chat model (``provider:model``) when ``--model`` is absent."""

_EXIT_WORDS = frozenset({"exit", "quit", ":q"})
_SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer the user's questions using the knowledge base {name!r}."
)


def run_chat(
    args: argparse.Namespace,
    *,
    model: BaseChatModel | None = None,
    embeddings: Embeddings | None = None,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
) -> int:
    """Run the interactive chat of ``kinject chat``.

    The model is built before the knowledge base is opened, so a bad
    ``--model`` fails at once. A model call that fails mid-chat is reported in
    one line and the chat goes on, the question left out of the history.

    Args:
        args: Parsed arguments with ``kb`` (name), ``model`` (``provider:model``
            or ``None``), ``path`` (store directory or ``None``) and ``tenant``.
        model: A chat model to use instead of ``args.model`` (for programs and tests).
        embeddings: The embedding model the knowledge base was built with
            (default: the package's default model).
        stdin: Where user lines are read (default ``sys.stdin``).
        stdout: Where the chat is written (default ``sys.stdout``).

    Returns:
        The exit code (0).

    Raises:
        ConfigurationError: The model cannot be built: its provider package is
            missing, or the name is not ``provider:model`` (the message says which).
        KnowledgeBaseNotFoundError: No knowledge base of that name in the store.

    Example:
        >>> import argparse
        >>> args = argparse.Namespace(kb="hr", model=None, path=None, tenant=None)
        >>> run_chat(args)  # doctest: +SKIP
    """
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase
    from langchain_knowledge_inject._store.metadata import require_knowledge_base

    stdin = stdin if stdin is not None else sys.stdin
    out = stdout if stdout is not None else sys.stdout
    model_name = getattr(args, "model", None) or os.environ.get(MODEL_ENV_VAR) or None
    if model is None and model_name:
        model = _chat_model(model_name)
    path = getattr(args, "path", None)
    require_knowledge_base(args.kb, path)
    kb = KnowledgeBase(args.kb, path=path, embeddings=embeddings, create=False)
    chat = _Chat(kb, model, _SYSTEM_PROMPT.format(name=args.kb), getattr(args, "tenant", None))
    mode = f"model {model_name or type(model).__name__}" if model is not None else "dry run"
    print(f"kinject chat: knowledge base {args.kb!r} ({mode}). Type 'exit' to leave.", file=out)
    if model is None:
        print("No model configured (--model or KINJECT_CHAT_MODEL): showing the messages "
              "that would be sent each turn.", file=out)  # fmt: skip
    try:
        while True:
            print("you> ", end="", file=out, flush=True)
            line = stdin.readline()
            if not line:
                print(file=out)
                break
            text = line.strip()
            if text.lower() in _EXIT_WORDS:
                break
            if text:
                chat.run(text, out)
    finally:
        kb.close()
    return 0


def _chat_model(name: str) -> BaseChatModel:
    """``init_chat_model(name)``, or a one-line ``ConfigurationError`` saying what is wrong."""
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(name)
    except Exception as exc:  # a missing provider package, a bad name, the provider's own check
        detail = " ".join(str(exc).split()) or type(exc).__name__
        msg = f"cannot use the chat model {name!r}: {detail} (--model takes PROVIDER:MODEL, "
        msg += "for example openai:gpt-4o-mini)"
        raise ConfigurationError(msg, option="model", value=name) from None


class _Chat:
    """The chat's turns: the engine's messages to the model (or, without one, shown)."""

    def __init__(self, kb: Any, model: Any, system_prompt: str, tenant: str | None) -> None:
        self.engine = InjectionEngine(kb, tenant_id=tenant)
        self.model = model
        self.history: list[BaseMessage] = [SystemMessage(system_prompt)]
        self.turns = 0

    def run(self, text: str, out: IO[str]) -> None:
        self.turns += 1
        question = HumanMessage(text)
        turn = self.engine.prepare([*self.history, question])
        if self.model is None:
            self.history.append(question)
            sent = turn.messages
            print(f"--- turn {self.turns}: {len(sent)} messages would be sent ---", file=out)
            for message in sent:
                label = f"{message.type} (injected)" if is_injected(message) else message.type
                print(f"[{label}]\n{message.text}", file=out)
            print("--- end of messages ---", file=out)
            return
        try:
            reply = as_message(self.model.invoke(turn.messages))
        except Exception as exc:  # the network, the key, the provider: the chat goes on
            detail = " ".join(str(exc).split())
            print(f"  (the model call failed: {type(exc).__name__}: {detail}; ask again)", file=out)
            return
        self.history += [question, reply]
        print(f"assistant> {reply.text}", file=out)
        manifest = turn.manifest
        sources = sorted(set(manifest.sources))
        if manifest.retrieval_error:
            print(f"  (retrieval failed: {manifest.retrieval_error})", file=out)
        elif sources:
            print(f"  (knowledge given to the model: {', '.join(sources)})", file=out)
        else:
            print("  (no knowledge retrieved for this message)", file=out)
