"""Generator of long multi-session conversations with planted facts, for episodic recall.

Each simulated user talks to an assistant over many sessions (one thread each,
one day apart on average). Most sessions are ordinary tasks (cooking, code,
travel, ...). A few *plant* a personal fact in passing inside a task ("my
sister Clara is visiting, what should we do?"), a few later ones *update* a
fact ("we finally finished the move to Porto"), and some *distractor* turns
state the same kind of fact about someone else ("my coworker's sister Helga
..."), which a retriever must not confuse with the user's own.

*Probes* are questions about the facts, paraphrased so that they share few
words with the turn that holds the answer ("What's my sibling called again?"),
asked at the start of a later session at growing distances from the evidence.
A probe is evaluated at the point where it is asked (only earlier turns are in
memory); it is not itself recorded. For an updated fact the evidence is the
newest statement and the older one is listed as ``stale``: a good memory ranks
the newest first.

Everything is derived from a seed, so a run is reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone


@dataclass(frozen=True)
class Turn:
    """One finished exchange."""

    turn_id: str
    user_id: str
    thread_id: str
    session: int
    index: int
    """Position in the user's whole history (0-based)."""
    date: datetime
    user: str
    assistant: str


@dataclass(frozen=True)
class Probe:
    """A question about a planted fact, asked before turn ``before_index``."""

    user_id: str
    thread_id: str
    question: str
    slot: str
    kind: str
    """``"single"`` (the fact was stated once so far) or ``"update"`` (it changed)."""
    evidence: tuple[str, ...]
    stale: tuple[str, ...]
    before_index: int
    date: datetime
    distance: int
    """Turns between the newest evidence turn and the probe."""
    visible: tuple[str, ...] = ()
    """Turn ids of the probe's own session asked before it (the visible history)."""


@dataclass
class Conversation:
    """One user's whole history and the probes asked along the way."""

    user_id: str
    turns: list[Turn] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)


@dataclass(frozen=True)
class _Slot:
    name: str
    values: tuple[str, ...]
    plant: tuple[str, ...]
    reply: tuple[str, ...]
    questions: tuple[str, ...]
    distractors: tuple[str, ...]
    update: tuple[str, ...] = ()


