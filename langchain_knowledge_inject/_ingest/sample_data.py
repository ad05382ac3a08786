"""A small HR-policy knowledge base, written for this project, for demos and tests.

Seven policies of a fictional company ("Northwind Labs"): annual leave, sick
leave, expenses, remote work, travel, parental leave and equipment. Each one
states concrete figures (days, amounts, deadlines), so a retrieval result can be
checked against ``SAMPLE_QUESTIONS``. ``kinject demo`` and the notebooks use it.

Example:
    >>> from langchain_knowledge_inject._ingest.sample_data import (
    ...     SAMPLE_DOCUMENTS, SAMPLE_QUESTIONS)
    >>> len(SAMPLE_DOCUMENTS), SAMPLE_DOCUMENTS[0].metadata["source"]
    (7, 'leave_policy.md')
    >>> SAMPLE_QUESTIONS[0].expected_source
    'leave_policy.md'
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.documents import Document

from langchain_knowledge_inject._ingest.loading import split_documents

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

_LEAVE = """# Annual leave policy

## Entitlement

Full-time employees receive 25 days of paid annual leave per calendar year, in
addition to public holidays. Part-time employees receive a pro-rata share based
on their contracted hours. Leave accrues at 2.08 days per month of service, so a
new starter can take leave during probation once it has been accrued.

After five years of continuous service the entitlement rises to 28 days.

## Requesting leave

Request leave in PeoplePortal. Requests of more than three consecutive working
days must be made at least two weeks in advance; shorter requests need two
working days' notice. Your line manager approves or declines within five working
days. No more than 15 consecutive working days may be taken at once without
approval from your department head.

## Carry-over

Up to 5 unused days may be carried over into the next year. Carried-over days
must be used by 31 March, after which they expire. Unused leave is not paid
out, except in the final salary when employment ends.
"""

_SICK = """# Sick leave policy

## Reporting an absence

If you are ill, tell your line manager by phone or chat before 10:00 on the
first day of absence, and record the absence in PeoplePortal on the day you
return.

## Medical certificates

You may self-certify absences of up to 7 calendar days. From the 8th calendar
day of absence a doctor's note (medical certificate) is required, and it must
be uploaded to PeoplePortal within three days.

## Sick pay

Employees receive full pay for up to 20 working days of sickness in any rolling
12-month period, then half pay for a further 20 working days. After an absence
of more than 5 working days, your manager holds a return-to-work conversation,
and a phased return can be agreed with HR.
"""

_EXPENSES = """# Expenses and reimbursement policy

## Submitting a claim

Submit expense claims in PeoplePortal within 30 days of the date the cost was
incurred; claims submitted later are not reimbursed. Every item above EUR 25
needs an itemised receipt (a photo is fine). Claims approved by the 20th of the
month are paid with that month's salary.

## Limits

- Meals while travelling: up to EUR 45 per day in your home country and up to
  EUR 70 per day abroad.
- Mileage for using your own car on business: EUR 0.30 per kilometre.
- Client entertainment: up to EUR 120 per person; above that, pre-approval from
  your department head is required.
- Alcohol is reimbursed only as part of approved client entertainment.

## Approval

Your line manager approves claims up to EUR 1,000. Claims above EUR 1,000 also
need approval from the finance director.
"""

_REMOTE = """# Remote work policy

## Eligibility and schedule

After completing their probation period, employees may work remotely up to 3
days per week. Each team keeps one anchor day in the office, agreed with the
team lead. Core hours are 10:00 to 16:00 in your local office's time zone;
outside core hours you may organise your own working time.

## Working from abroad

You may work from another country for up to 20 working days per calendar year.
Each period abroad needs approval from HR at least 4 weeks before you travel,
because of tax and insurance rules.

## Home office

The company pays a one-off home-office allowance of EUR 500 for a desk and chair,
and EUR 25 per month towards your internet connection. Company systems must
always be accessed through the company VPN when working outside the office.
"""

_TRAVEL = """# Business travel policy

## Booking

Book all business travel through TravelDesk at least 14 days before departure.
Trains are preferred for journeys under 4 hours. Flights are economy class;
premium economy is allowed for flights longer than 6 hours. Car rental needs
prior approval from your line manager.

## Hotels

Hotels are capped at EUR 160 per night. In London, Paris and New York the cap is
EUR 250 per night. Bookings above the cap need approval from the finance
director.

## Insurance and safety

All employees are covered by the company travel insurance while on business
trips; no separate policy is needed. Register every trip abroad in TravelDesk so
that the security team can reach you in an emergency.
"""

_PARENTAL = """# Parental leave policy

## Birth parents

The birth parent is entitled to 26 weeks of parental leave. The first 16 weeks
are paid at full salary; the remaining 10 weeks are paid at 50% of salary.

## Partners and second parents

The partner or second parent (including fathers and non-birthing mothers) is
entitled to 6 weeks of leave at full salary, to be taken within the first 12
months after the birth or adoption, in up to three blocks.

## Adoption

Adoptive parents receive the same leave and pay as birth parents; the primary
adopter follows the birth-parent rules.

