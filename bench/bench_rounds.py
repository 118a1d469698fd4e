"""The critical path of a training run: requests, dependent rounds and wall time (issue 13).

Runs the loop in the simulator's world with SKILLVC_SIM_LATENCY_MS (default 200) on two
configs, each with and without speculation:

- small: 16/8/8 items, 2 epochs, batch 8, minibatch 2, lr 4 -> 2 cosine, slow + meta update;
- large: 64/32/32 items, the same with batch 32.

Every request the simulator answers is timed (start, end). Dependent rounds are the longest
chain of requests each sent after the one before it was answered; overlapping sets (maximal
sets of overlapping request intervals) are a lower estimate. skillvc's own time between rounds
is the gap from the end of one set to the start of the next (local work: events, blobs, git,
prompts). Next to the rounds the bench prints the bound this run's decisions need (``bound``),
and, when a config runs both with and without speculation, whether the two runs' events are
the same (``differences``).

    python bench/bench_rounds.py [--latency-ms 200] [--configs small,large] [--seed 1]
        [--only on|off|both] [--bundle-gate] [--detail]
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillvc.core.store import open_store
from skillvc.models import simworld
from skillvc.models.backends.sim import SimBackend
from skillvc.models.prompts import prompt_kind
from skillvc.training.demo import create_demo_repo
from skillvc.training.loop import RunSummary, train
from skillvc.workspace.workspace import open_workspace

CONFIGS: dict[str, dict[str, int]] = {
    "small": {"train": 16, "val": 8, "test": 8, "batch": 8},
    "large": {"train": 64, "val": 32, "test": 32, "batch": 32},
}

TOML = """\
[skill]
path = "skills/acme-returns/SKILL.md"

[tasks]
train = "evals/train.jsonl"
val = "evals/val.jsonl"
test = "evals/test.jsonl"
scorer = "exact"

[target]
model = "sim:support"
temperature = 0.0

[optimizer]
model = "sim:support"
temperature = 0.7

