"""One settings object for every surface, and one parser for per-request overrides."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage

from langchain_knowledge_inject import (
    ConfigurationError,
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    KnowledgeSettings,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
    create_knowledge_node,
)
from langchain_knowledge_inject.settings import (
    CONSTRUCTION_ONLY,
    REQUEST_KEYS,
    SettingsOptions,
    build_settings,
)
from tests.unit_tests.fakes import FakeKB, RecordingChatModel

TEXTS = [
    "Employees receive 25 days of annual leave per calendar year.",
    "Sick leave requires a doctor's note after three consecutive days.",
    "Expenses above 50 euros need a receipt and manager approval.",
]


def _kb() -> FakeKB:
    return FakeKB(
        Document(t, id=f"c{i}", metadata={"source": f"f{i}.md", "score": 0.9 - i / 10})
        for i, t in enumerate(TEXTS)
    )


# --- the settings object ---------------------------------------------------------------------


def test_settings_are_frozen_closed_validated_and_documented():
    settings = KnowledgeSettings()
    with pytest.raises(Exception, match="frozen"):
        settings.top_k = 3  # type: ignore[misc]
    with pytest.raises(ConfigurationError) as info:
        KnowledgeSettings(topk=3)
    assert info.value.option == "topk" and "top_k" in str(info.value)
    with pytest.raises(ConfigurationError) as info:
        KnowledgeSettings(top_k=0)
    assert info.value.option == "top_k"
    for name, field in KnowledgeSettings.model_fields.items():
        assert field.description, f"{name} has no docstring"


def test_the_keyword_options_are_exactly_the_settings_fields():
    keys = set(typing.get_type_hints(SettingsOptions))
    assert keys == set(KnowledgeSettings.model_fields)


def test_build_settings_maps_keywords_in_one_place():
    base = KnowledgeSettings(top_k=2, mode="dense")
    assert build_settings(base, max_tokens=50) == KnowledgeSettings(
        top_k=2, mode="dense", max_tokens=50
    )
    assert build_settings(None) == KnowledgeSettings()
    with pytest.raises(ConfigurationError) as info:
        build_settings(base, colour="red")
    assert info.value.option == "colour"
    with pytest.raises(ConfigurationError) as info:
        build_settings({"top_k": 3})  # type: ignore[arg-type]
    assert info.value.option == "settings"


# --- the per-request parser --------------------------------------------------------------------

OTHER_VALUE: dict[str, Any] = {
    "enabled": False,
    "top_k": 7,
    "min_score": 0.25,
    "mode": "keyword",
    "tenant_id": "acme",
    "include_shared": False,
    "placement": "postfix",
    "max_tokens": 123,
    "restricted": True,
    "on_error": "raise",
    "include_kb_meta": True,
    "query_window": 2,
    "knowledge_prompt": "Cite your sources.",
    "knowledge_max_tokens": 321,
    "history_max_tokens": 4000,
    "query_model": GenericFakeChatModel(messages=iter(["standalone question"])),
    "reranker": lambda query, documents: list(reversed(documents)),
    "retrieval": "tool",
    "kb_meta_every_turn": True,
    "datetime_suffix": " (%Y)",
    "log_model_io": True,
}


def test_every_setting_is_overridable_or_rejected_never_ignored():
    assert set(OTHER_VALUE) == set(KnowledgeSettings.model_fields)
    key_of = {name: key for key, name in REQUEST_KEYS.items()}
    base = KnowledgeSettings()
    for name, value in OTHER_VALUE.items():
        if name in key_of:
            resolved = base.with_overrides({"configurable": {key_of[name]: value}})
            assert getattr(resolved, name) == value, name
        else:
            assert name in CONSTRUCTION_ONLY
            with pytest.raises(ConfigurationError) as info:
                base.with_overrides({"configurable": {name: value}})
            assert info.value.option == name and "per request" in str(info.value)


def test_invalid_overrides_name_the_key_and_none_means_no_override():
    base = KnowledgeSettings(top_k=3)
    for key, bad in [("top_k", 0), ("mode", "fuzzy"), ("max_tokens", "many"),
                     ("knowledge_enabled", "yes"), ("placement", "middle")]:  # fmt: skip
        with pytest.raises(ConfigurationError) as info:
            base.with_overrides({"configurable": {key: bad}})
        assert info.value.option == key
    assert base.with_overrides({"configurable": {"top_k": None, "thread_id": "t"}}) is base
    restricted = KnowledgeSettings(restricted=True)
    assert restricted.with_overrides({"configurable": {"restricted": False}}).restricted


def test_mode_and_max_tokens_per_request_take_effect():
    kb = _kb()
    injector = KnowledgeInjector(kb, top_k=3)
    full = injector.prepare([HumanMessage("leave?")])
    assert kb.calls[-1]["mode"] == "hybrid" and len(full.manifest.chunk_ids) == 3
    small = injector.prepare([HumanMessage("leave?")],
                             {"configurable": {"mode": "keyword", "max_tokens": 90}})  # fmt: skip
    assert kb.calls[-1]["mode"] == "keyword"
    assert small.manifest.tokens_used <= 90 < full.manifest.tokens_used
    assert len(small.manifest.chunk_ids) < 3


def test_the_runnable_declares_its_per_request_fields():
    injector = KnowledgeInjector(_kb(), top_k=3)
    specs = {spec.id: spec for spec in injector.config_specs}
    assert set(specs) == set(REQUEST_KEYS)
    assert specs["top_k"].default == 3 and specs["top_k"].description
    schema = injector.config_schema().model_json_schema()
    assert "top_k" in schema["$defs"]["Configurable"]["properties"]


# --- every surface takes the same settings object -------------------------------------------------


SURFACES = ("injector", "graph", "middleware", "tool", "node")


def _surface(name: str, kb: FakeKB, model: RecordingChatModel, **kwargs: Any) -> Any:
    if name == "injector":
        return KnowledgeInjector(kb, **kwargs)
    if name == "graph":
        return create_knowledge_graph(model, kb, **kwargs)
    if name == "middleware":
        return KnowledgeInjectionMiddleware(kb, **kwargs)
    if name == "tool":
        return create_knowledge_base_search_tool(kb, **kwargs)
    return create_knowledge_node(model, kb, **kwargs)


def test_every_surface_takes_the_settings_object_and_uses_it():
    settings = KnowledgeSettings(top_k=1, mode="keyword")
    for surface in SURFACES:
        kb, model = _kb(), RecordingChatModel()
        built = _surface(surface, kb, model, settings=settings)
        if surface == "tool":
            built.invoke({"query": "annual leave"})
        elif surface == "middleware":
            create_agent(model, middleware=[built]).invoke({"messages": [HumanMessage("leave?")]})
        elif surface == "injector":
            built.invoke([HumanMessage("leave?")])
        else:  # the graph and the node take the state
            built.invoke({"messages": [HumanMessage("leave?")]})
        assert (kb.calls[-1]["k"], kb.calls[-1]["mode"]) == (1, "keyword"), surface


@pytest.mark.parametrize("surface", SURFACES)
def test_every_surface_rejects_an_unknown_option(surface):
    with pytest.raises(ConfigurationError) as info:
        _surface(surface, _kb(), RecordingChatModel(), colour="red")
    assert info.value.option == "colour"
    kwargs: dict[str, Any] = {"settings": KnowledgeSettings(), "top_k": 0}
    with pytest.raises(ConfigurationError) as info:
        _surface(surface, _kb(), RecordingChatModel(), **kwargs)
    assert info.value.option == "top_k"


def test_keyword_options_override_the_settings_object():
    injector = KnowledgeInjector(
        _kb(), settings=KnowledgeSettings(top_k=2, mode="dense"), top_k=5
    )
    assert (injector.settings.top_k, injector.settings.mode) == (5, "dense")


def test_a_ready_injector_is_accepted_but_not_reconfigured():
    injector = KnowledgeInjector(_kb(), top_k=2)
    assert KnowledgeInjectionMiddleware(injector).pipeline is injector.pipeline
    with pytest.raises(ConfigurationError) as info:
        KnowledgeInjectionMiddleware(injector, top_k=3)
    assert info.value.option == "top_k"


def test_the_lcel_injector_adds_the_same_knowledge_prompt_as_graph_and_middleware():
    kb, model = _kb(), RecordingChatModel()
    create_knowledge_graph(model, kb).invoke({"messages": [HumanMessage("leave?")]})
    agent = create_agent(model, middleware=[KnowledgeInjectionMiddleware(kb)])
    agent.invoke({"messages": [HumanMessage("leave?")]})
    lcel = KnowledgeInjector(kb).invoke([HumanMessage("leave?")])
    graph_system, agent_system = model.received[0][0], model.received[1][0]
    assert graph_system.type == agent_system.type == lcel[0].type == "system"
    assert lcel[0].text == graph_system.text == agent_system.text
    again = KnowledgeInjector(kb).invoke(lcel)  # added once, never twice
    assert again[0].text == lcel[0].text
    custom = KnowledgeInjector(kb, knowledge_prompt="Cite.").invoke([HumanMessage("leave?")])
    assert custom[0].text == "Cite."
