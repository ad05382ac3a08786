"""Dates in questions, resolved against a reference time (for the episodic memory).

:func:`resolve` turns the first date expression of a question ("yesterday",
"two weeks ago", "last May", "in 2023", "on March 3rd", "last weekend", ...)
into a time range relative to ``now`` and cuts it out of the question, so its
words do not steer the text search. Vague ones get a window, because people
round: "N days ago" +-1 day, weeks +-4 days, months +-16 days, years +-6 months.
:func:`asks_about_past` and :func:`asks_about_now` tell whether newer episodes
should be preferred.

Example:
    >>> found = resolve("What did I cook last May?", now=datetime(2024, 6, 12, tzinfo=timezone.utc))
    >>> found.start.date().isoformat(), found.end.date().isoformat(), found.rest
    ('2024-05-01', '2024-06-01', 'What did I cook ?')
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a couple": 2, "couple of": 2, "a few": 3, "few": 3, "several": 4,
}  # fmt: skip
_MONTH = (
    r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_NUM = rf"(?P<n>\d{{1,3}}|{'|'.join(sorted(_NUMBERS, key=len, reverse=True))})"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_PAST_WORDS = re.compile(
    r"\b(when did|when was|when were|what year|which year|what month|used to|use to|originally|"
    r"at first|initially|back then|back when|in the past|the first time|first time|"
    r"previously|formerly|before (?:that|then)|ago|earlier|last (?:time|year|month|week))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class DateRange:
    """A time range named in a question: ``start <= t < end`` (UTC)."""

    start: datetime
    end: datetime
    text: str
    """The expression as written."""
    rest: str
    """The question without the expression."""


def _day(now: datetime) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int) -> datetime:
    """The first of ``month`` of ``year`` (a month outside 1-12 moves the year)."""
    return datetime(year + (month - 1) // 12, (month - 1) % 12 + 1, 1, tzinfo=timezone.utc)


def _month_number(name: str) -> int:
    return _MONTHS.index(name.lower()[:3]) + 1


def _count(text: str) -> int:
    text = text.lower()
    return int(text) if text.isdigit() else _NUMBERS[text]


def _ago(m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    n, unit = _count(m["n"]), m["unit"].lower()
    if unit.startswith("day"):
        point, slack = _day(now) - timedelta(days=n), timedelta(days=1)
        return point - slack, point + timedelta(days=1) + slack
    if unit.startswith("week"):
        point, slack = now - timedelta(weeks=n), timedelta(days=4)
    elif unit.startswith("month"):
        point, slack = now - timedelta(days=30.44 * n), timedelta(days=16)
    else:
        point, slack = now - timedelta(days=365.25 * n), timedelta(days=183)
    return point - slack, point + slack


def _relative(m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    which, unit = m["which"].lower(), m["unit"].lower()
    today = _day(now)
    if unit == "week":
        monday = today - timedelta(days=today.weekday())
        return (monday - timedelta(weeks=1), monday) if which == "last" else (monday, now)
    if unit == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)
        if which == "last" and today < saturday + timedelta(days=2):
            saturday -= timedelta(weeks=1) if today.weekday() >= 5 else timedelta(0)
        return saturday, saturday + timedelta(days=2)
    if unit == "month":
        start = _month_start(now.year, now.month - (which == "last"))
        return start, _month_start(start.year, start.month + 1) if which == "last" else now
    start = datetime(now.year - (which == "last"), 1, 1, tzinfo=timezone.utc)
    return start, datetime(start.year + 1, 1, 1, tzinfo=timezone.utc) if which == "last" else now


def _weekday(m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    target = _WEEKDAYS.index(m["weekday"].lower())
    today = _day(now)
    back = (today.weekday() - target) % 7 or 7
    start = today - timedelta(days=back)
    return start, start + timedelta(days=1)


def _named_month(m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    month = _month_number(m["month"])
    if m["year"]:
        year = int(m["year"])
    else:
        strict = (m["which"] or "").lower() in ("last", "this past", "past")
        year = (
            now.year if month < now.month or (month == now.month and not strict) else now.year - 1
        )
    start = _month_start(year, month)
    return start, _month_start(year, month + 1)


def _named_day(m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    month, day = _month_number(m["month"]), int(m["day"])
    year = int(m["year"]) if m["year"] else now.year
    try:
        start = datetime(year, month, day, tzinfo=timezone.utc)
    except ValueError:
        return _named_month(m, now)
    if not m["year"] and start > now:
        start = start.replace(year=year - 1)
    return start, start + timedelta(days=1)


def _year(m: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
    year = int(m["year"])
    return datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc)


_Rule = Callable[[re.Match[str], datetime], tuple[datetime, datetime]]


def _fixed(days_back: int, length: int = 1) -> _Rule:
    def resolve(_: re.Match[str], now: datetime) -> tuple[datetime, datetime]:
        start = _day(now) - timedelta(days=days_back)
        return start, start + timedelta(days=length)

    return resolve


_RULES = [
    (r"\bthe day before yesterday\b", _fixed(2)),
    (r"\byesterday\b|\blast night\b", _fixed(1)),
    (r"\b(?:earlier )?today\b|\bthis morning\b|\bthis afternoon\b|\btonight\b", _fixed(0)),
    (rf"\b{_NUM}\s+(?P<unit>days?|weeks?|months?|years?)\s+ago\b", _ago),
    (rf"\b(?:on |in |last |this past |past )?{_MONTH}\.?\s+{_DAY}\b(?:,?\s*{_YEAR})?", _named_day),
    (rf"\b(?:on |in )?(?:the )?{_DAY}\s+(?:of\s+)?{_MONTH}\b(?:,?\s*{_YEAR})?", _named_day),
    (rf"\b(?P<which>last|this past|past|in|during|back in|early|late|mid|earlier in)[\s-]+{_MONTH}\b(?:\s+{_YEAR})?", _named_month),  # noqa: E501
    (rf"\b(?P<which>){_MONTH}\s+{_YEAR}\b", _named_month),
    (r"\b(?:earlier )?(?P<which>last|this)\s+(?P<unit>week|weekend|month|year)\b", _relative),
    (r"\bover the (?P<which>)(?P<unit>weekend)\b", _relative),
    (r"\b(?:last |this past |on )(?P<weekday>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", _weekday),  # noqa: E501
    (rf"\b(?:in|during|back in|from|of)\s+{_YEAR}\b", _year),
]  # fmt: skip
_COMPILED = [(re.compile(p, re.IGNORECASE), fn) for p, fn in _RULES]


def resolve(question: str, *, now: datetime) -> DateRange | None:
    """The first date expression of ``question`` as a range relative to ``now``, or ``None``.

    Args:
        question: The question.
        now: The reference time (an aware datetime; a naive one is taken as UTC).
    """
    now = (now if now.tzinfo else now.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    best: tuple[int, re.Match[str], _Rule] | None = None
    for pattern, rule in _COMPILED:
        found = pattern.search(question)
        if found and (best is None or found.start() < best[0]):
            best = (found.start(), found, rule)
    if best is None:
        return None
    _, m, fn = best
    try:
        start, end = fn(m, now)
    except (KeyError, ValueError, OverflowError):
        return None
    rest = " ".join((question[: m.start()] + " " + question[m.end() :]).split())
    return DateRange(start=start, end=end, text=m.group(0).strip(), rest=rest)


def asks_about_past(question: str, *, found: DateRange | None = None) -> bool:
    """Whether ``question`` asks about an earlier time (so newer must not mean better).

    Example:
        >>> asks_about_past("When did I adopt the dog?"), asks_about_past("What's my dog's name?")
        (True, False)
    """
    return found is not None or bool(_PAST_WORDS.search(question))


_NOW_WORDS = re.compile(
    r"\b(now|currently|current|these days|nowadays|at the moment|at present|right now|"
    r"most recent|most recently|latest|newest|still|anymore|any more)\b",
    re.IGNORECASE,
)


_BEFORE_WORDS = re.compile(
    r"\b(before|previous|previously|prior|former|formerly|used to|earlier|until)\b", re.IGNORECASE
)


def asks_about_now(question: str) -> bool:
    """Whether ``question`` asks for the present state of something (and does not look back).

    Example:
        >>> asks_about_now("Where does Ana live now?"), asks_about_now("Where did Ana live?")
        (True, False)
    """
    return bool(_NOW_WORDS.search(question)) and not _BEFORE_WORDS.search(question)
