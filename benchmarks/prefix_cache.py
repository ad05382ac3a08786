"""How much of each prompt can a provider's prefix cache reuse, per placement?

A 20-turn conversation over the sample HR knowledge base (questions on the
policies, follow-ups, two off-topic turns) runs through the real pieces:

- ``dynamic_context``, ``postfix``, ``system``: ``create_knowledge_graph`` with an
  ``InMemorySaver`` checkpointer and each ``placement``;
- ``rag-system-prompt``: the pattern of LangChain's own RAG tutorial
  (``create_agent`` with a ``@dynamic_prompt`` middleware that searches with the
  last message and puts the retrieved text into the system prompt each turn),
  over the same knowledge base and search settings;
- ``no-injection``: the graph with ``knowledge_enabled=False``, the reference
  for the history size.

The chat model is a fake whose reply depends only on the user's question, so
every variant stores the same conversation. Its recorded prompts are rendered
message by message (a role header, the content, an end marker) and tokenized
with tiktoken ``cl100k_base`` when its encoding can be loaded, otherwise with
the package's approximate counter (the tokenizer used is printed).

Per turn n >= 2 and variant:

- ``reused``: leading tokens shared by prompt n and prompt n-1 (what a
  provider prefix cache, which stores earlier prompts, can serve);
- ``max``: the theoretical maximum, everything before the injected content in
  prompt n-1 (the leading tokens prompt n-1 shares with itself stripped of its
  injection; the whole prompt n-1 when it injected nothing). Old injections
  are not kept in the history, so no later prompt can repeat anything past
  that point;
- ``history``: tokens of the stored (checkpointed) history after the turn,
  against the same conversation without injection.

Targets for ``dynamic_context``: reused >= 99% of max on every turn, and zero
tokens of history growth from injection. For ``system`` and the RAG pattern,
reused can exceed max when consecutive turns inject identical leading text
(the block's static header, or the same first chunk): the ratio is only a
target for ``dynamic_context``; compare variants by the reused share of the
prompt tokens.

Run: ``python benchmarks/prefix_cache.py [--top-k 4] [--tokenizer auto|approx]``
(about a minute on 2 CPU cores, most of it loading the embedding model).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from _common import SYSTEM_PROMPT, ScriptedReplyModel, machine_load, sample_kb
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_knowledge_inject import create_knowledge_graph, strip_injected
from langchain_knowledge_inject._turn.placement import is_injected
from langchain_knowledge_inject._turn.tokens import approximate_token_count

# (user message, the assistant's scripted reply)
TURNS: list[tuple[str, str]] = [
    (
        "Hi, I'm new here. How many days of annual leave do I get?",
        "Welcome! Full-time employees get 25 days of paid annual leave per calendar year on top "
        "of public holidays, rising to 28 days after five years of service. "
        "(Source: leave_policy.md)",
    ),
    (
        "Can I carry unused days over to next year?",
        "Yes, up to 5 unused days can be carried over, but they must be used by 31 March or "
        "they expire. (Source: leave_policy.md)",
    ),
    (
        "And how far in advance do I have to ask for a full week off?",
        "For more than three consecutive working days, request the leave in PeoplePortal at "
        "least two weeks in advance; your manager answers within five working days. "
        "(Source: leave_policy.md)",
    ),
    (
        "I woke up with a fever. Who do I need to tell, and by when?",
        "Tell your line manager by phone or chat before 10:00 on your first day of absence, and "
        "record the absence in PeoplePortal on the day you return. (Source: sick_leave_policy.md)",
    ),
    (
        "When do I need a doctor's note?",
        "You can self-certify up to 7 calendar days. From the 8th day you need a medical "
        "certificate, uploaded to PeoplePortal within three days. (Source: sick_leave_policy.md)",
    ),
    (
        "Thanks! Unrelated: what's a fun name for our team's chat channel?",
        "That is not something the HR knowledge base covers, but #northwind-crew has a nice ring "
        "to it.",
    ),
    (
        "How long do I have to submit an expense claim?",
        "Within 30 days of the date the cost was incurred; later claims are not reimbursed. "
        "(Source: expenses_policy.md)",
    ),
    (
        "What is the daily meal allowance when I travel abroad?",
        "Up to EUR 70 per day abroad, and up to EUR 45 per day in your home country. "
        "(Source: expenses_policy.md)",
    ),
    (
        "Who has to approve a claim of 1,400 euros?",
        "Your line manager approves claims up to EUR 1,000; above that the finance director "
        "must approve it too. (Source: expenses_policy.md)",
    ),
    (
        "Can I work from home on Mondays and Fridays?",
        "After probation you may work remotely up to 3 days per week, as long as you keep your "
        "team's anchor day in the office. (Source: remote_work_policy.md)",
    ),
    (
        "What about working from Spain for a month this summer?",
        "Working from abroad is limited to 20 working days per calendar year and needs HR "
        "approval at least 4 weeks before you travel. (Source: remote_work_policy.md)",
    ),
    (
        "Does the company pay for a desk and chair at home?",
        "Yes: a one-off home-office allowance of EUR 500, plus EUR 25 per month towards your "
        "internet connection. (Source: remote_work_policy.md)",
    ),
    (
        "I have a client meeting in Paris next month. How should I book the trip?",
        "Book through TravelDesk at least 14 days before departure. Trains are preferred for "
        "journeys under 4 hours; flights are economy class. (Source: travel_policy.md)",
    ),
    (
        "What is the hotel limit per night in Paris?",
        "EUR 250 per night in Paris (the general cap is EUR 160); above the cap the finance "
        "director must approve. (Source: travel_policy.md)",
    ),
    (
        "Do I need to buy travel insurance for that trip?",
        "No, the company travel insurance covers you on business trips; just register the trip "
        "in TravelDesk. (Source: travel_policy.md)",
    ),
    (
        "Can you recommend a good restaurant near the Louvre?",
        "I can't help with restaurant tips, I only know Northwind Labs' policies. Enjoy Paris!",
    ),
    (
        "My partner is expecting a baby in March. How much leave can I take?",
        "As the partner you get 6 weeks of leave at full salary, to be taken within 12 months of "
        "the birth, in up to three blocks. (Source: parental_leave_policy.md)",
    ),
    (
        "How early do I need to tell HR?",
        "Tell HR at least 15 weeks before the expected week of birth. "
        "(Source: parental_leave_policy.md)",
    ),
    (
        "My laptop was stolen from my car yesterday. What should I do?",
        "Report it to IT security within 24 hours, file a police report and upload a copy to the "
        "IT ticket; IT will lock and wipe the device. (Source: equipment_policy.md)",
    ),
    (
        "Can I buy a second monitor on the company?",
        "Yes, you can spend up to EUR 300 every 2 years on peripherals such as a monitor. "
        "(Source: equipment_policy.md)",
    ),
]

RAG_PREAMBLE = "\n\nUse the following context in your response:\n\n"
PLACEMENTS = ("dynamic_context", "postfix", "system")

# --- tokenizing rendered prompts ---------------------------------------------------------------

Tokens = list


def _tiktoken_encoder() -> Callable[[str], Tokens] | None:
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base")
    except Exception:  # not installed, or its encoding file cannot be downloaded
        return None
    return encoding.encode


_PIECE = re.compile(r" ?[A-Za-z]+| ?[^\sA-Za-z0-9\x80-\U0010ffff]+|[0-9]{1,3}|\s+|.", re.DOTALL)


def _approximate_encode(text: str) -> Tokens:
    """Pieces weighted by the package's approximate counter: a piece worth 3 tokens is 3 items."""
    items: Tokens = []
    for piece in _PIECE.findall(text):
        items.extend([piece] + [(piece, i) for i in range(1, approximate_token_count(piece))])
    return items


