"""The one boundary of restricted mode: raw chunks in, typed fields out.

Restricted knowledge bases hold text the main model may use for diagnosis and
recommendations but must never see. Every surface (the injector, the graph, the
node, the agent middleware, the ``knowledge_base_search`` tool) sends a restricted
turn's chunks through :func:`release` / :func:`arelease`, and nothing else leaves the
restricted zone. What crosses is a :class:`Released`, built from a whitelist:

============== ==============================================================
field          form
============== ==============================================================
decision       ``"answer"`` or ``"refuse"``
reason         one of :data:`ReasonCode`
summary        text written by the summarizer and passed by the leak guard
               (empty on ``refuse``)
guidance       guarded text, or the package's fixed refusal text
confidence     ``"low"``, ``"medium"`` or ``"high"`` (never the model's number)
sources        file names, only when the knowledge base does not mark its
               sources sensitive and the decision is ``answer``
refs           one id per chunk, keyed with a per-process random secret
               (:func:`chunk_ref`): never a hash of the content
scores         the chunks' scores rounded to one decimal
codes          fixed codes: why the summarizer failed, which guard checks fired
============== ==============================================================

Logs, custom events, the manifest, the graph state and the tool's artifact are
built from these fields alone (:meth:`Released.event`); a log line never carries a
string the model supplied, not even a key name or a validation message. Everything
fails closed: no summarizer, an error, a timeout, an unusable reply, a leak, a
summary that does not fit its budget all give a refusal.

The threat model is in docs/restricted-mode.md: the summarizer may be hostile or
prompt-injected by the chunks it reads, and anything in state, streams, events,
logs or exceptions reaches an end user.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from langchain_knowledge_inject._restricted import summarizer as _s
from langchain_knowledge_inject._restricted.guard import LeakPolicy, StrictConfig, check_leak
from langchain_knowledge_inject._restricted.ledger import LEDGER, Ledger
from langchain_knowledge_inject._restricted.summarizer import ReasonCode, SummarizerFailure
from langchain_knowledge_inject._store.flags import raw_access
from langchain_knowledge_inject._store.sealing import any_sealed
from langchain_knowledge_inject._turn.model_call import call_with_timeout
from langchain_knowledge_inject._turn.neutralize import neutralize_line
from langchain_knowledge_inject._turn.tokens import (
    TokenCounter,
    approximate_token_count,
    longest_fit,
)
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig

logger = logging.getLogger("langchain_knowledge_inject.restriction")

Confidence = Literal["low", "medium", "high"]

REFUSAL_GUIDANCE: dict[str, str] = {
    "insufficient_evidence": (
        "Tell the user the knowledge base has no specific information on this, and do not guess."
    ),
    "out_of_scope": "Tell the user this question is outside what the knowledge base covers.",
    "sensitive_content": (
        "Tell the user the relevant information is restricted and cannot be shared here; "
        "suggest contacting the owner of the policy."
    ),
    "leak_detected": (
        "Tell the user the relevant information is restricted and no safe summary could be "
        "produced; suggest rephrasing the question or contacting the owner of the policy."
    ),
    "summarizer_error": (
        "Tell the user the restricted knowledge base could not be consulted right now, and "
        "do not present an answer from memory as if it came from the knowledge base."
    ),
    "key_unavailable": "Tell the user the restricted knowledge base cannot be read here now.",
}
"""What the main model is told to say for each refusal reason."""

_FIXED_GUIDANCE = frozenset({"leak_detected", "summarizer_error", "key_unavailable"})
_MIN_WORDS = 8
_PROCESS_KEY = secrets.token_bytes(32)


class SummaryBounds(StrictConfig):
    """How much retrieved text the summarizer reads, and the longest reply it may give.

    Example:
        >>> SummaryBounds(max_chunks=4).max_total_chars
        8000
    """

    max_chunks: int = Field(default=8, ge=1, le=100)
    """Most chunks passed to the summarizer, in rank order."""
    max_chars_per_chunk: int = Field(default=1500, ge=100)
    """Most characters kept of each chunk (cut at a word boundary)."""
    max_total_chars: int = Field(default=8000, ge=100)
    """Most characters of chunk text in total."""
    max_reply_chars: int = Field(default=6000, ge=200)
    """Longest summary plus guidance accepted; a longer reply is refused unread."""


class SafeSummary(BaseModel):
    """What a restricted turn shows of its knowledge: a checked summary, or a refusal.

    Built only by :func:`release`; every field is of a fixed form (see the module
    docstring). It is the tool's artifact, the graph's ``safe_summary`` and what the
    manifest reports.

    Example:
        >>> refused("out_of_scope").decision, refused("out_of_scope").confidence
        ('refuse', 'high')
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    decision: Literal["answer", "refuse"]
    """Whether the main model may answer from this summary."""
    reason: ReasonCode
    """Machine-readable reason; ``answerable`` exactly when ``decision`` is ``answer``."""
    summary: str = ""
    """The guarded summary; empty on ``refuse``."""
    answer_guidance: str = ""
    """How to answer, or what to tell the user on ``refuse``."""
    confidence: Confidence = "low"
    """The summarizer's confidence, coarsened to three buckets."""
    sources: tuple[str, ...] = ()
    """Source file names behind an ``answer`` (empty when sources are sensitive)."""


