"""API keys never leave the environment: not into the event log, git, or any command's output.

One scenario drives the real CLI (training in subprocesses, so stdout and stderr are the
process's own; the read commands and ``doctor`` in this process, where they print the same) with
distinctive fake keys: a training run whose failing calls answer with bodies that echo the key
back (a 400 and a retried 500 on the target, a 401 on the optimizer that stops the run), the
resumed run, then the read commands and ``skillvc doctor`` (also with a key the server refuses).
The optimizer's key sits in a variable named by ``api_key_env`` and is not shaped like a key,
so only redaction by value can hide it.
"""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import loopback as lb
import pytest
from click.testing import CliRunner
from conftest import git
from helpers import first_rows, skillvc_process
from secret_forms import assert_nowhere

from skillvc.cli import cli as skillvc_cli
from skillvc.training.demo import create_demo_repo

SKILL = "skills/acme-returns/SKILL.md"
OPENAI_KEY = "sk-test-SECRET-4f9a7c1d2e8b"
TEAM_TOKEN = "team-SECRET-8b2e6f0a9d13"  # no "sk-" shape: redaction by value must catch it
UNUSED_ANTHROPIC_KEY = "sk-ant-test-SECRET-3c5d7e9f"  # set, never sent: must not be printed
SECRETS = (OPENAI_KEY, TEAM_TOKEN, UNUSED_ANTHROPIC_KEY)
ROOT = Path(__file__).resolve().parent.parent


cli = skillvc_process  # a skillvc command as its own process


class Scenario:
    """The loopback server's script: key-echoing failures first, then the simulator."""

    def __init__(self) -> None:
        self.simulate = lb.simulator_responder()
        self.refuse_optimizer = True
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str | lb.Behaviour:
        if lb.is_optimizer_prompt(lb.chat_messages(body)):
            with self.lock:
                refuse, self.refuse_optimizer = self.refuse_optimizer, False
            if refuse:  # {key} is replaced by the key the request carried
                return lb.Behaviour(kind="status", status=401, message="Incorrect API key: {key}")
        return self.simulate(body)


