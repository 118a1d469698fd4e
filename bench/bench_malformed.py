"""Malformed-input campaign (issue 9): well over 100 bad inputs through the real CLI.

    python bench/bench_malformed.py [-k SUBSTRING] [-v]

Each case copies a seed skills repository (the demo's, with one evaluation in its event log),
breaks one thing (a config value, a file, a directory where a file belongs, a task file, the
skill, an argument, an id, a patch, the repository state), runs one skillvc command - in
process through click's CliRunner, or as a real process where the case needs one (stdout on a
full device, a read-only .skillvc/) - and classifies the outcome:

    clean      a documented exit code, one "Error: ..." line, a "Hint:" line (or click's
               "Try ... for help" for a usage error, exit 2), no traceback
    unclear    an error exit without a hint, or with several error lines
    accepted   exit 0: the bad input went through (for a case marked valid: clean)
    crash      exit 70, a traceback, or an exception that escaped the CLI
    hang       still running after the case's timeout (60 s): killed, or interrupted in process

and, independently, **data lost**: after the failed command the skill file, skillvc.toml,
HEAD or a git ref changed, or the event log lost events or fails SQLite's integrity check.

It prints the counts and lists every case that is not clean (and who owns its fix: some
cases are fixed on other branches of issue 9 and are marked so).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner

SKILL = "skills/acme-returns/SKILL.md"
CONFIG = "skillvc.toml"
DB = ".skillvc/events.db"
DOCUMENTED_EXIT_CODES = {1, 2, 3, 4, 5, 6, 7}
CRASH_EXIT_CODE = 70
CASE_TIMEOUT_S = 60.0  # a case still running after this is a hang
ERROR_LINE_MAX = 1200  # an Error: line longer than this echoes input it should have cut

Setup = Callable[[Path], None]


@dataclass
class Case:
    name: str
    args: list[str]
    setup: Setup = lambda root: None
    process: bool = False  # run as a real process (needed for stdout redirection, privileges)
    stdout_path: str | None = None  # with process: send stdout here (e.g. /dev/full)
    unprivileged: bool = False  # with process: drop root's file-permission override
    stdin: bytes | None = None
    valid: bool = False  # the input is fine (a BOM, a clean PR): exit 0 is the right answer
    timeout_s: float = CASE_TIMEOUT_S


@dataclass
class Outcome:
    case: Case
    exit_code: int
    kind: str  # clean | unclear | accepted | crash | hang
    data_lost: list[str] = field(default_factory=list)
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "clean" and not self.data_lost


# -- editing the seed repository -------------------------------------------------------------


def set_key(section: str, key: str, value: str) -> Setup:
    """Set ``key = value`` (raw TOML) in ``[section]`` of skillvc.toml, replacing any old line."""

    def setup(root: Path) -> None:
        path = root / CONFIG
        lines = path.read_text(encoding="utf-8").splitlines()
        header = f"[{section}]"
        out: list[str] = []
        current = None
        for line in lines:
            stripped = line.strip()
            if stripped.startswith("["):
                current = stripped
            if current == header and stripped.split("=")[0].strip() == key:
                continue
            out.append(line)
            if stripped == header:
                out.append(f"{key} = {value}")
        if header not in (line.strip() for line in lines):
            out += ["", header, f"{key} = {value}"]
        path.write_text("\n".join(out) + "\n", encoding="utf-8")

    return setup


def write(rel: str, data: bytes | str) -> Setup:
    def setup(root: Path) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)

    return setup


def append(rel: str, data: bytes) -> Setup:
    def setup(root: Path) -> None:
        with open(root / rel, "ab") as fh:
            fh.write(data)

    return setup


def make_dir(rel: str) -> Setup:
    """Replace the file at ``rel`` with a directory (holding one file, so git keeps it too)."""

    def setup(root: Path) -> None:
        path = root / rel
        if path.is_file():
            path.unlink()
        path.mkdir(parents=True, exist_ok=True)
        (path / "stray.txt").write_text("a file where skillvc expects none\n")

    return setup


def remove(rel: str) -> Setup:
    return lambda root: (root / rel).unlink()


def steps(*setups: Setup) -> Setup:
    def setup(root: Path) -> None:
        for s in setups:
            s(root)

    return setup


def committed(rel: str, data: bytes) -> Setup:
    """Write ``rel`` and commit it (training refuses an uncommitted skill before anything)."""

    def setup(root: Path) -> None:
        write(rel, data)(root)
        git(root, "add", "--", rel)
        git(root, "commit", "-q", "-m", f"break {rel}")

    return setup


def git(root: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def sqlite_user_version(version: int) -> Setup:
    def setup(root: Path) -> None:
        conn = sqlite3.connect(root / DB)
        conn.execute(f"PRAGMA user_version={version}")
        conn.close()

    return setup


def truncate_db(root: Path) -> None:
    path = root / DB
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def read_only_state(root: Path) -> None:
    state = root / ".skillvc"
    for path in state.iterdir():
        path.chmod(0o444)
    state.chmod(0o555)


def writable_again(root: Path) -> None:
    """Undo a case's chmod (so the copy can be judged and removed, also without root)."""
    if not root.is_dir():
        return
    root.chmod(0o755)
    for directory, dirs, files in os.walk(root):
        if ".git" in dirs:
            dirs.remove(".git")  # no case changes modes in there
        for name in dirs:
            Path(directory, name).chmod(0o755)
        for name in files:
            path = Path(directory, name)
            if not path.is_symlink():
                path.chmod(0o644)


def no_access(rel: str) -> Setup:
    return lambda root: (root / rel).chmod(0o000)


def read_only_root_without_state(root: Path) -> None:
    shutil.rmtree(root / ".skillvc")
    root.chmod(0o555)


def detached_head(root: Path) -> None:
    git(root, "checkout", "-q", "--detach")


def merge_in_progress(root: Path) -> None:
    git(root, "checkout", "-q", "-b", "other")
    (root / "notes.txt").write_text("other\n")
    git(root, "add", "notes.txt")
    git(root, "commit", "-q", "-m", "other")
    git(root, "checkout", "-q", "main")
    (root / "notes.txt").write_text("main\n")
    git(root, "add", "notes.txt")
    git(root, "commit", "-q", "-m", "main")
    subprocess.run(["git", "merge", "-q", "other"], cwd=root, capture_output=True)


