"""`skillvc train` end to end on the simulator: commits, refs, resume, locking, ablations."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import copy_repo, git
from helpers import (
    event_count,
    first_rows,
    kill_at_fractions,
    priced_copies,
    start_train,
    train_env,
    train_to_the_end,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from skillvc.cli import cli
from skillvc.core.errors import BudgetExceeded, ConfigError, DirtySkillFile, Locked
from skillvc.core.store import open_store
from skillvc.training.evaluate import EPS, scan
from skillvc.training.loop import train
from skillvc.training.schedule import learning_rate
from skillvc.workspace.workspace import open_workspace

SKILL = "skills/acme-returns/SKILL.md"


@pytest.fixture(scope="module")
def seed_repo(demo_seed: Path) -> Path:
    return demo_seed


def history(repo: Path) -> dict:
    """What must be identical between an interrupted and an uninterrupted run."""
    accepted = git(repo, "log", "--format=%T%x00%B%x01", "main").split("\x01")
    rejected_refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/skillvc/").split()
    rejected = {
        ref.split("/", 4)[-1]: git(repo, "log", "-1", "--format=%T%x00%B", ref)
        for ref in rejected_refs
    }
    with open_store(repo / ".skillvc/events.db") as store:
        gates = store.query(
            "SELECT run_id, step, kind, decision, edits, val_before, val_after FROM gates "
            "ORDER BY run_id, event_id"
        )
        rejected_edits = store.query("SELECT edit_id FROM rejected_edits ORDER BY gate_event_id")
        calls = store.query(
            "SELECT COUNT(*) AS n, COUNT(DISTINCT key) AS k FROM events WHERE type = 'model.call'"
        )[0]
        seqs = store.query(
            "SELECT run_id, seq, type FROM events WHERE seq IS NOT NULL ORDER BY run_id, seq"
        )
    return {
        "skill": (repo / SKILL).read_bytes(),
        "accepted": accepted,
        "rejected": rejected,
        "gates": gates,
        "rejected_edits": rejected_edits,
        "calls": calls,
        "seqs": seqs,
    }


def test_learning_rate_schedules() -> None:
    assert [learning_rate(s, 9, 4, 2, "cosine") for s in range(1, 10)] == [
        4,
        4,
        4,
        3,
        3,
        3,
        2,
        2,
        2,
    ]
    assert [learning_rate(s, 5, 4, 2, "linear") for s in range(1, 6)] == [4, 4, 3, 3, 2]
    assert {learning_rate(s, 5, 4, 2, "constant") for s in range(1, 6)} == {4}
    assert learning_rate(1, 1, 4, 2, "cosine") == 4


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from([0.0, 1.0]), st.floats(0, 1)),
            st.one_of(st.none(), st.sampled_from([0.0, 1.0]), st.floats(0, 1)),
        ),
        min_size=1,
        max_size=40,
    ),
    st.integers(1, 12),
)
def test_early_stopping_reaches_the_full_evaluations_decision(pairs, chunk) -> None:
    current = [c for c, _ in pairs]
    candidate = [d for _, d in pairs]
    asked: list[int] = []

    def evaluate(a: int, b: int):
        asked.extend(range(a, b))
        return candidate[a:b]

    early_diff, evaluated, stopped = scan(current, evaluate, early_stop=True, chunk=chunk)
    full_diff, _, _ = scan(current, lambda a, b: candidate[a:b], early_stop=False, chunk=chunk)
    assert (early_diff > EPS) == (full_diff > EPS)
    assert asked == list(range(evaluated))
    if stopped:
        assert evaluated < len(pairs) and full_diff <= EPS


def test_demo_training_commits_accepted_edits_and_keeps_rejected_ones(
    seed_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = copy_repo(seed_repo, tmp_path / "r")
    seed = git(repo, "rev-parse", "HEAD")
    lines: list[str] = []
    summary = train(open_workspace(repo), progress=lines.append)

    assert summary.status == "finished" and summary.steps == 9
    assert summary.accepted >= 2 and summary.rejected >= 2
    assert summary.test > summary.baseline_test
    assert summary.best_val > summary.baseline_val

    commits = git(repo, "rev-list", f"{seed}..main").split()
    # Steps and slow updates are counted apart; each accepted candidate of either is a commit.
    assert len(commits) == summary.accepted + summary.slow_updates_accepted
    for sha in commits:
        assert git(repo, "show", "--name-only", "--format=", sha) == SKILL
        body = git(repo, "log", "-1", "--format=%B", sha)
        assert f"Skillvc-Run: {summary.run_id}" in body
        assert f"Skillvc-Event: {summary.run_id}/" in body
        assert "Gate: val hard" in body and "Model calls:" in body
    assert git(repo, "status", "--porcelain") == ""
    assert git(repo, "hash-object", SKILL) == git(repo, "rev-parse", f"HEAD:{SKILL}")

    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/skillvc/rejected/").split()
    assert len(refs) == summary.rejected + summary.slow_updates_rejected
    assert git(repo, "rev-parse", "HEAD") == commits[0]  # no branch moved for rejections
    diff = git(repo, "diff", f"{refs[0]}~1", refs[0], "--", SKILL)
    assert diff.startswith("diff --git")
    tags = git(repo, "tag", "--list", "skillvc/*").split()
    assert f"skillvc/{summary.run_id}/best" in tags
    assert f"skillvc/{summary.run_id}/epoch-3" in tags

    assert any("step 1/9 lr 4" in line and "proposed" in line for line in lines)

    monkeypatch.chdir(repo)
    runs = json.loads(CliRunner().invoke(cli, ["runs", "--json"]).output)
    assert runs[0]["run"] == summary.run_id and runs[0]["status"] == "finished"
    assert runs[0]["accepted"] == summary.accepted and runs[0]["test"] == summary.test
    rejected = json.loads(CliRunner().invoke(cli, ["log", "--rejected", "--json"]).output)
    assert len(rejected) == summary.rejected + summary.slow_updates_rejected
    assert all(e["ref"].startswith("refs/skillvc/rejected/") for e in rejected)


def test_dirty_skill_file_is_refused_and_nothing_is_written(seed_repo: Path, tmp_path: Path):
    repo = copy_repo(seed_repo, tmp_path / "r")
    (repo / SKILL).write_text("my own edit\n")
    with pytest.raises(DirtySkillFile):
        train(open_workspace(repo))
    assert (repo / SKILL).read_text() == "my own edit\n"
    assert git(repo, "rev-list", "--count", "HEAD") == "1"


def test_resume_with_changed_settings_and_no_step_done_starts_over(
    seed_repo: Path, tmp_path: Path
) -> None:
    # Changed deliberately (issue 24): an override on an unfinished run used to be refused
    # outright; a run with no step done now starts over with it, the old one abandoned.
    repo = copy_repo(seed_repo, tmp_path / "r")
    with open_store(repo / ".skillvc/events.db") as store:
        store.append(
            "run.started", {"config": {}, "base_commit": "x", "skill": "y"}, run_id="run-old", seq=1
        )
    summary = train(open_workspace(repo), overrides={"train": {"epochs": 1}})
    assert summary.status == "finished" and not summary.resumed
    with open_store(repo / ".skillvc/events.db") as store:
        (gone,) = store.events(types=["run.abandoned"])
    assert gone.run_id == "run-old" and gone.payload["by"] == summary.run_id
    assert "train.epochs: 4 -> 1" in gone.payload["changes"]


def test_budget_stops_at_a_step_boundary_and_resumes(seed_repo: Path, tmp_path: Path) -> None:
    full, stopped = priced_copies(seed_repo, tmp_path)
    reference = train(open_workspace(full))

    with pytest.raises(BudgetExceeded, match=r"stopped after step 1: it has cost \$0\.0\d+ of"):
        train(open_workspace(stopped), budget_usd=0.01)
    with open_store(stopped / ".skillvc/events.db") as store:
        row = store.query("SELECT status, baseline_val FROM runs")[0]
        assert row == {"status": "stopped", "baseline_val": reference.baseline_val}
        from skillvc.review.report import render_markdown, run_report

        markdown = render_markdown(run_report(store, None, SKILL))
    assert "(stopped)" in markdown
    assert (
        "Stopped: budget $0.0100 reached after step 1. Resume it with `skillvc train "
        "--budget-usd N` (a budget above its cost so far)." in markdown
    )
    resumed = train(open_workspace(stopped), budget_usd=100.0)
    assert resumed.resumed and resumed.run_id == reference.run_id
    assert history(stopped)["accepted"] == history(full)["accepted"]
    assert (stopped / SKILL).read_bytes() == (full / SKILL).read_bytes()


def _reflect_prompt(rejected: list[dict]) -> list[dict[str, str]]:
    from skillvc.models import prompts, simworld

    items = [it for it in simworld.generate_items(200, seed=3) if it["target"] == "replace"]
    cases = [
        {
            "id": it["id"],
            "input": it["input"],
            "output": "<answer>refund</answer>",
            "expected": it["target"],
            "score": 0.0,
        }
        for it in items[:16]
    ]
    return prompts.render(
        "reflect",
        n_cases="16",
        kind="failures",
        kind_note="",
        budget="4",
        skill="# Skill\n\n## Policies\n- Be kind.\n",
        cases=cases,
        rejected=rejected,
        meta="(none yet)",
    )


def test_simulated_optimizer_uses_the_rejected_buffer() -> None:
    from skillvc.models.backends import CallRequest
    from skillvc.models.backends.sim import SimBackend

    def proposals(rejected: list[dict]) -> list[str]:
        req = CallRequest("optimizer", "sim:support", tuple(_reflect_prompt(rejected)))
        return [
            e["content"] for e in json.loads(SimBackend("sim:support").complete(req).text)["edits"]
        ]

    rule = "- Damaged on arrival: offer a replacement, not a refund."
    assert rule in proposals([])  # what the failures call for
    alone = {"op": "add", "content": rule, "anchor": "## Policies", "candidate_size": 1}
    assert rule not in proposals([alone])  # refused on its own before: not proposed again
    bundled = dict(alone, candidate_size=3)
    assert rule in proposals([bundled])  # strong evidence again after a bundled rejection


def test_no_buffer_shows_later_reflections_nothing(seed_repo: Path, tmp_path: Path) -> None:
    def rejected_sections(repo: Path) -> list[str]:
        from skillvc.models.prompts import section

        with open_store(repo / ".skillvc/events.db") as store:
            prompts = [
                json.loads(store.get_blob(r["prompt_blob"]))[1]["content"]
                for r in store.query(
                    "SELECT prompt_blob FROM model_calls WHERE role = 'optimizer' ORDER BY event_id"
                )
            ]
        return [
            section(p, "rejected_edits").strip() for p in prompts if "skillvc-prompt: reflect" in p
        ]

    with_buffer = copy_repo(seed_repo, tmp_path / "a")
    without = copy_repo(seed_repo, tmp_path / "b")
    train(open_workspace(with_buffer))
    train(open_workspace(without), overrides={"train": {"buffer": False}})
    assert any(s not in ("", "(none)") for s in rejected_sections(with_buffer))
    assert set(rejected_sections(without)) == {"(none)"}


def test_kill_and_resume_equals_an_uninterrupted_run(seed_repo: Path, tmp_path: Path) -> None:
    env = train_env(SKILLVC_SIM_LATENCY_MS="15")
    # 30/20/10 rows: 6 steps over 3 epochs with accepted and rejected steps and slow updates,
    # in half the calls of the whole demo.
    seed = copy_repo(seed_repo, tmp_path / "seed")
    first_rows(seed, 30, 20, 10)  # once: both copies start from the same commit
    reference = copy_repo(seed, tmp_path / "reference")
    train_to_the_end(reference, env)
    expected = history(reference)
    total_events = event_count(reference / ".skillvc/events.db")

    repo = copy_repo(seed, tmp_path / "killed")
    journal = tmp_path / "journal.txt"
    env["SKILLVC_SIM_JOURNAL"] = str(journal)

    def second_trainer(fraction: float) -> None:
        if fraction == 0.45:  # while it runs, a second trainer is refused
            second = subprocess.run(
                [sys.executable, "-m", "skillvc", "train"],
                cwd=repo,
                env=env,
                capture_output=True,
                text=True,
            )
            assert second.returncode == Locked.exit_code
            assert "Another skillvc train is running in this repository" in second.stderr

    # Killed first while a rejected candidate's commit is written beside the loop, then at
    # fractions of the run.
    kills = _kill_while_a_rejected_commit_is_written(repo, env)
    assert kills == 1
    kills += kill_at_fractions(repo, env, total_events, (0.15, 0.45, 0.75), second_trainer)
    assert kills >= 3
    train_to_the_end(repo, env)

    got = history(repo)
    for key in ("skill", "accepted", "rejected", "gates", "rejected_edits", "seqs"):
        assert got[key] == expected[key], key
    assert got["calls"] == expected["calls"]
    assert got["calls"]["n"] == got["calls"]["k"]  # every call recorded once
    made = journal.read_text().split()
    # Only calls in flight at a kill (answered but not yet recorded) can be made again: up to
    # 8 workers of the loop and 8 sending calls ahead of it (speculation, prefetches).
    assert len(made) - len(set(made)) <= kills * 16
    assert len(set(made)) == expected["calls"]["n"]
    assert git(repo, "status", "--porcelain") == ""


def test_a_rejected_candidates_commit_is_logged_at_the_next_gate_under_its_own_step(
    seed_repo: Path, tmp_path: Path
) -> None:
    repo = copy_repo(seed_repo, tmp_path / "r")
    first_rows(repo, 30, 20, 10)
    train_to_the_end(repo, train_env())
    with open_store(repo / ".skillvc/events.db") as store:
        rows = store.query(
            "SELECT seq, step, epoch, type, payload FROM events WHERE seq IS NOT NULL ORDER BY seq"
        )
    done = {json.loads(r["payload"])["gate_id"]: r for r in rows if r["type"] == "commit.done"}
    type_at = {r["seq"]: r["type"] for r in rows}
    rejected = 0
    for intent in (r for r in rows if r["type"] == "commit.intent"):
        payload = json.loads(intent["payload"])
        logged = done[payload["gate_id"]]
        assert (logged["step"], logged["epoch"]) == (intent["step"], intent["epoch"])
        sha = json.loads(logged["payload"])["sha"]
        if payload["accepted"]:
            assert logged["seq"] == intent["seq"] + 1
            continue
        rejected += 1
        # Written while the loop went on: logged before the next gate or the run's end.
        assert logged["seq"] > intent["seq"] + 1
        assert type_at[logged["seq"] + 1] in ("gate", "run.finished")
        assert git(repo, "rev-parse", payload["ref"]) == sha
    assert rejected >= 2


def _rejected_commits_pending(db: Path) -> list[int]:
    """The gates whose rejected candidate's commit is logged as intended, not as done (read
    only, beside a trainer that writes the log)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            rows = conn.execute(
                "SELECT json_extract(payload, '$.gate_id') FROM events i "
                "WHERE type = 'commit.intent' AND NOT json_extract(payload, '$.accepted') "
                "AND NOT EXISTS (SELECT 1 FROM events d WHERE d.type = 'commit.done' "
                "AND d.key = 'gate:' || json_extract(i.payload, '$.gate_id'))"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []
    return [int(gate) for (gate,) in rows]


def _kill_while_a_rejected_commit_is_written(repo: Path, env: dict[str, str]) -> int:
    """SIGKILL ``skillvc train`` once a rejected candidate's commit is pending; 1 if it was
    (0: the run ended first)."""
    db = repo / ".skillvc" / "events.db"
    proc = start_train(repo, env)
    deadline = time.monotonic() + 120
    while proc.poll() is None and not _rejected_commits_pending(db):
        assert time.monotonic() < deadline
        time.sleep(0.005)
    killed = proc.poll() is None
    if killed:
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    return int(killed)


def test_edits_that_break_the_format_rules_are_refused() -> None:
    from skillvc.skill.edits import Edit
    from skillvc.skill.skilldoc import SkillDocument
    from skillvc.training.optimize import apply_selected

    doc = SkillDocument.parse(
        b"---\nname: acme\ndescription: Acme support.\n---\n# Acme\n\n## Policies\n- Be kind.\n"
    )
    small = Edit("add", content="- Be brief.", anchor="## Policies")
    large = Edit("add", content="- " + "very long rule " * 10)
    result = apply_selected(
        doc, [large, small], "skills/acme/SKILL.md", max_bytes=len(doc.render()) + 20
    )
    assert result.applied == (small,)
    (refused,) = result.unmatched
    assert refused.edit == large and refused.reason == "format"
    assert "bytes" in refused.detail


def test_a_budget_needs_prices_for_every_model(seed_repo: Path, tmp_path: Path) -> None:
    repo = copy_repo(seed_repo, tmp_path / "r")
    with pytest.raises(ConfigError, match=r"--budget-usd needs a price for openai:mystery-1"):
        train(
            open_workspace(repo),
            overrides={"target": {"model": "openai:mystery-1"}},
            budget_usd=5.0,
        )
    with open_store(repo / ".skillvc/events.db") as store:
        assert store.query("SELECT COUNT(*) AS n FROM model_calls")[0]["n"] == 0


def test_repeated_samples_average_scores_and_resume_like_single_ones(
    seed_repo: Path, tmp_path: Path
) -> None:
    repo = copy_repo(seed_repo, tmp_path / "r")
    summary = train(open_workspace(repo), overrides={"train": {"samples": 3, "epochs": 1}})
    with open_store(repo / ".skillvc/events.db") as store:
        target_calls = store.query(
            "SELECT json_extract(payload, '$.sample') AS sample FROM events "
            "WHERE type = 'model.call' AND json_extract(payload, '$.role') = 'target'"
        )
        samples = {r["sample"] for r in target_calls}
        scores = {
            r["hard"]
            for r in store.query(
                "SELECT json_extract(payload, '$.hard') AS hard FROM events WHERE type = 'rollout'"
            )
        }
    assert samples == {0, 1, 2}
    assert scores - {0.0, 1.0}  # some items score 1/3 or 2/3: the noise differs per sample
    assert all(abs(v * 3 - round(v * 3)) < 1e-9 for v in scores)
    assert summary.calls_by_role["target"] % 3 == 0


def test_one_sided_p_values_by_hand() -> None:
    from skillvc.training.evaluate import one_sided_p_value

    # Sign test on flipped items: 5 up, 0 down -> 1/32; 3 up, 1 down -> (4 + 1) / 16.
    assert one_sided_p_value([1, 1, 1, 1, 1, 0, 0]) == (1 / 32, "sign")
    assert one_sided_p_value([1, 1, 1, -1, 0]) == (5 / 16, "sign")
    assert one_sided_p_value([0, 0, 0]) == (None, None)
    p, test = one_sided_p_value([0.5, 0.5, 0.25, 0.75])  # soft scores: normal approximation
    assert test == "normal" and p < 0.01
    p, _ = one_sided_p_value([0.5, -0.5, 0.25, -0.25])
    assert p == pytest.approx(0.5)


def test_gate_confidence_rejects_gains_that_are_not_significant(
    seed_repo: Path, tmp_path: Path
) -> None:
    plain = copy_repo(seed_repo, tmp_path / "plain")
    strict = copy_repo(seed_repo, tmp_path / "strict")
    # The paper's bundle gate (attribution off), where gate_confidence is the only test; with
    # attribution the gate also stops early once significance is out of reach (no p-value).
    loose = train(open_workspace(plain), overrides={"train": {"attribution": False}})
    careful = train(
        open_workspace(strict),
        overrides={"train": {"gate_confidence": 0.99, "attribution": False}},
    )
    assert careful.accepted < loose.accepted
    with open_store(strict / ".skillvc/events.db") as store:
        gates = [
            json.loads(r["payload"])
            for r in store.query("SELECT payload FROM events WHERE type = 'gate'")
        ]
    refused = [
        g
        for g in gates
        if g["decision"] == "rejected"
        and g["p_value"] is not None
        and g["after"]["mean"] > g["before"]["mean"]
    ]
    assert refused and all(g["p_value"] > 0.01 for g in refused)
    assert all(g["p_value"] <= 0.01 for g in gates if g["decision"] == "accepted")
    body = git(strict, "log", "-1", "--format=%B", "main")
    assert "test)" in body and "p = " in body


def test_demo_command_shows_runs_commits_rejections_and_next_steps(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "acme"), "--quiet"])
    assert result.exit_code == 0, result.output
    out = result.output
    for heading in (
        "== Runs (skillvc runs) ==",
        "== Accepted edits are commits",
        "== Rejected candidates (skillvc log --rejected -n 3) ==",
        "Try next:",
    ):
        assert heading in out
    assert "finished" in out and "refs/skillvc/rejected/" in out
    assert f"cd {tmp_path / 'acme'}" in out
    again = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "acme")])
    assert again.exit_code == 4 and "is not empty." in again.output


