"""A stopped run that listens: fixing skillvc.toml after a failed ``train`` takes effect.

End to end over HTTP (the real OpenAI SDK against the loopback server, which plays the
simulator): a first run fails on a typo (model, key, base URL) or stops on its budget, the user
changes skillvc.toml (model, key, base URL, task file, scorer), and the next ``train`` either
succeeds or says in one sentence what changed and how to go on.
"""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import git
from loopback import (  # noqa: F401 - the fixture
    Behaviour,
    LoopbackServer,
    loopback,
    simulator_responder,
)

from skillvc.cli import cli
from skillvc.core.store import open_store
from skillvc.training.demo import create_demo_repo

SKILL = "skills/acme-returns/SKILL.md"
KEY = "sk-test-loopback-0000"
GOOD_MODEL = "gpt-4o-mini"


def responder(server: LoopbackServer) -> Any:
    """The simulator for the right model and key; 404 for another model, 401 for another key."""
    simulate = simulator_responder()

    def respond(body: dict[str, Any]) -> str | Behaviour:
        # Every request of one process carries the same key: the newest request's header is
        # this one's, whichever thread recorded it.
        headers = server.requests[-1].headers
        if headers.get("authorization") != f"Bearer {KEY}":
            return Behaviour(kind="status", status=401, message="Incorrect API key provided")
        if body.get("model") != GOOD_MODEL:
            return Behaviour(
                kind="status", status=404, message=f"The model {body.get('model')} does not exist"
            )
        return simulate(body)

    return respond


def toml(url: str, *, model: str = GOOD_MODEL, val: str = "evals/val.jsonl", **extra: str) -> str:
    roles = f'model = "openai:{model}"\nbase_url = "{url}/v1"\napi_key_env = "LOOPBACK_KEY"\n'
    roles += "max_retries = 0\n"
    return (
        f'[skill]\npath = "{SKILL}"\n\n'
        f'[tasks]\ntrain = "evals/train.jsonl"\nval = "{val}"\n'
        f'test = "evals/test.jsonl"\nscorer = "{extra.get("scorer", "exact")}"\n\n'
        f"[target]\n{roles}temperature = 0.0\n\n"
        f"[optimizer]\n{roles}temperature = 0.7\n\n"
        "[train]\nepochs = 1\nbatch_size = 20\nminibatch_size = 5\nworkers = 4\nseed = 7\n"
    )


def make_repo(tmp_path: Path, mp: pytest.MonkeyPatch, config: str, name: str = "repo") -> Path:
    repo = tmp_path / name
    create_demo_repo(repo)
    write_config(repo, config)
    mp.setenv("LOOPBACK_KEY", KEY)
    mp.chdir(repo)
    return repo


def write_config(repo: Path, config: str, *, commit: bool = True) -> None:
    (repo / "skillvc.toml").write_text(config, encoding="utf-8")
    if commit:
        git(repo, "commit", "-qam", "configure")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def train(*args: str) -> tuple[Result, dict[str, Any] | None]:
    result = run("train", "--json", *args)
    summary = json.loads(result.stdout) if result.exit_code == 0 else None
    return result, summary


def runs(*args: str) -> list[dict[str, Any]]:
    return json.loads(run("runs", "--json", *args).stdout)


def abandoned(repo: Path) -> list[dict[str, Any]]:
    with open_store(repo / ".skillvc/events.db") as store:
        return [dict(e.payload, run=e.run_id) for e in store.events(types=["run.abandoned"])]


def closed_port() -> int:
    """A loopback port nobody listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- failed before the first step: the fix is simply picked up --------------------------------


def test_model_typo_fixed_in_the_config_trains_with_the_fix(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    loopback.responder = responder(loopback)
    repo = make_repo(tmp_path, monkeypatch, toml(loopback.url, model="gpt-4o-mnii"))
    failed, _ = train()
    assert failed.exit_code != 0 and "gpt-4o-mnii" in failed.stderr
    (first,) = runs()

    write_config(repo, toml(loopback.url))
    doctor = run("doctor")
    assert doctor.exit_code == 0, doctor.output
    assert (
        f"ok    next run: run {first['run']} stopped before its first step; train starts over "
        "with skillvc.toml's settings (target.model: openai:gpt-4o-mnii -> " in doctor.output
    )
    result, summary = train()

    assert result.exit_code == 0, result.output
    assert summary is not None and summary["status"] == "finished" and not summary["resumed"]
    assert (
        f"Run {first['run']} stopped before its first step; starting over with the new "
        "settings (target.model: openai:gpt-4o-mnii -> openai:gpt-4o-mini; optimizer.model: "
        "openai:gpt-4o-mnii -> openai:gpt-4o-mini; main: moved from " in result.stderr
    )
    # The old run is abandoned: hidden from `runs`, listed by `runs --all`.
    assert [r["run"] for r in runs()] == [summary["run"]]
    assert {r["run"]: r["status"] for r in runs("--all")} == {
        summary["run"]: "finished",
        first["run"]: "abandoned",
    }
    (event,) = abandoned(repo)
    assert event["run"] == first["run"] and event["by"] == summary["run"]
    assert event["reason"] == "settings changed"


def test_base_url_typo_fixed_in_the_config_trains_with_the_fix(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    loopback.responder = responder(loopback)
    wrong = f"http://127.0.0.1:{closed_port()}"
    repo = make_repo(tmp_path, monkeypatch, toml(wrong))
    failed, _ = train()
    assert failed.exit_code != 0 and "could not be reached" in failed.stderr
    assert loopback.requests == []

    write_config(repo, toml(loopback.url))
    result, summary = train()

    assert result.exit_code == 0, result.output
    assert summary is not None and summary["status"] == "finished"
    assert f"target.base_url: {wrong}/v1 -> {loopback.url}/v1" in result.stderr


def test_refused_key_fixed_resumes_the_run(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A key lives in the environment (a variable named in skillvc.toml): fixing the key, or
    the variable's name, changes nothing the run computes, so the run itself resumes."""
    loopback.responder = responder(loopback)
    repo = make_repo(tmp_path, monkeypatch, toml(loopback.url))
    monkeypatch.setenv("LOOPBACK_KEY", "sk-wrong")
    failed, _ = train()
    assert failed.exit_code == 6 and "refused the key in LOOPBACK_KEY" in failed.stderr
    (first,) = runs()

    monkeypatch.setenv("GOOD_KEY", KEY)
    # Edited, not committed: the run's branch stays where the run left it.
    config = toml(loopback.url).replace('"LOOPBACK_KEY"', '"GOOD_KEY"')
    write_config(repo, config, commit=False)
    doctor = run("doctor")
    assert doctor.exit_code == 0, doctor.output
    assert (
        f"ok    next run: train resumes run {first['run']} with the settings it started with"
        in doctor.output
    )
    result, summary = train()

    assert result.exit_code == 0, result.output
    assert summary is not None and summary["resumed"] and summary["run"] == first["run"]
    assert summary["status"] == "finished"
    assert abandoned(repo) == []