# -- the cases -------------------------------------------------------------------------------

RANDOM = random.Random(9)
GOOD_ROW = json.dumps({"id": "new-1", "input": "Is this fine?", "target": "refund"})
EVAL_VAL = ["eval", "--split", "val"]


def config_cases() -> list[Case]:
    """Every number with NaN, inf, a negative, zero where it makes no sense and a huge value;
    wrong types; unknown names."""
    values: dict[tuple[str, str], list[str]] = {
        ("target", "temperature"): ["nan", "inf", "-3", "5", '"hot"'],
        ("optimizer", "temperature"): ["-inf", "2.5"],
        ("target", "max_tokens"): ["0", "-1", "1000000000000", '"lots"'],
        ("target", "timeout_s"): ["-5", "0", "nan", "inf"],
        ("target", "max_retries"): ["-1", "100000", "1.5"],
        ("target", "requests_per_minute"): ["-10", "0", "nan"],
        ("target", "tokens_per_minute"): ["-1", "inf"],
        ("target", "task_timeout_s"): ["0", "nan"],
        ("target", "model"): ['"gpt-4o"', "42"],
        ("target", "harness"): ['"shell"'],
        ("target", "command"): ['"echo hi"'],
        ("train", "epochs"): ["0", "-1", "1000000", "1.5", '"four"', "true"],
        ("train", "batch_size"): ["0", "1000000000"],
        ("train", "minibatch_size"): ["0", "100000"],
        ("train", "learning_rate"): ["0", "1000000"],
        ("train", "min_learning_rate"): ["9"],
        ("train", "samples"): ["0", "1000"],
        ("train", "workers"): ["0", "1000000"],
        ("train", "gate_confidence"): ["1", "-0.1", "nan"],
        ("train", "budget_usd"): ["0", "-1", "nan", "inf"],
        ("train", "max_failure_rate"): ["2", "nan"],
        ("train", "rejected_buffer_size"): ["-1"],
        ("train", "lr_schedule"): ['"cosin"'],
        ("train", "gate_metric"): ['"best"'],
        ("train", "seed"): ['"x"'],
        ("train", "learning_rte"): ["3"],
        ("skill", "max_bytes"): ["0", "-1"],
        ("skill", "path"): ["42"],
        ("tasks", "split_ratio"): ['[0.5, "x"]', "[]", "[1, 2, 3, 4]", "[-1, 1, 1]", "[0, 0]"],
        ("tasks", "scorer"): ['"nope"'],
        ("tasks", "scorer_options"): ['"x"'],
        ("prices", '"sim:support"'): ['{ input = "cheap" }', "{ input = -1 }", "{ input = nan }"],
    }
    cases = []
    for (section, key), raws in values.items():
        for raw in raws:
            cases.append(
                Case(f"config [{section}] {key} = {raw}", EVAL_VAL, set_key(section, key, raw))
            )
    # split_ratio only matters for one file split by ratio: make the set use one.
    for raw in ('[0.5, "x"]', "[nan, 1]"):
        cases.append(
            Case(
                f"config split_ratio = {raw} with [tasks] path",
                EVAL_VAL,
                lambda root, raw=raw: (root / CONFIG).write_text(
                    f'[skill]\npath = "{SKILL}"\n[tasks]\npath = "evals/val.jsonl"\n'
                    f"split_ratio = {raw}\n"
                ),
            )
        )
    # The same keys through other commands, which load the config too.
    for args in (["train"], ["log"], ["runs"], ["check", "--base", "HEAD"], ["report"]):
        cases.append(
            Case(
                f"config temperature = nan, {' '.join(args)}",
                args,
                set_key("target", "temperature", "nan"),
            )
        )
    return cases


def toml_cases() -> list[Case]:
    broken = {
        "unclosed table": "[train\nepochs = 3\n",
        "duplicate key": '[skill]\npath = "a"\npath = "b"\n',
        "bare word": "this is not toml\n",
        "section not a table": "train = 3\n",
        "unknown section": "[trian]\nepochs = 3\n",
        "BOM": "\ufeff[skill]\n",
        "empty file": "",
        "NUL byte": '[skill]\npath = "a\0b"\n',
        "huge integer": "[train]\nepochs = 99999999999999999999999999\n",
    }
    cases = [Case(f"toml {name}", EVAL_VAL, write(CONFIG, text)) for name, text in broken.items()]
    cases += [
        Case("toml non-UTF-8 byte", EVAL_VAL, append(CONFIG, b"# \xff\xfe\n")),
        Case(
            "toml random bytes",
            EVAL_VAL,
            write(CONFIG, bytes(RANDOM.randrange(256) for _ in range(300))),
        ),
        Case("toml non-UTF-8 byte, log", ["log"], append(CONFIG, b"\xc3\x28\n")),
        Case("toml is a directory", EVAL_VAL, make_dir(CONFIG)),
        Case("toml is a directory, train", ["train"], make_dir(CONFIG)),
    ]
    return cases


