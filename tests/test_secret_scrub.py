"""Secrets through the command harness, URLs and error bodies: stored nowhere, printed nowhere.

The keys used here are deliberately not shaped like keys (no ``sk-``), so only the scrubbing
of known values - in clear, base64 at every alignment, URL-encoded and hex - can hide them.
Where a key must be found, the test first shows it really went through (the agent printed it,
the server echoed it), so each check can fail.
"""

# The imported ``loopback`` fixture is named by a test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner, Result
from conftest import git
from loopback import (  # noqa: F401 - the fixture
    Behaviour,
    LoopbackServer,
    loopback,
    simulator_responder,
)
from secret_forms import assert_nowhere, leaked_forms

from skillvc.cli import cli
from skillvc.core.config import ModelConfig, parse_config
from skillvc.core.errors import ConfigError
from skillvc.core.hashing import canonical_json
from skillvc.core.store import open_store
from skillvc.models.backends.command import ENV_ALLOWLIST, CommandBackend, env_fingerprint
from skillvc.models.calls import ModelClient
from skillvc.secrets import REDACTED, restore, scrub, scrub_values
from skillvc.training.demo import create_demo_repo

AGENTS = Path(__file__).parent / "fixtures" / "agents"
OPENAI_KEY = "oa-SECRET/4f9a+7c1d=2e8b"  # "/", "+", "=": its encoded forms all differ
ANTHROPIC_KEY = "an-SECRET:3c5d%7e9f&x0y1"
AGENT_CRED = "cred-SECRET-8b2e6f0a9d13"  # a variable with no key-like name, read via ${...}
KEYS = (OPENAI_KEY, ANTHROPIC_KEY, AGENT_CRED)
SKILL_PATH = "skills/support/SKILL.md"
SKILL = "---\nname: support\ndescription: Help.\n---\n# Support\n\nBe polite.\n"


def stored_bytes(repo: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((repo / ".skillvc").iterdir()) if p.is_file())


def git_history(repo: Path) -> str:
    return git(repo, "log", "-p", "--all", "--format=fuller%n%B") + git(
        repo, "for-each-ref", "--format=%(refname) %(contents)"
    )


