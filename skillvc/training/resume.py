"""Whether ``skillvc train`` resumes its unfinished run, and what changed since it started.

``plan_resume`` compares the unfinished run's recorded config (and its task set and prompt
templates) with what training would use now, and decides:

- ``resume``: nothing that decides the result changed (or ``--resume``): the run goes on with
  the settings it started with;
- ``restart``: something changed and the run stopped before its first step completed, so there
  is nothing to keep: a new run starts with the new settings and the old one is abandoned;
- ``refuse``: something changed after steps were done: ``train`` says what and stops, and the
  user picks ``--new`` (start over, the old run abandoned) or ``--resume`` (as it was);
- ``new``: no unfinished run, or ``--new``.

Invariants:
- Settings that cannot change a run's results (the budget, workers, speculation, a role's key
  variable, timeouts, retries and rate limits) never count as a change: a resumed run takes
  them from skillvc.toml and the command line now, and its events stay those of one recipe.
  (A gate's chunk between looks, which ``workers`` sets for a new run, is kept from the run's
  start: ``RunContext.look_chunk``.)
- A changed task set or template set is never resumed (the replay would send other prompts).
- An abandoned run carries a ``run.abandoned`` event naming why; it is never resumed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skillvc.core.config import Config, parse_config_dict, with_execution
from skillvc.core.errors import ConfigError, SkillvcError, TaskSetError
from skillvc.core.events import Event
from skillvc.core.hashing import canonical_json
from skillvc.core.store import EventStore
from skillvc.models import prompts
from skillvc.secrets import REDACTED, restore
from skillvc.tasks.taskset import load_taskset
from skillvc.workspace.workspace import Workspace

NEW, RESUME, RESTART, REFUSE = "new", "resume", "restart", "refuse"

# Settings a resume may change: they decide when a run stops or how its calls are sent, never
# what a recorded step computed. Everything else in the config snapshot is the run's recipe.
FREE_TRAIN_KEYS = ("budget_usd", "speculate", "workers")
FREE_ROLE_KEYS = (
    "api_key_env",
    "timeout_s",
    "max_retries",
    "requests_per_minute",
    "tokens_per_minute",
)


@dataclass(frozen=True)
class ResumePlan:
    """What the next ``train`` does with the newest unfinished run of its skill."""

    action: str  # new | resume | restart | refuse
    unfinished: Event | None = None
    changes: tuple[str, ...] = ()  # "target.model: a -> b", one per changed setting
    steps_done: int = 0
    dataset_changed: bool = False
    templates_changed: bool = False

    @property
    def run_id(self) -> str | None:
        return None if self.unfinished is None else str(self.unfinished.run_id)

    @property
    def steps_text(self) -> str:
        return f"{self.steps_done} step{'s' if self.steps_done != 1 else ''} done"

    def sentence(self) -> str:
        """One sentence for a person: what changed since the run started."""
        return "; ".join(self.changes)

    def error(self) -> SkillvcError:
        """The refusal ``train`` raises when it cannot decide for the user."""
        what = "settings"
        if self.dataset_changed and len(self.changes) == 1:
            what = "task set"
        elif self.templates_changed and len(self.changes) == 1:
            what = "optimizer's prompt templates"
        steps = f"{self.steps_done} step{'s' if self.steps_done != 1 else ''}"
        message = (
            f"The {what} changed since run {self.run_id} started ({steps} done): {self.sentence()}."
        )
        if self.dataset_changed or self.templates_changed:
            resume = "restore them to resume it as it was"
        else:
            resume = "'skillvc train --resume' resumes it as it was"
        hint = (
            f"'skillvc train --new' starts over with the new settings ({self.run_id} is "
            f"marked abandoned), or {resume}."
        )
        cls = TaskSetError if self.dataset_changed else ConfigError
        return cls(message, hint=hint)


def plan_resume(
    ws: Workspace,
    store: EventStore,
    config: Config,
    unfinished: Event | None,
    *,
    new: bool = False,
    resume: bool = False,
) -> ResumePlan:
    """Decide what ``train`` does with ``unfinished`` when it would run ``config`` now
    (skillvc.toml with the command line's overrides)."""
    if unfinished is None:
        return ResumePlan(NEW)
    steps = steps_done(store, str(unfinished.run_id))
    if new:
        return ResumePlan(NEW, unfinished, steps_done=steps)
    recorded = _recorded_config(unfinished, config)
    changes = config_changes(recorded, config.to_dict())
    started = unfinished.payload
    dataset_changed = templates_changed = False
    if not resume:  # --resume reads the run's own task files; prepare_run checks them
        was = started.get("dataset") or {}
        if was.get("hash") is not None:
            taskset = load_taskset(config.tasks, ws.root)
            if was["hash"] != taskset.hash:
                dataset_changed = True
                changes.append(
                    f"task set: {_counts(was.get('counts'))} -> {_counts(taskset.counts())}"
                    if was.get("counts") != taskset.counts()
                    else "task set: the items' contents changed"
                )
    moved = _moved(ws, config, started) if steps == 0 else None
    if moved:  # with a step done, prepare_run explains how to move the branch back
        changes.append(moved)
    templates = started.get("templates")
    if templates is not None and templates != prompts.template_hashes():
        templates_changed = True
        changes.append("optimizer prompt templates: changed (skillvc was upgraded?)")
    plan = ResumePlan(
        RESUME,
        unfinished,
        tuple(changes),
        steps,
        dataset_changed=dataset_changed,
        templates_changed=templates_changed,
    )
    if resume or not changes:
        return plan
    return dataclasses.replace(plan, action=RESTART if steps == 0 else REFUSE)


def _moved(ws: Workspace, config: Config, started: Mapping[str, Any]) -> str | None:
    """ "main: moved from a to b" when the branch a run with no step done started from moved
    (a commit of the fixed skillvc.toml): the run would start again from there anyway."""
    branch = ws.repo.current_branch()
    if config.train.branch not in (None, branch) or started.get("branch") != branch:
        return None
    head, base = ws.repo.head_sha(), str(started.get("base_commit"))
    if head is None or head == base:
        return None
    return f"{branch}: moved from {base[:10]} to {head[:10]}"


def steps_done(store: EventStore, run_id: str) -> int:
    """Steps of the run that completed (gated, or empty): what a restart would throw away."""
    rows = store.query(
        "SELECT COUNT(DISTINCT step) AS n FROM events WHERE run_id = ? "
        "AND type IN ('gate', 'step.empty') AND step IS NOT NULL",
        [run_id],
    )
    return int(rows[0]["n"])


def resumed_config(ws: Workspace, unfinished: Event, now: Config) -> Config:
    """The config a resumed run uses: the one it started with, with the settings that cannot
    change its results (``FREE_*_KEYS``, execution) taken from ``now``."""
    snapshot = started_config(unfinished, now)
    config = with_execution(parse_config_dict(snapshot, ws.root), now)
    train = dataclasses.replace(config.train, **{k: getattr(now.train, k) for k in FREE_TRAIN_KEYS})
    roles = {
        role: dataclasses.replace(
            getattr(config, role), **{k: getattr(getattr(now, role), k) for k in FREE_ROLE_KEYS}
        )
        for role in ("target", "optimizer")
    }
    config = dataclasses.replace(config, train=train, **roles)
    config.skill_name, config.skills = ws.config.skill_name, ws.config.skills
    return config


def abandon(store: EventStore, plan: ResumePlan, reason: str, by: str) -> None:
    """Mark the plan's unfinished run abandoned (``runs --all`` still lists it)."""
    if plan.unfinished is None:
        return
    payload: dict[str, Any] = {"reason": reason, "by": by}
    if plan.changes:
        payload["changes"] = list(plan.changes)
    store.append("run.abandoned", payload, run_id=plan.run_id)


def config_changes(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """``"section.key: old -> new"`` for every setting that differs and decides the result."""
    was, now = _flatten(recorded), _flatten(current)
    out = []
    for key in sorted(set(was) | set(now), key=_order):
        if _free(key) or was.get(key, _UNSET) == now.get(key, _UNSET):
            continue
        out.append(f"{key}: {_show(was.get(key, _UNSET))} -> {_show(now.get(key, _UNSET))}")
    return out


_UNSET = object()
_SECTION_ORDER = ("target", "optimizer", "tasks", "skill", "train", "prices")


def _order(key: str) -> tuple[int, str]:
    section = key.split(".", 1)[0]
    rank = _SECTION_ORDER.index(section) if section in _SECTION_ORDER else len(_SECTION_ORDER)
    return rank, key


def _free(key: str) -> bool:
    section, _, name = key.partition(".")
    if section == "train":
        return name in FREE_TRAIN_KEYS
    return section in ("target", "optimizer") and name in FREE_ROLE_KEYS


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        # Prices are a table of tables; a role's env a mapping: both compare per key.
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _show(value: Any) -> str:
    if value is _UNSET:
        return "(unset)"
    if isinstance(value, str):
        return value if value else '""'
    return json.dumps(value)


def _counts(counts: Any) -> str:
    if not isinstance(counts, Mapping):
        return "?"
    order = ("train", "val", "test")
    splits = sorted(counts, key=lambda s: (order.index(s) if s in order else len(order), s))
    return ", ".join(f"{counts[split]} {split}" for split in splits)


def started_config(unfinished: Event, now: Config) -> dict[str, Any]:
    """The config snapshot ``unfinished`` started with, as it must be resumed."""
    snapshot = dict(unfinished.payload.get("config") or {})
    train = snapshot.get("train")
    if isinstance(train, Mapping) and "attribution" not in train:
        # A run started before attribution existed resumes with the bundle gate it had.
        snapshot["train"] = {**train, "attribution": False}
    for key in ("form_examples", "label_examples"):
        train = snapshot.get("train")
        if isinstance(train, Mapping) and key not in train:
            # Recorded only when on: a run without it (started before it existed, or with it
            # off) resumes without that worked-examples edit, and its replay does not diverge.
            snapshot["train"] = {**train, key: False}
    if REDACTED in canonical_json(snapshot):  # the log lost secrets; skillvc.toml has them
        snapshot = restore(snapshot, now.to_dict())
    return snapshot


def _recorded_config(unfinished: Event, now: Config) -> dict[str, Any]:
    snapshot = started_config(unfinished, now)
    try:  # with today's defaults filled in: a key added since is no change
        return parse_config_dict(snapshot, now.root).to_dict()
    except SkillvcError:
        return snapshot
