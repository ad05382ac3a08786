"""User facts: ``key=value`` facts per user in a LangGraph store, injected as one line.

Any LangGraph ``BaseStore`` holds them: one namespace ``(*namespace_prefix, <user
id>)`` per user, one item ``{"value", "updated_at"}`` per fact. Without a user id
in ``config["configurable"]`` nothing is read or written. The block is
``[User Facts]`` and the facts sorted by key on one line; values are put on one
line and neutralized (no header or role label can be imitated). Restricted
mode: the user's own data, injected as usual.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar, cast

from langgraph.store.base import GetOp, PutOp, SearchOp

from langchain_knowledge_inject._memory import require, user_key
from langchain_knowledge_inject._turn.blocks import DEFAULT_PRIORITIES, config_user_id
from langchain_knowledge_inject._turn.formatting import neutralize
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Generator

    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.store.base import BaseStore, Op

    Steps: TypeAlias = Generator[list[Op], list[Any], "T"]
    """An operation on the store, as a generator of batches of store operations."""


_KEY_CHARS = re.compile(r"[^a-z0-9_]+")
_MAX_KEY_CHARS = 64
_LIST_LIMIT = 1000
T = TypeVar("T")


@dataclass(frozen=True)
class UserFact:
    """One stored fact: its normalized key, its value (one line), when it was set (UTC)."""

    key: str
    value: str
    updated_at: datetime | None = None


def normalize_fact_key(key: str) -> str:
    """Normalize a fact key: lowercase, ``[a-z0-9_]`` only, at most 64 characters.

    Raises:
        ConfigurationError: Nothing is left of the key.

    Example:
        >>> normalize_fact_key("Favourite Drink")
        'favourite_drink'
    """
    normalized = _KEY_CHARS.sub("_", str(key).strip().lower()).strip("_")[:_MAX_KEY_CHARS]
    if not normalized:
        msg = "a fact key needs at least one letter or digit"
        raise ConfigurationError(msg, option="key", value=key)
    return normalized


def format_user_facts(
    facts: Mapping[str, str], *, style: Literal["block", "inline"] = "block"
) -> str | None:
    """Render facts as the ``[User Facts]`` block (``None`` when there are none).

    ``style="inline"`` renders Shepherd's one line ``[facts: key=value, key=value]``.

    Example:
        >>> print(format_user_facts({"name": "Ana", "city": "Lisbon"}))
        [User Facts]
        city=Lisbon; name=Ana
        >>> format_user_facts({"name": "Ana", "city": "Lisbon"}, style="inline")
        '[facts: city=Lisbon, name=Ana]'
    """
    if not facts:
        return None
    if style == "inline":
        return "[facts: " + ", ".join(f"{key}={facts[key]}" for key in sorted(facts)) + "]"
    line = "; ".join(f"{key}={facts[key]}" for key in sorted(facts))
    return f"[User Facts]\n{line}"


class UserFacts:
    r"""Per-user ``key=value`` facts in a LangGraph store (a ``ContextBlock``).

    Args:
        store: Any LangGraph ``BaseStore``.
        namespace_prefix: Namespace labels before the user id.
        user_id_key: Key of the user id in ``config["configurable"]``.
        max_facts: Most facts kept per user; setting a new key beyond it is refused.
        max_value_chars: Longest value accepted.
        priority: Budget priority of the block (see :mod:`~._turn.blocks`).
        max_tokens: Cap of the block, or ``None``.
        style: ``"block"`` (``[User Facts]`` and a line of facts) or ``"inline"``
            (Shepherd's ``[facts: key=value, key=value]``).

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> facts = UserFacts(InMemoryStore())
        >>> _ = facts.set("u1", "City", "Lisbon")
        >>> facts.render(query="hi", messages=[], config={"configurable": {"user_id": "u1"}})
        '[User Facts]\ncity=Lisbon'
        >>> facts.render(query="hi", messages=[], config={"configurable": {"user_id": "u2"}})
    """

    name = "facts"

    def __init__(
        self,
        store: BaseStore,
        *,
        namespace_prefix: Sequence[str] = ("user_facts",),
        user_id_key: str = "user_id",
        max_facts: int = 50,
        max_value_chars: int = 200,
        priority: int = DEFAULT_PRIORITIES["facts"],
        max_tokens: int | None = None,
        style: Literal["block", "inline"] = "block",
    ) -> None:
        prefix = tuple(namespace_prefix)
        labels = bool(prefix) and all(isinstance(p, str) and p and "." not in p for p in prefix)
        require([
            ("style", style, style in ("block", "inline"), "'block' or 'inline'"),
            ("namespace_prefix", namespace_prefix, labels, "non-empty labels without '.'"),
            ("max_facts", max_facts, max_facts >= 1, "at least 1"),
            ("max_value_chars", max_value_chars, max_value_chars >= 1, "at least 1"),
            ("max_tokens", max_tokens, max_tokens is None or max_tokens >= 1, "at least 1 or None"),
        ])  # fmt: skip
        self.store, self.namespace_prefix, self.user_id_key = store, prefix, user_id_key
        self.max_facts, self.max_value_chars, self.style = max_facts, max_value_chars, style
        self.priority, self.max_tokens = priority, max_tokens

    def namespace(self, user_id: str) -> tuple[str, ...]:
        """The store namespace of ``user_id`` (``.`` and ``%`` are percent-encoded)."""
        label = user_key(user_id)
        return (*self.namespace_prefix, label.replace("%", "%25").replace(".", "%2E"))

    def _clean_value(self, value: str) -> str:
        text = " ".join(neutralize(str(value)).split())
        require([
            ("value", value, bool(text), "a non-empty text (use forget to remove a fact)"),
            ("value", text[:80], len(text) <= self.max_value_chars,
             f"at most {self.max_value_chars} characters"),
        ])  # fmt: skip
        return text

    # Each operation is one generator yielding the store operations it needs; ``_run``
    # runs them with ``store.batch``, ``_arun`` with ``store.abatch``.
    def _run(self, steps: Steps[T]) -> T:
        try:
            ops = next(steps)
            while True:
                ops = steps.send(self.store.batch(ops))
        except StopIteration as done:
            return cast("T", done.value)

    async def _arun(self, steps: Steps[T]) -> T:
        try:
            ops = next(steps)
            while True:
                ops = steps.send(await self.store.abatch(ops))
        except StopIteration as done:
            return cast("T", done.value)

    def _get_all(self, user_id: str) -> Steps[dict[str, str]]:
        namespace = self.namespace(user_id)
        [items] = yield [SearchOp(namespace, limit=_LIST_LIMIT)]
        return {
            item.key: str(item.value.get("value", ""))
            for item in items
            if tuple(item.namespace) == namespace and item.value.get("value")
        }

    def _set(self, user_id: str, key: str, value: str) -> Steps[UserFact]:
        namespace = self.namespace(user_id)
        fact = UserFact(
            normalize_fact_key(key), self._clean_value(value), datetime.now(timezone.utc)
        )
        existing = yield from self._get_all(user_id)
        if fact.key not in existing and len(existing) >= self.max_facts:
            msg = f"at most {self.max_facts} facts are kept per user; forget one first"
            raise ConfigurationError(msg, option="max_facts", value=self.max_facts)
        stamp = fact.updated_at.isoformat() if fact.updated_at else ""
        yield [PutOp(namespace, fact.key, {"value": fact.value, "updated_at": stamp})]
        return fact

    def _forget(self, user_id: str, key: str) -> Steps[bool]:
        namespace, normalized = self.namespace(user_id), normalize_fact_key(key)
        found, _ = yield [GetOp(namespace, normalized), PutOp(namespace, normalized, None)]
        return found is not None

    def _clear(self, user_id: str) -> Steps[int]:
        namespace = self.namespace(user_id)
        keys = list((yield from self._get_all(user_id)))
        if keys:
            yield [PutOp(namespace, key, None) for key in keys]
        return len(keys)

    def get_all(self, user_id: str) -> dict[str, str]:
        """Every fact of ``user_id``, as ``{key: value}``."""
        return self._run(self._get_all(user_id))

    async def aget_all(self, user_id: str) -> dict[str, str]:
        """Async twin of :meth:`get_all`."""
        return await self._arun(self._get_all(user_id))

    def set(self, user_id: str, key: str, value: str) -> UserFact:
        """Set (or replace) a fact of ``user_id``.

        Raises:
            ConfigurationError: Invalid key or value, or ``max_facts`` reached.
        """
        return self._run(self._set(user_id, key, value))

    async def aset(self, user_id: str, key: str, value: str) -> UserFact:
        """Async twin of :meth:`set`."""
        return await self._arun(self._set(user_id, key, value))

    def forget(self, user_id: str, key: str) -> bool:
        """Remove a fact; ``True`` when it existed."""
        return self._run(self._forget(user_id, key))

    async def aforget(self, user_id: str, key: str) -> bool:
        """Async twin of :meth:`forget`."""
        return await self._arun(self._forget(user_id, key))

    def clear(self, user_id: str) -> int:
        """Remove every fact of ``user_id``; returns how many there were."""
        return self._run(self._clear(user_id))

    async def aclear(self, user_id: str) -> int:
        """Async twin of :meth:`clear`."""
        return await self._arun(self._clear(user_id))

    # -- the block -------------------------------------------------------------------------
    def _block(self, config: RunnableConfig | None) -> Steps[str | None]:
        user_id = config_user_id(config, key=self.user_id_key)
        if not user_id:
            return None
        return format_user_facts((yield from self._get_all(user_id)), style=self.style)

    def render(
        self,
        *,
        query: str = "",
        messages: Sequence[BaseMessage] = (),
        config: RunnableConfig | None = None,
    ) -> str | None:
        """The ``[User Facts]`` block of the run's user, or ``None`` (no user id, no facts)."""
        return self._run(self._block(config))

    async def arender(
        self,
        *,
        query: str = "",
        messages: Sequence[BaseMessage] = (),
        config: RunnableConfig | None = None,
    ) -> str | None:
        """Async twin of :meth:`render`."""
        return await self._arun(self._block(config))
