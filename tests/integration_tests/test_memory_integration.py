"""The memory blocks with the real embedding model (all-MiniLM-L6-v2, offline).

Also the calibration set of the procedure threshold: 8 procedures, 40 requests
that should select one, 40 that should select none (questions on the same
topics that do not ask for the procedure, and other topics). Run this file with
``-s`` to see the figures.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.sqlite import SqliteStore

from langchain_knowledge_inject._memory.episodic import EpisodicMemory
from langchain_knowledge_inject._memory.facts import UserFacts
from langchain_knowledge_inject._memory.procedures import (
    DEFAULT_PROCEDURE_THRESHOLD,
    Procedure,
    ProcedureLibrary,
)
from langchain_knowledge_inject._store.embeddings import default_embeddings
from langchain_knowledge_inject._turn.blocks import assemble_blocks

pytestmark = pytest.mark.integration

PROCEDURES = [
    Procedure("Request leave", "How to request paid annual leave or a holiday",
              ["Open the HR portal", "Choose Leave > New request", "Pick the dates",
               "Submit for your manager's approval"]),
    Procedure("File an expense claim", "How to get a business expense reimbursed",
              ["Photograph the receipt", "Create a claim in the expenses app",
               "Attach the receipt", "Submit before the end of the month"]),
    Procedure("Reset a password", "How to reset a forgotten account password",
              ["Open the login page", "Click 'Forgot password'", "Follow the emailed link"]),
    Procedure("Report sick", "How to report that you are ill and cannot work",
              ["Tell your manager before 9am", "Record the absence in the HR portal",
               "Send a doctor's note after three days"]),
    Procedure("Book a meeting room", "How to reserve a meeting room in the office",
              ["Open the calendar", "Add a room as a resource", "Confirm the booking"]),
    Procedure("Onboard a new hire", "Steps to onboard a new employee on their first day",
              ["Prepare the laptop", "Create the accounts", "Assign a buddy",
               "Schedule the welcome session"]),
    Procedure("Request a new laptop", "How to order a replacement or new laptop from IT",
              ["Open an IT ticket", "Choose the laptop model", "Get manager approval"]),
    Procedure("Report a security incident", "What to do after a phishing email or data leak",
              ["Do not click anything else", "Report it to security@", "Change your password"]),
]  # fmt: skip

SHOULD_MATCH = {
    "Request leave": [
        "How do I request time off?", "I want to book two weeks of holiday, how?",
        "what's the process for taking annual leave", "How can I ask for vacation days?",
        "Can you walk me through requesting leave?",
    ],
    "File an expense claim": [
        "How do I get reimbursed for a client dinner?", "what's the process to claim back expenses",
        "I paid for a taxi on a business trip, how do I get the money back?",
        "How do I submit a receipt for reimbursement?", "steps to file an expense report",
    ],
    "Reset a password": [
        "I forgot my password", "How do I reset my login password?",
        "I'm locked out of my account, how do I change the password?",
        "password reset steps please", "Can't remember my password, what now?",
    ],
    "Report sick": [
        "I'm ill today, what do I need to do?", "How do I call in sick?",
        "I have the flu and can't come to work", "what's the procedure when I'm sick",
        "How do I report a sick day?",
    ],
    "Book a meeting room": [
        "How do I reserve a conference room?", "I need a room for a meeting tomorrow",
        "How can I book a meeting room?", "steps to book a room for my team meeting",
        "Where do I reserve meeting space?",
    ],
    "Onboard a new hire": [
        "A new employee starts Monday, what do I do?", "How do I onboard someone joining my team?",
        "checklist for a new hire's first day", "What are the onboarding steps?",
        "My new team member arrives tomorrow, how do I get them set up?",
    ],
    "Request a new laptop": [
        "How do I order a new laptop?", "My laptop is broken, how do I get a replacement?",
        "How can I request a new computer from IT?", "process to get a new work laptop",
        "I need a new notebook computer, who do I ask?",
    ],
    "Report a security incident": [
        "I clicked a phishing link, what should I do?", "How do I report a suspicious email?",
        "I think our data leaked, what's the procedure?", "What to do after a phishing attack",
        "How do I report a security breach?",
    ],
}  # fmt: skip

SHOULD_NOT_MATCH = [
    # the same topics, but not a request for the procedure (16)
    "How many days of annual leave do I get?", "Is there a limit on hotel costs?",
    "How long must passwords be?", "How many sick days are paid?", "How big is meeting room B?",
    "Who was our last new hire?", "Which laptop models does IT support?",
    "Who is on the security team?", "Do unused leave days carry over?",
    "What's the per diem abroad?", "Why do passwords expire every 90 days?",
    "Is a doctor's note needed for one day?", "Does the big room have a projector?",
    "How many people joined this year?", "How much RAM do the laptops have?", "What is phishing?",
    # other topics (24)
    "What's the weather like tomorrow?", "Tell me a joke", "How do I cook risotto?",
    "What is the capital of France?", "Translate 'good morning' into German",
    "Summarize this article for me", "What is 17 times 23?", "Recommend a good sci-fi book",
    "How do I center a div in CSS?", "What time is it in Tokyo?", "Write a haiku about rain",
    "Who won the football match yesterday?", "Explain quantum computing simply",
    "What's the best pizza topping?", "How far is the moon?", "How do plants make oxygen?",
    "Hello!", "Thanks, that's all", "Can you help me write a cover letter?",
    "What's our company's mission?", "Where is the cafeteria?", "When is the next team party?",
    "How do I get to the office by train?", "What's the dress code?",
]  # fmt: skip


@pytest.fixture(scope="module")
def embeddings():
    return default_embeddings()


def test_procedure_threshold_calibration(embeddings) -> None:
    lib = ProcedureLibrary(PROCEDURES, embeddings=embeddings)
    positives = [(q, name) for name, qs in SHOULD_MATCH.items() for q in qs]
    best = [(lib.scores(q)[0], name) for q, name in positives]
    same_topic = [lib.scores(q)[0].score for q in SHOULD_NOT_MATCH[:16]]
    off_topic = [lib.scores(q)[0].score for q in SHOULD_NOT_MATCH[16:]]
    assert len(positives) == 40 and len(same_topic) == 16 and len(off_topic) == 24

    def rates(t: float) -> tuple[float, int, float, float]:
        hits = sum(m.score >= t and m.procedure.name == name for m, name in best) / 40
        wrong = sum(m.score >= t and m.procedure.name != name for m, name in best)
        fp_same = sum(s >= t for s in same_topic) / 16
        return hits, wrong, fp_same, sum(s >= t for s in off_topic) / 24

    print("\nthreshold  recall  wrong  same-topic FP  off-topic FP")
    for t in (0.4, 0.45, 0.5, 0.55, 0.6):
        hits, wrong, fp_same, fp_off = rates(t)
        print(f"  {t:.2f}      {hits:.2f}    {wrong}      {fp_same:.2f}           {fp_off:.2f}")

    hits, wrong, fp_same, fp_off = rates(DEFAULT_PROCEDURE_THRESHOLD)
    assert hits >= 0.95 and wrong == 0
    assert fp_off == 0.0
    assert fp_same <= 0.5


def test_examples_widen_what_a_procedure_matches(embeddings) -> None:
    query = "How can I take some days off next month?"
    plain = ProcedureLibrary(PROCEDURES, embeddings=embeddings)
    leave = PROCEDURES[0]
    with_examples = ProcedureLibrary(
        [Procedure(leave.name, leave.description, leave.steps,
                   examples=["I'd like a few days off", "Can I take Friday off?"]),
         *PROCEDURES[1:]],
        embeddings=embeddings,
    )  # fmt: skip

    before = plain.scores(query)[0]
    text = with_examples.render(query=query, messages=[])
    print(f"\n{query!r}: {before.score:.2f} without examples, "
          f"{with_examples.scores(query)[0].score:.2f} with")

    assert before.procedure.name == "Request leave"  # ranked first, below the threshold
    assert text is not None and text.startswith("[Procedure]")
    assert '"Request leave"' in text and "1. Open the HR portal" in text
    assert with_examples.render(query="Tell me a joke about cats", messages=[]) is None


def test_episodic_memory_recalls_a_planted_fact_across_sessions(tmp_path, embeddings) -> None:
    memory = EpisodicMemory(path=tmp_path, embeddings=embeddings)
    start = datetime(2024, 3, 1, tzinfo=timezone.utc)
    turns = [
        ("How do I reverse a list in Python?", "Use reversed(xs) or xs[::-1]."),
        ("My sister Clara is flying in on Friday. What should we do in town?",
         "Try the food market and the river walk with Clara."),
        ("What should I pack for a week in Iceland?", "Layers and a rain shell."),
        ("My coworker's sister Helga just started university; gift ideas?", "A good backpack."),
        ("Can I freeze cooked rice?", "Yes, cool it fast and freeze it."),
    ]  # fmt: skip
    for i, (user, reply) in enumerate(turns):
        memory.record_exchange(user, reply, user_id="ana", thread_id=f"t{i}",
                               date=start + timedelta(days=i))  # fmt: skip
    memory.record_exchange("My sister is called Maya.", "Nice!", user_id="bob")

    found = memory.search("What's my sibling's name again?", user_id="ana",
                          now=start + timedelta(days=10))  # fmt: skip
    block = memory.render(query="What's my sibling's name again?", messages=[],
                          config={"configurable": {"user_id": "ana"}})  # fmt: skip

    assert any("Clara" in e.user_message for e in found)  # beside the hard negative (Helga)
    assert all(e.user_id == "ana" for e in found) and len(found) <= memory.k
    assert block is not None and "Maya" not in block and "2024-03-02" in block


def test_the_newest_statement_of_an_updated_fact_comes_first(tmp_path, embeddings) -> None:
    memory = EpisodicMemory(path=tmp_path, embeddings=embeddings)
    now = datetime(2024, 6, 1, tzinfo=timezone.utc)
    memory.record_exchange("I live in Lisbon and want to start cycling to work.", "Get mudguards.",
                           user_id="ana", date=now - timedelta(days=90))  # fmt: skip
    memory.record_exchange("I live in Porto now and I'm looking for a climbing gym.",
                           "Check the reviews first.", user_id="ana",
                           date=now - timedelta(days=2))  # fmt: skip

    found = memory.search("Which city am I based in?", user_id="ana", now=now)

    assert "Porto" in found[0].user_message


def test_a_recorded_turn_is_left_out_while_it_is_visible(tmp_path, embeddings) -> None:
    memory = EpisodicMemory(path=tmp_path, embeddings=embeddings)
    history = [HumanMessage("My dog Biscuit keeps chewing the sofa."), AIMessage("Try chew toys.")]
    memory.record_turn(history, config={"configurable": {"user_id": "ana", "thread_id": "t1"}})
    query = "What's my dog's name?"

    same_thread = memory.render(query=query, messages=[*history, HumanMessage(query)],
                                config={"configurable": {"user_id": "ana"}})  # fmt: skip
    new_thread = memory.render(query=query, messages=[HumanMessage(query)],
                               config={"configurable": {"user_id": "ana"}})  # fmt: skip

    assert same_thread is None
    assert new_thread is not None and "Biscuit" in new_thread


def test_all_three_blocks_in_one_budget(tmp_path, embeddings) -> None:
    store = SqliteStore(sqlite3.connect(tmp_path / "facts.sqlite", check_same_thread=False,
                                        isolation_level=None))  # fmt: skip
    store.setup()
    facts = UserFacts(store)
    facts.set("ana", "name", "Ana")
    memory = EpisodicMemory(path=tmp_path, embeddings=embeddings)
    memory.record_exchange("I'm taking leave in August for my wedding.", "Congratulations!",
                           user_id="ana")  # fmt: skip
    procedures = ProcedureLibrary(PROCEDURES, embeddings=embeddings)
    config = {"configurable": {"user_id": "ana"}}
    query = "How do I request my holiday?"

    parts = [(b.name, b.render(query=query, messages=[HumanMessage(query)], config=config))
             for b in (procedures, memory, facts)]  # fmt: skip
    text, cuts = assemble_blocks(parts, max_tokens=2000)

    assert cuts == []
    assert text.index("[Procedure]") < text.index("[Past Conversation Snippets]")
    assert text.index("[Past Conversation Snippets]") < text.index("[User Facts]")
    assert "wedding" in text and "name=Ana" in text
    store.conn.close()


# A question and the turn that answers it, sharing no content word (a paraphrase):
# the keyword side finds nothing for the answer, so only its cosine can keep it.
PARAPHRASES = [
    ("I started a new position at Siemens as a data analyst last month.",
     ["Who is my employer?", "What do I do for a living?"]),
    ("We adopted a tabby kitten from the shelter and called her Miso.",
     ["What animal do I have at home?", "Do I own any pets?"]),
    ("I've been going to pottery classes every Saturday morning.",
     ["What do I do for fun on weekends?"]),
    ("My brother Tomas and his wife just had twins!",
     ["Am I an uncle?", "How many nephews or nieces do I have?"]),
    ("I'm allergic to peanuts, so I always check food labels.",
     ["Do I have any dietary restrictions?"]),
    ("I'm training for the Berlin marathon in September.",
     ["What race am I preparing for?"]),
    ("I live in Porto now and I'm looking for a climbing gym.",
     ["Which city am I based in?"]),
]  # fmt: skip
DISTRACTORS = [
    "How do I reverse a list in Python?", "What should I pack for a week in Iceland?",
    "Can I freeze cooked rice?", "My coworker's sister Helga just started university; gift ideas?",
    "Any tips for a long train journey?", "How long should I boil an egg?",
]  # fmt: skip


def test_paraphrased_questions_recall_turns_that_share_no_word_with_them(
    tmp_path, embeddings
) -> None:
    from langchain_knowledge_inject._store.keyword import query_terms

    memory = EpisodicMemory(path=tmp_path, embeddings=embeddings)
    start = datetime(2024, 3, 1, tzinfo=timezone.utc)
    ids = {}
    for i, text in enumerate([*DISTRACTORS, *(fact for fact, _ in PARAPHRASES)]):
        ids[text] = memory.record_exchange(text, "", user_id="ana", thread_id=f"t{i}",
                                           date=start + timedelta(days=i))  # fmt: skip
    missed = []
    for fact, questions in PARAPHRASES:
        for question in questions:
            stopwords = memory.options.keyword_stopwords
            shared = set(query_terms(question, stopwords)) & set(query_terms(fact, stopwords))
            assert not shared, (question, shared)  # a true paraphrase
            found = memory.search(question, user_id="ana", now=start + timedelta(days=30))
            top = [e.episode_id for e in found]
            hit = next((e for e in found if e.episode_id == ids[fact]), None)
            print(f"\n{question!r}: rank {top.index(ids[fact]) if hit else None}, "
                  f"similarity {hit.similarity if hit else float('nan'):.3f}, "
                  f"min_score {memory.min_score}")  # fmt: skip
            if hit is None:
                missed.append(question)

    assert missed == []
