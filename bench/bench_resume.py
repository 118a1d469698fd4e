"""What a kill costs: answered model calls a resumed run pays for again (issue 27).

Trains the demo repository in the simulator's world (15 ms a call) in a subprocess, kills it
with SIGKILL at 20, 40, 60 and 80 % of the uninterrupted run's events, resumes it to the end,
and counts the calls the simulator answered twice (its journal keeps every answered call's
key). A call in flight and unanswered at a kill is sent again and answered once, so it does
not count: what counts is a call answered but not yet in the log when the process died.

    python bench/bench_resume.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from skillvc.training.demo import create_demo_repo

FRACTIONS = (0.2, 0.4, 0.6, 0.8)


def events(db: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def train(repo: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "skillvc", "train", "-q"],
        cwd=repo,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    env = dict(os.environ, SKILLVC_SIM_LATENCY_MS="15", GIT_CONFIG_NOSYSTEM="1")
    with tempfile.TemporaryDirectory() as tmp:
        reference = Path(tmp) / "reference"
        create_demo_repo(reference)
        assert train(reference, env).wait() == 0
        total = events(reference / ".skillvc/events.db")
        again, kills = [], 0
        for run in range(args.runs):
            repo = Path(tmp) / f"run{run}"
            create_demo_repo(repo)
            journal = Path(tmp) / f"journal{run}.txt"
            env["SKILLVC_SIM_JOURNAL"] = str(journal)
            db = repo / ".skillvc/events.db"
            for fraction in FRACTIONS:
                proc = train(repo, env)
                while events(db) < fraction * total and proc.poll() is None:
                    time.sleep(0.01)
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
                    kills += 1
            assert train(repo, env).wait() == 0
            made = journal.read_text().split()
            again.append(len(made) - len(set(made)))
    print(f"{kills} kills in {args.runs} runs: answered calls paid again per run {again}")


if __name__ == "__main__":
    main()
