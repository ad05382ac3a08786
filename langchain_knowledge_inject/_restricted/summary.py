"""Restricted mode: safe metadata, safe summaries from a secondary model, the leak guard.

Some knowledge bases hold content the main model may use for diagnosis and
recommendations but must never see or repeat (exact targets, KPI values,
internal definitions, document structure). In restricted mode:

1. the dynamic context names the bound knowledge bases with routing
   information only (:func:`safe_kb_meta`);
2. a secondary chat model reads the retrieved chunks, bounded by
   :class:`SummaryBounds`, and writes a :class:`SafeSummary`
   (:func:`summarize_chunks` / :func:`asummarize_chunks`);
3. the leak guard (:func:`~langchain_knowledge_inject._restricted.guard.check_leak`)
   compares the summary with the raw chunks and withholds it on any sign of
   copying (``refuse`` / ``leak_detected``);
4. the main model sees only :func:`format_safe_summary` of the result.

Everything fails closed: an error, a timeout or an unusable answer from the
secondary model gives ``refuse`` / ``summarizer_error``, never the raw chunks.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import Field

from langchain_knowledge_inject._restricted import summarizer as _s
from langchain_knowledge_inject._restricted.guard import (
    LeakPolicy,
    LeakReport,
    StrictConfig,
    check_leak,
)
from langchain_knowledge_inject._restricted.safe_summary import (
    REFUSAL_GUIDANCE,
    ReasonCode,
    SafeSummary,
    fail_closed_summary,
    fit_safe_summary,
    format_safe_summary,
    refusal,
)
from langchain_knowledge_inject._restricted.scope import hide_source_names
from langchain_knowledge_inject._restricted.summarizer import SAFE_SUMMARY_SYSTEM_PROMPT
from langchain_knowledge_inject._turn.model_call import call_with_timeout
from langchain_knowledge_inject._turn.tokens import TokenCounter
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig

__all__ = [
    "REFUSAL_GUIDANCE",
    "SAFE_SUMMARY_SYSTEM_PROMPT",
    "LeakPolicy",
    "LeakReport",
    "ReasonCode",
    "SafeKnowledgeBaseInfo",
    "SafeSummary",
    "SummaryBounds",
    "asafe_summary_block",
    "asummarize_chunks",
    "atool_result",
    "check_leak",
    "fail_closed_summary",
    "format_safe_summary",
    "safe_kb_meta",
    "safe_summary_block",
    "summarize_chunks",
    "tool_result",
]

logger = logging.getLogger("langchain_knowledge_inject.restriction")


class SummaryBounds(StrictConfig):
    """How much retrieved text the secondary model reads.

    Chunks are taken in rank order; each is cut at a word boundary to
    ``max_chars_per_chunk``; chunks are added until ``max_total_chars`` is
    reached (the last one cut to fit, unless less than 200 characters remain).

    The defaults cover the package's default retrieval (``k=4``) twice over, with
    room for a default ingestion chunk (about 1,000 characters) kept whole, and
    keep the excerpts near 2,000 tokens, so that a small, cheap secondary model
    with a 4k context still has room for the prompt and its answer.

    Example:
        >>> SummaryBounds(max_chunks=4).max_total_chars
        8000
    """

    max_chunks: int = Field(default=8, ge=1, le=100)
    """Most chunks passed to the secondary model."""
    max_chars_per_chunk: int = Field(default=1500, ge=100)
    """Most characters kept from each chunk."""
    max_total_chars: int = Field(default=8000, ge=100)
    """Most characters of chunk text in total."""
    max_reply_chars: int = Field(default=6000, ge=200)
    """Longest summary plus guidance accepted from the secondary model; a longer reply
    is refused (``summarizer_error``) before the leak guard reads it. A safe summary is
    a few sentences; a reply this long is a dump, not a summary."""


class _InfoLike(Protocol):
    name: str
    id: str


class SafeKnowledgeBaseInfo(StrictConfig):
    """The only knowledge-base metadata shown to the main model in restricted mode.

    Build it from a :class:`~langchain_knowledge_inject._store.knowledge_base.KnowledgeBaseInfo`
    with :meth:`from_info`: the description is never used (it may restate
    definitions); topics become routing keywords only when they hold no digits.

    Example:
        >>> SafeKnowledgeBaseInfo(name="hr", id="kb-1", routing_keywords=("leave",)).name
        'hr'
    """

    name: str = Field(min_length=1, max_length=100)
    """Knowledge-base name, as the ``knowledge_base_search`` tool knows it."""
    id: str = Field(min_length=1, max_length=100)
    """Knowledge-base id."""
    routing_hint: str = Field(default="", max_length=300)
    """One line saying which questions belong to this knowledge base (user-written)."""
    routing_keywords: tuple[str, ...] = Field(default=(), max_length=20)
    """Short keywords for routing searches; no digits, at most 4 words each."""

    @classmethod
    def from_info(
        cls,
        info: _InfoLike,
        *,
        routing_hint: str | None = None,
        routing_keywords: Sequence[str] | None = None,
    ) -> SafeKnowledgeBaseInfo:
        """Keep only the safe parts of a knowledge base's metadata.

        Args:
            info: A ``KnowledgeBaseInfo``, or anything with ``name`` and ``id``.
                Its ``routing_hint`` and ``routing_keywords`` are used when set;
                without keywords, its ``topics`` are, unless they were derived
                from the (restricted) content.
            routing_hint: Overrides the hint.
            routing_keywords: Overrides the keywords.

        Returns:
            The safe metadata: one-line texts, brackets made parentheses,
            keywords with digits or more than 4 words dropped.
        """
        if routing_hint is None:
            routing_hint = getattr(info, "routing_hint", "") or ""
        if routing_keywords is None:
            routing_keywords = getattr(info, "routing_keywords", None) or (
                [] if getattr(info, "topics_derived", False) else getattr(info, "topics", None)
            )
        keywords = [_one_line(k) for k in routing_keywords or ()]
        keywords = [k for k in keywords if k and len(k.split()) <= 4 and not _DIGIT_RE.search(k)]
        return cls(
            name=_one_line(str(info.name))[:100],
            id=_one_line(str(info.id))[:100],
            routing_hint=_one_line(routing_hint)[:300],
            routing_keywords=tuple(dict.fromkeys(keywords))[:20],
        )


def safe_kb_meta(
    info: _InfoLike | Sequence[_InfoLike],
    *,
    routing_hint: str | None = None,
    routing_keywords: Sequence[str] | None = None,
) -> str:
    """The restricted-mode knowledge-base block of the dynamic context.

    It tells the main model which knowledge bases are bound (so its
    ``knowledge_base_search`` calls stay well aimed) and nothing else: name,
    id, a routing hint and routing keywords. No description, passages,
    definitions, values or document structure.

    Args:
        info: One knowledge base's info (``KnowledgeBaseInfo`` or
            :class:`SafeKnowledgeBaseInfo`), or a sequence of them.
        routing_hint: Hint for a single knowledge base (not allowed with a sequence).
        routing_keywords: Keywords for a single knowledge base (not allowed with a sequence).

    Returns:
        The text block, starting with ``[Restricted Knowledge Bases]``.

    Raises:
        ConfigurationError: A hint or keywords were given with several knowledge bases.

    Example:
        >>> info = SafeKnowledgeBaseInfo(name="hr", id="kb-1")
        >>> print(safe_kb_meta(info, routing_hint="HR policy questions",
        ...                    routing_keywords=["leave", "expenses"]))
        [Restricted Knowledge Bases]
        Search these with knowledge_base_search; you get a safe summary, never the documents.
        - hr (id: kb-1): HR policy questions. Keywords: leave, expenses
    """
    infos = list(info) if isinstance(info, Sequence) else [info]
    if len(infos) != 1 and (routing_hint is not None or routing_keywords is not None):
        msg = "routing_hint and routing_keywords apply to one knowledge base; set them per info"
        raise ConfigurationError(msg, option="routing_hint", value=routing_hint)
    lines = [
        "[Restricted Knowledge Bases]",
        "Search these with knowledge_base_search; you get a safe summary, never the documents.",
    ]
    for item in infos:
        safe = SafeKnowledgeBaseInfo.from_info(
            item, routing_hint=routing_hint, routing_keywords=routing_keywords
        )
        line = f"- {safe.name} (id: {safe.id})"
        if safe.routing_hint:
            line += f": {safe.routing_hint.rstrip('.')}."
        if safe.routing_keywords:
            line += f" Keywords: {', '.join(safe.routing_keywords)}"
        lines.append(line)
    return "\n".join(lines)


def summarize_chunks(
    question: str,
    documents: Sequence[Document],
    *,
    model: BaseChatModel,
    bounds: SummaryBounds | None = None,
    policy: LeakPolicy | None = None,
    timeout: float | None = 30.0,
    sensitive_sources: bool = False,
    config: RunnableConfig | None = None,
) -> SafeSummary:
    """Have the secondary model write a safe summary of the chunks, then guard it.

    Never raises for anything the model does: an error, a timeout or an invalid
    answer gives ``refuse`` / ``summarizer_error``; a summary that copies the
    chunks gives ``refuse`` / ``leak_detected``; no chunks give ``refuse`` /
    ``insufficient_evidence`` without calling the model.

    Args:
        question: The user's question.
        documents: Retrieved chunks, best first.
        model: The secondary chat model. Its ``with_structured_output`` is used
            when it has one; otherwise its reply must be one JSON object.
        bounds: How much chunk text the model reads; ``SummaryBounds()`` by default.
        policy: Leak-guard thresholds; ``LeakPolicy()`` by default.
        timeout: Seconds to wait for the model (``None``: no limit). The model
            runs in a worker thread; a call that times out is abandoned.
        sensitive_sources: Keep source names out of the result.
        config: The caller's ``RunnableConfig``, for callbacks and custom events
            (inside a LangChain run it is found without being passed).

    Returns:
        The released :class:`SafeSummary`.

    Raises:
        ConfigurationError: ``model`` is missing or ``timeout`` is not positive.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> reply = ('{"decision": "answer", "reason": "answerable", "summary": "Plan leave '
        ...          'early and get approval first.", "answer_guidance": "Advise planning '
        ...          'ahead.", "confidence": 0.8}')
        >>> model = GenericFakeChatModel(messages=iter([reply]))
        >>> docs = [Document("Leave needs 14 days notice.", metadata={"source": "hr/leave.md"})]
        >>> result = summarize_chunks("How early must I ask?", docs, model=model)
        >>> result.decision, result.sources
        ('answer', ['leave.md'])
    """
    _check_arguments(model, timeout)
    texts = _bounded(documents, bounds)
    _s.dispatch("safe_summary_started", _started(documents, texts), config)
    if not texts:
        return _complete(refusal("insufficient_evidence", confidence=1.0), None, config)
    try:
        runnable, messages = _s.build_request(model, SafeSummary, question, texts)
        raw = call_with_timeout(lambda: _s.invoke(runnable, messages, config), timeout)
        candidate = _validate(raw, bounds)
    except Exception as exc:
        return _complete(_failure(exc, timeout), None, config)
    result, report = _guard(candidate, documents, policy, sensitive_sources, question=question)
    return _complete(_hide_sources(result, documents, sensitive_sources), report, config)


async def asummarize_chunks(
    question: str,
    documents: Sequence[Document],
    *,
    model: BaseChatModel,
    bounds: SummaryBounds | None = None,
    policy: LeakPolicy | None = None,
    timeout: float | None = 30.0,
    sensitive_sources: bool = False,
    config: RunnableConfig | None = None,
) -> SafeSummary:
    """Async twin of :func:`summarize_chunks`; the timeout uses ``asyncio.wait_for``.

    Example:
        >>> import asyncio
        >>> from langchain_core.documents import Document
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> model = GenericFakeChatModel(messages=iter(["Sure! Here it is."]))
        >>> docs = [Document("Leave needs 14 days notice.")]
        >>> asyncio.run(asummarize_chunks("How early?", docs, model=model)).reason
        'summarizer_error'
    """
    _check_arguments(model, timeout)
    texts = _bounded(documents, bounds)
    await _s.adispatch("safe_summary_started", _started(documents, texts), config)
    if not texts:
        return await _acomplete(refusal("insufficient_evidence", confidence=1.0), None, config)
    try:
        runnable, messages = _s.build_request(model, SafeSummary, question, texts)
        raw = await asyncio.wait_for(_s.ainvoke(runnable, messages, config), timeout)
        candidate = _validate(raw, bounds)
    except Exception as exc:
        return await _acomplete(_failure(exc, timeout), None, config)
    # the guard is CPU work (up to ~0.2 s on the default bounds): keep the event loop free
    result, report = await asyncio.to_thread(
        _guard, candidate, documents, policy, sensitive_sources, question=question
    )
    return await _acomplete(_hide_sources(result, documents, sensitive_sources), report, config)


def safe_summary_block(
    question: str,
    documents: Sequence[Document],
    *,
    model: BaseChatModel | None,
    max_tokens: int | None = None,
    counter: TokenCounter | None = None,
    bounds: SummaryBounds | None = None,
    policy: LeakPolicy | None = None,
    timeout: float | None = 30.0,
    sensitive_sources: bool = False,
    config: RunnableConfig | None = None,
) -> tuple[str, SafeSummary]:
    """Restricted mode's one fail-closed entry point: the block shown instead of the chunks.

    Without a model it refuses (``refuse`` / ``summarizer_error``); otherwise the
    model writes the summary (:func:`summarize_chunks`, guarded) and the block is
    cut to ``max_tokens`` (:func:`~.safe_summary.fit_safe_summary`); any error on
    the way refuses too, logged by its type only (its message may quote the
    chunks). Never returns raw chunk text. Every surface (the injector, the graph's
    ``safe_summarize`` node, the ``knowledge_base_search`` tool) calls this.

    Args:
        question: The user's question (or the tool's query).
        documents: The retrieved chunks, best first.
        model: The secondary chat model, or ``None``.
        max_tokens: Token budget of the block (``None``: not cut).
        counter: Counts tokens for ``max_tokens`` (the approximate count by default).
        bounds: See :func:`summarize_chunks`.
        policy: See :func:`summarize_chunks`.
        timeout: See :func:`summarize_chunks`.
        sensitive_sources: See :func:`summarize_chunks`.
        config: See :func:`summarize_chunks`.

    Returns:
        ``(text, summary)``: the block for the main model and the summary it shows.

    Raises:
        ConfigurationError: ``timeout`` is not a positive number or ``None``.
    """
    if model is None:
        return _no_model()
    _check_arguments(model, timeout)
    try:
        summary = summarize_chunks(
            question, documents, model=model, bounds=bounds, policy=policy, timeout=timeout,
            sensitive_sources=sensitive_sources, config=config,
        )  # fmt: skip
        return fit_safe_summary(summary, max_tokens=max_tokens, counter=counter)
    except Exception as exc:  # its message or traceback may quote the chunks: type only
        return _errored(exc)


async def asafe_summary_block(
    question: str,
    documents: Sequence[Document],
    *,
    model: BaseChatModel | None,
    max_tokens: int | None = None,
    counter: TokenCounter | None = None,
    bounds: SummaryBounds | None = None,
    policy: LeakPolicy | None = None,
    timeout: float | None = 30.0,
    sensitive_sources: bool = False,
    config: RunnableConfig | None = None,
) -> tuple[str, SafeSummary]:
    """Async twin of :func:`safe_summary_block`."""
    if model is None:
        return _no_model()
    _check_arguments(model, timeout)
    try:
        summary = await asummarize_chunks(
            question, documents, model=model, bounds=bounds, policy=policy, timeout=timeout,
            sensitive_sources=sensitive_sources, config=config,
        )  # fmt: skip
        return fit_safe_summary(summary, max_tokens=max_tokens, counter=counter)
    except Exception as exc:  # its message or traceback may quote the chunks: type only
        return _errored(exc)


def _no_model() -> tuple[str, SafeSummary]:
    logger.warning("restricted turn without a summarizer model: refusing")
    refused = fail_closed_summary()
    return format_safe_summary(refused), refused


def _errored(exc: Exception) -> tuple[str, SafeSummary]:
    logger.error("restricted summary failed (%s); refusing", type(exc).__name__)
    refused = fail_closed_summary()
    return format_safe_summary(refused), refused


def tool_result(
    documents: Sequence[Document],
    question: str,
    *,
    summarizer_model: BaseChatModel | None,
    bounds: SummaryBounds | None = None,
    policy: LeakPolicy | None = None,
    timeout: float | None = 30.0,
    sensitive_sources: bool = False,
    config: RunnableConfig | None = None,
    max_tokens: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """The restricted ``knowledge_base_search`` result: ``(content, artifact)``.

    The content is the block of :func:`safe_summary_block`, the artifact the
    summary it shows as a dict (never the documents, so no raw text is stored in
    the conversation either). Without a summarizer model, or on any error, it
    fails closed (``refuse`` / ``summarizer_error``).

    Args:
        documents: The chunks the search found, best first.
        question: The search query.
        summarizer_model: The secondary chat model, or ``None``.
        bounds: See :func:`summarize_chunks`.
        policy: See :func:`summarize_chunks`.
        timeout: See :func:`summarize_chunks`.
        sensitive_sources: See :func:`summarize_chunks`.
        config: See :func:`summarize_chunks`.
        max_tokens: Token budget of the content; a longer summary is cut to fit (see
            :func:`~langchain_knowledge_inject._restricted.safe_summary.fit_safe_summary`).

    Returns:
        The text for the model and the summary as a dict.

    Example:
        >>> content, artifact = tool_result([], "leave rules?", summarizer_model=None)
        >>> artifact["reason"], content.splitlines()[0]
        ('summarizer_error', '[Restricted Knowledge Summary]')
    """
    text, shown = safe_summary_block(
        question, documents, model=summarizer_model, max_tokens=max_tokens, bounds=bounds,
        policy=policy, timeout=timeout, sensitive_sources=sensitive_sources, config=config,
    )  # fmt: skip
    return text, shown.model_dump()


async def atool_result(
    documents: Sequence[Document],
    question: str,
    *,
    summarizer_model: BaseChatModel | None,
    bounds: SummaryBounds | None = None,
    policy: LeakPolicy | None = None,
    timeout: float | None = 30.0,
    sensitive_sources: bool = False,
    config: RunnableConfig | None = None,
    max_tokens: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """Async twin of :func:`tool_result`."""
    text, shown = await asafe_summary_block(
        question, documents, model=summarizer_model, max_tokens=max_tokens, bounds=bounds,
        policy=policy, timeout=timeout, sensitive_sources=sensitive_sources, config=config,
    )  # fmt: skip
    return text, shown.model_dump()


# Private helpers.

_DIGIT_RE = re.compile(r"\d")
_PREVIEW_CHARS = 80


def _one_line(text: str) -> str:
    return " ".join(str(text).replace("[", "(").replace("]", ")").split())


def _check_arguments(model: object, timeout: float | None) -> None:
    if model is None:
        msg = "restricted mode needs a summarizer model (any BaseChatModel)"
        raise ConfigurationError(msg, option="model", value=model)
    valid = isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0
    if timeout is not None and not valid:
        msg = "timeout must be a positive number of seconds, or None for no limit"
        raise ConfigurationError(msg, option="timeout", value=timeout)


def _bounded(documents: Sequence[Document], bounds: SummaryBounds | None) -> list[str]:
    bounds = bounds or SummaryBounds()
    return _s.bounded_texts(
        documents,
        max_chunks=bounds.max_chunks,
        max_chars_per_chunk=bounds.max_chars_per_chunk,
        max_total_chars=bounds.max_total_chars,
    )


def _started(documents: Sequence[Document], texts: list[str]) -> dict[str, Any]:
    data = {
        "chunk_count": len(texts),
        "characters": sum(map(len, texts)),
        "retrieved": len(documents),
    }
    logger.info("safe summary started: %d chunks, %d characters", len(texts), data["characters"])
    return data


def _validate(raw: Any, bounds: SummaryBounds | None) -> SafeSummary:
    summary = _s.parse_reply(raw, SafeSummary)
    if summary.decision == "answer" and not summary.summary.strip():
        msg = "an 'answer' decision needs a non-empty summary"
        raise ValueError(msg)
    limit = (bounds or SummaryBounds()).max_reply_chars
    if len(summary.summary) + len(summary.answer_guidance) > limit:
        msg = f"the summarizer reply is longer than max_reply_chars={limit}"
        raise ValueError(msg)
    return summary


def _hide_sources(
    result: SafeSummary, documents: Sequence[Document], sensitive_sources: bool
) -> SafeSummary:
    """With sensitive sources, take source names out of the model-written text too."""
    if not sensitive_sources:
        return result
    update = {
        "summary": hide_source_names(result.summary, documents),
        "answer_guidance": hide_source_names(result.answer_guidance, documents),
        "sources": [],
    }
    return result.model_copy(update=update)


def _guard(
    candidate: SafeSummary,
    documents: Sequence[Document],
    policy: LeakPolicy | None,
    sensitive_sources: bool,
    *,
    question: str | None = None,
) -> tuple[SafeSummary, LeakReport]:
    """Check every field the main model would see against the full raw chunks.

    The summary (kept only on ``answer``), the answer guidance (the refusal text
    on ``refuse``) and the reason are checked one by one and joined, with the
    user's question telling which words and numbers are not secrets.
    """
    refused = candidate.decision == "refuse"
    summary = "" if refused else candidate.summary
    guidance = candidate.answer_guidance.strip() or (
        REFUSAL_GUIDANCE[candidate.reason] if refused else ""
    )
    chunks = [doc.page_content for doc in documents]
    fields = {"summary": summary, "answer_guidance": guidance, "reason": candidate.reason}
    report = check_leak(fields, chunks, policy=policy, question=question)
    if report.leaked:
        logger.warning("safe summary withheld, leak detected: %s", ", ".join(report.codes))
        return refusal("leak_detected"), report
    sources = [] if refused or sensitive_sources else _s.source_names(documents)
    update = {"summary": summary, "answer_guidance": guidance, "sources": sources}
    return candidate.model_copy(update=update), report


def _failure(exc: Exception, timeout: float | None) -> SafeSummary:
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        logger.warning("safe summary failed: no answer within %s s", timeout)
    else:  # the message may quote model output or the chunks: never logged, nor its traceback
        logger.warning("safe summary failed: %s%s", type(exc).__name__, _error_fields(exc))
    return refusal("summarizer_error")


def _error_fields(exc: Exception) -> str:
    """Where a validation error failed (field names and error types, never the input)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return ""
    try:
        found = [f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('type')}" for e in errors()]
    except Exception:
        return ""
    return f" ({'; '.join(found[:5])})" if found else ""


def _completed(result: SafeSummary, report: LeakReport | None) -> dict[str, Any]:
    preview = (result.summary or result.answer_guidance)[:_PREVIEW_CHARS]
    if _s.model_io_logging():  # released text only: it passed the leak guard
        logger.info("summarizer released: %s", result.model_dump_json())
    logger.info(
        "safe summary completed: decision=%s reason=%s preview=%r",
        result.decision,
        result.reason,
        preview,
    )
    data: dict[str, Any] = {
        "decision": result.decision,
        "reason": result.reason,
        "confidence": result.confidence,
        "preview": preview,
    }
    if report is not None and report.leaked:
        data["leak_reasons"] = list(report.codes)
    return data


def _complete(
    result: SafeSummary, report: LeakReport | None, config: RunnableConfig | None
) -> SafeSummary:
    _s.dispatch("safe_summary_completed", _completed(result, report), config)
    return result


async def _acomplete(
    result: SafeSummary, report: LeakReport | None, config: RunnableConfig | None
) -> SafeSummary:
    await _s.adispatch("safe_summary_completed", _completed(result, report), config)
    return result
