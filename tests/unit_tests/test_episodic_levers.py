"""Episodic memory ranking levers: the question a turn answers, a turn's statements, the
session, questions about now, question stopwords, search modes."""

from __future__ import annotations

import functools
import math
from datetime import datetime, timedelta, timezone

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langchain_knowledge_inject._memory import episode_recording, episodic, user_key
from langchain_knowledge_inject._memory.episode_search import (
    QUESTION_STOPWORDS,
    Candidate,
    rank,
    session_scores,
)
from langchain_knowledge_inject._memory.episodes import statements, statements_partition
from langchain_knowledge_inject._memory.episodic import (
    EpisodeRecord,
    EpisodicMemory,
    EpisodicOptions,
)
from langchain_knowledge_inject._store.keyword import STOPWORDS
from langchain_knowledge_inject.errors import ConfigurationError
from tests.unit_tests.fakes import WordHashEmbedding

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)


def _store(memory, records, bulk: bool) -> None:
    """The records through ``add_episodes`` (bulk), or one ``record`` call each, then flushed."""
    if bulk:
        memory.add_episodes(records, user_id="u")
    else:
        for r in records:
            memory.record(r.text, user_id="u", speaker=r.speaker, thread_id=r.thread_id,
                          episode_id=r.episode_id, date=r.date)  # fmt: skip
        memory.flush()


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


def _indexed(memory: EpisodicMemory, user: str = "u") -> dict[str, str]:
    """Each episode's indexed text (what the hybrid search matches), by episode id."""
    docs = memory.knowledge_base.search("x", k=50, min_score=0.0, tenant_id=user)
    return {d.metadata["ep_id"]: d.page_content for d in docs}


DIALOGUE = [
    ("Ben", "s1", "Welcome back! Did you go anywhere nice on holiday?"),
    ("Ana", "s1", "Just got back from Porto, the food alone was worth it."),
    ("Ben", "s2", "Which holiday photos should I print?"),
    ("Ana", "s2", "The blue ones, thanks."),
    ("Ana", "s2", "And frame the one of the bridge. Can you do it today?"),
    ("Ana", "s2", "Or tomorrow."),
]


@pytest.mark.parametrize("bulk", [True, False])
def test_a_turn_is_indexed_with_the_question_it_answers_and_returned_alone(
    new_memory, bulk
) -> None:
    memory = new_memory()
    records = [
        EpisodeRecord(text, speaker=who, thread_id=thread, episode_id=f"t{i}",
                      date=NOW + timedelta(minutes=i))
        for i, (who, thread, text) in enumerate(DIALOGUE)
    ]  # fmt: skip
    _store(memory, records, bulk)

    indexed = _indexed(memory)
    # the question that another speaker's previous turn of the same thread ends with
    assert indexed["t1"] == (
        "Just got back from Porto, the food alone was worth it.\n"
        "Did you go anywhere nice on holiday?"
    )
    assert indexed["t2"] == "Which holiday photos should I print?"  # another thread's turn
    assert indexed["t3"] == "The blue ones, thanks.\nWhich holiday photos should I print?"
    assert indexed["t4"] == "And frame the one of the bridge. Can you do it today?"  # Ana's
    assert indexed["t5"] == "Or tomorrow."  # her own question answers nothing
    found = memory.search("anywhere nice on holiday", user_id="u", k=10, recency="off")
    assert found[0].episode_id in {"t0", "t1"}
    porto = next(e for e in found if e.episode_id == "t1")
    assert porto.text == "Just got back from Porto, the food alone was worth it."


def test_an_exchange_is_indexed_with_the_question_of_the_reply_before_it(new_memory) -> None:
    memory = new_memory(options=EpisodicOptions(background=False))
    config = {"configurable": {"user_id": "u", "thread_id": "chat"}}
    history = [HumanMessage("Hi!", id="h1"), AIMessage("Hello! How was your trip to Porto?")]
    memory.record_turn(history, config=config)
    history += [HumanMessage("Lovely, we ate so well.", id="h2"), AIMessage("Glad to hear it.")]
    memory.record_turn(history, config=config)
    memory.record_exchange("Any news?", "None.", user_id="u", thread_id="other")

    assert sorted(_indexed(memory).values()) == [
        "Any news?\nNone.",
        "Hi!\nHello! How was your trip to Porto?",
        "Lovely, we ate so well.\nGlad to hear it.\nHow was your trip to Porto?",
    ]
    [episode] = memory.search("we ate so well", user_id="u", k=1, recency="off")
    assert (episode.text, episode.assistant_reply) == ("Lovely, we ate so well.",
                                                       "Glad to hear it.")  # fmt: skip