## Notice and return

Tell HR at least 15 weeks before the expected week of birth. During leave you may
work up to 10 paid keeping-in-touch days. On return you may work 80% of your
hours at full pay for the first 4 weeks.
"""

_EQUIPMENT = """# Equipment and IT policy

## What you receive

Every employee receives a laptop on their first day. Laptops are replaced every
3 years, or earlier if they fail. Each employee may also spend up to EUR 300
every 2 years on peripherals such as a monitor, keyboard or headset.

## Loss and theft

Report a lost or stolen laptop or phone to IT security within 24 hours, at
security@northwind.example or through the IT service desk. IT will lock and wipe
the device remotely. If the theft happened outside the office, also file a
police report and upload a copy to the IT ticket.

## Leaving the company

Return all company equipment within 5 working days of your last working day.
Reasonable personal use of company equipment is allowed, but company data must
never be copied to personal devices.
"""

SAMPLE_DOCUMENTS: list[Document] = [
    Document(text, metadata={"source": source, "category": "hr", "title": title})
    for source, title, text in [
        ("leave_policy.md", "Annual leave policy", _LEAVE),
        ("sick_leave_policy.md", "Sick leave policy", _SICK),
        ("expenses_policy.md", "Expenses and reimbursement policy", _EXPENSES),
        ("remote_work_policy.md", "Remote work policy", _REMOTE),
        ("travel_policy.md", "Business travel policy", _TRAVEL),
        ("parental_leave_policy.md", "Parental leave policy", _PARENTAL),
        ("equipment_policy.md", "Equipment and IT policy", _EQUIPMENT),
    ]
]
"""The seven policies, whole (not split), with ``source``, ``category`` and ``title``."""


@dataclass(frozen=True)
class SampleQuestion:
    """A question about the sample policies and where its answer lives.

    Attributes:
        question: What a user might ask.
        expected_source: ``metadata["source"]`` of the document that answers it.
        answer: A short phrase from that document that answers it.
    """

    question: str
    expected_source: str
    answer: str


SAMPLE_QUESTIONS: list[SampleQuestion] = [
    SampleQuestion("How many days of annual leave do I get?", "leave_policy.md", "25 days"),
    SampleQuestion(
        "When do I need a doctor's note when I'm off sick?", "sick_leave_policy.md", "8th"
    ),
    SampleQuestion(
        "How long do I have to submit an expense claim?", "expenses_policy.md", "within 30 days"
    ),
    SampleQuestion(
        "Can I work from another country for a few weeks?",
        "remote_work_policy.md",
        "20 working days",
    ),
    SampleQuestion(
        "What is the hotel limit per night in London?", "travel_policy.md", "EUR 250 per night"
    ),
    SampleQuestion(
        "How much paid leave does a new father get?", "parental_leave_policy.md", "6 weeks"
    ),
    SampleQuestion(
        "What should I do if my laptop is stolen?", "equipment_policy.md", "within 24 hours"
    ),
]
"""Questions with the source that answers each; used by ``kinject demo`` and tests."""


def build_sample_knowledge_base(
    *,
    path: str | Path | None = None,
    name: str = "hr-demo",
    embeddings: Embeddings | None = None,
) -> KnowledgeBase:
    """Create (or reopen) the sample HR knowledge base and load the policies.

    Idempotent: chunk ids derive from source and content, so calling it again
    adds nothing.

    Args:
        path: Store directory (default: the per-user default directory).
        name: Knowledge-base name.
        embeddings: Embedding model (default: the package's offline default).

    Returns:
        The knowledge base, holding the chunks of ``SAMPLE_DOCUMENTS``.

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> kb = build_sample_knowledge_base(
        ...     path=tmp_path, embeddings=DeterministicFakeEmbedding(size=64)
        ... )  # doctest: +SKIP
        >>> kb.search("annual leave carry-over", k=1)[0].metadata["source"]  # doctest: +SKIP
        'leave_policy.md'
    """
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase

    kb = KnowledgeBase(
        name,
        path=path,
        embeddings=embeddings,
        description="Sample HR policies of a fictional company: leave, sick leave, "
        "expenses, remote work, travel, parental leave and equipment.",
        topics=sorted(doc.metadata["title"] for doc in SAMPLE_DOCUMENTS),
    )
    kb.add_documents(
        split_documents(SAMPLE_DOCUMENTS, file_type="markdown", splitter=kb.text_splitter)
    )
    return kb


async def abuild_sample_knowledge_base(
    *,
    path: str | Path | None = None,
    name: str = "hr-demo",
    embeddings: Embeddings | None = None,
) -> KnowledgeBase:
    """Async twin of ``build_sample_knowledge_base``.

    Opening the store and embedding are blocking, so this runs the sync
    function in a worker thread.

    Example:
        >>> kb = await abuild_sample_knowledge_base(path=tmp_path)  # doctest: +SKIP
    """
    return await asyncio.to_thread(
        build_sample_knowledge_base, path=path, name=name, embeddings=embeddings
    )
