"""An episode search ranks hits by kept fields and reads back only what it returns."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone

import pytest
from langchain_core.documents import Document

from langchain_knowledge_inject._memory.episode_search import Candidate, EpisodeFields
from langchain_knowledge_inject._memory.episodic import EpisodeRecord, EpisodicOptions
from langchain_knowledge_inject.errors import RetrievalError

NOW = datetime(2024, 6, 12, 12, 0, tzinfo=timezone.utc)
JUNE, MAY = NOW - timedelta(days=2), datetime(2024, 5, 10, tzinfo=timezone.utc)


@pytest.fixture
def new_memory(make_episodic_memory):
    return functools.partial(
        make_episodic_memory, min_score=0.0, options=EpisodicOptions(background=False)
    )


def _spy(memory, monkeypatch) -> list[list[str]]:
    """The episode ids read back by each ``get_by_ids`` call of the memory's knowledge base."""
    kb, calls = memory.knowledge_base, []
    real = kb.get_by_ids

    def get_by_ids(ids, **kwargs):
        docs = real(ids, **kwargs)
        calls.append([d.metadata["ep_id"] for d in docs])
        return docs

    monkeypatch.setattr(kb, "get_by_ids", get_by_ids)
    monkeypatch.setattr(kb, "search", lambda *a, **k: pytest.fail("read back the whole pool"))
    return calls


def test_a_search_reads_back_only_the_episodes_it_returns(new_memory, monkeypatch) -> None:
    memory = new_memory()
    memory.add_episodes(
        [EpisodeRecord(f"We talked about topic {i} and the garden.", speaker="Ana",
                       thread_id=f"s{i % 3}", episode_id=f"e{i}", date=JUNE) for i in range(30)],
        user_id="u",
    )  # fmt: skip
    first = memory.search("the garden", user_id="u", k=3, now=NOW)
    calls = _spy(memory, monkeypatch)

    again = memory.search("the garden", user_id="u", k=3, now=NOW)

    assert [e.episode_id for e in again] == [e.episode_id for e in first]
    assert calls == [[e.episode_id for e in again]]  # one read, of the 3 returned
    assert again[0].text.endswith("the garden.") and again[0].speaker == "Ana"


def test_an_episode_written_again_is_ranked_by_its_new_date(new_memory) -> None:
    memory = new_memory(
        options=EpisodicOptions(background=False, recency_weight=0)
    )
    memory.record("We planted tomatoes.", user_id="u", episode_id="a", date=JUNE)
    memory.record("We planted tomatoes and basil.", user_id="u", episode_id="b", date=MAY)
    before = memory.search("What did we plant in May?", user_id="u", k=2, now=NOW)
    assert [e.episode_id for e in before] == ["b", "a"]  # "b" is the one in May

    memory.record("We planted tomatoes.", user_id="u", episode_id="a", date=MAY)  # same text
    memory.record("We planted tomatoes and basil.", user_id="u", episode_id="b", date=JUNE)
    after = memory.search("What did we plant in May?", user_id="u", k=2, now=NOW)

    assert [e.episode_id for e in after] == ["a", "b"]
    assert after[0].date == MAY and after[0].score > after[1].score + 0.4  # the date bonus


def test_a_deleted_user_is_forgotten(new_memory) -> None:
    memory = new_memory()
    memory.record("I adopted a dog called Rex.", user_id="u", episode_id="rex", date=JUNE)
    assert [e.episode_id for e in memory.search("dog", user_id="u")] == ["rex"]
    memory.delete_user("u")
    assert memory.search("dog", user_id="u") == []
    memory.record("I adopted a cat called Tom.", user_id="u", episode_id="rex", date=MAY)
    found = memory.search("adopted", user_id="u")
    assert [e.text for e in found] == ["I adopted a cat called Tom."]


def _doc(cid: str, episode: str, ts: float) -> Document:
    return Document("x", id=cid, metadata={"ep_id": episode, "ep_ts": ts, "ep_thread": "t",
                                           "ep_speaker": "Ana"})  # fmt: skip