[train]
epochs = 2
batch_size = {batch}
minibatch_size = 2
learning_rate = 4
min_learning_rate = 2
lr_schedule = "cosine"
slow_update = true
meta_skill = true
seed = {seed}
"""


class Recorder:
    """Times every simulated request (monkeypatched around ``SimBackend.complete``)."""

    def __init__(self, splits: dict[str, str] | None = None) -> None:
        self.calls: list[tuple[float, float, str]] = []
        self.splits = splits or {}  # an item's input -> its split, to name target calls
        self.lock = threading.Lock()

    @contextmanager
    def installed(self) -> Iterator[None]:
        original = SimBackend.complete
        recorder = self

        def complete(backend: SimBackend, request: Any) -> Any:
            start = time.perf_counter()
            result = original(backend, request)
            kind = request.role
            if kind == "target" and request.user in recorder.splits:
                kind = f"target/{recorder.splits[request.user]}"
            if request.role == "optimizer":
                kind = f"optimizer/{prompt_kind(request.user) or 'other'}"
            with recorder.lock:
                recorder.calls.append((start, time.perf_counter(), kind))
            return result

        SimBackend.complete = complete  # type: ignore[method-assign]
        try:
            yield
        finally:
            SimBackend.complete = original  # type: ignore[method-assign]

    def rounds(self) -> list[tuple[float, float]]:
        """Maximal sets of overlapping intervals, as (start, end) of each set."""
        return [(start, end) for start, end, _ in self.grouped()]

    def depth(self) -> int:
        """The longest chain of requests each sent after the one before it was answered: the
        dependent rounds of the run's critical path (overlapping calls sent ahead no longer
        hide a dependency, as they can in ``rounds``)."""
        calls = sorted(self.calls, key=lambda c: c[1])
        ends = [end for _, end, _ in calls]
        best: list[int] = []
        for start, _, _ in calls:
            before = bisect.bisect_right(ends, start, hi=len(best))
            best.append(1 + max(best[:before], default=0))
        return max(best, default=0)

    def grouped(self) -> list[tuple[float, float, Counter[str]]]:
        """The rounds with the kinds of request each held."""
        out: list[tuple[float, float, Counter[str]]] = []
        for start, end, kind in sorted(self.calls):
            if out and start < out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], end), out[-1][2])
            else:
                out.append((start, end, Counter()))
            out[-1][2][kind] += 1
        return out


def chunks(n: int, workers: int) -> int:
    """Dependent rounds of one early-stopping pass over ``n`` items (chunks of ``workers``)."""
    return max(1, math.ceil(n / workers))


def bound(
    events: list[tuple[str, dict[str, Any]]], workers: int, minibatch: int, early_stop: bool
) -> int:
    """The dependent rounds this run's decisions need, however early calls are sent.

    A round is one model latency, at most ``workers`` calls of one stage wide (twice that
    where the loop's pool and the calls-ahead pool share a stage: the seed's val beside the
    first step's rollouts, rollouts the loop waits for). Free (beside an earlier round): the
    seed's test, the first step's rollouts, the slow-update rollouts of the epoch's start
    skill, rollouts with the current skill while a gate that rejects runs, the meta update
    (beside the slow update, or at an epoch end without one beside the next epoch's first
    rollouts). Needed: a step's reflection (``workers`` minibatches a round), a round for
    rollouts with a skill a gate just accepted, one per slow update for the epoch end's
    optimizer calls, the final test of a best skill the last gate accepted, and a gate's
    passes: one a version of the skill it drew val items for (the candidate, or with
    attribution the bundle, then each version without an edit), one after the other, in
    chunks (early stopping: ``workers`` items at a time, each chunk decides whether the next
    runs). Draws the log held already cost nothing: attribution's pruned candidate (its test
    drew it), a candidate proposed again, a repeated epoch end's. That is exact on a
    deterministic target (one pass a version), as here. Repair calls are not counted.
    """
    rounds = 0  # the baseline wave: added with the first step (its batch goes out beside it)
    accepted_last = False  # the last decision changed the skill
    ended = False  # this epoch end's optimizer round is counted
    skill, batch, baseline_calls = "", [], 0
    hard: dict[tuple[str, str], float | None] = {}
    val_draws: Counter[str] = Counter()  # val rollouts a version of the skill has, so far
    drawn: Counter[str] = Counter()  # those of them before the last gate (or the baseline)
    for kind, payload in events:
        if kind == "rollout":
            skill = skill or payload["skill"]
            if payload["split"] == "train":
                hard[(payload["skill"], payload["item"])] = payload["hard"]
            elif payload["split"] == "val":
                val_draws[payload["skill"]] += 1
        elif kind == "baseline":
            baseline_calls = payload["n"]
            drawn = val_draws.copy()
        elif kind == "step.started":
            if not rounds:  # the seed's val beside the first step's rollouts, on both pools
                rounds = chunks(baseline_calls + len(payload["batch"]), 2 * workers)
            rounds += accepted_last  # the rollouts with the skill just accepted
            accepted_last, ended, batch = False, False, payload["batch"]
        elif kind == "edits.merged":  # the reflection: a call per minibatch
            scores = [hard.get((skill, i)) for i in batch]
            fails = sum(1 for h in scores if h is not None and h < 1)
            oks = sum(1 for h in scores if h is not None and h >= 1)
            rounds += chunks(math.ceil(fails / minibatch) + math.ceil(oks / minibatch), workers)
        elif kind == "gate":
            passes = [n for n in (val_draws - drawn).values() if n > 0]
            rounds += sum(chunks(n, workers) if early_stop else 1 for n in passes)
            drawn = val_draws.copy()
            accepted_last = payload["decision"] != "rejected"
            if accepted_last:
                skill = payload["candidate"]
        elif kind in ("slow_update", "meta_update") and not ended:
            if kind == "slow_update":  # a meta update alone goes beside the next rollouts
                rounds += 1 + accepted_last
                accepted_last = False
            ended = True
    return max(rounds, 1) + accepted_last  # the best skill's test, unless it was speculated


def make_repo(directory: Path, sizes: dict[str, int], seed: int) -> dict[str, str]:
    """The bench repository; returns each item's input -> its split."""
    create_demo_repo(directory)
    n = sizes["train"] + sizes["val"] + sizes["test"]
    items, seen = [], set()
    for item in simworld.generate_items(4 * n, seed=seed):
        if item["input"] not in seen:  # the task set refuses an input in two splits
            seen.add(item["input"])
            items.append(item)
    items = items[:n]
    splits = {
        "train": items[: sizes["train"]],
        "val": items[sizes["train"] : sizes["train"] + sizes["val"]],
        "test": items[sizes["train"] + sizes["val"] :],
    }
    for name, rows in splits.items():
        text = "".join(json.dumps(r) + "\n" for r in rows)
        (directory / "evals" / f"{name}.jsonl").write_text(text, encoding="utf-8")
    (directory / "skillvc.toml").write_text(
        TOML.replace("{batch}", str(sizes["batch"])).replace("{seed}", str(seed)),
        encoding="utf-8",
    )
    from git import Repo

    repo = Repo(directory)
    repo.git.add("--", "evals", "skillvc.toml")
    repo.git.commit("-q", "-m", "bench config")
    return {row["input"]: name for name, rows in splits.items() for row in rows}


