"""Regression tests for review fixes in training, resume, reporting and the CLI."""

from __future__ import annotations

import hashlib
import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import copy_repo, git

from skillvc.cli import cli
from skillvc.core.config import ModelConfig
from skillvc.core.errors import (
    BackendError,
    BudgetExceeded,
    ConfigError,
    RunFailed,
    StateConflict,
    TaskSetError,
)
from skillvc.core.store import open_store
from skillvc.models import prompts
from skillvc.models.backends.base import CallRequest, CallResult
from skillvc.models.backends.sim import SimBackend
from skillvc.models.calls import ModelClient, Reply, RoleStats
from skillvc.review.report import SETTINGS, render_markdown
from skillvc.skill.edits import Edit
from skillvc.skill.skilldoc import SkillDocument
from skillvc.tasks.scorers import get_scorer
from skillvc.tasks.taskset import TaskItem
from skillvc.training import commits
from skillvc.training.evaluate import Evaluator
from skillvc.training.loop import train
from skillvc.training.optimize import apply_selected
from skillvc.training.runlog import RunLog
from skillvc.training.setup import find_unfinished
from skillvc.training.state import RunState
from skillvc.workspace.workspace import open_workspace

SKILL = "skills/acme-returns/SKILL.md"
PRICED = '\n[prices."sim:support"]\ninput = 1.0\noutput = 1.0\n'


@pytest.fixture(scope="module")
def seed_repo(demo_seed: Path) -> Path:
    return demo_seed


def priced_copy(seed: Path, dest: Path, extra: str = "") -> Path:
    shutil.copytree(seed, dest)
    with open(dest / "skillvc.toml", "a") as fh:
        fh.write(PRICED + extra)
    git(dest, "commit", "-qam", "price the simulator")
    return dest


def stopped_run(seed: Path, dest: Path) -> Path:
    """A repo whose run stopped on its budget after step 1 (an unfinished run)."""
    repo = priced_copy(seed, dest)
    with pytest.raises(BudgetExceeded):
        train(open_workspace(repo), budget_usd=0.01)
    return repo


def model_calls(repo: Path) -> int:
    with open_store(repo / ".skillvc/events.db") as store:
        return int(
            store.query("SELECT COUNT(*) AS n FROM events WHERE type = 'model.call'")[0]["n"]
        )


# -- resume ------------------------------------------------------------------------------------


def test_a_run_superseded_by_new_is_not_resumed(tmp_path: Path) -> None:
    with open_store(tmp_path / "events.db") as store:
        store.append("run.started", {"config": {}}, run_id="run-a", seq=1)
        assert find_unfinished(store) is not None
        store.append("run.started", {"config": {}}, run_id="run-b", seq=1)
        store.append("run.finished", {}, run_id="run-b", seq=2)
        # run-a was abandoned by --new; after run-b finished there is nothing to resume.
        assert find_unfinished(store) is None


def test_changed_task_set_is_refused_on_resume(seed_repo: Path, tmp_path: Path) -> None:
    repo = stopped_run(seed_repo, tmp_path / "r")
    val = repo / "evals/val.jsonl"
    val.write_text("".join(val.read_text().splitlines(keepends=True)[:-1]))
    git(repo, "commit", "-qam", "drop a val item")
    calls = model_calls(repo)
    with pytest.raises(TaskSetError, match="task set changed since run"):
        train(open_workspace(repo), budget_usd=100.0)
    assert model_calls(repo) == calls


