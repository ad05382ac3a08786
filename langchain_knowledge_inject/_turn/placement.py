"""Where the injected context goes, how injected content is marked, and how it is removed.

The four placements (``"current_message"``, the default, ``"dynamic_context"``,
``"postfix"``, ``"system"``) and what each costs a provider's prefix cache are in
docs/injection.md. Every injected message carries ``additional_kwargs[INJECTED_KEY]``
(a dict with at least ``placement``), which :func:`strip_injected` uses to restore
the messages exactly; a history saved as role/content dicts loses it, and then
injected content is recognized by its own text (:func:`injection_start`): a block
header on a line of its own, that block's fixed second line, blocks in their fixed
order, and position rules that keep a user's own message quoting a header.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from itertools import pairwise
from types import MappingProxyType
from typing import Any, Literal, get_args

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_knowledge_inject.errors import ConfigurationError

Placement = Literal["current_message", "dynamic_context", "postfix", "system"]
"""Where the injected context goes (see the module docstring)."""

PLACEMENTS: tuple[str, ...] = get_args(Placement)
"""The allowed placements."""

INJECTED_KEY = "knowledge_inject"
"""Key in ``additional_kwargs`` that marks a message holding injected content."""

USER_MESSAGE_LABEL = "[User Message]"
"""The text block between the knowledge and the user's own content (``"current_message"``).