def refused(reason: ReasonCode) -> SafeSummary:
    """A refusal for ``reason`` with the package's fixed guidance."""
    confidence: Confidence = "low" if reason in _FIXED_GUIDANCE else "high"
    return SafeSummary(
        decision="refuse",
        reason=reason,
        answer_guidance=REFUSAL_GUIDANCE[reason],
        confidence=confidence,
    )


def chunk_ref(chunk_id: str) -> str:
    """The id a chunk of a restricted turn is known by outside the boundary.

    Keyed with a random secret drawn when the process starts, so it is stable within a
    process (the tool can skip what was already shown) and cannot be recomputed from
    a guess of the chunk's text.

    Example:
        >>> chunk_ref("abc") == chunk_ref("abc") != chunk_ref("abd")
        True
    """
    digest = hmac.new(_PROCESS_KEY, str(chunk_id).encode("utf-8"), hashlib.sha256).digest()
    return "ref-" + "".join(chr(ord("a") + byte % 26) for byte in digest[:10])  # no digits


@dataclass(frozen=True)
class Released:
    """Everything that leaves the restricted zone for one restricted search or turn."""

    summary: SafeSummary
    """The released summary (or refusal)."""
    text: str
    """The block the main model sees, built from :attr:`summary` alone."""
    refs: tuple[str, ...] = ()
    """One :func:`chunk_ref` per summarized chunk, in rank order."""
    scores: tuple[float, ...] = ()
    """Their scores, rounded to one decimal."""
    codes: tuple[str, ...] = ()
    """Fixed codes: a summarizer failure (``timeout``, ``invalid_reply``...) or guard checks."""
    chunks: int = 0
    """Chunks the summarizer read."""

    def event(self) -> dict[str, Any]:
        """The released fields: the ``safe_summary_completed`` event and the tool's artifact."""
        return {
            **self.summary.model_dump(mode="json"),
            "refs": list(self.refs),
            "scores": list(self.scores),
            "codes": list(self.codes),
            "chunks": self.chunks,
        }

    def stubs(self) -> list[Document]:
        """The summarized chunks as they may be kept: ref and coarse score, never text."""
        return [stub(ref, score) for ref, score in zip(self.refs, self.scores, strict=True)]


def stub(ref: str, score: float) -> Document:
    """A chunk as it may be kept outside the boundary: its keyed reference and score, no text."""
    from langchain_core.documents import Document

    return Document(
        page_content="", id=ref, metadata={"chunk_id": ref, "score": score, "redacted": True}
    )


# --- the block -------------------------------------------------------------------------------


