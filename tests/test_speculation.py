"""Speculation on rejection and calls sent ahead change when requests go out, never the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import copy_repo
from helpers import priced_copies
from test_train import SKILL, history

from skillvc.cli import cli
from skillvc.core.errors import BudgetExceeded
from skillvc.core.store import open_store
from skillvc.training.loop import RunSummary, train
from skillvc.workspace.workspace import open_workspace

# Fields that name a commit or an event by a value of this repository (commit times differ).
LOCAL = {"sha", "gate_id", "best_commit", "intent", "parent"}


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items() if k not in LOCAL}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def run_events(repo: Path) -> list[tuple[str, Any]]:
    """The run's sequenced events as (type, payload), without this repository's shas/ids."""
    with open_store(repo / ".skillvc/events.db") as store:
        rows = store.query("SELECT type, payload FROM events WHERE seq IS NOT NULL ORDER BY seq")
    out = []
    for row in rows:
        payload = json.loads(row["payload"])
        if row["type"] == "run.started":
            payload["config"]["train"].pop("speculate")
        out.append((row["type"], _normalise(payload)))
    return out


def wasted_records(repo: Path) -> list[dict[str, Any]]:
    with open_store(repo / ".skillvc/events.db") as store:
        rows = store.query(
            "SELECT payload, seq FROM events WHERE type = 'speculation.wasted' ORDER BY id"
        )
    assert all(r["seq"] is None for r in rows)  # outside the run's sequence
    return [json.loads(r["payload"]) for r in rows]


def _train(repo: Path, seed: int, speculate: bool) -> RunSummary:
    return train(open_workspace(repo), overrides={"train": {"seed": seed, "speculate": speculate}})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_speculation_leaves_decisions_events_commits_and_skill_unchanged(
    demo_seed: Path, tmp_path: Path, seed: int
) -> None:
    plain = copy_repo(demo_seed, tmp_path / "plain")
    fast = copy_repo(demo_seed, tmp_path / "fast")
    without = _train(plain, seed, speculate=False)
    with_ = _train(fast, seed, speculate=True)

    assert with_.run_id == without.run_id  # speculation is no part of the run's identity
    expected, got = history(plain), history(fast)
    for key in ("skill", "accepted", "rejected", "gates", "rejected_edits", "seqs"):
        assert got[key] == expected[key], key
    assert (fast / SKILL).read_bytes() == (plain / SKILL).read_bytes()
    events_with, events_without = run_events(fast), run_events(plain)
    # The log's tokens are the calls made, and speculation made more; all else is identical.
    finished_with, finished_without = events_with.pop()[1], events_without.pop()[1]
    assert finished_with.pop("tokens") >= finished_without.pop("tokens")
    assert finished_with == finished_without
    assert events_with == events_without

    for field in ("steps", "accepted", "rejected", "best_val", "test", "baseline_test", "calls"):
        assert getattr(with_, field) == getattr(without, field), field
    assert without.speculation_wasted_calls == 0 and wasted_records(plain) == []
    records = wasted_records(fast)
    # Every accepted gate (steps and slow updates) voided what was started beside it.
    assert with_.speculation_wasted_calls == sum(r["jobs"] for r in records)
    assert len(records) <= with_.accepted + with_.slow_updates_accepted
    assert with_.fresh_calls == without.fresh_calls + with_.speculation_wasted_calls


def test_skillopts_slow_update_schedule_runs_from_epoch_2_and_speculation_leaves_it_unchanged(
    demo_seed: Path, tmp_path: Path
) -> None:
    """``slow_update_from_epoch = 2``: the first epoch ends with its meta update only, and the
    next epoch's rollouts go out beside that call; the run is the same without speculation."""
    runs = {}
    for speculate in (False, True):
        repo = copy_repo(demo_seed, tmp_path / str(speculate))
        train_ = {"seed": 2, "epochs": 2, "speculate": speculate, "slow_update_from_epoch": 2}
        runs[speculate] = (train(open_workspace(repo), overrides={"train": train_}), repo)
    (plain, plain_repo), (fast, fast_repo) = runs[False], runs[True]
    with open_store(fast_repo / ".skillvc/events.db") as store:
        ends = store.query(
            "SELECT type, epoch FROM events WHERE type IN ('slow_update', 'meta_update') "
            "ORDER BY seq"
        )
    assert [(r["type"], r["epoch"]) for r in ends] == [
        ("meta_update", 1),
        ("slow_update", 2),
        ("meta_update", 2),
    ]
    assert fast.slow_updates_accepted + fast.slow_updates_rejected <= 1
    events_with, events_without = run_events(fast_repo), run_events(plain_repo)
    events_with.pop(), events_without.pop()  # run.finished: tokens differ by the speculation
    assert events_with == events_without
    assert (fast_repo / SKILL).read_bytes() == (plain_repo / SKILL).read_bytes()
    assert fast.fresh_calls == plain.fresh_calls + fast.speculation_wasted_calls


