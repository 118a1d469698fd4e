"""`skillvc train` end to end over HTTP: the real OpenAI, Azure and Anthropic SDKs against the
loopback server, whose responder plays the simulator so the run learns something real.

Each test builds the demo's seed repo, commits a skillvc.toml that points both roles at one
backend with small settings, and drives the real CLI (click's CliRunner, in process).
"""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from conftest import git
from loopback import (
    Behaviour,
    LoopbackServer,
    chat_messages,
    is_optimizer_prompt,
    simulator_responder,
)

from skillvc.cli import cli
from skillvc.core.config import ModelConfig
from skillvc.core.errors import AuthenticationFailed
from skillvc.core.store import EventStore, open_store
from skillvc.models.calls import ModelClient
from skillvc.models.harness import get_backend
from skillvc.models.prompts import prompt_kind, section
from skillvc.training.demo import create_demo_repo

SKILL = "skills/acme-returns/SKILL.md"
KEY = "sk-test-loopback-0000"
VAL_ITEMS = 30
WORKERS = 4
# The loopback server's default usage per answer.
PROMPT_TOKENS, COMPLETION_TOKENS = 11, 7


@dataclass(frozen=True)
class Setup:
    """How one backend is configured: its [target]/[optimizer] lines, env and expectations."""

    model: str
    key_env: str
    lines: Callable[[str], str]  # server url -> model lines of skillvc.toml
    env: Callable[[str], dict[str, str]]  # server url -> environment variables
    path: str  # the route the SDK must call
    sent_model: str | None  # the "model" in the request body (Azure puts it in the path)
    price: tuple[float, float] | None  # USD per 1M tokens, None when unpriced
    prices_toml: str = ""
    query: dict[str, str] = field(default_factory=dict)


