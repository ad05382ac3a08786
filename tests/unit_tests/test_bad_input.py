"""Bad input never crashes a turn, and bad settings fail at construction.

Two halves:

* opening a knowledge base over a broken embedding model or a corrupt,
  unreadable or misplaced store directory gives a ``KnowledgeBaseOpenError``
  when it opens, not a stack trace on the first question;
* odd messages (empty, whitespace, 1 MB, image-only, emoji and right-to-left
  text, ``None``, no user message) go through every surface (injector, graph,
  middleware, tool) without a crash, and invalid settings raise a
  ``ValueError`` (``ConfigurationError``) at construction naming what is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_knowledge_inject import (
    ConfigurationError,
    KnowledgeBase,
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
    create_knowledge_node,
)
from langchain_knowledge_inject._store.knowledge_base import MAX_QUERY_CHARS
from langchain_knowledge_inject._turn.formatting import KNOWLEDGE_SYSTEM_PROMPT
from langchain_knowledge_inject._turn.placement import add_knowledge_prompt, is_injected
from langchain_knowledge_inject.errors import KnowledgeBaseOpenError
from tests.unit_tests.fakes import LEAVE, SICK, CountingEmbedding, RecordingChatModel

HEBREW = "חופשה שנתית: לכל עובד עשרים וחמישה ימי חופשה בשנה."
ARABIC = "الإجازة السنوية: يحصل كل موظف على خمسة وعشرين يوما في السنة."
EMOJI = "Beach party 🏖️🌴 on Friday: bring sunscreen ☀️ and snacks 🍉."
ONE_MB = ("annual leave days per year " * 40_000)[: 1024 * 1024]


class BrokenEmbeddings(Embeddings):
    """An embedding model whose backend is down: every call fails."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise ConnectionError("embedding service unreachable")

    def embed_query(self, text: str) -> list[float]:
        raise ConnectionError("embedding service unreachable")


@pytest.fixture
def emb() -> CountingEmbedding:
    return CountingEmbedding(size=32)


@pytest.fixture
def kb(tmp_path, emb):
    base = KnowledgeBase("hr", path=tmp_path / "store", embeddings=emb)
    base.add_documents(
        [
            Document(LEAVE, metadata={"source": "leave.md"}),
            Document(SICK, metadata={"source": "sick.md"}),
            Document(HEBREW, metadata={"source": "he.md"}),
            Document(ARABIC, metadata={"source": "ar.md"}),
            Document(EMOJI, metadata={"source": "party.md"}),
        ]
    )
    yield base
    base.close()


# -- opening: broken model, corrupt or unreadable store --------------------------------------


def test_an_embedding_model_that_fails_is_a_clear_error_on_first_use(tmp_path):
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=BrokenEmbeddings())  # no model call
    for call in (lambda: kb.search("leave"), lambda: kb.add_documents([Document("Leave.")])):
        with pytest.raises(KnowledgeBaseOpenError, match="embedding model of knowledge base"):
            call()
    assert kb.info.chunk_count == 0
    kb.close()
    # nothing stays locked: a working model opens another knowledge base in the store
    with KnowledgeBase("hr2", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=8)) as kb:
        assert kb.add_documents([Document("Leave.")]).added == 1


def test_garbage_chroma_database_fails_at_open(tmp_path):
    (tmp_path / "chroma").mkdir()
    (tmp_path / "chroma" / "chroma.sqlite3").write_bytes(b"not a database\x00" * 4096)
    with pytest.raises(KnowledgeBaseOpenError, match="chroma") as info:
        KnowledgeBase("hr", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=8))
    assert str(tmp_path) in str(info.value)


def test_a_garbage_version_1_catalog_is_kept_aside_and_the_store_opens(tmp_path, caplog):
    (tmp_path / "catalog.sqlite3").write_bytes(b"\x13\x37 garbage " * 2048)
    assert KnowledgeBase.list(tmp_path) == []  # nothing in Chroma
    kb = KnowledgeBase("hr", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=8))
    assert kb.info.chunk_count == 0
    assert "cannot be read" in caplog.text
    kept = tmp_path / "catalog.sqlite3.migrated"
    assert kept.read_bytes().startswith(b"\x13\x37 garbage")  # kept, never deleted


