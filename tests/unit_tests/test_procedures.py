"""Procedures: validation, matching by similarity above the threshold, the [Procedure] block."""

from __future__ import annotations

import doctest

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_knowledge_inject._memory import procedures as procedures_module
from langchain_knowledge_inject._memory.procedures import (
    DEFAULT_PROCEDURE_THRESHOLD,
    Procedure,
    ProcedureLibrary,
    format_procedure,
)
from langchain_knowledge_inject.errors import ConfigurationError
from tests.unit_tests.fakes import CountingEmbedding

LEAVE = Procedure(
    "Request leave",
    "How to request paid leave",
    ["Open the HR portal", "Pick the dates", "Submit for approval"],
    examples=["how do I book a holiday?"],
)
EXPENSE = Procedure(
    "File an expense",
    "How to get a business expense reimbursed",
    ["Photograph the receipt", "Create a claim", "Attach the receipt"],
    examples=["how do I get my taxi fare back?"],
)


@pytest.fixture
def library() -> ProcedureLibrary:
    return ProcedureLibrary([LEAVE, EXPENSE], embeddings=CountingEmbedding(size=32), threshold=0.9)


def test_a_procedure_normalizes_its_steps_to_a_tuple_of_single_lines() -> None:
    p = Procedure("x", "d", ["one\n  two", "three"])

    assert p.steps == ("one two", "three")


@pytest.mark.parametrize(
    ("name", "steps"), [("", ["s"]), ("  ", ["s"]), ("n", []), ("n", ["ok", "  "])]
)
def test_a_procedure_needs_a_name_and_non_empty_steps(name, steps) -> None:
    with pytest.raises(ConfigurationError):
        Procedure(name, "d", steps)


@pytest.mark.parametrize(
    "kwargs", [{"threshold": 1.5}, {"threshold": -2}, {"max_tokens": 0}]
)
def test_invalid_library_options_are_refused(kwargs) -> None:
    with pytest.raises(ConfigurationError):
        ProcedureLibrary([LEAVE], embeddings=DeterministicFakeEmbedding(size=8), **kwargs)


def test_duplicate_procedure_names_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="unique"):
        ProcedureLibrary([LEAVE, LEAVE], embeddings=DeterministicFakeEmbedding(size=8))


def test_the_default_threshold_is_the_calibrated_value() -> None:
    lib = ProcedureLibrary([LEAVE], embeddings=DeterministicFakeEmbedding(size=8))

    assert lib.threshold == DEFAULT_PROCEDURE_THRESHOLD == 0.45


def test_an_example_request_selects_its_procedure(library) -> None:
    found = library.match("how do I get my taxi fare back?")

    assert found is not None
    assert found.procedure is EXPENSE
    assert found.score == pytest.approx(1.0)


def test_the_name_and_description_are_matched_too(library) -> None:
    found = library.match("Request leave: How to request paid leave")

    assert found is not None and found.procedure is LEAVE


def test_below_the_threshold_nothing_matches(library) -> None:
    ranked = library.scores("what is the weather in Lisbon?")

    assert library.match("what is the weather in Lisbon?") is None
    assert len(ranked) == 2 and ranked[0].score >= ranked[1].score
    assert ranked[0].score < 0.9


def test_a_score_exactly_at_the_threshold_matches() -> None:
    lib = ProcedureLibrary([LEAVE], embeddings=DeterministicFakeEmbedding(size=16), threshold=1.0)

    assert lib.match("how do I book a holiday?") is not None


def test_the_procedure_vectors_are_computed_once(library) -> None:
    for _ in range(3):
        library.match("how do I book a holiday?")

    emb = library.embeddings
    assert emb.documents_embedded == 4  # two procedures, one description and one example each
    assert emb.queries_embedded == 3


def test_render_gives_one_numbered_procedure_under_its_header(library) -> None:
    text = library.render(query="how do I book a holiday?", messages=[])

    assert text == format_procedure(LEAVE)
    lines = text.splitlines()
    assert lines[0] == "[Procedure]"
    assert '"Request leave"' in lines[1]
    assert lines[2:] == ["1. Open the HR portal", "2. Pick the dates", "3. Submit for approval"]
    assert text.count("[Procedure]") == 1


def test_render_is_none_without_a_match_or_a_query(library) -> None:
    assert library.render(query="tell me a joke", messages=[]) is None
    assert library.render(query="   ", messages=[]) is None
    empty = ProcedureLibrary([], embeddings=DeterministicFakeEmbedding(size=8))
    assert empty.render(query="x") is None


async def test_async_twins_agree_with_the_sync_methods(library) -> None:
    for query in ("how do I book a holiday?", "how do I get my taxi fare back?", "hello"):
        assert await library.arender(query=query, messages=[]) == library.render(query=query)
        sync, async_ = library.match(query), await library.amatch(query)
        assert (sync and sync.procedure) == (async_ and async_.procedure)


async def test_the_async_path_builds_the_index_too() -> None:
    lib = ProcedureLibrary([LEAVE], embeddings=CountingEmbedding(size=32), threshold=0.9)

    assert (await lib.amatch("how do I book a holiday?")).procedure is LEAVE
    assert lib.embeddings.documents_embedded == 2


def test_docstring_examples() -> None:
    result = doctest.testmod(procedures_module)
    assert result.attempted > 0 and result.failed == 0