_SLOTS: tuple[_Slot, ...] = (
    _Slot(
        "sister",
        ("Clara", "Maya", "Ingrid", "Sofia", "Leila", "Nora"),
        (
            "My sister {v} is flying in on Friday. Can you suggest a few things to do in town "
            "with her over the weekend?",
            "I need a birthday present idea for my sister {v}, she's into pottery and hiking.",
        ),
        (
            "Nice! For {v}'s visit: a morning food market, a walk along the river and a "
            "small jazz bar in the evening.",
            "A few ideas for {v}: a beginner wheel-throwing class, a trail guidebook, or a "
            "lightweight daypack.",
        ),
        (
            "What's my sibling called again?",
            "Remind me, what was the name of my sister?",
            "Who is the sister I mentioned to you?",
        ),
        (
            "My coworker's sister Helga just started university. What's a good gift for a "
            "first-year student?",
            "A friend told me his sister Bettina moved to Canada. How do time zones work "
            "there?",
        ),
    ),
    _Slot(
        "dog",
        ("Biscuit", "Pepper", "Waffles", "Rusty", "Mochi"),
        (
            "We adopted a beagle puppy last week and named him {v}. Any tips for crate "
            "training?",
            "{v}, our puppy, keeps chewing the furniture legs. How do I stop that?",
        ),
        (
            "Congratulations on {v}! Keep the crate small and cosy, feed meals inside it, "
            "and build up the time slowly.",
            "Puppies like {v} chew when teething: offer frozen chew toys and redirect "
            "every time.",
        ),
        (
            "What did we call our pet?",
            "What's the name of my dog?",
            "Remind me what our puppy is named.",
        ),
        (
            "My neighbour's dog Max barks all night. How do I bring it up politely?",
            "Is it true that dogs can eat carrots? My cousin feeds hers a lot of them.",
        ),
    ),
    _Slot(
        "allergy",
        ("peanuts", "shellfish", "sesame", "kiwi", "hazelnuts"),
        (
            "Can you give me a quick weeknight stir-fry recipe? I'm allergic to {v}, so "
            "leave those out.",
            "I'm going to a dinner party. What should I tell the host, given my {v} allergy?",
        ),
        (
            "Here's a {v}-free stir-fry: chicken, peppers, ginger, garlic, soy and rice "
            "vinegar, ready in 20 minutes.",
            "Tell the host early that you react to {v}, and offer to bring a dish you can "
            "safely eat.",
        ),
        (
            "Is there any food that I must avoid?",
            "What am I allergic to?",
            "Which ingredient gives me a reaction?",
        ),
        (
            "My colleague has hay fever every spring. Which antihistamines are usually "
            "recommended?",
            "What are the most common food allergies in children?",
        ),
    ),
    _Slot(
        "employer",
        ("Northwind Logistics", "Acme Robotics", "Bluefin Insurance", "Helix Biotech"),
        (
            "I work as a data analyst at {v}. How should I structure a quarterly KPI "
            "dashboard?",
            "At {v}, where I work, we're switching to a four-day week. How do I plan my "
            "tasks?",
        ),
        (
            "For an analyst at {v}: put three headline KPIs on top, trends underneath, and "
            "a details tab for drill-downs.",
            "Block focus time early in the week and batch your meetings so the shorter "
            "week at {v} stays manageable.",
        ),
        (
            "Which company am I employed by these days?",
            "Where do I currently work?",
            "Who is my employer right now?",
        ),
        (
            "My brother-in-law works at a bank downtown. Is investment banking stressful?",
            "What questions should I ask in a job interview at a startup?",
        ),
        (
            "Big news: I left my old job and started at {v} this week! How do I make a "
            "good impression in the first month?",
            "I work at {v} now, and I'd like to ask for a raise after six months. How do I "
            "prepare?",
        ),
    ),
    _Slot(
        "city",
        ("Lisbon", "Rotterdam", "Leipzig", "Valencia", "Porto", "Gdansk"),
        (
            "I live in {v} and want to start cycling to work. What gear do I need for rainy "
            "days?",
            "Any ideas for a cheap weekend in {v}? I live here but never play tourist.",
        ),
        (
            "For rainy commutes in {v}: mudguards, a waterproof jacket and overtrousers, "
            "and good lights.",
            "Be a tourist in {v}: a free walking tour, the local market and a sunset "
            "viewpoint.",
        ),
        (
            "Which city am I based in now?",
            "Where is home for me at the moment?",
            "What town do I live in?",
        ),
        (
            "My uncle lives in Marseille. What's the weather like there in winter?",
            "What are the most livable cities in Europe according to recent rankings?",
        ),
        (
            "We finally finished the move to {v}! What should I sort out first after "
            "relocating?",
            "I live in {v} and I'm looking for a climbing gym nearby. What should I look "
            "for?",
        ),
    ),
    _Slot(
        "car",
        ("Honda Civic", "Skoda Octavia", "Toyota Prius", "Volvo V60"),
        (
            "The check-engine light came on in my {v} this morning. Is it safe to keep "
            "driving?",
            "How often should I rotate the tyres on my {v}?",
        ),
        (
            "With a {v}, a steady check-engine light usually isn't urgent, but get the code "
            "read soon.",
            "For a {v}, rotating every 8,000 to 10,000 km keeps wear even.",
        ),
        (
            "What vehicle do I own?",
            "Which model is my car?",
            "Remind me what I drive.",
        ),
        (
            "My dad wants to buy an electric SUV. What's a good family model?",
            "How do I jump-start a car with a dead battery?",
        ),
        (
            "I sold my old car and bought a {v}. What maintenance should I do in the first "
            "year?",
            "The wipers on my {v} leave streaks. Should I replace the blades?",
        ),
    ),
    _Slot(
        "coffee",
        ("oat flat white", "double espresso", "iced americano", "cortado"),
        (
            "My usual order is an {v}. Can I make something close to it at home without a "
            "machine?",
        ),
        (
            "To get close to an {v} at home, a moka pot plus a milk frother works well.",
        ),
        (
            "How do I take my coffee?",
            "What's my go-to drink at the café?",
        ),
        (
            "My roommate drinks five cups of coffee a day. Is that too much caffeine?",
            "What's the difference between arabica and robusta beans?",
        ),
        (
            "These days I always order a {v}. Is it worth buying a grinder for home?",
        ),
    ),
    _Slot(
        "manager",
        ("Priya", "Tomasz", "Grace", "Dmitri", "Aisha"),
        (
            "My manager {v} wants the quarterly report by Monday. How do I write a concise "
            "executive summary?",
        ),
        (
            "For {v}: lead with the three key numbers, one line on risks, and the ask.",
        ),
        (
            "Who is my boss now?",
            "What's my line manager's name?",
            "Who do I report to at the moment?",
        ),
        (
            "My friend's manager micromanages everything. How can she push back?",
            "What makes a good manager, according to research?",
        ),
        (
            "Reorg at work: my new manager is {v}. How should I prepare for our first "
            "one-on-one?",
            "My manager {v} asked me to present at the all-hands. Any tips for a "
            "ten-minute talk?",
        ),
    ),
    _Slot(
        "anniversary",
        ("June 14", "March 3", "October 21", "August 9"),
        (
            "Our wedding anniversary is on {v}. Help me plan a surprise dinner.",
        ),
        (
            "For {v}: book a table somewhere meaningful, and add a small handwritten note.",
        ),
        (
            "When do my partner and I celebrate our marriage?",
            "What date is our anniversary?",
        ),
        (
            "My parents have their 40th anniversary soon. What is the traditional gift?",
            "How do I remember birthdays of all my friends?",
        ),
    ),
    _Slot(
        "school",
        ("Riverside", "Oakwood", "St. Mary's", "Hillcrest"),
        (
            "My daughter goes to {v} Elementary and they want a costume for Friday. Any "
            "quick DIY ideas?",
        ),
        (
            "A quick costume for {v} Elementary: a cardboard robot or a paper-plate lion.",
        ),
        (
            "Which school does my kid attend?",
            "What's the name of my daughter's school?",
        ),
        (
            "My nephew is choosing a high school. What should he look at?",
            "Are school uniforms a good idea?",
        ),
    ),
    _Slot(
        "band",
        ("Radiohead", "Khruangbin", "Fleetwood Mac", "Arctic Monkeys"),
        (
            "I've been listening to {v} nonstop. Can you recommend similar artists?",
        ),
        (
            "If you like {v}, try a few related artists from the same era and label.",
        ),
        (
            "What music have I been obsessed with?",
            "Which group do I love listening to?",
        ),
        (
            "My sister's boyfriend plays bass in a cover band. How do I tune a bass?",
            "What were the best-selling albums of the 1990s?",
        ),
    ),
    _Slot(
        "race",
        ("half marathon", "10K trail race", "sprint triathlon", "marathon"),
        (
            "I signed up for a {v} in the spring. Can you draft a twelve-week training "
            "plan?",
        ),
        (
            "Twelve weeks to a {v}: three easy runs, one long run and one strength session "
            "a week.",
        ),
        (
            "What event am I training for?",
            "Which race am I preparing for right now?",
        ),
        (
            "My colleague ran the Berlin marathon. How long does recovery usually take?",
            "Is stretching before a run useful or not?",
        ),
        (
            "Change of plans: I switched my registration to a {v} instead. How should I "
            "adapt my training?",
            "I'm training for a {v} this year. What should I eat the night before?",
        ),
    ),
)