def test_store_path_that_is_a_file_fails_at_open(tmp_path):
    target = tmp_path / "not-a-dir"
    target.write_text("x")
    for path in (target, target / "below"):
        with pytest.raises(KnowledgeBaseOpenError, match="not-a-dir"):
            KnowledgeBase("hr", path=path, embeddings=DeterministicFakeEmbedding(size=8))


def test_unopenable_chroma_database_fails_at_open(tmp_path):
    # a directory where Chroma's database file should be: it cannot open (works as root too)
    (tmp_path / "chroma" / "chroma.sqlite3").mkdir(parents=True)
    with pytest.raises(KnowledgeBaseOpenError, match="chroma"):
        KnowledgeBase("hr", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=8))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory: chmod cannot block it")
def test_unreadable_store_dir_fails_at_open(tmp_path):
    store = tmp_path / "store"
    KnowledgeBase("hr", path=store, embeddings=DeterministicFakeEmbedding(size=8)).close()
    store.chmod(0)
    try:
        with pytest.raises(KnowledgeBaseOpenError):
            KnowledgeBase("hr", path=store, embeddings=DeterministicFakeEmbedding(size=8))
    finally:
        store.chmod(0o755)


# -- odd messages through every surface --------------------------------------------------------

NO_QUERY_INPUTS: dict[str, list[BaseMessage]] = {
    "empty": [HumanMessage("")],
    "whitespace": [SystemMessage("You are HR."), HumanMessage("   \n\t  \u00a0 ")],
    "image_only": [
        HumanMessage(
            [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]
        )
    ],
    "image_only_v1": [
        HumanMessage([{"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}])
    ],
    "no_user_message": [SystemMessage("You are HR."), AIMessage("Hello, how can I help?")],
    "empty_list": [],
}


@pytest.mark.parametrize("name", sorted(NO_QUERY_INPUTS))
async def test_messages_without_text_pass_through_the_injector(kb, name):
    messages = NO_QUERY_INPUTS[name]
    injector = KnowledgeInjector(kb, min_score=0.0)
    turn = injector.prepare(messages)
    expected = add_knowledge_prompt(messages, KNOWLEDGE_SYSTEM_PROMPT)  # nothing else added
    assert turn.messages == expected
    assert not turn.manifest.injected
    assert turn.manifest.retrieval_error is None
    assert await injector.ainvoke(messages) == expected
    assert injector.batch([messages, messages]) == [expected, expected]


@pytest.mark.parametrize("name", ["empty", "whitespace", "image_only", "image_only_v1"])
def test_messages_without_text_through_graph_and_agent(kb, name):
    messages = NO_QUERY_INPUTS[name]
    model = RecordingChatModel()
    graph = create_knowledge_graph(model, kb, min_score=0.0, checkpointer=InMemorySaver())
    state = graph.invoke({"messages": messages}, {"configurable": {"thread_id": name}})
    assert state["messages"][-1].content == "ok"
    assert state["dynamic_context"] is None
    assert not any(is_injected(m) for m in model.received[-1])

    agent_model = RecordingChatModel()
    agent = create_agent(
        agent_model, tools=[], middleware=[KnowledgeInjectionMiddleware(kb, min_score=0.0)]
    )
    result = agent.invoke({"messages": messages})
    assert result["messages"][-1].content == "ok"
    assert not any(is_injected(m) for m in agent_model.received[-1])


def test_graph_with_no_user_message_answers_without_knowledge(kb):
    model = RecordingChatModel()
    graph = create_knowledge_graph(model, kb, min_score=0.0, keep_manifest=True)
    state = graph.invoke({"messages": NO_QUERY_INPUTS["no_user_message"]})
    assert state["retrieval_query"] is None
    assert state["knowledge_manifest"]["injected"] is False
    assert state["messages"][-1].content == "ok"


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_tool_with_an_empty_query_answers_nothing_found(kb, query):
    tool = create_knowledge_base_search_tool(kb, min_score=0.0)
    text = tool.invoke({"query": query})
    assert text.startswith("No passages found")


def test_emoji_and_right_to_left_text(kb):
    injector = KnowledgeInjector(kb, min_score=0.0, mode="keyword", top_k=1)
    for question, source in [
        ("כמה ימי חופשה שנתית?", "he.md"),
        ("كم يوما الإجازة السنوية؟", "ar.md"),
        ("🏖️ beach party sunscreen 🌴", "party.md"),
    ]:
        turn = injector.prepare([HumanMessage(question)])
        assert turn.manifest.sources == [source]
        assert turn.messages[-1].text.endswith(question)
        assert source in turn.dynamic_context
    emoji_only = KnowledgeInjector(kb, min_score=0.0, mode="hybrid").prepare([HumanMessage("🏖️🌴☀️")])
    assert emoji_only.manifest.retrieval_error is None  # dense still answers; keyword has no term
    tool = create_knowledge_base_search_tool(kb, min_score=0.0, mode="keyword")
    assert "he.md" in tool.invoke({"query": "חופשה שנתית"})


@pytest.mark.parametrize("bad", [None, [None], {"messages": None}, [HumanMessage("hi"), None]])
def test_none_as_input_or_message_is_a_clear_value_error(kb, bad):
    injector = KnowledgeInjector(kb, min_score=0.0)
    with pytest.raises(ValueError, match="message"):
        injector.invoke(bad)


def test_none_content_in_a_message_dict_is_treated_as_empty(kb):
    injector = KnowledgeInjector(kb, min_score=0.0)
    turn = injector.prepare([{"role": "user", "content": None}])
    assert turn.query is None
    assert not turn.manifest.injected


def test_tool_rejects_a_none_query_as_a_validation_error(kb):
    tool = create_knowledge_base_search_tool(kb, min_score=0.0)
    with pytest.raises(ValueError, match="query"):
        tool.invoke({"query": None})


def test_one_megabyte_message_is_cut(kb, emb):
    huge = [HumanMessage(ONE_MB)]
    injector = KnowledgeInjector(kb, min_score=0.0)
    tool = create_knowledge_base_search_tool(kb, min_score=0.0)
    model = RecordingChatModel()
    graph = create_knowledge_graph(model, kb, min_score=0.0)

    turn = injector.prepare(huge)
    assert turn.manifest.injected
    assert turn.messages[-1].content[-1]["text"] == ONE_MB  # the user's message is never cut
    assert "annual leave" in tool.invoke({"query": ONE_MB})
    assert graph.invoke({"messages": huge})["messages"][-1].content == "ok"
    assert 0 < emb.longest_query <= MAX_QUERY_CHARS

    # how long it takes next to a normal question: benchmarks/huge_message.py


def test_one_megabyte_message_through_the_agent_middleware(kb, emb):
    model = RecordingChatModel()
    agent = create_agent(
        model, tools=[], middleware=[KnowledgeInjectionMiddleware(kb, min_score=0.0)]
    )
    result = agent.invoke({"messages": [HumanMessage(ONE_MB)]})
    assert result["messages"][-1].content == "ok"
    assert any(is_injected(m) for m in model.received[-1])
    assert result["messages"][0].content == ONE_MB
    assert emb.longest_query <= MAX_QUERY_CHARS


# -- invalid settings fail at construction --------------------------------------------------

_BAD_SETTINGS = [
    ({"top_k": 0}, "top_k", "1"),
    ({"top_k": -3}, "top_k", "1"),
    ({"min_score": -0.1}, "min_score", "0"),
    ({"min_score": 1.5}, "min_score", "1"),
    ({"placement": "top"}, "placement", "dynamic_context"),
    ({"mode": "fuzzy"}, "mode", "hybrid"),
    ({"on_error": "ignore"}, "on_error", "degrade"),
]


@pytest.mark.parametrize(("options", "option", "allowed"), _BAD_SETTINGS)
def test_invalid_injection_settings_fail_at_construction(kb, options, option, allowed):
    builders: list[Callable[[], Any]] = [
        lambda: KnowledgeInjector(kb, **options),
        lambda: create_knowledge_graph(RecordingChatModel(), kb, **options),
        lambda: KnowledgeInjectionMiddleware(kb, **options),
    ]
    for build in builders:
        with pytest.raises(ValueError, match=option) as info:
            build()
        assert isinstance(info.value, ConfigurationError)
        assert allowed in str(info.value)
        assert info.value.option == option


@pytest.mark.parametrize(
    ("options", "allowed"),
    [
        ({"k": 0}, "1"),
        ({"k": -1}, "1"),
        ({"min_score": -0.5}, "0"),
        ({"min_score": 2.0}, "1"),
        ({"mode": "fuzzy"}, "hybrid"),
    ],
)
def test_invalid_search_settings_fail_everywhere(kb, options, allowed):
    (option,) = options
    builders: list[Callable[[], Any]] = [
        lambda: kb.search("leave", **options),
        lambda: kb.as_retriever(**options),
        # the tool's count is top_k (k is its deprecated alias)
        lambda: create_knowledge_base_search_tool(
            kb, **{("top_k" if key == "k" else key): value for key, value in options.items()}
        ),
    ]
    for build in builders:
        with pytest.raises(ValueError, match=option) as info:
            build()
        assert allowed in str(info.value)


@pytest.mark.parametrize(
    ("override", "option"),
    [({"top_k": 0}, "top_k"), ({"min_score": 7}, "min_score"), ({"placement": "top"}, "placement")],
)
def test_invalid_per_request_override_is_a_configuration_error(kb, override, option):
    injector = KnowledgeInjector(kb, min_score=0.0)
    with pytest.raises(ConfigurationError, match=option):
        injector.invoke([HumanMessage("annual leave")], {"configurable": override})


@pytest.mark.parametrize("tenant", ["", 3, ["a", "b"]])
def test_invalid_tenant_ids_are_refused(kb, tenant):
    with pytest.raises(ConfigurationError, match="tenant"):
        kb.search("annual leave", tenant_id=tenant)
    if tenant == "":  # "" would otherwise share the partition of chunks without a tenant
        with pytest.raises(ConfigurationError, match="tenant"):
            kb.add_documents(
                [Document("Tenant text.", metadata={"source": "t.md", "tenant_id": ""})]
            )


@pytest.mark.parametrize("query", [42, 3.5, ["annual leave"], b"annual leave"])
def test_a_query_that_is_not_text_is_a_configuration_error(kb, query):
    with pytest.raises(ConfigurationError, match="query must be a string"):
        kb.search(query)


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"topics": "leave"}, "topics"),
        ({"topics": [1, 2]}, "topics"),
        ({"embeddings": "all-MiniLM-L6-v2"}, "embeddings"),
        ({"path": 5}, "path"),
    ],
)
def test_wrong_constructor_types_are_refused_naming_the_option(tmp_path, emb, options, option):
    kwargs: dict[str, Any] = {"path": tmp_path / "store", "embeddings": emb, **options}
    with pytest.raises(ConfigurationError, match=option) as info:
        KnowledgeBase("typed", **kwargs)
    assert info.value.option == option


@pytest.mark.parametrize(
    ("build", "option"),
    [
        (lambda kb: create_knowledge_graph(RecordingChatModel(), kb, system_prompt=123), "system"),
        (lambda kb: create_knowledge_node(RecordingChatModel(), kb, system_prompt=[1]), "system"),
        (lambda kb: create_knowledge_base_search_tool(kb, filter="hr"), "filter"),
        (lambda kb: create_knowledge_base_search_tool(kb, name=5), "name"),
        (lambda kb: create_knowledge_graph(RecordingChatModel(), kb, tools="search"), "tools"),
        (lambda kb: KnowledgeInjectionMiddleware(kb, search_tool="yes"), "search_tool"),
        (lambda kb: KnowledgeInjectionMiddleware(kb, keep_manifest=1), "keep_manifest"),
    ],
)
def test_wrong_surface_argument_types_fail_at_construction(kb, build, option):
    with pytest.raises(ConfigurationError, match=option):
        build(kb)
