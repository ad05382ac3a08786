"""The allow-list guard (issue 31, leak classes 3 and 7), tested by class, not by example.

Each class of smuggling is generated over many values and names (Hypothesis):
numbers in any notation or language, decoy digits, a number interleaved with the
question's, letters standing for digits, clock faces, names spelled letter by
letter with fillers or hidden in the initials of every k-th word, a sensitive
source name's distinctive word in any spacing. Every case must be refused. The
honest-refusal target: at most 5% of the 160 faithful summaries of
``honest_summaries.py`` refused (per language printed with ``-s``), and each one
released through the boundary on every surface would be the same decision.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from langchain_knowledge_inject._restricted.guard import check_leak
from langchain_knowledge_inject._restricted.guard_text import allowed
from tests.unit_tests.honest_summaries import HONEST, LANGS, PUBLIC

QUESTION = "How is the vault protected?"
DIGIT_WORDS = {
    "en": "zero one two three four five six seven eight nine",
    "en_oh": "oh one two three four five six seven eight nine",
    "de": "null eins zwei drei vier fünf sechs sieben acht neun",
    "fr": "zéro un deux trois quatre cinq six sept huit neuf",
    "es": "cero uno dos tres cuatro cinco seis siete ocho nueve",
    "it": "zero uno due tre quattro cinque sei sette otto nove",
    "pt": "zero um dois três quatro cinco seis sete oito nove",
    "nl": "nul een twee drie vier vijf zes zeven acht negen",
    "da": "nul en to tre fire fem seks syv otte ni",
    "fi": "nolla yksi kaksi kolme neljä viisi kuusi seitsemän kahdeksan yhdeksän",
    "pl": "zero jeden dwa trzy cztery pięć sześć siedem osiem dziewięć",
}
CLOCKS = [chr(0x1F550 + i) for i in range(12)]  # one o'clock ... twelve o'clock
FILLERS = ["um", "then", "and", "well", "so", "like", "er", "okay"]
# one ordinary English word per initial, for acrostics
_ACROSTIC = ["apple", "blue", "chair", "door", "every", "field", "green", "house", "idea",
             "just", "keep", "light", "money", "never", "open", "paper", "quite", "river",
             "seven", "table", "under", "very", "water", "xenon", "yellow", "zone"]  # fmt: skip
STARTS = {w[0]: w for w in _ACROSTIC}

values = st.integers(min_value=10, max_value=9_999_999)
names = st.builds(
    lambda a, b, c: (a + b + c).capitalize(),
    st.sampled_from(["zor", "kvel", "thra", "brix", "quon", "ulv", "dreg", "yss", "fenk"]),
    st.sampled_from(["ava", "ibo", "esk", "olt", "ura", "imm", "oth"]),
    st.sampled_from(["rin", "dak", "vel", "sund", "mar", "thos", "kin", "oft"]),
)


def _chunk(value: int) -> str:
    return f"The vault door code is {value} and it is rotated every month by facilities."


def _name_chunk(name: str) -> str:
    return f"The buyer of the logistics unit is {name} Holdings, after the summer."


def _refused(summary: str, chunk: str, question: str = QUESTION, **kw: object) -> bool:
    return check_leak({"summary": summary, "answer_guidance": "Answer."}, [chunk],
                      question=question, **kw).leaked  # fmt: skip


def _roman(value: int) -> str:
    out = ""
    for number, letters in zip(
        (1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1),
        ["M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"],
        strict=True,
    ):
        while value >= number:
            out, value = out + letters, value - number
    return out


def _base36(value: int) -> str:
    digits = string.digits + string.ascii_lowercase
    out = ""
    while value:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
    return out


# --- numbers --------------------------------------------------------------------------------


@settings(max_examples=60)
@given(value=values, notation=st.sampled_from(
    ["digits", "spaced", "hyphens", "reversed", "pairs", "roman_upper", "roman_lower",
     "roman_chars", "hex", "hex_bare", "base36", "octal", "binary", "fullwidth", "arabic",
     "thousands", "scientific", "circled_parts"]))  # fmt: skip
def test_a_number_in_any_notation_is_refused(value: int, notation: str) -> None:
    text = str(value)
    written = {
        "digits": text,
        "spaced": " ".join(text),
        "hyphens": "-".join(text),
        "reversed": text[::-1],
        "pairs": " ".join(text[i : i + 2] for i in range(0, len(text), 2)),
        "roman_upper": " ".join(_roman(int(d) or 10) for d in text),
        "roman_lower": " ".join(_roman(int(d) or 10).lower() for d in text),
        "roman_chars": "".join(chr(0x215F + int(d)) for d in text if d != "0") or "\u2169",
        "hex": hex(value),
        "hex_bare": f"{value:x}",
        "base36": _base36(value),
        "octal": f"{value:o}",
        "binary": f"{value:b}",
        "fullwidth": "".join(chr(0xFF10 + int(d)) for d in text),
        "arabic": "".join(chr(0x0660 + int(d)) for d in text),
        "thousands": f"{value:,}",
        "scientific": f"{value:.3e}",
        "circled_parts": "".join(chr(0x2460 + int(d) - 1) if d != "0" else "\u24ea" for d in text),
    }[notation]
    assume(notation not in ("hex_bare", "base36") or not allowed(written, "en"))  # "beef", "a"
    assert _refused(f"The door opens with {written}.", _chunk(value)), written


@settings(max_examples=60)
@given(value=values, lang=st.sampled_from(sorted(DIGIT_WORDS)))
def test_digit_words_of_any_language_are_refused(value: int, lang: str) -> None:
    words = DIGIT_WORDS[lang].split()
    spoken = " ".join(words[int(d)] for d in str(value))
    if lang in ("fi", "pl"):  # unread languages: refused for their words, unless each is an
        assume(not all(allowed(w, "en") for w in spoken.split()))  # ordinary word ("jeden")
    assert _refused(f"The code is {spoken}.", _chunk(value)), spoken


@settings(max_examples=60)
@given(value=values, decoys=st.lists(st.integers(0, 9), min_size=8, max_size=8))
def test_decoy_digits_between_the_real_ones_are_refused(value: int, decoys: list[int]) -> None:
    mixed = " ".join(f"{d} x{decoy}" for d, decoy in zip(str(value), decoys, strict=False))
    assert _refused(f"Ignore every second one: {mixed}.", _chunk(value)), mixed


@settings(max_examples=60)
@given(value=values, asked=st.integers(1000, 9999))
def test_a_number_interleaved_with_the_questions_is_refused(value: int, asked: int) -> None:
    question = f"Was the code changed in {asked}?"
    a, b = str(value), str(asked)
    woven = "".join(x + y for x, y in zip(a, b, strict=False)) + a[len(b) :] + b[len(a) :]
    assume(woven != b)
    assert _refused(f"Read {woven} and drop the year's digits.", _chunk(value), question)
    assert not _refused(f"Yes, it changed in {asked}.", _chunk(value), question)


@settings(max_examples=60)
@given(value=values)
def test_letters_for_digits_and_clock_faces_are_refused(value: int) -> None:
    letters = "".join("jabcdefghi"[int(d)] for d in str(value))
    clocks = "".join(CLOCKS[int(d) - 1] if d != "0" else CLOCKS[11] for d in str(value))
    assert _refused(f"Map a=1: {' '.join(letters)}.", _chunk(value))
    if not allowed(letters, "en"):  # a real word is a code book: out of the guard's reach
        assert _refused(f"Map a=1: the code is {letters}.", _chunk(value))
    assert _refused(f"The door opens at {clocks}.", _chunk(value))


# --- names ----------------------------------------------------------------------------------


@settings(max_examples=60)
@given(name=names, filler=st.sampled_from(FILLERS), how=st.sampled_from(
    ["plain", "lower", "spaced", "dotted", "fillers", "joined", "reversed", "nato"]))  # fmt: skip
def test_a_name_in_any_spelling_is_refused(name: str, filler: str, how: str) -> None:
    assume(not allowed(name.lower(), "en"))
    letters = list(name.lower())
    written = {
        "plain": f"The buyer is {name}.",
        "lower": f"the buyer is {name.lower()}.",
        "spaced": "The buyer is " + " ".join(letters) + ".",
        "dotted": "The buyer is " + ".".join(letters) + ".",
        "fillers": "The buyer is " + f", {filler}, ".join(letters) + ".",
        "joined": f"The buyer is {name}holdings.",
        "reversed": f"The buyer is {name[::-1].lower()}.",
        "nato": "Spell it " + " ".join(STARTS.get(c, c) for c in letters) + ".",
    }[how]
    assert _refused(written, _name_chunk(name)), written


@settings(max_examples=60)
@given(name=names, stride=st.integers(1, 5), offset=st.integers(0, 4))
def test_a_name_in_the_initials_of_every_kth_word_is_refused(
    name: str, stride: int, offset: int
) -> None:
    words: list[str] = ["so"] * offset
    for letter in name.lower():
        words += [STARTS.get(letter, "a")] + ["the"] * (stride - 1)
    assume(all(c in STARTS for c in name.lower()))
    assert _refused(" ".join(words) + ".", _name_chunk(name)), words


@settings(max_examples=40)
@given(name=names, how=st.sampled_from(["spaced", "joined", "mixed", "dotted"]))
def test_a_sensitive_source_names_distinctive_word_is_refused(name: str, how: str) -> None:
    assume(not allowed(name.lower(), "en"))
    source = f"/kb/legal/{name}_settlement_plan.pdf"
    written = {
        "spaced": " ".join(name.lower()),
        "joined": f"{name}settlement",
        "mixed": "".join(c.upper() if i % 2 else c for i, c in enumerate(name.lower())),
        "dotted": ".".join(name),
    }[how]
    report = check_leak(f"See the {written} plan.", ["Settlements are approved by legal."],
                        question="Which plan covers settlements?", sources=[source])  # fmt: skip
    assert report.leaked, written


# --- honest summaries -----------------------------------------------------------------------


def _honest_refused() -> dict[str, list[str]]:
    refused: dict[str, list[str]] = {lang: [] for lang in LANGS}
    for case in HONEST:
        fields = {"summary": case.summary, "answer_guidance": case.guidance}
        if check_leak(fields, [case.chunk], question=case.question,
                      public=PUBLIC[case.lang]).leaked:  # fmt: skip
            refused[case.lang].append(case.name)
    return refused


def test_honest_summaries_are_released(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 31's target: at most 5% of at least 150 faithful summaries refused."""
    assert len(HONEST) >= 150 and min(sum(c.lang == lang for c in HONEST) for lang in LANGS) >= 35
    refused = _honest_refused()
    total = sum(map(len, refused.values()))
    with capsys.disabled():
        per = ", ".join(f"{lang} {len(refused[lang])}/40" for lang in LANGS)
        print(f"\nhonest summaries refused: {total}/{len(HONEST)} ({per})")
    assert total / len(HONEST) <= 0.05, refused