It tells the model where the user's words start, and it marks that boundary in a
history whose text blocks were flattened into one string (OpenAI-style role/content
dicts join them with a newline), so :func:`strip_injected` can still cut the
knowledge off. Retrieved text that imitates it is neutralized."""

_POSTFIX_SEPARATOR = "\n\n"


INJECTION_HEADERS: Mapping[str, int] = MappingProxyType(
    {
        "[Knowledge Bases]": 0,
        "[Restricted Knowledge Bases]": 0,
        "[Procedure]": 1,
        "[Retrieved Knowledge]": 2,
        "[Restricted Knowledge Summary]": 2,
        "[Past Conversation Snippets]": 3,
        "[User Facts]": 4,
    }
)
"""The first line of each block the package injects, with its rank in the fixed
block order (knowledge-base list, procedure, knowledge, episodic snippets, facts).
Headers passed as ``headers=`` (a custom template's, a custom block's) rank after
all of these and may repeat."""

_CUSTOM_RANK = 5
# The line right after each header, as the package writes it: a quoted header
# followed by free text is not taken for a block.
_SECOND_LINES: Mapping[str, re.Pattern[str]] = {
    "[Knowledge Bases]": re.compile(r"- \S"),
    "[Restricted Knowledge Bases]": re.compile(r"Search these with knowledge_base_search\b"),
    "[Procedure]": re.compile(r"The user's request matches the procedure \""),
    "[Retrieved Knowledge]": re.compile(
        r"The information below was retrieved from the knowledge base\b|\[[^\]\n]+\] Source: "
    ),
    "[Restricted Knowledge Summary]": re.compile(r"Decision: (?:answer|refuse) \(reason: "),
    "[Past Conversation Snippets]": re.compile(
        r"Excerpts from this user's earlier conversations\b"
    ),
    "[User Facts]": re.compile(r"[^=\n]+=\S"),
}
_ANY_SECOND_LINE = re.compile(r"\S")


def injection_start(text: str, *, headers: Sequence[str] = ()) -> int | None:
    r"""Where injected content starts in ``text``, recognized by the text alone.

    Injected content is one or more blocks joined by a blank line; each block
    starts with a header line (:data:`INJECTION_HEADERS`, plus ``headers``)
    followed by the line the package writes right after that header. The
    content starts at the beginning of ``text`` or right after a blank line
    and runs to the end, with its blocks in the fixed order (a custom header
    after all others). Of several possible starts, the earliest is taken whose
    blocks are all in order, so a header quoted earlier in the text is kept.

    Args:
        text: A message text.
        headers: Extra header lines to recognize: a custom
            :class:`~langchain_knowledge_inject._turn.formatting.KnowledgeBlockTemplate`
            header or a custom block's. Any non-blank second line is accepted
            after them.

    Returns:
        The index of the first character of the injected content (``0`` when the
        whole text is injected), or ``None`` when there is none.

    Example:
        >>> injection_start("Hi")
        >>> text = "Leave?\n\n[User Facts]\ncity=Lisbon"
        >>> text[injection_start(text):]
        '[User Facts]\ncity=Lisbon'
    """
    known = (  # a package header passed again keeps its rank and accepts any second line
        {**{h: _CUSTOM_RANK for h in headers if h and h.strip()}, **INJECTION_HEADERS}
        if headers
        else INJECTION_HEADERS
    )
    starts: list[tuple[int, int]] = []
    for start in _line_starts(text):
        header_end = text.find("\n", start)
        if header_end < 0:
            break
        header = text[start:header_end]
        if header not in known:
            continue
        line_end = text.find("\n", header_end + 1)
        second = text[header_end + 1 : len(text) if line_end < 0 else line_end]
        pattern = _ANY_SECOND_LINE if header in headers else _SECOND_LINES.get(header)
        if (pattern or _ANY_SECOND_LINE).match(second):
            starts.append((start, known[header]))
    for first in range(len(starts)):
        ranks = [rank for _, rank in starts[first:]]
        if all(a < b or a == b == _CUSTOM_RANK for a, b in pairwise(ranks)):
            return starts[first][0]
    return None


def _line_starts(text: str) -> Iterator[int]:
    """Where a block may start: the beginning of the text and after every blank line."""
    yield 0
    index = text.find("\n\n")
    while index >= 0:
        yield index + 2
        index = text.find("\n\n", index + 1)  # "\n\n\n[": the block starts after the last


def _marker(message: BaseMessage) -> dict[str, Any] | None:
    marker = message.additional_kwargs.get(INJECTED_KEY)
    return marker if isinstance(marker, dict) else None


def is_injected(message: BaseMessage) -> bool:
    """Whether ``message`` is or contains injected content.

    True for an injected dynamic_context or system message, and for a user
    message with an injected postfix.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> is_injected(HumanMessage("hi"))
        False
    """
    return _marker(message) is not None


def _is_standalone_injection(message: BaseMessage) -> bool:
    marker = _marker(message)
    return marker is not None and marker.get("placement") not in ("postfix", "current_message")


def current_user_index(messages: Sequence[BaseMessage]) -> int | None:
    """Index of the current user message: the last ``HumanMessage`` that is not an injection.

    Inside a tool loop (``AI`` with tool calls, then ``Tool`` results) this is
    still the last human turn, not the latest tool result.

    Returns:
        The index, or ``None`` when there is no user message.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> current_user_index([HumanMessage("q"), AIMessage("", tool_calls=[
        ...     {"name": "t", "args": {}, "id": "1"}]), ToolMessage("r", tool_call_id="1")])
        0
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and not _is_standalone_injection(message):
            return index
    return None


def query_text(message: BaseMessage | None) -> str | None:
    """The text of a user message, used as the retrieval query.

    String content is used as is; for list (multimodal) content the text parts
    are joined by newlines and images, audio and files are ignored.

    Returns:
        The stripped text, or ``None`` when there is none.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> query_text(HumanMessage([{"type": "text", "text": "What is this?"},
        ...     {"type": "image_url", "image_url": {"url": "data:..."}}]))
        'What is this?'
    """
    if message is None:
        return None
    content = message.content
    parts = [content] if isinstance(content, str) else [_text_part(p) for p in content]
    return "\n".join(p.strip() for p in parts if p and p.strip()) or None


def _text_part(part: Any) -> str:
    """A content part's text: a string, or a ``text`` block's (other blocks: none)."""
    if isinstance(part, dict):
        return str(part.get("text", "")) if part.get("type") == "text" else ""
    return part if isinstance(part, str) else ""


def _system_insert_index(messages: Sequence[BaseMessage]) -> int:
    return next(
        (i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)), len(messages)
    )


