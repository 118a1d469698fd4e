"""Harvest speed: redaction and mining over many prompts (issue 15).

    python bench/bench_harvest.py [--prompts N] [--kinds K]

Makes N prompts from K recurring templates (numbers, paths and names varied) plus one-offs,
then times ``Redactor.redact`` over all of them and ``mine`` (greedy grouping, Jaccard/difflib
against each kind's first prompt). Prints prompts per second and the kinds found, so a change
that makes mining quadratic in the prompts, or redaction slow, shows up as a number.

Then the templated corpus (issue 23): recurring instructions around a payload that varies in
length (one sentence to a dozen, or a log) and content ("Summarise this IT ticket in one line:
<ticket>"), the instruction before, after or around the payload, mixed with one-off requests
drawn from the same vocabulary (some with a courtesy line such as "Thanks in advance.").
Prints the recall (items of templated kinds placed in a kind of their template), the share of
one-offs kept in some kind, and the purity of the kinds found. Target: recall >= 90%, one-offs
kept <= 5%.
"""

from __future__ import annotations

import argparse
import random
import time

from skillvc.sleep.mine import mine
from skillvc.sleep.redact import Redactor

TEMPLATES = [
    "Bump the version to {n}.{m}.0 and tag the release",
    "Fix the failing test in tests/test_{w}.py and run pytest",
    "Add a changelog entry for PR #{n} about {w}",
    "Rename `{w}_{m}` to `{w}` everywhere in src/{w}/",
    "Why does the {w} job fail on CI run {n}? Look at the logs",
    "Write a migration that adds column {w}_{n} to the {w} table",
    "Summarise the diff between v{n} and v{m} for the release notes",
    "Update the docs in docs/{w}.md to mention --{w}-{n}",
]
WORDS = ["parser", "cache", "auth", "billing", "export", "search", "upload", "report"]


def prompts(n: int, kinds: int, rng: random.Random) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        if rng.random() < 0.2:
            words = ("".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(8))
            text = "please " + " ".join(words)  # nothing in common with anything else
        else:
            t = TEMPLATES[rng.randrange(kinds)]
            text = t.format(n=rng.randint(1, 999), m=rng.randint(0, 9), w=rng.choice(WORDS))
        out.append({"session": f"s{i % (n // 3 + 1)}", "timestamp": f"{i:08d}", "prompt": text})
    return out


TEMPLATED = [
    "Summarise this IT ticket in one line: {p}",
    "Translate the following customer email into French:\n{p}",
    "{p}\n\nExplain the root cause of the error above in two sentences.",
    "Write a polite reply to this review:\n{p}\nKeep it under 80 words.",
    "Classify the sentiment of this tweet as positive, negative or neutral: {p}",
    "Extract every date mentioned in the text below.\n{p}",
    "Turn these meeting notes into a bulleted list of action items:\n\n{p}",
    "Rewrite this paragraph in plain English for a customer: {p}",
]
FUNCTION = str.split(
    "the a my our this is was not cannot since after before every when again still now "
    "today it they we and or but with for on in at to of from"
)
TOPICS = str.split(
    "printer vpn laptop password email invoice order refund screen login server network "
    "office meeting customer account billing delivery report export dashboard battery "
    "keyboard monitor update backup database error timeout crash license badge calendar"
)


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    """Made-up words, so payloads share words the way real text does (Zipf), not all of them."""
    letters = "abcdefghijklmnoprstuvwy"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)]


VOCAB = vocabulary(random.Random(99))
OPENERS = ["Can you", "Please", "I need you to", "How do I", "Why does", "Help me", "Quick one:"]
COURTESY = ["Thanks in advance.", "Thank you so much!", "Cheers.", "Thanks for your help."]