def state_cases() -> list[Case]:
    return [
        Case("events.db is a directory", ["log"], make_dir(DB)),
        Case("events.db is a directory, eval", EVAL_VAL, make_dir(DB)),
        Case("events.db is a directory, train", ["train"], make_dir(DB)),
        Case("events.db is garbage", ["log"], write(DB, b"not a database at all" * 10)),
        Case("events.db is truncated", ["runs"], truncate_db),
        Case("events.db has a newer schema", ["log"], sqlite_user_version(9999)),
        Case("events.db is missing", ["log"], remove(DB)),
        Case(
            "events.db random bytes",
            ["show", "1"],
            write(DB, bytes(RANDOM.randrange(256) for _ in range(4096))),
        ),
        Case(
            "events.db is a dangling symlink",
            ["log"],
            lambda root: ((root / DB).unlink(), (root / DB).symlink_to(root / "nowhere")),
        ),
        Case(
            ".skillvc is a file",
            ["train"],
            lambda root: (shutil.rmtree(root / ".skillvc"), (root / ".skillvc").write_text("x")),
        ),
        Case("read-only .skillvc/, log", ["log"], read_only_state, process=True, unprivileged=True),
        Case(
            "read-only .skillvc/, eval", EVAL_VAL, read_only_state, process=True, unprivileged=True
        ),
        Case(
            "read-only .skillvc/, train",
            ["train"],
            read_only_state,
            process=True,
            unprivileged=True,
        ),
        *(
            Case(name, args, setup, process=True, unprivileged=True)
            for name, args, setup in (
                ("unreadable skillvc.toml", ["log"], no_access(CONFIG)),
                ("unreadable skill, eval", EVAL_VAL, no_access(SKILL)),
                ("unreadable skill, validate", ["validate"], no_access(SKILL)),
                ("unreadable val file", EVAL_VAL, no_access("evals/val.jsonl")),
                (
                    "read-only repo without .skillvc/, train",
                    ["train"],
                    read_only_root_without_state,
                ),
            )
        ),
        Case(
            "stdout on a full disk (/dev/full)",
            ["runs", "--json"],
            process=True,
            stdout_path="/dev/full",
        ),
        Case("stdout on a full disk, show", ["show", "1"], process=True, stdout_path="/dev/full"),
    ]


