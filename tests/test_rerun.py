"""Re-running `skillvc train` after a finished run is safe: it says so and makes no call."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import git

from skillvc.cli import cli
from skillvc.core.store import open_store

SKILL = "skills/acme-returns/SKILL.md"


@pytest.fixture
def demo(demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = Path(shutil.copytree(demo_seed, tmp_path / "demo"))
    monkeypatch.chdir(repo)
    monkeypatch.setenv("SKILLVC_SIM_JOURNAL", str(tmp_path / "calls.log"))
    return repo


def sim_calls(repo: Path) -> int:
    """Calls the simulator answered (its journal: one line per completed call)."""
    journal = repo.parent / "calls.log"
    return len(journal.read_text().splitlines()) if journal.exists() else 0


def runs_started(repo: Path) -> list[str]:
    with open_store(repo / ".skillvc/events.db") as store:
        return [e.run_id or "" for e in store.events(types=["run.started"])]


def train(*args: str) -> Result:
    return CliRunner().invoke(cli, ["train", "-q", "--epochs", "1", *args])


def test_train_after_a_finished_run_says_so_and_makes_no_call(demo: Path) -> None:
    first = train()
    assert first.exit_code == 0, first.output
    calls, (run,) = sim_calls(demo), runs_started(demo)
    head = git(demo, "rev-parse", "HEAD")
    assert calls > 0

    again = train()
    assert again.exit_code == 0, again.output
    assert again.stdout == (
        f"Nothing to do: run {run} already finished at HEAD ({head[:10]}) with this config, "
        "templates and task set; pass --new to train again.\n"
    )
    assert sim_calls(demo) == calls and runs_started(demo) == [run]

    as_json = json.loads(train("--json").stdout)
    assert as_json["run"] == run and as_json["status"] == "up-to-date"
    assert as_json["fresh_calls"] == 0 and as_json["best_commit"] == head

    new = train("--new")
    assert new.exit_code == 0, new.output
    assert "Nothing to do" not in new.stdout and len(runs_started(demo)) == 2


def test_another_config_or_a_moved_head_trains_again(demo: Path) -> None:
    assert train().exit_code == 0
    other = train("--batch-size", "30")  # another config: a new run
    assert other.exit_code == 0 and "Nothing to do" not in other.stdout
    assert len(runs_started(demo)) == 2

    path = demo / SKILL
    path.write_text(path.read_text() + "\n- Be brief.\n")
    git(demo, "commit", "-qam", "A human edit")
    moved = train("--batch-size", "30")  # same config, but HEAD moved: a new run
    assert moved.exit_code == 0 and "Nothing to do" not in moved.stdout
    assert len(runs_started(demo)) == 3
