"""Output fits the terminal: at 80 columns no line of train, eval, runs, log or show is wider,
the live progress line keeps its ETA and cost, log and show page through $PAGER and colour
their diffs (--color, NO_COLOR). Checked under a real pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from skillvc.cli import cli
from skillvc.core.progress import Progress
from skillvc.review.output import format_runs
from skillvc.terminal.fit import fit_line, visible_len

CODES = re.compile(r"\x1b\[[0-9;]*[mK]")
COLOUR = re.compile(r"\x1b\[3[1-6]m")


def in_terminal(
    args: list[str], cwd: Path, columns: int = 80, env: dict[str, str] | None = None
) -> str:
    """Run ``skillvc ARGS`` with stdin, stdout and stderr on a pseudo-terminal ``columns``
    wide; everything it showed, as the terminal received it."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    environ.update({"TERM": "xterm", "PAGER": "cat", **(env or {})})
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillvc", *args],
        cwd=cwd,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=environ,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=120) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode("utf-8", "replace")


def rows(shown: str) -> list[str]:
    """The rows a terminal shows: lines, and each redraw of a live line, colour codes out."""
    return [CODES.sub("", part) for line in shown.split("\r\n") for part in line.split("\r")]


def too_wide(shown: str, columns: int = 80) -> list[str]:
    return [row for row in rows(shown) if len(row) > columns]


