"""Training-loop figures on the demo world (the offline simulator).

1. One demo run with SKILLVC_SIM_LATENCY_MS=200 (every simulated call waits 200 ms, like a
   real model): model calls by role, wall time, sequential rounds (wall time / latency: how many
   waits were not hidden by running calls in parallel), and calls saved by early stopping.
2. The demo itself without latency: median wall time of 5 runs (target < 20 s).
3. An ablation table over 5 seeds: full / --no-buffer / --no-slow-update --no-meta-skill /
   constant lr, with final val and test scores (mean and range).

    python bench/bench_train.py [--seeds 5] [--latency-ms 200] [--skip-latency]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from skillvc.training.demo import create_demo_repo, run_demo
from skillvc.training.loop import train
from skillvc.workspace.workspace import open_workspace

ABLATIONS: dict[str, dict[str, Any]] = {
    "full": {},
    "--no-buffer": {"buffer": False},
    "--no-slow-update --no-meta-skill": {"slow_update": False, "meta_skill": False},
    "--lr-schedule constant": {"lr_schedule": "constant"},
}


def _isolate_git() -> None:
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")


def latency_run(latency_ms: int) -> None:
    os.environ["SKILLVC_SIM_LATENCY_MS"] = str(latency_ms)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            summary = run_demo(Path(tmp) / "demo")
            wall = time.perf_counter() - start
    finally:
        del os.environ["SKILLVC_SIM_LATENCY_MS"]
    rounds = wall / (latency_ms / 1000)
    print(f"== demo world, SKILLVC_SIM_LATENCY_MS={latency_ms}, workers 8 ==")
    for role, n in sorted(summary.calls_by_role.items()):
        print(f"  model calls, {role:<10} {n:>6}")
    print(f"  model calls, total      {summary.calls:>6}")
    print(f"  wall time               {wall:>8.1f} s")
    print(
        f"  sequential rounds       {rounds:>8.0f}   (wall / latency; "
        f"{summary.calls / rounds:.1f} calls per round on average)"
    )
    saved = summary.calls_saved_by_early_stop
    share = saved / (summary.calls + saved)
    print(
        f"  calls saved by early stopping in the gate  {saved}   ({share:.0%} of the calls "
        "the run would have made without it)"
    )
    print(
        f"  accepted {summary.accepted}, rejected {summary.rejected}; "
        f"val {summary.baseline_val:.3f} -> {summary.best_val:.3f}, "
        f"test {summary.baseline_test:.3f} -> {summary.test:.3f}"
    )


def demo_timing(runs: int = 5) -> None:
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            summary = run_demo(Path(tmp) / "demo")
            times.append(time.perf_counter() - start)
    print(f"\n== skillvc demo (no latency), {runs} runs ==")
    print(
        f"  median {statistics.median(times):.2f} s  (min {min(times):.2f}, max {max(times):.2f};"
        f" target < 20 s)  accepted {summary.accepted}, rejected {summary.rejected}, "
        f"test {summary.baseline_test:.3f} -> {summary.test:.3f}"
    )


def ablations(seeds: int) -> None:
    print(f"\n== ablations on the demo world, seeds 1..{seeds} (val/test: mean [min, max]) ==")
    with tempfile.TemporaryDirectory() as tmp:
        seed_repo = Path(tmp) / "seed"
        create_demo_repo(seed_repo)
        import shutil

        rows = []
        for name, overrides in ABLATIONS.items():
            vals, tests, accepted, repeats = [], [], [], []
            for seed in range(1, seeds + 1):
                repo = Path(tmp) / f"{len(rows)}-{seed}"
                shutil.copytree(seed_repo, repo)
                s = train(open_workspace(repo), overrides={"train": {**overrides, "seed": seed}})
                vals.append(s.best_val)
                tests.append(s.test)
                accepted.append(s.accepted)
                repeats.append(repeated_rejections(repo))
            rows.append((name, vals, tests, accepted, repeats, s.baseline_val, s.baseline_test))

    def cell(xs: list[float]) -> str:
        return f"{statistics.mean(xs):.3f} [{min(xs):.3f}, {max(xs):.3f}]"

    print(
        f"  {'setting':<34} {'final val':<24} {'final test':<24} accepted  "
        "re-proposed rejected edits"
    )
    for name, vals, tests, accepted, repeats, _, _ in rows:
        print(
            f"  {name:<34} {cell(vals):<24} {cell(tests):<24} {statistics.mean(accepted):>8.1f}"
            f"  {statistics.mean(repeats):>6.1f}"
        )
    base = rows[0]
    print(f"  {'(seed skill)':<34} {base[5]:<24.3f} {base[6]:<24.3f}")


def repeated_rejections(repo: Path) -> int:
    """Proposals of an edit made after a candidate holding that edit had been rejected."""
    from skillvc.core.store import open_store

    with open_store(repo / ".skillvc" / "events.db") as store:
        first = {
            r["edit_id"]: r["gate"]
            for r in store.query(
                "SELECT edit_id, MIN(gate_event_id) AS gate FROM rejected_edits GROUP BY edit_id"
            )
        }
        proposed = store.query("SELECT edit_id, event_id FROM proposed_edits")
    return sum(1 for p in proposed if p["edit_id"] in first and p["event_id"] > first[p["edit_id"]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    _isolate_git()
    if not args.skip_latency:
        latency_run(args.latency_ms)
    demo_timing()
    ablations(args.seeds)


if __name__ == "__main__":
    main()