def word(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.4:
        return rng.choice(FUNCTION)
    if roll < 0.55:
        return rng.choice(TOPICS)
    return VOCAB[min(int(rng.paretovariate(1.0)) - 1, len(VOCAB) - 1)]  # Zipf-like ranks


def sentence(rng: random.Random) -> str:
    words = [word(rng) for _ in range(rng.randint(4, 14))]
    return " ".join(words).capitalize() + rng.choice([".", ".", "?", "!"])


def payload(rng: random.Random) -> str:
    if rng.random() < 0.15:  # a log: many short lines with numbers and paths
        lines = [
            f"2026-11-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} "
            f"ERROR /srv/{word(rng)}/{word(rng)}.py: {sentence(rng)}"
            for _ in range(rng.randint(3, 30))
        ]
        return "\n".join(lines)
    return " ".join(sentence(rng) for _ in range(rng.randint(1, 12)))


def templated_corpus(
    n: int, rng: random.Random, one_off_share: float = 0.4
) -> list[tuple[dict[str, str], int]]:
    """(exchange, label): label is the template's index, -1 for a one-off request."""
    out = []
    for i in range(n):
        if rng.random() < one_off_share:
            text = f"{rng.choice(OPENERS)} {sentence(rng).lower()}"
            text += " " + " ".join(sentence(rng) for _ in range(rng.randint(0, 4)))
            if rng.random() < 0.3:
                text += "\n" + rng.choice(COURTESY)
            label = -1
        else:
            label = rng.randrange(len(TEMPLATED))
            text = TEMPLATED[label].format(p=payload(rng))
        session = f"t{i % (n // 2 + 1)}"  # about two prompts a session
        out.append(({"session": session, "timestamp": f"{i:08d}", "prompt": text}, label))
    return out


def templated_figures(n: int, seed: int) -> dict[str, float]:
    rows = templated_corpus(n, random.Random(seed))
    start = time.perf_counter()
    mined = mine([r for r, _ in rows])
    seconds = time.perf_counter() - start
    label_of = {id(r): label for r, label in rows}
    found = kept = pure = members = 0
    for kind in mined.kinds:
        labels = [label_of[id(m)] for m in kind.members]
        top = max(set(labels), key=labels.count)
        members += len(labels)
        pure += labels.count(top)
        found += labels.count(top) if top >= 0 else 0
        kept += labels.count(-1)
    templated = sum(1 for _, label in rows if label >= 0)
    one_offs = len(rows) - templated
    return {
        "prompts": len(rows),
        "seconds": seconds,
        "kinds": len(mined.kinds),
        "recall": found / templated,
        "one_offs_kept": kept / one_offs,
        "purity": pure / members if members else 1.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--kinds", type=int, default=len(TEMPLATES))
    parser.add_argument("--templated", type=int, default=600, help="largest templated corpus")
    args = parser.parse_args()
    rows = prompts(args.prompts, min(args.kinds, len(TEMPLATES)), random.Random(0))
    redactor = Redactor(env_values=["a-secret-value-123"], home="/home/bench")
    start = time.perf_counter()
    for row in rows:
        redactor.redact(row["prompt"])
    redact_s = time.perf_counter() - start
    start = time.perf_counter()
    mined = mine(rows)
    mine_s = time.perf_counter() - start
    print(f"prompts            {len(rows)}")
    print(f"redact             {redact_s:.3f} s ({len(rows) / redact_s:,.0f} prompts/s)")
    print(f"mine               {mine_s:.3f} s ({len(rows) / mine_s:,.0f} prompts/s)")
    print(f"recurring kinds    {len(mined.kinds)} (templates used: {args.kinds})")
    print(f"one-offs left out  {mined.one_offs} prompts in {mined.one_off_kinds} kinds")
    print(f"\ntemplated kinds ({len(TEMPLATED)} instructions, varying payloads, 40% one-offs)")
    worst_recall, worst_kept = 1.0, 0.0
    sizes = [(60, 1), (200, 2), (600, 3)] + ([(args.templated, 4)] if args.templated > 600 else [])
    for size, seed in sizes:
        f = templated_figures(size, seed)
        worst_recall = min(worst_recall, f["recall"])
        worst_kept = max(worst_kept, f["one_offs_kept"])
        print(
            f"  {f['prompts']:5d} prompts: {f['kinds']:3.0f} kinds, recall {f['recall']:.1%}, "
            f"one-offs kept {f['one_offs_kept']:.1%}, purity {f['purity']:.1%} "
            f"({f['seconds']:.2f} s)"
        )
    ok = worst_recall >= 0.9 and worst_kept <= 0.05
    print(
        f"templated recall   {worst_recall:.1%} (target >= 90%), one-offs kept {worst_kept:.1%} "
        f"(target <= 5%): {'met' if ok else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
