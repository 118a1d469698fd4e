"""Honest gains (issue 21): attribution takes a passing bundle apart, every view says how sure
a gain is, the paper's bundle gate stays available, and a kill during attribution resumes
exactly."""

# The imported ``demo`` fixture is named by test parameters, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import copy_repo, git
from helpers import event_count
from test_eval import GOOD_RULE, add_rules, commit_all, demo, run_cli  # noqa: F401
from test_train import history

from skillvc.core.store import open_store
from skillvc.review.history import log_entries
from skillvc.review.report import blame
from skillvc.training import significance
from skillvc.training.commits import Honesty
from skillvc.training.loop import RunSummary, train
from skillvc.workspace.workspace import open_workspace

SKILL = "skills/acme-returns/SKILL.md"


@pytest.fixture(scope="module")
def trained(
    demo_trained: tuple[Path, RunSummary], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, RunSummary]:
    """The demo trained once with the defaults (attribution on), copied for this module."""
    path, summary = demo_trained
    return copy_repo(path, tmp_path_factory.mktemp("gains") / "repo"), summary


def _optimizer_prompts(repo: Path) -> str:
    with open_store(repo / ".skillvc/events.db") as store:
        return "".join(
            store.get_blob(r["h"])
            for r in store.query(
                "SELECT json_extract(payload, '$.prompt') AS h FROM events "
                "WHERE type = 'model.call' AND json_extract(payload, '$.role') = 'optimizer'"
            )
        )


def _gates(repo: Path) -> list[dict]:
    with open_store(repo / ".skillvc/events.db") as store:
        return [e.payload for e in store.events(types=["gate"])]


def test_attribution_drops_passengers_and_says_why(trained: tuple[Path, RunSummary]) -> None:
    repo, summary = trained
    gates = _gates(repo)
    credited = [g for g in gates if "attribution" in g]
    assert credited, "the demo's first steps are bundles that pass"
    dropped_any = False
    for g in credited:
        tests = g["attribution"]["tests"]
        kept = set(g["attribution"]["kept"])
        assert {e["id"] for e in g["edits"]} == kept  # the commit holds only the kept edits
        for t in tests:
            assert t["p_value"] == significance.sign_test_p(t["up"], t["down"])
            assert (t["outcome"] == "kept") == (t["edit"] in kept)
            if t["outcome"] == "kept":
                assert t["p_value"] <= g["attribution"]["alpha"] + 1e-12
            else:
                dropped_any = True
                assert t["edit"] not in kept
    assert dropped_any
    # The commit message names what was dropped and why; the trailer says how sure the gain is.
    body = git(repo, "log", "--format=%B", "--all")  # a pruned candidate may be refused
    assert "DROPPED as a neutral passenger" in body or "DROPPED as harmful" in body
    assert "Significance: p = " in body
    assert "Skillvc-Significance: p=" in body
    # Dropped edits reach the optimizer's rejected buffer with their evidence.
    assert re.search(
        r"dropped from a passing bundle of \d+; val: \d+ better, \d+ worse",
        _optimizer_prompts(repo),
    )
    # Dropped edits are not in the skill their step commits (a later step may propose one
    # again and keep it on its own evidence).
    with open_store(repo / ".skillvc/events.db") as store:
        entries = [e.to_dict() for e in log_entries(store, decision="accepted")]
        # A pruned candidate may be refused too (its commit under a rejected ref).
        every = [e.to_dict() for e in log_entries(store)]
    dropped = [(e["commit"], d) for e in every for d in e["dropped"]]
    assert dropped
    for commit, d in dropped:
        assert d["content"] not in git(repo, "show", f"{commit}:{SKILL}")
        assert d["outcome"] in ("neutral", "harmful")
    for e in entries:
        assert e["verdict"] in ("significant", "within noise")
        assert e["alpha"] == pytest.approx(0.2)
    # train's summary: every accepted candidate with its p-value and verdict.
    assert len(summary.gains) == summary.accepted + summary.slow_updates_accepted
    assert all(g["verdict"] in ("significant", "within noise") for g in summary.gains)
    assert summary.test is not None and summary.baseline_test is not None
    assert summary.test > summary.baseline_test  # the demo still improves test
    assert summary.best_val is not None and summary.baseline_val is not None
    assert summary.best_val > summary.baseline_val


def test_the_progress_line_counts_every_edit_of_the_bundle() -> None:
    """Attribution tests every edit while more than one is kept, so a bundle of 4 can have 4
    tests: the line said "dropped 1 of 5 edits" (tests + 1, the untested last edit)."""
    tests = tuple(
        ({"id": name}, outcome, 4, 0, 30, 0.0625)
        for name, outcome in (("d", "kept"), ("c", "neutral"), ("b", "kept"), ("a", "kept"))
    )
    honesty = Honesty(0.2, 0.000488, "sign", "accepted", edits=tests, bundle=4)
    assert honesty.summary() == "p = 0.000488, significant (alpha 0.2); dropped 1 of 4 edits"
    # Pruned to one edit: the last one standing is not tested, and still counted.
    two = Honesty(0.2, 0.01, "sign", "accepted", edits=tests[1:2], bundle=2)
    assert two.summary().endswith("; dropped 1 of 2 edits")