SETUPS = {
    "openai": Setup(
        model="openai:gpt-4o-mini",  # priced by default
        key_env="OPENAI_API_KEY",
        lines=lambda url: 'model = "openai:gpt-4o-mini"',
        env=lambda url: {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": url + "/v1"},
        path="/v1/chat/completions",
        sent_model="gpt-4o-mini",
        price=(0.15, 0.60),
    ),
    "azure": Setup(
        model="openai:corp-gpt",  # priced by a [prices] override
        key_env="AZURE_OPENAI_API_KEY",
        lines=lambda url: (
            'model = "openai:corp-gpt"\nazure = true\n'
            f'azure_endpoint = "{url}"\napi_version = "2024-10-21"\ndeployment = "corp-deploy"'
        ),
        env=lambda url: {"AZURE_OPENAI_API_KEY": KEY},
        path="/openai/deployments/corp-deploy/chat/completions",
        sent_model=None,
        price=(1.0, 2.0),
        prices_toml='[prices."openai:corp-gpt"]\ninput = 1.0\noutput = 2.0\n',
        query={"api-version": "2024-10-21"},
    ),
    "anthropic": Setup(
        model="anthropic:claude-test-1",  # no price anywhere
        key_env="ANTHROPIC_API_KEY",
        lines=lambda url: 'model = "anthropic:claude-test-1"',
        env=lambda url: {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": url},
        path="/v1/messages",
        sent_model="claude-test-1",
        price=None,
    ),
}


def make_repo(
    tmp_path: Path,
    server: LoopbackServer,
    mp: pytest.MonkeyPatch,
    setup: Setup,
    *,
    target_extra: str = "",
) -> Path:
    """The demo seed repo with a committed skillvc.toml for ``setup``; cwd is the repo."""
    repo = tmp_path / "repo"
    create_demo_repo(repo)
    lines = setup.lines(server.url)
    (repo / "skillvc.toml").write_text(
        f'[skill]\npath = "{SKILL}"\n\n'
        '[tasks]\ntrain = "evals/train.jsonl"\nval = "evals/val.jsonl"\n'
        'test = "evals/test.jsonl"\nscorer = "exact"\n\n'
        f"[target]\n{lines}\ntemperature = 0.0\n{target_extra}\n\n"
        f"[optimizer]\n{lines}\ntemperature = 0.7\n\n"
        "[train]\nepochs = 1\nbatch_size = 20\nminibatch_size = 5\n"
        f"workers = {WORKERS}\nseed = 2\n\n{setup.prices_toml}",
        encoding="utf-8",
    )
    git(repo, "commit", "-qam", f"Train against {setup.model}")
    for name, value in setup.env(server.url).items():
        mp.setenv(name, value)
    mp.chdir(repo)
    return repo


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def train() -> tuple[Result, dict[str, Any] | None]:
    result = run("train", "--json")
    summary = json.loads(result.stdout) if result.exit_code == 0 else None
    return result, summary


def events(repo: Path, type: str) -> list[dict[str, Any]]:
    with open_store(repo / ".skillvc/events.db") as store:
        return [e.payload for e in store.events(types=[type])]


def accepted_commits(repo: Path, seed: str) -> list[str]:
    return git(repo, "rev-list", f"{seed}..main").split()


# -- a whole run per backend ------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SETUPS))
def test_training_run_over_http(
    name: str, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    setup = SETUPS[name]
    loopback.responder = simulator_responder()
    repo = make_repo(tmp_path, loopback, monkeypatch, setup)
    seed = git(repo, "rev-parse", "HEAD")
    seed_skill = (repo / SKILL).read_text(encoding="utf-8")

    result, summary = train()

    assert result.exit_code == 0, result.output
    assert summary is not None and summary["status"] == "finished"
    commits = accepted_commits(repo, seed)
    # Steps and slow updates are counted apart; each accepted candidate is a commit.
    assert summary["accepted"] >= 1
    assert len(commits) == summary["accepted"] + summary["slow_updates_accepted"]
    assert all(git(repo, "show", "--name-only", "--format=", c) == SKILL for c in commits)
    assert summary["test"] > summary["baseline_test"], "the skill learned over HTTP"

    # Every request went to this backend's route, with its key header and model name.
    requests = loopback.requests
    assert requests and {r.path for r in requests} == {setup.path}
    assert all(r.query.get(k) == v for r in requests for k, v in setup.query.items())
    if setup.sent_model is not None:
        assert {r.json["model"] for r in requests} == {setup.sent_model}
    first_target = next(r for r in requests if not is_optimizer_prompt(chat_messages(r.json)))
    messages = chat_messages(first_target.json)
    assert messages[0] == {"role": "system", "content": seed_skill}
    assert (
        messages[1]["role"] == "user"
        and "Which action should support take?" in messages[1]["content"]
    )

    # Every answer is one model.call event carrying the real model name and the served tokens.
    calls = events(repo, "model.call")
    assert len(calls) == len(requests) == summary["fresh_calls"]
    assert {c["model"] for c in calls} == {setup.model}
    assert {c["role"] for c in calls} == {"target", "optimizer"}
    assert {(c["prompt_tokens"], c["completion_tokens"]) for c in calls} == {
        (PROMPT_TOKENS, COMPLETION_TOKENS)
    }

    (row,) = json.loads(run("runs", "--json").stdout)
    assert row["run"] == summary["run"] and row["calls"] == len(calls)
    assert row["tokens"] == len(calls) * (PROMPT_TOKENS + COMPLETION_TOKENS)
    if setup.price is None:
        assert row["cost_usd"] is None and row["unpriced_calls"] == len(calls)
    else:
        per_call = (PROMPT_TOKENS * setup.price[0] + COMPLETION_TOKENS * setup.price[1]) / 1e6
        assert row["cost_usd"] == pytest.approx(len(calls) * per_call)
        assert row["unpriced_calls"] == 0


# -- failures ---------------------------------------------------------------------------------


def failing_targets(server: LoopbackServer) -> threading.Event:
    """While the returned event is set, every target request gets a 500 (Retry-After: 0)."""
    failing = threading.Event()
    failing.set()
    simulate = simulator_responder()

    def respond(body: dict[str, Any]) -> str | Behaviour:
        if failing.is_set() and not is_optimizer_prompt(chat_messages(body)):
            return Behaviour(
                kind="status", status=500, headers={"Retry-After": "0"}, message="upstream exploded"
            )
        return simulate(body)

    server.responder = respond
    return failing


def test_failing_target_calls_stop_the_run_which_resumes_when_healthy(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    failing = failing_targets(loopback)
    repo = make_repo(
        tmp_path, loopback, monkeypatch, SETUPS["openai"], target_extra="max_retries = 1"
    )
    seed = git(repo, "rev-parse", "HEAD")

    stopped, _ = train()

    assert stopped.exit_code == 4, stopped.output
    m = re.search(
        r"^Error: (\d+) of (\d+) target calls failed in the baseline evaluation "
        r"\(last error: openai:gpt-4o-mini answered HTTP 500 Internal Server Error: "
        r"upstream exploded\.?\)\.$",
        stopped.stderr,
        re.M,
    )
    assert m is not None, stopped.stderr
    assert int(m.group(1)) == int(m.group(2)) == VAL_ITEMS
    assert "Hint: Fix the cause, then run 'skillvc train' again to resume." in stopped.stderr
    # One retry each (max_retries = 1), right away as Retry-After: 0 asked; then a clear error.
    # Calls sent ahead of the loop (the test split, the first rollouts) stop at their first
    # failure: at most the WORKERS already in flight fail too.
    assert 2 * VAL_ITEMS <= len(loopback.requests) <= 2 * (VAL_ITEMS + WORKERS)
    assert len(events(repo, "model.error")) == VAL_ITEMS
    assert events(repo, "model.call") == []
    (stop,) = events(repo, "run.stopped")
    assert stop["reason"] == "failures" and f"{VAL_ITEMS} of {VAL_ITEMS}" in stop["message"]
    (row,) = json.loads(run("runs", "--json").stdout)
    assert row["status"] == "stopped"
    assert accepted_commits(repo, seed) == []

    failing.clear()
    resumed, summary = train()

    assert resumed.exit_code == 0, resumed.output
    assert summary is not None and summary["resumed"] and summary["run"] == row["run"]
    assert summary["status"] == "finished" and summary["accepted"] >= 1
    assert len(accepted_commits(repo, seed)) == (
        summary["accepted"] + summary["slow_updates_accepted"]
    )
    (row,) = json.loads(run("runs", "--json").stdout)
    assert row["status"] == "finished"


@pytest.mark.parametrize("name", list(SETUPS))
def test_refused_key_stops_at_the_first_call(
    name: str, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    setup = SETUPS[name]
    loopback.responder = lambda body: Behaviour(
        kind="status", status=401, message="Incorrect API key provided: {key}"
    )
    repo = make_repo(tmp_path, loopback, monkeypatch, setup)
    seed = git(repo, "rev-parse", "HEAD")

    result, _ = train()

    assert result.exit_code == 6, result.output
    assert re.search(
        rf"^Error: {re.escape(setup.model)} refused the key in {setup.key_env} \(HTTP 401 "
        r"Unauthorized: Incorrect API key provided: \[redacted\]\)\.$",
        result.stderr,
        re.M,
    ), result.stderr
    assert f"Hint: Export a valid key in {setup.key_env}" in result.stderr
    assert KEY not in result.output
    # No retries, and the run stops at the first refusal: only calls the workers had already
    # picked up are sent (how many depends on thread timing), never the whole val split.
    assert 1 <= len(loopback.requests) < VAL_ITEMS
    errors = events(repo, "model.error")
    assert errors and {e["kind"] for e in errors} == {"AuthenticationFailed"}
    assert events(repo, "model.call") == []
    assert git(repo, "rev-parse", "HEAD") == seed
    assert git(repo, "for-each-ref", "refs/skillvc/") == ""
    assert git(repo, "status", "--porcelain") == ""


# -- malformed optimizer answers --------------------------------------------------------------

GARBAGE = "Sure! Here are the edits you asked for: {edits: [oops #{n}"


class Optimizer:
    """Plays the simulator, but answers reflection prompts with malformed JSON first.

    ``repairable``: the repair call gets the simulator's answer to the original prompt (the
    model fixed its JSON); otherwise every optimizer answer stays malformed.
    """

    def __init__(self, repairable: bool) -> None:
        self.repairable = repairable
        self.simulate = simulator_responder()
        self.fixed: dict[str, str] = {}
        self.kinds: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        messages = chat_messages(body)
        if not is_optimizer_prompt(messages):
            return self.simulate(body)
        user = messages[-1]["content"]
        kind = prompt_kind(user) or "?"
        with self.lock:
            self.kinds.append(kind)
            n = str(len(self.kinds))
        if not self.repairable:
            return GARBAGE.replace("{n}", n)
        if kind == "reflect":
            with self.lock:
                self.fixed[n] = self.simulate(body)
            return GARBAGE.replace("{n}", n)
        if kind == "repair":
            number = re.search(r"oops #(\d+)", section(user, "previous_answer"))
            assert number is not None, "the repair prompt quotes the previous answer"
            return self.fixed[number.group(1)]
        return self.simulate(body)


def optimizer_repo(
    repairable: bool, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> tuple[Optimizer, Path, str]:
    """A repo training over OpenAI against ``Optimizer(repairable)``: (optimizer, repo, seed)."""
    optimizer = Optimizer(repairable=repairable)
    server.responder = optimizer
    repo = make_repo(tmp_path, server, monkeypatch, SETUPS["openai"])
    return optimizer, repo, git(repo, "rev-parse", "HEAD")


def test_malformed_optimizer_json_is_repaired_and_its_edits_used(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    optimizer, repo, seed = optimizer_repo(True, loopback, monkeypatch, tmp_path)

    result, summary = train()

    assert result.exit_code == 0, result.output
    reflects, repairs = optimizer.kinds.count("reflect"), optimizer.kinds.count("repair")
    assert reflects >= 3 and repairs == reflects, "every malformed answer got one repair call"
    assert events(repo, "reflection.failed") == []
    proposed = events(repo, "edit.proposed")
    assert proposed, "the repaired answers' edits were proposed"
    assert summary is not None and summary["accepted"] >= 1
    assert len(accepted_commits(repo, seed)) == (
        summary["accepted"] + summary["slow_updates_accepted"]
    )


def test_always_malformed_optimizer_json_is_recorded_and_the_run_finishes(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    optimizer, repo, seed = optimizer_repo(False, loopback, monkeypatch, tmp_path)

    result = run("train", "--json")

    # Issue 22 changed this: a run whose optimizer never gave a usable answer finishes and
    # records everything, then says so and exits 6 (it used to exit 0 as if it had trained).
    assert result.exit_code == 6, result.output
    assert "trained nothing: none of the optimizer's" in result.stderr
    summary = json.loads(result.stdout)
    assert summary["status"] == "finished"
    assert summary["reflections"] >= 3 and summary["reflections_usable"] == 0
    failures = events(repo, "reflection.failed")
    reflects = optimizer.kinds.count("reflect")
    assert reflects >= 3 and len(failures) == reflects
    assert optimizer.kinds.count("repair") == reflects + 2  # + the slow and meta updates
    assert all(
        f["error"].startswith("unusable optimizer answer after one repair") for f in failures
    )
    assert events(repo, "edit.proposed") == []
    assert summary["accepted"] == summary["slow_updates_accepted"] == 0
    assert accepted_commits(repo, seed) == []
    (slow,) = events(repo, "slow_update")
    assert slow["skipped"] and "after one repair" in slow["error"]


def refusing_client(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, store: EventStore
) -> ModelClient:
    """A target client whose every request the loopback server refuses (HTTP 401)."""
    loopback.responder = lambda body: Behaviour(
        kind="status", status=401, message="Incorrect API key provided: {key}"
    )
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", loopback.url + "/v1")
    config = ModelConfig(model="openai:gpt-4o-mini", max_retries=0)
    return ModelClient(store, {"target": get_backend(config)}, {"target": config})


def test_a_refused_key_fails_every_later_call_with_the_same_error_and_hint(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Once the key is refused, later calls fail at once, without a request. They fail with
    the first refusal's message and hint, so what the user reads does not depend on which of
    the concurrent calls met the refusal first."""
    with open_store(tmp_path / "events.db") as store:
        client = refusing_client(loopback, monkeypatch, store)
        errors = []
        for text in ("first", "second"):
            with pytest.raises(AuthenticationFailed) as refused:
                client.call("target", [{"role": "user", "content": text}])
            errors.append(refused.value)
    assert len(loopback.requests) == 1  # the second call was never sent
    first, second = errors
    assert str(second) == str(first) and "refused the key in OPENAI_API_KEY" in str(first)
    assert second.hint == first.hint and "Export a valid key in OPENAI_API_KEY" in first.hint


def test_a_refusal_met_ahead_of_the_loop_is_logged_by_the_loops_first_call(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A call sent ahead of the loop (a fork) logs no failure. When it meets the refusal
    first, the loop's call fails at once without a request, and logs the refusal once, so the
    run's log says why it stopped whichever thread met the refusal first."""
    with open_store(tmp_path / "events.db") as store:
        client = refusing_client(loopback, monkeypatch, store)
        with pytest.raises(AuthenticationFailed):
            client.fork().call("target", [{"role": "user", "content": "ahead"}])
        assert store.events(types=["model.error"]) == []
        for text in ("first", "second"):
            with pytest.raises(AuthenticationFailed):
                client.call("target", [{"role": "user", "content": text}], step=1)
        (logged,) = store.events(types=["model.error"])
    assert len(loopback.requests) == 1  # only the fork's call was sent
    assert logged.payload["kind"] == "AuthenticationFailed" and logged.step == 1
    assert "refused the key in OPENAI_API_KEY" in logged.payload["error"]
    assert KEY not in logged.payload["error"]
