"""`skillvc datasette`: the real Datasette serving the log read-only on loopback."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import copy_repo

from skillvc.cli import cli
from skillvc.integrations.datasette_app import QUERIES
from skillvc.review.runs import usage_by_phase
from skillvc.training.loop import RunSummary
from skillvc.workspace.workspace import open_workspace


@pytest.fixture(scope="module")
def trained(
    demo_trained: tuple[Path, RunSummary], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, RunSummary]:
    path, summary = demo_trained
    return copy_repo(path, tmp_path_factory.mktemp("datasette") / "repo"), summary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_datasette_answers_canned_queries_over_loopback(trained, tmp_path: Path) -> None:
    repo, summary = trained
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "skillvc", "datasette", "--port", str(port)],
            cwd=repo,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 90  # a wait for start-up, not a speed assertion
        while True:
            assert server.poll() is None, log.read_text()
            try:
                databases = get_json(f"{base}/-/databases.json")
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        (db,) = databases
        assert db["name"] == "events" and db["is_mutable"] is False  # immutable: read-only

        with open_workspace(repo).store() as store:
            expected = store.query(QUERIES["rejected_edits_last_run"]["sql"])
            phases = usage_by_phase(store, summary.run_id)
        rows = get_json(f"{base}/events/rejected_edits_last_run.json?_shape=array")
        assert rows == expected and rows
        assert any(r["val_after"] is None and r["val_after_bound"] is not None for r in rows)

        per_step = get_json(f"{base}/events/cost_per_step.json?_shape=array")
        assert [(r["phase"], r["step"], r["epoch"], r["calls"], r["tokens"]) for r in per_step] == [
            (p.phase, p.step, p.epoch, p.usage.calls, p.usage.tokens) for p in phases
        ]
        flips = get_json(f"{base}/events/flipped_items_per_gate.json?_shape=array")
        assert {r["way"] for r in flips} == {"up", "down"}

        meta = get_json(f"{base}/-/metadata.json")
        gates = meta["databases"]["events"]["tables"]["gates"]
        assert "NULL when the gate stopped early" in gates["columns"]["val_after"]
        assert "127.0.0.1" in log.read_text()
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(20)


def test_datasette_without_the_extra_says_how_to_install_it(
    trained, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(trained[0])
    monkeypatch.setitem(sys.modules, "datasette", None)  # makes the import fail
    result = CliRunner().invoke(cli, ["datasette"])
    assert result.exit_code == 1
    assert result.output == (
        "Error: Datasette is not installed.\n"
        "Hint: Install the extra: pip install 'skillvc[datasette]'.\n"
    )
