"""Fast start: a command answered entirely from the event log imports no model SDK."""

# The imported ``loopback`` fixture is named by test parameters, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from loopback import LoopbackServer, loopback  # noqa: F401 - the fixture
from test_eval import _loopback_target, format_repo, run_json

# Runs the CLI in this interpreter, then says which SDKs it imported.
PROBE = (
    "import sys\n"
    "from skillvc.cli import cli\n"
    "try:\n"
    "    cli(sys.argv[1:], prog_name='skillvc')\n"
    "except SystemExit as exc:\n"
    "    assert not exc.code, exc.code\n"
    "print('sdks:', 'openai' in sys.modules, 'anthropic' in sys.modules)\n"
)


def run_probe(root: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()[-1]


def test_eval_answered_from_the_log_imports_no_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    _loopback_target(loopback, monkeypatch)
    root = format_repo(tmp_path / "repo", "promptfoo", "openai:loopback-sim")
    first = run_json(root, monkeypatch, "eval", "--split", "val")
    assert first["fresh_calls"] == 10  # now every answer is in the log
    requests = len(loopback.requests)

    assert run_probe(root, "eval", "--split", "val", "-q") == "sdks: False False"
    assert run_probe(root, "eval", "--split", "val", "--compare", "HEAD", "-q") == (
        "sdks: False False"
    )
    assert len(loopback.requests) == requests  # and no call went out


def test_a_call_that_must_go_out_still_reaches_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    _loopback_target(loopback, monkeypatch)
    root = format_repo(tmp_path / "repo", "promptfoo", "openai:loopback-sim")
    monkeypatch.setenv("OPENAI_BASE_URL", loopback.url + "/v1")
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "eval", "--split", "test", "-q"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "sdks: True False"
    assert len(loopback.requests) > 0


def test_the_command_collects_no_garbage_while_it_starts() -> None:
    probe = (
        "import gc, sys, time\n"
        "import skillvc.__main__ as entry\n"
        "entry.STARTUP_S = 2.0\n"
        "sys.argv = ['skillvc', '--version']\n"
        "try:\n"
        "    entry.main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('starting', gc.isenabled())\n"
        "time.sleep(2.5)\n"
        "print('started', gc.isenabled())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.splitlines()[-2:] == ["starting False", "started True"]
    assert "skillvc.__main__:main" in (Path(__file__).parents[1] / "pyproject.toml").read_text()
