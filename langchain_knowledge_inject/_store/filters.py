"""Metadata filters, in Chroma's ``where`` language, checked before they reach Chroma.

A filter is plain equality (``{"category": "hr"}``, several keys meaning all of
them) or Chroma's operators: ``$eq``, ``$ne``, ``$in``, ``$nin``, ``$gt``, ``$gte``,
``$lt``, ``$lte``, ``$and``, ``$or``. Both sides of a search hand it to Chroma
(:func:`to_chroma`); :func:`matches` applies it to metadata held in memory.
``tenant_id`` is no metadata filter: it selects the tenant partition
(:func:`split_tenant`). A wrong shape, an unknown operator, a value of the wrong
type, a filter nested deeper than :data:`MAX_FILTER_DEPTH` or larger than
:data:`MAX_FILTER_CLAUSES` raises :class:`ConfigurationError` naming what is
allowed (checked without recursion), never a raw Python or chromadb error.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

from langchain_knowledge_inject.errors import ConfigurationError

_ORDERED = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}
_COMPARISONS = {"$eq", "$ne", "$in", "$nin", *_ORDERED}
_LOGICAL = {"$and", "$or"}

MAX_FILTER_DEPTH = 32
"""Deepest nesting of ``$and`` / ``$or`` a filter may have."""
MAX_FILTER_CLAUSES = 1000
"""Most conditions and lists items one filter may hold."""


def split_tenant(
    filter: Mapping[str, Any] | None, tenant_id: str | None
) -> tuple[str | None, dict[str, Any] | None]:
    """Separate the tenant (or None) from the rest of a filter (or None when empty), checked.

    Raises:
        ConfigurationError: A filter that is not allowed, or a tenant that is not one
            string or disagrees with ``tenant_id``.
    """
    if filter is not None and not isinstance(filter, Mapping):
        msg = (
            "filter must be a dict in Chroma's where language (for example "
            f"{{'category': 'hr'}}) or None, got {type(filter).__name__}"
        )
        raise ConfigurationError(msg, option="filter", value=_short(filter))
    rest = dict(filter or {})
    raw = rest.pop("tenant_id", None)
    if isinstance(raw, Mapping) and set(raw) == {"$eq"}:
        raw = raw["$eq"]
    if raw is not None and not isinstance(raw, str):
        msg = (
            "filter['tenant_id'] must be one tenant id (a string); a search reads exactly "
            f"one tenant partition, got {raw!r}"
        )
        raise ConfigurationError(msg, option="filter", value=filter)
    if raw is not None and tenant_id is not None and raw != tenant_id:
        msg = f"tenant_id={tenant_id!r} disagrees with filter['tenant_id']={raw!r}"
        raise ConfigurationError(msg, option="tenant_id", value=tenant_id)
    tenant = tenant_id if tenant_id is not None else raw
    if tenant is not None and not isinstance(tenant, str):
        msg = f"tenant_id must be a string or None, got {tenant!r}"
        raise ConfigurationError(msg, option="tenant_id", value=tenant)
    validate(rest)
    return tenant, (rest or None)


def _refuse(message: str, where: Any) -> ConfigurationError:
    return ConfigurationError(message, option="filter", value=_short(where))


def validate(where: Mapping[str, Any]) -> None:
    """Raise ConfigurationError when ``where`` is not a filter this module understands."""
    clauses, stack = 0, [(where, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_FILTER_DEPTH:
            raise _refuse(
                f"filter is nested deeper than {MAX_FILTER_DEPTH} levels of $and/$or", where
            )
        for key, value in node.items():
            clauses += 1 + (len(value) if isinstance(value, (list, tuple)) else 0)
            if clauses > MAX_FILTER_CLAUSES:
                raise _refuse(
                    f"filter has more than {MAX_FILTER_CLAUSES} conditions and list items", where
                )
            if not isinstance(key, str) or not key:
                raise _refuse(f"filter keys must be non-empty strings, got {key!r}", where)
            if key in _LOGICAL:
                if not isinstance(value, list) or not value:
                    raise _refuse(
                        f"{key} takes a non-empty list of filters, got {_short(value)!r}", where
                    )
                for sub in value:
                    if not isinstance(sub, Mapping) or not sub:
                        raise _refuse(
                            f"{key} takes a list of non-empty filters (dicts), got {_short(sub)!r}",
                            where,
                        )
                    stack.append((sub, depth + 1))
            elif key.startswith("$"):
                allowed = ", ".join(sorted(_LOGICAL))
                raise _refuse(
                    f"Unknown filter operator {key!r} at the top level; allowed: {allowed}", where
                )
            elif isinstance(value, Mapping):
                if set(value) - _COMPARISONS or len(value) != 1:
                    allowed = ", ".join(sorted(_COMPARISONS))
                    raise _refuse(
                        f"Filter on {key!r} must be one of {allowed}, got {_short(value)!r}", where
                    )
                _check_operand(key, *next(iter(value.items())), where)
            else:
                _check_operand(key, "$eq", value, where)


def _check_operand(key: str, op: str, target: Any, where: Mapping[str, Any]) -> None:
    def scalar(value: Any) -> bool:
        return isinstance(value, (str, int, float, bool)) and value == value

    if op in ("$in", "$nin"):
        ok = isinstance(target, list) and bool(target) and all(map(scalar, target))
        allowed = "a non-empty list of strings, numbers or booleans"
    elif op in _ORDERED:
        ok, allowed = isinstance(target, (int, float)) and not isinstance(target, bool), "a number"
    else:
        ok, allowed = scalar(target), "a string, number or boolean"
    if not ok:
        raise _refuse(f"Filter {op} on {key!r} takes {allowed}, got {_short(target)!r}", where)


def _short(value: Any, limit: int = 200) -> Any:
    """A value small enough to carry in an error: long or deep ones become a cut repr."""
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "..."
    try:
        text = repr(value)
    except RecursionError:
        text = f"<{type(value).__name__} nested too deep to show>"
    return text if len(text) <= limit else text[:limit] + "..."


def to_chroma(where: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A (validated) filter as Chroma's ``where``: several keys make an ``$and``."""
    if not where:
        return None
    clauses = []
    for key, value in where.items():
        if key in _LOGICAL:
            subs = [to_chroma(sub) for sub in value]
            clauses.append(subs[0] if len(subs) == 1 else {key: subs})
        else:
            clauses.append({key: dict(value) if isinstance(value, Mapping) else {"$eq": value}})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def matches(metadata: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    """Whether chunk ``metadata`` satisfies the filter ``where``."""
    for key, cond in (where or {}).items():
        if key in _LOGICAL:
            if not (all if key == "$and" else any)(matches(metadata, sub) for sub in cond):
                return False
        elif not _compare(metadata.get(key), cond if isinstance(cond, Mapping) else {"$eq": cond}):
            return False
    return True


def _compare(value: Any, cond: Mapping[str, Any]) -> bool:
    ((op, target),) = cond.items()
    if op in ("$eq", "$ne"):
        return (value == target) == (op == "$eq")
    if op in ("$in", "$nin"):
        return (value in target) == (op == "$in")
    try:
        return value is not None and bool(_ORDERED[op](value, target))
    except TypeError:
        return False
