"""``KnowledgeSettings``: the one settings object of every surface, and its per-request parser.

The injector, the graph, the agent middleware and the ``knowledge_base_search``
tool all take ``settings=KnowledgeSettings(...)``. For convenience they also take
the same fields as keyword arguments (``top_k=3``); :func:`build_settings` is the
one place where those map onto the settings object, and an unknown name raises
:class:`~langchain_knowledge_inject.errors.ConfigurationError` naming the allowed
ones.

Per request, ``config["configurable"]`` overrides settings; :meth:`KnowledgeSettings.with_overrides`
is the one parser every surface uses. A ``None`` value means no override; any
other invalid value raises ``ConfigurationError``. The keys:

==================== ===========================================================
``knowledge_enabled`` ``False``: no retrieval and no injection (the field ``enabled``)
``top_k``             chunks to retrieve (1-100)
``min_score``         drop chunks scoring below this, in [0, 1]
``mode``              ``"dense"``, ``"keyword"`` or ``"hybrid"``
``tenant_id``         the tenant partition to search
``placement``         ``"dynamic_context"``, ``"postfix"`` or ``"system"``
``max_tokens``        token budget of the injected text
``restricted``        ``True`` switches restricted mode on; it cannot be switched off
                      per request where the surface or a knowledge base has it on
``include_kb_meta``   add the ``[Knowledge Bases]`` block
``query_window``      earlier user turns added to the query of a follow-up (0-10)
==================== ===========================================================

``on_error`` and ``knowledge_prompt`` are fixed at construction (the error policy
is the application's; the system prompt must stay byte-identical from turn to
turn for prompt caching): a request that sets them raises ``ConfigurationError``
naming the key, rather than being ignored. Other keys of ``configurable``
(``thread_id``, ``user_id``, ...) belong to other components and are left alone.

Example:
    >>> s = KnowledgeSettings(top_k=2)
    >>> s.with_overrides({"configurable": {"top_k": 6, "mode": "dense"}}).top_k
    6
    >>> per_request = {"configurable": {"on_error": "raise"}}
    >>> s.with_overrides(per_request)  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    ConfigurationError: configurable['on_error'] cannot be set per request
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typing_extensions import TypedDict

from langchain_knowledge_inject.errors import ConfigurationError
from langchain_knowledge_inject.restricted.scope import resolve_restricted
from langchain_knowledge_inject.turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
from langchain_knowledge_inject.turn.placement import Placement

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langchain_core.runnables.utils import ConfigurableFieldSpec

__all__ = [
    "CONSTRUCTION_ONLY",
    "REQUEST_KEYS",
    "KnowledgeSettings",
    "SettingsOptions",
    "build_settings",
]

logger = logging.getLogger("langchain_knowledge_inject")

SearchMode = Literal["dense", "keyword", "hybrid"]


class KnowledgeSettings(BaseModel):
    """Settings shared by every surface, validated (invalid values raise ``ConfigurationError``).

    Frozen: derive a changed copy with :meth:`with_overrides` (per request) or
    :meth:`replace`.

    Example:
        >>> KnowledgeSettings(top_k=2).with_overrides({"configurable": {"top_k": 6}}).top_k
        6
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True
    )

    enabled: bool = True
    """``False``: no retrieval, no injection (per request: ``knowledge_enabled``)."""
    top_k: int = Field(default=4, ge=1, le=100)
    """Chunks to retrieve per turn (the tool: its default count, at most 50)."""
    min_score: float | None = Field(default=None, ge=0.0, le=1.0)
    """Drop chunks scoring below this. ``None``: a ``KnowledgeBase`` applies its own
    default; a vector store or a retriever source applies no threshold."""
    mode: SearchMode = "hybrid"
    """Search mode of a ``KnowledgeBase`` source (other sources run their own search)."""
    tenant_id: str | None = Field(default=None, min_length=1)
    """Tenant partition to search; ``None``: the shared partition."""
    placement: Placement = "dynamic_context"
    """Where the context goes (see :mod:`~langchain_knowledge_inject.turn.placement`);
    ``"system"`` defeats provider prompt caching of the history."""
    max_tokens: int = Field(default=2000, ge=1)
    """Token budget of the whole injected text; the knowledge block gets what the other
    blocks leave and is cut at chunk boundaries."""
    restricted: bool = False
    """Restricted mode: the model sees a safe summary, never raw chunks."""
    on_error: Literal["degrade", "raise"] = "degrade"
    """On a retrieval error: go on without knowledge (logged, in the manifest) or raise."""
    include_kb_meta: bool = False
    """Add the ``[Knowledge Bases]`` block (name, id, description, topics)."""
    query_window: int = Field(default=0, ge=0, le=10)
    """Earlier user turns added to the query of a follow-up such as "and abroad?"
    (0: the current message only; see ``turn.query.retrieval_query``)."""
    knowledge_prompt: str | None = Field(default=KNOWLEDGE_SYSTEM_PROMPT, repr=False)
    """The static system-prompt addition (how to use and cite the injected knowledge),
    appended to the system message by every surface; ``None`` leaves it out."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _configuration_error(exc, "Invalid setting") from exc

    def replace(self, **changes: Any) -> KnowledgeSettings:
        """A validated copy with ``changes`` applied.

        Raises:
            ConfigurationError: A change names no setting or has a value that is not allowed.
        """
        return KnowledgeSettings(**{**self.model_dump(), **changes})

    def with_overrides(
        self, config: RunnableConfig | Mapping[str, Any] | None
    ) -> KnowledgeSettings:
        """These settings with the per-request overrides of ``config["configurable"]`` applied.

        The one parser of per-request settings (see the module docstring for the keys).

        Raises:
            ConfigurationError: An override has a value that is not allowed, or sets a
                construction-only setting.
        """
        configurable = (config or {}).get("configurable") or {}
        if not configurable:
            return self
        for key in CONSTRUCTION_ONLY:
            if configurable.get(key) is not None:
                msg = (
                    f"configurable[{key!r}] cannot be set per request (set it on the "
                    f"surface's settings); per-request keys: {', '.join(REQUEST_KEYS)}"
                )
                raise ConfigurationError(msg, option=key, value=configurable[key])
        updates = {
            name: configurable[key]
            for key, name in REQUEST_KEYS.items()
            if configurable.get(key) is not None
        }
        if not updates:
            return self
        if "restricted" in updates:  # decided in one place: any "on" wins
            updates["restricted"] = resolve_restricted(
                surface=self.restricted, request=updates["restricted"]
            )
        try:
            return KnowledgeSettings(**{**self.model_dump(), **updates})
        except ConfigurationError as exc:
            option = exc.option or ""
            key = next((k for k, name in REQUEST_KEYS.items() if name == option), option)
            msg = f"Invalid configurable[{key!r}]: {exc}"
            raise ConfigurationError(msg, option=key, value=exc.value) from exc

    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The per-request fields as ``ConfigurableFieldSpec`` objects (``config_specs``).

        Defaults are these settings' values, so a schema shows what a request gets.
        """
        from langchain_core.runnables.utils import ConfigurableFieldSpec

        specs = []
        for key, name in REQUEST_KEYS.items():
            field = KnowledgeSettings.model_fields[name]
            specs.append(
                ConfigurableFieldSpec(
                    id=key,
                    annotation=field.annotation,
                    name=key,
                    description=_field_doc(name),
                    default=getattr(self, name),
                )
            )
        return specs


