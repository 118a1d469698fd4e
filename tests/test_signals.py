"""SIGTERM and SIGHUP stop a real ``skillvc train`` like Ctrl-C: agents ended, scratch removed."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from skillvc.core.store import open_store
from tests.conftest import git
from tests.helpers import start_train, train_env, train_to_the_end
from tests.test_agents import agent_repo, fake_cli

ROOT = Path(__file__).resolve().parent.parent
SKILL = "skills/acme-returns/SKILL.md"


def history(repo: Path) -> dict[str, object]:
    """What must be identical between an interrupted and an uninterrupted run."""
    with open_store(repo / ".skillvc/events.db") as store:
        gates = store.query(
            "SELECT run_id, step, kind, decision, edits, val_before, val_after FROM gates "
            "ORDER BY run_id, event_id"
        )
        seqs = store.query(
            "SELECT run_id, seq, type FROM events WHERE seq IS NOT NULL ORDER BY run_id, seq"
        )
        calls = store.query(
            "SELECT COUNT(*) AS n, COUNT(DISTINCT key) AS k FROM events WHERE type = 'model.call'"
        )[0]
    return {
        "skill": (repo / SKILL).read_bytes(),
        "accepted": git(repo, "log", "--format=%T%x00%B%x01", "main"),
        "gates": gates,
        "seqs": seqs,
        "calls": calls,
    }


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"  # a zombie has ended; only its exit status is left


@pytest.fixture(scope="module")
def agents(demo_seed: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A repo training through the fake Claude Code, and the history of an uninterrupted run."""
    base = tmp_path_factory.mktemp("signals")
    watch = base / "watch"
    watch.mkdir()
    exe = fake_cli(base / "bin", "claude-code")
    extra = f'\nenv = {{ FAKE_AGENT_PIDS = "{watch}" }}'
    seed = agent_repo(demo_seed, base / "seed", "claude-code", exe, extra)
    for split, n in (("train", 10), ("val", 6)):  # two steps: enough to stop in the middle
        path = seed / "evals" / f"{split}.jsonl"
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:n]))
    git(seed, "commit", "-q", "-am", "fewer tasks")
    reference = base / "reference"
    subprocess.run(["cp", "-a", str(seed), str(reference)], check=True)
    (base / "tmp-ref").mkdir()
    train_to_the_end(reference, train_env(TMPDIR=str(base / "tmp-ref")))
    return {"seed": seed, "watch": watch, "expected": history(reference), "base": base}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_agent_rollouts_ends_agents_and_scratch_and_the_run_resumes(
    agents: dict[str, object], signum: int
) -> None:
    base, seed, watch = Path(str(agents["base"])), Path(str(agents["seed"])), agents["watch"]
    assert isinstance(watch, Path)
    repo = base / f"run-{signum}"
    subprocess.run(["cp", "-a", str(seed), str(repo)], check=True)
    systmp = base / f"tmp-{signum}"
    systmp.mkdir()
    env = train_env(TMPDIR=str(systmp))
    pids = watch / "pids"
    pids.unlink(missing_ok=True)
    (watch / "slow").touch()  # every agent now waits 60 s after it started its child
    proc = start_train(repo, env)
    try:
        deadline = time.monotonic() + 60
        while not (pids.exists() and pids.read_text().count("\n") >= 2):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no two agents started"
            time.sleep(0.05)
        assert list(systmp.glob("skillvc-agent-*")), "agents run in their scratch folders"
        assert list(systmp.glob("skillvc-agent-*/home/.claude/projects/*/*.jsonl"))
        started = time.monotonic()
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=30)
    finally:
        (watch / "slow").unlink()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert time.monotonic() - started < 20, "it did not wait for the agents' 60 s"
    assert proc.returncode == 128 + signum
    name = signal.Signals(signum).name
    assert f"Interrupted by {name}; run 'skillvc train' again to resume." in stderr
    recorded = [int(p) for line in pids.read_text().split("\n") for p in line.split()]
    assert recorded and not [p for p in recorded if alive(p)], "an agent process was left"
    assert list(systmp.iterdir()) == [], "a scratch folder (or transcript) was left"

    train_to_the_end(repo, env)
    got, expected = history(repo), agents["expected"]
    assert isinstance(expected, dict)
    for key in ("skill", "accepted", "gates", "seqs", "calls"):
        assert got[key] == expected[key], key
    assert list(systmp.iterdir()) == []
