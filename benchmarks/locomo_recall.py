"""Episodic memory on real conversations: evidence recall on LoCoMo, search and recording cost.

The benchmark of record for memory ranking. Data: the development half of
LoCoMo (Maharana et al., ACL 2024) at ``../shared/bench/locomo-dev/`` (its
README gives the format, the measure and the protocol): 5 conversations,
2,760 turns in 19 to 32 sessions each, 760 questions with annotated evidence
turns (category 5, adversarial, is left out).

Two uses, each its own memory:

- ``turns``: the README's protocol. One ``user_id`` per conversation, every
  turn one episode written with ``add_episodes`` (text, speaker,
  ``thread_id`` = the session, ``date`` = the session's date, ``episode_id`` =
  the ``dia_id``).
- ``exchanges``: the package's main path. Each session is a chat thread whose
  turns alternate: its first speaker's turns are the user's messages, the
  other's the assistant's replies. After each reply the thread's messages so
  far go to ``record_turn(messages, config=...)`` (user and thread ids in
  ``configurable``, as the graph and the middleware call it; ``date`` = the
  session's date), in the background as by default. A session that ends on a
  user message gets the reply "OK." so that its last turn is recorded. An
  exchange holds two evidence turns; its recall@k counts the evidence inside
  the top k exchanges.

Every question is searched with ``now`` = the date of the conversation's last
session, ``k=20``, at the defaults (``min_score`` included); recall@k is the
share of a question's evidence turns among the top k, averaged over the
questions, overall, per category (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop) and per half of the tuning split (``conv-26/30/41`` to tune,
``conv-42/43`` to confirm). The defaults come first, then each option
switched off (re-indexed where it changes what is indexed).

Speed, measured by two worker processes side by side (``--baseline``: the
other one runs today's ``main``, e.g. ``/work/base``), alternating in blocks
so both see the same load: search latency p50/p95 at ``k=10`` with the query
embedding included (the real model embeds every query; each search's text is
new to the knowledge base's query cache) and excluded (the same search run
once before), and the time ``record_turn`` takes on the caller's thread.

Embeddings: the real model (all-MiniLM-L6-v2) behind a disk cache keyed by
model and text (``_embedding_cache.py``): the first run embeds every text
(minutes on 2 cores), later runs read the vectors back; the figures are the
real model's either way. Query embeddings timed as "included" always go to
the model.

Run: ``OMP_NUM_THREADS=1 python benchmarks/locomo_recall.py [PATH]
[--baseline /work/base] [--conversations conv-26,conv-30] [--no-ablations]
[--no-speed]``. Figures: docs/memory.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "locomo-dev"
KS = (5, 10, 20)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TUNE, CONFIRM = ("conv-26", "conv-30", "conv-41"), ("conv-42", "conv-43")
LATENCY_QUESTIONS = 60  # per conversation, for the timing part
ABLATIONS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # (label, EpisodicOptions fields, search arguments); a field the code lacks is skipped
    ("context_turn=False", {"context_turn": False}, {}),
    ("statement_weight=0", {"statement_weight": 0.0}, {}),
    ("session_weight=0", {"session_weight": 0.0}, {}),
    ("recency off", {}, {"recency": "off"}),
    ("current_weight=0", {"current_weight": 0.0}, {}),
    ("resolve_dates=False", {}, {"resolve_dates": False}),
    ("date_weight=0", {"date_weight": 0.0}, {}),
    ("speaker_weight=0", {"speaker_weight": 0.0}, {}),
    ("keyword_stopwords=None", {"keyword_stopwords": None}, {}),
    ("search_mode='dense'", {"search_mode": "dense"}, {}),
    ("search_mode='keyword'", {"search_mode": "keyword"}, {}),
]


# -- the data ------------------------------------------------------------------------------
@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass
class Session:
    key: str
    date: datetime
    turns: list[Turn]


@dataclass
class Question:
    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass
class Conversation:
    conv_id: str
    sessions: list[Session]
    questions: list[Question]
    now: datetime = field(init=False)

    def __post_init__(self) -> None:
        self.now = self.sessions[-1].date


def _date(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def load(path: Path, only: list[str] | None = None) -> list[Conversation]:
    """The conversations of ``path/locomo-dev.json`` (``only``: those sample ids)."""
    convs = []
    for raw in json.loads((path / "locomo-dev.json").read_text("utf-8")):
        if only and raw["sample_id"] not in only:
            continue
        conv = raw["conversation"]
        numbers = sorted(
            int(key.split("_")[1]) for key, value in conv.items()
            if key.startswith("session_") and not key.endswith("date_time") and value
        )  # fmt: skip
        sessions = [
            Session(f"session_{n}", _date(conv[f"session_{n}_date_time"]),
                    [Turn(t["dia_id"], t["speaker"], t["text"]) for t in conv[f"session_{n}"]])
            for n in numbers
        ]  # fmt: skip
        questions = [
            Question(q["question"], tuple(q["evidence"]), int(q["category"]))
            for q in raw["qa"] if q.get("category") in CATEGORIES and q.get("evidence")
        ]  # fmt: skip
        convs.append(Conversation(raw["sample_id"], sessions, questions))
    if only and len(convs) != len(only):
        missing = set(only) - {c.conv_id for c in convs}
        raise SystemExit(f"unknown conversations: {', '.join(sorted(missing))}")
    return convs


def exchanges(session: Session) -> Iterator[tuple[Turn, Turn | None]]:
    """The session as a chat: its first speaker's turns are messages, the other's replies."""
    turns = session.turns
    for i in range(0, len(turns), 2):
        yield turns[i], turns[i + 1] if i + 1 < len(turns) else None


# -- a worker: one code tree, its memories, its measurements ---------------------------------
class Worker:
    """Builds and measures the memories of one code tree (the one on ``sys.path``)."""

    def __init__(self, data: Path, only: list[str] | None) -> None:
        import torch

        torch.set_num_threads(1)
        from _embedding_cache import DiskCachedEmbeddings

        from langchain_knowledge_inject._memory.episodic import EpisodicMemory, EpisodicOptions
        from langchain_knowledge_inject._store.embeddings import default_embeddings
        from langchain_knowledge_inject._store.flags import DEFAULT_MODEL_NAME

        class Embeddings(DiskCachedEmbeddings):
            live = False  # True: queries go to the model (timing with the embedding)

            def embed_query(self, text: str) -> list[float]:
                return self.inner.embed_query(text) if self.live else super().embed_query(text)

        self.Memory, self.Options = EpisodicMemory, EpisodicOptions
        self.embeddings = Embeddings(default_embeddings(), DEFAULT_MODEL_NAME)
        self.convs = load(data, only)
        self.tmp = Path(tempfile.mkdtemp(prefix="locomo-recall-"))
        self.memories: dict[str, Any] = {}
        self.owners: dict[str, dict[str, tuple[str, ...]]] = {}  # episode id -> dia ids
        self.pending_exchanges: Iterator[tuple[Conversation, Session]] | None = None

    def fields(self) -> list[str]:
        return list(self.Options.model_fields)

    def memory(self, use: str, index: dict[str, Any]) -> Any:
        """The memory of ``use`` with the indexing options ``index``, built on first use."""
        key = f"{use}:{json.dumps(index, sort_keys=True)}"
        if key not in self.memories:
            options = self.Options(**index)
            memory = self.Memory(path=self.tmp / f"m{len(self.memories)}",
                                 embeddings=self.embeddings, options=options)  # fmt: skip
            self.memories[key] = memory
            if use == "turns":
                self._add_turns(memory)
            else:
                for _ in self.record_exchanges(memory, key, sessions=None):
                    pass
                memory.flush(timeout=3600)
        return self.memories[key]

    def _add_turns(self, memory: Any) -> None:
        for conv in self.convs:
            memory.add_episodes(
                [{"text": t.text, "speaker": t.speaker, "thread_id": s.key, "date": s.date,
                  "episode_id": t.dia_id} for s in conv.sessions for t in s.turns],
                user_id=conv.conv_id,
            )  # fmt: skip

    def record_exchanges(self, memory: Any, key: str, sessions: int | None) -> Iterator[float]:
        """Record exchanges through ``record_turn``; yields the seconds each call took."""
        from langchain_core.messages import AIMessage, HumanMessage

        owners = self.owners.setdefault(key, {})
        done = 0
        for conv in self.convs:
            for session in conv.sessions:
                if sessions is not None and done >= sessions:
                    return
                done += 1
                config = {"configurable": {"user_id": conv.conv_id, "thread_id": session.key}}
                messages: list[Any] = []
                for said, reply in exchanges(session):
                    messages += [HumanMessage(said.text, id=said.dia_id),
                                 AIMessage(reply.text if reply else "OK.")]  # fmt: skip
                    start = time.perf_counter()
                    eid = memory.record_turn(messages, config=config, date=session.date)
                    yield time.perf_counter() - start
                    owners[eid] = (said.dia_id, *((reply.dia_id,) if reply else ()))

    def recall(self, use: str, options: dict[str, Any], search: dict[str, Any]) -> list[dict]:
        """One row per question: its conversation, category and recall at each k."""
        index = {k: v for k, v in options.items() if k in INDEXING}
        memory = self.memory(use, index)
        saved = memory.options
        memory.options = self.Options(**options)
        key = f"{use}:{json.dumps(index, sort_keys=True)}"
        owners = self.owners.get(key, {})
        rows = []
        try:
            for conv in self.convs:
                for q in conv.questions:
                    found = memory.search(q.text, user_id=conv.conv_id, k=20, now=conv.now,
                                          **search)  # fmt: skip
                    ids = [owners.get(e.episode_id, (e.episode_id,)) for e in found]
                    wanted = set(q.evidence)
                    row = {"conv": conv.conv_id, "category": q.category}
                    for k in KS:
                        got = {d for group in ids[:k] for d in group}
                        row[str(k)] = len(got & wanted) / len(wanted)
                    rows.append(row)
        finally:
            memory.options = saved
        return rows

    def latency(self, included: bool, block: int, rounds: int) -> list[float]:
        """Seconds per search (k=10) of ``block`` questions at the defaults."""
        memory = self.memory("turns", {})
        questions = [(c, q) for c in self.convs for q in c.questions[:LATENCY_QUESTIONS]]
        picked = [questions[(block * 7919 + i * 104729) % len(questions)] for i in range(rounds)]
        out = []
        self.embeddings.live = included
        try:
            for i, (conv, q) in enumerate(picked):
                text = f"{q.text} (#{block}.{i})" if included else q.text
                if not included:
                    memory.search(text, user_id=conv.conv_id, k=10, now=conv.now)
                start = time.perf_counter()
                memory.search(text, user_id=conv.conv_id, k=10, now=conv.now)
                out.append(time.perf_counter() - start)
        finally:
            self.embeddings.live = False
        return out

    def recording(self, calls: int) -> list[float]:
        """Seconds ``record_turn`` takes on the caller's thread, over the next ``calls``."""
        if self.pending_exchanges is None:
            memory = self.Memory(path=self.tmp / "recording", embeddings=self.embeddings)
            self._recording = memory
            self.pending_exchanges = self.record_exchanges(memory, "recording", sessions=None)
        times = []
        for _ in range(calls):
            try:
                times.append(next(self.pending_exchanges))
            except StopIteration:
                break
            time.sleep(0.005)  # a turn does not follow the previous one at once
        return times

    def close(self) -> None:
        for memory in self.memories.values():
            memory.close()
        if self.pending_exchanges is not None:
            self._recording.close()


