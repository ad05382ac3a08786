"""Does adding recent user turns to the retrieval query help follow-up questions?

A follow-up such as "and abroad?" carries almost nothing to search with; the
question it continues does. This benchmark runs ``KnowledgeInjector`` over the
sample HR knowledge base with the real embedding model (all-MiniLM-L6-v2,
hybrid search) and compares ``query_window=0`` (the current user message only)
with windows of 1 and 2 earlier user turns, on two kinds of turns:

- ``followup``: elliptical follow-ups that need the earlier turn;
- ``switch``: a new, self-contained question after an unrelated turn, where
  the earlier turn can only add noise.

A turn is a hit@k when a chunk holding the expected answer phrase is among the
first k chunks the injector would inject.

``query_window`` adds the earlier turns only to messages that look like
follow-ups (``placement.is_follow_up``: at most 4 words, or starting with
"and", "what about", ...); "window 1, every query" shows what happens without
that gate. The dev set was used to design the gate; the held-out set was
written after the gate was fixed.

Run: ``python benchmarks/followup_query.py`` (about a minute on 2 CPU cores).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from dataclasses import dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass(frozen=True)
class Turn:
    earlier: tuple[str, ...]
    question: str
    answer: str
    kind: str


def _f(earlier: str | tuple[str, ...], question: str, answer: str) -> Turn:
    return Turn(earlier if isinstance(earlier, tuple) else (earlier,), question, answer, "followup")


def _s(earlier: str, question: str, answer: str) -> Turn:
    return Turn((earlier,), question, answer, "switch")


TURNS: list[Turn] = [
    _f(
        "What is the daily meal allowance when travelling in my home country?",
        "and abroad?",
        "EUR 70 per day abroad",
    ),
    _f("What is the hotel cap per night?", "and in Paris?", "EUR 250 per night"),
    _f("How many days of annual leave do I get?", "and after five years?", "rises to 28 days"),
    _f(
        "How many weeks of parental leave does the birth parent get?",
        "and the partner?",
        "entitled to 6 weeks",
    ),
    _f("How long can I self-certify a sickness absence?", "and after that?", "doctor's note"),
    _f(
        "How many days per week can I work remotely?",
        "and from another country?",
        "up to 20 working days per calendar year",
    ),
    _f(
        "How much does the company pay for mileage?",
        "what about client dinners?",
        "EUR 120 per person",
    ),
    _f(
        "Who approves expense claims?",
        "and above 1,000 euros?",
        "also need approval from the finance director",
    ),
    _f("How many unused leave days can I carry over?", "until when?", "used by 31 March"),
    _f("How often are laptops replaced?", "and peripherals?", "EUR 300"),
    _f("Who do I tell about a lost laptop?", "how quickly?", "within 24 hours"),
    _f("What class are flights booked in?", "and for long flights?", "premium economy"),
    _f(
        "How much is the home-office allowance for a desk?", "and for internet?", "EUR 25 per month"
    ),
    _f("How much sick pay do I get?", "and after 20 days?", "half pay"),
    _f("How early must I request a long holiday?", "and a short one?", "two working days' notice"),
    _f(
        "How long is parental leave for the birth parent?",
        "is all of it paid in full?",
        "50% of salary",
    ),
    _f("How do I book a business trip?", "how far in advance?", "14 days before departure"),
    _f(
        "What happens to my laptop when I leave the company?",
        "within how many days?",
        "within 5 working days",
    ),
    _f(
        "What is the deadline for expense claims?",
        "when is it paid out?",
        "paid with that month's salary",
    ),
    _f(
        ("I'm travelling to London next month.", "Which tool do I book it in?"),
        "and the hotel limit there?",
        "EUR 250 per night",
    ),
    _f("Can I work from home during probation?", "what are the core hours?", "10:00 to 16:00"),
    _f(
        "How many keeping-in-touch days can I work during parental leave?",
        "and when I come back?",
        "80% of your",
    ),
    _f("Do adoptive parents get parental leave?", "how much notice do I give?", "15 weeks before"),
    _f("What receipts do I need for expenses?", "and for alcohol?", "Alcohol is reimbursed only"),
    _s(
        "How many days of annual leave do I get?",
        "What should I do if my laptop is stolen?",
        "within 24 hours",
    ),
    _s(
        "What is the hotel cap per night?",
        "When do I need a doctor's note for sickness?",
        "8th calendar",
    ),
    _s(
        "How much parental leave does a father get?",
        "How long do I have to submit an expense claim?",
        "within 30 days",
    ),
    _s(
        "Can I work from abroad?",
        "How many leave days can I carry over to next year?",
        "Up to 5 unused days",
    ),
    _s("What is the mileage rate?", "How often are laptops replaced?", "replaced every 3 years"),
    _s("How do I report a sickness absence?", "What is the home-office allowance?", "EUR 500"),
    _s(
        "What class are flights booked in?",
        "How much sick pay do I get?",
        "full pay for up to 20 working days",
    ),
    _s(
        "How much notice for parental leave?",
        "Can I expense alcohol?",
        "Alcohol is reimbursed only",
    ),
]
"""32 turns over the sample policies: 24 follow-ups and 8 topic switches."""

HELD_OUT: list[Turn] = [
    _f("How many days of sick leave can I self-certify?", "what then?", "doctor's note"),
    _f("What's the hotel cap in New York?", "and elsewhere?", "EUR 160 per night"),
    _f("How long is the partner's parental leave?", "can it be split?", "in up to three blocks"),
    _f("How much can I spend on a monitor or keyboard?", "how often?", "every 2 years"),
    _f(
        "Do I need approval to rent a car for a trip?",
        "from whom?",
        "prior approval from your line manager",
    ),
    _f(
        "When do I get paid for approved expense claims?",
        "and if I submit after 30 days?",
        "not reimbursed",
    ),
    _f(
        "How many remote days per week are allowed?",
        "is there a mandatory office day?",
        "anchor day",
    ),
    _f("What's the meal allowance abroad?", "and at home?", "EUR 45 per day"),
    _f(
        "What is the annual leave entitlement?",
        "can I take three weeks in a row?",
        "15 consecutive working days",
    ),
    _f(
        "Is travel insurance provided for business trips?",
        "do I have to register anything?",
        "Register every trip abroad",
    ),
    _f("What do I do if my phone is stolen?", "outside the office too?", "police report"),
    _f("How is the birth parent's leave paid?", "and for adoptive parents?", "same leave and pay"),
    _s(
        "How many weeks of parental leave do birth parents get?",
        "What's the hotel cap in London?",
        "EUR 250",
    ),
    _s("What's the mileage rate?", "How long is parental leave for partners?", "6 weeks"),
    _s("How often are laptops replaced?", "When must I report a sick day?", "before 10:00"),
    _s("What is the home-office allowance?", "Sick pay?", "full pay for up to 20 working days"),
    _s("How much notice for parental leave?", "Meal allowance abroad?", "EUR 70"),
    _s("Can I work from abroad?", "Laptop replacement cycle?", "replaced every 3 years"),
    _s("What class are flights?", "How many leave days carry over?", "5 unused days"),
    _s("Do I need a receipt for expenses?", "How do I report a stolen laptop?", "within 24 hours"),
]
"""20 turns written after the gate was fixed (12 follow-ups, 8 switches): a held-out check."""


def _normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text).lower()


def _messages(turn: Turn) -> list:
    from langchain_core.messages import AIMessage, HumanMessage

    messages: list = []
    for text in turn.earlier:
        messages += [HumanMessage(text), AIMessage("(answer)")]
    return [*messages, HumanMessage(turn.question)]


def _hits(docs, answer: str) -> tuple[bool, bool]:
    found = [_normalize(answer) in _normalize(d.page_content) for d in docs]
    return bool(found and found[0]), any(found)


def variants(kb, k: int = 4) -> dict:
    """name -> function(turn) -> retrieved documents."""
    from langchain_knowledge_inject import KnowledgeInjector

    def injector(window: int):
        inj = KnowledgeInjector(kb, top_k=k, query_window=window)
        return lambda turn: inj.retrieve(_messages(turn), inj.config).documents

    def always(window: int):  # the window added to every query, follow-up or not
        return lambda turn: kb.search("\n".join([*turn.earlier[-window:], turn.question]), k=k)

    return {
        "current turn only (query_window=0)": injector(0),
        "window 1, every query": always(1),
        "window 1, follow-ups only (query_window=1)": injector(1),
        "window 2, follow-ups only (query_window=2)": injector(2),
    }


def evaluate(kb, turns: list[Turn], k: int = 4) -> list[tuple[str, str, int, float, float]]:
    """Rows of (variant, kind, n, hit@1, hit@k)."""
    rows = []
    for name, retrieve in variants(kb, k).items():
        for kind in ("followup", "switch"):
            subset = [t for t in turns if t.kind == kind]
            hits = [_hits(retrieve(t), t.answer) for t in subset]
            n = len(subset)
            rows.append((name, kind, n, sum(h[0] for h in hits) / n, sum(h[1] for h in hits) / n))
    return rows


def main() -> int:
    from langchain_knowledge_inject.sample_data import build_sample_knowledge_base

    with tempfile.TemporaryDirectory() as tmp:
        kb = build_sample_knowledge_base(path=tmp)
        print(f"sample knowledge base: {kb.info.chunk_count} chunks, hybrid search, k=4")
        for label, turns in (("dev set", TURNS), ("held-out set", HELD_OUT)):
            print(f"\n{label}")
            print(f"{'variant':<44} {'kind':>9} {'n':>3} {'hit@1':>6} {'hit@4':>6}")
            for name, kind, n, h1, hk in evaluate(kb, turns):
                print(f"{name:<44} {kind:>9} {n:>3} {h1:>6.2f} {hk:>6.2f}")
        kb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
