"""Episodic memory ranking levers: questions about now, question stopwords, search modes."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone

import pytest

from langchain_knowledge_inject._memory.episode_search import QUESTION_STOPWORDS
from langchain_knowledge_inject._memory.episodic import EpisodicMemory, EpisodicOptions
from langchain_knowledge_inject._store.keyword import STOPWORDS
from langchain_knowledge_inject.errors import ConfigurationError

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def new_memory(make_episodic_memory):
    return functools.partial(make_episodic_memory, min_score=0.0)


def test_the_indexed_text_is_the_text_and_the_reply(new_memory) -> None:
    memory = new_memory(options=EpisodicOptions(background=False))
    memory.record("What's your dog called?", user_id="u", thread_id="t", speaker="Ben")
    memory.record_exchange("My dog is Rex.", "Nice!", user_id="u", thread_id="t")
    memory.record("Ana likes tea.", user_id="u", thread_id="t", kind="memory")
    docs = memory.knowledge_base.search("dog Rex tea", k=10, min_score=0.0, tenant_id="u")
    texts = sorted(d.page_content for d in docs)
    assert texts == sorted(["What's your dog called?", "My dog is Rex.\nNice!", "Ana likes tea."])


def test_the_newest_statement_wins_when_the_question_asks_about_now(new_memory) -> None:
    memory = new_memory(options=EpisodicOptions(recency_weight=0.0, current_weight=0.5))
    old, new = "I live in Lisbon.", "I live in Porto."
    memory.record(old, user_id="u1", episode_id="old", date=NOW - timedelta(days=200))
    memory.record(new, user_id="u1", episode_id="new", date=NOW - timedelta(days=20))
    memory.record("I live near the sea.", user_id="u1", episode_id="sea", date=NOW)

    def top(question: str) -> list[str]:
        hits = memory.search(question, user_id="u1", now=NOW, k=3)
        return [e.episode_id for e in hits]

    now_order = top("Where do I live now?")
    assert now_order.index("new") < now_order.index("old")
    before = top("Where did I live before Porto?")  # looks back: no preference for new
    plain = memory.search("Where did I live before Porto?", user_id="u1", now=NOW, k=3,
                          recency="off")  # fmt: skip
    assert before == [e.episode_id for e in plain]


def test_question_words_can_be_left_out_of_the_keyword_side(new_memory) -> None:
    turns = [("q", "Ben", "What did you do last night, did you go out?"),
             ("a", "Ana", "Cooked pasta with my sister.")]  # fmt: skip
    question, lucene = (
        new_memory(options=EpisodicOptions(search_mode="keyword")),
        new_memory(options=EpisodicOptions(search_mode="keyword", keyword_stopwords=None)),
    )
    for memory in (question, lucene):
        for episode_id, who, text in turns:
            memory.record(text, user_id="u", speaker=who, thread_id="t", episode_id=episode_id)
        memory.flush()

    def found(memory: EpisodicMemory) -> list[str]:
        hits = memory.search("What did you cook?", user_id="u", k=5, recency="off")
        return [e.episode_id for e in hits]

    assert found(question) == ["a"]
    assert "q" in found(lucene)  # Lucene's 33: matched by "what", "did" and "you" alone
    assert question.options.keyword_stopwords == QUESTION_STOPWORDS  # the default
    assert lucene.options.keyword_stopwords == STOPWORDS
    upper = EpisodicOptions(keyword_stopwords=(w.upper() for w in STOPWORDS))  # a generator
    assert upper.keyword_stopwords == STOPWORDS
    with pytest.raises(ConfigurationError, match="keyword_stopwords"):
        EpisodicOptions(keyword_stopwords="what did")


@pytest.mark.parametrize("option", ["speaker_weight", "current_weight"])
def test_negative_weights_are_refused(option) -> None:
    with pytest.raises(ConfigurationError, match=option):
        EpisodicOptions(**{option: -0.1})


def test_the_search_mode_is_passed_to_the_knowledge_base(new_memory) -> None:
    keyword = new_memory(options=EpisodicOptions(search_mode="keyword"))
    keyword.record("We adopted a greyhound called Pixel.", user_id="u", episode_id="dog")
    keyword.record("The weather is grey.", user_id="u", episode_id="weather")
    keyword.flush()

    found = keyword.search("greyhound", user_id="u", k=5, recency="off")

    assert [e.episode_id for e in found] == ["dog"]  # keyword mode: no match, no candidate
    with pytest.raises(ConfigurationError, match="search_mode"):
        EpisodicOptions(search_mode="fuzzy")