def test_context_turn_off_indexes_the_text_alone(new_memory) -> None:
    memory = new_memory(options=EpisodicOptions(background=False, context_turn=False))
    for i, (who, thread, text) in enumerate(DIALOGUE[:2]):
        memory.record(text, user_id="u", speaker=who, thread_id=thread, episode_id=f"t{i}")

    assert _indexed(memory)["t1"] == "Just got back from Porto, the food alone was worth it."


def test_the_last_turns_kept_are_bounded(new_memory, monkeypatch) -> None:
    monkeypatch.setattr(episode_recording, "THREADS_KEPT", 2)
    memory = new_memory(options=EpisodicOptions(background=False))
    for thread in ("a", "b", "c"):  # "a" is dropped when "c" comes
        memory.record("Where to?", user_id="u", speaker="Ben", thread_id=thread,
                      episode_id=f"{thread}0")  # fmt: skip
    for thread in ("b", "a"):
        memory.record("Oslo.", user_id="u", speaker="Ana", thread_id=thread,
                      episode_id=f"{thread}1")  # fmt: skip

    indexed = _indexed(memory)
    assert (indexed["b1"], indexed["a1"]) == ("Oslo.\nWhere to?", "Oslo.")
    assert len(memory.recorder._last_turn) == 2


def test_an_episode_gets_a_share_of_its_session_score() -> None:
    def hit(episode: str, similarity: float, thread: str, ts: float) -> Candidate:
        return Candidate(f"c-{episode}", episode, similarity, ts, "Ana", thread=thread)

    found = [hit("lone", 0.5, "s1", 2.0), hit("pair", 0.5, "s2", 1.0), hit("topic", 0.6, "s2", 1.0)]

    def order(weight: float) -> list[str]:
        ranked = rank(found, None, options=EpisodicOptions(session_weight=weight))
        return [c.episode_id for _, c in ranked]

    assert order(0.3) == ["topic", "pair", "lone"]  # s2 matches as a whole: 0.55 against 0.5
    assert order(0.0) == ["topic", "lone", "pair"]  # a tie: the newer first
    assert session_scores(found) == pytest.approx({"s1": 0.25, "s2": 0.55})


TOLD = (
    "Busy weeks at work lately, the kids started school, my sister visited, the garden is "
    "growing tomatoes and beans, we painted the kitchen blue. I took up kickboxing."
)
ASKED = "Kickboxing? Did you take up kickboxing?"


def _statements(memory: EpisodicMemory, user: str = "u") -> dict[str, list[str]]:
    """Each turn's indexed statements, by episode id."""
    kb, partition = memory.knowledge_base, statements_partition(user)
    hits = kb.search_hits("x", k=50, min_score=0.0, tenant_id=partition, mode="dense")
    docs = kb.get_by_ids([chunk_id for chunk_id, _ in hits], tenant_id=partition)
    found: dict[str, list[str]] = {}
    for d in docs:
        found.setdefault(d.metadata["ep_id"], []).append(d.page_content)
    return {eid: sorted(texts) for eid, texts in found.items()}


def test_statements_are_a_texts_sentences_that_are_not_questions() -> None:
    text = "Wow!  Nice pic.\nWhere was it? I went there too… Was it cold?"
    assert statements(text) == ["Wow!", "Nice pic.", "I went there too…"]
    assert statements("Where? When?") == []


