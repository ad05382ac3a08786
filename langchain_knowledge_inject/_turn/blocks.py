"""Context blocks: the pieces of the dynamic_context message and their shared token budget.

The injected message is named blocks joined by a blank line, each optional, in
the order :data:`BLOCK_ORDER`: ``[Procedure]``, ``[Retrieved Knowledge]``, ``[Past
Conversation Snippets]``, ``[User Facts]``. A provider follows :class:`ContextBlock`
(``ProcedureLibrary``, ``EpisodicMemory`` and ``UserFacts`` do).

One token budget covers all blocks (:func:`assemble_blocks`): first a block over
its own cap is shortened to fit; then, while the whole is over ``max_tokens``, the
block with the **lowest priority** is shortened (ties: the later block), so a
higher number is cut last.

Shortening removes a block's last item (a snippet, a chunk) when the block is a
:class:`BlockText` with more than one item, and drops the whole block
otherwise: items are never cut in the middle. Everything removed is reported,
for the injection manifest.

Default priorities (:data:`DEFAULT_PRIORITIES`): blocks of unknown names (user
supplied context, the knowledge-base list) 100, facts 60 (a short line about
the user), knowledge 50, procedure 40, episodic snippets 30 (cut first: the
most speculative).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langchain_knowledge_inject._store.sealing import kept_sealed
from langchain_knowledge_inject._turn.tokens import TokenCounter, approximate_token_count
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    KnowledgeInjectError,
    RetrievalError,
)

BLOCK_ORDER = ("procedure", "knowledge", "episodic", "facts")
"""The order of the named blocks in the injected message."""

BLOCK_SEPARATOR = "\n\n"
"""What joins two blocks."""

DEFAULT_PRIORITIES: Mapping[str, int] = {
    "facts": 60,
    "knowledge": 50,
    "procedure": 40,
    "episodic": 30,
}
"""Budget priority per block name (lower is cut first); other names get 100."""

_UNKNOWN_PRIORITY = 100

logger = logging.getLogger("langchain_knowledge_inject")


@runtime_checkable
class ContextBlock(Protocol):
    """A provider of one block of the injected message.

    Attributes:
        name: The block's name (``"procedure"``, ``"episodic"``, ``"facts"``).
        priority: Budget priority: when the message is over budget, the block
            with the lowest priority is shortened first.
        max_tokens: Cap for this block alone, or ``None`` for no cap.
    """

    name: str
    priority: int
    max_tokens: int | None

    def render(
        self,
        *,
        query: str,
        messages: Sequence[BaseMessage],
        config: RunnableConfig | None = None,
    ) -> str | None:
        """The block's text for this turn, or ``None`` when it has nothing to add.

        Args:
            query: The text of the current user message.
            messages: The visible history, current user message included.
            config: The run's config (user id in ``config["configurable"]``).
        """
        ...

    async def arender(
        self,
        *,
        query: str,
        messages: Sequence[BaseMessage],
        config: RunnableConfig | None = None,
    ) -> str | None:
        """Async twin of :meth:`render`."""
        ...


class BlockText(str):
    r"""The text of a block made of items, which :func:`assemble_blocks` can shorten.

    It is a ``str`` (the rendered text of all its items) that also remembers
    its items and how to render a prefix of them.

    Attributes:
        items: The block's items, best first.

    Example:
        >>> text = BlockText.build(["a", "b"], lambda xs: "[H]\n" + "\n".join(xs))
        >>> text.keep(1)
        '[H]\na'
    """

    items: tuple[Any, ...]
    _render: Callable[[Sequence[Any]], str | None]

    @classmethod
    def build(
        cls, items: Sequence[Any], render: Callable[[Sequence[Any]], str | None]
    ) -> BlockText | None:
        """Render ``items``; ``None`` when there are none or the text is empty."""
        text = render(items) if items else None
        if not text:
            return None
        obj = super().__new__(cls, text)
        obj.items = tuple(items)
        obj._render = render
        return obj

    def keep(self, count: int) -> BlockText | None:
        """The block rendered with its first ``count`` items only (``None`` for 0)."""
        return BlockText.build(self.items[: max(count, 0)], self._render)


def config_user_id(config: RunnableConfig | None, *, key: str = "user_id") -> str | None:
    """The user id of a run: ``config["configurable"][key]`` as a non-empty string, or ``None``.

    Example:
        >>> config_user_id({"configurable": {"user_id": "u1"}})
        'u1'
    """
    value = ((config or {}).get("configurable") or {}).get(key)
    return (str(value).strip() or None) if value is not None else None


def assemble_blocks(
    parts: Sequence[tuple[str, str | None]],
    *,
    max_tokens: int | None = None,
    caps: Mapping[str, int | None] | None = None,
    priorities: Mapping[str, int] | None = None,
    counter: TokenCounter = approximate_token_count,
    separator: str = BLOCK_SEPARATOR,
) -> tuple[str | None, list[dict[str, Any]]]:
    r"""Join the blocks in the given order, within their caps and the shared budget.

    Args:
        parts: ``(name, text)`` pairs in message order (see :data:`BLOCK_ORDER`);
            a ``None`` or blank text means the block is absent. A
            :class:`BlockText` can be shortened item by item; a plain string is
            kept whole or dropped.
        max_tokens: Budget of the joined text; ``None`` for no budget.
        caps: Cap per block name; a missing name or ``None`` means no cap.
        priorities: Priority per block name, overriding :data:`DEFAULT_PRIORITIES`.
        counter: Counts the tokens of a text.
        separator: What joins two blocks (a blank line by default).

    Returns:
        The joined text (``None`` when nothing is left) and one record per
        shortened block: ``block`` (name), ``reason`` (``"block_cap"`` or
        ``"token_budget"``), ``removed`` (items removed), ``kept`` (items left)
        and ``dropped`` (whether the whole block went).

    Raises:
        ConfigurationError: ``max_tokens`` or a cap is below 1.

    Example:
        >>> snippets = BlockText.build(["s1 " * 20, "s2 " * 20], lambda xs: "\n".join(xs))
        >>> text, cuts = assemble_blocks(
        ...     [("knowledge", "K " * 30), ("episodic", snippets)], max_tokens=80)
        >>> cuts[0]["block"], cuts[0]["kept"]
        ('episodic', 1)
    """
    if max_tokens is not None and max_tokens < 1:
        msg = f"max_tokens must be at least 1 or None, got {max_tokens!r}"
        raise ConfigurationError(msg, option="max_tokens", value=max_tokens)
    caps = caps or {}
    prio = {**DEFAULT_PRIORITIES, **(priorities or {})}
    current: list[tuple[str, str | None]] = [
        (name, text if text and text.strip() else None) for name, text in parts
    ]
    cuts: dict[tuple[int, str], dict[str, Any]] = {}

    for i, (name, text) in enumerate(current):
        cap = caps.get(name)
        if cap is not None and cap < 1:
            msg = f"the cap of block {name!r} must be at least 1 or None, got {cap!r}"
            raise ConfigurationError(msg, option="caps", value=dict(caps))
        while text is not None and cap is not None and counter(text) > cap:
            text = _shorten(i, name, text, "block_cap", cuts)
        current[i] = (name, text)

    while max_tokens is not None and counter(join_blocks(current, separator)) > max_tokens:
        present = [
            (prio.get(name, _UNKNOWN_PRIORITY), -i) for i, (name, t) in enumerate(current) if t
        ]
        if not present:
            break
        i = -min(present)[1]
        name, text = current[i]
        current[i] = (name, _shorten(i, name, text, "token_budget", cuts))  # type: ignore[arg-type]

    return join_blocks(current, separator) or None, list(cuts.values())


_RESERVED_NAMES = frozenset({"knowledge", "kb_meta", "extra"})


def check_blocks(blocks: Sequence[ContextBlock] | None) -> tuple[ContextBlock, ...]:
    """Validate block providers and sort them into message order (``None``: no block).

    Blocks named in :data:`BLOCK_ORDER` take their place there; other names
    follow ``"facts"`` in the given order.

    Raises:
        ConfigurationError: Not a sequence of :class:`ContextBlock`, a name that is
            empty, reserved (``knowledge``, ``kb_meta``, ``extra``) or repeated.
    """
    if blocks is None:
        return ()
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Sequence):
        msg = "blocks must be a sequence of ContextBlock (ProcedureLibrary, EpisodicMemory, ...)"
        raise ConfigurationError(msg, option="blocks", value=blocks)
    names: list[str] = []
    for block in blocks:
        if not isinstance(block, ContextBlock):
            msg = (
                "each block must follow the ContextBlock protocol (name, priority, max_tokens, "
                f"render, arender), got {type(block).__name__}"
            )
            raise ConfigurationError(msg, option="blocks", value=block)
        name = block.name
        if not isinstance(name, str) or not name.strip() or name in _RESERVED_NAMES:
            msg = (
                "a block name must be a non-empty string other than knowledge, kb_meta and "
                f"extra, got {name!r}"
            )
            raise ConfigurationError(msg, option="blocks", value=name)
        if name in names:
            msg = f"two blocks are named {name!r}; give each block its own name"
            raise ConfigurationError(msg, option="blocks", value=name)
        names.append(name)
    return tuple(sorted(blocks, key=lambda b: block_rank(b.name)))


def block_rank(name: str, order: Sequence[str] | None = None) -> int:
    """Position of a block name in ``order`` or :data:`BLOCK_ORDER` (unknown names: last)."""
    order = tuple(order) if order else BLOCK_ORDER
    return order.index(name) if name in order else len(order)


def render_blocks(
    blocks: Sequence[ContextBlock],
    *,
    query: str,
    messages: Sequence[BaseMessage],
    config: RunnableConfig | None,
    on_error: str,
) -> tuple[list[tuple[str, str | None]], list[dict[str, Any]]]:
    """Render each block: ``(name, text)`` pairs and one error record per failed block."""
    parts: list[tuple[str, str | None]] = []
    errors: list[dict[str, Any]] = []
    for block in blocks:
        try:
            with kept_sealed():  # a block reads knowledge bases as a surface: sealed stays sealed
                text = block.render(query=query, messages=messages, config=config)
        except Exception as exc:
            errors.append(_block_failed(block.name, exc, on_error))
            text = None
        parts.append((block.name, text))
    return parts, errors


async def arender_blocks(
    blocks: Sequence[ContextBlock],
    *,
    query: str,
    messages: Sequence[BaseMessage],
    config: RunnableConfig | None,
    on_error: str,
) -> tuple[list[tuple[str, str | None]], list[dict[str, Any]]]:
    """Async twin of :func:`render_blocks`: the blocks render concurrently."""
    with kept_sealed():  # the tasks gather starts copy this context
        results = await asyncio.gather(
            *(b.arender(query=query, messages=messages, config=config) for b in blocks),
            return_exceptions=True,
        )
    parts: list[tuple[str, str | None]] = []
    errors: list[dict[str, Any]] = []
    for block, result in zip(blocks, results, strict=True):
        text: str | None
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):  # cancellation and the like
                raise result
            errors.append(_block_failed(block.name, result, on_error))
            text = None
        else:
            text = result
        parts.append((block.name, text))
    return parts, errors


def _block_failed(
    name: str, exc: Exception, on_error: str, *, action: str = "rendering"
) -> dict[str, Any]:
    """A failed block: raise (``on_error="raise"``) or log it and return its error record."""
    if on_error == "raise":
        if isinstance(exc, KnowledgeInjectError):
            raise exc
        msg = f"Context block {name!r} failed ({action}): {exc}"
        raise RetrievalError(msg) from exc
    logger.warning("context block %r failed (%s), continuing without it: %s", name, action, exc)
    return {"block": name, "reason": "error", "error": f"{type(exc).__name__}: {exc}"}


def record_blocks_turn(
    blocks: Sequence[ContextBlock],
    messages: Sequence[BaseMessage],
    *,
    config: RunnableConfig | None,
    on_error: str,
) -> list[str]:
    """Call ``record_turn`` of each block that has one; the ids of what was stored."""
    ids: list[str] = []
    for block in blocks:
        record = getattr(block, "record_turn", None)
        if callable(record):
            try:
                episode = record(messages, config=config)
            except Exception as exc:
                _block_failed(block.name, exc, on_error, action="recording the turn")
                continue
            ids += [episode] if episode else []
    return ids


async def arecord_blocks_turn(
    blocks: Sequence[ContextBlock],
    messages: Sequence[BaseMessage],
    *,
    config: RunnableConfig | None,
    on_error: str,
) -> list[str]:
    """Async twin of :func:`record_blocks_turn` (``arecord_turn`` of each block)."""
    ids: list[str] = []
    for block in blocks:
        record = getattr(block, "arecord_turn", None)
        if callable(record):
            try:
                episode = await record(messages, config=config)
            except Exception as exc:
                _block_failed(block.name, exc, on_error, action="recording the turn")
                continue
            ids += [episode] if episode else []
    return ids


def block_names(parts: Sequence[tuple[str, str | None]]) -> list[str]:
    """Names of the blocks that have text, in order."""
    return [name for name, text in parts if text and text.strip()]


def surviving_blocks(
    parts: Sequence[tuple[str, str | None]], cuts: Sequence[dict[str, Any]]
) -> list[str]:
    """Names of the blocks left by :func:`assemble_blocks` (same name: the later one went)."""
    names = block_names(parts)
    for cut in cuts:
        if cut["dropped"] and cut["block"] in names:
            del names[len(names) - 1 - names[::-1].index(cut["block"])]
    return names


def check_layout(order: Sequence[str] | None, separator: str) -> tuple[tuple[str, ...] | None, str]:
    """Validate a ``block_order`` (distinct names) and a ``block_separator`` (non-empty).

    Raises:
        ConfigurationError: Either is not allowed.
    """
    if order is not None and (
        isinstance(order, str)
        or not all(isinstance(n, str) and n for n in order)
        or len(set(order)) != len(order)
    ):
        msg = "block_order must be a sequence of distinct block names (e.g. ['facts', 'knowledge'])"
        raise ConfigurationError(msg, option="block_order", value=order)
    if not isinstance(separator, str) or not separator:
        msg = "block_separator must be a non-empty string"
        raise ConfigurationError(msg, option="block_separator", value=separator)
    return (tuple(order) if order is not None else None), separator


def join_blocks(parts: Sequence[tuple[str, str | None]], separator: str = BLOCK_SEPARATOR) -> str:
    """Join the non-empty blocks with a blank line (or ``separator``)."""
    return separator.join(text for _, text in parts if text)


def _shorten(
    index: int, name: str, text: str, reason: str, cuts: dict[tuple[int, str], dict[str, Any]]
) -> str | None:
    count = len(text.items) if isinstance(text, BlockText) else 1
    shorter = text.keep(count - 1) if isinstance(text, BlockText) and count > 1 else None
    record = cuts.setdefault(
        (index, reason), {"block": name, "reason": reason, "removed": 0, "kept": count}
    )
    record["removed"] += count if shorter is None else 1
    record["kept"] = 0 if shorter is None else count - 1
    record["dropped"] = shorter is None
    return shorter