def run_once(
    sizes: dict[str, int], speculate: bool, seed: int, bundle_gate: bool = False
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        recorder = Recorder(make_repo(repo, sizes, seed))
        overrides: dict[str, dict[str, Any]] = {"train": {"speculate": speculate}}
        if bundle_gate:  # the paper's gate (SkillOpt's): no attribution, any strict gain
            overrides["train"]["attribution"] = False
        with recorder.installed():
            start = time.perf_counter()
            summary: RunSummary = train(open_workspace(repo), overrides=overrides)
            wall = time.perf_counter() - start
        with open_store(repo / ".skillvc" / "events.db") as store:
            rows = store.query(
                "SELECT type, payload FROM events WHERE run_id = ? AND seq IS NOT NULL "
                "ORDER BY seq",
                [summary.run_id],
            )
        events = [(r["type"], json.loads(r["payload"])) for r in rows]
    rounds = recorder.rounds()
    gaps = [b[0] - a[1] for a, b in zip(rounds, rounds[1:], strict=False)]
    return {
        "summary": summary,
        "latency_ms": float(os.environ.get("SKILLVC_SIM_LATENCY_MS", "200")),
        "requests": len(recorder.calls),
        "by_kind": Counter(kind for _, _, kind in recorder.calls),
        "rounds": len(rounds),
        "depth": recorder.depth(),
        "busy": sum(end - start for start, end in rounds),
        "grouped": recorder.grouped(),
        "wall": wall,
        "gap_mean_ms": 1000 * statistics.mean(gaps) if gaps else 0.0,
        "gap_max_ms": 1000 * max(gaps) if gaps else 0.0,
        "bound": bound(events, workers=16, minibatch=2, early_stop=True),
        "events": events,
    }


def show(
    name: str, sizes: dict[str, int], speculate: bool, r: dict[str, Any], detail: bool = False
) -> None:
    s: RunSummary = r["summary"]
    wasted = getattr(s, "speculation_wasted_calls", 0)
    label = "speculate" if speculate else "no speculation"
    print(
        f"== {name} ({sizes['train']}/{sizes['val']}/{sizes['test']}, batch {sizes['batch']}),"
        f" {label} =="
    )
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["by_kind"].items()))
    print(f"  requests            {r['requests']:>6}   ({kinds})")
    print(
        f"  dependent rounds    {r['depth']:>6}   (bound {r['bound']}, from this run's decisions)"
    )
    print(f"  overlapping sets    {r['rounds']:>6}   (calls sent ahead can merge two rounds)")
    busy = r["busy"] / (r["latency_ms"] / 1000)
    print(f"  latencies waited    {busy:>8.1f}   (time with a request in flight / latency)")
    print(f"  wall time           {r['wall']:>8.1f} s")
    print(
        f"  skillvc time between rounds  mean {r['gap_mean_ms']:.0f} ms, "
        f"max {r['gap_max_ms']:.0f} ms"
    )
    print(f"  calls wasted by speculation  {wasted}")
    print(
        f"  steps {s.steps}: accepted {s.accepted}, rejected {s.rejected}; slow updates "
        f"{s.slow_updates_accepted}/{s.slow_updates_rejected}; val {s.baseline_val} -> "
        f"{s.best_val}, test {s.baseline_test} -> {s.test}"
    )
    if detail:  # what each round held, to see which dependency made it
        t0 = r["grouped"][0][0] if r["grouped"] else 0.0
        for i, (start, end, kinds) in enumerate(r["grouped"], 1):
            held = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
            print(f"    round {i:>2}  {start - t0:6.2f}-{end - t0:6.2f} s  {held}")


# What differs between two runs of the same decisions: identities (the run's id in refs and
# tags, commit shas, event row ids), the config's speculate flag, and tokens (wasted calls').
VOLATILE = {"base_commit", "best_commit", "parent", "sha", "gate_id", "ref", "tag", "config"}
VOLATILE_TOTALS = {"tokens", "cost_usd"}


def differences(a: list[tuple[str, Any]], b: list[tuple[str, Any]]) -> list[str]:
    """Where two runs' sequenced events differ, once identities are set aside: empty when the
    runs logged the same rollouts, edits, decisions and commits, in the same order (calls a
    run sent ahead and never used are logged outside that sequence)."""
    if len(a) != len(b):
        return [f"{len(a)} events against {len(b)}"]
    out = []
    for i, ((ta, pa), (tb, pb)) in enumerate(zip(a, b, strict=True)):
        skip = VOLATILE | (VOLATILE_TOTALS if ta == "run.finished" else set())
        keys = (set(pa) | set(pb)) - skip
        if ta != tb or any(pa.get(k) != pb.get(k) for k in keys):
            out.append(f"event {i + 1}: {ta} / {tb}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--configs", default="small,large")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=["on", "off", "both"], default="both")
    parser.add_argument(
        "--bundle-gate", action="store_true", help="the paper's bundle gate (no attribution)"
    )
    parser.add_argument("--detail", action="store_true", help="print what each round held")
    args = parser.parse_args()
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    os.environ["SKILLVC_SIM_LATENCY_MS"] = str(args.latency_ms)
    modes = {"on": [True], "off": [False], "both": [False, True]}[args.only]
    for name in args.configs.split(","):
        sizes = CONFIGS[name]
        runs = {}
        for speculate in modes:
            runs[speculate] = run_once(sizes, speculate, args.seed, args.bundle_gate)
            show(name, sizes, speculate, runs[speculate], args.detail)
        if len(runs) == 2:
            diff = differences(runs[False]["events"], runs[True]["events"])
            print(
                "  events with and without speculation: "
                + (
                    "identical (identities and wasted calls' tokens aside)"
                    if not diff
                    else f"{len(diff)} differ, first {diff[0]}"
                )
            )


if __name__ == "__main__":
    main()
