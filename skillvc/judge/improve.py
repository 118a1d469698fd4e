"""``skillvc judge improve``: train the judge's rubric to agree with the person's labels.

No second training loop: the rubric file (``[tasks.scorer_options] rubric_file``, committed in
git) is the skill, and the ordinary Trainer trains it on a derived task set whose task is to
agree with the person:

* each labelled item becomes one task: its input is what the judge is asked (the task input,
  the acceptable answers, the output to grade, and the request to end with ``SCORE:``), its
  target is the person's verdict ("1" or "0"), scored ``numeric`` with ``abs_tol`` 0.49;
* the target model is the judge model (the ``[optimizer]`` model, as the judge scorer uses);
  the rubric is its system prompt;
* ``[judge] holdout`` of the labels (chosen by a hash of their ids, so the same ones every
  time) are held back as the test split: they never reach the optimizer or the gate, and the
  agreement before and after is measured on them;
* the rest is split 60/40 (again by id hash) into train (reflection) and val (the gate).

Accepted rubric edits are commits on the rubric file, with their evidence, like any skill.
The derived task set is written beside the rubric as ``<rubric_file>.tasks.jsonl`` (one file
with a ``split`` field, a pure function of the labels; commit it to make the run reproducible
from the repository alone, or leave it untracked).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from skillvc.core.config import Config, SkillConfig, TasksConfig
from skillvc.core.errors import ConfigError
from skillvc.core.hashing import sha256_hex
from skillvc.core.paths import inside_repo
from skillvc.core.progress import Progress
from skillvc.judge.calibrate import Calibration, Label, calibrate, labels_of
from skillvc.judge.identity import read_in, rubric_text
from skillvc.tasks.scorers import JudgeScorer
from skillvc.training.loop import RunSummary, train
from skillvc.workspace.workspace import Workspace

ASK = (
    "Grade the output below by the rubric. End your reply with one line of the form "
    "SCORE: <a number from 0 to 1>, where 1 means correct and 0 means wrong.\n\n"
)


def split_of(label: Label, holdout: float) -> str:
    """test (held back), train or val, by a hash of the label's id (stable across runs)."""
    roll = int(sha256_hex(f"judge-split|{label.id}")[:8], 16) / 0xFFFFFFFF
    if roll < holdout:
        return "test"
    rest = (roll - holdout) / (1 - holdout)
    return "train" if rest < 0.6 else "val"


def derived_rows(labels: list[Label], holdout: float) -> dict[str, list[dict[str, Any]]]:
    """The derived task set: what the judge is asked, and the person's verdict as target."""
    probe = JudgeScorer(lambda system, user: "", "")
    rows: dict[str, list[dict[str, Any]]] = {"train": [], "val": [], "test": []}
    for label in labels:
        _, user = probe.prompts(label.item(), label.output)
        rows[split_of(label, holdout)].append(
            {"id": label.id, "input": ASK + user, "target": str(label.person)}
        )
    return rows


def rubric_config(config: Config, tasks_file: str) -> Config:
    """The config that trains the rubric file as a skill on the derived task set."""
    rubric = config.tasks.scorer_options.get("rubric_file")
    if config.tasks.scorer != "judge" or not isinstance(rubric, str):
        raise ConfigError(
            "skillvc judge improve trains the rubric file of the judge scorer, and none is "
            "configured.",
            hint='Set scorer = "judge" and [tasks.scorer_options] rubric_file = "RUBRIC.md" '
            "(a committed file), then run it again.",
        )
    train = dataclasses.replace(config.train, gate_targets="none", slow_update=False)
    return dataclasses.replace(
        config,
        skill=SkillConfig(path=rubric, max_bytes=config.skill.max_bytes),
        tasks=TasksConfig(
            path=tasks_file,
            scorer="numeric",
            scorer_options={"abs_tol": 0.49},
            allow_overlap=True,  # two people may label the same output twice
        ),
        target=config.optimizer,
        targets={},
        train=train,
        skills={},
        shared={},
        skill_name=None,
    )


@dataclass(frozen=True)
class Improvement:
    summary: RunSummary
    before: Calibration  # the seed rubric on the held-back labels
    after: Calibration  # the trained rubric on the same labels

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.summary.run_id,
            "accepted": self.summary.accepted,
            "rejected": self.summary.rejected,
            "best_commit": self.summary.best_commit,
            "held_back": self.before.agreement.n,
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
        }


def improve(
    ws: Workspace,
    labels_file: str | None = None,
    *,
    progress: Progress | None = None,
) -> Improvement:
    """Train the rubric on the labels not held back; calibrate before and after on those held
    back (the ``after`` calibration is recorded, so the trained rubric can gate)."""
    config = ws.config
    name, labels = labels_of(ws, labels_file, "train the rubric against")
    holdout = config.judge.holdout
    rows = derived_rows(labels, holdout)
    for split in ("train", "val"):
        if not rows[split]:
            raise ConfigError(
                f"The labels leave no {split} item after holding back {holdout:.0%}; the rubric "
                "needs labels to learn from and to gate on.",
                hint="Label more items, or lower [judge] holdout.",
            )
    rubric_file = str(config.tasks.scorer_options.get("rubric_file", ""))
    tasks_file = f"{rubric_file}.tasks.jsonl"
    derived = rubric_config(config, tasks_file)  # refuses a config without a rubric file
    text = "".join(
        json.dumps(r | {"split": split}, ensure_ascii=False) + "\n"
        for split, items in rows.items()
        for r in items
    )
    inside_repo(ws.root, tasks_file, "the derived task file").write_text(text, encoding="utf-8")
    rubric_ws = Workspace(root=ws.root, config=derived, _repo=ws._repo)
    held = {r["id"] for r in rows["test"]}

    def held_back(label: Label) -> bool:
        return label.id in held

    seed = rubric_text(config.tasks.scorer_options, read_in(ws.root))
    before = calibrate(ws, name, rubric=seed, only=held_back, record=False)
    summary = train(rubric_ws, progress=progress)
    after = calibrate(ws, name, only=held_back)
    return Improvement(summary, before, after)
