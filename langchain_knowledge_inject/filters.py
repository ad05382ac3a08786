"""Metadata filters, in Chroma's ``where`` language, for both sides of a search.

A filter is either plain equality (``{"category": "hr"}``, several keys meaning
all of them) or Chroma's operators: ``$eq``, ``$ne``, ``$in``, ``$nin``,
``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$and``, ``$or``. The dense side hands
the filter to Chroma; the keyword side applies the same filter to the chunk
metadata in the registry with :func:`matches`.

``tenant_id`` is not a metadata filter here: it selects the tenant partition
(one Chroma collection per tenant), see :func:`split_tenant`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_knowledge_inject.errors import ConfigurationError

_COMPARISONS = {"$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte"}
_LOGICAL = {"$and", "$or"}


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
    """Raise ConfigurationError when ``where`` is not a filter this module understands."""
    for key, value in where.items():
        if key in _LOGICAL:
            if not isinstance(value, list) or not value:
                msg = f"{key} takes a non-empty list of filters, got {value!r}"
                raise ConfigurationError(msg, option="filter", value=where)
            for sub in value:
                if not isinstance(sub, Mapping):
                    msg = f"{key} takes a list of filters (dicts), got {sub!r}"
                    raise ConfigurationError(msg, option="filter", value=where)
                validate(sub)
        elif key.startswith("$"):
            allowed = ", ".join(sorted(_LOGICAL))
            msg = f"Unknown filter operator {key!r} at the top level; allowed: {allowed}"
            raise ConfigurationError(msg, option="filter", value=where)
        elif isinstance(value, Mapping):
            unknown = set(value) - _COMPARISONS
            if unknown or len(value) != 1:
                allowed = ", ".join(sorted(_COMPARISONS))
                msg = f"Filter on {key!r} must be one of {allowed}, got {dict(value)!r}"
                raise ConfigurationError(msg, option="filter", value=where)


def to_chroma(where: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Turn a filter into Chroma's ``where`` (several keys become an ``$and``)."""
    if not where:
        return None
    clauses = [
        {k: v} if k in _LOGICAL else {k: dict(v) if isinstance(v, Mapping) else {"$eq": v}}
        for k, v in where.items()
    ]
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
