"""Honest gains on the noisy simulator: the paper's bundle gate against attribution (default).

The target is ``sim:support`` at a temperature > 0 (the stochastic mode of
``skillvc.models.simworld``:
each call departs from the skill's rules with probability 0.25 x temperature), so a gate sees
noise as it would with a real model, and the true accuracy of any skill is exact. For each seed
a fresh world sample (train/val/test tickets) is trained twice with the README's [train]
defaults, once with ``attribution = false`` (the paper's gate: any strict gain of the bundle)
and once with the defaults (attribution on, gate confidence 0.8). Per arm:

- true accuracy of the final skill (mean, worst) and the best reachable (every good rule);
- harmful and neutral (redundant) rule lines in the final skills;
- requests (model calls sent, speculation a gate made useless included) and tokens, and their
  ratio to the bundle gate's.

    python bench/bench_gains.py [--seeds 40] [--temperature 0.8] [--train 120 --val 60 --test 60]
        [--jobs 2] [--first-seed 0] [--breakdown] [--json FILE]

With both arms it also prints issue 44's goals for the default arm (no harmful rule, at most one
neutral line per five final skills, the gap to the best at most 0.03 below temperature 1.0, at
1.0 a mean not below the bundle gate's) and its requests' ratio to the bundle gate's with the
paired standard error; ``--breakdown`` each arm's requests by stage, read from the runs' event
logs (``breakdown.py``).

40 seeds by default: a run's requests vary by about 340 from seed to seed (paired with the
bundle gate's), so over 10 seeds the ratio's standard error is about 0.09 and 10-seed blocks
of the same code range from 1.74x to 2.09x; over 40 it is about 0.05.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from breakdown import add, breakdown, show

from skillvc.core.resources import read_bytes
from skillvc.models import simworld
from skillvc.training.demo import create_demo_repo
from skillvc.training.loop import train
from skillvc.workspace.workspace import open_workspace

SKILL = "skills/acme-returns/SKILL.md"
SEED_SKILL = read_bytes("templates", "demo/SKILL.md").decode("utf-8")
ARMS: dict[str, dict[str, Any]] = {
    "bundle gate (attribution = false)": {"attribution": False},
    "default (attribution)": {},
}


def world(directory: Path, seed: int, temperature: float, sizes: tuple[int, int, int]) -> None:
    """The demo repository with a noisy target, the README's [train] defaults and a fresh
    sample of tickets for ``seed``."""
    create_demo_repo(directory)
    items, seen = [], set()  # distinct inputs: the task set refuses overlapping splits
    for item in simworld.generate_items(2 * sum(sizes), 1000 + seed):
        if item["input"] not in seen:
            seen.add(item["input"])
            items.append(item)
    n_train, n_val, n_test = sizes
    splits = {
        "train": items[:n_train],
        "val": items[n_train : n_train + n_val],
        "test": items[n_train + n_val : n_train + n_val + n_test],
    }
    for name, rows in splits.items():
        text = "".join(json.dumps(r) + "\n" for r in rows)
        (directory / "evals" / f"{name}.jsonl").write_text(text)
    config = (directory / "skillvc.toml").read_text()
    head, _, _ = config.partition("[train]")
    head = head.replace(
        'model = "sim:support"\ntemperature = 0.0',
        f'model = "sim:support"\ntemperature = {temperature}',
        1,
    )
    # The README's [train] defaults, but for the seed (a different run per world sample).
    (directory / "skillvc.toml").write_text(head + f"[train]\nseed = {seed}\n")
    subprocess.run(["git", "-C", str(directory), "commit", "-qam", "noisy world"], check=True)


def one(seed: int, temperature: float, sizes: tuple[int, int, int], arm: dict[str, Any]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "w"
        world(directory, seed, temperature, sizes)
        summary = train(open_workspace(directory), overrides={"train": arm})
        skill = (directory / SKILL).read_text()
        split = breakdown(directory / ".skillvc" / "events.db")
    kinds = simworld.line_kinds(skill)
    seed_kinds = simworld.line_kinds(SEED_SKILL)
    return {
        "true": simworld.true_accuracy(skill, temperature),
        # The good rules the final skill lacks (what the gap is made of).
        "missing": [r.key for r in simworld.GOOD if r not in simworld.known_rules(skill)],
        "harmful": kinds["harmful"],
        # The seed skill's own neutral line is the user's: count the ones training added.
        "neutral": max(0, kinds["redundant"] - seed_kinds["redundant"]),
        # Requests as sent and billed (like "tokens"): speculation the gate made useless included.
        "calls": summary.fresh_calls,
        "tokens": summary.tokens,
        "accepted": summary.accepted,
        "val": summary.best_val,
        "test": summary.test,
        "breakdown": split,
    }


def goals(results: dict[str, list[dict]], best: float, temperature: float) -> None:
    """Issue 44's quality goals for the default arm, and its cost against the bundle gate's
    (paired: the same seeds)."""
    bundle, default = (results[name] for name in ARMS)
    mean = statistics.mean(r["true"] for r in default)
    base = statistics.mean(r["true"] for r in bundle)
    neutral = sum(r["neutral"] for r in default)
    harmful = sum(r["harmful"] for r in default)
    diffs = [d["calls"] - b["calls"] for d, b in zip(default, bundle, strict=True)]
    se = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else float("nan")
    ratio = statistics.mean(r["calls"] for r in default) / statistics.mean(
        r["calls"] for r in bundle
    )
    print(f"== issue 44's goals, the default arm ({len(default)} seeds) ==")
    met = {True: "met", False: "NOT met"}
    print(f"  harmful rules kept         {harmful:>6}   (goal 0: {met[not harmful]})")
    limit = len(default) / 5
    print(
        f"  neutral lines              {neutral:>6}   (goal <= one per five final skills, "
        f"{limit:g}: {met[neutral <= limit]})"
    )
    if temperature < 1.0:
        ok = best - mean <= 0.03
        print(f"  gap to the best            {best - mean:>6.3f}   (goal <= 0.03: {met[ok]})")
    else:
        ok = mean >= base
        print(f"  mean - bundle gate's mean  {mean - base:>+6.3f}   (goal >= 0: {met[ok]})")
    gap = statistics.mean(diffs)
    print(
        f"  requests / bundle gate's   {ratio:>6.2f}x  (paired difference {gap:+.0f} a run, "
        f"standard error {se:.0f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--train", type=int, default=120)
    parser.add_argument("--val", type=int, default=60)
    parser.add_argument("--test", type=int, default=60)
    parser.add_argument("--verbose", action="store_true", help="one line per run")
    parser.add_argument("--only", choices=["bundle", "default"], help="run one arm")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (processes)")
    parser.add_argument(
        "--breakdown", action="store_true", help="each arm's requests by stage (event logs)"
    )
    parser.add_argument("--first-seed", type=int, default=0, help="seeds from this one on")
    parser.add_argument("--json", help="write each run's figures (no breakdown) to this file")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [train] setting for the default arm (e.g. gate_rounds=8)",
    )
    args = parser.parse_args()
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    sizes = (args.train, args.val, args.test)
    best = simworld.best_reachable(args.temperature)
    print(
        f"== noisy simulator: sim:support at temperature {args.temperature} "
        f"(error rate {simworld.error_rate(args.temperature):.2f}), {args.seeds} seeds, "
        f"train/val/test {args.train}/{args.val}/{args.test}; best reachable true accuracy "
        f"{best:.3f} =="
    )
    results: dict[str, list[dict]] = {}
    extra = {k: json.loads(v) for k, _, v in (a.partition("=") for a in args.set)}
    arms = {
        name: arm | (extra if name.startswith("default") else {})
        for name, arm in ARMS.items()
        if args.only is None or name.startswith(args.only)
    }
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    runs = [(name, seed) for name in arms for seed in seeds]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [
            pool.submit(one, seed, args.temperature, sizes, arms[name]) for name, seed in runs
        ]
        for (name, seed), future in zip(runs, futures, strict=True):
            r = future.result()
            results.setdefault(name, []).append(r)
            if args.verbose:
                brief = {k: v for k, v in r.items() if k != "breakdown"}
                print(f"  {name} seed {seed}: {brief}", flush=True)
    base = results[next(iter(results))]
    base_calls = statistics.mean(r["calls"] for r in base)
    base_tokens = statistics.mean(r["tokens"] for r in base)
    header = (
        f"{'arm':<36} {'true mean':>9} {'worst':>6} {'gap':>6} {'harmful':>8} {'neutral':>8} "
        f"{'requests':>9} {'ratio':>6} {'tokens':>10} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    for name, rows in results.items():
        true = [r["true"] for r in rows]
        calls = statistics.mean(r["calls"] for r in rows)
        tokens = statistics.mean(r["tokens"] for r in rows)
        print(
            f"{name:<36} {statistics.mean(true):>9.3f} {min(true):>6.3f} "
            f"{best - statistics.mean(true):>6.3f} "
            f"{sum(r['harmful'] for r in rows):>8} {sum(r['neutral'] for r in rows):>8} "
            f"{calls:>9.0f} {calls / base_calls:>6.2f} {tokens:>10.0f} {tokens / base_tokens:>6.2f}"
        )
    if len(results) == 2:
        goals(results, best, args.temperature)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    name: [
                        {"seed": seed, **{k: v for k, v in r.items() if k != "breakdown"}}
                        for seed, r in zip(seeds, rows, strict=True)
                    ]
                    for name, rows in results.items()
                },
                indent=1,
            )
        )
    if args.breakdown:
        for name, rows in results.items():
            print(f"== {name}: requests by stage, {len(rows)} runs together ==")
            show(add([r["breakdown"] for r in rows]))
    print(
        "harmful / neutral: rule lines in all final skills together (neutral: those training "
        "added; the seed skill has one of its own); gap: best reachable minus "
        "the mean; requests (calls sent, speculation a gate made useless included) and tokens: "
        "mean per run, ratio to the bundle gate."
    )


if __name__ == "__main__":
    main()