def injection_index(messages: Sequence[BaseMessage], *, placement: Placement) -> int:
    """Where injected content goes: the length of the stable prefix before it.

    For ``"current_message"``, ``"dynamic_context"`` and ``"postfix"`` it is the index of
    the current user message (the end of the list when there is none); for ``"system"`` the
    index right after the leading system messages. The messages before this
    index are the same whether or not something is injected.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> injection_index([SystemMessage("s"), HumanMessage("q")], placement="system")
        1
    """
    _check_placement(placement)
    if placement == "system":
        return _system_insert_index(messages)
    index = current_user_index(messages)
    return len(messages) if index is None else index


def _check_placement(placement: str) -> None:
    if placement not in PLACEMENTS:
        msg = f"placement must be one of {list(PLACEMENTS)}, got {placement!r}"
        raise ConfigurationError(msg, option="placement", value=placement)


def place_context(
    messages: Sequence[BaseMessage], content: str, *, placement: Placement
) -> list[BaseMessage]:
    """Return a new message list with ``content`` injected at ``placement``.

    The input messages are never mutated; the postfix placement replaces the
    current user message by a modified copy. With no user message,
    ``"dynamic_context"`` and ``"postfix"`` append a dynamic_context message at
    the end.

    Args:
        messages: The conversation (system prompt, history, current user message).
        content: The text to inject (the dynamic_context).
        placement: ``"dynamic_context"``, ``"postfix"`` or ``"system"``.

    Returns:
        The messages to send.

    Raises:
        ConfigurationError: ``placement`` is not one of the allowed values.

    Example:
        >>> from langchain_core.messages import HumanMessage, SystemMessage
        >>> out = place_context([SystemMessage("s"), HumanMessage("q")], "[Retrieved Knowledge]",
        ...                     placement="dynamic_context")
        >>> [m.content for m in out]
        ['s', '[Retrieved Knowledge]', 'q']
    """
    _check_placement(placement)
    result = list(messages)
    if placement == "system":
        marker = {"placement": "system"}
        message: BaseMessage = SystemMessage(content, additional_kwargs={INJECTED_KEY: marker})
        result.insert(_system_insert_index(result), message)
        return result
    index = current_user_index(result)
    if index is not None and placement == "current_message":
        result[index] = _prepend_block(result[index], content)
        return result
    if index is None or placement in ("dynamic_context", "current_message"):
        marker = {"placement": "dynamic_context"}
        message = HumanMessage(content, additional_kwargs={INJECTED_KEY: marker})
        result.insert(len(result) if index is None else index, message)
        return result
    result[index] = _append_postfix(result[index], content)
    return result


def _prepend_block(message: BaseMessage, content: str) -> BaseMessage:
    """The message with ``content`` and the label as its first text blocks."""
    original = message.content
    parts = [{"type": "text", "text": original}] if isinstance(original, str) else list(original)
    marker = {"placement": "current_message", "text": isinstance(original, str)}
    kwargs = {**message.additional_kwargs, INJECTED_KEY: marker}
    label = {"type": "text", "text": USER_MESSAGE_LABEL}
    new_content = [{"type": "text", "text": content}, label, *parts]
    return message.model_copy(update={"content": new_content, "additional_kwargs": kwargs})


def _remove_prefix(message: BaseMessage, marker: dict[str, Any]) -> BaseMessage:
    parts = list(message.content)[2:]
    content: Any = parts
    if marker.get("text") and len(parts) == 1 and isinstance(parts[0], dict):
        content = str(parts[0].get("text", ""))
    kwargs = {k: v for k, v in message.additional_kwargs.items() if k != INJECTED_KEY}
    return message.model_copy(update={"content": content, "additional_kwargs": kwargs})


def _append_postfix(message: BaseMessage, content: str) -> BaseMessage:
    original = message.content
    marker: dict[str, Any] = {"placement": "postfix"}
    if isinstance(original, str):
        suffix = f"{_POSTFIX_SEPARATOR}{content}" if original else content
        marker["suffix"] = suffix
        new_content: str | list[str | dict[Any, Any]] = original + suffix
    else:
        marker["parts"] = 1
        new_content = [*original, {"type": "text", "text": content}]
    kwargs = {**message.additional_kwargs, INJECTED_KEY: marker}
    return message.model_copy(update={"content": new_content, "additional_kwargs": kwargs})


