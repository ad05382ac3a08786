"""``KnowledgeSettings``: the one settings object of every surface, and its per-request parser.

Every surface takes ``settings=KnowledgeSettings(...)`` or the same fields as keyword
arguments (``top_k=3``); :func:`build_settings` maps those, and an unknown name raises
:class:`~langchain_knowledge_inject.errors.ConfigurationError` naming the allowed ones.
Per request, ``config["configurable"]`` and the LangGraph runtime context
(:class:`KnowledgeContext`, the context winning) override settings through
:meth:`KnowledgeSettings.with_overrides`: ``None`` means no override, an invalid
value raises ``ConfigurationError``, and the keys fixed at construction
(``on_error``, ``knowledge_prompt``, ``query_model``, ``reranker``,
``datetime_suffix``) raise naming the key. The keys: docs/configuration.md.

Example:
    >>> s = KnowledgeSettings(top_k=2)
    >>> s.with_overrides({"configurable": {"top_k": 6, "mode": "dense"}}).top_k
    6
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from typing_extensions import TypedDict

from langchain_knowledge_inject._restricted.scope import resolve_restricted
from langchain_knowledge_inject._store.search_args import SearchMode
from langchain_knowledge_inject._turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
from langchain_knowledge_inject._turn.placement import Placement
from langchain_knowledge_inject._turn.query import QueryCondenser
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langchain_core.runnables.utils import ConfigurableFieldSpec

__all__ = [
    "CONSTRUCTION_ONLY",
    "REQUEST_KEYS",
    "KnowledgeContext",
    "KnowledgeSettings",
    "SettingsOptions",
    "build_settings",
    "context_values",
]

logger = logging.getLogger("langchain_knowledge_inject")

RetrievalMode = Literal["auto", "tool"]


class KnowledgeSettings(BaseModel):
    """Settings shared by every surface, validated (invalid values raise ``ConfigurationError``).

    Frozen: derive a changed copy with :meth:`with_overrides` (per request) or
    :meth:`replace`.

    Example:
        >>> KnowledgeSettings(top_k=2).with_overrides({"configurable": {"top_k": 6}}).top_k
        6
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        use_attribute_docstrings=True,
        arbitrary_types_allowed=True,
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
    include_shared: bool = True
    """With ``tenant_id``: the shared partition's documents too, merged by score; ``False``: not."""
    placement: Placement = "current_message"
    """Where the context goes: ``"current_message"`` (the default: the knowledge and the
    question as one user turn, two content blocks, so roles strictly alternate),
    ``"dynamic_context"`` (a user message of its own before the question), ``"postfix"``
    or ``"system"`` (defeats provider prompt caching of the history); see
    docs/injection.md."""
    max_tokens: int = Field(default=2000, ge=1)
    """Token budget of the whole injected text; the knowledge block gets what the other
    blocks leave and is cut at chunk boundaries."""
    restricted: bool = False
    """Restricted mode: the model sees a safe summary, never raw chunks."""
    on_error: Literal["degrade", "raise"] = "degrade"
    """On a retrieval error: go on without knowledge (logged, in the manifest) or raise."""
    include_kb_meta: bool = False
    """Add the ``[Knowledge Bases]`` block (name, id, description, topics)."""
    query_window: int = Field(default=3, ge=0, le=10)
    """Earlier user turns whose terms are added to the query of a message that looks like
    a follow-up ("and can I carry them over?"); a self-contained question is searched
    alone. 0: the current message only. ``query_model`` replaces the heuristic."""
    knowledge_prompt: str | None = Field(default=KNOWLEDGE_SYSTEM_PROMPT, repr=False)
    """The static system-prompt addition (how to use and cite the injected knowledge),
    appended to the system message by every surface; ``None`` leaves it out."""
    knowledge_max_tokens: int | None = Field(default=None, ge=1)
    """Tokens the knowledge block may take inside ``max_tokens`` (Portal's
    ``SemanticContextMaxTokens``); ``None``: whatever the other blocks leave."""
    history_max_tokens: int | None = Field(default=None, ge=1)
    """Trim the conversation to this many tokens before the model call
    (:func:`~langchain_knowledge_inject._turn.history.trim_history`: the system prompt and
    the current turn are always kept); ``None``: no trimming."""
    query_model: QueryCondenser | None = Field(default=None, repr=False, exclude=True)
    """A chat model (or a ready :class:`~langchain_knowledge_inject._turn.query.QueryCondenser`)
    that rewrites a follow-up into a standalone retrieval query; ``None``: the
    ``query_window`` heuristic."""
    reranker: Any = Field(default=None, repr=False, exclude=True)
    """Reorders the retrieved chunks before the token budget: any LangChain
    ``BaseDocumentCompressor`` (a cross-encoder, FlashRank, Cohere...) or a callable
    ``(query, documents) -> documents``. It sees four times ``top_k`` candidates and
    keeps ``top_k``; the manifest shows the scores before (``retrieval_scores``) and
    after. ``None``: no reranking."""
    retrieval: RetrievalMode = "auto"
    """``"auto"``: retrieve and inject every turn. ``"tool"``: nothing is retrieved
    automatically; the model calls ``knowledge_base_search`` (which in restricted mode
    returns a safe summary only). Blocks and the knowledge-base list are still injected."""
    kb_meta_every_turn: bool = False
    """With ``include_kb_meta``: inject the knowledge-base list on every turn, even when
    nothing was retrieved (Wegent; restricted mode shows the safe routing metadata only)."""
    datetime_suffix: str | None = None
    """A ``strftime`` format appended to the current user message (Wegent's datetime
    suffix), for example ``"\n\n[Current time: %Y-%m-%d %H:%M %Z]"``; the clock is
    ``configurable["now"]`` (an aware ``datetime``) or now, UTC. ``None``: no suffix."""
    log_model_io: bool = False
    """Log the main model's request and response on the ``langchain_knowledge_inject.model_io``
    logger (also on with ``KINJECT_LOG_LLM_REQUESTS=1``); restricted turns log lengths and
    hashes only."""

    @field_validator("query_model", mode="before")
    @classmethod
    def _condenser(cls, value: Any) -> Any:
        """A chat model becomes a :class:`QueryCondenser` with its defaults (one cache)."""
        if value is None or isinstance(value, QueryCondenser):
            return value
        return QueryCondenser(value)

    @field_validator("reranker", mode="before")
    @classmethod
    def _reranker(cls, value: Any) -> Any:
        from langchain_knowledge_inject._turn.retrieval import check_reranker

        return check_reranker(value)

    @field_validator("datetime_suffix")
    @classmethod
    def _strftime(cls, value: str | None) -> str | None:
        if value is not None:
            datetime.now(timezone.utc).strftime(value)  # raises ValueError on a bad format
        return value

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _configuration_error(exc, "Invalid setting") from exc

    def _fields(self) -> dict[str, Any]:
        """Every field's value as is (``model_dump`` leaves ``query_model`` out)."""
        return {name: getattr(self, name) for name in KnowledgeSettings.model_fields}

    def replace(self, **changes: Any) -> KnowledgeSettings:
        """A validated copy with ``changes`` applied.

        Raises:
            ConfigurationError: A change names no setting or has a value that is not allowed.
        """
        return KnowledgeSettings(**{**self._fields(), **changes})

    def with_overrides(
        self, config: RunnableConfig | Mapping[str, Any] | None, context: Any = None
    ) -> KnowledgeSettings:
        """These settings with the per-request overrides applied.

        The one parser of per-request settings (see the module docstring for the keys):
        ``config["configurable"]``, then the runtime ``context`` (a mapping, a
        dataclass or a pydantic model, such as a :class:`KnowledgeContext`), which wins.

        Raises:
            ConfigurationError: An override has a value that is not allowed, or sets a
                construction-only setting.
        """
        configurable = {**((config or {}).get("configurable") or {}), **context_values(context)}
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
            if configurable.get(key) is not None and key != "memory"
        }
        memory = configurable.get("memory")
        if memory is not None:  # Shepherd's switch of injection and recording: "off" wins
            if not isinstance(memory, bool):
                msg = f"Invalid configurable['memory']={memory!r}: must be a bool"
                raise ConfigurationError(msg, option="memory", value=memory)
            updates["enabled"] = memory and updates.get("enabled", True) is not False
        if not updates:
            return self
        if "restricted" in updates:  # decided in one place: any "on" wins
            updates["restricted"] = resolve_restricted(
                surface=self.restricted, request=updates["restricted"]
            )
        try:
            return KnowledgeSettings(**{**self._fields(), **updates})
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
    "include_shared": "include_shared",
    "placement": "placement",
    "max_tokens": "max_tokens",
    "restricted": "restricted",
    "include_kb_meta": "include_kb_meta",
    "query_window": "query_window",
    "memory": "enabled",
    "knowledge_max_tokens": "knowledge_max_tokens",
    "history_max_tokens": "history_max_tokens",
    "retrieval": "retrieval",
    "kb_meta_every_turn": "kb_meta_every_turn",
    "log_model_io": "log_model_io",
}
"""Per-request key of ``config["configurable"]`` -> settings field."""

