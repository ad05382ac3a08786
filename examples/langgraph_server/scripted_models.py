"""Offline stand-ins for the chat models, selected by ``KINJECT_EXAMPLE_MODEL=scripted``.

They let the example (and its integration test) run with no API key and no network.
A deployment uses a real model instead: see ``README.md``.

- :class:`ScriptedChatModel`, the main model, answers with the line of the injected
  knowledge that shares the most words with the question, so a client can see what
  the model was given; with nothing injected it says :data:`NO_KNOWLEDGE`.
- :func:`scripted_summarizer`, restricted mode's secondary model, always writes the
  same safe summary, which copies nothing from the chunks.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

NO_KNOWLEDGE = "I have no knowledge about that."
_BLOCK_HEADERS = ("[Retrieved Knowledge]", "[Restricted Knowledge Summary]")


def _words(text: str) -> set[str]:
    return {word for word in re.findall(r"\w+", text.lower()) if len(word) > 2}


def _parts(message: BaseMessage) -> list[str]:
    """The text parts of a message: its string content, or each text content block."""
    if isinstance(message.content, str):
        return [message.content]
    return [
        part if isinstance(part, str) else str(part.get("text", ""))
        for part in message.content
        if isinstance(part, str) or part.get("type") == "text"
    ]


class ScriptedChatModel(BaseChatModel):
    """Answers with the injected line closest to the question (the first on a tie)."""

    @property
    def _llm_type(self) -> str:
        return "scripted-example"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        blocks, questions = [], []
        for message in messages:
            for part in _parts(message):
                if part.lstrip().startswith(_BLOCK_HEADERS):
                    blocks.append(part)
                elif message.type == "human":
                    questions.append(part)
        question = _words(questions[-1]) if questions else set()
        lines = [line.strip() for block in blocks for line in block.splitlines()[1:]]
        scored = [(len(question & _words(line)), line) for line in lines if line]
        reply = max(scored, key=lambda pair: pair[0])[1] if scored else NO_KNOWLEDGE
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def scripted_summarizer() -> GenericFakeChatModel:
    """Restricted mode's secondary model: the same safe summary on every call."""
    reply = json.dumps(
        {
            "decision": "answer",
            "reason": "answerable",
            "summary": "The knowledge base has a policy on this topic.",
            "answer_guidance": "Say that a policy covers it and that HR can give details.",
            "confidence": 0.8,
        }
    )
    return GenericFakeChatModel(messages=itertools.repeat(AIMessage(reply)))
