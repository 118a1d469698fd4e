"""Tokens of a training run and the cacheable share of its reflection prompts (issue 27).

Runs the loop in the simulator's world (bench_rounds.py's configs, no latency) and reads the
run's ``model.call`` events back. For each reflection prompt (system + user message, as sent):
the longest prefix it shares with an earlier reflection prompt of the same step, as a share of
its length. That prefix is what provider prompt caching serves at a tenth of the price (the
first prompt of a step writes the cache; the step's other minibatches read it). The simulator
counts a token as 4 characters, so shares of characters are shares of tokens.

Printed per config: the share (mean and minimum over the prompts that have an earlier prompt
in their step; target >= 60%), the share over all reflection prompts' tokens (a step's first
prompt counted with the prefix it shares with any earlier reflection prompt of the run), the
rejected-edit buffer's part of the reflection prompts, and the run's tokens by kind of call.

    python bench/bench_tokens.py [--configs small,large] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_rounds import CONFIGS, make_repo  # noqa: E402

from skillvc.models.prompts import prompt_kind, section  # noqa: E402
from skillvc.training.loop import train  # noqa: E402
from skillvc.workspace.workspace import open_workspace  # noqa: E402


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def calls(repo: Path) -> list[dict[str, Any]]:
    """Every model call of the run, in log order: role, kind, step, prompt text, tokens."""
    store = open_workspace(repo).store()
    try:
        out = []
        for event in store.events(types=["model.call"]):
            p = event.payload
            messages = json.loads(store.get_blob(p["prompt"]))
            user = next((m["content"] for m in messages if m["role"] == "user"), "")
            out.append(
                {
                    "role": p["role"],
                    "kind": prompt_kind(user) if p["role"] == "optimizer" else p["role"],
                    "step": event.step,
                    "text": "\n".join(m["content"] for m in messages),
                    "rejected": len(section(user, "rejected_edits")),
                    "prompt_tokens": p["prompt_tokens"],
                    "completion_tokens": p["completion_tokens"],
                }
            )
        return out
    finally:
        store.close()


def measure(sizes: dict[str, int], seed: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        make_repo(repo, sizes, seed)
        train(open_workspace(repo))
        log = calls(repo)
    reflect = [c for c in log if c["kind"] == "reflect"]
    by_step: dict[Any, list[str]] = defaultdict(list)
    seen: list[str] = []
    in_step: list[float] = []
    shared_tokens = 0
    for c in reflect:
        earlier = by_step[c["step"]]
        share = max((common_prefix(c["text"], e) for e in earlier), default=0)
        if earlier:
            in_step.append(share / len(c["text"]))
        else:  # a step's first prompt: what it shares with the run's earlier ones
            share = max((common_prefix(c["text"], e) for e in seen), default=0)
        shared_tokens += share
        earlier.append(c["text"])
        seen.append(c["text"])
    tokens: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for c in log:
        t = tokens[c["kind"] or "other"]
        t[0] += 1
        t[1] += c["prompt_tokens"]
        t[2] += c["completion_tokens"]
    total_chars = sum(len(c["text"]) for c in reflect)
    return {
        "reflect": len(reflect),
        "steps": len(by_step),
        "in_step_mean": sum(in_step) / len(in_step) if in_step else 0.0,
        "in_step_min": min(in_step) if in_step else 0.0,
        "overall": shared_tokens / total_chars if total_chars else 0.0,
        "buffer": sum(c["rejected"] for c in reflect) / total_chars if total_chars else 0.0,
        "buffer_last": max(
            (c["rejected"] / len(c["text"]) for c in reflect if c["step"] == reflect[-1]["step"]),
            default=0.0,
        )
        if reflect
        else 0.0,
        "tokens": dict(tokens),
    }


def show(name: str, sizes: dict[str, int], r: dict[str, Any]) -> None:
    print(f"== {name} ({sizes['train']}/{sizes['val']}/{sizes['test']}, batch {sizes['batch']}) ==")
    print(
        f"  reflection prompts {r['reflect']} in {r['steps']} steps; shared prefix with an "
        f"earlier prompt of the step: mean {r['in_step_mean']:.1%}, min {r['in_step_min']:.1%} "
        "(target >= 60%)"
    )
    print(f"  cacheable share of all reflection prompt tokens {r['overall']:.1%}")
    print(
        f"  rejected-edit buffer: {r['buffer']:.1%} of reflection prompt tokens "
        f"({r['buffer_last']:.1%} at the last step)"
    )
    total = [0, 0, 0]
    for kind, (n, prompt, completion) in sorted(r["tokens"].items()):
        total = [total[0] + n, total[1] + prompt, total[2] + completion]
        print(f"  {kind:<12} {n:>5} calls {prompt:>9,} prompt {completion:>8,} completion tokens")
    print(
        f"  {'total':<12} {total[0]:>5} calls {total[1]:>9,} prompt {total[2]:>8,} completion "
        f"= {total[1] + total[2]:,} tokens"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configs", default="small,large")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    os.environ["SKILLVC_SIM_LATENCY_MS"] = "0"
    for name in args.configs.split(","):
        show(name, CONFIGS[name], measure(CONFIGS[name], args.seed))


if __name__ == "__main__":
    main()
