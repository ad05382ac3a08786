"""Tenant isolation as a property: random multi-tenant corpora, every surface, zero leaks.

A tenant sees its own chunks and the shared partition's (``include_shared``, the
default), never another tenant's; with ``include_shared=False`` its own alone.

Hypothesis draws a corpus (documents spread over tenants with look-alike ids,
the same text often stored under several tenants) and queries built from the
same small vocabulary, so every query matches chunks of every tenant. For each
tenant (plus the shared partition and a tenant that owns nothing) every surface
is asked: ``search`` in the three modes and with a ``tenant_id`` filter, the
retriever, the injector (constructor and per-request tenant), the graph, the
``knowledge_base_search`` tool and the agent middleware. Each must return only
chunks of that tenant and the shared partition; a dense search deep enough must
return all of them.

Chunks are identified by id (ids derive from tenant, source and content, so the
same text in two tenants has two ids) and by source name, which is unique per
tenant and shows in every knowledge block.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import BaseMessage, HumanMessage

from langchain_knowledge_inject import (
    KnowledgeBase,
    KnowledgeInjectionMiddleware,
    KnowledgeInjector,
    create_knowledge_base_search_tool,
    create_knowledge_graph,
)
from tests.unit_tests.fakes import RecordingChatModel

TENANTS = ["acme", "Acme", "acme ", "acme-2", "globex", "ünïcödé", "a/b", "0", "t" * 80, "x.y"]
UNSEEN = "initech"
WORDS = [
    "leave",
    "holiday",
    "salary",
    "expense",
    "receipt",
    "travel",
    "laptop",
    "badge",
    "parking",
    "pension",
    "sick",
    "doctor",
    "manager",
    "approval",
    "remote",
    "office",
]
DEEP = 50  # deeper than any drawn partition: a dense search must return all of it
_SOURCE = re.compile(r"Source: (\S+?\.md)")

documents = st.lists(
    st.tuples(
        st.sampled_from([None, *TENANTS]),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
        st.lists(st.sampled_from([None, *TENANTS]), max_size=2),  # the same text in other tenants
    ),
    min_size=1,
    max_size=12,
)
queries = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join), min_size=1, max_size=2
)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("tenants")


class Corpus:
    """What was stored: chunk ids and sources per tenant (None: the shared partition)."""

    def __init__(self) -> None:
        self.ids: dict[str | None, set[str]] = defaultdict(set)
        self.sources: dict[str | None, set[str]] = defaultdict(set)

    def load(
        self, kb: KnowledgeBase, drawn: list[tuple[str | None, str, list[str | None]]]
    ) -> None:
        by_tenant: dict[str | None, list[Document]] = defaultdict(list)
        for index, (tenant, text, copies) in enumerate(drawn):
            for owner in dict.fromkeys([tenant, *copies]):
                source = f"{TENANTS.index(owner) if owner else 'shared'}-doc{index}.md"
                meta = {"source": source} | ({"tenant_id": owner} if owner is not None else {})
                by_tenant[owner].append(Document(text, metadata=meta))
                self.sources[owner].add(source)
        for tenant, docs in by_tenant.items():
            result = kb.add_documents(docs, tenant_id=tenant)
            self.ids[tenant].update(result.ids)

    def seen(self, tenant: str | None, shared: bool = True) -> tuple[set[str], set[str]]:
        """The chunk ids and sources a search for ``tenant`` may return."""
        owners = {tenant, None} if shared else {tenant}
        return {i for o in owners for i in self.ids[o]}, {
            s for o in owners for s in self.sources[o]
        }

    def check_docs(
        self, docs: list[Document], tenant: str | None, where: str, shared: bool = True
    ) -> None:
        ids, sources = self.seen(tenant, shared)
        assert {d.id for d in docs} <= ids, f"{where}: chunks of another tenant for {tenant!r}"
        owners = {tenant, None} if shared else {tenant}
        assert {d.metadata.get("tenant_id") for d in docs} <= owners, where
        assert {d.metadata["source"] for d in docs} <= sources, where

    def check_ids(
        self, ids: list[str], tenant: str | None, where: str, shared: bool = True
    ) -> None:
        allowed, _ = self.seen(tenant, shared)
        assert set(ids) <= allowed, f"{where}: chunks of another tenant for {tenant!r}"

    def check_text(self, text: str | None, tenant: str | None, where: str) -> None:
        shown = set(_SOURCE.findall(text or ""))
        allowed = self.seen(tenant)[1]
        assert shown <= allowed, f"{where}: sources of another tenant for {tenant!r}"


def _injected_text(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)


@settings(
    max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(drawn=documents, asked=queries)
def test_no_surface_ever_returns_another_tenants_chunks(store, drawn, asked):
    kb = KnowledgeBase(
        f"p{uuid.uuid4().hex[:12]}", path=store, embeddings=DeterministicFakeEmbedding(size=16)
    )
    try:
        corpus = Corpus()
        corpus.load(kb, drawn)
        tenants = [*sorted({*corpus.ids, UNSEEN} - {None}), None]
        opts: dict[str, Any] = {"min_score": 0.0}
        model = RecordingChatModel()
        graph = create_knowledge_graph(
            model, kb, top_k=DEEP, max_tokens=100_000, keep_manifest=True, **opts
        )
        agent_model = RecordingChatModel()
        agent = create_agent(
            agent_model,
            tools=[],
            middleware=[
                KnowledgeInjectionMiddleware(
                    kb, top_k=DEEP, max_tokens=100_000, keep_manifest=True, **opts
                )
            ],
        )
        for tenant in tenants:
            for query in asked:
                _check_search_surfaces(kb, corpus, tenant, query, opts)
            for query in asked[:1]:  # the turn surfaces: one query per tenant keeps this fast
                configurable = {"configurable": {"tenant_id": tenant}} if tenant is not None else {}

                # the injector, its tenant set at construction and per request
                injector = KnowledgeInjector(
                    kb, tenant_id=tenant, top_k=DEEP, max_tokens=100_000, **opts
                )
                turn = injector.prepare([HumanMessage(query)])
                corpus.check_ids(turn.manifest.chunk_ids, tenant, "injector")
                corpus.check_text(turn.dynamic_context, tenant, "injector")
                alone = KnowledgeInjector(
                    kb, tenant_id=tenant, include_shared=False, top_k=DEEP, **opts
                ).prepare([HumanMessage(query)])
                corpus.check_ids(alone.manifest.chunk_ids, tenant, "injector alone", shared=False)
                if tenant is not None:
                    other = KnowledgeInjector(kb, tenant_id=UNSEEN, top_k=DEEP, **opts)
                    turn = other.prepare([HumanMessage(query)], configurable)
                    corpus.check_ids(turn.manifest.chunk_ids, tenant, "injector override")

                # the graph, tenant per request
                state = graph.invoke({"messages": [HumanMessage(query)]}, configurable)
                corpus.check_docs(state["retrieved"], tenant, "graph retrieved")
                corpus.check_ids(state["knowledge_manifest"]["chunk_ids"], tenant, "graph manifest")
                corpus.check_text(_injected_text(model.received[-1]), tenant, "graph model input")

                # the agent middleware, tenant per request
                result = agent.invoke({"messages": [HumanMessage(query)]}, configurable)
                corpus.check_ids(result["knowledge_manifest"]["chunk_ids"], tenant, "middleware")
                corpus.check_text(
                    _injected_text(agent_model.received[-1]), tenant, "middleware input"
                )
    finally:
        kb.drop()
        kb.close()


def _check_search_surfaces(
    kb: KnowledgeBase, corpus: Corpus, tenant: str | None, query: str, opts: dict
) -> None:
    for mode in ("dense", "keyword", "hybrid"):
        docs = kb.search(query, k=DEEP, mode=mode, tenant_id=tenant, **opts)
        corpus.check_docs(docs, tenant, f"search {mode}")
        alone = kb.search(query, k=DEEP, mode=mode, tenant_id=tenant, include_shared=False, **opts)
        corpus.check_docs(alone, tenant, f"search {mode} alone", shared=False)
        if mode == "dense":  # complete as well as exclusive
            assert {d.id for d in docs} == corpus.seen(tenant)[0]
            assert {d.id for d in alone} == corpus.ids[tenant]
    if tenant is not None:
        docs = kb.search(query, k=DEEP, filter={"tenant_id": tenant}, **opts)
        corpus.check_docs(docs, tenant, "search filter")
        docs = kb.search(query, k=DEEP, filter={"tenant_id": {"$eq": tenant}}, **opts)
        corpus.check_docs(docs, tenant, "search $eq filter")

    retriever = kb.as_retriever(k=DEEP, tenant_id=tenant, **opts)
    corpus.check_docs(retriever.invoke(query), tenant, "retriever")
    alone = retriever.invoke(query, include_shared=False)
    corpus.check_docs(alone, tenant, "retriever alone", shared=False)
    if tenant is not None:
        corpus.check_docs(
            kb.as_retriever(k=DEEP, tenant_id=UNSEEN, **opts).invoke(query, tenant_id=tenant),
            tenant,
            "retriever per-call tenant",
        )

    for shared in (True, False):
        tool = create_knowledge_base_search_tool(
            kb, tenant_id=tenant, include_shared=shared, top_k=DEEP, **opts
        )
        message = tool.invoke(
            {"type": "tool_call", "name": tool.name, "args": {"query": query}, "id": "c1"}
        )
        corpus.check_docs(message.artifact, tenant, "tool artifact", shared=shared)
        corpus.check_text(message.content, tenant, "tool content")
