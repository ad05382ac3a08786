"""Long multi-session dialogues between two people, with questions and evidence turns.

Deterministic (everything derives from a seed; nothing is downloaded). Each
conversation is two friends talking over ~25 sessions spread over about a year,
~25 turns a session. Each speaker lives a life of:

- *one-off events* (adopting a pet, a new job, an injury, a course...), each
  told once, in one of several wordings, and usually followed by the other
  person's reaction, which repeats its key words (a natural hard negative);
- *recurring activities* (trips, concerts, books, dishes, hikes, films...),
  several times each across the year, so that "which city did Ana visit" has
  several similar answers and only a date tells them apart;
- *bridges*: meeting someone somewhere, then, sessions later, news about that
  person ("Remember Theo? He's a paramedic now").

Between them: greetings, small talk, questions, plans and opinions drawn from
large pools, some on the same topics (wishing to visit a city is not visiting
it).

Some turns answer the other person's question ("How was the holiday?" ->
"Just got back from Porto..."), so the words of a question about them are in
the turn before. Questions are asked after the last session (reference time:
the day after). Some are paraphrases that share few words with the evidence
(categories instead of names: "the greyhound" is asked about as "her pet"),
others were "written looking at the evidence" and reuse its words ("What did
Ana adopt from the shelter?"), as in human-written benchmarks:

- ``single``: one fact, one evidence turn (a paraphrase and an echo each);
- ``inference``: open-domain ("Is Ana musical?"), one evidence turn;
- ``when``: "When did ...?", answered by the session date (evidence: the
  event turn), naming the event generically or by its specifics;
- ``temporal``: a recurring activity pinned by a date relative to the
  reference time ("in March", "two weeks ago", "last month", "in May 2023");
- ``current``: a fact that changed (job, city); the evidence is the newest statement;
- ``previous``: the value a changed fact had before the newest one;
- ``multi``: an aggregate over sessions ("Which cities has Ana visited?"), every
  occurrence is evidence;
- ``bridge``: two hops across sessions ("What does the person Ana met at the
  climbing gym do for work?"): the meeting and the news are both evidence.

Recall is per question the fraction of its evidence turns retrieved.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

NAMES = [
    "Ana", "Bruno", "Chloe", "Dev", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonah",
    "Kira", "Luca", "Mei", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sami", "Tess",
]  # fmt: skip
FRIENDS = [
    "Theo", "Lina", "Marco", "Yara", "Felix", "Noor", "Pablo", "Ivy", "Oskar", "Zoe",
    "Ravi", "Hana", "Emil", "Sadie", "Tomas", "Wren",
]  # fmt: skip


@dataclass(frozen=True)
class Turn:
    turn_id: str
    session: int
    index: int
    speaker: str
    text: str
    date: datetime


@dataclass(frozen=True)
class Question:
    text: str
    kind: str
    evidence: tuple[str, ...]
    now: datetime


@dataclass
class Conversation:
    conv_id: str
    speakers: tuple[str, str]
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


# -- one-off events: (key, values, statements, reactions, questions, when-questions) ----------
ONE_OFF = [
    (
        "pet",
        [
            "greyhound called Pixel",
            "tabby kitten named Miso",
            "parrot called Kiwi",
            "corgi puppy named Waffle",
            "pair of rabbits, Salt and Pepper",
        ],
        [
            "We finally adopted a {v} from the shelter on Saturday.",
            "Big news at home: there's a {v} living with us now, the rescue people said yes!",
            "Guess who came home with a {v} yesterday.",
        ],
        ["Aww, a {v}! Send pictures.", "No way, how is the {v} settling in?"],
        [
            "What animal did {a} bring home from the shelter?",
            "What is the name of {a}'s pet?",
            "Which animal joined {a}'s household?",
        ],
        ["When did {a} adopt the new pet?"],
    ),
    (
        "course",
        [
            "evening ceramics workshop",
            "Portuguese class for beginners",
            "night course in bookkeeping",
            "weekend woodworking course",
            "sign-language class",
        ],
        [
            "I signed up for an {v} at the community college, first session was on Tuesday.",
            "Decided to start an {v}; I'm terrible so far but loving it.",
            "So I enrolled in a {v}, something just for me this year.",
        ],
        ["An {v}? That's brave, I'd love to hear how it goes.", "Good for you, an {v} sounds fun."],
        [
            "What did {a} start learning in the evenings?",
            "Which lessons did {a} enrol in?",
            "What new skill is {a} studying for?",
        ],
        ["When did {a} start the new classes?"],
    ),
    (
        "injury",
        ["sprained ankle", "broken wrist", "pulled hamstring", "torn ligament in my knee"],
        [
            "Ugh, I'm on crutches, I got a {v} playing five-a-side.",
            "The doctor says it's a {v}, so no running for six weeks.",
            "Slipped on the stairs at work and ended up with a {v}.",
        ],
        ["Oh no, a {v}? Take it easy.", "Ouch. How did the {v} happen?"],
        [
            "How did {a} get hurt?",
            "What kind of injury did {a} have?",
            "Why did {a} have to stop doing sport for a while?",
        ],
        ["When did {a} get injured?"],
    ),
    (
        "car",
        ["secondhand blue hatchback", "old camper van", "tiny electric car", "vintage motorbike"],
        [
            "I bought a {v}! It smells a bit but it runs.",
            "We're finally mobile: picked up a {v} from a guy in the next town.",
            "Traded the bicycle commute for a {v}, no regrets.",
        ],
        ["A {v}, nice! Road trip soon?", "Ha, a {v} suits you."],
        [
            "What vehicle did {a} purchase?",
            "How does {a} get around these days, what did they buy?",
            "What kind of wheels did {a} get?",
        ],
        ["When did {a} buy the vehicle?"],
    ),
    (
        "sibling",
        ["my younger sister Clara", "my brother Matteo", "my cousin Aiko", "my twin Jonas"],
        [
            "{V} is staying with us for two weeks, the flat is chaos.",
            "{V} flew in from abroad, first visit in three years.",
            "Had a long weekend with {v}, we talked until 3 am.",
        ],
        ["How lovely that {v} came over!", "Say hi to {v} from me."],
        [
            "Which relative came to visit {a}?",
            "Who from {a}'s family stayed over?",
            "Which family member did {a} spend the long weekend with?",
        ],
        ["When did {a}'s relative visit?"],
    ),
    (
        "volunteer",
        ["food bank", "animal shelter", "literacy charity", "beach clean-up group"],
        [
            "I've started volunteering at the {v} on Sunday mornings.",
            "Spent the day helping out at the {v}, exhausting but good.",
            "I joined the {v} as a volunteer, they needed hands.",
        ],
        ["The {v}? That's really kind of you.", "How did you find the {v}?"],
        [
            "Where does {a} give their time for free?",
            "What charity work does {a} do?",
            "Which organisation does {a} help out at?",
        ],
        ["When did {a} start volunteering?"],
    ),
    (
        "instrument",
        ["cello", "drum kit", "ukulele", "piano keyboard", "trumpet"],
        [
            "I got a {v} for my birthday and the neighbours already hate me.",
            "Started lessons on the {v}, my fingers hurt.",
            "Found a cheap {v} online, I'm learning from videos.",
        ],
        ["A {v}! Play me something next time.", "I always wanted to learn the {v}."],
        [
            "What musical instrument is {a} learning?",
            "Which instrument does {a} practise?",
            "What does {a} play music on now?",
        ],
        ["When did {a} start with the instrument?"],
    ),
    (
        "garden",
        ["tomatoes and chillies", "a herb spiral", "strawberries", "sunflowers along the fence"],
        [
            "The allotment finally came through, I planted {v} this week.",
            "I've turned the balcony into a little garden with {v}.",
            "Spent all of Sunday in the garden putting in {v}.",
        ],
        ["Ooh, {v}! Save me some.", "How is the garden with {v} doing?"],
        [
            "What is {a} growing?",
            "What did {a} plant in the garden?",
            "Which plants does {a} grow at home?",
        ],
        ["When did {a} plant the garden?"],
    ),
]

# -- facts that change: the newest statement answers "current" questions ---------------------
CHANGING = [
    (
        "job",
        [
            "nurse at the children's hospital",
            "barista at a roastery",
            "junior architect",
            "delivery driver",
            "data analyst at an insurer",
            "primary school teacher",
        ],
        [
            "I started a new job this week, I'm a {v} now.",
            "Handed in my notice, from Monday I'm working as a {v}.",
            "Work update: I got the offer and I'm a {v} as of this month.",
        ],
        ["A {v}! Congratulations.", "How's the new gig as a {v}?"],
        [
            "What does {a} do for a living now?",
            "What is {a}'s current occupation?",
            "Where is {a} employed these days?",
        ],
    ),
    (
        "home",
        [
            "Lisbon",
            "a village near Utrecht",
            "Montreal",
            "the coast in Cornwall",
            "Kyoto",
            "Valparaiso",
        ],
        [
            "We moved! Boxes everywhere, but we live in {v} now.",
            "The move is done, we're settled in {v}.",
            "Signed the lease, so I'm officially relocating to {v}.",
        ],
        ["{V}! I need to come visit.", "How do you like living in {v}?"],
        [
            "Where does {a} live now?",
            "In which place has {a} settled most recently?",
            "What is {a}'s current home town?",
        ],
    ),
]

# -- recurring activities: several dated occurrences each ------------------------------------
RECURRING = [
    (
        "trip",
        [
            "Porto",
            "Marrakesh",
            "Reykjavik",
            "Vienna",
            "Hanoi",
            "Cape Town",
            "Oaxaca",
            "Tallinn",
            "Naples",
            "Seoul",
            "Edinburgh",
            "Istanbul",
        ],
        [
            "Just got back from {v}, the food alone was worth the flight.",
            "We spent five days in {v}, walked about twenty kilometres a day.",
            "Long weekend in {v}, I'm exhausted and happy.",
        ],
        ["I've always wanted to see {v}.", "Did you take photos in {v}?"],
        ["Which city did {a} travel to {when}?", "Where did {a} go on holiday {when}?"],
        ["Which cities has {a} visited?", "What places did {a} travel to this year?"],
    ),
    (
        "concert",
        [
            "a jazz quartet",
            "an old punk band",
            "a string orchestra",
            "a folk singer",
            "a techno DJ",
            "a gospel choir",
            "a flamenco guitarist",
            "an indie pop duo",
        ],
        [
            "Went to see {v} live last night, my ears are still ringing.",
            "Got last-minute tickets for {v}, best gig in ages.",
            "Saw {v} in a tiny venue, only fifty people there.",
        ],
        ["Jealous! I love {v}.", "Was {v} as good as people say?"],
        ["What live music did {a} see {when}?", "Which show did {a} attend {when}?"],
        ["What concerts has {a} been to?", "Which live performances did {a} go to?"],
    ),
    (
        "book",
        [
            "a thriller about a lighthouse keeper",
            "a memoir by a mountain guide",
            "a history of the spice trade",
            "a novel set on a generation ship",
            "a cookbook of Georgian food",
            "a biography of a chess prodigy",
            "a collection of Irish short stories",
            "an essay on sleep",
        ],
        [
            "I couldn't put it down, {v}, finished it in two nights.",
            "My reading this week was {v}, surprisingly good.",
            "Book club picked {v}; I actually finished it for once.",
        ],
        ["Lend me {v} when you're done?", "I've heard of {v}, is it worth it?"],
        ["What was {a} reading {when}?", "Which book did {a} finish {when}?"],
        ["What books has {a} read?", "Which books did {a} mention reading?"],
    ),
    (
        "dish",
        [
            "a mushroom risotto",
            "homemade dumplings",
            "a lamb tagine",
            "sourdough bread",
            "pad thai from scratch",
            "a lemon tart",
            "a big pot of chili",
            "fresh pasta",
        ],
        [
            "Cooked {v} for friends, nobody left hungry.",
            "My kitchen experiment this weekend: {v}. It worked!",
            "Spent the afternoon making {v}, the flat smells amazing.",
        ],
        ["Send me the recipe for {v}!", "{V} sounds delicious."],
        ["What did {a} cook {when}?", "Which meal did {a} prepare {when}?"],
        ["What dishes has {a} cooked?", "What has {a} made in the kitchen?"],
    ),
    (
        "hike",
        [
            "the ridge trail above the lake",
            "a coastal path to the lighthouse",
            "the old pilgrim route",
            "a gorge walk with three waterfalls",
            "the volcano crater loop",
            "a forest trail through the beeches",
        ],
        [
            "Did {v} today, eighteen kilometres and my legs are jelly.",
            "We hiked {v}, the views at the top were unreal.",
            "Early start for {v}, saw a fox on the way back.",
        ],
        ["{V} is on my list!", "How long did {v} take you?"],
        ["Which walk did {a} do {when}?", "Where did {a} go hiking {when}?"],
        ["Which hikes has {a} done?", "What trails has {a} walked?"],
    ),
    (
        "film",
        [
            "a documentary about octopuses",
            "a Korean revenge thriller",
            "a silent film with live piano",
            "an animated film about a robot",
            "a three-hour war epic",
            "a French comedy about a wedding",
        ],
        [
            "Watched {v} at the cinema, still thinking about it.",
            "Movie night: {v}. Not what I expected.",
            "Finally saw {v}, everyone was right about it.",
        ],
        ["I fell asleep in {v}, ha.", "Is {v} streaming anywhere?"],
        ["What movie did {a} watch {when}?", "Which film did {a} see {when}?"],
        ["What films has {a} watched?", "Which movies did {a} talk about seeing?"],
    ),
]

# -- LoCoMo-like additions: questions naming the thing, inference, turns answering a question --
WHEN_NAMED = {
    "pet": "When did {a} get the {v}?",
    "course": "When did {a} begin the {v}?",
    "injury": "When did {a} end up with the {v}?",
    "car": "When did {a} buy the {v}?",
    "sibling": "When did {v2} come to stay with {a}?",
    "volunteer": "When did {a} first help at the {v}?",
    "instrument": "When did {a} take up the {v}?",
    "garden": "When did {a} put in the {v}?",
}
INFERENCE = {
    "pet": ["Would {a} be a good person to ask about looking after animals?",
            "Does {a} have someone waiting at home to be fed?"],
    "course": ["Is {a} busy on some weekday evenings?",
               "Is {a} the kind of person who keeps learning as an adult?"],
    "injury": ["Would {a} have been up for a football match back then?",
               "Has {a} had any health trouble this year?"],
    "car": ["Could {a} drive us to the airport?", "Does {a} still depend on public transport?"],
    "sibling": ["Is {a} close to their family?", "Did {a} have house guests this year?"],
    "volunteer": ["Does {a} do anything for the community?",
                  "Is {a} someone who gives back to others?"],
    "instrument": ["Would {a} enjoy a music shop voucher?", "Is {a} musical?"],
    "garden": ["Would {a} like a gift of seeds?", "Does {a} have green fingers?"],
}
PROMPTS = {
    "pet": ["So what's new at home?", "Any news on the shelter application?"],
    "course": ["Doing anything fun in the evenings these days?", "What are you up to after work?"],
    "injury": ["Why weren't you at training?", "You're limping, what happened?"],
    "car": ["How are you getting around these days?", "Still cycling everywhere?"],
    "sibling": ["Why is your place so full?", "Who's that in your photos?"],
    "volunteer": ["What do you do on Sundays now?", "How do you spend your free time lately?"],
    "instrument": ["What was that noise on the phone?", "Picked up any new hobbies?"],
    "garden": ["What were you doing all weekend?", "Why are your hands so muddy?"],
    "job": ["How's work going?", "Any news on the job front?"],
    "home": ["Any luck with the flat hunt?", "Where are you living these days?"],
    "trip": ["Did you go anywhere nice lately?", "How was the holiday?"],
    "concert": ["Heard any good music recently?", "What did you do last night?"],
    "book": ["Reading anything good?", "What's on your bedside table?"],
    "dish": ["What did you have for dinner at the weekend?", "Been cooking much?"],
    "hike": ["Were you outdoors this weekend?", "How did you spend Sunday?"],
    "film": ["Seen anything good lately?", "What did you watch on Friday?"],
}
ECHO = {  # questions written looking at the evidence: they reuse its words (one per statement)
    "pet": ["What did {a} adopt from the shelter?",
            "What did the rescue people say yes to for {a}?",
            "Who came home with {a}?"],
    "course": ["What did {a} sign up for at the community college?",
               "What did {a} decide to start that they are terrible at?",
               "What did {a} enrol in as something just for them?"],
    "injury": ["Why is {a} on crutches?", "What did the doctor tell {a}?",
               "What happened when {a} slipped on the stairs at work?"],
    "car": ["What did {a} buy that smells a bit?",
            "What did {a} pick up from a guy in the next town?",
            "What did {a} trade the bicycle commute for?"],
    "sibling": ["Who is staying with {a} for two weeks?", "Who flew in from abroad to see {a}?",
                "Who did {a} talk with until 3 am?"],
    "volunteer": ["Where does {a} volunteer on Sunday mornings?",
                  "Where did {a} spend the day helping out?",
                  "Which group did {a} join as a volunteer?"],
    "instrument": ["What did {a} get for their birthday that the neighbours hate?",
                   "Which instrument does {a} take lessons on?",
                   "What did {a} find cheap online to learn from videos?"],
    "garden": ["What did {a} plant in the allotment?", "What is growing on {a}'s balcony?",
               "What did {a} put in the garden on Sunday?"],
    "job": ["What is {a}'s new job?", "What is {a} working as since handing in their notice?",
            "Which offer did {a} get at work?"],
    "home": ["Where did {a} move to?", "Where is {a} settled after the move?",
             "Where did {a} sign a lease?"],
}
WHEN_RECUR = {
    "trip": "When did {a} go to {v}?",
    "concert": "When did {a} see {v} live?",
    "book": "When did {a} read {v}?",
    "dish": "When did {a} make {v}?",
    "hike": "When did {a} do {v}?",
    "film": "When did {a} watch {v}?",
}
PREVIOUS_Q = {
    "job": ["What did {a} do for work before the current job?",
            "Which job did {a} have before switching to the latest one?"],
    "home": ["Where did {a} live before the most recent move?",
             "Which place did {a} leave in the last move?"],
}

PLACES = [
    "the climbing gym",
    "a pottery class",
    "the dog park",
    "a wedding in the hills",
    "the choir rehearsal",
    "a conference in Berlin",
    "the running club",
    "a chess cafe",
]
JOBS = [
    "paramedic",
    "tattoo artist",
    "marine biologist",
    "sommelier",
    "train driver",
    "court interpreter",
    "beekeeper",
    "bike mechanic",
]
BRIDGE_MEET = [
    "At {p} I met {f}, we talked for hours.",
    "I got chatting with someone called {f} at {p}.",
    "Made a new friend at {p}, {f}, really funny.",
]
BRIDGE_NEWS = [
    "Remember {f}? {f} is working as a {j} now.",
    "{f} told me about the new job, {f} is a {j} these days.",
    "Ran into {f} again, turns out {f} retrained as a {j}.",
]
BRIDGE_Q = [
    "What does the person {a} met at {p} do for work?",
    "What is the job of the friend {a} made at {p}?",
]

GREETINGS = [
    ("Hey {b}! Long time, how have you been?", "Good! Busy, but good. You?"),
    ("Morning {b}, got a minute?", "Always, what's up?"),
    ("{b}! I have news.", "Tell me everything."),
    ("Hi {b}, sorry I've been quiet.", "No worries, life happens."),
]
OPENERS = [
    "",
    "",
    "Honestly, ",
    "Ugh, ",
    "Funny thing: ",
    "You know what, ",
    "Not gonna lie, ",
    "Random thought: ",
    "So, ",
    "By the way, ",
]
SMALL_TALK = [
    "the weather has been so {adj} lately.",
    "I need more sleep, I was up at {hour} again.",
    "work is work, {colleague} keeps scheduling meetings at {hour}.",
    "did you see the news about the {thing} in town?",
    "I'm trying to drink less {drink}.",
    "my {gadget} broke again, third time this year.",
    "we should plan something for {season}.",
    "I keep meaning to call {relative} more.",
    "traffic on {street} was terrible this morning.",
    "I started a podcast about {topic}, it's oddly gripping.",
    "my landlord still hasn't fixed the {fixture}.",
    "I binge-watched a whole series about {topic}.",
    "the neighbours are renovating their {room}, the noise never stops.",
    "I'm thinking about a new {style} haircut.",
    "{colleague} brought {food} to the office today.",
    "I lost my {gadget} charger somewhere in the flat.",
    "I finally cleaned the {room}, it took hours.",
    "my {relative} sent me a long voice message about {topic}.",
    "I'd love to visit {c} one day.",
    "someone at work just got back from {c}.",
    "have you ever cooked {d}? I'm scared to try.",
    "{relative} loves hiking, I don't get it.",
    "I haven't been to a gig in forever.",
    "reading is hard with my schedule right now.",
    "thinking of getting a pet, but the flat is small.",
    "I'd never manage a night course.",
    "music lessons as an adult seem so hard.",
    "my job is fine, nothing new with {colleague}.",
    "I'm not moving anywhere, I like it here.",
    "a film recommendation would be nice for {day}.",
    "the {fixture} in the bathroom is making a weird noise.",
    "I spent {day} doing absolutely nothing.",
    "I bought way too much {food} at the market.",
    "the bus was {minutes} minutes late again.",
]
REPLIES = [
    "That's so true.",
    "Haha, same here.",
    "Really? Tell me more.",
    "I know what you mean.",
    "That sounds exhausting.",
    "Oh wow.",
    "Fair enough.",
    "Totally.",
    "We should catch up properly.",
    "Ha, classic {colleague}.",
    "Poor you.",
    "Honestly, same with me and {topic}.",
    "Oh no.",
    "Sounds like {day} was well spent.",
    "Lol.",
    "Wait, really?",
    "I feel that.",
]
SLOTS = {
    "adj": ["strange", "grey", "warm", "windy", "unpredictable", "gloomy"],
    "hour": ["5 am", "6 am", "midnight", "2 am", "7:30"],
    "colleague": ["Martin", "Greg", "Sofia", "my boss", "the new guy", "Deborah"],
    "thing": ["bridge", "new tram line", "festival", "power cut", "marathon", "bakery fire"],
    "drink": ["coffee", "energy drinks", "soda", "black tea"],
    "gadget": ["phone", "laptop", "headphones", "kettle", "e-reader"],
    "season": ["the holidays", "the spring", "summer", "the long weekend"],
    "relative": ["my parents", "my aunt", "my grandma", "my uncle", "my godmother"],
    "street": ["the ring road", "Main Street", "the bridge", "the high street"],
    "topic": ["history", "true crime", "space", "economics", "old shipwrecks", "birds"],
    "fixture": ["heating", "shower", "window latch", "boiler", "fridge door"],
    "room": ["kitchen", "attic", "garage", "bathroom", "hallway"],
    "style": ["short", "shaggy", "buzz", "bob"],
    "food": ["cake", "samosas", "apples", "cheese", "doughnuts"],
    "day": ["Sunday", "Saturday", "the bank holiday", "my day off"],
    "minutes": ["ten", "twenty", "fifteen", "forty"],
}
CLOSINGS = [
    ("Anyway, I should go. Talk soon!", "Bye! Take care."),
    ("Ok, dinner's ready, speak later.", "Enjoy!"),
]


ECHOED: dict[tuple, int] = {}
"""Which statement template told each one-off event and changed fact (for ``ECHO``)."""


def _ago_phrase(date: datetime, now: datetime, rng: random.Random) -> str:
    days = (now - date).days
    weeks = round(days / 7)
    if 10 <= days <= 45 and rng.random() < 0.5:
        words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
        if weeks in words and abs(days - 7 * weeks) <= 2:
            return f"{words[weeks]} weeks ago"
    months = ["January", "February", "March", "April", "May", "June", "July", "August",
              "September", "October", "November", "December"]  # fmt: skip
    if (now.year, now.month) == (date.year, date.month):
        return "earlier this month"
    prev = (now.year, now.month - 1) if now.month > 1 else (now.year - 1, 12)
    if (date.year, date.month) == prev and rng.random() < 0.5:
        return "last month"
    if date.year != now.year or date.month >= now.month:
        return f"in {months[date.month - 1]} {date.year}"
    return (
        f"in {months[date.month - 1]}"
        if rng.random() < 0.6
        else f"back in {months[date.month - 1]}"
    )


def generate(conversations: int = 6, *, seed: int = 7, sessions: int = 26) -> list[Conversation]:
    """Generate ``conversations`` dialogues, each with its questions."""
    rng = random.Random(seed)
    out = []
    names = NAMES[:]
    rng.shuffle(names)
    for c in range(conversations):
        a, b = names[2 * c % len(names)], names[(2 * c + 1) % len(names)]
        out.append(_conversation(f"c{c}", (a, b), rng, sessions))
    return out


def _conversation(
    conv_id: str, speakers: tuple[str, str], rng: random.Random, n_sessions: int
) -> Conversation:
    conv = Conversation(conv_id, speakers)
    ECHOED.clear()  # per conversation (questions are built at its end)
    start = datetime(2023, 1, 9, 18, 0, tzinfo=timezone.utc) + timedelta(days=rng.randint(0, 60))
    dates, day = [], start
    for _ in range(n_sessions):
        dates.append(day)
        day += timedelta(days=rng.randint(6, 20), hours=rng.randint(-3, 3))
    now = dates[-1] + timedelta(days=1)
    # plan: which session holds which event of which speaker
    plan: dict[int, list[tuple]] = {s: [] for s in range(n_sessions)}
    for who in speakers:
        for ev in rng.sample(ONE_OFF, 5):
            plan[rng.randrange(n_sessions)].append(("one", who, ev, rng.choice(ev[1])))
        for ev in CHANGING:
            values = rng.sample(ev[1], 3)
            points = sorted(rng.sample(range(n_sessions), 3))
            for s, v in zip(points, values, strict=True):
                plan[s].append(("change", who, ev, v))
        for ev in rng.sample(RECURRING, 4):
            values = rng.sample(ev[1], rng.randint(3, 5))
            points = sorted(rng.sample(range(n_sessions), len(values)))
            for s, v in zip(points, values, strict=True):
                plan[s].append(("recur", who, ev, v))
        for _ in range(2):
            f, p, j = rng.choice(FRIENDS), rng.choice(PLACES), rng.choice(JOBS)
            s1 = rng.randrange(n_sessions - 4)
            s2 = rng.randrange(s1 + 2, n_sessions)
            plan[s1].append(("meet", who, (f, p, j), None))
            plan[s2].append(("news", who, (f, p, j), None))
    facts: dict[tuple, list[tuple[str, datetime]]] = {}
    index = 0
    for s in range(n_sessions):
        t0 = dates[s]
        turns: list[tuple[str, str, tuple | None]] = []
        first = rng.choice(speakers)
        other = speakers[1] if first == speakers[0] else speakers[0]
        g = rng.choice(GREETINGS)
        turns += [(first, g[0].format(b=other), None), (other, g[1], None)]
        events = plan[s][:]
        rng.shuffle(events)
        for event in events:
            who = event[1]
            them = speakers[1] if who == speakers[0] else speakers[0]
            for _ in range(rng.randint(1, 3)):
                speaker = rng.choice(speakers)
                turns.append((speaker, _small(rng), None))
            text, reaction, key = _say(event, rng)
            topic = key[2] if key[0] in ("one", "change", "recur") else None
            if topic in PROMPTS and rng.random() < 0.4:  # the turn answers a question
                turns.append((them, rng.choice(PROMPTS[topic]), None))
            turns.append((who, text, key))
            if reaction and rng.random() < 0.8:
                turns.append((them, reaction, None))
        while len(turns) < 22:
            turns.append((rng.choice(speakers), _small(rng), None))
        c = rng.choice(CLOSINGS)
        turns += [(first, c[0], None), (other, c[1], None)]
        for i, (speaker, text, key) in enumerate(turns):
            turn = Turn(f"{conv_id}:s{s}:t{i}", s, index, speaker, text,
                        t0 + timedelta(minutes=2 * i))  # fmt: skip
            index += 1
            conv.turns.append(turn)
            if key is not None:
                facts.setdefault(key, []).append((turn.turn_id, turn.date))
    conv.questions = _questions(facts, speakers, now, rng)
    return conv


def _small(rng: random.Random) -> str:
    values = {k: rng.choice(v) for k, v in SLOTS.items()}
    values.update(c=rng.choice(RECURRING[0][1]), d=rng.choice(RECURRING[3][1]))
    if rng.random() < 0.35:
        return rng.choice(REPLIES).format(**values)
    line = rng.choice(OPENERS) + rng.choice(SMALL_TALK).format(**values)
    return line[:1].upper() + line[1:]


def _fill(template: str, v: str) -> str:
    return template.format(v=v, V=v[:1].upper() + v[1:])


def _say(event: tuple, rng: random.Random) -> tuple[str, str | None, tuple]:
    kind, who, ev, v = event
    if kind == "meet":
        f, p, j = ev
        return rng.choice(BRIDGE_MEET).format(f=f, p=p), f"{f}? Sounds nice.", ("meet", who, ev)
    if kind == "news":
        f, p, j = ev
        return rng.choice(BRIDGE_NEWS).format(f=f, j=j), f"A {j}, wow.", ("news", who, ev)
    template = rng.randrange(len(ev[2]))
    text = _fill(ev[2][template], v)
    reaction = _fill(rng.choice(ev[3]), v.replace("my ", "your ", 1))
    if kind in ("one", "change"):
        ECHOED[(kind, who, ev[0], v)] = template
    return text, reaction, (kind, who, ev[0], v)


def _questions(
    facts: dict[tuple, list[tuple[str, datetime]]],
    speakers: tuple[str, str],
    now: datetime,
    rng: random.Random,
) -> list[Question]:
    qs: list[Question] = []
    by_name = {ev[0]: ev for ev in [*ONE_OFF, *CHANGING, *RECURRING]}
    recur: dict[tuple[str, str], list[tuple[str, datetime]]] = {}
    changes: dict[tuple[str, str], list[tuple[str, datetime, tuple]]] = {}
    for key, hits in facts.items():
        if key[0] == "one":
            _, who, name, _v = key
            ev = by_name[name]
            qs.append(Question(rng.choice(ev[4]).format(a=who), "single", (hits[0][0],), now))
            echo = ECHO[name][ECHOED[key]].format(a=who)
            qs.append(Question(echo, "single", (hits[0][0],), now))
            if rng.random() < 0.5:
                when_q = rng.choice(ev[5]).format(a=who)
            else:
                v2 = _v.replace("my ", f"{who}'s ", 1)
                v1 = _v.replace("my ", "their ", 1)
                when_q = WHEN_NAMED[name].format(a=who, v=v1, v2=v2[:1].upper() + v2[1:])
            qs.append(Question(when_q, "when", (hits[0][0],), now))
            if rng.random() < 0.5:
                qs.append(Question(rng.choice(INFERENCE[name]).format(a=who), "inference",
                                   (hits[0][0],), now))  # fmt: skip
        elif key[0] == "change":
            changes.setdefault((key[1], key[2]), []).extend((*h, key) for h in hits)
        elif key[0] == "recur":
            recur.setdefault((key[1], key[2]), []).extend(hits)
        elif key[0] == "meet":
            _, who, (f, p, j) = key
            news = facts.get(("news", who, (f, p, j)))
            if news:
                q = rng.choice(BRIDGE_Q).format(a=who, p=p)
                qs.append(Question(q, "bridge", (hits[0][0], news[0][0]), now))
    for (who, name), hits in changes.items():
        newest = max(hits, key=lambda h: h[1])
        qs.append(Question(rng.choice(by_name[name][4]).format(a=who), "current",
                           (newest[0],), now))  # fmt: skip
        echo = ECHO[name][ECHOED[newest[2]]].format(a=who).rstrip("?")
        qs.append(Question(f"{echo} now?", "current", (newest[0],), now))
        ordered = sorted(hits, key=lambda h: h[1])
        if len(ordered) >= 2:
            qs.append(Question(rng.choice(PREVIOUS_Q[name]).format(a=who), "previous",
                               (ordered[-2][0],), now))  # fmt: skip
    for (who, name), hits in recur.items():
        ev = by_name[name]
        qs.append(Question(rng.choice(ev[5]).format(a=who), "multi",
                           tuple(h[0] for h in hits), now))  # fmt: skip
        for tid, date in hits:
            value = next(k[3] for k, v in facts.items() if v and v[0][0] == tid)
            if rng.random() < 0.5:
                q = WHEN_RECUR[name].format(a=who, v=value)
                qs.append(Question(q, "when", (tid,), now))
            if rng.random() < 0.6:
                continue  # dates in questions are rarer than "when did"
            when = _ago_phrase(date, now, rng)
            if any(
                h[0] != tid
                and (
                    h[1].strftime("%Y-%m") == date.strftime("%Y-%m")
                    or abs((h[1] - date).days) <= 10
                )
                for h in hits
            ):
                continue  # two occurrences close together: the question would be ambiguous
            qs.append(Question(rng.choice(ev[4]).format(a=who, when=when), "temporal", (tid,), now))
    return qs
