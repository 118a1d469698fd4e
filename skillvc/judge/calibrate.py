"""``skillvc judge calibrate``: how often the ``judge`` scorer agrees with a person.

Labels are a small JSONL file, one object a line: ``input`` (the task input), ``output`` (the
answer graded), ``label`` (the person's verdict: 0/1, true/false, or a score in 0..1, which
counts as a pass from 0.5), optional ``id`` and ``target``/``targets`` (acceptable answers, shown
to the judge as in training). The judge runs exactly as the scorer would during training (same
model, rubric and threshold; its calls cached in the event log), and the agreement is recorded
as one ``judge.calibrated`` event keyed by its content:

* accuracy (share of items where judge and person agree) with a Wilson interval;
* Cohen's kappa (agreement beyond chance);
* false accept rate (judge passes what the person failed) and false reject rate (judge fails
  what the person passed), each with a Wilson interval.

A judge is identified by its model (and parameters), rubric text and threshold, so a changed
rubric needs calibrating again (``judge_id``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillvc.core.errors import ConfigError, TaskSetError
from skillvc.core.hashing import content_id, sha256_hex
from skillvc.core.paths import inside_repo
from skillvc.core.records import fields_of
from skillvc.judge.identity import EVENT, judge_id, judge_options, meets, read_in, rubric_text
from skillvc.review.evaluation import _judge, make_client
from skillvc.tasks.scorers import JudgeScorer, parse_judge_score
from skillvc.tasks.taskset import TaskItem
from skillvc.training.matrix_stats import cohen_kappa, wilson
from skillvc.workspace.workspace import Workspace


@dataclass(frozen=True)
class Label:
    id: str
    input: str
    output: str
    person: int  # 1: the person passes the output
    targets: tuple[str, ...] = ()

    def item(self) -> TaskItem:
        return TaskItem(id=self.id, input=self.input, targets=self.targets)


def labels_of(ws: Workspace, labels_file: str | None, purpose: str) -> tuple[str, list[Label]]:
    """The labels file ``labels_file`` (else [judge] labels) and its labels, which the caller
    needs to ``purpose``; refused when neither names a file."""
    name = labels_file or ws.config.judge.labels
    if not name:
        raise ConfigError(
            f"No labels to {purpose}.",
            hint="Pass --labels FILE or set [judge] labels in skillvc.toml.",
        )
    return name, read_labels(inside_repo(ws.root, name, "the labels file"), name)


def read_labels(path: Path, shown: str) -> list[Label]:
    """The labels of a JSONL file; a bad line is one error sentence naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskSetError(
            f"The labels file {shown} cannot be read ({exc}).",
            hint="Pass --labels FILE, a JSONL of input, output and label per line.",
        ) from None
    labels: list[Label] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{shown}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskSetError(f"Line {where} is not JSON ({exc.msg}).") from None
        if not isinstance(row, dict):
            raise TaskSetError(f"Line {where} must be a JSON object.")
        for key in ("input", "output"):
            if not isinstance(row.get(key), str):
                raise TaskSetError(f"Line {where} needs a string {key!r}.")
        labels.append(
            Label(
                id=str(row.get("id", f"label-{number}")),
                input=row["input"],
                output=row["output"],
                person=_verdict(row.get("label"), where),
                targets=_targets(row, where),
            )
        )
    if len(labels) < 2:
        raise TaskSetError(
            f"The labels file {shown} has {len(labels)} labelled item(s); calibration needs "
            "at least 2 (a few dozen give useful intervals)."
        )
    ids = [label.id for label in labels]
    if len(set(ids)) != len(ids):
        raise TaskSetError(f"The labels file {shown} repeats an id; give each line its own.")
    return labels