def test_a_run_started_under_another_derivation_is_refused_on_resume(
    seed_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The evidence and worked examples skillvc derives from the same cases changed since the
    # run started (an upgrade): its replay would send other prompts, so it is not resumed.
    repo = stopped_run(seed_repo, tmp_path / "r")
    monkeypatch.setattr(prompts, "DERIVED", "a later derivation")
    calls = model_calls(repo)
    with pytest.raises(ConfigError, match="prompt templates changed since run"):
        train(open_workspace(repo), budget_usd=100.0)
    assert model_calls(repo) == calls


def test_moved_branch_is_refused_before_any_call(seed_repo: Path, tmp_path: Path) -> None:
    repo = stopped_run(seed_repo, tmp_path / "r")
    left_at = git(repo, "rev-parse", "HEAD")
    (repo / "NOTES.md").write_text("mine\n")
    git(repo, "add", "NOTES.md")
    git(repo, "commit", "-qm", "my own commit")
    calls = model_calls(repo)
    with pytest.raises(StateConflict, match="moved since run") as info:
        train(open_workspace(repo), budget_usd=100.0)
    assert left_at[:10] in info.value.hint
    assert model_calls(repo) == calls
    git(repo, "reset", "-q", "--keep", left_at)
    summary = train(open_workspace(repo), budget_usd=100.0)
    assert summary.resumed and summary.status == "finished"


def test_another_checked_out_branch_is_named_on_resume(seed_repo: Path, tmp_path: Path) -> None:
    repo = stopped_run(seed_repo, tmp_path / "r")
    git(repo, "switch", "-q", "-c", "elsewhere")
    (repo / "NOTES.md").write_text("mine\n")
    git(repo, "add", "NOTES.md")
    git(repo, "commit", "-qm", "work on another branch")
    with pytest.raises(StateConflict, match="trains branch main") as info:
        train(open_workspace(repo), budget_usd=100.0)
    assert "git switch main" in info.value.hint
    git(repo, "switch", "-q", "main")
    assert train(open_workspace(repo), budget_usd=100.0).resumed


def test_after_new_finishes_train_starts_afresh(seed_repo: Path, tmp_path: Path) -> None:
    repo = stopped_run(seed_repo, tmp_path / "r")
    with open_store(repo / ".skillvc/events.db") as store:
        abandoned = store.query("SELECT run_id FROM runs")[0]["run_id"]
    newer = train(open_workspace(repo), new=True)
    assert newer.run_id != abandoned
    again = train(open_workspace(repo))
    assert not again.resumed and again.run_id != abandoned
    # Nothing changed since the newer run finished: training again would only repeat it.
    assert again.status == "up-to-date" and again.run_id == newer.run_id
    assert train(open_workspace(repo), new=True).run_id not in (abandoned, newer.run_id)


def test_an_optimizer_outage_stops_the_run_and_resume_retries(
    seed_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = tmp_path / "full"
    shutil.copytree(seed_repo, reference)
    full = train(open_workspace(reference))

    repo = tmp_path / "r"
    shutil.copytree(seed_repo, repo)
    real = SimBackend._optimize

    def down(self: SimBackend, request: CallRequest) -> str:
        raise BackendError("optimizer is down")

    monkeypatch.setattr(SimBackend, "_optimize", down)
    with pytest.raises(RunFailed, match="optimizer calls failed in step 1"):
        train(open_workspace(repo))
    with open_store(repo / ".skillvc/events.db") as store:
        assert store.query("SELECT status FROM runs")[0]["status"] == "stopped"
        assert not store.query("SELECT id FROM events WHERE type = 'reflection.failed'")
    monkeypatch.setattr(SimBackend, "_optimize", real)
    resumed = train(open_workspace(repo))
    assert resumed.resumed and resumed.run_id == full.run_id
    assert (repo / SKILL).read_bytes() == (reference / SKILL).read_bytes()


def test_all_target_calls_failing_does_not_crash_the_progress_lines(
    seed_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "r"
    shutil.copytree(seed_repo, repo)
    toml = (repo / "skillvc.toml").read_text().replace("epochs = 3", "epochs = 1")
    (repo / "skillvc.toml").write_text(toml + "max_failure_rate = 1.0\n")
    git(repo, "commit", "-qam", "tolerate failures")
    real = SimBackend.complete

    def target_down(self: SimBackend, request: CallRequest) -> CallResult:
        if request.role == "target":
            raise BackendError("target is down")
        return real(self, request)

    monkeypatch.setattr(SimBackend, "complete", target_down)
    lines: list[str] = []
    summary = train(open_workspace(repo), progress=lines.append)
    assert summary.status == "finished" and summary.best_val is None
    assert any("val n/a, no candidate" in line for line in lines)


def test_an_ungated_slow_update_updates_the_val_of_the_checkpoint(
    seed_repo: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "r"
    shutil.copytree(seed_repo, repo)
    summary = train(
        open_workspace(repo), overrides={"train": {"epochs": 1, "slow_update_gate": False}}
    )
    final = (repo / SKILL).read_bytes().decode("utf-8")
    digest = hashlib.sha256(final.encode("utf-8")).hexdigest()
    with open_store(repo / ".skillvc/events.db") as store:
        forced = store.query("SELECT decision FROM gates WHERE decision = 'forced'")
        rows = [
            e.payload
            for e in store.events(run_id=summary.run_id, types=["rollout"])
            if e.payload["split"] == "val" and e.payload["skill"] == digest
        ]
        (checkpoint,) = store.events(run_id=summary.run_id, types=["checkpoint"])
    assert forced, "the slow update should have been forced in"
    val = sum(r["hard"] for r in rows) / len(rows)
    assert len(rows) == 30
    assert summary.best_val == pytest.approx(val)
    assert checkpoint.payload["val"] == pytest.approx(val)


# -- config and state --------------------------------------------------------------------------


def test_a_rejected_buffer_of_size_zero_is_empty() -> None:
    state = RunState(doc=SkillDocument.parse(b"# S\n"), head="x")
    state.reject([{"id": "e1", "op": "add", "content": "- a"}], 0)
    assert state.buffer == [] and state.rejected == 1
    state.reject([{"id": "e2"}, {"id": "e3"}], 1)
    assert [e["id"] for e in state.buffer] == ["e3"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("rejected_buffer_size = -1", "rejected_buffer_size"),
        ("max_failure_rate = 1.5", "max_failure_rate"),
        ("budget_usd = 0", "budget_usd"),
    ],
)
def test_train_values_out_of_range_are_config_errors(
    seed_repo: Path, tmp_path: Path, line: str, message: str
) -> None:
    repo = tmp_path / "r"
    shutil.copytree(seed_repo, repo)
    toml = (repo / "skillvc.toml").read_text().replace("seed = 7", f"seed = 7\n{line}")
    (repo / "skillvc.toml").write_text(toml)
    with pytest.raises(ConfigError, match=message):
        _ = open_workspace(repo).config


def test_a_negative_budget_flag_is_a_config_error(seed_repo: Path, tmp_path: Path) -> None:
    repo = priced_copy(seed_repo, tmp_path / "r")
    with pytest.raises(ConfigError, match="budget_usd"):
        train(open_workspace(repo), budget_usd=-1.0)
    assert model_calls(repo) == 0


# -- determinism -------------------------------------------------------------------------------


def _reply(cost: float) -> Reply:
    return Reply("x", "k", False, 1, 1, cost)


def test_costs_do_not_depend_on_the_order_threads_finish() -> None:
    costs = [0.1, 0.2, 0.3]
    a, b = RoleStats(), RoleStats()
    for c in costs:
        a.add(_reply(c))
    for c in reversed(costs):
        b.add(_reply(c))
    assert (0.1 + 0.2) + 0.3 != (0.3 + 0.2) + 0.1  # the float sums would differ
    assert a.cost_usd == b.cost_usd == 0.6


def test_rollouts_are_not_shared_between_splits_with_the_same_ids(tmp_path: Path) -> None:
    config = ModelConfig(model="sim:support")
    ticket = "Issue: {issue}. Days since delivery: 3. Tier: standard."
    train_item = TaskItem(id="1", input=ticket.format(issue="damaged"), targets=("replace",))
    val_item = TaskItem(id="1", input=ticket.format(issue="late"), targets=("store-credit",))
    skill = "- Damaged on arrival: offer a replacement, not a refund.\n"
    with open_store(tmp_path / "events.db") as store, ThreadPoolExecutor(2) as pool:
        client = ModelClient(store, {"target": SimBackend("sim:support")}, {"target": config})
        evaluator = Evaluator(client, get_scorer("exact", {}), pool)
        (on_train,) = evaluator.run(skill, [train_item], "train")
        (on_val,) = evaluator.run(skill, [val_item], "val")
    assert on_train.hard == 1.0
    assert on_val.hard == 0.0 and on_val.output != on_train.output


# -- edits, messages, report -------------------------------------------------------------------


def test_whitespace_only_edits_are_no_ops() -> None:
    doc = SkillDocument.parse(b"# S\n\n- Be kind.\n")
    for edit in (
        Edit(op="add", content="   "),
        Edit(op="add", content="\n\n"),
        Edit(op="replace", target="Be kind.", content="Be kind.  "),
    ):
        result = apply_selected(doc, [edit], "SKILL.md", max_bytes=16000)
        assert not result.changed
        assert [u.reason for u in result.unmatched] == ["no-op"]
    nested = apply_selected(
        doc,
        [Edit(op="replace", target="- Be kind.", content="  - Be kind.")],
        "SKILL.md",
        max_bytes=16000,
    )
    assert nested.changed  # indentation nests a list item: not whitespace-only


def _evidence(**kw: object) -> commits.Evidence:
    base: dict[str, object] = dict(
        kind="step",
        decision="rejected",
        edits=[],
        metric="hard",
        before=0.8,
        after=0.9,
        n=30,
        n_evaluated=30,
        early_stopped=False,
        gained=[],
        lost=[],
        run_id="run-x",
        step=3,
        epoch=1,
        lr=2,
        calls={"target": 3},
        tokens=10,
        cost_usd=0.0,
    )
    base.update(kw)
    return commits.Evidence(**base)  # type: ignore[arg-type]


def test_commit_message_of_an_early_stop_shows_the_bound() -> None:
    text = commits.message(
        _evidence(after=0.571, after_bound=0.733, early_stopped=True, n_evaluated=14)
    )
    assert "0.800 -> <=0.733 (n=30, stopped early after 14 of 30)" in text


def test_a_rejection_without_a_confidence_rule_is_never_called_not_significant() -> None:
    # after > before over different items (the candidate errored on some): no paired gain.
    text = commits.message(_evidence())
    assert "rejected (no strict improvement)" in text and "significant" not in text
    text = commits.message(_evidence(confidence=0.9, p_value=0.3, test="sign"))
    assert "gain not significant at 90%" in text


def test_report_markdown_survives_fences_backticks_and_tags() -> None:
    patch = "--- a/SKILL.md\n+++ b/SKILL.md\n@@ -1 +1,3 @@\n+```bash\n+make\n+```\n"
    step = {
        "id": 5,
        "kind": "step",
        "step": 1,
        "epoch": 1,
        "lr": 4,
        "decision": "accepted",
        "val_before": 0.5,
        "val_after": 0.6,
        "commit": "abc1234567",
        "edits": [
            {
                "op": "add",
                "anchor": "Use `make` here",
                "content": "Answer inside <answer></answer>; see </details> `x",
                "rationale": "a|b",
            }
        ],
        "patch": patch,
    }
    report = {
        "run": "run-x",
        "status": "finished",
        "models": {"target": "openai:m", "optimizer": "openai:m"},
        "dataset": {"hash": "h", "counts": {"val": 2, "test": 0}},
        "settings": dict.fromkeys(SETTINGS, 1),
        "scores": {"metric": "hard"},
        "usage": {"calls": 1, "tokens": 1, "cost_usd": 0.0, "unpriced_calls": 0},
        "steps": [step],
    }
    for key in ("baseline_val", "best_val", "baseline_test", "test"):
        report["scores"][key] = None  # type: ignore[index]
    md = render_markdown(report)
    assert "````diff\n" in md and "\n+```bash\n" in md and "\n````\n" in md
    assert "after ``Use `make` here``" in md
    assert "&lt;answer&gt;&lt;/answer&gt;" in md and "&lt;/details&gt;" in md
    assert "\\`x" in md
    assert md.count("</details>") == md.count("<details>")


# -- CLI ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["log", "runs"])
def test_max_count_must_be_positive(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "-n", "0"])
    assert result.exit_code == 2 and "0" in result.output


def test_a_stopped_run_reports_as_stopped(
    seed_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(stopped_run(seed_repo, tmp_path / "r"))
    out = CliRunner().invoke(cli, ["report", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["status"] == "stopped"


@pytest.mark.parametrize("layout", ["deferred", "right after its intent (before deferral)"])
def test_a_rejected_commits_done_replays_where_the_run_logged_it(
    seed_repo: Path, tmp_path: Path, layout: str
) -> None:
    """A resumed run logs a rejected candidate's ``commit.done`` where its first process did:
    where the loop next asks for it, or, for a run logged before deferred commits, right
    after the intent."""
    repo = copy_repo(seed_repo, tmp_path / "r")
    ws = open_workspace(repo)
    skill = (repo / SKILL).read_bytes() + b"\n- A rejected rule.\n"
    head = git(repo, "rev-parse", "HEAD")

    def write(log: RunLog, writer: ThreadPoolExecutor | None) -> commits.Pending:
        return commits.start_commit(
            ws.repo,
            log,
            gate_id=7,
            files={SKILL: skill},
            version=skill.decode(),
            text="A rejected candidate.",
            accepted=False,
            parent=head,
            step_label="1",
            writer=writer,
        )

    deferred = layout == "deferred"
    with open_store(repo / ".skillvc/events.db") as store, ThreadPoolExecutor(1) as writer:
        first = RunLog(store, "run-1")
        pending = write(first, writer if deferred else None)
        if not deferred:
            pending.finish()
        first.emit("step.started", {"batch": []})
        sha = pending.finish()
        logged = [(e.seq, e.type) for e in store.events(run_id="run-1")]

        replay = RunLog(store, "run-1")  # the resumed process, from the top
        again = write(replay, writer)
        replay.emit("step.started", {"batch": []})
        assert again.finish() == sha
        assert [(e.seq, e.type) for e in store.events(run_id="run-1")] == logged
    after = "step.started" if deferred else "commit.done"
    assert logged[1:] == [(2, after), (3, "commit.done" if deferred else "step.started")]
    assert git(repo, "rev-parse", "refs/skillvc/rejected/run-1/1") == sha