class Cli:
    """The real CLI in-process; every output is kept to be searched for secrets."""

    def __init__(self, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.repo = repo
        self.monkeypatch = monkeypatch
        self.outputs: dict[str, str] = {}

    def __call__(self, *args: str, expect: int = 0) -> Result:
        self.monkeypatch.chdir(self.repo)
        result = CliRunner().invoke(cli, list(args))
        text = result.output  # stdout and stderr
        self.outputs[f"$ skillvc {' '.join(args)} #{len(self.outputs)}"] = text
        assert result.exit_code == expect, text
        return result


# -- the scrubber -------------------------------------------------------------------------------

AWS = "AKIA" + "IOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SLACK = "xoxb-" + "123456789012-abcdefghijkl"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7b\n-----END RSA PRIVATE KEY-----"
BASIC = base64.b64encode(b"alice:correct-horse").decode()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-abcdefghijklmnop1234 ok", "key [redacted] ok"),
        ("sk-ant-api03-abcdefghijklmnopqrst", "[redacted]"),
        ("sk-proj-AbCdEfGhIjKlMnOpQrSt_1234", "[redacted]"),
        (f"aws {AWS}.", "aws [redacted]."),
        (f"token={GITHUB}", "token=[redacted]"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[redacted]"),
        (f"slack {SLACK}", "slack [redacted]"),
        (f"before\n{PEM}\nafter", "before\n[redacted]\nafter"),
        ("http://bob:hunter2hunter2@10.0.0.1:8080/v1", "http://bob:[redacted]@10.0.0.1:8080/v1"),
        ("postgres://u:p%40ss@db/x", "postgres://u:[redacted]@db/x"),
        (f"Authorization: Basic {BASIC}", "Authorization: Basic [redacted]"),
        (f"sent Basic {BASIC} to it", "sent Basic [redacted] to it"),
        ("authorization: Bearer abc.def-ghi_jkl", "authorization: Bearer [redacted]"),
        ('{"Authorization": "Bearer abc.def-ghi_jkl"}', '{"Authorization": "Bearer [redacted]"}'),
        ("Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "Bearer [redacted]"),
        ("api-key: 0123456789abcdef", "api-key: [redacted]"),
        ("x-api-key: abcdefghij123", "x-api-key: [redacted]"),
        ("?api_key=abcdefgh1234&page=2", "?api_key=[redacted]&page=2"),
        # Ordinary text stays as it is.
        ("localhost:8080 and 127.0.0.1", "localhost:8080 and 127.0.0.1"),
        ("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", None),
        ("skill 3b7e1f0c9a2d4e6f", "skill 3b7e1f0c9a2d4e6f"),
        ("a task-management-system, disk-abcdefghijklmnop", None),
        ("Basic understanding of refunds", None),
        ("Bearer bonds", None),
        ("ssh://git@github.com/acme/skills.git", None),
        ("Refund within 30 days; escalate damaged items.", None),
        ("[redacted]", None),
    ],
)
def test_scrubber_table(text: str, expected: str | None) -> None:
    assert scrub(text) == (text if expected is None else expected)


def test_scrub_is_idempotent() -> None:
    once = scrub(f"Authorization: Basic {BASIC} {PEM} http://u:pw123456@h sk-abcdefghijklmnop")
    assert scrub(once) == once and REDACTED in once


@pytest.mark.parametrize("secret", KEYS)
def test_values_are_removed_in_every_encoding(secret: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_SERVICE_TOKEN", secret)
    lines = [f"{form} tail" for form in leaked_forms(secret)]
    for prefix in ("", "u", "us", "user:", "x" * 7):
        for suffix in ("", ":", "zz"):
            data = (prefix + secret + suffix).encode()
            lines += [base64.b64encode(data).decode(), base64.urlsafe_b64encode(data).decode()]
    text = "\n".join(lines)
    assert_nowhere([secret], {"scrubbed": scrub_values(text)})
    assert scrub_values(text).count(REDACTED) >= len(lines)


def test_short_values_and_unrelated_variables_are_not_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "local")  # a placeholder for a local server
    monkeypatch.setenv("EDITOR_THEME", "solarized-dark-theme")  # not a credential's name
    text = "localhost solarized-dark-theme"
    assert scrub(text) == text


# -- the agent's environment and the cache key ------------------------------------------------


def env_agent(**kw: object) -> CommandBackend:
    return CommandBackend(
        ModelConfig(model="command:agent", harness="command", command=["/usr/bin/env"], **kw)  # type: ignore[arg-type]
    )


def run_agent(backend: CommandBackend) -> dict[str, str]:
    from skillvc.models.backends.base import CallRequest

    messages = ({"role": "system", "content": SKILL}, {"role": "user", "content": "hi"})
    text = backend.complete(CallRequest(role="target", model="command:agent", messages=messages))
    return dict(line.split("=", 1) for line in text.text.splitlines())


def test_the_agent_gets_the_allowlist_not_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("UNRELATED_SETTING", "x")
    env = run_agent(env_agent())
    allowed = {*ENV_ALLOWLIST, "HOME", "TMPDIR"}
    assert set(env) - allowed == {"LC_ALL"}
    assert env["HOME"] == env["TMPDIR"] and "skillvc-task-" in env["HOME"]
    assert env["PATH"] == os.environ["PATH"]


def test_target_env_reads_variables_and_its_values_are_scrubbed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT_CRED", AGENT_CRED)
    env = run_agent(env_agent(env={"AGENT_KEY": "${AGENT_CRED}", "MODE": "fast", "HOME": "/h"}))
    assert env["AGENT_KEY"] == REDACTED, "it was passed, and printed, and scrubbed"
    assert env["MODE"] == "fast" and env["HOME"] == "/h"


def test_an_unset_variable_in_target_env_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with pytest.raises(ConfigError) as info:
        env_agent(env={"TOKEN": "Bearer ${NOT_SET_ANYWHERE}"})
    assert info.value.message == (
        'env TOKEN = "Bearer ${NOT_SET_ANYWHERE}" in skillvc.toml reads ${NOT_SET_ANYWHERE}, '
        "which is not set."
    )
    assert (
        info.value.hint == "Export NOT_SET_ANYWHERE before running skillvc, or change [target] env."
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            'model = "sim:support"\nenv = { A = "b" }',
            "[target] env applies only to agent harnesses (command, claude-code, codex).",
        ),
        (
            'model = "command:a"\nharness = "command"\ncommand = ["a"]\nenv = { "1A" = "b" }',
            "[target] env 1A = 'b' must be a variable name with a string value.",
        ),
        (
            'model = "command:a"\nharness = "command"\ncommand = ["a"]\nenv = { A = 3 }',
            "[target] env A = 3 must be a variable name with a string value.",
        ),
    ],
)
def test_bad_env_tables_are_config_errors(table: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f"[target]\n{table}\n", tmp_path)
    assert info.value.message == message