def test_speculation_wastes_calls_only_when_a_gate_accepts(demo_seed: Path, tmp_path: Path):
    repo = copy_repo(demo_seed, tmp_path / "r")
    summary = _train(repo, 7, speculate=True)
    records = wasted_records(repo)
    assert summary.accepted >= 1 and records
    with open_store(repo / ".skillvc/events.db") as store:
        accepted_steps = {
            r["step"]
            for r in store.query(
                "SELECT step FROM events WHERE type = 'gate' "
                "AND json_extract(payload, '$.decision') = 'accepted' "
                "AND json_extract(payload, '$.kind') = 'step'"
            )
        }
        wasted_steps = {
            r["step"]
            for r in store.query(
                "SELECT step FROM events WHERE type = 'speculation.wasted' AND step IS NOT NULL"
            )
        }
        # Speculated rollouts that were used are logged once, as the next step's rollouts.
        rollouts = store.query(
            "SELECT json_extract(payload, '$.skill') AS skill, "
            "json_extract(payload, '$.item') AS item, COUNT(*) AS n FROM events "
            "WHERE type = 'rollout' AND json_extract(payload, '$.split') = 'train' "
            "GROUP BY skill, item HAVING n > 1"
        )
    assert wasted_steps and wasted_steps <= accepted_steps
    assert rollouts == []
    for record in records:
        assert record["jobs"] == len(record["items"])  # one sample per item in the demo
        assert all(item.split(":", 1)[0] in ("train", "test") for item in record["items"])


def test_a_stopped_speculating_run_resumes_to_the_run_without_speculation(
    demo_seed: Path, tmp_path: Path
) -> None:
    full, stopped = priced_copies(demo_seed, tmp_path)
    reference = train(open_workspace(full), overrides={"train": {"speculate": False}})
    with pytest.raises(BudgetExceeded):
        train(open_workspace(stopped), budget_usd=0.02)  # speculate = true by default
    first = wasted_records(stopped)
    resumed = train(open_workspace(stopped), budget_usd=100.0)
    assert resumed.resumed and resumed.run_id == reference.run_id
    expected, got = history(full), history(stopped)
    for key in ("skill", "accepted", "rejected", "gates", "rejected_edits", "seqs"):
        assert got[key] == expected[key], key
    # The replay found the wasted records it had made and wrote none of them twice.
    records = wasted_records(stopped)
    assert records[: len(first)] == first
    assert len({json.dumps(r, sort_keys=True) for r in records}) == len(records)


def test_no_speculate_flag_turns_speculation_off(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = copy_repo(demo_seed, tmp_path / "r")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["train", "-q", "--no-speculate", "--epochs", "1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["speculation_wasted_calls"] == 0
    assert wasted_records(repo) == []
    with open_store(repo / ".skillvc/events.db") as store:
        started = store.query("SELECT payload FROM events WHERE type = 'run.started'")[0]
    assert json.loads(started["payload"])["config"]["train"]["speculate"] is False


def test_train_tells_the_calls_speculation_wasted(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = copy_repo(demo_seed, tmp_path / "r")
    monkeypatch.chdir(repo)
    # The bundle gate's trajectory, whose accepted gates waste speculation. (With attribution
    # the demo's summary counts one call more than the log holds: see the h21-gains report.)
    result = CliRunner().invoke(cli, ["train", "-q", "--no-attribution"])
    assert result.exit_code == 0, result.output
    wasted = sum(r["jobs"] for r in wasted_records(repo))  # all fresh in a first run
    assert wasted > 0
    lines = result.output.splitlines()
    assert (
        f"speculation: {wasted} of these calls were started ahead for the next step while a "
        "gate ran, and not needed because the gate kept its change"
    ) in lines
    with open_store(repo / ".skillvc/events.db") as store:
        made = store.query("SELECT COUNT(*) AS n FROM events WHERE type = 'model.call'")[0]["n"]
    # A first run: every call it paid for is in the log; the rest asked again for an input it
    # had already sent (answered from the log, free).
    calls = next(line for line in lines if line.startswith("model calls "))
    total = int(calls.split()[2])
    assert calls.startswith(
        f"model calls {total} ({made} made by this run, {total - made} answered from the log), "
    )