@pytest.fixture
def repo(tmp_path: Path, loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    create_demo_repo(root)
    (root / "skillvc.toml").write_text(
        f'[skill]\npath = "{SKILL}"\n\n'
        '[tasks]\ntrain = "evals/train.jsonl"\nval = "evals/val.jsonl"\n'
        'test = "evals/test.jsonl"\n\n'
        '[target]\nmodel = "openai:gpt-4o-mini"\n\n'
        '[optimizer]\nmodel = "anthropic:claude-test-1"\napi_key_env = "TEAM_ANTHROPIC_TOKEN"\n'
        f'base_url = "{loopback.url}"\n\n'
        "[train]\nepochs = 1\nbatch_size = 20\nminibatch_size = 5\nworkers = 4\nseed = 7\n",
        encoding="utf-8",
    )
    git(root, "commit", "-qam", "Train against the loopback server")
    first_rows(root, 20, 15, 10)  # one step: every path the scenario checks, fewer calls
    monkeypatch.setenv("OPENAI_BASE_URL", loopback.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("TEAM_ANTHROPIC_TOKEN", TEAM_TOKEN)
    monkeypatch.setenv("ANTHROPIC_API_KEY", UNUSED_ANTHROPIC_KEY)
    return root


def test_keys_appear_in_no_log_commit_or_output(
    repo: Path, loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    scenario = Scenario()
    loopback.responder = scenario
    echo = "bad request with key {key} (Authorization: Bearer {key})"
    # The first requests are the target's baseline calls: two plain failures (recorded, not
    # retried) and one 500 that is retried; all three bodies echo the key back.
    loopback.enqueue(
        lb.Behaviour(kind="status", status=400, message=echo),
        lb.Behaviour(kind="status", status=400, message=echo),
        lb.Behaviour(kind="status", status=500, message=echo, headers={"Retry-After": "0"}),
    )
    db = repo / ".skillvc" / "events.db"
    # Held open for the whole scenario, so the subprocesses' closes cannot checkpoint the
    # write-ahead log away before we read it.
    watcher = sqlite3.connect(db)
    watcher.execute("SELECT COUNT(*) FROM events").fetchone()
    outputs: list[str] = []

    def run(*args: str, expect: int = 0, process: bool = False) -> Any:
        """A command as its own process, or (the read commands) in this one: same output."""
        if process:
            done = cli(repo, *args)
            code, stdout, stderr = done.returncode, done.stdout, done.stderr
        else:
            result = CliRunner().invoke(skillvc_cli, list(args))
            code, stdout, stderr = result.exit_code, result.stdout, result.stderr
        outputs.append(f"$ skillvc {' '.join(args)}\n{stdout}\n{stderr}")
        assert code == expect, stdout + stderr
        return SimpleNamespace(stdout=stdout, stderr=stderr)

    try:
        stopped = run("train", expect=6, process=True)
        assert "refused the key in TEAM_ANTHROPIC_TOKEN" in stopped.stderr
        run("train", process=True)
        # The write-ahead log as the processes left it (an in-process command's close may
        # checkpoint it away: SQLite's locks cannot see a connection of the same process).
        wal = db.with_name("events.db-wal")
        assert wal.exists() and wal.stat().st_size > 0
        stored = b"".join(p.read_bytes() for p in sorted(db.parent.iterdir()) if p.is_file())
        run("runs")
        run("runs", "--json")
        run("log", "--json")
        run("log", "-p")
        ids = [
            str(r[0])
            for r in watcher.execute(
                "SELECT MIN(id) FROM events WHERE type = 'model.call' "
                "UNION ALL SELECT id FROM events WHERE type = 'model.error'"
            )
        ]
        assert len(ids) == 1 + 3, "one call, the two 400s and the 401 (the 500 was retried)"
        for ident in ids:
            run("show", ident)
            run("show", "--json", ident)
        run("doctor")
        run("doctor", "--json")
        loopback.enqueue(lb.Behaviour(kind="status", status=401, message="Bad key: {key}"))
        refused = run("doctor", expect=6)
        assert "FAIL  target reachable: openai:gpt-4o-mini refused the key" in refused.stdout

        # The keys did go over the wire and come back in error bodies: the test can fail.
        sent = repr([r.headers for r in loopback.requests])
        assert OPENAI_KEY in sent and TEAM_TOKEN in sent and UNUSED_ANTHROPIC_KEY not in sent
        errors = [
            json.loads(p)["error"]
            for (p,) in watcher.execute("SELECT payload FROM events WHERE type = 'model.error'")
        ]
        assert all("[redacted]" in e for e in errors), errors

    finally:
        watcher.close()
    stored += db.read_bytes()  # after the last close, checkpointed into the database file
    history = git(repo, "log", "-p", "--all", "--format=fuller%n%B")
    refs = git(repo, "for-each-ref", "--format=%(refname) %(contents)")
    printed = {f"output {i}": out for i, out in enumerate(outputs)}
    # In clear, base64 at every alignment (also as "user:KEY"), URL-encoded or hex.
    assert_nowhere(SECRETS, {".skillvc/": stored, "git history": history + refs, **printed})
    assert git(repo, "rev-list", "--count", "HEAD") != "1", "the resumed run committed edits"


def test_an_agent_printing_its_environment_leaks_no_key(
    repo: Path, loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command harness through the real CLI: an agent that prints every variable it gets,
    in many encodings, on stdout (its answer) and on stderr (a crash, shown in the error list).
    The optimizer, which reads those answers, is the loopback server's simulator."""
    loopback.responder = lb.simulator_responder()
    agent = Path(__file__).parent / "fixtures" / "agents" / "leaky_agent.py"
    toml = (repo / "skillvc.toml").read_text(encoding="utf-8")
    toml = toml.replace(
        '[target]\nmodel = "openai:gpt-4o-mini"\n',
        '[target]\nmodel = "command:leaky"\nharness = "command"\n'
        f'command = ["{sys.executable}", "{agent}"]\n'
        '[target.env]\nOPENAI_API_KEY = "${OPENAI_API_KEY}"\nTEAM = "${TEAM_ANTHROPIC_TOKEN}"\n'
        'ANTHROPIC_API_KEY = "${ANTHROPIC_API_KEY}"\n',
    )
    (repo / "skillvc.toml").write_text(toml, encoding="utf-8")
    for split, keep in (("train", 5), ("val", 4), ("test", 2)):
        path = repo / "evals" / f"{split}.jsonl"
        rows = path.read_text(encoding="utf-8").splitlines()[:keep]
        if split == "val":
            rows[0] = rows[0].replace('"input": "', '"input": "crash ', 1)
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    git(repo, "commit", "-qam", "An agent as the target")
    outputs: dict[str, str] = {}
    for args in (["eval"], ["train"]):
        done = cli(repo, *args)
        outputs[" ".join(args)] = done.stdout + done.stderr
        assert done.returncode == 0, done.stdout + done.stderr
    monkeypatch.chdir(repo)
    for args in (["log", "-p"], ["report"], ["doctor"]):  # in this process: the same output
        result = CliRunner().invoke(skillvc_cli, args)
        outputs[" ".join(args)] = result.stdout + result.stderr
        assert result.exit_code == 0, result.stdout + result.stderr
    # The whole base64 run goes (it decodes to "user:<key>"), not only the key's core.
    assert "exited with code 3: login failed for [redacted]." in outputs["eval"]
    with sqlite3.connect(repo / ".skillvc" / "events.db") as db:
        answers = [
            row[0]
            for row in db.execute(
                "SELECT content FROM blobs WHERE hash IN (SELECT json_extract(payload, "
                "'$.response') FROM events WHERE json_extract(payload, '$.role') = 'target')"
            )
        ]
    assert answers and all("\nTEAM=[redacted]\n" in a for a in answers), "printed, scrubbed"
    assert len(loopback.requests) > 1, "the optimizer read the answers"
    sent = {f"request {i}": r.body for i, r in enumerate(loopback.requests)}
    assert_nowhere(SECRETS, sent)
    stored = b"".join(p.read_bytes() for p in sorted((repo / ".skillvc").iterdir()) if p.is_file())
    history = git(repo, "log", "-p", "--all")
    assert_nowhere(SECRETS, {".skillvc/": stored, "git history": history, **outputs})
