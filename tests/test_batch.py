"""mode = "batch": the demo trained through the providers' batch APIs (a loopback fake of both,
driven by the real SDKs) equals a normal run, at half the price, and a run killed while its
batch is pending resumes by polling that batch, never by submitting it again."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batch_fake import BatchFake, batch_fake  # noqa: F401 (the fixture)
from click.testing import CliRunner
from conftest import copy_repo, git
from helpers import first_rows, start_train, train_env
from loopback import serving

from skillvc.cli import cli
from skillvc.core.config import ModelConfig
from skillvc.core.store import open_store
from skillvc.models.backends.base import CallRequest
from skillvc.models.batch import BatchExecutor, provider_for
from skillvc.models.calls import model_params
from skillvc.models.executors import Call, run_call
from skillvc.training.loop import train
from skillvc.workspace.workspace import open_workspace

SKILL = "skills/acme-returns/SKILL.md"


def target(fake: BatchFake, provider: str, mode: str) -> dict[str, Any]:
    if provider == "openai":
        section = {"model": "openai:gpt-4o-mini", "base_url": f"{fake.url}/v1"}
    else:
        section = {"model": "anthropic:claude-haiku-4-5", "base_url": fake.url}
    return section | {"mode": mode, "batch_poll_s": 0.01}


def outcome(repo: Path) -> dict[str, Any]:
    """What must not depend on how the calls were made (costs aside)."""
    with open_store(repo / ".skillvc/events.db") as store:
        gates = store.query(
            "SELECT step, kind, decision, edits, val_before, val_after FROM gates ORDER BY event_id"
        )
        seqs = store.query("SELECT seq, type FROM events WHERE seq IS NOT NULL ORDER BY seq")
        rollouts = store.query(
            "SELECT json_extract(payload, '$.item_id') AS item, "
            "json_extract(payload, '$.hard') AS hard FROM events WHERE type = 'rollout' "
            "ORDER BY id"
        )
    return {
        "skill": (repo / SKILL).read_bytes(),
        "trees": git(repo, "log", "--format=%T", "main").split(),
        "gates": gates,
        "seqs": seqs,
        "rollouts": rollouts,
    }


# Batch-mode targets send nothing ahead (training/loop.py); the sync runs they are compared
# with do not speculate either, so both make exactly the same calls.
NO_SPECULATION = {"speculate": False}


def target_cost(repo: Path) -> float:
    with open_store(repo / ".skillvc/events.db") as store:
        return store.query(
            "SELECT SUM(json_extract(payload, '$.cost_usd')) AS c FROM events "
            "WHERE type = 'model.call' AND json_extract(payload, '$.role') = 'target'"
        )[0]["c"]


def submitted(repo: Path) -> list[str]:
    with open_store(repo / ".skillvc/events.db") as store:
        return [str(e.payload["batch_id"]) for e in store.events(types=["batch.submitted"])]


@pytest.fixture(scope="module")
def normal(demo_seed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The demo trained once on a fake's synchronous OpenAI API: what every batched run of
    this file must equal (its outcome, and twice its target cost)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_API_KEY", "sk-loopback-openai")
        for fake in serving(BatchFake()):
            repo = copy_repo(demo_seed, tmp_path_factory.mktemp("batch") / "sync")
            overrides = {"target": target(fake, "openai", "sync"), "train": NO_SPECULATION}
            train(open_workspace(repo), overrides=overrides)
            assert fake.sync_calls > 0 and sum(fake.creates.values()) == 0
            yield {"outcome": outcome(repo), "target_cost": target_cost(repo)}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake's keys, for every test of this file (each speaks to the fake or needs none)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-loopback")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_demo_trains_through_batches_to_the_result_of_a_normal_run_at_half_the_price(
    provider: str,
    batch_fake: BatchFake,  # noqa: F811
    demo_seed: Path,
    normal: dict[str, Any],
    tmp_path: Path,
) -> None:
    batched = copy_repo(demo_seed, tmp_path / "batch")
    train(open_workspace(batched), overrides={"target": target(batch_fake, provider, "batch")})
    assert batch_fake.sync_calls == 0
    assert outcome(batched) == normal["outcome"]
    ids = submitted(batched)
    assert batch_fake.creates[provider] == len(ids) == len(set(ids)) > 1  # one batch a wave
    if provider == "openai":  # same model, same tokens: exactly half the price
        assert target_cost(batched) == pytest.approx(normal["target_cost"] / 2)


def test_a_request_the_batch_failed_is_a_model_error_of_that_item(
    batch_fake: BatchFake,  # noqa: F811
    demo_seed: Path,
    tmp_path: Path,
) -> None:
    failed: set[str] = set()

    def fails(custom_id: str) -> bool:
        if custom_id.startswith("0"):
            failed.add(custom_id)
            return True
        return False

    batch_fake.fails = fails
    repo = copy_repo(demo_seed, tmp_path / "r")
    section = target(batch_fake, "openai", "batch")
    # The bundle gate: attribution's extra versions would meet the scripted failure in more
    # calls of one chunk than the failure rate allows; the batch's error handling is tested.
    train(
        open_workspace(repo),
        # No slow update: its gate's few calls may meet two scripted failures, and the run
        # then stops for the failure rate (which the prompts' text decides, not this test).
        overrides={
            "target": section,
            # A chunk of a gate may meet several (3 of 8 at one stop of the prompts' text):
            # the failure rate is not what this test is about.
            "train": {
                "epochs": 1,
                "attribution": False,
                "slow_update": False,
                "max_failure_rate": 0.5,
            },
        },
    )
    with open_store(repo / ".skillvc/events.db") as store:
        errors = [e.payload for e in store.events(types=["model.error"])]
        scored = store.query(
            "SELECT COUNT(*) AS n FROM events WHERE type = 'rollout' AND "
            "json_extract(payload, '$.call_key') IN (SELECT value FROM json_each(?))",
            [__import__("json").dumps(sorted(failed))],
        )[0]["n"]
    assert failed and {e["cache_key"] for e in errors} == failed
    assert {e["kind"] for e in errors} == {"BatchError"}
    assert "scripted batch failure" in errors[0]["error"]
    assert scored == 0  # a failed request is never a score


def test_a_run_killed_while_its_batch_is_pending_resumes_without_resubmitting(
    batch_fake: BatchFake,  # noqa: F811
    demo_seed: Path,
    normal: dict[str, Any],
    tmp_path: Path,
) -> None:
    repo = copy_repo(demo_seed, tmp_path / "killed")
    toml = repo / "skillvc.toml"
    toml.write_text(
        toml.read_text().replace(
            '[target]\nmodel = "sim:support"\n',
            f'[target]\nmodel = "openai:gpt-4o-mini"\nbase_url = "{batch_fake.url}/v1"\n'
            'mode = "batch"\nbatch_poll_s = 0.01\n',
        )
    )
    batch_fake.hold = True  # the first batch stays pending, as one that takes hours
    proc = start_train(repo, train_env(), out=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (repo / ".skillvc/events.db").exists() or not submitted(repo):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.2)  # it is polling now
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    (pending,) = submitted(repo)
    assert batch_fake.creates["openai"] == 1

    batch_fake.hold = False
    train(open_workspace(repo))
    ids = submitted(repo)
    assert ids[0] == pending and len(ids) == len(set(ids)) > 1  # the resumed run batches too
    assert batch_fake.creates["openai"] == len(ids)  # zero resubmissions
    assert batch_fake.sync_calls == 0  # ...and makes no call outside a batch
    assert outcome(repo) == normal["outcome"]
    assert target_cost(repo) == pytest.approx(normal["target_cost"] / 2)


class Crash(BaseException):
    """The process dying right after the create call, before its event is written."""


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_crash_between_create_and_its_event_is_reconciled_from_the_provider(
    provider: str,
    batch_fake: BatchFake,  # noqa: F811
    tmp_path: Path,
) -> None:
    config = ModelConfig(**target(batch_fake, provider, "batch"))
    real = provider_for(config)

    class CrashesAfterCreate(type(real)):  # type: ignore[misc]
        def create(self, requests: Any, wave: str) -> str:
            super().create(requests, wave)
            raise Crash

    skill = "---\nname: acme\ndescription: Acme support.\n---\n# Acme\n"

    def ask(question: str) -> Call:
        messages = ({"role": "system", "content": skill}, {"role": "user", "content": question})
        return Call(config, CallRequest("target", config.model, messages, model_params(config)))

    calls = [ask(q) for q in ("Where is my order?", "Can I return shoes?", "Do you ship to Mars?")]
    with open_store(tmp_path / "events.db") as store:
        with pytest.raises(Crash):
            BatchExecutor(store, CrashesAfterCreate(real.backend), poll_s=0.01).map(run_call, calls)
        assert submitted_in(store) == [] and batch_fake.creates[provider] == 1

        results = BatchExecutor(store, provider_for(config), poll_s=0.01).map(run_call, calls)
        assert batch_fake.creates[provider] == 1  # found, not created again
        (batch_id,) = submitted_in(store)
        created = batch_fake.openai if provider == "openai" else batch_fake.anthropic
        assert list(created) == [batch_id]
        assert [r.text for r in results] == [
            batch_fake.responder(
                {"messages": [{"role": "system", "content": skill}, {"role": "user", "content": q}]}
            )
            for q in ("Where is my order?", "Can I return shoes?", "Do you ship to Mars?")
        ]
        # killed while recording those results: the calls left are answered by the same batch
        rest = BatchExecutor(store, provider_for(config), poll_s=0.01).map(run_call, calls[1:])
        assert rest == results[1:] and batch_fake.creates[provider] == 1


def submitted_in(store: Any) -> list[str]:
    return [str(e.payload["batch_id"]) for e in store.events(types=["batch.submitted"])]


def test_the_optimizer_s_reflections_go_out_as_batches_too(
    batch_fake: BatchFake,  # noqa: F811
    demo_seed: Path,
    tmp_path: Path,
) -> None:
    def roles(mode: str) -> dict[str, Any]:
        section = target(batch_fake, "openai", mode)
        return {"target": section, "optimizer": section | {"temperature": 0.7}}

    seed = copy_repo(demo_seed, tmp_path / "seed")
    first_rows(seed, 30, 20, 10)  # the same paths in half the calls; once, so one base commit
    normal = copy_repo(seed, tmp_path / "sync")
    train(open_workspace(normal), overrides=roles("sync") | {"train": NO_SPECULATION})
    sync_calls = batch_fake.sync_calls

    batched = copy_repo(seed, tmp_path / "batch")
    train(open_workspace(batched), overrides=roles("batch"))
    assert outcome(batched) == outcome(normal)
    with open_store(batched / ".skillvc/events.db") as store:
        optimizer_calls = store.query(
            "SELECT COUNT(*) AS n FROM events WHERE type = 'model.call' "
            "AND json_extract(payload, '$.role') = 'optimizer'"
        )[0]["n"]
    made_sync = batch_fake.sync_calls - sync_calls  # repairs, slow and meta updates
    assert optimizer_calls > made_sync
    assert batch_fake.creates["openai"] == len(submitted(batched))


def test_batch_mode_for_a_model_without_a_batch_api_is_one_clear_error(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = copy_repo(demo_seed, tmp_path / "r")
    toml = repo / "skillvc.toml"
    toml.write_text(
        toml.read_text().replace(
            '[target]\nmodel = "sim:support"\n', '[target]\nmodel = "sim:support"\nmode = "batch"\n'
        )
    )
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["train", "-q"])
    assert result.exit_code == 5
    assert (
        '[target] mode = "batch" needs an openai: or anthropic: model (not Azure, not the '
        "command harness); this one is 'sim:support'." in result.output
    )
    assert not (repo / ".skillvc/events.db").exists() or not submitted(repo)
