"""A search's arguments as filters (private to :mod:`~langchain_knowledge_inject._memory.episodic`).

Thread, date range, speaker and the caller's own metadata become one filter in
Chroma's ``where`` language over the episode chunks' metadata; the names of
known speakers are found in, and left out of, the question.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from langchain_knowledge_inject._store.keyword import STOPWORDS
from langchain_knowledge_inject._turn.query import FUNCTION_WORDS
from langchain_knowledge_inject.errors import ConfigurationError

__all__ = ["QUESTION_STOPWORDS", "aware", "both", "named", "stopword_set", "strip_names", "where"]

QUESTION_STOPWORDS = STOPWORDS | FUNCTION_WORDS
"""Words an episode search leaves out of its keyword side: Lucene's 33 and the function words.

A question to a memory is full of words that every short dialogue turn holds
("what", "did", "you", "when"); matched as keywords, they rank "What did you
do?" above the answer. Only the keyword query leaves them out: the question's
vector and the knowledge base's own default stay as they are. The default of
``EpisodicMemory(keyword_stopwords=...)``; a question left with no keyword hit
on its answer is judged on its cosine (see ``Candidate.evidence``).
"""


def stopword_set(words: Iterable[str] | None) -> frozenset[str]:
    """The ``keyword_stopwords`` option as a set of casefolded words (``None``: Lucene's 33)."""
    if words is None:
        return STOPWORDS
    listed = [] if isinstance(words, str) else list(words)
    if isinstance(words, str) or not all(isinstance(w, str) for w in listed):
        msg = "keyword_stopwords must be an iterable of words, or None"
        raise ConfigurationError(msg, option="keyword_stopwords", value=words)
    return frozenset(w.casefold() for w in listed)


def named(text: str, speakers: set[str]) -> list[str]:
    """The speakers named in ``text`` (whole words, any case)."""
    return sorted(
        (s for s in speakers if re.search(rf"(?<!\w){re.escape(s)}(?!\w)", text, re.IGNORECASE)),
        key=len, reverse=True,
    )  # fmt: skip


def strip_names(text: str, names: Sequence[str]) -> str:
    """``text`` without the speakers' names: they are metadata, matched by ``speaker_weight``."""
    for name in names:
        text = re.sub(
            rf"(?<!\w){re.escape(name)}(?:['\u2019]s)?(?!\w)", " ", text, flags=re.IGNORECASE
        )
    stripped = " ".join(text.split())
    return stripped if re.search(r"\w", stripped) else text


def aware(date: datetime) -> datetime:
    """``date`` in UTC; a naive datetime is taken as UTC."""
    if not isinstance(date, datetime):
        msg = f"expected a datetime, got {type(date).__name__}"
        raise ConfigurationError(msg, option="now", value=date)
    return (date if date.tzinfo else date.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)


def both(*clauses: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``$and`` of the non-empty filter clauses, or ``None`` when there are none."""
    parts = [dict(c) for c in clauses if c]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def where(
    thread_id: str | Sequence[str] | None,
    since: datetime | None,
    until: datetime | None,
    speaker: str | None,
    filter: Mapping[str, Any] | None,
) -> dict[str, Any] | None:
    """The Chroma ``where`` filter of one memory search (thread, dates, speaker, metadata)."""
    if filter is not None and not isinstance(filter, Mapping):
        msg = f"filter must be a mapping (Chroma's where language), got {type(filter).__name__}"
        raise ConfigurationError(msg, option="filter", value=filter)
    if filter and any(k == "tenant_id" or k.startswith("ep_") for k in filter):
        msg = "filter is for your own metadata; use user_id, thread_id, since, until, speaker"
        raise ConfigurationError(msg, option="filter", value=dict(filter))
    clauses: list[Mapping[str, Any] | None] = [filter]
    if isinstance(thread_id, str):
        clauses.append({"ep_thread": {"$eq": thread_id}})
    elif thread_id is not None:
        threads = [str(t) for t in thread_id]
        if not threads:
            msg = "thread_id must be a thread id, a non-empty list of them, or None"
            raise ConfigurationError(msg, option="thread_id", value=thread_id)
        clauses.append({"ep_thread": {"$in": threads}})
    if since is not None:
        clauses.append({"ep_ts": {"$gte": aware(since).timestamp()}})
    if until is not None:
        clauses.append({"ep_ts": {"$lt": aware(until).timestamp()}})
    if speaker is not None:
        clauses.append({"ep_speaker": {"$eq": speaker}})
    return both(*clauses)
