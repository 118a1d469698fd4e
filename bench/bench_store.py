"""Event-log throughput: append 100,000 events, then query the rejected log.

Targets (issue 2): append >= 5,000 events/s (each append its own transaction, as the training
loop does), and `skillvc log --rejected -n 20 --json` over them in < 0.3 s.

    python bench/bench_store.py [--events 100000]

Prints the figures and their ratio to the targets. The event mix imitates a training run:
per step, 40 rollouts, 45 model calls, ~8 proposed edits and one gate (1 in 4 accepted).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from skillvc.core.store import open_store
from skillvc.workspace.workspace import init_workspace

APPEND_TARGET = 5_000.0
QUERY_TARGET = 0.3


def event_stream(n: int):
    step = 0
    i = 0
    while i < n:
        step += 1
        run = f"run-{step // 500:04d}"
        for k in range(40):
            yield ("rollout", {"item": f"t{k}", "hard": k % 2, "soft": 0.5}, run, None)
        for k in range(45):
            yield (
                "model.call",
                {
                    "role": "target",
                    "model": "sim:x",
                    "prompt_tokens": 900,
                    "completion_tokens": 120,
                },
                None,
                f"{step}-{k}",
            )
        edits = [
            {
                "id": f"{step:06d}{k:02d}",
                "op": "add",
                "content": f"rule {k}",
                "target": "",
                "anchor": None,
                "rationale": "because",
            }
            for k in range(8)
        ]
        for e in edits:
            yield ("edit.proposed", {"edit": e, "source": "optimizer"}, run, None)
        decision = "accepted" if step % 4 == 0 else "rejected"
        yield (
            "gate",
            {
                "kind": "step",
                "decision": decision,
                "metric": "hard",
                "before": {"mean": 0.5, "n": 40},
                "after": {"mean": 0.52, "n": 40},
                "edits": edits[:3],
                "lr": 4,
                "early_stopped": False,
            },
            run,
            None,
        )
        i += 94


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "SKILL.md").write_text("# Skill\n")
        env = dict(
            os.environ,
            GIT_AUTHOR_NAME="bench",
            GIT_AUTHOR_EMAIL="b@example.invalid",
            GIT_COMMITTER_NAME="bench",
            GIT_COMMITTER_EMAIL="b@example.invalid",
        )
        os.environ.update(env)
        init_workspace(root)
        store = open_store(root / ".skillvc" / "events.db")
        seqs: dict[str, int] = {}
        events = list(event_stream(args.events))[: args.events]
        start = time.perf_counter()
        for type_, payload, run, key in events:
            seq = None
            if run is not None:
                seq = seqs[run] = seqs.get(run, 0) + 1
            store.append(type_, payload, run_id=run, seq=seq, key=key)
        elapsed = time.perf_counter() - start
        rate = len(events) / elapsed
        store.close()

        cmd = [sys.executable, "-m", "skillvc", "log", "--rejected", "-n", "20", "--json"]
        timings = []
        for _ in range(5):
            t0 = time.perf_counter()
            out = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env)
            timings.append(time.perf_counter() - t0)
            if out.returncode != 0:
                sys.exit(f"log failed: {out.stderr}")
        timings.sort()
        median = timings[len(timings) // 2]

        from skillvc.review.history import log_entries

        with open_store(root / ".skillvc" / "events.db") as s:
            t0 = time.perf_counter()
            entries = log_entries(s, decision="rejected", limit=20)
            query_only = time.perf_counter() - t0
        assert len(entries) == 20

    print(f"events appended           {len(events):>10,}")
    print(
        f"append rate               {rate:>10,.0f} events/s   "
        f"(target >= {APPEND_TARGET:,.0f}: x{rate / APPEND_TARGET:.1f})"
    )
    print(
        f"log --rejected -n 20 --json (whole command, median of 5)  {median:.3f} s   "
        f"(target < {QUERY_TARGET}: x{QUERY_TARGET / median:.1f} headroom)"
    )
    print(f"  of which the query      {query_only * 1000:>10.1f} ms")


if __name__ == "__main__":
    main()