def _verdict(value: Any, where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and 0 <= value <= 1:
        return int(value >= 0.5)
    raise TaskSetError(
        f"Line {where} needs a 'label': 0 or 1, true or false, or a score from 0 to 1."
    )


def _targets(row: dict[str, Any], where: str) -> tuple[str, ...]:
    value = row.get("targets", row.get("target"))
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TaskSetError(f"Line {where} needs 'target' to be a string or a list of strings.")


# -- the judge as training uses it ------------------------------------------------------------


# -- agreement --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Agreement:
    """Judge vs person on n items."""

    pairs: tuple[tuple[int, int], ...]  # (person, judge)

    @property
    def n(self) -> int:
        return len(self.pairs)

    @property
    def agree(self) -> int:
        return sum(1 for p, j in self.pairs if p == j)

    @property
    def accuracy(self) -> float:
        return self.agree / self.n if self.n else 0.0

    @property
    def kappa(self) -> float | None:
        return cohen_kappa(self.pairs)

    def _rate(self, person: int) -> tuple[int, int]:
        """(judge disagrees, of items the person labelled ``person``)."""
        of = [j for p, j in self.pairs if p == person]
        return sum(1 for j in of if j != person), len(of)

    def to_dict(self) -> dict[str, Any]:
        fa, negatives = self._rate(0)
        fr, positives = self._rate(1)
        return {
            "n": self.n,
            "agree": self.agree,
            "accuracy": self.accuracy,
            "accuracy_interval": _pair(wilson(self.agree, self.n)),
            "kappa": self.kappa,
            "false_accept": fa / negatives if negatives else None,
            "false_accept_interval": _pair(wilson(fa, negatives)),
            "person_fails": negatives,
            "false_reject": fr / positives if positives else None,
            "false_reject_interval": _pair(wilson(fr, positives)),
            "person_passes": positives,
        }


def _pair(interval: tuple[float, float] | None) -> list[float] | None:
    return list(interval) if interval else None


@dataclass(frozen=True)
class Calibration:
    judge_id: str
    model: str
    rubric: str  # blob hash of the rubric text
    labels: str  # the labels file as given
    agreement: Agreement
    verdicts: tuple[dict[str, Any], ...]  # {id, person, judge, score}
    trusted: bool
    thresholds: dict[str, float]
    event: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            **fields_of(self, "judge_id model rubric labels"),
            **self.agreement.to_dict(),
            **fields_of(self, "trusted thresholds"),
            "items": list(self.verdicts),
            "event": self.event,
        }


def run_judge(
    ws: Workspace, labels: Sequence[Label], rubric: str, workers: int | None = None
) -> list[dict[str, Any]]:
    """The judge's verdict on each label (its calls go through the event log's cache)."""
    config = ws.config
    threshold = float(judge_options(config).get("threshold", 0.5))
    with ws.store(create=True) as store:
        client = make_client(store, config)
        scorer = JudgeScorer(_judge(client), rubric, threshold)

        def one(label: Label) -> dict[str, Any]:
            system, user = scorer.prompts(label.item(), label.output)
            value = parse_judge_score(scorer.judge(system, user))
            return {
                "id": label.id,
                "person": label.person,
                "judge": int(value >= threshold),
                "score": value,
            }

        with ThreadPoolExecutor(max_workers=workers or config.train.workers) as pool:
            return list(pool.map(one, labels))


def calibrate(
    ws: Workspace,
    labels_file: str | None = None,
    *,
    workers: int | None = None,
    rubric: str | None = None,
    only: Callable[[Label], bool] | None = None,
    record: bool = True,
) -> Calibration:
    """Run the judge on the labels, measure agreement, record it (``judge.calibrated``)."""
    config = ws.config
    name, labels = labels_of(ws, labels_file, "calibrate the judge against")
    labels = [lb for lb in labels if only is None or only(lb)]
    if rubric is None:
        rubric = rubric_text(judge_options(config), read_in(ws.root))
    verdicts = run_judge(ws, labels, rubric, workers)
    agreement = Agreement(tuple((v["person"], v["judge"]) for v in verdicts))
    j = config.judge
    calibration = Calibration(
        judge_id=judge_id(config, rubric),
        model=config.optimizer.model,
        rubric=sha256_hex(rubric),
        labels=name,
        agreement=agreement,
        verdicts=tuple(verdicts),
        trusted=meets(agreement.to_dict(), j),
        thresholds={"min_accuracy": j.min_accuracy, "min_kappa": j.min_kappa},
    )
    if not record:
        return calibration
    payload = calibration.to_dict()
    payload.pop("event")
    with ws.store(create=True) as store:
        store.put_blob(rubric)
        event = store.append(EVENT, payload, key=content_id(payload))
    return Calibration(**{**calibration.__dict__, "event": event.id})