REQUEST_KEYS: dict[str, str] = {
    "knowledge_enabled": "enabled",
    "top_k": "top_k",
    "min_score": "min_score",
    "mode": "mode",
    "tenant_id": "tenant_id",
    "placement": "placement",
    "max_tokens": "max_tokens",
    "restricted": "restricted",
    "include_kb_meta": "include_kb_meta",
    "query_window": "query_window",
}
"""Per-request key of ``config["configurable"]`` -> settings field."""

CONSTRUCTION_ONLY: tuple[str, ...] = ("on_error", "knowledge_prompt")
"""Settings that a request may not change (setting them per request raises)."""


class SettingsOptions(TypedDict, total=False):
    """The fields of :class:`KnowledgeSettings` as keyword arguments of a surface."""

    enabled: bool
    top_k: int
    min_score: float | None
    mode: SearchMode
    tenant_id: str | None
    placement: Placement
    max_tokens: int
    restricted: bool
    on_error: Literal["degrade", "raise"]
    include_kb_meta: bool
    query_window: int
    knowledge_prompt: str | None
    k: int
    """Deprecated alias of ``top_k`` (the tool's former name); removed in the next release."""


def build_settings(
    settings: KnowledgeSettings | None = None, /, **options: Any
) -> KnowledgeSettings:
    """The settings of a surface: ``settings`` (or the defaults) with keyword ``options`` applied.

    The one place where a surface's keyword arguments map onto :class:`KnowledgeSettings`.
    ``k`` is accepted as a deprecated alias of ``top_k``.

    Raises:
        ConfigurationError: ``settings`` is not a ``KnowledgeSettings``, an option names no
            setting, or a value is not allowed.

    Example:
        >>> build_settings(KnowledgeSettings(top_k=2), mode="dense").mode
        'dense'
    """
    if settings is not None and not isinstance(settings, KnowledgeSettings):
        msg = f"settings must be a KnowledgeSettings, got {type(settings).__name__}"
        raise ConfigurationError(msg, option="settings", value=settings)
    base = settings if settings is not None else _DEFAULTS
    if "k" in options:
        k = options.pop("k")
        warnings.warn(
            "'k' is deprecated; use 'top_k' (the same name on every surface)",
            DeprecationWarning,
            stacklevel=3,
        )
        if "top_k" in options and options["top_k"] != k:
            msg = f"give top_k or its deprecated alias k, not both (top_k={options['top_k']!r})"
            raise ConfigurationError(msg, option="k", value=k)
        options["top_k"] = k
    unknown = sorted(set(options) - set(KnowledgeSettings.model_fields))
    if unknown:
        allowed = ", ".join(KnowledgeSettings.model_fields)
        msg = f"Unknown setting {unknown[0]!r}; settings: {allowed}"
        raise ConfigurationError(msg, option=unknown[0], value=options[unknown[0]])
    return base.replace(**options) if options else base


def _configuration_error(exc: ValidationError, prefix: str) -> ConfigurationError:
    error = exc.errors()[0]
    option = ".".join(str(p) for p in error["loc"]) or None
    if error["type"] == "extra_forbidden":
        allowed = ", ".join(KnowledgeSettings.model_fields)
        msg = f"Unknown setting {option!r}; settings: {allowed}"
    else:
        msg = f"{prefix} {option}={error.get('input')!r}: {error['msg']}"
    return ConfigurationError(msg, option=option, value=error.get("input"))


def _field_doc(name: str) -> str:
    """The first line of a field's attribute docstring (pydantic keeps it as description)."""
    field = KnowledgeSettings.model_fields[name]
    return (field.description or name).split("\n")[0]


_DEFAULTS = KnowledgeSettings()
