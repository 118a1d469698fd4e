"""Scaffolding test files share: real ``skillvc train`` processes, event counts, gate events."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from skillvc.core.events import Event
from skillvc.core.store import EventStore

ROOT = Path(__file__).resolve().parent.parent
TRAIN = [sys.executable, "-m", "skillvc", "train", "-q"]


def train_env(**extra: str) -> dict[str, str]:
    """This process's environment with the checkout importable by a child ``python -m skillvc``."""
    return dict(os.environ, PYTHONPATH=str(ROOT), **extra)


def train_to_the_end(repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``skillvc train -q`` in ``repo`` as its own process; it must finish (exit 0)."""
    done = subprocess.run(TRAIN, cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done


def skillvc_process(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``skillvc ARGS`` run in ``repo`` as its own process (the checkout importable)."""
    return subprocess.run(
        [sys.executable, "-m", "skillvc", *args],
        cwd=repo,
        env=train_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def start_train(
    repo: Path, env: dict[str, str], out: int | IO[Any] | None = subprocess.PIPE
) -> subprocess.Popen[str]:
    """Start ``skillvc train -q`` in ``repo`` as its own process (stdout and stderr to ``out``).

    The child hears SIGHUP as a terminal's process would, even when the test run itself was
    started under ``nohup`` (whose ignored SIGHUP a child inherits, and skillvc then rightly
    keeps ignoring it)."""
    return subprocess.Popen(
        TRAIN,
        cwd=repo,
        env=env,
        stdout=out,
        stderr=out,
        text=True,
        preexec_fn=_hangup_heard,
    )


def _hangup_heard() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def event_count(db: Path) -> int:
    """How many events the log at ``db`` holds (0 while it does not exist or is locked)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def gate_payload(
    decision: str,
    before: float,
    after: float,
    n: int,
    edits: list[dict[str, Any]],
    **rest: Any,
) -> dict[str, Any]:
    """A step gate's payload on the hard metric: ``before`` -> ``after`` on ``n`` items."""
    return {
        "kind": "step",
        "decision": decision,
        "metric": "hard",
        "before": {"mean": before, "n": n},
        "after": {"mean": after, "n": n},
        "edits": edits,
        **rest,
    }


def edit_dict(
    edit_id: str, op: str, content: str, rationale: str, target: str = "", anchor: str | None = None
) -> dict[str, Any]:
    """An edit as the optimizer proposes it (the ``edit`` of an ``edit.proposed`` event)."""
    return {
        "id": edit_id,
        "op": op,
        "target": target,
        "content": content,
        "anchor": anchor,
        "rationale": rationale,
    }


def copy_and_enter(seed: Path, dest: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the repository ``seed`` at ``dest``, made the working directory."""
    shutil.copytree(seed, dest)
    monkeypatch.chdir(dest)
    return dest


def pushed_demo(tmp_path: Path) -> tuple[Path, Path]:
    """The demo repo at ``tmp_path/demo``, its main pushed to a bare ``origin``: (repo, bare)."""
    from conftest import git

    from skillvc.training.demo import create_demo_repo

    root = tmp_path / "demo"
    create_demo_repo(root).close()
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(root, "remote", "add", "origin", str(bare))
    git(root, "push", "-q", "origin", "main")
    return root, bare


def kill_at_fractions(
    repo: Path,
    env: dict[str, str],
    total: int,
    fractions: tuple[float, ...],
    before_kill: Callable[[float], None] | None = None,
) -> int:
    """Start ``skillvc train`` in ``repo`` once per fraction and SIGKILL it when the log holds
    that fraction of ``total`` events (``before_kill(fraction)`` first); how many were killed
    (a run may finish before its fraction)."""
    db = repo / ".skillvc" / "events.db"
    kills = 0
    for fraction in fractions:
        proc = start_train(repo, env)
        deadline = time.monotonic() + 120
        while event_count(db) < fraction * total and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        if proc.poll() is None:
            if before_kill is not None:
                before_kill(fraction)
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.communicate()
    return kills


def record_gate(
    store: EventStore,
    payload: dict[str, Any],
    *,
    run_id: str,
    seq: int,
    step: int,
    commit: tuple[str, str] | None = None,
) -> Event:
    """Append a gate event of epoch 1 as the loop writes it, and, given ``commit`` (sha, ref),
    the ``commit.done`` event that follows it."""
    gate = store.append("gate", payload, run_id=run_id, seq=seq, step=step, epoch=1)
    if commit is not None:
        sha, ref = commit
        done = {"sha": sha, "ref": ref, "gate_id": gate.id}
        store.append("commit.done", done, run_id=run_id, seq=seq + 1, key=f"gate:{gate.id}")
    return gate


def first_rows(repo: Path, train: int, val: int, test: int) -> None:
    """Keep only the first rows of the demo's task files in ``repo`` and commit: the same
    paths in fewer calls, for tests that do not need the whole set."""
    from conftest import git

    for split, keep in (("train", train), ("val", val), ("test", test)):
        path = repo / "evals" / f"{split}.jsonl"
        rows = path.read_text(encoding="utf-8").splitlines()[:keep]
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    git(repo, "commit", "-qam", "The first rows of the task files")


def add_protected_region(repo: Path, path: Path, name: str, message: str) -> None:
    """Append a protected region ``name`` holding ``Old.`` to ``path`` and commit it."""
    from conftest import git

    text = f"\n<!-- skillvc:protected {name} -->\nOld.\n<!-- /skillvc:protected {name} -->\n"
    path.write_text(path.read_text() + text)
    git(repo, "commit", "-qam", message)


SIM_PRICES = '\n[prices."sim:support"]\ninput = 1.0\noutput = 1.0\n'


def priced_copies(seed: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of ``seed`` (``full``, ``stopped``) whose simulator is priced, committed.
    Priced once, then copied: two commits made apart could differ in their second, and so in
    their commit, and the runs would get different ids."""
    from conftest import copy_repo, git

    priced = copy_repo(seed, tmp_path / "priced")
    with open(priced / "skillvc.toml", "a") as fh:
        fh.write(SIM_PRICES)
    git(priced, "commit", "-qam", "price the simulator")
    return copy_repo(priced, tmp_path / "full"), copy_repo(priced, tmp_path / "stopped")
