"""Shared pieces of ``prefix_cache.py`` and ``injection_overhead.py``.

- :class:`ScriptedReplyModel`: a deterministic fake chat model whose reply
  depends only on the current user question (so a conversation with and
  without injection stores the same history), recording every prompt.
- :func:`sample_kb` and :func:`scifact_documents`: the knowledge bases.
- :func:`machine_load`: the load average, printed with every timing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

try:
    from langchain_knowledge_inject._turn.placement import query_text, strip_injected
except ImportError:  # the starting code (PYTHONPATH=/work/baseline)
    from langchain_knowledge_inject.turn.placement import query_text, strip_injected

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "bench" / "scifact"
SYSTEM_PROMPT = (
    "You are the HR assistant of Northwind Labs. Answer employees' questions about company "
    "policies briefly and precisely, in a friendly tone."
)


class ScriptedReplyModel(BaseChatModel):
    """Replies ``replies[question]`` (or ``default``) and records every prompt it receives.

    The question is the text of the last user message once injections are
    stripped, so the reply never depends on what was injected.
    """

    replies: dict[str, str] = Field(default_factory=dict)
    default: str = "OK."
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    record: bool = True

    @property
    def _llm_type(self) -> str:
        return "scripted-reply"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedReplyModel:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        if self.record:
            self.prompts.append(list(messages))
        humans = [m for m in strip_injected(messages) if isinstance(m, HumanMessage)]
        question = query_text(humans[-1]) if humans else None
        reply = self.replies.get(question or "", self.default)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def sample_kb(path: str | os.PathLike[str], **kwargs: Any):
    """The sample HR knowledge base (real embedding model) in ``path``."""
    from langchain_knowledge_inject import build_sample_knowledge_base

    return build_sample_knowledge_base(path=path, **kwargs)


def scifact_documents(limit: int, data: Path = SCIFACT) -> list[Document]:
    """The first ``limit`` SciFact abstracts as whole documents (the knowledge base splits them)."""
    docs: list[Document] = []
    with (data / "corpus.jsonl").open() as fh:
        for line in fh:
            row = json.loads(line)
            text = f"{row['title']}\n\n{row['text']}"
            docs.append(Document(text, metadata={"source": f"scifact/{row['_id']}.txt"}))
            if len(docs) >= limit:
                break
    return docs


def scifact_queries(limit: int, data: Path = SCIFACT) -> list[str]:
    """The first ``limit`` SciFact claims, used as queries."""
    with (data / "queries.jsonl").open() as fh:
        return [json.loads(line)["text"] for _, line in zip(range(limit), fh, strict=False)]


def machine_load() -> str:
    """``uptime``-style load averages and the CPU count, for the record."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"