# -- steps done: say what changed and offer the ways on ----------------------------------------


def stopped_after_a_step(tmp_path: Path, mp: pytest.MonkeyPatch, url: str, name: str) -> Path:
    repo = make_repo(tmp_path, mp, toml(url), name)
    stopped, _ = train("--budget-usd", "0.000001")
    assert stopped.exit_code != 0 and "stopped after step 1" in stopped.stderr, stopped.output
    return repo


def test_changed_task_file_says_what_changed_and_new_starts_over(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    loopback.responder = responder(loopback)
    repo = stopped_after_a_step(tmp_path, monkeypatch, loopback.url, "r")
    (first,) = runs()
    lines = (repo / "evals/val.jsonl").read_text().splitlines(keepends=True)
    n_train, n_test = (
        len((repo / f"evals/{s}.jsonl").read_text().splitlines()) for s in ("train", "test")
    )
    (repo / "evals/val2.jsonl").write_text("".join(lines[:-1]))
    git(repo, "add", "evals/val2.jsonl")
    write_config(repo, toml(loopback.url, val="evals/val2.jsonl"))
    sent = len(loopback.requests)

    refused, _ = train()

    assert refused.exit_code != 0 and len(loopback.requests) == sent
    message = refused.stderr.splitlines()[0]
    assert message == (
        f"Error: The settings changed since run {first['run']} started (1 step done): "
        "tasks.val: evals/val.jsonl -> evals/val2.jsonl; task set: "
        f"{n_train} train, {len(lines)} val, {n_test} test -> "
        f"{n_train} train, {len(lines) - 1} val, {n_test} test."
    )
    assert "'skillvc train --new' starts over with the new settings" in refused.stderr
    doctor = run("doctor")
    assert doctor.exit_code != 0
    assert (
        f"FAIL  next run: the settings changed since run {first['run']} started (1 step done), "
        "so train stops: tasks.val: evals/val.jsonl -> evals/val2.jsonl;" in doctor.output
    )

    result, summary = train("--new")
    assert result.exit_code == 0, result.output
    assert summary is not None and summary["status"] == "finished"
    assert [r["status"] for r in runs("--all")] == ["finished", "abandoned"]
    assert abandoned(repo)[0]["reason"] == "--new"


def test_changed_scorer_resumes_as_it_was_with_resume(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """--resume ignores the change and ends exactly like a run never interrupted."""
    loopback.responder = responder(loopback)
    reference = make_repo(tmp_path, monkeypatch, toml(loopback.url), "reference")
    whole, expected = train()
    assert whole.exit_code == 0 and expected is not None, whole.output

    repo = stopped_after_a_step(tmp_path, monkeypatch, loopback.url, "r")
    write_config(repo, toml(loopback.url, scorer="contains"), commit=False)
    refused, _ = train()
    assert refused.exit_code != 0
    assert "tasks.scorer: exact -> contains." in refused.stderr
    assert "'skillvc train --resume' resumes it as it was" in refused.stderr

    # The budget and workers cannot change what the run computed so far: accepted on resume.
    result, summary = train("--resume", "--budget-usd", "100", "--workers", "2")
    assert result.exit_code == 0, result.output
    assert summary is not None and summary["resumed"] and summary["status"] == "finished"
    for key in ("accepted", "rejected", "best_val", "test"):
        assert summary[key] == expected[key], key
    assert (repo / SKILL).read_text() == (reference / SKILL).read_text()
    # The same commits, but for the run id (the two repos' seed commits differ in time).
    logs = [
        git(r, "log", "--format=%s", "-p", "-n", "20").replace(run_id, "RUN")
        for r, run_id in ((repo, summary["run"]), (reference, expected["run"]))
    ]
    assert logs[0] == logs[1]