_THEMES: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = {
    # theme: (subjects, (user form, assistant form)); every pair gives a distinct turn.
    "cooking": (
        ("risotto", "banana bread", "ramen", "lasagna", "shakshuka", "pad thai", "focaccia"),
        (
            ("How do I make a good {s}?", "Start with a simple base recipe for {s}."),
            ("Why did my {s} turn out bland?", "Season in layers and taste as you go."),
            ("Can I freeze leftover {s}?", "Yes, cool it fast and freeze in portions."),
            ("What should I serve with {s}?", "A crisp green salad goes well with {s}."),
        ),
    ),
    "code": (
        ("a Python list", "a git branch", "a SQL index", "a Docker image", "a REST API",
         "a regex", "a unit test"),
        (
            ("How do I debug {s} that behaves oddly?", "Reproduce it minimally first."),
            ("What's the best practice for naming {s}?", "Be descriptive and consistent."),
            ("Can you explain {s} in simple terms?", "Here's a plain explanation of {s}."),
            ("How do I clean up {s} I no longer need?", "Delete it, then check nothing "
             "depends on it."),
        ),
    ),
    "travel": (
        ("Iceland", "Japan", "Morocco", "the Dolomites", "Vietnam", "Scotland", "Chile"),
        (
            ("What should I pack for a week in {s}?", "Layers, a rain shell, good shoes."),
            ("When is the best season to visit {s}?", "Shoulder season is usually best."),
            ("Is {s} expensive for travellers?", "It varies; budget about a mid range."),
            ("How many days do I need in {s}?", "Seven to ten days is a good start."),
        ),
    ),
    "finance": (
        ("an emergency fund", "index funds", "a mortgage", "a pension plan", "crypto",
         "a credit card"),
        (
            ("Can you explain how {s} works?", "Here's the short version of {s}."),
            ("Is {s} a good idea for me?", "It depends on your goals and horizon."),
            ("What are the risks of {s}?", "Fees, volatility and liquidity, mostly."),
        ),
    ),
    "home": (
        ("a dripping tap", "a squeaky door", "mould in the bathroom", "a clogged drain",
         "a cracked tile", "a drafty window"),
        (
            ("How do I fix {s}?", "Here are the steps for {s}, with the tools you need."),
            ("Should I call a pro for {s}?", "Usually it's a DIY job if you're careful."),
            ("How do I prevent {s} in the future?", "Regular maintenance helps most."),
        ),
    ),
    "writing": (
        ("a cover letter", "a thank-you email", "a blog post on habits", "a wedding toast",
         "a product description", "a complaint letter"),
        (
            ("Can you help me draft {s}?", "Sure, here's a first draft of {s}."),
            ("How long should {s} be?", "Short: aim for a few clear paragraphs."),
            ("Can you make {s} sound less formal?", "Here's a friendlier version."),
        ),
    ),
}