@pytest.mark.parametrize("bulk", [True, False])
def test_a_turn_is_found_by_what_it_states_not_by_the_chat_around_it(
    make_episodic_memory, bulk
) -> None:
    def top(weight: float) -> list[tuple[str, float]]:
        memory = make_episodic_memory(
            embeddings=WordHashEmbedding(), min_score=0.0,
            options=EpisodicOptions(background=False, statement_weight=weight),
        )  # fmt: skip
        turns = [EpisodeRecord(TOLD, speaker="Ana", thread_id="s1", episode_id="told", date=NOW),
                 EpisodeRecord(ASKED, speaker="Ben", thread_id="s2", episode_id="asked",
                               date=NOW)]  # fmt: skip
        _store(memory, turns, bulk)
        found = memory.search("Who took up kickboxing?", user_id="u", k=2, recency="off")
        return [(e.episode_id, e.score - e.similarity) for e in found]

    # the question about kickboxing matches the asking turn best as a whole...
    assert [eid for eid, _ in top(0.0)] == ["asked", "told"]
    # ...and the statement "I took up kickboxing." alone: the turn that tells it comes first
    told, asked = top(0.5)
    assert [told[0], asked[0]] == ["told", "asked"]
    statement = 3 / math.sqrt(3 * 4)  # took, up, kickboxing of who, took, up, kickboxing
    bonuses = dict(top(0.0))
    assert told[1] - bonuses["told"] == pytest.approx(0.5 * statement, abs=1e-3)
    assert asked[1] == pytest.approx(bonuses["asked"], abs=1e-6)  # it states nothing


def test_the_statements_of_turns_are_indexed_apart_and_replaced_with_them(new_memory) -> None:
    memory = new_memory(options=EpisodicOptions(background=False))
    memory.record("Hi! I moved to Porto. Have you been?", user_id="u", speaker="Ana",
                  episode_id="t1")  # fmt: skip
    memory.record(ASKED, user_id="u", speaker="Ben", episode_id="t2")
    memory.record_exchange("I like tea.", "Noted.", user_id="u")
    memory.record("Ana likes tea.", user_id="u", kind="memory")
    assert _statements(memory) == {"t1": ["Hi!", "I moved to Porto."]}  # turns only
    assert memory.count("u") == 4  # statements are not episodes

    memory.record("I moved to Lisbon in the end.", user_id="u", speaker="Ana", episode_id="t1")
    assert _statements(memory) == {"t1": ["I moved to Lisbon in the end."]}
    memory.record("Did I tell you?", user_id="u", speaker="Ana", episode_id="t1")  # asks only
    assert _statements(memory) == {}

    memory.record("I moved again.", user_id="u", speaker="Ana", episode_id="t3")
    memory.delete_user("u")
    assert memory.knowledge_base.count(tenant_id=statements_partition("u")) == 0
    assert memory.search("moved", user_id="u") == []


def test_statement_weight_zero_indexes_no_statements(new_memory) -> None:
    memory = new_memory(options=EpisodicOptions(background=False, statement_weight=0))
    memory.record("I moved to Porto.", user_id="u", speaker="Ana", episode_id="t1")
    assert memory.knowledge_base.count(tenant_id=statements_partition("u")) == 0
    assert [e.episode_id for e in memory.search("Porto", user_id="u")] == ["t1"]


def test_no_user_key_can_name_a_statements_partition() -> None:
    partition = statements_partition(user_key("ana"))
    assert partition != "ana" and user_key(partition) == "ana"


def test_a_turn_beyond_the_statements_read_gets_the_lowest_cosine_read(
    make_episodic_memory, monkeypatch
) -> None:
    monkeypatch.setattr(episodic, "STATEMENTS", 1)
    memory = make_episodic_memory(embeddings=WordHashEmbedding(), min_score=0.0,
                                  options=EpisodicOptions(background=False))  # fmt: skip
    memory.record("I took up kickboxing.", user_id="u", speaker="Ana", episode_id="near")
    memory.record("I took up yoga.", user_id="u", speaker="Ana", episode_id="far")
    near, far = memory.search("Who took up kickboxing?", user_id="u", k=2, recency="off")
    assert [near.episode_id, far.episode_id] == ["near", "far"]
    read = 3 / math.sqrt(3 * 4)  # the one statement read: "I took up kickboxing."
    assert far.score - far.similarity == pytest.approx(near.score - near.similarity, abs=1e-3)
    assert near.score - near.similarity == pytest.approx(0.5 * read, abs=1e-3)  # no other bonus