def format_block(summary: SafeSummary) -> str:
    """The ``[Restricted Knowledge Summary]`` block the main model sees.

    Example:
        >>> print(format_block(refused("summarizer_error")).splitlines()[1])
        Decision: refuse (reason: summarizer_error)
    """
    lines = [
        "[Restricted Knowledge Summary]",
        f"Decision: {summary.decision} (reason: {summary.reason})",
    ]
    if summary.decision == "refuse":
        lines.append(
            "The restricted knowledge base cannot be used to answer this question. "
            "Do not guess its content or invent figures."
        )
        written = "" if summary.reason in _FIXED_GUIDANCE else summary.answer_guidance
        guidance = neutralize_line(written) or REFUSAL_GUIDANCE[summary.reason]
        lines.append(f"What to tell the user: {guidance}")
        return "\n".join(lines)
    lines.append(
        "This safe summary was written for this question; the documents themselves are "
        "confidential. Use it for diagnosis and recommendations, do not present it as the "
        "documents' wording, and do not invent exact figures, targets or definitions."
    )
    lines.append(f"Summary: {neutralize_line(summary.summary)}")
    if summary.answer_guidance.strip():
        lines.append(f"How to answer: {neutralize_line(summary.answer_guidance)}")
    lines.append(f"Confidence: {summary.confidence}")
    if summary.sources:
        lines.append(f"Sources: {', '.join(neutralize_line(s) for s in summary.sources)}")
    return "\n".join(lines)


def _fit(summary: SafeSummary, max_tokens: int | None, count: TokenCounter) -> SafeSummary:
    """The summary cut to ``max_tokens`` at word boundaries; a refusal when too little fits."""
    if max_tokens is None or count(format_block(summary)) <= max_tokens:
        return summary
    if summary.decision == "refuse":
        return refused(summary.reason)
    guidance = _cut_words(summary.answer_guidance, 60)
    words = summary.summary.split()

    def cut(n: int) -> SafeSummary:
        return summary.model_copy(
            update={"summary": _cut_words(summary.summary, n), "answer_guidance": guidance}
        )

    low = longest_fit(len(words), lambda n: count(format_block(cut(n))) <= max_tokens)
    if low >= min(_MIN_WORDS, len(words)):
        logger.warning(
            "safe summary cut to %d of %d words (max_tokens=%d)", low, len(words), max_tokens
        )
        return cut(low)
    logger.warning("safe summary does not fit in max_tokens=%d: refusing", max_tokens)
    return refused("summarizer_error")


def _cut_words(text: str, limit: int) -> str:
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit]) + " …"


def _confidence(value: float) -> Confidence:
    return "high" if value >= 0.75 else "medium" if value >= 0.4 else "low"


# --- the boundary ----------------------------------------------------------------------------


@dataclass
class _Call:
    """One release: the inputs, checked once, shared by the sync and async paths."""

    question: str
    documents: list[Document]
    model: BaseChatModel | None
    sensitive_sources: bool
    thread: str | None
    public: str
    ledger: Ledger
    bounds: SummaryBounds
    policy: LeakPolicy | None
    timeout: float | None
    max_tokens: int | None
    counter: TokenCounter
    texts: list[str] = field(default_factory=list)

    def started(self) -> dict[str, Any]:
        self.texts = _s.bounded_texts(
            self.documents,
            max_chunks=self.bounds.max_chunks,
            max_chars_per_chunk=self.bounds.max_chars_per_chunk,
            max_total_chars=self.bounds.max_total_chars,
        )
        characters = sum(map(len, self.texts))
        logger.info("safe summary started: %d chunks, %d characters", len(self.texts), characters)
        _s.log_request(self.texts, self.question)
        return {
            "chunk_count": len(self.texts),
            "characters": characters,
            "retrieved": len(self.documents),
        }

    def early(self) -> tuple[SafeSummary, tuple[str, ...]] | None:
        """A refusal that needs no model call (sealed text: not opened, no key), or ``None``."""
        if any_sealed(self.documents):
            return refused("key_unavailable"), ("sealed_text",)
        if self.model is None:
            return refused("summarizer_error"), ("no_model",)
        if not self.texts:
            return refused("insufficient_evidence"), ()
        return None

    def judge(self, raw: Any) -> tuple[SafeSummary, tuple[str, ...]]:
        """Parse, guard and record under the thread's lock: parallel calls see each other."""
        with self.ledger.hold(self.thread) as released:
            summary, codes = self._judged(raw, list(released))
            if summary.reason not in _FIXED_GUIDANCE:  # what the summarizer wrote was shown
                released.append(summary)
        return summary, codes

    def _judged(self, raw: Any, earlier: list[SafeSummary]) -> tuple[SafeSummary, tuple[str, ...]]:
        """Parse the reply, guard every field the main model would see, coarsen, fit."""
        reply = _s.parse_reply(raw, max_reply_chars=self.bounds.max_reply_chars)
        answering = reply.decision == "answer"
        summary = reply.summary if answering else ""
        guidance = reply.answer_guidance.strip() or (
            "" if answering else REFUSAL_GUIDANCE[reply.reason]
        )
        sources = _source_names(self.documents)
        chunks = [doc.page_content for doc in self.documents]
        fields = {"summary": summary, "answer_guidance": guidance}
        summaries = [e.summary for e in earlier if e.summary]
        guidances = [e.answer_guidance for e in earlier if e.answer_guidance]
        # each field right after its own kind released earlier, so a fragment chain is whole
        views = [(fields, [*guidances, *summaries])]
        if guidances:
            views.append(({"answer_guidance": guidance, "summary": summary},
                          [*summaries, *guidances]))  # fmt: skip
        for view, before in views:
            report = check_leak(view, chunks, question=self.question, released=before,
                                public=self.public, policy=self.policy,
                                sources=sources if self.sensitive_sources else ())  # fmt: skip
            if report.leaked:
                return refused("leak_detected"), tuple(report.codes)
        shown = sources if answering and not self.sensitive_sources else []
        kept = SafeSummary(
            decision=reply.decision,
            reason=reply.reason,
            summary=summary,
            answer_guidance=guidance,
            confidence=_confidence(reply.confidence),
            sources=tuple(shown),
        )
        return _fit(kept, self.max_tokens, self.counter), ()

    def released(self, summary: SafeSummary, codes: tuple[str, ...]) -> Released:
        docs = self.documents
        result = Released(
            summary=summary,
            text=format_block(summary),
            refs=tuple(chunk_ref(_chunk_id(d)) for d in docs),
            scores=tuple(round(_score(d), 1) for d in docs),
            codes=codes,
            chunks=len(self.texts),
        )
        logger.info(
            "safe summary completed: decision=%s reason=%s confidence=%s codes=%s",
            summary.decision,
            summary.reason,
            summary.confidence,
            ",".join(codes) or "-",
        )
        return result