def test_the_cache_key_holds_env_names_and_value_hashes_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ModelConfig(
        model="command:agent",
        harness="command",
        command=["/usr/bin/env"],
        env={"AGENT_KEY": "${AGENT_CRED}"},
    )
    messages = [{"role": "user", "content": "hi"}]
    with open_store(tmp_path / "events.db") as store:
        client = ModelClient(store, {}, {"target": config})
        monkeypatch.setenv("AGENT_CRED", AGENT_CRED)
        first = client.request("target", messages)
        monkeypatch.setenv("AGENT_CRED", AGENT_CRED + "-rotated")
        rotated = client.request("target", messages)
    assert first.key != rotated.key, "a changed value misses the cache"
    assert set(first.params["harness"]["env"]) == {"AGENT_KEY"}
    assert first.params["harness"]["env"] == env_fingerprint(
        ModelConfig(harness="command", env={"AGENT_KEY": AGENT_CRED})
    )
    assert AGENT_CRED not in canonical_json(dict(first.params))


def test_a_scrubbed_answer_replays_exactly_from_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    config = ModelConfig(
        model="command:agent",
        harness="command",
        command=[sys.executable, str(AGENTS / "leaky_agent.py")],
        env={"OPENAI_API_KEY": "${OPENAI_API_KEY}"},
    )
    messages = [{"role": "system", "content": SKILL}, {"role": "user", "content": "hi"}]
    with open_store(tmp_path / "events.db") as store:
        fresh = ModelClient(store, {"target": CommandBackend(config)}, {"target": config})
        first = fresh.call("target", messages)
        again = ModelClient(store, {}, {"target": config}).call("target", messages)
    assert not first.cached and again.cached
    assert first.text == again.text and first.meta == again.meta
    assert "OPENAI_API_KEY=[redacted]" in first.text
    assert_nowhere(KEYS[:1], {"answer": first.text})


def test_a_resumed_run_gets_back_the_url_password_its_log_does_not_hold(tmp_path: Path) -> None:
    url = "http://me:gw-SECRET-0a1b2c3d4e@127.0.0.1:9/v1"
    config = parse_config(f'[target]\nmodel = "openai:m"\nbase_url = "{url}"\n', tmp_path)
    with open_store(tmp_path / "events.db") as store:
        event = store.append("run.started", {"config": config.to_dict()}, run_id="r", seq=1)
        stored = store.get(event.id).payload["config"]
    assert stored["target"]["base_url"] == "http://me:[redacted]@127.0.0.1:9/v1"
    assert restore(stored, config.to_dict())["target"]["base_url"] == url
    changed = parse_config('[target]\nmodel = "openai:m"\nbase_url = "http://x"\n', tmp_path)
    assert restore(stored, changed.to_dict()) == stored, "only a value that scrubs to it"


