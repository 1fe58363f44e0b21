"""Answer parsing speed: 1 MB pathological replies (version 3 adds six shapes its new rules scan), linear growth,
and a table of realistic replies.

Each 1 MB figure is the median CPU time of several calls of ``cfkit.parse.parse_answer``
on replies built here (the parser is single-threaded Python, so on an idle core its wall time is the same;
the wall time on the shared machine, which also counts waits for a core, is in the note). A 1 MB reply is graded on a window of ``GRADED_CAP``
characters (docs/parsing.md), but the reasoning split and the strict-JSON
attempt see all of it. Growth is measured below the cap, as the time for one
64,000-character reply over the time for four 16,000-character ones of the same
kind: 1.0 is linear (the parser of version 1, quadratic on braces, gave about 4).
"""

from __future__ import annotations

import json
import os
import random
import statistics

from timing import median_seconds, median_wall_and_cpu

from cfkit.cases import Option
from cfkit.parse import GRADED_CAP, parse_answer

RUNS = 5
GROWTH_RUNS = 15  # pairs timed for a growth ratio
MB = 1_000_000
TARGET_MB_S = 0.5  # "well under a second" for a 1 MB reply (issue 20)
TARGET_GROWTH = 1.3  # one reply 4x as long may cost at most 1.3x four short ones (1.0 is linear, plus noise)
YES_NO = [Option(id="A", text="Yes"), Option(id="B", text="No")]
THREE = [Option(id="A", text="A wedding"), Option(id="B", text="A funeral"), Option(id="C", text="A race")]