def test_fields_are_read_once_and_dropped_when_their_episode_is_written() -> None:
    stored = {"c1": _doc("c1", "e1", 1.0), "c2": _doc("c2", "e2", 2.0)}
    reads: list[list[str]] = []

    def read(ids, user):
        reads.append(list(ids))
        return [stored[i] for i in ids if i in stored]

    fields = EpisodeFields(read)
    hits = [("c2", 0.9, 0.0), ("gone", 0.8, 0.0), ("c1", 0.5, 0.0)]
    assert fields.candidates(hits, "u") == [
        Candidate("c2", "e2", 0.9, 2.0, "Ana", thread="t"),
        Candidate("c1", "e1", 0.5, 1.0, "Ana", thread="t"),
    ]  # a chunk deleted since the search is left out
    fields.candidates(hits, "u")
    assert reads == [["c2", "gone", "c1"], ["gone"]]  # kept, only the missing one read again

    stored["c1"] = _doc("c1", "e1", 7.0)  # written again: same chunk, a new date
    fields.wrote("u", ["e1"])
    assert fields.candidates([("c1", 0.5, 0.0)], "u")[0].ts == 7.0
    assert fields.candidates([("c1", 0.5, 0.0)], "other")[0].ts == 7.0  # users apart
    assert reads[-2:] == [["c1"], ["c1"]]
    assert fields.speakers("u") == {"Ana"}  # learned from what was read
    fields.wrote("u", ["e9"], speakers=["Ben", ""])
    assert fields.speakers("u") == {"Ana", "Ben"}
    fields.wrote("u")  # the user deleted: nothing of theirs is kept
    assert fields.speakers("u") == set() and fields.candidates([("c2", 0.9, 0.0)], "u")
    assert reads[-1] == ["c2"]


def test_the_cosine_of_a_hit_is_kept_and_min_score_is_judged_on_the_better_score() -> None:
    fields = EpisodeFields(lambda ids, user: [_doc(i, f"e-{i}", 1.0) for i in ids])
    found = fields.candidates([("c1", 0.15, 0.2), ("c2", 0.4, 0.3)], "u")

    assert [(c.similarity, c.dense) for c in found] == [(0.15, 0.2), (0.4, 0.3)]
    assert [c.evidence for c in found] == [0.2, 0.4]  # the cosine alone, or the hybrid score
    assert fields.candidates([("c1", 0.15, 0.0)], "u")[0].evidence == 0.15  # keyword mode


def test_a_read_that_overlaps_a_write_is_used_but_not_kept() -> None:
    stored = {"c1": _doc("c1", "e1", 1.0)}
    fields: EpisodeFields

    def read(ids, user):
        old = [stored[i] for i in ids]
        stored["c1"] = _doc("c1", "e1", 5.0)  # the writer writes it meanwhile
        fields.wrote(user, ["e1"])
        return old

    fields = EpisodeFields(read)
    assert fields.candidates([("c1", 0.5, 0.0)], "u")[0].ts == 1.0
    assert fields.candidates([("c1", 0.5, 0.0)], "u")[0].ts == 5.0  # read again, not the old one


def test_at_most_max_kept_fields_are_kept() -> None:
    stored = {f"c{i}": _doc(f"c{i}", f"e{i}", float(i)) for i in range(10)}
    reads: list[list[str]] = []
    fields = EpisodeFields(lambda ids, user: reads.append(list(ids)) or
                           [stored[i] for i in ids], max_kept=4)  # fmt: skip
    fields.candidates([(f"c{i}", 0.5, 0.0) for i in range(3)], "u")
    fields.candidates([(f"c{i}", 0.5, 0.0) for i in range(3, 6)], "v")  # 6 > 4: the rest dropped
    fields.candidates([("c3", 0.5, 0.0)], "v")  # kept
    fields.candidates([("c0", 0.5, 0.0)], "u")  # dropped: read again
    assert reads[2:] == [["c0"]]


def test_a_store_failure_while_reading_back_is_a_retrieval_error(new_memory, monkeypatch) -> None:
    memory = new_memory()
    memory.record("I adopted a dog called Rex.", user_id="u", episode_id="rex", date=JUNE)

    def broken(ids, **kwargs):
        raise OSError("disk gone")

    monkeypatch.setattr(memory.knowledge_base, "get_by_ids", broken)
    with pytest.raises(RetrievalError, match="disk gone"):
        memory.search("dog", user_id="u")