@pytest.fixture(scope="module")
def trained(demo_seed: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A demo repo trained for one epoch under an 80-column terminal; (repo, what it showed).
    Slow model calls (20 ms, two at a time) so the live progress line is drawn."""
    repo = Path(shutil.copytree(demo_seed, tmp_path_factory.mktemp("terminal") / "demo"))
    shown = in_terminal(
        ["train", "--epochs", "1", "--workers", "2"],
        repo,
        env={"SKILLVC_SIM_LATENCY_MS": "20"},
    )
    return repo, shown


def test_train_fits_80_columns_and_its_live_line_keeps_eta_and_cost(
    trained: tuple[Path, str],
) -> None:
    _, shown = trained
    assert too_wide(shown) == []
    live = [part for line in shown.split("\r\n") for part in line.split("\r")[1:] if part]
    drawn = [CODES.sub("", part) for part in live if "ETA" in part]
    assert drawn, shown
    assert all(re.search(r"ETA \d+[smh]", row) and "$" in row for row in drawn), drawn
    assert "run run-" in shown and "finished" in shown  # the summary, wrapped, not cut


@pytest.mark.parametrize(
    "args",
    [
        ["runs"],
        ["eval"],
        ["eval", "--compare", "HEAD~1"],
        ["log", "-p"],
        ["log", "--rejected", "-n", "2"],
        ["show", "1"],
    ],
    ids=" ".join,
)
def test_read_commands_fit_80_columns(trained: tuple[Path, str], args: list[str]) -> None:
    repo, _ = trained
    shown = in_terminal(args, repo)
    assert shown.strip()
    assert too_wide(shown) == []


def test_show_of_a_gate_and_a_model_call_fit_80_columns(trained: tuple[Path, str]) -> None:
    repo, _ = trained
    from skillvc.core.store import open_store

    with open_store(repo / ".skillvc/events.db") as store:
        ids = [
            store.query(f"SELECT min(id) AS id FROM events WHERE type = '{kind}'")[0]["id"]
            for kind in ("gate", "model.call", "rollout")
        ]
    for ident in ids:
        shown = in_terminal(["show", str(ident)], repo)
        assert too_wide(shown) == [], ident


def test_wrapping_loses_nothing(trained: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The text shown at 60 columns is that of a pipe, only wrapped."""
    repo, _ = trained
    monkeypatch.chdir(repo)
    wide = CliRunner().invoke(cli, ["log", "-p"])
    narrow = in_terminal(["log", "-p"], repo, columns=60)
    assert too_wide(narrow, 60) == []
    assert "".join(wide.stdout.split()) == "".join("".join(rows(narrow)).split())


def test_log_is_paged_and_coloured_on_a_terminal(trained: tuple[Path, str]) -> None:
    repo, _ = trained
    paged = in_terminal(["log", "-p"], repo, env={"PAGER": "sed 's/^/|/'"})
    lines = [line for line in paged.split("\r\n") if line]
    assert lines and all(line.startswith("|") for line in lines)  # every line via the pager
    assert COLOUR.search(paged)  # the pager gets colours (less -R shows them)
    assert all(len(CODES.sub("", line)) <= 81 for line in lines)  # fitted, then "|" added
    plain = in_terminal(["log", "-p", "--no-pager"], repo, env={"PAGER": "sed 's/^/|/'"})
    assert not plain.startswith("|") and COLOUR.search(plain)


def test_no_color_and_color_never_turn_colour_off(trained: tuple[Path, str]) -> None:
    repo, _ = trained
    assert COLOUR.search(in_terminal(["log", "-p"], repo))
    assert not COLOUR.search(in_terminal(["log", "-p"], repo, env={"NO_COLOR": "1"}))
    assert not COLOUR.search(in_terminal(["log", "-p", "--color=never"], repo))


def test_color_always_colours_a_pipe_and_auto_does_not(
    trained: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _ = trained
    monkeypatch.chdir(repo)
    monkeypatch.setenv("NO_COLOR", "1")  # --color=always wins over it, as no-color.org says
    always = CliRunner().invoke(cli, ["log", "-p", "--color=always"])
    auto = CliRunner().invoke(cli, ["log", "-p"])
    assert always.exit_code == 0, always.output
    assert re.search(r"\x1b\[32m\+", always.stdout) and re.search(r"\x1b\[31m-", always.stdout)
    assert not CODES.search(auto.stdout)
    assert click.unstyle(always.stdout) == auto.stdout  # only the colour differs


def test_a_long_coloured_line_wraps_with_its_colour_and_indent() -> None:
    line = "    " + click.style("+ " + "word " * 30, fg="green")
    wrapped = fit_line(line, 40)
    assert len(wrapped) > 1 and all(visible_len(row) <= 40 for row in wrapped)
    assert all(row.count("\x1b[32m") == 1 for row in wrapped)  # each row coloured again
    assert all(CODES.sub("", row).startswith("      word") for row in wrapped[1:])
    assert fit_line("short", 40) == ["short"] and fit_line("x" * 99, None) == ["x" * 99]


class _Usage:
    replies = fresh = errors = unpriced = 0
    cost_usd = 12.3456


class _Terminal:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", [40, 60, 80, 160])
def test_the_live_line_drops_detail_before_eta_and_cost(
    columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    now = [0.0]
    screen = _Terminal()
    progress = Progress(lambda line: None, stream=screen, clock=lambda: now[0])  # type: ignore[arg-type]
    usage = _Usage()
    progress.watch(lambda: usage)
    with progress.stage("epoch 3/4 step 17/40 gate on val", 300):
        usage.replies, usage.fresh = 120, 80
        now[0] += 7
        progress.advance(90)
    drawn = CODES.sub("", screen.text.split("\r")[1])
    assert len(drawn) <= columns - 1
    assert "ETA 16s" in drawn and "$12.3456 so far" in drawn
    if columns >= 160:
        assert "[######" in drawn and "120 calls (40 made earlier)" in drawn


def test_the_runs_table_keeps_its_key_columns_at_80(trained: tuple[Path, str]) -> None:
    from skillvc.core.store import open_store
    from skillvc.review.runs import list_runs

    repo, _ = trained
    with open_store(repo / ".skillvc/events.db") as store:
        runs = list_runs(store)
    wide, narrow = format_runs(runs), format_runs(runs, 80)
    assert max(map(len, wide.splitlines())) > 80  # every column when not on a terminal
    assert max(map(len, narrow.splitlines())) <= 80
    header = narrow.splitlines()[0].split()
    assert header[:1] == ["run"] and {"accepted", "rejected", "cost"} <= set(header)


def test_json_on_a_terminal_is_never_wrapped(trained: tuple[Path, str]) -> None:
    """Machine output stays whole on a terminal too: JSON copied off the screen still parses."""
    import json

    repo, _ = trained
    shown = in_terminal(["runs", "--json"], repo, columns=40)
    assert too_wide(shown, 40)  # its long lines are left as they are
    assert json.loads(shown.replace("\r\n", "\n"))[0]["status"] == "finished"
