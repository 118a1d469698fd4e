"""The calls-ahead pool: by rank, a waited-for call first, speculation dropped when not needed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from conftest import copy_repo, git

from skillvc.core.errors import BudgetExceeded
from skillvc.core.store import open_store
from skillvc.training.loop import train
from skillvc.training.prefetch import LATER, NEXT, SPECULATIVE, PriorityPool
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