def test_a_short_url_password_is_not_stored_either(tmp_path: Path) -> None:
    """Too short to be scrubbed as a value wherever it appears ("pw" is in "pwd"), but still the
    password of a URL: payloads lose it, and a resume takes it back from skillvc.toml."""
    url = "https://me:pw@gateway.internal/v1"
    config = parse_config(f'[optimizer]\nmodel = "openai:m"\nbase_url = "{url}"\n', tmp_path)
    with open_store(tmp_path / "events.db") as store:
        event = store.append("run.started", {"config": config.to_dict()}, run_id="r", seq=1)
        stored = store.get(event.id).payload["config"]
        blob = store.get_blob(store.put_blob(f"see {url}"))
    assert stored["optimizer"]["base_url"] == "https://me:[redacted]@gateway.internal/v1"
    assert restore(stored, config.to_dict()) == config.to_dict()
    assert blob == f"see {url}", "blobs (skill versions) keep every byte but secret values"
    with sqlite3.connect(tmp_path / "events.db") as db:
        assert "me:pw@" not in db.execute("SELECT payload FROM events").fetchone()[0]


# -- end to end: an agent that prints its environment ---------------------------------------


def tasks(prefix: str, n: int, crash: int | None = None) -> str:
    rows = []
    for i in range(n):
        text = f"Order {prefix}{i}: the item arrived late. Which action? <answer></answer>"
        rows.append(
            {
                "id": f"{prefix}{i}",
                "input": text + (" crash" if i == crash else ""),
                "target": "deny" if i % 2 else "refund",
            }
        )
    return "".join(json.dumps(r) + "\n" for r in rows)


def make_repo(root: Path, target: str, optimizer: str = 'model = "sim:support"') -> Path:
    (root / "skills/support").mkdir(parents=True)
    (root / "evals").mkdir()
    (root / SKILL_PATH).write_text(SKILL, encoding="utf-8")
    (root / "evals/train.jsonl").write_text(tasks("t", 6), encoding="utf-8")
    (root / "evals/val.jsonl").write_text(tasks("v", 4, crash=3), encoding="utf-8")
    (root / "evals/test.jsonl").write_text(tasks("x", 2), encoding="utf-8")
    (root / "skillvc.toml").write_text(
        f'[skill]\npath = "{SKILL_PATH}"\n\n'
        '[tasks]\ntrain = "evals/train.jsonl"\nval = "evals/val.jsonl"\n'
        'test = "evals/test.jsonl"\n\n'
        f"[target]\n{target}\n\n[optimizer]\n{optimizer}\n\n"
        "[train]\nepochs = 2\nbatch_size = 3\nminibatch_size = 3\nworkers = 2\nseed = 3\n"
        "max_failure_rate = 0.5\n\n"
        '[prices."sim:support"]\ninput = 1.0\noutput = 1.0\n'
        '[prices."command:agent"]\ninput = 0.0\noutput = 0.0\n',
        encoding="utf-8",
    )
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-qm", "seed")
    return root


LEAKY_TARGET = (
    'model = "command:agent"\nharness = "command"\n'
    f'command = ["{sys.executable}", "{AGENTS / "leaky_agent.py"}"]\n'
    'env = { OPENAI_API_KEY = "${OPENAI_API_KEY}", ANTHROPIC_API_KEY = "${ANTHROPIC_API_KEY}",'
    ' AGENT_LOGIN = "${AGENT_CRED}" }'
)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("AGENT_CRED", AGENT_CRED)


