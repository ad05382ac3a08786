"""Token counting and the token budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_knowledge_inject._turn.tokens import approximate_token_count, fit_to_budget
from langchain_knowledge_inject.errors import ConfigurationError

# Reference texts with their exact cl100k_base token counts (as tiktoken computes them;
# counted once offline, pinned here so the test needs no tokenizer download).
REFERENCE = [
    (
        "Employees are entitled to 25 days of paid annual leave per calendar year. Leave requests "
        "must be submitted through the HR portal at least 10 working days in advance.",
        33,
    ),
    (
        "The company reimburses travel expenses for business trips approved by a line manager. "
        "Economy class is the default for flights under 6 hours; receipts must be uploaded "
        "within 30 days.",
        36,
    ),
    (
        "## Remote work\n\n"
        "- Staff may work from home up to **three days** a week after probation.\n"
        "- Equipment (laptop, monitor, headset) is provided.\n- Internet stipend: 30 EUR/month.\n",
        44,
    ),
    (
        "def fit(documents, *, max_tokens):\n    kept = []\n    for doc in documents:\n"
        "        if count(doc) > max_tokens:\n            break\n        kept.append(doc)\n"
        "    return kept\n",
        40,
    ),
    (
        "[Retrieved Knowledge]\n[K1a2b] Source: leave_policy.md\nCategory: leave\n"
        "Relevance Score: 0.83\nUnused leave of up to 5 days may be carried over to the next "
        "year and must be taken before 31 March.\n---\n"
        "If the answer is not in the information above, say so honestly.",
        70,
    ),
    (
        "Internationalization considerations: organizations headquartered overseas frequently "
        "misunderstand counterintuitive responsibilities.",
        14,
    ),
]


@pytest.mark.parametrize(("text", "exact"), REFERENCE)
def test_approximation_is_close_to_cl100k_and_errs_high(text, exact):
    estimate = approximate_token_count(text)
    assert exact * 0.95 <= estimate <= exact * 1.5


def test_approximation_in_aggregate():
    estimate = sum(approximate_token_count(t) for t, _ in REFERENCE)
    exact = sum(n for _, n in REFERENCE)
    assert 1.0 <= estimate / exact <= 1.15  # measured: 263 / 237 = 1.11


def test_against_tiktoken_when_its_encoding_is_available():
    tiktoken = pytest.importorskip("tiktoken")
    try:
        enc = tiktoken.get_encoding("cl100k_base")
    except Exception:
        pytest.skip("cl100k_base encoding not available offline")
    for text, exact in REFERENCE:
        assert len(enc.encode(text)) == exact


def test_edge_cases():
    assert approximate_token_count("") == 0
    assert approximate_token_count("word") == 1
    assert approximate_token_count("日本語") == 3
    assert approximate_token_count("a" * 80) == 10
    sentence = " The leave policy applies."
    assert approximate_token_count(sentence * 100) == 100 * approximate_token_count(sentence) == 500


def _docs(*sizes: int) -> list[Document]:
    return [Document(" ".join(["word"] * n), id=f"d{i}") for i, n in enumerate(sizes)]


def _words(text: str) -> int:
    return len(text.split())


def _render(docs) -> str:
    return "HEADER\n" + "\n".join(d.page_content for d in docs)


def test_budget_fills_by_rank_and_stops_at_the_first_chunk_that_does_not_fit():
    docs = _docs(10, 10, 50, 5)
    kept, used = fit_to_budget(docs, max_tokens=30, counter=_words, render=_render)
    # the 5-word chunk would fit, but a lower-ranked chunk never jumps the queue
    assert [d.id for d in kept] == ["d0", "d1"]
    assert used == 21 == _words(_render(kept))


def test_budget_keeps_everything_when_it_fits():
    docs = _docs(3, 4)
    kept, used = fit_to_budget(docs, max_tokens=100, counter=_words, render=_render)
    assert kept == docs and used == 8


def test_budget_never_cuts_a_chunk():
    kept, used = fit_to_budget(_docs(100), max_tokens=50, counter=_words, render=_render)
    assert (kept, used) == ([], 0)


def test_budget_with_the_default_counter():
    docs = _docs(40, 40, 40)
    kept, used = fit_to_budget(docs, max_tokens=90, counter=approximate_token_count, render=_render)
    assert len(kept) == 2 and used <= 90
    assert used == approximate_token_count(_render(kept))


@pytest.mark.parametrize("bad", [0, -5])
def test_budget_must_be_positive(bad):
    with pytest.raises(ConfigurationError) as info:
        fit_to_budget(_docs(1), max_tokens=bad, counter=_words, render=_render)
    assert info.value.option == "max_tokens"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=60), max_size=8), st.integers(1, 200))
def test_budget_result_is_a_prefix_within_budget(sizes, budget):
    docs = _docs(*sizes)
    kept, used = fit_to_budget(docs, max_tokens=budget, counter=_words, render=_render)
    assert kept == docs[: len(kept)]
    assert used <= budget
    if kept:
        assert used == _words(_render(kept))
    if len(kept) < len(docs):
        assert _words(_render(docs[: len(kept) + 1])) > budget