def append_suffix(messages: Sequence[BaseMessage], text: str) -> list[BaseMessage]:
    """``messages`` with ``text`` appended as is to the current user message, marked injected.

    Merged with a postfix already there (one marker per message), so
    :func:`strip_injected` restores the original message exactly. With no user
    message, or an empty ``text``, the messages are returned unchanged.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> out = append_suffix([HumanMessage("Hi")], " (sent at noon)")
        >>> out[0].content, strip_injected(out)[0].content
        ('Hi (sent at noon)', 'Hi')
    """
    result = list(messages)
    index = current_user_index(result)
    if index is None or not text:
        return result
    message = result[index]
    marker = dict(_marker(message) or {"placement": "postfix"})
    content = message.content
    if isinstance(content, str):
        marker["suffix"] = str(marker.get("suffix", "")) + text
        new_content: str | list[str | dict[Any, Any]] = content + text
    else:
        marker["parts"] = int(marker.get("parts", 0)) + 1
        new_content = [*content, {"type": "text", "text": text}]
    kwargs = {**message.additional_kwargs, INJECTED_KEY: marker}
    update = {"content": new_content, "additional_kwargs": kwargs}
    result[index] = message.model_copy(update=update)
    return result


def _remove_postfix(message: BaseMessage, marker: dict[str, Any]) -> BaseMessage:
    content = message.content
    if isinstance(content, str):
        suffix = str(marker.get("suffix", ""))
        if suffix and content.endswith(suffix):
            content = content[: -len(suffix)]
    else:
        parts = int(marker.get("parts", 0))
        content = list(content[: len(content) - parts]) if parts else list(content)
    kwargs = {k: v for k, v in message.additional_kwargs.items() if k != INJECTED_KEY}
    return message.model_copy(update={"content": content, "additional_kwargs": kwargs})


def strip_injected(
    messages: Sequence[BaseMessage], *, headers: Sequence[str] = ()
) -> list[BaseMessage]:
    r"""Remove every injection: the inverse of :func:`place_context`.

    Injected dynamic_context and system messages are dropped; a postfix is cut
    from the user message it was appended to, which gets back its exact
    original content and ``additional_kwargs``. Other messages are returned as
    they are (the same objects). Use it when you keep the history yourself and
    stored what the injector returned.

    Messages that lost their ``additional_kwargs`` (a history stored as plain
    role/content dicts) are recognized by their text (:func:`injection_start`)
    and their position: a user message whose whole text is injected content and
    that is directly followed by another user message (a dynamic_context); a
    system message after the first one in the leading run of system messages
    whose whole text is injected content; an earlier user message that ends in
    injected content after a blank line, or whose last text part is injected
    content (a postfix, cut together with its blank line). The current user
    message (the last one) is never changed by its text, so a user can quote a
    header. Limitation: an earlier user message that itself ends with a verbatim
    copy of an injected block is cut like a postfix.

    Args:
        messages: The conversation.
        headers: Extra header lines to recognize by text (see
            :func:`injection_start`), for a custom knowledge-block template or
            custom blocks.

    Example:
        >>> from langchain_core.messages import HumanMessage, convert_to_messages
        >>> history = [HumanMessage("q")]
        >>> strip_injected(place_context(history, "ctx", placement="postfix")) == history
        True
        >>> plain = convert_to_messages([
        ...     {"role": "user", "content": "[User Facts]\ncity=Lisbon"},
        ...     {"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "Sunny."},
        ...     {"role": "user", "content": "And tomorrow?"}])
        >>> [m.content for m in strip_injected(plain)]
        ['Weather?', 'Sunny.', 'And tomorrow?']
    """
    result: list[BaseMessage] = []
    marked: set[int] = set()
    for message in messages:
        marker = _marker(message)
        if marker is None:
            result.append(message)
        elif marker.get("placement") == "postfix":
            marked.add(len(result))
            result.append(_remove_postfix(message, marker))
        elif marker.get("placement") == "current_message":
            marked.add(len(result))
            if "parts" in marker:  # a datetime suffix after it
                message = _remove_postfix(message, marker)
            result.append(_remove_prefix(message, marker))
    return _strip_by_text(result, marked, headers)