def make_tokenizer(kind: str) -> tuple[str, Callable[[str], Tokens]]:
    encode = _tiktoken_encoder() if kind == "auto" else None
    if encode is not None:
        return "tiktoken cl100k_base", encode
    name = "approximate (langchain_knowledge_inject._turn.tokens, cl100k_base encoding unavailable)"
    return name, _approximate_encode


def _role(message: BaseMessage) -> str:
    return {"human": "user", "ai": "assistant"}.get(message.type, message.type)


def render(messages: Sequence[BaseMessage], encode: Callable[[str], Tokens]) -> Tokens:
    """A chat-template rendering: per message a role header, its tokens, an end marker."""
    tokens: Tokens = []
    for message in messages:
        tokens.append(("<|start|>", _role(message)))
        tokens.extend(encode(message.text))
        tokens.append(("<|end|>",))
    return tokens


def common_prefix(a: Tokens, b: Tokens) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


# --- running the variants ----------------------------------------------------------------------


@dataclass
class Run:
    """One variant's conversation: the prompts the model got and the history after each turn."""

    name: str
    prompts: list[list[BaseMessage]]
    clean_prompts: list[list[BaseMessage]]
    histories: list[list[BaseMessage]]
    injected: list[bool] = field(default_factory=list)


def _conversation(invoke: Callable[[str], list[BaseMessage]]) -> list[list[BaseMessage]]:
    return [invoke(question) for question, _ in TURNS]


