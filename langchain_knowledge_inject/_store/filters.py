"""Metadata filters, in Chroma's ``where`` language, for both sides of a search.

A filter is either plain equality (``{"category": "hr"}``, several keys meaning
all of them) or Chroma's operators: ``$eq``, ``$ne``, ``$in``, ``$nin``,
``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$and``, ``$or``. The dense side hands
the filter to Chroma; the keyword side applies the same filter to the chunk
metadata in the registry with :func:`matches`.

``tenant_id`` is not a metadata filter here: it selects the tenant partition
(one Chroma collection per tenant), see :func:`split_tenant`.

Every filter is validated before it reaches Chroma or :func:`matches`, without
recursion: a wrong shape, an unknown operator, a value of the wrong type, a
filter nested deeper than :data:`MAX_FILTER_DEPTH` or larger than
:data:`MAX_FILTER_CLAUSES` raises :class:`ConfigurationError` naming what is
allowed, never a raw Python or chromadb error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_knowledge_inject.errors import ConfigurationError

_COMPARISONS = {"$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte"}
_LOGICAL = {"$and", "$or"}
_ORDERED = {"$gt", "$gte", "$lt", "$lte"}
_LISTS = {"$in", "$nin"}

MAX_FILTER_DEPTH = 32
"""Deepest nesting of ``$and`` / ``$or`` a filter may have."""
MAX_FILTER_CLAUSES = 1000
"""Most conditions and lists items one filter may hold."""


def split_tenant(
    filter: Mapping[str, Any] | None, tenant_id: str | None
) -> tuple[str | None, dict[str, Any] | None]:
    """Separate the tenant from the rest of a filter.

    Args:
        filter: A metadata filter that may hold ``tenant_id``.
        tenant_id: The tenant given as an argument.

    Returns:
        The tenant (or None) and the remaining filter (or None when empty).

    Raises:
        ConfigurationError: The filter's tenant is not a plain string, or it
            disagrees with ``tenant_id``.
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


def validate(where: Mapping[str, Any]) -> None:
    """Raise ConfigurationError when ``where`` is not a filter this module understands.

    Iterative, so a filter nested thousands deep is refused with a clear error
    rather than a ``RecursionError``.
    """
    clauses = 0
    stack: list[tuple[Any, int]] = [(where, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_FILTER_DEPTH:
            msg = f"filter is nested deeper than {MAX_FILTER_DEPTH} levels of $and/$or"
            raise ConfigurationError(msg, option="filter", value=_short(where))
        for key, value in node.items():
            clauses += 1 + (len(value) if isinstance(value, (list, tuple)) else 0)
            if clauses > MAX_FILTER_CLAUSES:
                msg = f"filter has more than {MAX_FILTER_CLAUSES} conditions and list items"
                raise ConfigurationError(msg, option="filter", value=_short(where))
            if not isinstance(key, str) or not key:
                msg = f"filter keys must be non-empty strings, got {key!r}"
                raise ConfigurationError(msg, option="filter", value=_short(where))
            if key in _LOGICAL:
                if not isinstance(value, list) or not value:
                    msg = f"{key} takes a non-empty list of filters, got {_short(value)!r}"
                    raise ConfigurationError(msg, option="filter", value=_short(where))
                for sub in value:
                    if not isinstance(sub, Mapping) or not sub:
                        msg = (
                            f"{key} takes a list of non-empty filters (dicts), got {_short(sub)!r}"
                        )
                        raise ConfigurationError(msg, option="filter", value=_short(where))
                    stack.append((sub, depth + 1))
            elif key.startswith("$"):
                allowed = ", ".join(sorted(_LOGICAL))
                msg = f"Unknown filter operator {key!r} at the top level; allowed: {allowed}"
                raise ConfigurationError(msg, option="filter", value=_short(where))
            elif isinstance(value, Mapping):
                unknown = set(value) - _COMPARISONS
                if unknown or len(value) != 1:
                    allowed = ", ".join(sorted(_COMPARISONS))
                    msg = f"Filter on {key!r} must be one of {allowed}, got {_short(value)!r}"
                    raise ConfigurationError(msg, option="filter", value=_short(where))
                ((op, target),) = value.items()
                _check_operand(key, op, target, where)
            else:
                _check_operand(key, "$eq", value, where)


def _check_operand(key: str, op: str, target: Any, where: Mapping[str, Any]) -> None:
    if op in _LISTS:
        ok = isinstance(target, list) and bool(target) and all(_scalar(t) for t in target)
        allowed = "a non-empty list of strings, numbers or booleans"
    elif op in _ORDERED:
        ok = isinstance(target, (int, float)) and not isinstance(target, bool)
        allowed = "a number"
    else:
        ok = _scalar(target)
        allowed = "a string, number or boolean"
    if not ok:
        msg = f"Filter {op} on {key!r} takes {allowed}, got {_short(target)!r}"
        raise ConfigurationError(msg, option="filter", value=_short(where))


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool)) and value == value


def _short(value: Any, limit: int = 200) -> Any:
    """A value small enough to carry in an error: long or deep ones become a cut repr."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value if not isinstance(value, str) or len(value) <= limit else value[:limit] + "..."
    try:
        text = repr(value)
    except RecursionError:
        text = f"<{type(value).__name__} nested too deep to show>"
    return text if len(text) <= limit else text[:limit] + "..."


def to_chroma(where: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Turn a (validated) filter into Chroma's ``where``.

    Several keys become an ``$and``; an ``$and`` / ``$or`` of one filter becomes
    that filter (Chroma wants at least two).
    """
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
    if not where:
        return True
    for key, cond in where.items():
        if key == "$and":
            if not all(matches(metadata, sub) for sub in cond):
                return False
        elif key == "$or":
            if not any(matches(metadata, sub) for sub in cond):
                return False
        elif not _compare(metadata.get(key), cond):
            return False
    return True


def _compare(value: Any, cond: Any) -> bool:
    if not isinstance(cond, Mapping):
        return value == cond
    ((op, target),) = cond.items()
    if op == "$eq":
        return value == target
    if op == "$ne":
        return value != target
    if op == "$in":
        return value in target
    if op == "$nin":
        return value not in target
    if value is None:
        return False
    try:
        if op == "$gt":
            return value > target
        if op == "$gte":
            return value >= target
        if op == "$lt":
            return value < target
        return value <= target
    except TypeError:
        return False