def jsonl(*rows: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def task_cases() -> list[Case]:
    val = "evals/val.jsonl"
    files: dict[str, tuple[str, bytes | str]] = {
        "JSONL garbage line": (val, jsonl(GOOD_ROW, "{not json")),
        "JSONL array row": (val, jsonl([1, 2])),
        "JSONL string row": (val, jsonl('"just text"')),
        "JSONL missing input": (val, jsonl({"id": "a", "target": "x"})),
        "JSONL missing target": (val, jsonl({"id": "a", "input": "q"})),
        "JSONL blank input": (val, jsonl({"id": "a", "input": "   ", "target": "x"})),
        "JSONL duplicate ids": (
            val,
            jsonl(
                {"id": "a", "input": "q1", "target": "x"}, {"id": "a", "input": "q2", "target": "y"}
            ),
        ),
        "JSONL huge integer": (val, '{"id": 1, "input": "q", "target": ' + "9" * 5000 + "}\n"),
        "JSONL deep nesting": (
            val,
            '{"input": "q", "target": ' + "[" * 100000 + "]" * 100000 + "}\n",
        ),
        "JSONL metadata not an object": (val, jsonl({"input": "q", "target": "x", "metadata": 3})),
        "JSONL choices not a list": (val, jsonl({"input": "q", "target": "x", "choices": "abc"})),
        "JSONL non-UTF-8": (val, b'{"input": "caf\xe9", "target": "x"}\n'),
        "JSONL random bytes": (val, bytes(RANDOM.randrange(256) for _ in range(500))),
        "JSONL promptfoo bad assert": (
            val,
            jsonl({"vars": {"input": "q"}, "assert": [{"type": "llm-rubric"}]}),
        ),
        "JSONL promptfoo assert not a list": (val, jsonl({"vars": {"input": "q"}, "assert": 3})),
        "JSONL input overlaps train": (val, Path(__file__).name),  # replaced below
        "CSV unclosed quote": ("evals/val.csv", 'input,target\n"hello, world\nsecond,row\n'),
        "CSV extra cells": ("evals/val.csv", "input,target\na,b,c\n"),
        "CSV no target column": ("evals/val.csv", "input,answerz\na,b\n"),
        "CSV header only": ("evals/val.csv", "input,target\n"),
        "CSV cell over 128 KiB": ("evals/val.csv", 'input,target\n"' + "x" * 200_000 + '",y\n'),
        "JSON not a list": ("evals/val.json", '{"rows": 3}'),
        "JSON item not an object": ("evals/val.json", "[1, 2]"),
        "JSON syntax error": ("evals/val.json", "[{"),
        "unknown extension": ("evals/val.txt", "input target\n"),
    }
    cases = []
    for name, (rel, data) in files.items():
        if name == "JSONL input overlaps train":
            continue
        setups = [write(rel, data)]
        if rel != val:
            setups.append(set_key("tasks", "val", json.dumps(rel)))
        cases.append(Case(f"tasks {name}", EVAL_VAL, steps(*setups)))
    cases += [
        Case("tasks empty val file", EVAL_VAL, write(val, "")),
        Case("tasks val file missing", EVAL_VAL, remove(val)),
        Case("tasks val file is a directory", EVAL_VAL, make_dir(val)),
        Case(
            "tasks no task files configured",
            EVAL_VAL,
            write(CONFIG, f'[skill]\npath = "{SKILL}"\n'),
        ),
        Case("tasks two layouts", EVAL_VAL, set_key("tasks", "path", '"evals/train.jsonl"')),
        Case(
            "tasks bad split label",
            EVAL_VAL,
            steps(
                write(CONFIG, f'[skill]\npath = "{SKILL}"\n[tasks]\npath = "evals/all.jsonl"\n'),
                write("evals/all.jsonl", jsonl({"input": "q", "target": "x", "split": "holdout"})),
            ),
        ),
        Case(
            "tasks same input in train and val",
            EVAL_VAL,
            lambda root: (root / "evals/val.jsonl").write_text(
                (root / "evals/train.jsonl")
                .read_text()
                .splitlines()[0]
                .replace('"id": "', '"id": "v-')
                + "\n"
            ),
        ),
        Case(
            "tasks input_template missing field",
            EVAL_VAL,
            set_key("tasks", "input_template", '"{question}"'),
        ),
        Case(
            "tasks input_template bad format",
            EVAL_VAL,
            set_key("tasks", "input_template", '"{input"'),
        ),
        Case(
            "tasks --split train missing",
            ["eval", "--split", "train"],
            set_key("tasks", "train", '"evals/nope.jsonl"'),
        ),
    ]
    return cases


def skill_cases() -> list[Case]:
    broken = {
        "non-UTF-8 byte": b"---\nname: acme-returns\ndescription: d\n---\n# caf\xe9\n",
        "random bytes": bytes(RANDOM.randrange(256) for _ in range(400)),
        "empty": b"",
        "no frontmatter end": b"---\nname: acme-returns\n# Body\n",
        "frontmatter not YAML": b"---\nname: [unclosed\n---\n# Body\n",
        "unbalanced protected markers": b"---\nname: acme-returns\ndescription: d\n---\n"
        b"<!-- SLOW_UPDATE_START -->\nkeep\n",
    }
    cases = []
    for name, data in broken.items():
        cases.append(Case(f"skill {name}, validate", ["validate"], write(SKILL, data)))
        cases.append(Case(f"skill {name}, eval", EVAL_VAL, write(SKILL, data)))
        cases.append(Case(f"skill {name} committed, train", ["train"], committed(SKILL, data)))
    cases += [
        Case(
            "skill non-UTF-8 byte, diff", ["diff", "HEAD"], write(SKILL, broken["non-UTF-8 byte"])
        ),
        Case(
            "skill non-UTF-8 byte, check",
            ["check", "--base", "HEAD"],
            write(SKILL, broken["non-UTF-8 byte"]),
        ),
        Case(
            "skill non-UTF-8 byte committed, report",
            ["report"],
            committed(SKILL, broken["non-UTF-8 byte"]),
        ),
        Case(
            "skill non-UTF-8 byte committed, eval HEAD",
            ["eval", "HEAD", "--split", "val"],
            committed(SKILL, broken["non-UTF-8 byte"]),
        ),
        Case("skill missing, eval", EVAL_VAL, remove(SKILL)),
        Case("skill missing, validate", ["validate"], remove(SKILL)),
        Case("skill is a directory, eval", EVAL_VAL, make_dir(SKILL)),
        Case("skill is a directory, validate", ["validate"], make_dir(SKILL)),
        Case(
            "skill path outside the repo",
            EVAL_VAL,
            set_key("skill", "path", '"../../../../etc/passwd"'),
        ),
        Case(
            "skill path absolute",
            EVAL_VAL,
            set_key("skill", "path", '"/etc/passwd"'),
        ),
        Case(
            "skill path inside .git",
            EVAL_VAL,
            set_key("skill", "path", '".git/description"'),
        ),
    ]
    return cases


def cli_cases() -> list[Case]:
    args = [
        ["no-such-command"],
        ["train", "--no-such-option"],
        ["train", "--epochs", "0"],
        ["train", "--epochs", "x"],
        ["train", "--epochs", "5000"],
        ["train", "--batch-size", "-3"],
        ["train", "--workers", "100000"],
        ["train", "--lr", "0"],
        ["train", "--lr", "2", "--min-lr", "3"],
        ["train", "--budget-usd", "-1"],
        ["train", "--budget-usd", "nan"],
        ["train", "--budget-usd", "inf"],
        ["train", "--gate-confidence", "1.5"],
        ["train", "--lr-schedule", "fast"],
        ["eval", "--split", "nope"],
        ["eval", "no-such-rev"],
        ["eval", "--workers", "0"],
        ["log", "-n", "0"],
        ["log", "-n", "x"],
        ["log", "--run", "no-such-run"],
        ["show"],
        ["diff", "no-such-rev"],
        ["check", "--base", "no-such-rev"],
        ["check"],
        ["validate", "--staged", "x.md"],
        ["validate", "no/such/file.md"],
        ["init", "--skill", "no/such/SKILL.md"],
        ["demo", "--dir", "."],
        ["log", "-n", "99999999999999999999"],
        ["runs", "-n", "99999999999999999999"],
        ["report", "--html", "no/such/dir/run.html"],
        ["report", "--html", "/proc/skillvc-run.html"],
        ["report", "--html", "/dev/null"],
        ["check", "--base", "HEAD", "--head=--upload-pack=touch x"],
        ["check", "--base", "HEAD", "--split", "test", "HEAD~99"],
        ["validate", "--staged", "\udcff"],
    ]
    return [Case(f"cli {' '.join(a)}", a) for a in args]


def show_cases() -> list[Case]:
    idents = [
        "run-x/99999999999999999999",
        "99999999999999999999",
        "9" * 5000,
        "run-x/" + "9" * 5000,
        "0",
        "-1",
        "",
        "   ",
        "%",
        "____",
        "%%%%",
        "²",
        "run-x/1",
        "../../etc/passwd",
        "HEAD~999",
        "\x00abc",
        "deadbeefdeadbeef",
    ]
    return [Case(f"show {i[:40]!r}", ["show", i]) for i in idents]


def apply_cases() -> list[Case]:
    patches = {
        "random bytes": bytes(RANDOM.randrange(256) for _ in range(600)),
        "empty": b"",
        "not a diff": b"hello world\n",
        "non-UTF-8 diff": b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-\xff\n+\xfe\n",
        "hunk far off": (
            f"--- a/{SKILL}\n+++ b/{SKILL}\n@@ -900,1 +900,1 @@\n"
            "-Keep the reply short and friendly.\n+Keep it short.\n"
        ).encode(),
        "path to /etc/passwd": (
            b"--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-root\n+toor\n"
        ),
        "dot segments to /etc/passwd": (
            b"--- a/./skills/../../etc/passwd\n+++ b/./skills/../../etc/passwd\n"
            b"@@ -1 +1 @@\n-root\n+toor\n"
        ),
        ".Git/config": b"--- a/.Git/config\n+++ b/.Git/config\n@@ -1 +1 @@\n-[core]\n+[x]\n",
        ".gi\\u200ct/config (HFS+ reads .git)": (
            "--- a/.gi\u200ct/config\n+++ b/.gi\u200ct/config\n@@ -1 +1 @@\n-[core]\n+[x]\n"
        ).encode(),
        "backslashes": (
            b"--- a/skills\\..\\..\\etc\\passwd\n+++ b/skills\\..\\..\\etc\\passwd\n"
            b"@@ -1 +1 @@\n-root\n+toor\n"
        ),
        "another file": (
            b"--- a/skills/pdf/SKILL.md\n+++ b/skills/pdf/SKILL.md\n@@ -1,1 +1,1 @@\n"
            b"-# Acme returns support\n+# PDF\n"
        ),
    }
    cases = [Case(f"apply {name}", ["apply", "-"], stdin=data) for name, data in patches.items()]
    cases.append(Case("apply missing file", ["apply", "no-such.diff"]))
    return cases


PACKAGE = "skills/acme-returns"
FORMS = f"{PACKAGE}/references/forms.md"
FORMS_LINK = "\nSpecial cases: [the forms](references/forms.md).\n"


def as_package(root: Path) -> None:
    """Make the seed's skill a committed package: SKILL.md linking references/forms.md."""
    set_key("skill", "path", f'"{PACKAGE}"')(root)
    append(SKILL, FORMS_LINK.encode())(root)
    write(FORMS, "# Forms\n\n- Billing errors go to the billing team.\n")(root)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the skill as a package")


def package(*setups: Setup) -> Setup:
    return steps(as_package, *setups)


def symlink(rel: str, target: str) -> Setup:
    def setup(root: Path) -> None:
        path = root / rel
        path.unlink(missing_ok=True)
        path.symlink_to(target)

    return setup


def package_cases() -> list[Case]:
    """Skill packages (issue 14): broken links, bad reference files, symbolic links, uncommitted
    package files, bad package settings, patches and blames the package rules refuse."""
    broken_link = append(SKILL, b"\nSee [rates](references/rates.md).\n")
    escaping = append(SKILL, b"\nSee [passwords](../../../etc/passwd).\n")
    markers = b"# Forms\n<!-- skillvc:protected legal -->\nkeep\n"
    cases: list[Case] = []
    for name, setup in (
        ("broken link", broken_link),
        ("link leaving the package", escaping),
        ("non-UTF-8 reference", write(FORMS, b"# caf\xe9\n")),
        ("unbalanced markers in a reference", write(FORMS, markers)),
        ("reference is a symlink to the val answers", symlink(FORMS, "../../../evals/val.jsonl")),
    ):
        for command in (["validate"], EVAL_VAL, ["check", "--base", "HEAD"]):
            cases.append(Case(f"package {name}, {command[0]}", command, package(setup)))
    cases += [
        Case(
            "package broken link committed, train",
            ["train"],
            package(broken_link, lambda root: git(root, "commit", "-qam", "break the link")),
        ),
        Case(
            "package non-UTF-8 reference committed, train",
            ["train"],
            package(committed(FORMS, b"# caf\xe9\n")),
        ),
        Case(
            "package reference with uncommitted changes, train",
            ["train"],
            package(append(FORMS, b"- uncommitted\n")),
        ),
        Case(
            "package untracked file in the directory, train",
            ["train"],
            package(write(f"{PACKAGE}/references/draft.md", "draft\n")),
        ),
        Case("package include = 42", EVAL_VAL, package(set_key("skill", "include", "42"))),
        Case(
            "package reference_bytes = -1",
            EVAL_VAL,
            package(set_key("skill", "reference_bytes", "-1")),
        ),
        Case(
            "package optimizer_chars = nan",
            EVAL_VAL,
            package(set_key("skill", "optimizer_chars", "nan")),
        ),
        Case("package blame of a file outside it", ["blame", "evals/val.jsonl"], package()),
        Case("package blame of a missing reference", ["blame", "references/x.md"], package()),
    ]
    patches = {
        "deleting a reference": (
            f"--- a/{FORMS}\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-# Forms\n-\n"
            "-- Billing errors go to the billing team.\n"
        ),
        "renaming a reference": (
            f"diff --git a/{FORMS} b/{PACKAGE}/references/f2.md\nsimilarity index 100%\n"
            f"rename from {FORMS}\nrename to {PACKAGE}/references/f2.md\n"
        ),
        "creating an unlinked file": (
            f"--- /dev/null\n+++ b/{PACKAGE}/references/new.md\n@@ -0,0 +1 @@\n+# New\n"
        ),
        "adding a broken link": (
            f"--- a/{FORMS}\n+++ b/{FORMS}\n@@ -3 +3,2 @@\n"
            "-- Billing errors go to the billing team.\n+- Billing errors go to the billing team.\n"
            "+- See [refunds](refunds.md).\n"
        ),
        "touching the task files too": (
            f"--- a/{FORMS}\n+++ b/{FORMS}\n@@ -1 +1 @@\n-# Forms\n+# Forms!\n"
            "--- a/evals/val.jsonl\n+++ b/evals/val.jsonl\n@@ -1 +1 @@\n-x\n+y\n"
        ),
    }
    cases += [
        Case(f"package apply {name}", ["apply", "-"], package(), stdin=data.encode())
        for name, data in patches.items()
    ]
    return cases


def repo_state_cases() -> list[Case]:
    return [
        Case(
            "repo .git/index.lock present",
            ["train"],
            write(".git/index.lock", b""),
        ),
        Case("repo detached HEAD", ["train"], detached_head),
        Case("repo merge in progress", ["train"], merge_in_progress),
        Case("repo not a git repo", ["log"], lambda root: shutil.rmtree(root / ".git")),
        Case("repo dirty skill file, train", ["train"], append(SKILL, b"\n- uncommitted rule\n")),
    ]


# -- issue 23: odd files, a damaged log, misleading messages, git states ---------------------


def fifo(rel: str) -> Setup:
    """Replace ``rel`` with a named pipe nobody writes to (reading it would block forever)."""

    def setup(root: Path) -> None:
        path = root / rel
        path.unlink(missing_ok=True)
        os.mkfifo(path)

    return setup


def unix_socket(rel: str) -> Setup:
    def setup(root: Path) -> None:
        path = root / rel
        path.unlink(missing_ok=True)
        # Bound through a short relative name: socket paths are limited to ~100 bytes.
        with chdir(path.parent):
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(path.name)
            sock.close()

    return setup


def link_to(rel: str, target: str) -> Setup:
    def setup(root: Path) -> None:
        path = root / rel
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.unlink(missing_ok=True)
        path.symlink_to(target)

    return setup


def foreign_sqlite(root: Path) -> None:
    """Another application's SQLite file where the log belongs."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{root / DB}{suffix}").unlink(missing_ok=True)
    conn = sqlite3.connect(root / DB)
    conn.execute("CREATE TABLE events (when_ TEXT, what TEXT)")
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()


def damaged_page(root: Path) -> None:
    """Overwrite one page in the middle of the log with random bytes."""
    conn = sqlite3.connect(root / DB)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    path = root / DB
    data = bytearray(path.read_bytes())
    size = 4096
    page = len(data) // size // 2
    data[page * size : (page + 1) * size] = random.Random(23).randbytes(size)
    path.write_bytes(bytes(data))


def non_json_payload(root: Path) -> None:
    """Hand-edit one event's payload into text that is not JSON (past the triggers)."""
    conn = sqlite3.connect(root / DB)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("UPDATE events SET payload = '{not json' WHERE id = 1")
    conn.commit()
    conn.close()


def git_config(*pairs: tuple[str, str]) -> Setup:
    def setup(root: Path) -> None:
        for key, value in pairs:
            git(root, "config", key, value)

    return setup


def unrelated_branch(root: Path) -> None:
    """An orphan branch 'other' sharing no history with main."""
    git(root, "checkout", "-q", "--orphan", "other")
    git(root, "commit", "-q", "-m", "unrelated")
    git(root, "checkout", "-q", "-f", "main")


def encoding_attributes(root: Path) -> None:
    """A commit whose .gitattributes re-encodes the skill on checkout (a PR's trick); the
    working tree then holds it as a fresh clone would."""
    (root / ".gitattributes").write_text(f"{SKILL} working-tree-encoding=UTF-16LE\n")
    git(root, "add", ".gitattributes")
    git(root, "commit", "-q", "-m", "attributes")
    (root / SKILL).unlink()
    git(root, "checkout", "--", SKILL)


def hardening_cases() -> list[Case]:
    val = "evals/val.jsonl"
    rows = {
        "lone surrogate \\ud800": '{"id": "x", "input": "q \\ud800", "target": "refund"}',
        "lone surrogate in a key": '{"id": "x", "input": "q", "target": "r", "\\udfff": 1}',
        "NaN target": '{"id": "x", "input": "q", "target": NaN}',
        "Infinity id": '{"id": Infinity, "input": "q", "target": "refund"}',
        "-Infinity in metadata": '{"input": "q", "target": "r", "metadata": {"w": -Infinity}}',
    }
    cases = [
        Case(f"hard tasks {name}", EVAL_VAL, append(val, (row + "\n").encode()))
        for name, row in rows.items()
    ]
    cases += [
        Case(
            "hard tasks JSON NaN target",
            EVAL_VAL,
            steps(
                write("evals/val.json", '[{"input": "q", "target": NaN}]'),
                set_key("tasks", "val", '"evals/val.json"'),
            ),
        ),
        Case("hard tasks UTF-16 val file", EVAL_VAL, write(val, GOOD_ROW.encode("utf-16"))),
        Case(
            "hard tasks UTF-8 BOM val file",
            EVAL_VAL,
            lambda root: (root / val).write_bytes(b"\xef\xbb\xbf" + (root / val).read_bytes()),
            valid=True,
        ),
        # Files that are not regular files: each would block or read forever.
        Case("hard val file is a pipe", EVAL_VAL, fifo(val)),
        Case("hard val file is /dev/zero", EVAL_VAL, link_to(val, "/dev/zero")),
        Case("hard val file is /dev/null", EVAL_VAL, link_to(val, "/dev/null")),
        Case("hard val file is a socket", EVAL_VAL, unix_socket(val)),
        Case("hard skillvc.toml is a pipe, log", ["log"], fifo(CONFIG)),
        Case("hard skillvc.toml is a pipe, eval", EVAL_VAL, fifo(CONFIG)),
        Case("hard skillvc.toml is /dev/zero", ["runs"], link_to(CONFIG, "/dev/zero")),
        Case("hard skillvc.toml is a socket", ["log"], unix_socket(CONFIG)),
        Case(
            "hard skillvc.toml is UTF-16",
            EVAL_VAL,
            lambda root: (root / CONFIG).write_bytes((root / CONFIG).read_text().encode("utf-16")),
        ),
        Case(
            "hard skillvc.toml with a UTF-8 BOM",
            EVAL_VAL,
            lambda root: (root / CONFIG).write_bytes(
                b"\xef\xbb\xbf" + (root / CONFIG).read_bytes()
            ),
            valid=True,
        ),
        Case("hard skill is a pipe, eval", EVAL_VAL, fifo(SKILL)),
        Case("hard skill is a pipe, validate", ["validate"], fifo(SKILL)),
        Case("hard skill is a pipe, diff", ["diff", "HEAD"], fifo(SKILL)),
        Case("hard skill is /dev/zero, eval", EVAL_VAL, link_to(SKILL, "/dev/zero")),
        Case("hard skill is a pipe, doctor", ["doctor"], fifo(SKILL)),
        Case("hard package reference is a pipe", ["validate"], package(fifo(FORMS))),
        Case(
            "hard json scorer schema is a pipe",
            EVAL_VAL,
            steps(
                fifo("schema.json"),
                set_key("tasks", "scorer", '"json"'),
                set_key("tasks", "scorer_options", '{ schema = "schema.json" }'),
            ),
        ),
        # The event log.
        Case("hard events.db is another app's SQLite, log", ["log"], foreign_sqlite),
        Case("hard events.db is another app's SQLite, train", ["train"], foreign_sqlite),
        Case("hard events.db links to /dev/null, log", ["log"], link_to(DB, "/dev/null")),
        Case("hard events.db links to /dev/null, eval", EVAL_VAL, link_to(DB, "/dev/null")),
        # A reader that never reaches the damaged page has nothing wrong to report: exit 0 is
        # right; reaching it must be a "damaged" error (a writer checks before writing).
        Case("hard events.db damaged page, runs", ["runs"], damaged_page, valid=True),
        Case(
            "hard events.db damaged page, log --json", ["log", "--json"], damaged_page, valid=True
        ),
        Case("hard events.db damaged page, eval", EVAL_VAL, damaged_page),
        Case("hard events.db damaged page, train --new", ["train", "--new"], damaged_page),
        Case("hard events.db damaged page, fsck", ["fsck"], damaged_page),
        Case(
            "hard events.db damaged page, fsck --repair",
            ["fsck", "--repair"],
            damaged_page,
            valid=True,
        ),
        # Readers that list nothing from the damaged event are right to exit 0; show of it and
        # fsck must say "damaged".
        *(
            Case(f"hard non-JSON payload, {' '.join(args)}", args, non_json_payload, valid=True)
            for args in (["log"], ["runs"], EVAL_VAL)
        ),
        *(
            Case(f"hard non-JSON payload, {' '.join(args)}", args, non_json_payload)
            for args in (["show", "1"], ["report"], ["fsck"])
        ),
        Case(
            "hard non-JSON payload, fsck --repair",
            ["fsck", "--repair"],
            non_json_payload,
            valid=True,
        ),
        Case("hard train.lock is a directory", ["train"], make_dir(".skillvc/train.lock")),
        # Messages.
        Case(
            "hard 5 MB config value",
            EVAL_VAL,
            set_key("target", "model", json.dumps("x" * 5_000_000)),
        ),
        Case(
            "hard 900 KB config value",
            EVAL_VAL,
            set_key("target", "model", json.dumps("sim:" + "x" * 900_000)),
        ),
        Case(
            "hard newline in a skill table name",
            EVAL_VAL,
            write(
                CONFIG,
                f'[skills."a\\nError: fake"]\npath = "{SKILL}"\n'
                '[skills.b]\npath = "skills/b/SKILL.md"\n',
            ),
        ),
        *(
            Case(
                f"hard newline in the skill path, {args[0]}",
                args,
                set_key("skill", "path", '"skills/acme-returns/SKILL\\n.md"'),
            )
            for args in (["train"], ["check", "--base", "HEAD"], EVAL_VAL)
        ),
        Case(
            "hard newline in the committed skill path, check",
            ["check", "--base", "HEAD"],
            steps(
                set_key("skill", "path", '"skills/acme-returns/SKILL\\n.md"'),
                lambda root: git(root, "commit", "-qam", "newline in the path"),
            ),
        ),
        # Git states.
        Case("hard refs/heads/main.lock held", ["train"], write(".git/refs/heads/main.lock", b"")),
        Case("hard HEAD.lock held", ["train"], write(".git/HEAD.lock", b"")),
        Case(
            "hard commit.gpgsign without a working signer",
            ["train"],
            git_config(("commit.gpgsign", "true"), ("gpg.program", "false")),
        ),
        Case(
            "hard gpg.format ssh without a key",
            ["train"],
            git_config(
                ("commit.gpgsign", "true"),
                ("gpg.format", "ssh"),
                ("user.signingkey", "/nonexistent/key.pub"),
            ),
        ),
        Case(
            "hard check --base an unrelated branch", ["check", "--base", "other"], unrelated_branch
        ),
        Case(
            "hard check with a working-tree-encoding attribute",
            ["check", "--base", "HEAD~1"],
            encoding_attributes,
            valid=True,
        ),
    ]
    return cases


def all_cases() -> list[Case]:
    return [
        *config_cases(),
        *toml_cases(),
        *state_cases(),
        *task_cases(),
        *skill_cases(),
        *cli_cases(),
        *show_cases(),
        *apply_cases(),
        *package_cases(),
        *repo_state_cases(),
        *hardening_cases(),
    ]


# -- running and judging ---------------------------------------------------------------------


def make_seed(directory: Path) -> Path:
    """The demo's seed repo with one evaluation in its log (so the log has something to lose)."""
    from skillvc.cli import cli
    from skillvc.training.demo import create_demo_repo

    root = directory / "seed"
    create_demo_repo(root)
    with chdir(root):
        result = CliRunner().invoke(cli, EVAL_VAL)
    if result.exit_code != 0:
        raise SystemExit(f"seeding failed: {result.output}")
    # Every case copies the seed and removes the copy after (most of a case's time): its
    # objects in one pack and no sample hooks make that about 40 files and directories fewer.
    git(root, "repack", "-a", "-d", "-n", "-q")
    for sample in (root / ".git" / "hooks").glob("*.sample"):
        sample.unlink()
    return root


class chdir:  # contextlib.chdir is 3.11+
    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        self.old = os.getcwd()
        os.chdir(self.path)

    def __exit__(self, *exc: object) -> None:
        os.chdir(self.old)


def snapshot(root: Path) -> dict[str, object]:
    state: dict[str, object] = {}
    for rel in (SKILL, CONFIG):
        path = root / rel
        state[rel] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    head = root / ".git" / "HEAD"
    state["HEAD"] = head.read_text() if head.is_file() else None
    if (root / ".git").is_dir():
        refs = subprocess.run(
            ["git", "show-ref", "--head"], cwd=root, capture_output=True, text=True
        )
        state["refs"] = refs.stdout
    state["db"] = db_state(root / DB)
    return state


def db_state(path: Path) -> tuple[str, int] | None:
    """(integrity check result, event count), or None when the file is not a readable log."""
    if not path.is_file() or path.is_symlink():
        return None
    try:
        with open(path, "rb") as fh:
            if fh.read(16) != b"SQLite format 3\x00":
                return None
        # Opening a WAL log needs its -shm file; "immutable" (safe when there is no -wal to
        # read) keeps this look from creating one, which would change what the case tests.
        wal = Path(f"{path}-wal").exists()
        conn = sqlite3.connect(f"file:{path}?mode=ro{'' if wal else '&immutable=1'}", uri=True)
        try:
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            count = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        finally:
            conn.close()
        return str(check), int(count)
    except sqlite3.Error:
        return None


def losses(before: dict[str, object], after: dict[str, object]) -> list[str]:
    lost = [
        f"{key} changed"
        for key in (SKILL, CONFIG, "HEAD", "refs")
        if before.get(key) != after.get(key)
    ]
    db_before, db_after = before["db"], after["db"]
    if isinstance(db_before, tuple) and db_before[0] == "ok":
        if not isinstance(db_after, tuple):
            lost.append("events.db became unreadable")
        elif db_after[0] != "ok":
            lost.append(f"events.db integrity: {db_after[0]}")
        elif db_after[1] < db_before[1]:
            lost.append(f"events.db lost {db_before[1] - db_after[1]} events")
    return lost


def classify(exit_code: int, stderr: str, escaped: BaseException | None) -> str:
    if escaped is not None or exit_code == CRASH_EXIT_CODE or "Traceback" in stderr:
        return "crash"
    if exit_code == 0:
        return "accepted"
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error: ")]
    hinted = any(line.startswith("Hint: ") for line in lines)
    if exit_code == 2:  # click's usage errors point at --help instead of a hint
        hinted = hinted or any(line.startswith("Try '") for line in lines)
    if any(len(line) > ERROR_LINE_MAX for line in errors):
        return "unclear"  # quotes a huge value whole
    if exit_code in DOCUMENTED_EXIT_CODES and len(errors) == 1 and hinted:
        return "clean"
    return "unclear"


def run_case(case: Case, seed: Path, workdir: Path) -> Outcome:
    root = workdir / "repo"
    if root.exists():
        writable_again(root)
        shutil.rmtree(root)
    shutil.copytree(seed, root, symlinks=True)
    case.setup(root)
    before = snapshot(root)
    if case.process:
        exit_code, stderr, escaped = run_process(case, root)
    else:
        exit_code, stderr, escaped = run_in_process(case, root)
    writable_again(root)
    after = snapshot(root)
    if isinstance(escaped, CaseTimeout):
        kind = "hang"
    else:
        kind = classify(exit_code, stderr, escaped)
        if case.valid and kind == "accepted":
            kind = "clean"
    return Outcome(case, exit_code, kind, losses(before, after), stderr)


class CaseTimeout(BaseException):
    """The case ran past its timeout (a BaseException: skillvc's last-resort handler, which
    turns an Exception into exit 70, must not catch it)."""


def _on_alarm(signum: int, frame: object) -> None:
    raise CaseTimeout()


def run_in_process(case: Case, root: Path) -> tuple[int, str, BaseException | None]:
    from skillvc.cli import cli

    # SIGALRM interrupts even a blocking open() of a pipe (the handler's exception ends the
    # retried system call), so an in-process hang is caught like a process's.
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, case.timeout_s)
    try:
        with chdir(root):
            result = CliRunner().invoke(
                cli, case.args, input=case.stdin, env={"SKILLVC_RAISE_ERRORS": None}
            )
    except CaseTimeout as exc:
        return 124, "", exc
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    escaped = result.exception
    if isinstance(escaped, SystemExit):
        escaped = None
    return result.exit_code, result.stderr, escaped