def test_blame_gives_each_line_the_gain_of_its_own_edit(trained: tuple[Path, RunSummary]) -> None:
    repo, _ = trained
    ws = open_workspace(repo)
    with ws.store() as store:
        lines = blame(store, ws.repo, SKILL)
    trained_lines = [line for line in lines if not line.human and line.kind == "step"]
    assert trained_lines
    by_commit: dict[str, set] = {}
    for line in trained_lines:
        d = line.to_dict()
        assert d["edit"] is not None and d["p_value"] is not None
        assert d["verdict"] in ("significant", "within noise")
        by_commit.setdefault(line.commit, set()).add((d["edit"], d["edit_gain"]))
    # A commit of several kept edits gives their lines different gains, not the step's.
    assert any(len({gain for _, gain in pairs}) > 1 for pairs in by_commit.values())


def test_the_paper_gate_is_unchanged_with_attribution_off(demo_seed: Path, tmp_path: Path) -> None:
    repo = copy_repo(demo_seed, tmp_path / "paper")
    summary = train(open_workspace(repo), overrides={"train": {"attribution": False}})
    for g in _gates(repo):
        assert "attribution" not in g and "alpha" not in g and "rounds" not in g
    body = git(repo, "log", "--format=%B", "main")
    assert "Significance:" not in body and "Skillvc-Significance" not in body
    with open_store(repo / ".skillvc/events.db") as store:
        splits = {
            r["split"]
            for r in store.query(
                "SELECT DISTINCT json_extract(payload, '$.split') AS split FROM events "
                "WHERE type = 'rollout'"
            )
        }
    prompts = _optimizer_prompts(repo)
    assert splits <= {"train", "val", "test"}
    assert "inconclusive" not in prompts and "dropped from" not in prompts
    # The paper's gate accepts any strict gain, one within noise too (p > 0.2, the default's
    # alpha).
    assert summary.accepted + summary.slow_updates_accepted > 2
    assert any(g["decision"] == "accepted" and (g["p_value"] or 0) > 0.2 for g in _gates(repo))


def test_a_kill_during_attribution_resumes_to_the_same_commits(
    demo_seed: Path, tmp_path: Path
) -> None:
    env = dict(
        os.environ,
        SKILLVC_SIM_LATENCY_MS="15",
        PYTHONPATH=str(Path(__file__).resolve().parent.parent),
    )
    command = [sys.executable, "-m", "skillvc", "train", "-q"]
    reference = copy_repo(demo_seed, tmp_path / "reference")
    done = subprocess.run(command, cwd=reference, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    expected = history(reference)
    repo = copy_repo(demo_seed, tmp_path / "killed")
    journal = tmp_path / "journal.txt"
    env["SKILLVC_SIM_JOURNAL"] = str(journal)
    db = repo / ".skillvc/events.db"
    step, threshold = _first_attribution(reference / ".skillvc/events.db")
    proc = subprocess.Popen(command, cwd=repo, env=env, stderr=subprocess.PIPE, text=True)
    # The first bundle that passes is evaluated in full (its val rollouts follow those logged
    # before its step's selection): kill once attribution has logged 10 rollouts of the bundle
    # without an edit, before its gate event.
    deadline = time.monotonic() + 120
    while proc.poll() is None and not _in_attribution(db, threshold):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before attribution was seen"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    with open_store(db) as store:  # killed inside that step's attribution
        assert not [g for g in store.events(types=["gate"]) if (g.step or 0) >= step]
    final = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True)
    assert final.returncode == 0, final.stderr
    got = history(repo)
    for key in ("skill", "accepted", "rejected", "gates", "rejected_edits", "seqs", "calls"):
        assert got[key] == expected[key], key
    made = journal.read_text().split()
    assert len(made) - len(set(made)) <= 16  # only calls in flight at the kill
    assert len(set(made)) == expected["calls"]["n"]
    assert event_count(db) > 0


def _first_attribution(db: Path) -> tuple[int, int]:
    """(the step of the run's first gate that took a bundle apart, the val rollouts logged
    once 10 of its attribution's are): those before the step's selection, the bundle's full
    pass over val, and 10."""
    with open_store(db) as store:
        events = list(store.events(types=["gate", "edits.selected", "rollout"]))
    val = sum(1 for _ in (db.parent.parent / "evals/val.jsonl").open(encoding="utf-8"))
    gate = next(e for e in events if e.type == "gate" and e.payload.get("attribution"))
    selected = next(e for e in events if e.type == "edits.selected" and e.step == gate.step)
    before = [
        e
        for e in events
        if e.type == "rollout" and e.payload["split"] == "val" and e.seq < selected.seq
    ]
    return int(gate.step or 0), len(before) + val + 10


def _in_attribution(db: Path, threshold: int) -> bool:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            (n,) = conn.execute(
                "SELECT COUNT(*) FROM events WHERE type = 'rollout' "
                "AND json_extract(payload, '$.split') = 'val'"
            ).fetchone()
            return n >= threshold
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def test_check_says_how_sure_the_change_is(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    add_rules(demo, GOOD_RULE)
    commit_all(demo, "Exchange wrong items")
    result = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD~1", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    c, said = data["comparison"], data["significance"]
    up, down = len(c["flipped"]["up"]), len(c["flipped"]["down"])
    assert said["p_value"] == significance.sign_test_p(up, down)
    assert said["direction"] == "better" and said["test"] == "sign"
    assert said["alpha"] == pytest.approx(0.2)
    assert said["verdict"] == significance.verdict(said["p_value"], 0.2)
    assert said["smallest_detectable_gain"] == significance.smallest_detectable_gain(c["n"], 0.2)
    text = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD~1")
    assert (
        "significance: the working tree is better (exact sign test on the flipped items): "
        f"{significance.stated(said['p_value'], 0.2)}\n" in text.stdout
    )
    assert ("warning: " in text.stdout) == (said["warning"] is not None)
