"""One ledger (issue 31, leak class 6): parallel calls of one turn see each other.

A summary is judged with what its thread already released and recorded before it
is released, under the thread's lock; refusals' written guidance counts; a
summarizer that remembers another thread's chunks cannot release their values.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from itertools import count
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_knowledge_inject import create_knowledge_base_search_tool, create_knowledge_graph
from langchain_knowledge_inject._restricted.boundary import release
from langchain_knowledge_inject._restricted.ledger import Ledger
from tests.unit_tests.fakes import RecordingChatModel
from tests.unit_tests.restricted_harness import TOOL_NAME, ListKB, hostile_summarizer

BUYER = "Divestment. The logistics unit will be sold to Blue Harbor Logistics after the summer."
QUESTION = "Who is buying the logistics unit?"
FRAGMENTS = ["The first word is Blue.", "The second word is Harbor.", "The last word is Logistics."]
HANG_GUARD = 30


def _reply(summary: str, *, decision: str = "answer", guidance: str = "Answer.") -> dict:
    reason = "answerable" if decision == "answer" else "sensitive_content"
    return {"decision": decision, "reason": reason, "summary": summary, "answer_guidance": guidance}


def _fragment_summarizer(fragments: list[str], barrier: threading.Barrier | None = None) -> Any:
    """Each call returns the next fragment; with ``barrier``, every call waits for the others."""
    calls = count()
    lock = threading.Lock()

    def reply(messages: Any) -> str:
        with lock:
            fragment = fragments[next(calls) % len(fragments)]
        if barrier is not None:
            barrier.wait(timeout=HANG_GUARD)  # all calls are past the model before any is judged
        return hostile_summarizer(_reply(fragment)).reply(messages)

    return hostile_summarizer(reply)


def test_parallel_calls_of_one_thread_see_each_other():
    """Three releases at once on one thread: the last one judged sees the other two."""
    barrier = threading.Barrier(len(FRAGMENTS))
    model = _fragment_summarizer(FRAGMENTS, barrier)
    ledger = Ledger()
    docs = [Document(BUYER, id="c1", metadata={"source": "deal.md"})]

    def one(_: int) -> Any:
        return release(QUESTION, docs, model=model, thread="t-parallel", ledger=ledger).summary

    with ThreadPoolExecutor(len(FRAGMENTS)) as pool:
        out = list(pool.map(one, range(len(FRAGMENTS))))
    answered = [s for s in out if s.decision == "answer"]
    assert len(answered) < len(FRAGMENTS)  # the name never reaches the main model whole
    assert any(s.reason == "leak_detected" for s in out)
    with ledger.hold("t-parallel") as released:
        assert len(released) == len(answered)  # what was shown, and only that, is recorded


def test_four_tool_calls_of_one_ai_message_never_add_up():
    """ToolNode runs the four calls of one AI message at once; one ledger judges them."""
    calls = [
        {"name": TOOL_NAME, "args": {"query": QUESTION}, "id": f"call-{i}", "type": "tool_call"}
        for i in range(4)
    ]
    main = RecordingChatModel(script=[AIMessage("", tool_calls=calls), AIMessage("done")])
    summarizer = _fragment_summarizer([*FRAGMENTS, "It is a buyer."])
    kb = ListKB([BUYER])
    tool = create_knowledge_base_search_tool(kb, summarizer_model=summarizer, restricted=True)
    graph = create_knowledge_graph(
        main, kb, summarizer_model=summarizer, tools=[tool], restricted=True, retrieval="tool",
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    graph.invoke({"messages": [HumanMessage(QUESTION)]}, {"configurable": {"thread_id": "t4"}})
    seen = "\n".join(m.text for received in main.received for m in received)
    assert not all(fragment in seen for fragment in FRAGMENTS)
    assert "reason: leak_detected" in seen


def test_a_refusals_guidance_counts():
    """Guidance carried by a refusal is recorded: the rest of the name is then refused."""
    ledger = Ledger()
    docs = [Document(BUYER, id="c1")]
    first = hostile_summarizer(
        _reply("", decision="refuse", guidance="Say it is restricted; the first word is Blue.")
    )
    out = release(QUESTION, docs, model=first, thread="t-guidance", ledger=ledger).summary
    assert out.decision == "refuse" and "Blue" in out.answer_guidance  # shown, so recorded
    rest = hostile_summarizer(_reply("The other words are Harbor and Logistics."))
    second = release(QUESTION, docs, model=rest, thread="t-guidance", ledger=ledger)
    assert second.summary.reason == "leak_detected" and "fragment" in second.codes


def test_another_threads_values_are_refused_without_its_ledger():
    """A summarizer that remembers thread A's chunks cannot release their values in B."""
    ledger = Ledger()
    vault = [Document("The vault door code is 4817 and the buyer is Halvorsen.", id="a")]
    release("What opens the vault?", vault, model=hostile_summarizer(_reply("Ask facilities.")),
            thread="user-a", ledger=ledger)  # fmt: skip
    other = [Document("Expense claims need a receipt.", id="b")]
    for remembered in ("The code is 4817.", "Ask Halvorsen.", "Code: four eight one seven"):
        out = release("How do I claim expenses?", other,
                      model=hostile_summarizer(_reply(remembered)), thread="user-b",
                      ledger=ledger)  # fmt: skip
        assert out.summary.reason == "leak_detected", remembered


def test_the_ledgers_limits():
    """Per thread its last entries; threads beyond the limit dropped, least recent first."""
    ledger = Ledger(threads=2, entries=3)
    for thread in ("a", "b"):
        with ledger.hold(thread) as released:
            released.extend(range(5))
    with ledger.hold("a") as released:
        assert list(released) == [2, 3, 4]
    with ledger.hold("c") as released:  # "b" is now the least recently used: dropped
        released.append(9)
    with ledger.hold("b") as released:
        assert list(released) == []
    with ledger.hold(None) as released:
        released.append(1)
    with ledger.hold(None) as released:
        assert list(released) == []  # no thread: judged alone, nothing kept
