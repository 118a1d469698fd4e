"""Judge calibration: `skillvc judge calibrate`, the trust gate, `skillvc judge improve`.

The judge is ``sim:judge-<pct>`` (simworld.graded): it grades by the acceptable answers when
given (else by the policy rules its rubric states) and flips <pct>% of its verdicts, so its
agreement with a person who knows the true policy is known. Real repos, real event log.
"""

# The imported ``demo`` fixture is named by test parameters, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import git
from test_eval import commit_all, demo, run_cli  # noqa: F401 - demo is a fixture

from skillvc.judge.calibrate import calibrate
from skillvc.models import simworld
from skillvc.tasks.scorers import JUDGE_SYSTEM, JudgeScorer
from skillvc.tasks.taskset import TaskItem
from skillvc.training.matrix_stats import wilson
from skillvc.workspace.workspace import open_workspace

RUBRIC = "judges/RUBRIC.md"
SEED_RUBRIC = "# Rubric\n\nThe answer is correct when it follows the Acme returns policy.\n"


def judge_repo(repo: Path, judge: str, labels: list[dict[str, object]], extra: str = "") -> Path:
    """The demo graded by a judge scorer (rubric in a committed file) with a labels file."""
    config = repo / "skillvc.toml"
    text = config.read_text("utf-8")
    text = text.replace(
        'scorer = "exact"', f'scorer = "judge"\nscorer_options = {{ rubric_file = "{RUBRIC}" }}'
    )
    text = text.replace('[optimizer]\nmodel = "sim:support"', f'[optimizer]\nmodel = "{judge}"')
    config.write_text(text + '\n[judge]\nlabels = "evals/labels.jsonl"\n' + extra, "utf-8")
    (repo / "judges").mkdir()
    (repo / RUBRIC).write_text(SEED_RUBRIC, "utf-8")
    rows = "".join(json.dumps(r) + "\n" for r in labels)
    (repo / "evals" / "labels.jsonl").write_text(rows, "utf-8")
    git(repo, "add", ".")
    commit_all(repo, "A judge and a person's labels")
    return repo


def test_calibrate_a_judge_of_known_error_rate(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    labels = simworld.generate_labels(200, 11)
    judge_repo(demo, "sim:judge-20", labels)
    result = run_cli(demo, monkeypatch, "judge", "calibrate", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    low, high = data["accuracy_interval"]
    assert low <= 0.8 <= high  # the judge's true agreement (it flips 20% of verdicts)
    # The same verdicts, computed here from the simulated judge itself.
    scorer = JudgeScorer(lambda s, u: "", SEED_RUBRIC)
    agree = 0
    for row in labels:
        item = TaskItem(id=str(row["id"]), input=str(row["input"]), targets=(str(row["target"]),))
        system, user = scorer.prompts(item, str(row["output"]))
        assert system == JUDGE_SYSTEM.format(rubric=SEED_RUBRIC)
        verdict = simworld.graded(system, user, 0.2).endswith("SCORE: 1")
        agree += int(verdict == bool(row["label"]))
    assert data["agree"] == agree and data["n"] == 200
    assert data["accuracy_interval"] == pytest.approx(list(wilson(agree, 200) or ()))
    fails = sum(1 for r in labels if not r["label"])
    assert data["person_fails"] == fails and data["person_passes"] == 200 - fails
    assert 0 < data["false_accept"] < 0.4 and 0 < data["false_reject"] < 0.4
    assert data["trusted"] is True and data["kappa"] > 0.4
    text = run_cli(demo, monkeypatch, "judge", "calibrate")
    assert text.exit_code == 0, text.output
    assert f"accuracy       {agree / 200:.3f} [" in text.stdout
    assert text.stdout.splitlines()[-1] == "The judge may gate training and skillvc check."
    with open_workspace(demo).store() as store:  # recorded once, whatever the reruns
        assert len(store.events(types=["judge.calibrated"])) == 1


def test_a_judge_below_the_threshold_cannot_gate(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge_repo(demo, "sim:judge-45", simworld.generate_labels(60, 12))
    result = run_cli(demo, monkeypatch, "judge", "calibrate")
    assert result.exit_code == 7
    assert result.stderr.startswith("Error: The judge's agreement is below [judge] min_accuracy")
    refused = "so it may not gate.\nHint: Improve the rubric (skillvc judge improve) or pass "
    train = run_cli(demo, monkeypatch, "train", "-q")
    assert train.exit_code == 5 and refused in train.stderr
    assert train.stderr.startswith("Error: The judge agrees with the person on ")
    check = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD")
    assert check.exit_code == 5 and refused in check.stderr
    trusted = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD", "--trust-judge")
    assert trusted.exit_code == 0, trusted.output
    # A changed rubric is another judge: not calibrated, so not refused (unless required).
    (demo / RUBRIC).write_text(SEED_RUBRIC + "Grade strictly.\n", "utf-8")
    commit_all(demo, "New rubric")
    assert run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD").exit_code == 0
    config = demo / "skillvc.toml"
    config.write_text(config.read_text("utf-8") + "require_calibration = true\n", "utf-8")
    commit_all(demo, "Require calibration")
    required = run_cli(demo, monkeypatch, "check", "-q", "--base", "HEAD")
    assert required.exit_code == 5
    assert "has not been calibrated against a person's labels" in required.stderr


def test_improving_the_rubric_raises_agreement_on_held_back_labels(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No acceptable answers: the judge has only its rubric to grade by.
    judge_repo(demo, "sim:judge-5", simworld.generate_labels(120, 13, with_targets=False))
    seed = git(demo, "rev-parse", "HEAD")
    result = run_cli(demo, monkeypatch, "judge", "improve", "-q", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["accepted"] >= 1 and data["held_back"] == data["after"]["n"] > 20
    assert data["after"]["accuracy"] > data["before"]["accuracy"]
    # The rubric is versioned like a skill: the accepted edits are commits on it alone.
    changed = git(demo, "diff", "--name-only", seed, "HEAD").splitlines()
    assert changed == [RUBRIC]
    rubric = (demo / RUBRIC).read_text("utf-8")
    assert rubric != SEED_RUBRIC and simworld.known_rules(rubric)
    # The trained rubric's calibration was recorded: it is the judge that now gates.
    after = calibrate(open_workspace(demo), record=False)
    assert after.judge_id == data["after"]["judge_id"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"input": "x", "output": "y", "label": 2}', "needs a 'label': 0 or 1"),
        ('{"input": "x", "label": 1}', "needs a string 'output'"),
        ("[1]", "must be a JSON object"),
        ('{"input": "x", "output": "y", "label": 1, "target": 3}', "needs 'target' to be a string"),
    ],
)
def test_bad_labels_are_one_sentence(
    demo: Path, monkeypatch: pytest.MonkeyPatch, line: str, message: str
) -> None:
    judge_repo(demo, "sim:judge-20", simworld.generate_labels(4, 1))
    (demo / "evals" / "bad.jsonl").write_text(
        '{"input": "a", "output": "b", "label": 1}\n' + line + "\n", "utf-8"
    )
    result = run_cli(demo, monkeypatch, "judge", "calibrate", "--labels", "evals/bad.jsonl")
    assert result.exit_code == 5
    assert result.stderr.startswith("Error: Line evals/bad.jsonl:2 ") and message in result.stderr


def test_the_trust_gate_knows_the_scorers_default_rubric() -> None:
    from skillvc.judge.identity import DEFAULT_RUBRIC
    from skillvc.tasks.scorers import DEFAULT_RUBRIC as SCORER_DEFAULT

    assert DEFAULT_RUBRIC == SCORER_DEFAULT