def run_graph(kb, placement: str, *, top_k: int, enabled: bool = True) -> Run:
    model = ScriptedReplyModel(replies=dict(TURNS))
    graph = create_knowledge_graph(
        model, kb, system_prompt=SYSTEM_PROMPT, checkpointer=InMemorySaver(),
        placement=placement, top_k=top_k,
    )  # fmt: skip
    config = {"configurable": {"thread_id": "bench", "knowledge_enabled": enabled}}
    histories = _conversation(
        lambda q: graph.invoke({"messages": [HumanMessage(q)]}, config)["messages"]
    )
    stored = graph.get_state(config).values["messages"]
    assert stored == histories[-1]
    name = placement if enabled else "no-injection"
    return Run(
        name, model.prompts, [strip_injected(p) for p in model.prompts], histories,
        [any(is_injected(m) for m in p) for p in model.prompts],
    )  # fmt: skip


def run_rag_system_prompt(kb, *, top_k: int) -> Run:
    """LangChain's RAG tutorial pattern: retrieved text in the system prompt, every turn."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import ModelRequest, dynamic_prompt

    @dynamic_prompt
    def prompt_with_context(request: ModelRequest) -> str:
        last_query = request.state["messages"][-1].text
        retrieved_docs = kb.search(last_query, k=top_k)
        docs_content = "\n\n".join(doc.page_content for doc in retrieved_docs)
        return f"{SYSTEM_PROMPT}{RAG_PREAMBLE}{docs_content}"

    model = ScriptedReplyModel(replies=dict(TURNS))
    agent = create_agent(
        model, tools=[], middleware=[prompt_with_context], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "bench"}}
    histories = _conversation(
        lambda q: agent.invoke({"messages": [HumanMessage(q)]}, config)["messages"]
    )
    bare = SystemMessage(f"{SYSTEM_PROMPT}{RAG_PREAMBLE}")
    clean = [[bare, *prompt[1:]] for prompt in model.prompts]
    injected = [prompt[0].text != bare.text for prompt in model.prompts]
    return Run("rag-system-prompt", model.prompts, clean, histories, injected)


# --- measuring ---------------------------------------------------------------------------------


@dataclass
class TurnStats:
    turn: int
    injected: bool
    prompt: int
    reused: int
    maximum: int
    history: int
    history_without: int

    @property
    def ratio(self) -> float:
        return self.reused / self.maximum if self.maximum else 1.0

    @property
    def growth(self) -> int:
        return self.history - self.history_without


def measure(run: Run, reference: Run, encode: Callable[[str], Tokens]) -> list[TurnStats]:
    prompts = [render(p, encode) for p in run.prompts]
    cleans = [render(p, encode) for p in run.clean_prompts]
    stats = []
    for n, prompt in enumerate(prompts):
        previous = prompts[n - 1] if n else []
        previous_clean = cleans[n - 1] if n else []
        stats.append(
            TurnStats(
                turn=n + 1,
                injected=run.injected[n],
                prompt=len(prompt),
                reused=common_prefix(previous, prompt),
                maximum=common_prefix(previous, previous_clean),
                history=len(render(run.histories[n], encode)),
                history_without=len(render(reference.histories[n], encode)),
            )
        )
    return stats


def print_turn_table(name: str, stats: list[TurnStats]) -> None:
    print(f"\nPer turn, {name} (tokens; reuse is measured against the previous turn's prompt)")
    header = (
        f"{'turn':>4} {'inj':>3} {'prompt':>7} {'max':>7} {'reused':>7} {'reused/max':>10} "
        f"{'reused/prompt':>13} {'history':>8} {'no-inj':>7} {'growth':>6}"
    )
    print(header)
    for s in stats:
        ratio = f"{s.ratio:.1%}" if s.turn > 1 else "-"
        share = f"{s.reused / s.prompt:.1%}"
        print(
            f"{s.turn:>4} {'y' if s.injected else 'n':>3} {s.prompt:>7} {s.maximum:>7} "
            f"{s.reused:>7} {ratio:>10} {share:>13} {s.history:>8} {s.history_without:>7} "
            f"{s.growth:>6}"
        )


def print_summary(results: dict[str, list[TurnStats]]) -> None:
    reference = sum(s.reused for s in results["no-injection"])
    print("\nSummary over the 20 turns (min reused/max over turns 2-20)")
    print(
        f"{'variant':<18} {'injected':>8} {'prompt tok':>10} {'reused tok':>10} "
        f"{'reused share':>12} {'vs no-inj reuse':>15} {'min reused/max':>14} "
        f"{'history':>8} {'growth':>6}"
    )
    for name, stats in results.items():
        prompt = sum(s.prompt for s in stats)
        reused = sum(s.reused for s in stats)
        min_ratio = min(s.ratio for s in stats[1:])
        print(
            f"{name:<18} {sum(s.injected for s in stats):>8} {prompt:>10} {reused:>10} "
            f"{reused / prompt:>12.1%} {reused / reference:>15.1%} {min_ratio:>14.1%} "
            f"{stats[-1].history:>8} {stats[-1].growth:>6}"
        )
    print(
        "reused share: reused / prompt tokens; vs no-inj reuse: reused tokens / those of the same "
        "conversation without injection.\nmin reused/max is the target measure for "
        "dynamic_context only; above 100% means consecutive prompts repeated injected text."
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top-k", type=int, default=4)
    parser.add_argument("--tokenizer", choices=("auto", "approx"), default="auto")
    args = parser.parse_args()

    tokenizer, encode = make_tokenizer(args.tokenizer)
    print(f"tokenizer: {tokenizer}")
    print(machine_load())
    with tempfile.TemporaryDirectory() as tmp:
        kb = sample_kb(tmp)
        try:
            reference = run_graph(kb, "dynamic_context", top_k=args.top_k, enabled=False)
            runs = [run_graph(kb, p, top_k=args.top_k) for p in PLACEMENTS]
            runs.append(run_rag_system_prompt(kb, top_k=args.top_k))
            runs.append(reference)
        finally:
            kb.close()

    results = {run.name: measure(run, reference, encode) for run in runs}
    print(f"\n{len(TURNS)} turns, top_k={args.top_k}")
    print_turn_table("dynamic_context", results["dynamic_context"])
    print_summary(results)

    dynamic = results["dynamic_context"]
    reuse_ok = all(s.reused >= 0.99 * s.maximum for s in dynamic[1:])
    growth_ok = all(s.growth == 0 for s in dynamic)
    injected_run = next(run for run in runs if run.name == "dynamic_context")
    identical = all(
        [m.text for m in h] == [m.text for m in r]
        for h, r in zip(injected_run.histories, reference.histories, strict=True)
    )
    print(
        f"\ndynamic_context reused >= 99% of max on every turn: {'PASS' if reuse_ok else 'FAIL'} "
        f"(min {min(s.ratio for s in dynamic[1:]):.1%})"
    )
    print(
        f"dynamic_context history growth from injection = 0 tokens on every turn: "
        f"{'PASS' if growth_ok and identical else 'FAIL'} "
        f"(max {max(s.growth for s in dynamic)}; stored texts identical: {identical})"
    )
    return 0 if reuse_ok and growth_ok and identical else 1


if __name__ == "__main__":
    sys.exit(main())
