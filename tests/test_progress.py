"""Progress on stderr for eval, check and train; -q silences it; stdout never has it."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillvc.cli import cli
from skillvc.core.progress import Progress

STAGE_END = re.compile(
    r"^(?P<name>.+): (?P<done>\d+)/(?P<total>\d+) (items|minibatches), (?P<calls>\d+) calls "
    r"\((?P<logged>\d+) made earlier\), [\d.]+/s, done in [\d.]+s, \$\d+\.\d{4} so far$"
)


@pytest.fixture
def demo(demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    repo = Path(shutil.copytree(demo_seed, tmp_path / "demo"))
    monkeypatch.chdir(repo)
    monkeypatch.setenv("SKILLVC_SIM_LATENCY_MS", "2")  # calls that take a little time
    return repo


def stage_lines(stderr: str) -> dict[str, re.Match[str]]:
    found = {}
    for line in stderr.splitlines():
        match = STAGE_END.match(line)
        if match:
            found[match["name"]] = match
    return found


def test_eval_reports_progress_on_stderr_and_nothing_on_stdout(demo: Path) -> None:
    first = CliRunner().invoke(cli, ["eval"])
    assert first.exit_code == 0, first.output
    stage = stage_lines(first.stderr)["eval the working tree on val"]
    assert (stage["done"], stage["total"], stage["calls"], stage["logged"]) == (
        "30",
        "30",
        "30",
        "0",
    )
    assert "items" not in first.stdout and "so far" not in first.stdout

    again = CliRunner().invoke(cli, ["eval", "--json"])
    assert again.exit_code == 0 and again.stdout.startswith("{")
    stage = stage_lines(again.stderr)["eval the working tree on val"]
    assert (stage["calls"], stage["logged"]) == ("30", "30")  # every answer from the log

    quiet = CliRunner().invoke(cli, ["eval", "-q"])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_check_reports_a_stage_per_version(demo: Path) -> None:
    result = CliRunner().invoke(cli, ["check", "--base", "HEAD"])
    assert result.exit_code == 0, result.output
    assert list(stage_lines(result.stderr)) == [
        "eval HEAD on val",
        "eval the working tree on val",
    ]
    assert "so far" not in result.stdout


def test_train_reports_every_stage(demo: Path) -> None:
    result = CliRunner().invoke(cli, ["train", "--epochs", "1"])
    assert result.exit_code == 0, result.output
    stages = stage_lines(result.stderr)
    assert stages["baseline on val"]["done"] == "30"
    for n in (1, 2, 3):
        assert stages[f"step {n}/3 rollouts"]["total"] == "20"
        assert f"step {n}/3 reflection" in stages
    assert any(re.fullmatch(r"step \d/3 gate", name) for name in stages)
    assert "epoch 1/1 slow update" in stages
    assert stages["final test (seed and best skill)"]["done"] in ("30", "60")
    assert any(line.startswith("epoch 1/1 step 3/3 lr") for line in result.stderr.splitlines())
    assert "so far" not in result.stdout and "items" not in result.stdout

    quiet = CliRunner().invoke(cli, ["train", "--new", "--epochs", "1", "-q"])
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == ""


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_come_at_most_every_interval_with_an_eta() -> None:
    lines: list[str] = []
    clock = FakeClock()
    progress = Progress(lines.append, interval=2.0, clock=clock)
    with progress.stage("eval HEAD on val", 10):
        for _ in range(3):
            clock.now += 0.5
            progress.advance()  # up to 1.5 s: no line yet
        clock.now += 0.5
        progress.advance()  # 2 s: the first periodic line
        for _ in range(2):
            clock.now += 0.5
            progress.advance()  # 2.5 s and 3 s: too soon for another
    assert lines == [
        "eval HEAD on val: 4/10 items, 2.0/s, ETA 3s",
        "eval HEAD on val: 6/10 items, 2.0/s, done in 3.0s",
    ]
    progress.advance()  # outside a stage: nothing
    assert len(lines) == 2


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_one_live_line_redrawn_in_place() -> None:
    screen = Terminal()
    lines: list[str] = []
    clock = FakeClock()
    progress = Progress(lines.append, stream=screen, clock=clock)
    with progress.stage("step 1/9 rollouts", 4):
        clock.now += 1
        progress.advance(2)
        progress.note("a message clears the live line first")
    assert (
        screen.getvalue()
        == "\rstep 1/9 rollouts [##########..........] 2/4, 2.0/s, ETA 1s\x1b[K\r\x1b[K"
    )
    assert lines == [
        "a message clears the live line first",
        "step 1/9 rollouts: 2/4 items, 2.0/s, done in 1.0s",
    ]


def test_off_writes_nothing() -> None:
    progress = Progress.off()
    with progress.stage("x", 3):
        progress.advance(3)
        progress.note("hello")
    assert not progress.enabled