# --- every class on every surface and channel ---------------------------------------------

_VALUE, _NAME = 4817, "Kvelimmar"
SURFACE_CASES = [
    ("roman_lower", str(_VALUE), _chunk(_VALUE), "The code is iv viii i vii."),
    ("hex", str(_VALUE), _chunk(_VALUE), f"The code is {_VALUE:#x}."),
    ("digits_danish", str(_VALUE), _chunk(_VALUE), "The code is fire otte en syv."),
    ("spoken_zero", "4807", _chunk(4807), "The code is four eight oh seven."),
    ("clock_faces", str(_VALUE), _chunk(_VALUE), "At " + "".join(CLOCKS[i] for i in (3, 7, 0, 6))),
    ("interleaved", str(_VALUE), _chunk(_VALUE), "Read 42801274 and drop the year's digits."),
    ("letters_fillers", _NAME, _name_chunk(_NAME), "It is k, um, v, um, e, um, l, um, i."),
    ("acrostic_2", _NAME, _name_chunk(_NAME),
     "keep the very the easy the light the idea the money the money the apple the river."),
    ("name_lower", _NAME, _name_chunk(_NAME), f"the buyer is {_NAME.lower()} holdings."),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("surface", ["injector", "graph", "node", "middleware", "tool"])
def test_every_class_is_refused_on_every_surface(surface: str) -> None:
    from tests.unit_tests.restricted_harness import (
        CHANNELS,
        ListKB,
        count_secret,
        hostile_summarizer,
        run_surface,
    )

    reached = []
    for name, secret, chunk, summary in SURFACE_CASES:
        reply = {"decision": "answer", "reason": "answerable", "summary": summary,
                 "answer_guidance": "Answer."}  # fmt: skip
        question = "Was the code changed in 2024?" if name == "interleaved" else QUESTION
        turn = run_surface(surface, kb=ListKB([chunk]), question=question,
                           summarizer=hostile_summarizer(reply), events=False)  # fmt: skip
        leaked = [c for c in CHANNELS if c in turn.channels and count_secret(turn.text(c), secret)]
        if set(turn.reasons) != {"leak_detected"} or leaked or summary in turn.text("main_model"):
            reached.append((name, turn.reasons, leaked))
    assert reached == []