def run_process(case: Case, root: Path) -> tuple[int, str, BaseException | None]:
    command = [sys.executable, "-m", "skillvc", *case.args]
    if case.unprivileged and os.geteuid() == 0:
        # root ignores file modes; without these capabilities it is held to them like a user.
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", *command]
    env = {k: v for k, v in os.environ.items() if k != "SKILLVC_RAISE_ERRORS"}
    with open(case.stdout_path or os.devnull, "wb") as out:
        try:
            done = subprocess.run(
                command,
                cwd=root,
                input=case.stdin or b"",
                stdout=out,
                stderr=subprocess.PIPE,
                env=env,
                timeout=case.timeout_s,
            )
        except subprocess.TimeoutExpired as exc:
            return 124, (exc.stderr or b"").decode("utf-8", "replace"), CaseTimeout()
    return done.returncode, done.stderr.decode("utf-8", "replace"), None


def run_campaign(
    cases: Sequence[Case], progress: Callable[[Outcome], None] | None = None
) -> list[Outcome]:
    with tempfile.TemporaryDirectory(prefix="skillvc-malformed-") as tmp:
        base = Path(tmp)
        seed = make_seed(base)
        outcomes = []
        for case in cases:
            outcome = run_case(case, seed, base)
            outcomes.append(outcome)
            if progress is not None:
                progress(outcome)
        writable_again(base / "repo")
    return outcomes