@pytest.mark.usefixtures("keys")
def test_env_dumping_agent_keys_appear_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = make_repo(tmp_path / "seed", LEAKY_TARGET)
    run = Cli(shutil.copytree(seed, tmp_path / "repo"), monkeypatch)
    run("init")
    db = run.repo / ".skillvc/events.db"
    # Held open for the whole scenario, so closing the CLI's connections cannot checkpoint the
    # write-ahead log away before it is read.
    watcher = sqlite3.connect(db)
    watcher.execute("SELECT COUNT(*) FROM events").fetchone()
    try:
        evaluated = run("eval")
        assert "errors, not scored (1):" in evaluated.output
        assert "v3  target call to command:agent failed: Agent command 'python" in evaluated.output
        # The last stderr line: base64("user:" + key), of which the "use" part is left.
        assert "exited with code 3: login failed for dXNl[redacted]." in evaluated.output
        run("eval", "--json")
        run("train", "--budget-usd", "0.0001", expect=4)  # stops after step 1
        resumed = run("train", "--budget-usd", "100")
        assert "run run-" in resumed.output and "finished" in resumed.output
        run("runs")
        run("log", "-p")
        run("log", "--json")
        run("log", "--rejected", "-p")
        ids = [str(r[0]) for r in watcher.execute("SELECT id FROM events ORDER BY id")]
        for ident in ids[:: max(1, len(ids) // 25)]:
            run("show", ident)
        for (ident,) in watcher.execute("SELECT id FROM events WHERE type = 'model.error'"):
            run("show", str(ident))
        run("report")
        run("doctor")
        answers = [
            row[0]
            for row in watcher.execute(
                "SELECT content FROM blobs WHERE hash IN (SELECT json_extract(payload, "
                "'$.response') FROM events WHERE type = 'model.call' "
                "AND json_extract(payload, '$.role') = 'target')"
            )
        ]
        wal = db.with_name("events.db-wal")
        assert wal.exists() and wal.stat().st_size > 0
        stored = stored_bytes(run.repo)
    finally:
        watcher.close()
    # The agent did get the keys and print them: what the log holds is their scrubbed form.
    assert answers and all(
        f"OPENAI_API_KEY={REDACTED}" in a and f"AGENT_LOGIN={REDACTED}" in a for a in answers
    )
    stored += stored_bytes(run.repo)  # after the last close, checkpointed into the database
    assert_nowhere(KEYS, {"stored": stored, "git": git_history(run.repo), **run.outputs})

    # Resumed from a log of scrubbed answers, the run is the one an uninterrupted run makes.
    reference = Cli(shutil.copytree(seed, tmp_path / "reference"), monkeypatch)
    reference("init")
    whole = reference("train", "--budget-usd", "100", "--json")
    assert json.loads(whole.stdout)["run"] in resumed.output
    assert (reference.repo / SKILL_PATH).read_bytes() == (run.repo / SKILL_PATH).read_bytes()

    # Commits made within one second tie on date, so `log --all` may list them in either order.
    def messages(repo: Path) -> list[str]:
        return sorted(
            m.strip() for m in git(repo, "log", "--format=%s%n%b%x00", "--all").split("\0")
        )

    assert messages(reference.repo) == messages(run.repo)


@pytest.mark.usefixtures("keys")
def test_usr_bin_env_as_the_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    passed = make_repo(
        tmp_path / "passed",
        'model = "command:env"\nharness = "command"\ncommand = ["/usr/bin/env"]\n'
        '[target.env]\nOPENAI_API_KEY = "${OPENAI_API_KEY}"\n'
        'ANTHROPIC_API_KEY = "${ANTHROPIC_API_KEY}"',
    )
    bare = make_repo(
        tmp_path / "bare", 'model = "command:env"\nharness = "command"\ncommand = ["/usr/bin/env"]'
    )
    outputs: dict[str, str | bytes] = {}
    answers: dict[str, list[str]] = {}
    for repo in (passed, bare):
        run = Cli(repo, monkeypatch)
        run("init")
        run("eval", "--json")
        run("eval", "--split", "test")
        run("log", "--json")
        run("doctor")
        outputs.update({f"{repo.name} {k}": v for k, v in run.outputs.items()})
        outputs[f"{repo.name} events.db"] = stored_bytes(repo)
        with open_store(repo / ".skillvc/events.db") as store:
            answers[repo.name] = [
                store.get_blob(e.payload["response"]) for e in store.events(types=["model.call"])
            ]
    assert all(f"OPENAI_API_KEY={REDACTED}" in a for a in answers["passed"])
    assert all(f"ANTHROPIC_API_KEY={REDACTED}" in a for a in answers["passed"])
    assert not any("API_KEY" in a for a in answers["bare"]), "not passed unless [target] env says"
    assert_nowhere(KEYS, outputs)


# -- credentials in a base URL --------------------------------------------------------------


def test_credentials_in_a_base_url_appear_nowhere(
    tmp_path: Path, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    password = "gw-SECRET/9e8d+7c6b"
    host = loopback.url.removeprefix("http://")
    root = tmp_path / "repo"
    create_demo_repo(root)
    toml = (root / "skillvc.toml").read_text(encoding="utf-8")
    toml = toml.replace('[target]\nmodel = "sim:support"', '[target]\nmodel = "openai:gpt-4o-mini"')
    toml = toml.replace("epochs = 3", "epochs = 1").replace("batch_size = 20", "batch_size = 10")
    (root / "skillvc.toml").write_text(toml, encoding="utf-8")
    git(root, "commit", "-qam", "Target the gateway")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://user:{quote(password, safe='')}@{host}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    loopback.responder = simulator_responder()
    echo = "bad request from {key}"
    loopback.enqueue(
        Behaviour(kind="status", status=401, message="Incorrect API key: {key}"),
        Behaviour(kind="status", status=400, message=echo),
        Behaviour(kind="status", status=400, message=echo),
    )
    run = Cli(root, monkeypatch)
    refused = run("doctor", expect=6)
    assert f"target backend: openai:gpt-4o-mini via http://user:[redacted]@{host}/v1" in (
        refused.output
    )
    assert "(HTTP 401 Unauthorized: Incorrect API key: Basic [redacted])" in refused.output
    run("train")
    run("log", "-p")
    run("runs", "--json")
    run("report")
    run("doctor")
    for (ident,) in sqlite3.connect(root / ".skillvc/events.db").execute(
        "SELECT id FROM events WHERE type IN ('model.error', 'run.started')"
    ):
        run("show", str(ident))
    # The credentials did reach the server, as a Basic header that its error bodies echoed.
    basic = "Basic " + base64.b64encode(f"user:{password}".encode()).decode()
    assert loopback.requests[0].headers["authorization"] == basic
    assert_nowhere(
        [password, f"user:{password}"],
        {"stored": stored_bytes(root), "git": git_history(root), **run.outputs},
    )


def test_a_run_resumes_against_a_base_url_whose_password_the_log_does_not_hold(
    tmp_path: Path, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run.started snapshot holds ``user:[redacted]@``; a resumed run takes the real URL
    from skillvc.toml (whose owner put it there) and goes on sending the right credentials."""
    password = "gw-SECRET-5f4e3d2c1b"
    host = loopback.url.removeprefix("http://")
    root = tmp_path / "repo"
    create_demo_repo(root)
    toml = (root / "skillvc.toml").read_text(encoding="utf-8")
    toml = toml.replace(
        '[target]\nmodel = "sim:support"',
        f'[target]\nmodel = "openai:gpt-4o-mini"\nbase_url = "http://user:{password}@{host}/v1"',
    )
    toml = toml.replace("epochs = 3", "epochs = 1").replace("batch_size = 20", "batch_size = 10")
    (root / "skillvc.toml").write_text(toml, encoding="utf-8")
    git(root, "commit", "-qam", "Target the gateway")
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    loopback.responder = simulator_responder()
    run = Cli(root, monkeypatch)
    run("train", "--budget-usd", "0.000001", expect=4)
    before = len(loopback.requests)
    run("train", "--budget-usd", "100")
    basic = "Basic " + base64.b64encode(f"user:{password}".encode()).decode()
    assert len(loopback.requests) > before, "the resumed run called the model"
    assert {r.headers["authorization"] for r in loopback.requests} == {basic}
    with open_store(root / ".skillvc/events.db") as store:
        (started,) = store.events(types=["run.started"])
        resumed = store.events(types=["run.resumed"])
    assert started.payload["config"]["target"]["base_url"] == (f"http://user:[redacted]@{host}/v1")
    assert len(resumed) == 1
    assert_nowhere([password], {"stored": stored_bytes(root), **run.outputs})
