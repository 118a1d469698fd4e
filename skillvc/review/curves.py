"""A run's training curve, read from its events alone (``run_curve``), for runs, reports and charts.

``OF_SKILL`` is the SQL condition "a run of this skill" that the runs table and the log share.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from skillvc.core.events import read_payload
from skillvc.core.records import fields_of
from skillvc.core.store import EventStore

OF_SKILL = (
    "run_id IN (SELECT run_id FROM events WHERE type = 'run.started' "
    "AND json_extract(payload, '$.config.skill.path') = ?)"
)


@dataclass(frozen=True)
class CurvePoint:
    """One step of a run (step 0 is the baseline).

    ``val`` is the val mean of the skill in effect after the step (and after its epoch's slow
    update), computed exactly as the loop computes it, from the run's val rollouts of that
    skill. ``train`` is the mean score of the step's own train batch: its forward pass, with the
    skill from before the step's update (None at step 0, which has no batch).
    """

    step: int
    epoch: int | None
    val: float | None
    train: float | None
    decision: str | None  # accepted | rejected | forced | no candidate | None (baseline)
    p_value: float | None
    slow_update: str | None  # decision of the slow update that followed this step, if any


@dataclass(frozen=True)
class Curve:
    run: str
    metric: str
    points: list[CurvePoint]
    test_start: float | None
    test_end: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            **fields_of(self, "run metric test_start test_end"),
            "points": [dataclasses.asdict(p) for p in self.points],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Curve:
        return cls(
            run=data["run"],
            metric=data["metric"],
            points=[CurvePoint(**p) for p in data["points"]],
            test_start=data["test_start"],
            test_end=data["test_end"],
        )


def run_curve(store: EventStore, run_id: str) -> Curve:
    """The training curve of a run, from its events alone (see ``CurvePoint``)."""
    from skillvc.tasks.scorers import metric_value

    rows = store.query(
        "SELECT type, step, epoch, payload FROM events WHERE run_id = ? AND type IN "
        "('run.started', 'baseline', 'step.started', 'step.empty', 'gate', 'rollout', "
        "'run.finished') ORDER BY id",
        [run_id],
    )
    events = [(r["type"], r["step"], r["epoch"], read_payload(r["payload"])) for r in rows]
    started: dict[str, Any] = next((p for t, _, _, p in events if t == "run.started"), {})
    metric = str(started.get("config", {}).get("train", {}).get("gate_metric") or "hard")
    val: dict[str, dict[str, float]] = {}  # skill -> item -> score
    train: dict[tuple[str, str], float] = {}  # (skill, item) -> score
    step_skill: dict[int, str] = {}  # the skill of a step's forward pass, from its rollouts
    for t, step, _, p in events:
        if t != "rollout" or p.get("error") is not None or p.get("hard") is None:
            continue
        value = metric_value(p["hard"], p["soft"], metric)
        if p.get("split") == "val":
            val.setdefault(p["skill"], {})[p["item"]] = value
        elif p.get("split") == "train":
            train[(p["skill"], p["item"])] = value
            if step is not None:
                step_skill.setdefault(step, p["skill"])

    def val_of(skill: str) -> float | None:
        return mean(list(val.get(skill, {}).values()))

    points: list[CurvePoint] = []
    current: dict[str, Any] | None = None  # the step being read
    skill: str = str(started.get("skill", ""))
    score: float | None = None
    finished: dict[str, Any] = {}

    def close() -> None:
        if current is not None:
            points.append(CurvePoint(**{**current, "val": score}))

    for t, step, epoch, p in events:
        if t == "baseline":
            score = p.get("val")
            points.append(CurvePoint(0, None, score, None, None, None, None))
        elif t == "step.started":
            close()
            own = step_skill.get(step, skill)
            batch = [train[(own, i)] for i in p.get("batch", []) if (own, i) in train]
            current = {
                "step": step,
                "epoch": epoch,
                "train": mean(batch),
                "decision": None,
                "p_value": None,
                "slow_update": None,
            }
        elif t == "step.empty" and current is not None:
            current["decision"] = "no candidate"
        elif t == "gate":
            decision = p.get("decision")
            if current is not None:
                if p.get("kind", "step") == "step":
                    current["decision"], current["p_value"] = decision, p.get("p_value")
                else:
                    current["slow_update"] = decision
            if decision in ("accepted", "forced") and p.get("candidate"):
                skill, score = p["candidate"], val_of(p["candidate"])
        elif t == "run.finished":
            finished = p
    close()
    return Curve(
        run=run_id,
        metric=metric,
        points=points,
        test_start=finished.get("baseline_test"),
        test_end=finished.get("test"),
    )


def mean(values: list[float]) -> float | None:
    """The loop's mean (``math.fsum``), so a curve shows the very numbers the loop logged."""
    return math.fsum(values) / len(values) if values else None