def isolate_git() -> None:
    """Commits made by a case need an identity; the user's git config must not matter."""
    os.environ.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@example.invalid",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@example.invalid",
    )


def summary(outcomes: Sequence[Outcome]) -> dict[str, int]:
    kinds = [o.kind for o in outcomes]
    return {
        "cases": len(outcomes),
        "clean errors": kinds.count("clean"),
        "unclear errors": kinds.count("unclear"),
        "accepted (exit 0)": kinds.count("accepted"),
        "crashes": kinds.count("crash"),
        "hangs": kinds.count("hang"),
        "data lost": sum(1 for o in outcomes if o.data_lost),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="only", help="Run only cases whose name contains this.")
    parser.add_argument("-v", "--verbose", action="store_true", help="Print every case.")
    args = parser.parse_args(argv)
    isolate_git()
    cases = [c for c in all_cases() if not args.only or args.only in c.name]
    start = time.perf_counter()

    def show(o: Outcome) -> None:
        if args.verbose:
            first = next((ln for ln in o.stderr.splitlines() if ln.startswith("Error")), "")
            print(f"{o.kind:8} {o.exit_code:3}  {o.case.name}  {first[:110]}", flush=True)

    outcomes = run_campaign(cases, show)
    elapsed = time.perf_counter() - start
    for name, count in summary(outcomes).items():
        print(f"{name:18} {count}")
    print(f"{'seconds':18} {elapsed:.1f}")
    bad = [o for o in outcomes if not o.ok]
    if bad:
        print("\nNot clean:")
    for o in bad:
        lost = f"  DATA LOST: {', '.join(o.data_lost)}" if o.data_lost else ""
        last = o.stderr.strip().splitlines()[-1:] or [""]
        print(f"  {o.kind:8} exit {o.exit_code:3}  {o.case.name}{lost}\n      {last[0][:150]}")
    return 1 if any(o.kind in ("crash", "hang") or o.data_lost for o in bad) else 0


if __name__ == "__main__":
    sys.exit(main())
