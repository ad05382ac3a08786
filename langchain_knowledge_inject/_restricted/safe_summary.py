"""The safe summary: its data, the block the main model sees, the fixed refusal, the budget.

The bottom of restricted mode: what a :class:`SafeSummary` holds, how it is shown
(:func:`format_safe_summary`), the refusal every path falls back to
(:func:`fail_closed_summary`) and how a summary is cut to a token budget
(:func:`fit_safe_summary`). It imports nothing else from restricted mode.
"""

from __future__ import annotations

import logging
import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from langchain_knowledge_inject._turn.neutralize import neutralize_line
from langchain_knowledge_inject._turn.tokens import TokenCounter, approximate_token_count

__all__ = [
    "REFUSAL_GUIDANCE",
    "ReasonCode",
    "SafeSummary",
    "fail_closed_summary",
    "fit_safe_summary",
    "format_safe_summary",
    "refusal",
]

logger = logging.getLogger("langchain_knowledge_inject.restriction")

ReasonCode = Literal[
    "answerable",
    "insufficient_evidence",
    "out_of_scope",
    "sensitive_content",
    "leak_detected",
    "summarizer_error",
]
"""Machine-readable reason of a :class:`SafeSummary` decision."""

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
}
"""What the main model is told to say for each refusal reason (fixed, never model-written
for ``leak_detected`` and ``summarizer_error``)."""


class SafeSummary(BaseModel):
    """A safe, paraphrased summary of restricted excerpts, with an answer-or-refuse decision.

    Example:
        >>> SafeSummary(decision="refuse", reason="out_of_scope", summary="",
        ...             answer_guidance="Say the topic is not covered.", confidence=0.9).decision
        'refuse'
    """

    model_config = ConfigDict(extra="forbid")

    decision: Literal["answer", "refuse"] = Field(
        description="'answer' when the excerpts allow safe, useful guidance; else 'refuse'."
    )
    """Whether the main model may answer from this summary."""
    reason: ReasonCode = Field(
        description="'answerable' with decision 'answer'; otherwise why the answer is refused."
    )
    """Machine-readable reason; ``answerable`` exactly when ``decision`` is ``answer``."""
    summary: str = Field(
        description="Paraphrased guidance for the question: no copied text, no exact values, "
        "no definitions, no document structure. Empty when refusing."
    )
    """Safe summary for the main model; always empty on ``refuse`` once released."""
    answer_guidance: str = Field(
        description="One or two sentences telling the assistant how to answer the user, "
        "or what to tell the user when refusing."
    )
    """How the main model should answer, or what it should tell the user on ``refuse``."""
    confidence: float = Field(ge=0.0, le=1.0, description="Confidence from 0 to 1.")
    """The summarizer's confidence in its decision, from 0 to 1."""
    sources: SkipJsonSchema[list[str]] = Field(default_factory=list)
    """Source file names behind the summary; set by the package, never by the model, and
    empty when the knowledge base marks its sources sensitive or the decision is ``refuse``."""

    @model_validator(mode="after")
    def _decision_matches_reason(self) -> SafeSummary:
        if (self.decision == "answer") != (self.reason == "answerable"):
            msg = "reason must be 'answerable' exactly when decision is 'answer'"
            raise ValueError(msg)
        if not math.isfinite(self.confidence):
            msg = "confidence must be a finite number"
            raise ValueError(msg)
        return self