_FILLER: dict[str, tuple[tuple[str, str], ...]] = {
    theme: tuple(
        (user.format(s=subject), assistant.format(s=subject))
        for subject in subjects
        for user, assistant in forms
    )
    for theme, (subjects, forms) in _THEMES.items()
}

_THEME_FOR_SLOT = {
    "sister": "travel", "dog": "home", "allergy": "cooking", "employer": "writing",
    "city": "travel", "car": "home", "coffee": "cooking", "manager": "writing",
    "anniversary": "cooking", "school": "home", "band": "writing", "race": "finance",
}  # fmt: skip


class _Builder:
    def __init__(self, user_id: str, rng: random.Random, start: datetime) -> None:
        self.conv = Conversation(user_id)
        self.rng = rng
        self.date = start
        self.session = -1

    def new_session(self) -> str:
        self.session += 1
        self.date += timedelta(days=self.rng.choice((1, 1, 1, 2, 3)))
        return f"{self.conv.user_id}-thread-{self.session:03d}"

    def turn(self, thread: str, user: str, assistant: str) -> Turn:
        index = len(self.conv.turns)
        turn = Turn(
            turn_id=f"{self.conv.user_id}-t{index:04d}",
            user_id=self.conv.user_id,
            thread_id=thread,
            session=self.session,
            index=index,
            date=self.date + timedelta(minutes=3 * index),
            user=user,
            assistant=assistant,
        )
        self.conv.turns.append(turn)
        return turn

    def fillers(self, thread: str, theme: str, n: int) -> None:
        for user, assistant in self.rng.sample(_FILLER[theme], min(n, len(_FILLER[theme]))):
            self.turn(thread, user, assistant)


