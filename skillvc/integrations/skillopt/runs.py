"""A SkillOpt run directory read back: what its trainer wrote, step by step (read only).

SkillOpt 0.2.0's trainer writes, under its ``out_root``: ``config.json`` (the flat config),
``history.json`` (one record per step), ``steps/step_NNNN/`` (``step_record.json``,
``candidate_skill.md``, ``ranked_edits.json``, ``selection_eval/results.jsonl``, the train
batch's ``rollout/results.jsonl``), ``skills/skill_vNNNN.md`` (the current skill after each
step; the seed is ``skill_v0000.md``), ``selection_eval_baseline/``, ``slow_update/epoch_NN/``
and ``meta_skill/epoch_NN/`` (their ``*_result.json``), ``best_skill.md``, ``runtime_state.json``
and, once the run finished, ``summary.json``.

Invariants:
- Nothing under the run directory is written, moved or created.
- A damaged or missing file costs only what depends on it: ``history.json`` unreadable falls
  back to each step's ``step_record.json``; a step without a readable record, or an accepted
  one without its skill text, is skipped; every skip is named in ``skipped``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillvc.core.errors import SkillOptError

ACCEPTED = ("accept", "accept_new_best")
STEP_DIR = re.compile(r"^step_(\d{4,})$")


@dataclass(frozen=True)
class ValScores:
    """One skill's per-item scores on the selection (val) split, from a ``results.jsonl``."""

    hard: dict[str, float]
    soft: dict[str, float]
    reasons: dict[str, str]


@dataclass
class Step:
    number: int
    epoch: int
    record: dict[str, Any]
    candidate: str | None  # the candidate skill's text
    edits: list[dict[str, Any]]  # ranked_edits.json's edits (SkillOpt's ops)
    val: ValScores | None  # the candidate's selection eval (None: cached or not kept)
    train: ValScores | None  # the step's train batch (the current skill's forward pass)

    @property
    def action(self) -> str:
        return str(self.record.get("action", ""))


@dataclass
class EpochEnd:
    epoch: int
    skill: str | None  # the current skill after the epoch's end (skill_v of its last step)
    slow: dict[str, Any] | None
    meta: dict[str, Any] | None


@dataclass
class SkillOptRun:
    root: Path
    config: dict[str, Any]
    seed: str
    baseline: ValScores | None
    steps: list[Step]
    epochs: list[EpochEnd]
    summary: dict[str, Any] | None  # summary.json: present once the run finished
    skipped: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.summary is not None


def _json(path: Path, skipped: list[str], root: Path) -> Any:
    """The JSON in ``path``; None (and a line in ``skipped``) when it is missing or damaged."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = "not valid JSON" if isinstance(exc, ValueError) else str(exc)
        skipped.append(f"{path.relative_to(root).as_posix()}: {reason}")
        return None


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def scores_of(path: Path) -> ValScores | None:
    """Per-item scores of a SkillOpt rollout's ``results.jsonl`` (unreadable lines skipped)."""
    text = _text(path)
    if text is None:
        return None
    hard: dict[str, float] = {}
    soft: dict[str, float] = {}
    reasons: dict[str, str] = {}
    for line in text.splitlines():
        try:
            row = json.loads(line)
            item, h = str(row["id"]), float(row["hard"])
        except (ValueError, KeyError, TypeError):
            continue
        hard[item] = h
        soft[item] = float(row.get("soft", h) or 0.0)
        reasons[item] = str(row.get("fail_reason") or "")
    return ValScores(hard, soft, reasons) if hard else None


def read_run(directory: str | Path) -> SkillOptRun:
    """Read a SkillOpt run directory (see the module docstring); SkillOptError when it is not
    one at all."""
    root = Path(directory)
    if not root.is_dir():
        raise SkillOptError(f"No SkillOpt run directory at {root}.")
    skipped: list[str] = []
    seed = _text(root / "skills" / "skill_v0000.md")
    history = _json(root / "history.json", skipped, root)
    has_steps = (root / "steps").is_dir()
    if seed is None:
        raise SkillOptError(
            f"{root} is not a SkillOpt run directory: it has no skills/skill_v0000.md "
            "(the seed skill SkillOpt writes first).",
            hint="Name the run's out_root, the folder that holds history.json and steps/.",
        )
    config = _json(root / "config.json", skipped, root)
    if not isinstance(config, dict):
        config = {}
        skipped.append("config.json: missing or damaged; models and schedule unknown")
    records: dict[int, dict[str, Any]] = {}
    if isinstance(history, list):
        for rec in history:
            if isinstance(rec, dict) and isinstance(rec.get("step"), int):
                records[rec["step"]] = rec
    elif (root / "history.json").exists():
        skipped.append("history.json: damaged; each step's step_record.json read instead")
    dirs = sorted(
        (int(m.group(1)), p)
        for p in ((root / "steps").iterdir() if has_steps else [])
        if (m := STEP_DIR.match(p.name)) and p.is_dir()
    )
    for number, path in dirs:
        rec = _json(path / "step_record.json", skipped, root)
        if isinstance(rec, dict) and number not in records and "action" in rec:
            records[number] = rec
    steps: list[Step] = []
    step_dirs = dict(dirs)
    for number in sorted(records):
        rec = records[number]
        path = step_dirs.get(number, root / "steps" / f"step_{number:04d}")
        candidate = _text(path / "candidate_skill.md")
        if rec.get("action") in ACCEPTED and candidate is None:
            candidate = _text(root / "skills" / f"skill_v{number:04d}.md")
        if rec.get("action") in ACCEPTED and candidate is None:
            skipped.append(f"step {number}: accepted, but its candidate skill is missing")
            continue
        ranked = _json(path / "ranked_edits.json", skipped, root)
        edits = ranked.get("edits") if isinstance(ranked, dict) else None
        if rec.get("action") not in ("skip_no_patches", "skip_no_rewrite") and edits is None:
            skipped.append(f"step {number}: ranked_edits.json missing; its edits are not shown")
        steps.append(
            Step(
                number=number,
                epoch=int(rec.get("epoch") or 1),
                record=rec,
                candidate=candidate,
                edits=[e for e in edits or [] if isinstance(e, dict)],
                val=scores_of(path / "selection_eval" / "results.jsonl"),
                train=scores_of(path / "rollout" / "results.jsonl"),
            )
        )
    missing = sorted(set(range(1, max(records, default=0) + 1)) - set(records))
    for number in missing:
        skipped.append(f"step {number}: no step record (history.json or step_record.json)")
    epochs = []
    for epoch in sorted({s.epoch for s in steps}):
        last = max(s.number for s in steps if s.epoch == epoch)
        slow = _json(
            root / "slow_update" / f"epoch_{epoch:02d}" / "slow_result.json", skipped, root
        )
        meta = _json(
            root / "meta_skill" / f"epoch_{epoch:02d}" / "meta_skill_result.json", skipped, root
        )
        epochs.append(
            EpochEnd(
                epoch=epoch,
                skill=_text(root / "skills" / f"skill_v{last:04d}.md"),
                slow=slow if isinstance(slow, dict) else None,
                meta=meta if isinstance(meta, dict) else None,
            )
        )
    summary = _json(root / "summary.json", skipped, root)
    return SkillOptRun(
        root=root,
        config=config,
        seed=seed,
        baseline=scores_of(root / "selection_eval_baseline" / "results.jsonl"),
        steps=steps,
        epochs=epochs,
        summary=summary if isinstance(summary, dict) else None,
        skipped=skipped,
    )