def _strip_by_text(
    messages: list[BaseMessage], marked: set[int], headers: Sequence[str]
) -> list[BaseMessage]:
    """The second pass of :func:`strip_injected`: injections recognized by their text."""
    current = current_user_index(messages)
    leading_system = _system_insert_index(messages)
    result: list[BaseMessage] = []
    for index, message in enumerate(messages):
        if (
            index in marked
            or index == current
            or not isinstance(message, HumanMessage | SystemMessage)
        ):
            result.append(message)
            continue
        if isinstance(message, SystemMessage):
            whole = 0 < index < leading_system and _whole_text(message, headers)
            if not whole:
                result.append(message)
            continue
        followed_by_user = index + 1 < len(messages) and isinstance(
            messages[index + 1], HumanMessage
        )
        if _labelled(message, headers):  # a flattened current_message: cut up to the label
            text = str(message.content)
            cut = text[text.index(_FLAT_LABEL) + len(_FLAT_LABEL) :]
            result.append(message.model_copy(update={"content": cut}))
            continue
        if followed_by_user and _whole_text(message, headers):
            continue  # a dynamic_context
        result.append(_cut_postfix_text(message, headers))
    return result


_FLAT_LABEL = f"\n{USER_MESSAGE_LABEL}\n"


def _labelled(message: BaseMessage, headers: Sequence[str]) -> bool:
    """A string that starts with injected content and holds the label line after it."""
    content = message.content
    return (
        isinstance(content, str)
        and _FLAT_LABEL in content
        and injection_start(content[: content.index(_FLAT_LABEL)], headers=headers) == 0
    )


def _whole_text(message: BaseMessage, headers: Sequence[str]) -> bool:
    """Whether the message's string content is injected content from its first character."""
    return (
        isinstance(message.content, str) and injection_start(message.content, headers=headers) == 0
    )


def _cut_postfix_text(message: BaseMessage, headers: Sequence[str]) -> BaseMessage:
    """The message without a postfix recognized by its text (the same object if none)."""
    content = message.content
    if isinstance(content, str):
        start = injection_start(content, headers=headers)
        if not start:  # None, or 0: a whole injected user message followed by a reply is kept
            return message
        new_content: str | list[str | dict[Any, Any]] = content[: start - len(_POSTFIX_SEPARATOR)]
    else:
        parts = list(content)
        label = {"type": "text", "text": USER_MESSAGE_LABEL}
        if len(parts) > 2 and parts[1] == label and _injected_part(parts[0], headers):
            parts = parts[2:]  # a current_message's knowledge and label
        if len(parts) > 1 and _injected_part(parts[-1], headers):  # a postfix block
            parts = parts[:-1]
        if len(parts) == len(content):
            return message
        new_content = parts
    return message.model_copy(update={"content": new_content})


def _injected_part(part: Any, headers: Sequence[str]) -> bool:
    text = part.get("text") if isinstance(part, dict) and part.get("type") == "text" else part
    return isinstance(text, str) and injection_start(text, headers=headers) == 0


def extend_system_message(message: SystemMessage, addition: str | None) -> SystemMessage:
    """A copy of ``message`` with ``addition`` appended after a blank line (or as a text part)."""
    if not addition:
        return message
    if isinstance(message.content, str):
        content: Any = f"{message.content}\n\n{addition}" if message.content else addition
    else:
        content = [*message.content, {"type": "text", "text": addition}]
    return message.model_copy(update={"content": content})


def add_knowledge_prompt(messages: Sequence[BaseMessage], prompt: str | None) -> list[BaseMessage]:
    """``messages`` with ``prompt`` in the leading system message (added once).

    Appended to a leading system message that does not contain it yet, or sent as
    a system message of its own when there is none (an empty list stays empty).
    Idempotent, so the system prompt stays byte-identical from turn to turn.
    """
    out = list(messages)
    if not prompt or not out:
        return out
    if out and isinstance(out[0], SystemMessage):
        if prompt in out[0].text:
            return out
        return [extend_system_message(out[0], prompt), *out[1:]]
    return [SystemMessage(prompt), *out]