def test_a_failed_judge_call_is_an_item_error_not_a_score(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from skillvc.core.config import ModelConfig
    from skillvc.models.calls import ModelClient
    from skillvc.models.harness import get_backend
    from skillvc.tasks.scorers import get_scorer
    from skillvc.tasks.taskset import TaskItem
    from skillvc.training.evaluate import Evaluator

    target = ModelConfig(model="sim:support")
    # A judge that cannot be reached: a closed port on loopback, no retries.
    judge = ModelConfig(
        model="openai:gpt-4o-mini",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="SKILLVC_TEST_KEY",
        max_retries=0,
        timeout_s=2,
    )
    os.environ["SKILLVC_TEST_KEY"] = "sk-test-judge-0000000000"
    try:
        with open_store(tmp_path / "events.db") as store, ThreadPoolExecutor(2) as pool:
            client = ModelClient(
                store,
                {"target": get_backend(target), "judge": get_backend(judge)},
                {"target": target, "judge": judge},
            )

            def ask_judge(system: str, user: str) -> str:
                return client.call(
                    "judge",
                    [{"role": "system", "content": system}, {"role": "user", "content": user}],
                ).text

            scorer = get_scorer("judge", {"rubric": "Is it right?"}, judge=ask_judge)
            item = TaskItem(
                id="t1",
                input="Issue: late. Days since delivery: 3. Tier: gold.",
                targets=("store-credit",),
            )
            (rollout,) = Evaluator(client, scorer, pool, judge=ask_judge).run(
                "# S\n", [item], "val"
            )
            assert not rollout.ok and rollout.hard is None
            assert "could not be reached" in (rollout.error or "")
            assert (
                store.query("SELECT COUNT(*) AS n FROM events WHERE type = 'model.error'")[0]["n"]
                == 1
            )
    finally:
        del os.environ["SKILLVC_TEST_KEY"]


def test_out_of_range_flags_are_usage_errors_naming_the_flag(
    seed_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = copy_repo(seed_repo, tmp_path / "r")
    monkeypatch.chdir(repo)
    for args, flag in (
        (["--epochs", "0"], "--epochs"),
        (["--budget-usd", "-1"], "--budget-usd"),
        (["--gate-confidence", "1"], "--gate-confidence"),
    ):
        result = CliRunner().invoke(cli, ["train", *args])
        assert result.exit_code == 2 and f"Invalid value for '{flag}'" in result.output
    with open_store(repo / ".skillvc/events.db") as store:
        assert store.count() == 0