def _failed(exc: BaseException) -> tuple[SafeSummary, tuple[str, ...]]:
    """Any error on the way: a refusal, logged by a fixed code (never the error's text)."""
    if isinstance(exc, SummarizerFailure):
        code = exc.code
    elif isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        code = "timeout"
    else:
        code = "model_error"
    logger.warning("safe summary failed (%s); refusing", code)
    return refused("summarizer_error"), (code,)


def _call(
    question: str,
    documents: Sequence[Document],
    model: BaseChatModel | None,
    *,
    sensitive_sources: bool = False,
    thread: str | None = None,
    public: str = "",
    ledger: Ledger = LEDGER,
    bounds: SummaryBounds | None = None,
    policy: LeakPolicy | None = None,
    timeout: float | None = 30.0,
    max_tokens: int | None = None,
    counter: TokenCounter | None = None,
) -> _Call:
    valid = isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0
    if timeout is not None and not valid:
        msg = "timeout must be a positive number of seconds, or None for no limit"
        raise ConfigurationError(msg, option="timeout", value=timeout)
    return _Call(
        question or "",
        list(documents),
        model,
        sensitive_sources,
        thread,
        public,
        ledger,
        bounds or SummaryBounds(),
        policy,
        timeout,
        max_tokens,
        counter or approximate_token_count,
    )