def _repeat(unit: str, length: int) -> str:
    return (unit * (length // len(unit) + 1))[:length]


# name -> how to build a reply of a given length
PATHOLOGICAL = {
    "opening braces": lambda n: "{" * n,
    "brace pairs": lambda n: _repeat("{}", n),
    "nested JSON objects": lambda n: _repeat('{"answer": ', n),
    "nested brackets": lambda n: "[" * (n // 2) + "]" * (n // 2),
    "quotes inside braces": lambda n: _repeat('{"', n),
    "option letters": lambda n: _repeat("A B ", n),
    "option labels": lambda n: _repeat("A. B. ", n),
    "echoed option lists": lambda n: _repeat("A) Yes B) No ", n),
    "answer lines": lambda n: _repeat("Answer: A\nanswer: B\n", n),
    "answer: then spaces": lambda n: _repeat("answer:" + " " * 1000, n),
    "unclosed \\boxed{": lambda n: _repeat("\\boxed{", n),
    "think tags": lambda n: _repeat("<think>", n),
    "Yes, No.": lambda n: _repeat("Yes, No. ", n),
    # Shapes the rules of version 3 (issue 26) look at: a label with another option beside it, self-corrections,
    # rejections, polarity words, a contradiction scan over one endless sentence, declarations each followed
    # by a turn.
    "label beside another (A \"B\")": lambda n: _repeat('A "B", ', n),
    "self-corrections": lambda n: _repeat("Yes, but actually No. ", n),
    "rejections (Not A.)": lambda n: _repeat("Not A. ", n),
    "polarity words": lambda n: _repeat("Not suitable, definitely not, nein ", n),
    "one long contradiction": lambda n: "Yes, " + _repeat("it is not suitable and ", n - 5),
    "one long consistent sentence": lambda n: "No, " + _repeat("it is not suitable and ", n - 4),
    "declarations with turns": lambda n: _repeat("The answer is A, but actually A. ", n),
}


def _realistic(rng: random.Random, count: int) -> list[tuple[str, list[Option]]]:
    """Replies in the forms models give: JSON, fenced JSON, labels, declarations, Yes/No with a reason,
    reasoning blocks, echoes and long explanations."""
    reason = ("The mourners in dark clothing and the condolence letter make the mood funereal, which does not "
              "fit a festive poster. ")
    forms = [
        lambda a, t: json.dumps({"answer": a, "reason": reason.strip(), "confidence": "high"}),
        lambda a, t: f"```json\n{json.dumps({'answer': a})}\n```",
        lambda a, t: a,
        lambda a, t: f"{a}. {t}, because {reason}",
        lambda a, t: f"{reason * 3}\n\nAnswer: {a}",
        lambda a, t: f"{t}, {reason}",
        lambda a, t: f"<think>{reason * 8}</think>\n\n{a}",
        lambda a, t: f"The answer is **{a}**.",
        lambda a, t: "A. Yes\nB. No\n\n" + a,
        lambda a, t: f"{reason * 20}Therefore, the final answer is $\\boxed{{{a}}}$.",
        lambda a, t: f'{a} "{t}"',  # forms version 3 reads (issue 26)
        lambda a, t: f"{t}, but actually {t}.",
        lambda a, t: f"- **Scene:** {reason}\n- **Decision: {a}**",
        lambda a, t: f"Not {a}. {reason}",
        lambda a, t: "Definitely not. " + reason,
    ]
    replies = []
    for _ in range(count):
        options = rng.choice([YES_NO, THREE])
        option = rng.choice(options)
        replies.append((rng.choice(forms)(option.id, option.text), options))
    return replies


def _growth(small: str, large: str) -> float:
    """Median over alternating pairs of (one parse of ``large``) / (four parses of ``small``).

    Timing the two side by side, pair after pair, lets a busy machine slow both
    alike; a ratio of separate medians swings with the load between them.
    """
    ratios = [median_seconds(lambda: parse_answer(large, YES_NO), 1)
              / median_seconds(lambda: [parse_answer(small, YES_NO) for _ in range(4)], 1)
              for _ in range(GROWTH_RUNS)]
    return statistics.median(ratios)


def _load() -> str:
    """The machine's load while a row was measured: absolute times on a shared machine scale with it; the
    growth ratios, timed pair by pair, do not."""
    return f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


def run() -> list[dict]:
    rows = []
    for name, build in PATHOLOGICAL.items():
        reply = build(MB)
        wall, seconds = median_wall_and_cpu(lambda reply=reply: parse_answer(reply, YES_NO), RUNS)
        small, large = build(16_000), build(64_000)
        growth = _growth(small, large)
        met = seconds < TARGET_MB_S and growth <= TARGET_GROWTH
        rows.append({"name": f"1 MB reply: {name}", "value": seconds, "unit": "s",
                     "target": f"< {TARGET_MB_S:g} s; growth ≤ {TARGET_GROWTH:g}", "met": met,
                     "note": f"CPU time, median of {RUNS} (wall {wall:.2f} s); growth {growth:.2f} (one 64k reply / four 16k replies, median of "
                             f"{GROWTH_RUNS} pairs; "
                             f"1.0 is linear){_load()}"})
    issue_reply = "{" * 20_000  # issue 20's measurement: about 9 s with parser version 1
    rows.append({"name": "20,000 '{' (issue 20's case)", "value": median_seconds(
        lambda: parse_answer(issue_reply, YES_NO), RUNS), "unit": "s", "target": None, "met": None,
        "note": f"median of {RUNS}; under the {GRADED_CAP:,}-character cap, so all of it is read"})
    table = _realistic(random.Random(0), 2_000)
    per_reply = median_seconds(lambda: [parse_answer(r, o) for r, o in table], RUNS) / len(table)
    mean_length = sum(len(r) for r, _ in table) / len(table)
    rows.append({"name": f"realistic replies ({len(table):,}, mean {mean_length:,.0f} characters)",
                 "value": per_reply, "unit": "s", "target": None, "met": None,
                 "note": f"per reply, median of {RUNS} passes over the table "
                         f"(two option sets, their patterns compiled once){_load()}"})
    return rows


if __name__ == "__main__":
    for row in run():
        value = f"{row['value'] * 1000:.2f} ms" if row["unit"] == "s" else f"{row['value']:.3g} {row['unit']}"
        print(f"{row['name']:60s} {value:>11}  target {row['target']}  met={row['met']}  {row['note']}")
