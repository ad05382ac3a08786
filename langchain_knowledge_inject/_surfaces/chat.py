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

An empty line is ignored; ``exit``, ``quit`` or end of input (Ctrl-D) ends the chat.
"""

from __future__ import annotations

import os
import sys
from typing import IO, TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_knowledge_inject._surfaces.hosting import as_message
from langchain_knowledge_inject._surfaces.pipeline import KnowledgePipeline
from langchain_knowledge_inject._turn.placement import is_injected

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
        KnowledgeBaseNotFoundError: No knowledge base of that name in the store.

    Example:
        >>> import argparse
        >>> args = argparse.Namespace(kb="hr", model=None, path=None, tenant=None)
        >>> run_chat(args)  # doctest: +SKIP
    """
    stdin = stdin if stdin is not None else sys.stdin
    out = stdout if stdout is not None else sys.stdout
    kb = _open_knowledge_base(args.kb, getattr(args, "path", None), embeddings)
    model_name = getattr(args, "model", None) or os.environ.get(MODEL_ENV_VAR) or None
    if model is None and model_name:
        from langchain.chat_models import init_chat_model

        model = init_chat_model(model_name)
    tenant = getattr(args, "tenant", None)
    system_prompt = _SYSTEM_PROMPT.format(name=args.kb)
    turn = _ModelTurn(model, kb, system_prompt, tenant) if model is not None else None
    dry = _DryRunTurn(kb, system_prompt, tenant) if model is None else None
    mode = f"model {model_name or type(model).__name__}" if model is not None else "dry run"
    print(f"kinject chat: knowledge base {args.kb!r} ({mode}). Type 'exit' to leave.", file=out)
    if dry is not None:
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
            if not text:
                continue
            if text.lower() in _EXIT_WORDS:
                break
            if turn is not None:
                turn.run(text, out)
            elif dry is not None:
                dry.run(text, out)
    finally:
        kb.close()
    return 0


def _open_knowledge_base(name: str, path: str | None, embeddings: Embeddings | None) -> Any:
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase
    from langchain_knowledge_inject._store.metadata import require_knowledge_base

    require_knowledge_base(name, path)
    return KnowledgeBase(name, path=path, embeddings=embeddings, create=False)


class _ModelTurn:
    """One chat turn: the engine's messages to the model, the history kept in memory."""

    def __init__(self, model: Any, kb: Any, system_prompt: str, tenant: str | None) -> None:
        self.model = model
        self.engine = KnowledgePipeline(kb, tenant_id=tenant)
        self.system_prompt = system_prompt
        self.history: list[BaseMessage] = []

    def run(self, text: str, out: IO[str]) -> None:
        self.history.append(HumanMessage(text))
        turn = self.engine.prepare(
            [SystemMessage(self.system_prompt), *self.history], self.engine.request()
        )
        reply = as_message(self.model.invoke(turn.messages))
        self.history.append(reply)
        print(f"assistant> {reply.text}", file=out)
        manifest = turn.manifest
        sources = sorted(set(manifest.sources))
        if manifest.retrieval_error:
            print(f"  (retrieval failed: {manifest.retrieval_error})", file=out)
        elif sources:
            print(f"  (knowledge given to the model: {', '.join(sources)})", file=out)
        else:
            print("  (no knowledge retrieved for this message)", file=out)


class _DryRunTurn:
    """One chat turn without a model: print the messages that would be sent."""

    def __init__(self, kb: Any, system_prompt: str, tenant: str | None) -> None:
        self.engine = KnowledgePipeline(kb, tenant_id=tenant)
        self.system_prompt = system_prompt
        self.history: list[BaseMessage] = []
        self.turns = 0

    def run(self, text: str, out: IO[str]) -> None:
        self.history.append(HumanMessage(text))
        self.turns += 1
        messages = [SystemMessage(self.system_prompt), *self.history]
        sent = self.engine.prepare(messages, self.engine.request()).messages
        print(f"--- turn {self.turns}: {len(sent)} messages would be sent ---", file=out)
        for message in sent:
            label = f"{message.type} (injected)" if is_injected(message) else message.type
            print(f"[{label}]", file=out)
            content = message.content
            blocks = (
                [content]
                if isinstance(content, str)
                else [
                    part.get("text", "") if isinstance(part, dict) else str(part)
                    for part in content
                ]
            )
            print("\n\n".join(blocks), file=out)
        print("--- end of messages ---", file=out)
