"""Episodic memory ranking levers: the turn answered, questions about now, stopwords, modes."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone

import pytest

from langchain_knowledge_inject._memory.episode_search import QUESTION_STOPWORDS
from langchain_knowledge_inject._memory.episodes import CONTEXT_CHARS, EpisodeRecord, prepare
from langchain_knowledge_inject._memory.episodic import EpisodicMemory, EpisodicOptions
from langchain_knowledge_inject._store.keyword import STOPWORDS
from langchain_knowledge_inject.errors import ConfigurationError

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def new_memory(make_episodic_memory):
    return functools.partial(make_episodic_memory, min_score=0.0)


def _dialogue(memory: EpisodicMemory, *, bulk: bool) -> None:
    turns = [
        ("Ben", "s1", "Did you go anywhere nice on holiday?"),
        ("Ana", "s1", "Just got back from Porto, the food alone was worth it."),
        ("Ben", "s2", "Which holiday photos should I print?"),
        ("Ana", "s2", "The blue ones, thanks."),
    ]
    records = [
        EpisodeRecord(text, speaker=who, thread_id=thread, episode_id=f"{thread}:t{i}",
                      date=NOW + timedelta(minutes=i))
        for i, (who, thread, text) in enumerate(turns)
    ]  # fmt: skip
    if bulk:
        memory.add_episodes(records, user_id="c1")
        return
    for r in records:
        memory.record(r.text, user_id="c1", speaker=r.speaker, thread_id=r.thread_id,
                      episode_id=r.episode_id, date=r.date)  # fmt: skip
    memory.flush()


@pytest.mark.parametrize("bulk", [True, False])
def test_a_turn_is_found_by_the_question_it_answers_and_returned_alone(new_memory, bulk) -> None:
    with_context = new_memory(options=EpisodicOptions(context_turn=True))
    without = new_memory(options=EpisodicOptions(context_turn=False))
    for memory in (with_context, without):
        _dialogue(memory, bulk=bulk)

    def found(memory: EpisodicMemory) -> dict[str, tuple[float, str]]:
        hits = memory.search("anywhere nice on holiday", user_id="c1", k=10, recency="off")
        return {e.episode_id: (e.similarity, e.text) for e in hits}

    got, bare = found(with_context), found(without)
    assert got["s1:t1"][1] == "Just got back from Porto, the food alone was worth it."
    assert got["s1:t1"][0] > bare["s1:t1"][0] + 0.1  # its own words do not match the question
    indexed = {
        d.metadata["ep_id"]: d.page_content
        for d in with_context.knowledge_base.search("x", k=10, min_score=0.0, tenant_id="c1")
    }
    assert indexed["s1:t0"] == "Did you go anywhere nice on holiday?"  # first of its session
    # the context is the previous turn of the same session, never of another one
    assert indexed["s2:t2"] == "Which holiday photos should I print?"
    assert indexed["s2:t3"] == "The blue ones, thanks.\nWhich holiday photos should I print?"


def test_only_a_question_of_the_other_speaker_is_context(new_memory) -> None:
    memory = new_memory(options=EpisodicOptions(context_turn=True, background=False))
    turns = [("Ben", "I love Porto."), ("Ana", "Me too."), ("Ana", "Where to next?"),
             ("Ana", "Maybe Oslo."), ("Ben", "Why Oslo?"), ("Ana", "The fjords.")]  # fmt: skip
    for i, (who, text) in enumerate(turns):
        memory.record(text, user_id="u", speaker=who, thread_id="t", episode_id=f"t{i}")
    docs = memory.knowledge_base.search("x", k=10, min_score=0.0, tenant_id="u")
    indexed = {d.metadata["ep_id"]: d.page_content for d in docs}

    assert indexed["t1"] == "Me too."  # the previous turn is no question
    assert indexed["t3"] == "Maybe Oslo."  # a question of the same speaker
    assert indexed["t5"] == "The fjords.\nWhy Oslo?"


@pytest.mark.parametrize("background", [True, False])
def test_the_question_answered_is_found_after_a_reopen(make_episodic_memory, tmp_path,
                                                       background) -> None:  # fmt: skip
    path = tmp_path / "store"
    first = make_episodic_memory(path=path, options=EpisodicOptions(background=background))
    first.record("Did you go anywhere nice on holiday?", user_id="c1", speaker="Ben",
                 thread_id="s1", episode_id="t0", date=NOW)  # fmt: skip
    first.record("Shall we meet on Friday?", user_id="c1", speaker="Ben", thread_id="s2",
                 episode_id="u0", date=NOW + timedelta(minutes=5))  # fmt: skip
    first.record("Sure, why not.", user_id="c1", speaker="Ana", thread_id="s2",
                 episode_id="u1", date=NOW + timedelta(minutes=6))  # fmt: skip
    first.close()

    again = make_episodic_memory(path=path, options=EpisodicOptions(background=background))
    for episode_id, who, thread, text, minutes in [
        ("t1", "Ana", "s1", "Just got back from Porto.", 10),  # answers the stored question
        ("u2", "Ana", "s2", "See you there.", 11),  # the stored turn before is no question
        ("t2", "Ben", "s1", "How was the food?", 12),
        ("t3", "Ana", "s1", "Amazing.", 13),  # the previous turn of this process
        ("v0", "Ana", "s3", "Hello!", 14),  # a new thread
    ]:
        again.record(text, user_id="c1", speaker=who, thread_id=thread, episode_id=episode_id,
                     date=NOW + timedelta(minutes=minutes))  # fmt: skip
    again.flush()
    docs = again.knowledge_base.search("x", k=20, min_score=0.0, tenant_id="c1")
    indexed = {d.metadata["ep_id"]: d.page_content for d in docs}

    assert indexed["t1"] == "Just got back from Porto.\nDid you go anywhere nice on holiday?"
    assert indexed["u2"] == "See you there."
    assert indexed["t3"] == "Amazing.\nHow was the food?"
    assert indexed["v0"] == "Hello!"
    found = again.search("anywhere nice on holiday", user_id="c1", k=2, recency="off")
    assert {e.episode_id for e in found} == {"t0", "t1"}


def test_the_indexed_text_holds_the_context_but_not_the_speaker() -> None:
    record = EpisodeRecord("Porto!", speaker="Ana", thread_id="s1", episode_id="e1")
    entry = prepare(record, user_id="c1", context="Where did you go? " * 40)

    assert entry is not None
    first, context = entry["text"].split("\n")
    assert first == "Porto!" and context.startswith("Where did you go?")
    assert len(context) <= CONTEXT_CHARS
    assert entry["meta"]["ep_text"] == "Porto!"  # what a search returns
    plain = prepare(record, user_id="c1")
    assert plain is not None and plain["text"] == "Porto!"


def test_an_exchange_or_a_note_takes_no_context(new_memory) -> None:
    memory = new_memory(options=EpisodicOptions(context_turn=True, background=False))
    memory.record("What's your dog called?", user_id="u", thread_id="t", speaker="Ben")
    memory.record_exchange("My dog is Rex.", "Nice!", user_id="u", thread_id="t")
    memory.remember("Ana likes tea.", user_id="u", thread_id="t")
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