CONSTRUCTION_ONLY: tuple[str, ...] = (
    "on_error",
    "knowledge_prompt",
    "query_model",
    "reranker",
    "datetime_suffix",
)
"""Settings that a request may not change (setting them per request raises)."""


class SettingsOptions(TypedDict, total=False):
    """The fields of :class:`KnowledgeSettings` as keyword arguments of a surface."""

    enabled: bool
    top_k: int
    min_score: float | None
    mode: SearchMode
    tenant_id: str | None
    include_shared: bool
    placement: Placement
    max_tokens: int
    restricted: bool
    on_error: Literal["degrade", "raise"]
    include_kb_meta: bool
    query_window: int
    knowledge_prompt: str | None
    knowledge_max_tokens: int | None
    history_max_tokens: int | None
    query_model: Any
    reranker: Any
    retrieval: RetrievalMode
    kb_meta_every_turn: bool
    datetime_suffix: str | None
    log_model_io: bool


class KnowledgeContext(TypedDict, total=False):
    """Per-request values read from the LangGraph runtime context (``runtime.context``).

    Pass ``context_schema=KnowledgeContext`` (or your own schema with some of these
    keys) to ``create_agent`` or :func:`create_knowledge_graph`, then
    ``agent.invoke(input, context={"user_id": "u1", "tenant_id": "acme"})``. Every
    per-request key of ``configurable`` is accepted; the context wins where both set one.
    """

    user_id: str
    """The user (memory blocks: episodes and facts are per user)."""
    tenant_id: str
    """The tenant partition to search (with the shared one unless ``include_shared`` is off)."""
    include_shared: bool
    restricted: bool
    """``True`` switches restricted mode on for this request (it cannot switch it off)."""
    knowledge_enabled: bool
    top_k: int
    min_score: float
    mode: SearchMode
    placement: Placement
    max_tokens: int
    include_kb_meta: bool
    query_window: int
    memory: bool
    knowledge_max_tokens: int
    history_max_tokens: int
    retrieval: RetrievalMode
    kb_meta_every_turn: bool
    log_model_io: bool


def context_values(context: Any) -> dict[str, Any]:
    """The keys a runtime context sets, as a dict (``None`` values left out).

    A mapping, a dataclass or a pydantic model; anything else sets nothing.

    Example:
        >>> context_values({"user_id": "u1", "top_k": None})
        {'user_id': 'u1'}
    """
    if context is None:
        return {}
    if isinstance(context, Mapping):
        values = dict(context)
    elif hasattr(context, "model_dump"):
        values = context.model_dump()
    elif dataclasses.is_dataclass(context) and not isinstance(context, type):
        values = dataclasses.asdict(context)
    else:
        return {}
    return {k: v for k, v in values.items() if v is not None}


def build_settings(
    settings: KnowledgeSettings | None = None, /, **options: Any
) -> KnowledgeSettings:
    """The settings of a surface: ``settings`` (or the defaults) with keyword ``options`` applied.

    The one place where a surface's keyword arguments map onto :class:`KnowledgeSettings`.

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
    return (KnowledgeSettings.model_fields[name].description or name).split("\n")[0]


_DEFAULTS = KnowledgeSettings()
