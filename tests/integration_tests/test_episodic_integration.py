"""Episodic memory with the real embedding model: a dialogue between two people.

A small two-person conversation over several sessions, imported in bulk and
recorded live in the background; questions name a speaker, a date, or ask
about the past, and the evidence turn must come back with the ids and metadata
given when it was recorded.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from langchain_knowledge_inject._memory.episodic import EpisodeRecord, EpisodicMemory

pytestmark = pytest.mark.integration

START = datetime(2024, 1, 6, 18, 0, tzinfo=timezone.utc)
SESSIONS = [
    [("Ana", "Hey Ben! Long time, how have you been?"),
     ("Ben", "Ana! Busy, but good. Guess what, I started a pottery class on Tuesdays."),
     ("Ana", "Nice. We adopted a greyhound from the shelter, his name is Pixel."),
     ("Ben", "Aww, send pictures of Pixel!"),
     ("Ana", "The weather has been so grey lately.")],
    [("Ben", "Morning Ana, got a minute?"),
     ("Ana", "Always. I just got back from Porto, the food was amazing."),
     ("Ben", "I've always wanted to see Porto."),
     ("Ana", "Also I cooked a mushroom risotto for friends on Saturday.")],
    [("Ana", "Ben! I have news."),
     ("Ana", "I handed in my notice, from Monday I'm a nurse at the children's hospital."),
     ("Ben", "A nurse, congratulations!"),
     ("Ben", "I sprained my ankle playing five-a-side, so no running for a while.")],
    [("Ben", "Hi Ana, sorry I've been quiet."),
     ("Ana", "No worries. We spent five days in Vienna, lots of cake and museums."),
     ("Ana", "And I made homemade dumplings last night, they fell apart but tasted great."),
     ("Ben", "Dumplings are hard, well done.")],
]  # fmt: skip
DATES = [START + timedelta(days=d) for d in (0, 40, 75, 120)]  # Jan 6, Feb 15, Mar 21, May 5
NOW = DATES[-1] + timedelta(days=1)


def records() -> list[EpisodeRecord]:
    return [
        EpisodeRecord(text, speaker=speaker, thread_id=f"s{s}", episode_id=f"s{s}:t{i}",
                      turn=i, date=DATES[s] + timedelta(minutes=2 * i), metadata={"session": s})
        for s, turns in enumerate(SESSIONS) for i, (speaker, text) in enumerate(turns)
    ]  # fmt: skip


@pytest.fixture
def memory(tmp_path, real_embeddings):
    memory = EpisodicMemory(path=tmp_path, embeddings=real_embeddings)
    memory.add_episodes(records(), user_id="ana-ben")
    yield memory
    memory.close()


def top(memory: EpisodicMemory, question: str, k: int = 3, **kw) -> list[str]:
    return [e.episode_id for e in memory.search(question, user_id="ana-ben", k=k, now=NOW, **kw)]


def test_a_fact_of_the_named_speaker_comes_back_with_its_ids_and_metadata(memory) -> None:
    found = memory.search("What is the name of Ana's dog?", user_id="ana-ben", k=3, now=NOW)

    assert found[0].episode_id == "s0:t2"
    assert (found[0].speaker, found[0].thread_id, found[0].turn) == ("Ana", "s0", "2")
    assert dict(found[0].metadata) == {"session": 0}
    assert "Pixel" in found[0].text


def test_the_question_of_a_speaker_is_not_answered_by_greetings_to_them(memory) -> None:
    assert top(memory, "What class did Ben start?", k=1) == ["s0:t1"]
    assert top(memory, "Why did Ben stop running?", k=1) == ["s2:t3"]
    # "How did ... get hurt?" is close to Ana's "how have you been?": the injury is second
    assert "s2:t3" in top(memory, "How did Ben get hurt?", k=2)


def test_a_date_in_the_question_picks_the_right_occurrence(memory) -> None:
    # two trips and two dishes: only the date tells them apart
    assert top(memory, "Which city did Ana visit in February?", k=1) == ["s1:t1"]
    assert top(memory, "Where did Ana travel last month?", k=1) == ["s3:t1"]
    assert top(memory, "What did Ana cook back in February?", k=1) == ["s1:t3"]
    assert top(memory, "What did Ana cook yesterday?", k=1) == ["s3:t2"]


def test_filters_and_a_stable_top_k(memory) -> None:
    assert set(top(memory, "travel", k=10, thread_id="s3")) <= {f"s3:t{i}" for i in range(4)}
    in_march = top(memory, "news", k=10, since=DATES[2], until=DATES[3])
    assert in_march and all(e.startswith("s2:") for e in in_march)
    bens = memory.search("job", user_id="ana-ben", speaker="Ben", k=5, now=NOW)
    assert len(bens) >= 2 and all(e.speaker == "Ben" for e in bens)  # a weak query: few pass
    for question in ("Where does Ana work?", "What did Ben say about running?"):
        assert top(memory, question, k=5) == top(memory, question, k=20)[:5]


def test_live_recording_in_the_background_then_recall(memory) -> None:
    eid = memory.record("My sister Clara is visiting us next week.", user_id="ana-ben",
                        speaker="Ana", episode_id="s4:t0", thread_id="s4",
                        date=NOW - timedelta(hours=1))  # fmt: skip
    memory.flush()

    assert eid == "s4:t0"
    assert top(memory, "Who is coming to visit Ana?", k=2)[0] == "s4:t0"
    assert memory.count("ana-ben") == sum(len(s) for s in SESSIONS) + 1


def test_a_turn_is_found_by_the_question_it_answers(tmp_path, real_embeddings) -> None:
    turns = [
        ("Ben", "Reading anything good at the moment?"),
        ("Ana", "A memoir by a mountain guide, I finished it in two nights."),
        ("Ben", "The weather has been so grey lately."),
        ("Ana", "Tell me about it, I need more sleep."),
    ]
    memory = EpisodicMemory(path=tmp_path, embeddings=real_embeddings)
    memory.add_episodes(
        [EpisodeRecord(text, speaker=who, thread_id="s0", episode_id=f"t{i}", date=START)
         for i, (who, text) in enumerate(turns)], user_id="u")  # fmt: skip
    try:
        found = memory.search("What has Ana been reading?", user_id="u", k=2, now=NOW)
        # indexed alone, Ana's answer loses to Ben's question ("Reading anything good...")
        assert found[0].episode_id == "t1"
        assert found[0].text == "A memoir by a mountain guide, I finished it in two nights."
    finally:
        memory.close()
