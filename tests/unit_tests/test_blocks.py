"""The shared token budget of the context blocks: assemble_blocks, BlockText, the protocol."""

from __future__ import annotations

import doctest
import tempfile

import chromadb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.memory import InMemoryStore

from langchain_knowledge_inject._memory.episodic import EpisodicMemory
from langchain_knowledge_inject._memory.facts import UserFacts
from langchain_knowledge_inject._memory.procedures import Procedure, ProcedureLibrary
from langchain_knowledge_inject._turn import blocks as blocks_module
from langchain_knowledge_inject._turn.blocks import (
    BLOCK_ORDER,
    DEFAULT_PRIORITIES,
    BlockText,
    ContextBlock,
    assemble_blocks,
    config_user_id,
)
from langchain_knowledge_inject.errors import ConfigurationError


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def count_words(text: str) -> int:
    return len(text.split())


def items_block(*items: str) -> BlockText:
    block = BlockText.build(list(items), lambda xs: "[H]\n" + "\n".join(xs))
    assert block is not None
    return block


def test_blocks_join_in_the_given_order_with_a_blank_line_and_skip_empty_ones() -> None:
    text, cuts = assemble_blocks(
        [("procedure", "P"), ("knowledge", None), ("episodic", "  "), ("facts", "F")]
    )

    assert text == "P\n\nF"
    assert cuts == []


def test_nothing_left_gives_none() -> None:
    assert assemble_blocks([("knowledge", None), ("facts", "")]) == (None, [])


def test_a_cap_shortens_an_item_block_one_item_at_a_time() -> None:
    block = items_block(words(10, "a"), words(10, "b"), words(10, "c"))

    text, cuts = assemble_blocks([("episodic", block)], caps={"episodic": 25}, counter=count_words)

    assert text == "[H]\n" + words(10, "a") + "\n" + words(10, "b")
    assert cuts == [
        {"block": "episodic", "reason": "block_cap", "removed": 1, "kept": 2, "dropped": False}
    ]


def test_a_plain_text_block_over_its_cap_is_dropped_whole() -> None:
    text, cuts = assemble_blocks(
        [("procedure", words(30)), ("facts", "F")], caps={"procedure": 10}, counter=count_words
    )

    assert text == "F"
    assert cuts[0] == {
        "block": "procedure", "reason": "block_cap", "removed": 1, "kept": 0, "dropped": True,
    }  # fmt: skip


def test_the_budget_cuts_the_lowest_priority_block_first() -> None:
    snippets = items_block(words(10, "s"), words(10, "t"))
    parts = [("procedure", words(10, "p")), ("knowledge", words(20, "k")),
             ("episodic", snippets), ("facts", words(5, "f"))]  # fmt: skip

    text, cuts = assemble_blocks(parts, max_tokens=50, counter=count_words)

    assert count_words(text) <= 50
    assert [c["block"] for c in cuts] == ["episodic"]
    assert cuts[0]["kept"] == 1 and cuts[0]["reason"] == "token_budget"
    assert words(10, "p") in text and words(20, "k") in text and words(5, "f") in text


def test_when_a_block_is_gone_the_next_lowest_priority_goes_next() -> None:
    parts = [("procedure", words(20, "p")), ("knowledge", words(20, "k")),
             ("episodic", words(20, "e")), ("facts", words(5, "f"))]  # fmt: skip

    text, cuts = assemble_blocks(parts, max_tokens=30, counter=count_words)

    assert [c["block"] for c in cuts] == ["episodic", "procedure"]
    assert text == words(20, "k") + "\n\n" + words(5, "f")


def test_priorities_can_be_overridden_and_ties_cut_the_later_block() -> None:
    parts = [("knowledge", words(20, "k")), ("extra", words(20, "x"))]

    text, cuts = assemble_blocks(
        parts, max_tokens=25, priorities={"knowledge": 1, "extra": 1}, counter=count_words
    )

    assert text == words(20, "k")
    assert cuts[0]["block"] == "extra"


def test_unknown_blocks_are_cut_last_by_default() -> None:
    parts = [("kb_meta", words(10, "m")), ("knowledge", words(20, "k"))]

    text, _ = assemble_blocks(parts, max_tokens=15, counter=count_words)

    assert text == words(10, "m")


def test_the_default_order_and_priorities_are_documented_values() -> None:
    assert BLOCK_ORDER == ("procedure", "knowledge", "episodic", "facts")
    assert sorted(DEFAULT_PRIORITIES, key=DEFAULT_PRIORITIES.get) == [
        "episodic", "procedure", "knowledge", "facts",
    ]  # fmt: skip


@pytest.mark.parametrize("kwargs", [{"max_tokens": 0}, {"caps": {"facts": 0}}])
def test_invalid_budget_values_are_refused(kwargs) -> None:
    with pytest.raises(ConfigurationError):
        assemble_blocks([("facts", "F")], **kwargs)


def test_block_text_is_a_str_that_can_keep_a_prefix_of_its_items() -> None:
    block = items_block("a", "b", "c")

    assert isinstance(block, str) and block == "[H]\na\nb\nc"
    assert block.keep(2) == "[H]\na\nb" and block.keep(2).items == ("a", "b")
    assert block.keep(0) is None
    assert BlockText.build([], lambda xs: "x") is None


def test_config_user_id_reads_the_configurable_key() -> None:
    assert config_user_id({"configurable": {"user_id": " u1 "}}) == "u1"
    assert config_user_id({"configurable": {"uid": 7}}, key="uid") == "7"
    assert config_user_id({"configurable": {"user_id": ""}}) is None
    assert config_user_id(None) is None


def test_the_three_providers_follow_the_context_block_protocol(tmp_path) -> None:
    emb = DeterministicFakeEmbedding(size=8)
    blocks = [
        ProcedureLibrary([Procedure("p", "d", ["s"])], embeddings=emb),
        EpisodicMemory(client=chromadb.EphemeralClient(), path=tempfile.mkdtemp(),
                       collection_prefix="proto", embeddings=emb),
        UserFacts(InMemoryStore()),
    ]

    assert all(isinstance(b, ContextBlock) for b in blocks)
    assert [b.name for b in blocks] == ["procedure", "episodic", "facts"]
    assert [b.priority for b in blocks] == [DEFAULT_PRIORITIES[b.name] for b in blocks]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.lists(st.integers(1, 30), min_size=1, max_size=4), min_size=1, max_size=4),
    budget=st.integers(1, 120),
)
def test_the_result_always_fits_the_budget_and_keeps_the_order(sizes, budget) -> None:
    names = ["procedure", "knowledge", "episodic", "facts"][: len(sizes)]
    parts = []
    for name, block_sizes in zip(names, sizes, strict=False):
        items = [words(n, f"{name[0]}{j}_") for j, n in enumerate(block_sizes)]
        parts.append((name, BlockText.build(items, lambda xs: "\n".join(xs))))

    text, cuts = assemble_blocks(parts, max_tokens=budget, counter=count_words)

    if text is not None:
        assert count_words(text) <= budget
        positions = [text.find(f"{n[0]}0_0") for n in names if f"{n[0]}0_0" in text]
        assert positions == sorted(positions)
    removed = {c["block"] for c in cuts}
    for name, block in parts:
        if name not in removed:
            assert text is not None and block in text


def test_docstring_examples() -> None:
    result = doctest.testmod(blocks_module)
    assert result.attempted > 0 and result.failed == 0
