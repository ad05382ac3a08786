"""``kinject chat``: a terminal chat over a knowledge base.

With a model (``--model provider:model``, or ``KINJECT_CHAT_MODEL``) every turn runs
the pipeline of the graph and the Runnable, the history kept in memory, and prints the
answer and the sources the model was given; any model ``init_chat_model`` builds works
once its package is installed (``langchain-openai``, ...). A bad model is one line and
exit code 2 (``chat_model``); a model call that fails mid-chat is one line, and the chat
goes on. Without a model the chat is a dry run: each turn prints the exact messages that
would be sent, the injected one marked (the history then holds the user's messages).
An empty line is ignored; ``exit``, ``quit`` or the end of input (Ctrl-D) ends the chat.
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_knowledge_inject._surfaces.hosting import as_message
from langchain_knowledge_inject._surfaces.pipeline import KnowledgePipeline
from langchain_knowledge_inject._turn.placement import is_injected
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

MODEL_ENV_VAR = "KINJECT_CHAT_MODEL"
"""Environment variable naming the chat model (``provider:model``) when ``--model`` is absent."""

_EXIT_WORDS = frozenset({"exit", "quit", ":q"})
_SYSTEM_PROMPT = (
    "You are a helpful assistant. Answer the user's questions using the knowledge base {name!r}."
)


def chat_model(name: str) -> BaseChatModel:
    """``init_chat_model(name)``; else a one-line ``ConfigurationError`` saying what is wrong.

    Raises:
        ConfigurationError: A missing provider package (the ``pip install``), a name not
            ``provider:model`` (the providers), the provider's refusal (a missing key).
    """
    from langchain.chat_models import init_chat_model

    try:
        return init_chat_model(name)
    except Exception as exc:  # a missing provider package, a bad name, the provider's own check
        detail = " ".join(str(exc).split()) or type(exc).__name__
        msg = f"cannot use the chat model {name!r}: {detail} (--model takes PROVIDER:MODEL, "
        msg += "for example openai:gpt-4o-mini)"
        raise ConfigurationError(msg, option="model", value=name) from None


def run_chat(
    kb: KnowledgeBase,
    model: BaseChatModel | None,
    *,
    model_name: str | None = None,
    tenant_id: str | None = None,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
) -> int:
    """Chat over ``kb`` (left open) until ``exit`` or the end of input; return 0.

    ``model`` None is the dry run; ``model_name`` is shown in the header (default:
    the model's class); ``stdin``/``stdout`` default to the process's own.
    """
    stdin, out = stdin or sys.stdin, stdout or sys.stdout
    chat = _Chat(kb, model, _SYSTEM_PROMPT.format(name=kb.name), tenant_id)
    mode = f"model {model_name or type(model).__name__}" if model is not None else "dry run"
    print(f"kinject chat: knowledge base {kb.name!r} ({mode}). Type 'exit' to leave.", file=out)
    if model is None:
        print("No model configured (--model or KINJECT_CHAT_MODEL): showing the messages "
              "that would be sent each turn.", file=out)  # fmt: skip
    while True:
        print("you> ", end="", file=out, flush=True)
        text = stdin.readline()
        if not text or text.strip().lower() in _EXIT_WORDS:
            break
        if text.strip():
            chat.run(text.strip(), out)
    print(file=out)
    return 0


class _Chat:
    """The chat's turns: the engine's messages to the model (or, without one, shown)."""

    def __init__(self, kb: Any, model: Any, system_prompt: str, tenant: str | None) -> None:
        self.engine = KnowledgePipeline(kb, tenant_id=tenant)
        self.model = model
        self.history: list[BaseMessage] = [SystemMessage(system_prompt)]
        self.turns = 0

    def run(self, text: str, out: IO[str]) -> None:
        self.turns += 1
        question = HumanMessage(text)
        turn = self.engine.prepare([*self.history, question], self.engine.request())
        if self.model is None:
            self.history.append(question)
            sent = turn.messages
            print(f"--- turn {self.turns}: {len(sent)} messages would be sent ---", file=out)
            for message in sent:
                label = f"{message.type} (injected)" if is_injected(message) else message.type
                content = message.content
                blocks = [content] if isinstance(content, str) else [
                    part.get("text", "") if isinstance(part, dict) else str(part)
                    for part in content
                ]  # fmt: skip
                print(f"[{label}]\n" + "\n\n".join(blocks), file=out)
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
        sources = sorted(set(turn.manifest.sources))
        if turn.manifest.retrieval_error:
            print(f"  (retrieval failed: {turn.manifest.retrieval_error})", file=out)
        elif sources:
            print(f"  (knowledge given to the model: {', '.join(sources)})", file=out)
        else:
            print("  (no knowledge retrieved for this message)", file=out)
