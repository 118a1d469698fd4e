"""Harvest speed: redaction and mining over many prompts (issue 15).

    python bench/bench_harvest.py [--prompts N] [--kinds K]

Makes N prompts from K recurring templates (numbers, paths and names varied) plus one-offs,
then times ``Redactor.redact`` over all of them and ``mine`` (greedy grouping, Jaccard/difflib
against each kind's first prompt). Prints prompts per second and the kinds found, so a change
that makes mining quadratic in the prompts, or redaction slow, shows up as a number.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--kinds", type=int, default=len(TEMPLATES))
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


if __name__ == "__main__":
    main()