def generate(
    *, users: int = 2, sessions: int = 90, probes_per_slot: int = 4, seed: int = 7
) -> list[Conversation]:
    """Generate ``users`` conversations of about ``sessions`` sessions each.

    Args:
        users: Number of simulated users (each gets other fact values).
        sessions: Ordinary sessions per user, besides plant/update/probe sessions.
        probes_per_slot: Probes asked per fact, at growing distances.
        seed: Random seed.

    Returns:
        One :class:`Conversation` per user.
    """
    out = []
    for u in range(users):
        rng = random.Random(seed * 1000 + u)
        out.append(_one_user(f"user{u}", rng, sessions=sessions, probes_per_slot=probes_per_slot))
    return out


def _one_user(
    user_id: str, rng: random.Random, *, sessions: int, probes_per_slot: int
) -> Conversation:
    b = _Builder(user_id, rng, datetime(2024, 1, 8, 9, 0, tzinfo=timezone.utc))
    values = {s.name: rng.sample(s.values, 2) for s in _SLOTS}
    # Session plan: each event is (session position, kind, slot).
    events: list[tuple[int, int, str, _Slot]] = []
    for order, slot in enumerate(_SLOTS):
        plant_at = rng.randrange(0, int(sessions * 0.5))
        events.append((plant_at, order, "plant", slot))
        if slot.update:
            update_at = rng.randrange(plant_at + 8, int(sessions * 0.85))
            events.append((update_at, order, "update", slot))
    events.sort(key=lambda e: (e[0], e[1]))
    by_session: dict[int, list[tuple[str, _Slot]]] = {}
    for pos, _, kind, slot in events:
        by_session.setdefault(pos, []).append((kind, slot))
    # Probe positions: growing distances from the slot's plant (and update).
    probe_plan: dict[int, list[_Slot]] = {}
    gaps = (1, 6, 20, 45, 80)[:probes_per_slot]
    for pos, _, _kind, slot in events:
        for gap in gaps:
            at = pos + gap + rng.randrange(0, 3)
            nxt = _next_update(events, slot, pos)
            if at < sessions and (nxt is None or at < nxt):
                probe_plan.setdefault(at, []).append(slot)
    latest: dict[str, list[str]] = {}
    for pos in range(sessions):
        for slot in probe_plan.get(pos, ()):  # probes open their session
            thread = b.new_session()
            theme = rng.choice(list(_FILLER))
            n_before = rng.choice((0, 0, 1))
            b.fillers(thread, theme, n_before)
            visible = tuple(t.turn_id for t in b.conv.turns if t.thread_id == thread)
            ids = latest[slot.name]
            newest = b.conv.turns[_index(ids[-1])]
            b.conv.probes.append(
                Probe(
                    user_id=user_id,
                    thread_id=thread,
                    question=rng.choice(slot.questions),
                    slot=slot.name,
                    kind="update" if len(ids) > 1 else "single",
                    evidence=(ids[-1],),
                    stale=tuple(ids[:-1]),
                    before_index=len(b.conv.turns),
                    date=b.date + timedelta(hours=8),
                    distance=len(b.conv.turns) - newest.index,
                    visible=visible,
                )
            )
            b.fillers(thread, theme, rng.choice((1, 2)))
        thread = b.new_session()
        theme = rng.choice(list(_FILLER))
        b.fillers(thread, theme, rng.choice((1, 2, 3)))
        for kind, slot in by_session.get(pos, ()):
            value = values[slot.name][0 if kind == "plant" else 1]
            template = rng.choice(slot.plant if kind == "plant" else slot.update)
            reply = rng.choice(slot.reply)
            turn = b.turn(thread, template.format(v=value), reply.format(v=value))
            latest.setdefault(slot.name, []).append(turn.turn_id)
            b.fillers(thread, _THEME_FOR_SLOT[slot.name], rng.choice((1, 2)))
        if rng.random() < 0.35:  # a hard negative: same kind of fact, someone else's
            slot = rng.choice(_SLOTS)
            b.turn(thread, rng.choice(slot.distractors), "Here is what I'd suggest.")
        b.fillers(thread, theme, rng.choice((0, 1, 2)))
    return b.conv


def _next_update(events: list[tuple[int, int, str, _Slot]], slot: _Slot, after: int) -> int | None:
    later = [pos for pos, _, kind, s in events if s is slot and kind == "update" and pos > after]
    return min(later) if later else None


def _index(turn_id: str) -> int:
    return int(turn_id.rsplit("-t", 1)[1])