def format_safe_summary(summary: SafeSummary) -> str:
    """The block the main model sees in restricted mode.

    It never holds raw chunks or scores. Source names appear only when the
    summary carries them (never on ``refuse``, never for sensitive sources).
    Brackets, ``---`` and role labels in model-written text are neutralized so
    that it cannot pose as a header or as another speaker.

    Args:
        summary: A released :class:`SafeSummary`.

    Returns:
        The text block, starting with ``[Restricted Knowledge Summary]``.

    Example:
        >>> s = SafeSummary(decision="refuse", reason="summarizer_error", summary="",
        ...                 answer_guidance="", confidence=0.0)
        >>> print(format_safe_summary(s).splitlines()[1])
        Decision: refuse (reason: summarizer_error)
    """
    lines = [
        "[Restricted Knowledge Summary]",
        f"Decision: {summary.decision} (reason: {summary.reason})",
    ]
    if summary.decision == "refuse":
        written = "" if summary.reason in _FIXED_GUIDANCE else summary.answer_guidance
        guidance = _neutralize(written) or REFUSAL_GUIDANCE[summary.reason]
        lines.append(
            "The restricted knowledge base cannot be used to answer this question. "
            "Do not guess its content or invent figures."
        )
        lines.append(f"What to tell the user: {guidance}")
        return "\n".join(lines)
    lines.append(
        "This safe summary was written for this question; the documents themselves are "
        "confidential. Use it for diagnosis and recommendations, do not present it as the "
        "documents' wording, and do not invent exact figures, targets or definitions."
    )
    lines.append(f"Summary: {_neutralize(summary.summary)}")
    if summary.answer_guidance.strip():
        lines.append(f"How to answer: {_neutralize(summary.answer_guidance)}")
    lines.append(f"Confidence: {_confidence_word(summary.confidence)}")
    if summary.sources:
        lines.append(f"Sources: {', '.join(_neutralize(s) for s in summary.sources)}")
    return "\n".join(lines)


def fail_closed_summary(reason: ReasonCode = "summarizer_error") -> SafeSummary:
    """The refusal every surface falls back to: no summary, fixed guidance for ``reason``."""
    return refusal(reason)


def refusal(reason: ReasonCode, *, confidence: float = 0.0) -> SafeSummary:
    """A ``refuse`` summary for ``reason``, with the fixed guidance of that reason."""
    return SafeSummary(
        decision="refuse",
        reason=reason,
        summary="",
        answer_guidance=REFUSAL_GUIDANCE[reason],
        confidence=confidence,
    )


_FIXED_GUIDANCE = {"leak_detected", "summarizer_error"}


def _neutralize(text: str) -> str:
    return neutralize_line(text)


def _confidence_word(confidence: float) -> str:
    return "high" if confidence >= 0.75 else "medium" if confidence >= 0.4 else "low"


def fit_safe_summary(
    summary: SafeSummary,
    *,
    max_tokens: int | None,
    counter: TokenCounter | None = None,
) -> tuple[str, SafeSummary]:
    """The safe-summary block cut to ``max_tokens``, and the summary as cut.

    The model-written fields are cut at word boundaries (the guidance first, to
    60 words, then the summary), marked with ``…``. When no useful summary fits
    (fewer than 8 words) the block becomes the fixed refusal (``refuse`` /
    ``summarizer_error``): a summary is never injected whole past its budget. The
    fixed refusal is the floor: it is returned even when it alone exceeds a tiny
    budget, as it is the package's own short text.

    Args:
        summary: A released :class:`SafeSummary`.
        max_tokens: The token budget of the block; ``None``: no budget (the block
            is :func:`format_safe_summary` of the summary as it is).
        counter: Counts tokens (:func:`~.turn.tokens.approximate_token_count`
            by default).

    Returns:
        ``(text, summary)``: the block and the summary it shows.
    """
    count = counter or approximate_token_count
    text = format_safe_summary(summary)
    if max_tokens is None or count(text) <= max_tokens:
        return text, summary
    guidance = _cut_words(summary.answer_guidance, 60)
    words = summary.summary.split()

    def render(n: int) -> tuple[str, SafeSummary]:
        cut = summary.model_copy(
            update={"summary": _cut_words(summary.summary, n), "answer_guidance": guidance}
        )
        return format_safe_summary(cut), cut

    if summary.decision == "answer":
        low, high = 0, len(words)
        while low < high:  # the longest prefix of the summary that fits
            mid = (low + high + 1) // 2
            if count(render(mid)[0]) <= max_tokens:
                low = mid
            else:
                high = mid - 1
        if low >= min(8, len(words)):
            logger.warning("safe summary cut to %d of %d words (max_tokens=%d)",
                           low, len(words), max_tokens)  # fmt: skip
            return render(low)
    elif count(render(0)[0]) <= max_tokens:
        return render(0)
    logger.warning("safe summary does not fit in max_tokens=%d: refusing", max_tokens)
    refused = fail_closed_summary()
    return format_safe_summary(refused), refused


def _cut_words(text: str, limit: int) -> str:
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit]) + " …"
