"""Bad input is one sentence with a hint and a documented exit code, never a crash (issue 9).

Range checks of every number in skillvc.toml and its command-line overrides; files that are
not UTF-8 or are directories; a read-only .skillvc/; a full disk; absurd ids for `show`; a CSV
quote that never closes; and the malformed-input campaign of bench/bench_malformed.py.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner, Result
from conftest import git
from helpers import copy_and_enter

from skillvc.cli import cli
from skillvc.core.errors import DiskFull, TaskSetError
from skillvc.core.store import open_store
from skillvc.tasks.taskset import read_items

SKILL = "skills/acme-returns/SKILL.md"
RANGE_HINT = "to a value in that range."


@pytest.fixture
def demo(demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return copy_and_enter(demo_seed, tmp_path / "demo", monkeypatch)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def set_key(root: Path, section: str, line: str) -> None:
    """Put ``line`` first in ``[section]`` of skillvc.toml, dropping an old line for its key."""
    key = line.split("=")[0].strip()
    out, current = [], None
    for old in (root / "skillvc.toml").read_text().splitlines():
        if old.startswith("["):
            current = old.strip()
        if current == f"[{section}]" and old.split("=")[0].strip() == key:
            continue
        out.append(old)
        if old.strip() == f"[{section}]":
            out.append(line)
    (root / "skillvc.toml").write_text("\n".join(out) + "\n")


@pytest.mark.parametrize(
    ("section", "line", "sentence"),
    [
        (
            "target",
            "temperature = nan",
            "[target] temperature = nan is out of range: it must be between 0 and 2.",
        ),
        (
            "target",
            "temperature = -3",
            "[target] temperature = -3 is out of range: it must be between 0 and 2.",
        ),
        (
            "train",
            "budget_usd = inf",
            "[train] budget_usd = inf is out of range: it must be more than 0.",
        ),
        (
            "target",
            "requests_per_minute = -10",
            "[target] requests_per_minute = -10 is out of range: it must be more than 0 and "
            "at most 1000000.",
        ),
        (
            "target",
            "requests_per_minute = 0",
            "[target] requests_per_minute = 0 is out of range: it must be more than 0 and "
            "at most 1000000.",
        ),
        (
            "target",
            "timeout_s = -5",
            "[target] timeout_s = -5 is out of range: it must be more than 0 and at most 86400.",
        ),
        (
            "target",
            "max_retries = -1",
            "[target] max_retries = -1 is out of range: it must be between 0 and 100.",
        ),
        (
            "train",
            "epochs = 100000",
            "[train] epochs = 100000 is out of range: it must be between 1 and 1000.",
        ),
        (
            "optimizer",
            "task_timeout_s = nan",
            "[optimizer] task_timeout_s = nan is out of range: it must be more than 0 and "
            "at most 86400.",
        ),
    ],
)
def test_numbers_out_of_range_are_one_sentence(
    demo: Path, section: str, line: str, sentence: str
) -> None:
    set_key(demo, section, line)
    result = run("eval", "--split", "val")
    key = line.split("=")[0].strip()
    assert result.exit_code == 5
    assert result.stderr == (
        f"Error: {sentence}\n"
        f"Hint: Set [{section}] {key} in skillvc.toml (or the matching command-line option) "
        f"{RANGE_HINT}\n"
    )


def test_split_ratio_with_a_word_is_one_sentence(demo: Path) -> None:
    (demo / "skillvc.toml").write_text(
        f'[skill]\npath = "{SKILL}"\n[tasks]\npath = "evals/val.jsonl"\nsplit_ratio = [0.5, "x"]\n'
    )
    result = run("eval", "--split", "val")
    assert result.exit_code == 5
    assert result.stderr == (
        'Error: [tasks] split_ratio = [0.5, "x"] must be a list of 2 or 3 finite, non-negative '
        "numbers with a positive sum.\n"
        "Hint: Use e.g. split_ratio = [0.6, 0.2, 0.2] in [tasks] of skillvc.toml.\n"
    )


def test_wrong_types_read_as_toml(demo: Path) -> None:
    set_key(demo, "train", "epochs = true")
    result = run("log")
    assert result.exit_code == 5
    assert result.stderr.splitlines()[0] == (
        "Error: [train] epochs = true in skillvc.toml has the wrong type (expected an integer)."
    )


def test_command_line_overrides_get_the_same_range_checks(demo: Path) -> None:
    head = git(demo, "rev-parse", "HEAD")
    result = run("train", "--epochs", "5000")
    assert result.exit_code == 5
    assert result.stderr == (
        "Error: [train] epochs = 5000 is out of range: it must be between 1 and 1000.\n"
        "Hint: Set [train] epochs in skillvc.toml (or the matching command-line option) "
        f"{RANGE_HINT}\n"
    )
    result = run("train", "--budget-usd", "inf")
    assert result.exit_code == 5
    assert result.stderr.splitlines()[0] == (
        "Error: [train] budget_usd = inf is out of range: it must be more than 0."
    )
    assert git(demo, "rev-parse", "HEAD") == head


def test_non_utf8_config_names_the_byte_and_offset(demo: Path) -> None:
    size = len((demo / "skillvc.toml").read_bytes())
    with open(demo / "skillvc.toml", "ab") as fh:
        fh.write(b"# caf\xe9\n")
    result = run("eval")
    assert result.exit_code == 5
    assert result.stderr == (
        f"Error: skillvc.toml is not UTF-8 text (bad byte 0xe9 at offset {size + 5}).\n"
        "Hint: Save skillvc.toml as UTF-8 (TOML files must be UTF-8).\n"
    )


def test_directories_where_files_belong(demo: Path) -> None:
    config = demo / "skillvc.toml"
    text = config.read_text()
    config.unlink()
    config.mkdir()
    result = run("eval")
    assert result.exit_code == 5
    assert result.stderr == (
        f"Error: skillvc.toml in {demo} is a directory, not a file.\n"
        "Hint: Move the directory aside and run 'skillvc init' to write a skillvc.toml.\n"
    )
    config.rmdir()
    config.write_text(text)

    db = demo / ".skillvc" / "events.db"
    db.unlink()
    db.mkdir()
    result = run("log")
    assert result.exit_code == 5
    assert result.stderr == (
        f"Error: {db} is a directory, not the event log.\n"
        "Hint: Move the directory aside; 'skillvc init' then creates a fresh event log.\n"
    )

    shutil.rmtree(demo / ".skillvc")
    (demo / ".skillvc").write_text("not a directory")
    result = run("train")
    assert result.exit_code == 3
    assert result.stderr == (
        f"Error: .skillvc in {demo} is a file, not skillvc's state directory.\n"
        "Hint: Move the file .skillvc aside, then run 'skillvc init' to recreate it.\n"
    )


def test_train_refuses_a_committed_skill_that_is_not_utf8(demo: Path) -> None:
    (demo / SKILL).write_bytes(b"---\nname: acme-returns\ndescription: d\n---\n# caf\xe9\n")
    git(demo, "commit", "-q", "-am", "a Latin-1 byte")
    head = git(demo, "rev-parse", "HEAD")
    result = run("train")
    assert result.exit_code == 5
    assert result.stderr.splitlines() == [
        f"Error: The skill file {SKILL} is not UTF-8 text (bad byte 0xe9 at offset 47).",
        "Hint: Fix the skill file by hand, then commit it.",
    ]
    assert git(demo, "rev-parse", "HEAD") == head
    with open_store(demo / ".skillvc" / "events.db") as store:
        assert store.events(types=["run.started"]) == []


@pytest.mark.parametrize(
    ("ident", "sentence"),
    [
        ("run-x/99999999999999999999", "No event 99999999999999999999 in run run-x."),
        ("99999999999999999999", "No event with id 99999999999999999999 in {db}."),
        ("9" * 5000, "No event with id " + "9" * 40 + "... in {db}."),
        ("9223372036854775807", "No event with id 9223372036854775807 in {db}."),
    ],
)
def test_show_ids_beyond_sqlite_integers_are_not_found(
    demo: Path, ident: str, sentence: str
) -> None:
    result = run("show", ident)
    assert result.exit_code == 3
    db = demo / ".skillvc" / "events.db"
    assert result.stderr == (
        f"Error: {sentence.format(db=db)}\nHint: List ids with 'skillvc log' or 'skillvc runs'.\n"
    )


def test_csv_quote_never_closed_is_reported_as_such(tmp_path: Path) -> None:
    path = tmp_path / "val.csv"
    path.write_text('input,target\nfirst,refund\n"hello, world\nsecond,row\n')
    with pytest.raises(TaskSetError) as caught:
        read_items(path, scorer="exact")
    assert caught.value.message == (f'{path} line 3 opens a quoted cell (") that is never closed.')
    assert caught.value.hint == 'Close the quote; a " inside a quoted cell is written "".'
    # Quoted cells that span lines and stray quotes inside a cell still read as before.
    path.write_text('input,target\n"two\nlines",ok\nsay "hi",ok\n')
    assert [i.input for i in read_items(path, scorer="exact")] == ["two\nlines", 'say "hi"']


def unprivileged(command: list[str]) -> list[str]:
    """``command`` held to file modes: root ignores them unless it drops these capabilities."""
    if os.geteuid() != 0:
        return command
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", *command]


def test_read_only_state_is_called_read_only_not_corrupt(demo: Path) -> None:
    state = demo / ".skillvc"
    assert run("eval", "--split", "val").exit_code == 0  # a log with something in it
    with open_store(state / "events.db") as store:
        events = store.count()
    for path in state.iterdir():
        path.chmod(0o444)
    state.chmod(0o555)
    try:
        for args in (["log"], ["eval", "--split", "val"], ["train"]):
            done = subprocess.run(
                unprivileged([sys.executable, "-m", "skillvc", *args]),
                cwd=demo,
                capture_output=True,
                text=True,
            )
            assert done.returncode == 4, done.stderr
            assert done.stderr == (
                f"Error: The event log {state / 'events.db'} is read-only (attempt to write a "
                "readonly database).\n"
                "Hint: Make .skillvc/ and the files in it writable by you (e.g. chmod -R u+w "
                ".skillvc), or run skillvc as their owner; the log itself is not damaged.\n"
            )
    finally:
        state.chmod(0o755)
        for path in state.iterdir():
            path.chmod(0o644)
    with open_store(state / "events.db") as store:  # healthy and whole, as the message says
        assert store.count() == events > 0
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_full_log_disk_is_one_sentence_and_nothing_half_written(tmp_path: Path) -> None:
    store = open_store(tmp_path / "events.db")
    store.append("run.note", {"n": 0})
    # SQLite's own cap on the file's pages makes it answer exactly as on a full disk.
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(DiskFull) as caught, store.transaction():
        store.append("run.note", {"n": 1})
        store.put_blob("x" * 200_000)
    assert caught.value.exit_code == 4
    assert caught.value.message == (
        f"The disk is full: the event log {tmp_path / 'events.db'} could not be written."
    )
    assert caught.value.hint == (
        "Free some disk space, then run the command again; the failed write was undone, so "
        "nothing is half-written."
    )
    assert [e.payload for e in store.events()] == [{"n": 0}]
    assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    store.append("run.note", {"n": 2})  # the connection is usable again, not stuck mid-way
    store.close()


def test_output_on_a_full_device_is_one_sentence(demo: Path) -> None:
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "skillvc", "runs", "--json"],
            cwd=demo,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
        )
    assert done.returncode == 4
    assert done.stderr == (
        "Error: The disk is full: a write failed (No space left on device).\n"
        "Hint: Free some disk space, then run the command again; the failed write was undone, "
        "so nothing is half-written.\n"
    )


# -- the campaign ----------------------------------------------------------------------------


def load_bench() -> ModuleType:
    path = Path(__file__).parent.parent / "bench" / "bench_malformed.py"
    spec = importlib.util.spec_from_file_location("bench_malformed", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("part", range(3))  # a third each, so test workers share it
def test_malformed_input_campaign_has_no_crash_and_loses_nothing(part: int) -> None:
    bench = load_bench()
    every = bench.all_cases()
    assert len(every) >= 100
    cases = every[part::3]
    outcomes = bench.run_campaign(cases)
    bad = [
        f"{o.case.name}: {o.kind} (exit {o.exit_code}) {', '.join(o.data_lost)}\n{o.stderr}"
        for o in outcomes
        if not o.ok
    ]
    assert bad == []
    counts = bench.summary(outcomes)
    assert counts["cases"] == len(cases) == counts["clean errors"]
    assert counts["crashes"] == 0 and counts["data lost"] == 0


def test_campaign_notices_a_crash_and_lost_data(tmp_path: Path) -> None:
    """The judge itself: a traceback is a crash, a changed skill file is data lost."""
    bench = load_bench()
    assert bench.classify(70, "skillvc crashed: ValueError: x\n", None) == "crash"
    assert bench.classify(5, "Error: Bad.\nHint: Fix it.\n", None) == "clean"
    assert bench.classify(5, "Error: Bad.\n", None) == "unclear"
    assert bench.classify(0, "", None) == "accepted"
    before = {SKILL: b"a", "skillvc.toml": b"t", "HEAD": "h", "refs": "r", "db": ("ok", 3)}
    after = dict(before, **{SKILL: b"b", "db": ("ok", 2)})
    assert bench.losses(before, after) == [f"{SKILL} changed", "events.db lost 1 events"]
    assert bench.losses(before, dict(before, db=None)) == ["events.db became unreadable"]
    db = tmp_path / "x.db"
    sqlite3.connect(db).execute("CREATE TABLE events (id INTEGER)").connection.commit()
    assert bench.db_state(db) == ("ok", 0)


def test_a_file_skillvc_may_not_read_is_permission_denied(demo: Path) -> None:
    config = demo / "skillvc.toml"
    config.chmod(0o000)
    try:
        done = subprocess.run(
            unprivileged([sys.executable, "-m", "skillvc", "log"]),
            cwd=demo,
            capture_output=True,
            text=True,
        )
    finally:
        config.chmod(0o644)
    assert done.returncode == 4
    assert done.stderr == (
        f"Error: Permission denied: {config}.\n"
        "Hint: Give your user access to it (see 'ls -l'), or run skillvc as the repository's "
        "owner.\n"
    )