def release(
    question: str,
    documents: Sequence[Document],
    *,
    model: BaseChatModel | None,
    config: RunnableConfig | None = None,
    **options: Any,
) -> Released:
    """Summarize restricted chunks for ``question`` and release only typed, checked fields.

    The summarizer reads the chunks (bounded by ``bounds``) inside the boundary
    (:func:`~langchain_knowledge_inject._store.flags.raw_access`: no caller callbacks,
    no tracer, its warnings and log records dropped); its reply is parsed strictly,
    every field the main model would see is checked by the leak guard against the
    full chunks, together with what ``thread`` already released, and recorded in the
    thread's ledger before it is released, under the thread's lock (so parallel calls
    see each other); the confidence is coarsened and the block cut to
    ``max_tokens``. Never raises for anything the model does; never returns chunk text.

    Args:
        question: The user's question (or the tool's query).
        documents: The retrieved chunks, best first.
        model: The summarizer (any chat model); ``None`` refuses with
            ``summarizer_error``.
        config: The caller's config (for the custom events only).
        **options: ``sensitive_sources`` (keep source names out of what is
            released, and refuse a summary that names them in any spelling),
            ``thread`` (the conversation, for the ledger; ``None``: judged alone),
            ``public`` (the knowledge base's public description: its words are
            allowed), ``ledger`` (the :class:`~.ledger.Ledger`; the process's),
            ``bounds`` (how much the summarizer reads; ``SummaryBounds()``),
            ``policy`` (the leak guard's thresholds), ``timeout`` (seconds to wait
            for the summarizer, 30; ``None``: no limit), ``max_tokens`` (token
            budget of the block), ``counter`` (counts tokens; approximate).

    Returns:
        The :class:`Released` fields.

    Raises:
        ConfigurationError: ``timeout`` is not a positive number.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> reply = ('{"decision": "answer", "reason": "answerable", "summary": "Plan leave '
        ...          'early and get approval from your manager first.", "answer_guidance": '
        ...          '"Advise planning ahead.", "confidence": 0.8}')
        >>> docs = [Document("Leave needs 14 days notice.", id="c1",
        ...                  metadata={"source": "hr/leave.md"})]
        >>> out = release("How early must I ask?", docs,
        ...               model=GenericFakeChatModel(messages=iter([reply])))
        >>> out.summary.decision, out.summary.confidence, out.summary.sources
        ('answer', 'high', ('leave.md',))
    """
    call = _call(question, documents, model, **options)
    _dispatch("safe_summary_started", call.started(), config)
    outcome = call.early()
    if outcome is None:
        try:
            runnable, messages = _s.build_request(call.model, call.question, call.texts)  # type: ignore[arg-type]
            config_ = _s.isolated_config(config)
            with raw_access():
                raw = call_with_timeout(
                    lambda: runnable.invoke(messages, config=config_), call.timeout
                )
            outcome = call.judge(raw)
        except Exception as exc:
            outcome = _failed(exc)
    released = call.released(*outcome)
    _dispatch("safe_summary_completed", released.event(), config)
    return released


async def arelease(
    question: str,
    documents: Sequence[Document],
    *,
    model: BaseChatModel | None,
    config: RunnableConfig | None = None,
    **options: Any,
) -> Released:
    """Async twin of :func:`release` (the same options): the guard runs in a thread."""
    call = _call(question, documents, model, **options)
    await _adispatch("safe_summary_started", call.started(), config)
    outcome = call.early()
    if outcome is None:
        try:
            runnable, messages = _s.build_request(call.model, call.question, call.texts)  # type: ignore[arg-type]
            config_ = _s.isolated_config(config)
            with raw_access():  # the task wait_for starts copies this context
                raw = await asyncio.wait_for(runnable.ainvoke(messages, config_), call.timeout)
            outcome = await asyncio.to_thread(call.judge, raw)  # the guard is CPU work
        except Exception as exc:
            outcome = _failed(exc)
    released = call.released(*outcome)
    await _adispatch("safe_summary_completed", released.event(), config)
    return released


def _chunk_id(doc: Document) -> str:
    return str(doc.id or doc.metadata.get("chunk_id") or doc.page_content)


def _score(doc: Document) -> float:
    try:
        return float(doc.metadata.get("score", 0.0))
    except (TypeError, ValueError):
        return 0.0


def _source_names(documents: Sequence[Document]) -> list[str]:
    """File names of the documents' sources, de-duplicated in rank order."""
    from pathlib import PurePath

    names = (
        PurePath(str(d.metadata["source"])).name for d in documents if d.metadata.get("source")
    )
    return [name for name in dict.fromkeys(names) if name]


def _dispatch(name: str, data: dict[str, Any], config: RunnableConfig | None) -> None:
    from langchain_core.callbacks.manager import dispatch_custom_event

    with contextlib.suppress(RuntimeError):  # outside a LangChain run: nobody to tell
        dispatch_custom_event(name, data, config=config)


async def _adispatch(name: str, data: dict[str, Any], config: RunnableConfig | None) -> None:
    from langchain_core.callbacks.manager import adispatch_custom_event

    with contextlib.suppress(RuntimeError):
        await adispatch_custom_event(name, data, config=config)