INDEXING = ("context_turn",)
"""Options that change what is indexed: an ablation of one builds a memory of its own."""


def serve(data: Path, only: list[str] | None) -> None:
    """Answer JSON commands on stdin, one JSON line each on stdout (logs go to stderr)."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    worker = Worker(data, only)
    for line in sys.stdin:
        command = json.loads(line)
        name = command.pop("do")
        if name == "close":
            worker.close()
            out.write("null\n")
            out.flush()
            return
        result = getattr(worker, name)(**command)
        out.write(json.dumps(result) + "\n")
        out.flush()


class Remote:
    """A worker in a child process, on the code tree ``tree``."""

    def __init__(self, tree: Path, data: Path, only: list[str] | None) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
        env["KINJECT_HOME"] = tempfile.mkdtemp(prefix="locomo-home-")
        args = [sys.executable, __file__, str(data), "--serve"]
        if only:
            args += ["--conversations", ",".join(only)]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True, cwd=tree)  # fmt: skip

    def __getattr__(self, name: str) -> Any:
        def call(**kwargs: Any) -> Any:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps({"do": name, **kwargs}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"the worker on {name} stopped (see its stderr above)")
            return json.loads(line)

        return call


# -- the report ----------------------------------------------------------------------------
def mean(rows: list[dict], k: int, **where: Any) -> float:
    picked = [r[str(k)] for r in rows if all(r[f] in v for f, v in where.items())]
    return sum(picked) / len(picked) if picked else float("nan")


def recall_line(label: str, rows: list[dict]) -> str:
    cats = " ".join(f"{mean(rows, 10, category=(c,)):6.3f}" for c in CATEGORIES)
    halves = " ".join(f"{mean(rows, 10, conv=h):6.3f}" for h in (TUNE, CONFIRM))
    overall = " ".join(f"{mean(rows, k):6.3f}" for k in KS)
    return f"{label:34s} {overall} | {cats} | {halves}"


HEADER = (f"{'':34s} {'R@5':>6s} {'R@10':>6s} {'R@20':>6s} | "
          + " ".join(f"{CATEGORIES[c][:6]:>6s}" for c in CATEGORIES)
          + f" | {'tune':>6s} {'confrm':>6s}")  # fmt: skip


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPUs"


def ms(xs: list[float], q: float) -> float:
    return sorted(xs)[round(q * (len(xs) - 1))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", help="a comma-separated subset (e.g. conv-26,conv-30)")
    parser.add_argument("--baseline", type=Path, help="another code tree, measured side by side")
    parser.add_argument("--no-ablations", action="store_true", help="the defaults only")
    parser.add_argument("--no-speed", action="store_true", help="skip search and recording times")
    parser.add_argument("--rounds", type=int, default=12, help="timing blocks per tree and kind")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    only = args.conversations.split(",") if args.conversations else None
    if args.serve:
        serve(args.data, only)
        return
    convs = load(args.data, only)
    n_turns = sum(len(s.turns) for c in convs for s in c.sessions)
    n_q = sum(len(c.questions) for c in convs)
    by_cat = ", ".join(
        f"{CATEGORIES[k]} {sum(q.category == k for c in convs for q in c.questions)}"
        for k in CATEGORIES
    )
    print(f"LoCoMo dev at {args.data}: {len(convs)} conversations, {n_turns} turns, "
          f"{n_q} questions ({by_cat}); {load_line()}")  # fmt: skip
    trees = {"this tree": ROOT}
    if args.baseline:
        trees["baseline"] = args.baseline.resolve()
    workers = {name: Remote(tree, args.data, only) for name, tree in trees.items()}
    mine = workers["this tree"]
    fields = set(mine.fields())
    print(f"\nevidence recall (R@k overall | R@10 per category | R@10 tune {'/'.join(TUNE)}, "
          f"confirm {'/'.join(CONFIRM)})")  # fmt: skip
    print(HEADER)
    t0 = time.perf_counter()
    for use in ("turns", "exchanges"):
        for name, worker in workers.items():
            rows = worker.recall(use=use, options={}, search={})
            print(recall_line(f"{use}, defaults ({name})", rows), flush=True)
    if not args.no_ablations:
        for label, options, search in ABLATIONS:
            if set(options) <= fields:
                for use in ("turns", "exchanges") if set(options) & set(INDEXING) else ("turns",):
                    rows = mine.recall(use=use, options=options, search=search)
                    print(recall_line(f"{use}, {label}", rows), flush=True)
    print(f"({time.perf_counter() - t0:.0f} s; {load_line()})")
    if not args.no_speed:
        _speed(workers, args.rounds)
    for worker in workers.values():
        worker.close()


def _speed(workers: dict[str, Any], rounds: int) -> None:
    names = list(workers)
    print(f"\nsearch latency, k=10, turns memory, {rounds} blocks of 20 searches per tree, "
          f"trees alternating; {load_line()}")  # fmt: skip
    for included in (True, False):
        times: dict[str, list[float]] = {n: [] for n in names}
        for block in range(rounds):
            order = names if block % 2 == 0 else names[::-1]
            for name in order:
                times[name] += workers[name].latency(included=included, block=block, rounds=20)
        label = "with the query embedding" if included else "query embedding cached"
        cells = [f"{n} p50 {ms(t, 0.5):.1f} ms, p95 {ms(t, 0.95):.1f} ms" for n, t in times.items()]
        line = f"  {label}: " + "; ".join(cells)
        if len(names) == 2:
            base = times[names[1]]
            line += (f"; ratio p50 {ms(times[names[0]], 0.5) / ms(base, 0.5):.2f}, "
                     f"p95 {ms(times[names[0]], 0.95) / ms(base, 0.95):.2f}")  # fmt: skip
        print(line, flush=True)
    record: dict[str, list[float]] = {n: [] for n in names}
    for block in range(rounds):
        for name in names if block % 2 == 0 else names[::-1]:
            record[name] += workers[name].recording(calls=10)
    cells = [f"{n} p50 {ms(t, 0.5):.2f} ms, p95 {ms(t, 0.95):.2f} ms" for n, t in record.items()]
    line = f"  record_turn on the caller's thread ({len(record[names[0]])} calls): " + "; ".join(
        cells
    )
    if len(names) == 2:
        line += f"; ratio p50 {ms(record[names[0]], 0.5) / ms(record[names[1]], 0.5):.2f}"
    print(line + f"; {load_line()}")


if __name__ == "__main__":
    main()
