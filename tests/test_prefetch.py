"""The calls-ahead pool: by rank, a waited-for call first, speculation dropped when not needed."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import pytest
from conftest import copy_repo, git

from skillvc.core.config import ModelConfig
from skillvc.core.errors import BudgetExceeded
from skillvc.core.store import open_store
from skillvc.models.backends.sim import SimBackend
from skillvc.models.calls import ModelClient
from skillvc.tasks.taskset import TaskItem
from skillvc.training.loop import train
from skillvc.training.prefetch import LATER, NEXT, SPECULATIVE, Prefetcher, PriorityPool
from skillvc.workspace.workspace import open_workspace


def _blocked_pool() -> tuple[PriorityPool, threading.Event, list[str]]:
    """A one-thread pool whose thread is held by a first job until the event is set."""
    pool = PriorityPool(1, "test-ahead")
    gate, started, ran = threading.Event(), threading.Event(), []

    def hold() -> None:
        started.set()
        gate.wait()

    pool.submit(NEXT, hold)
    started.wait()
    return pool, gate, ran


def test_the_pool_starts_the_most_urgent_queued_call_first() -> None:
    pool, gate, ran = _blocked_pool()
    for name, rank in [("spec", SPECULATIVE), ("test", LATER), ("next-a", NEXT), ("next-b", NEXT)]:
        pool.submit(rank, lambda name=name: ran.append(name))
    waited = pool.submit(SPECULATIVE, lambda: ran.append("waited"))
    pool.promote([waited])  # the loop waits for it: it jumps the queue, and runs once
    gate.set()
    pool.shutdown(cancel=False)
    assert ran == ["waited", "next-a", "next-b", "test", "spec"]


def test_a_stopped_pool_drops_what_it_has_not_started() -> None:
    pool, gate, ran = _blocked_pool()
    queued = pool.submit(NEXT, lambda: ran.append("queued"))
    gate.set()
    pool.shutdown(cancel=True)
    assert ran == [] and queued.future.cancelled()


def test_a_stopped_and_resumed_run_makes_no_call_twice(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clean stop (the budget) leaves nothing unanswered: every call sent ahead that had
    # started is answered and logged before the process ends, what had not started is
    # dropped, and the replay speculates nothing on a gate whose decision is in the log.
    journal = tmp_path / "journal.txt"
    monkeypatch.setenv("SKILLVC_SIM_JOURNAL", str(journal))
    repo = copy_repo(demo_seed, tmp_path / "r")
    with open(repo / "skillvc.toml", "a") as fh:
        fh.write('\n[prices."sim:support"]\ninput = 1.0\noutput = 1.0\n')
    git(repo, "commit", "-qam", "price the simulator")
    settings = {"train": {"attribution": False}}  # the bundle gate: accepted gates speculate
    with pytest.raises(BudgetExceeded):
        train(open_workspace(repo), overrides=settings, budget_usd=0.02)
    stopped_at = len(journal.read_text().split())
    resumed = train(open_workspace(repo), overrides=settings, budget_usd=100.0)
    assert resumed.resumed and stopped_at > 0
    made = journal.read_text().split()
    assert len(made) == len(set(made))  # no model call paid twice
    with open_store(repo / ".skillvc/events.db") as store:
        logged = store.query("SELECT COUNT(*) AS n FROM events WHERE type = 'model.call'")
    assert logged[0]["n"] == len(made)  # and every call made is in the log


def test_a_lent_pool_runs_the_queued_rollouts_while_the_ahead_pool_is_busy(
    tmp_path: Path,
) -> None:
    """``lend``: the loop's idle pool takes the queued calls for these rollouts at once, as
    ``wait_for`` would once the loop reached them, but without waiting for them."""
    config = ModelConfig(model="sim:support")
    items = [
        TaskItem(
            id=str(i),
            input=f"Issue: damaged. Days since delivery: {i}. Tier: standard.",
            targets=("replace",),
        )
        for i in range(3)
    ]
    skill = "- Damaged on arrival: offer a replacement, not a refund.\n"
    with open_store(tmp_path / "events.db") as store, ThreadPoolExecutor(3) as loop_pool:
        client = ModelClient(store, {"target": SimBackend("sim:support")}, {"target": config})
        with Prefetcher(client, workers=1) as ahead:
            gate, started = threading.Event(), threading.Event()
            ahead.pool.submit(NEXT, lambda: (started.set(), gate.wait()))
            started.wait()  # the ahead pool's only thread is held
            batch = ahead.rollouts(skill, items, "train")
            assert batch is not None and not any(job.taken for job in batch.jobs)
            ahead.lend(skill, items, "train", loop_pool)
            done, pending = wait([job.future for job in batch.jobs], timeout=30)
            assert not pending  # answered on the lent threads, the held one still held
            assert not gate.is_set()
            gate.set()
