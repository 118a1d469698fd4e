"""Trigger sets: user prompts and the skill that should load for each, or none.

An item is a prompt (``input``, ``prompt``, ``question`` or ``query``) with either

- ``"skill": "pdf"`` (that skill should load) or ``"skill": null`` (no skill should), or
- skill-creator's per-skill form ``{"query": ..., "should_trigger": true|false}``
  (anthropics/skills ``skill-creator``): true means the skill should load, false that it
  should not (another skill, or none, may). The skill is the item's ``skill`` field, else the
  one the file belongs to: a skill whose name is a folder of the file's path or its stem
  (``skills/pdf/evals/triggers.json``, ``evals/triggers/pdf.json``).

Invariants: a trigger set is read, split, hashed and checked exactly as a task set
(``skillvc.tasks.taskset.load_taskset``: the same files, splits, ids, overlap checks and
content hash); a skill it names must be in the library (by its listed name or its table).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from skillvc.core.config import RoutingConfig, TasksConfig
from skillvc.core.errors import TaskSetError
from skillvc.core.hashing import content_id
from skillvc.tasks.taskset import SPLITS, TaskItem, load_taskset

NONE = "none"  # the label of "no skill" in matrices and outputs


@dataclass(frozen=True)
class TriggerItem:
    id: str
    prompt: str
    expected: str | None  # the skill that should load; None: no skill (or see ``avoid``)
    avoid: str | None = None  # should_trigger false: this skill must not load
    source: str = ""

    @property
    def label(self) -> str:
        """The row of the confusion matrix: the skill, ``none``, or ``not <skill>``."""
        if self.avoid is not None:
            return f"not {self.avoid}"
        return self.expected or NONE

    def correct(self, picked: str | None) -> bool:
        if self.avoid is not None:
            return picked != self.avoid
        return picked == self.expected

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "prompt": self.prompt, "skill": self.expected}
        if self.avoid is not None:
            out["avoid"] = self.avoid
        return out


@dataclass(frozen=True)
class TriggerSet:
    train: tuple[TriggerItem, ...]
    val: tuple[TriggerItem, ...]
    test: tuple[TriggerItem, ...]
    hash: str

    def split(self, name: str) -> tuple[TriggerItem, ...]:
        if name not in SPLITS:
            raise TaskSetError(
                f"Unknown split '{name}' (expected train, val or test).",
                hint="Name one of the splits train, val or test.",
            )
        items: tuple[TriggerItem, ...] = getattr(self, name)
        return items

    def counts(self) -> dict[str, int]:
        return {name: len(self.split(name)) for name in SPLITS}


def load_triggers(config: RoutingConfig | None, root: Path, names: Mapping[str, str]) -> TriggerSet:
    """The ``[routing]`` trigger set; ``names`` maps every accepted spelling of a skill (its
    listed name, its table) to its listed name."""
    if config is None:
        raise TaskSetError(
            "No trigger set is configured.",
            hint='Add [routing] train/val/test (e.g. val = "evals/routing/val.jsonl") to '
            "skillvc.toml; see docs/routing.md.",
        )
    tasks = TasksConfig(
        train=config.train,
        val=config.val,
        test=config.test,
        path=config.path,
        split_field=config.split_field,
        split_ratio=list(config.split_ratio),
        split_seed=config.split_seed,
        allow_overlap=config.allow_overlap,
        scorer="json",  # any scorer that needs no target: a trigger item has none
    )
    try:
        taskset = load_taskset(tasks, root)
    except TaskSetError as exc:
        raise TaskSetError(
            exc.message.replace("[tasks]", "[routing]"),
            hint=(exc.hint or "").replace("[tasks]", "[routing]") or None,
        ) from None
    splits = {s: tuple(_item(it, names) for it in taskset.split(s)) for s in SPLITS}
    return TriggerSet(
        train=splits["train"],
        val=splits["val"],
        test=splits["test"],
        hash=content_id(
            {"tasks": taskset.hash, "labels": {s: [i.to_dict() for i in splits[s]] for s in SPLITS}}
        ),
    )


def _item(item: TaskItem, names: Mapping[str, str]) -> TriggerItem:
    fields = item.fields
    where = item.source or item.id
    if "should_trigger" in fields:
        flag = fields["should_trigger"]
        if isinstance(flag, str):
            flag = {"true": True, "false": False}.get(flag.strip().lower(), flag)
        if not isinstance(flag, bool):
            raise TaskSetError(f"{where}: should_trigger must be true or false.")
        owner = fields.get("skill") or _owner(item.source, names)
        if owner is None:
            raise TaskSetError(
                f"{where} says should_trigger but not for which skill.",
                hint='Add "skill": NAME to the item, or keep the file under the skill\'s '
                "folder (or name it after the skill).",
            )
        skill = _known(str(owner), names, where)
        if flag:
            return TriggerItem(item.id, item.input, skill, source=item.source)
        return TriggerItem(item.id, item.input, None, avoid=skill, source=item.source)
    if "skill" not in fields:
        raise TaskSetError(
            f'{where} names no skill (expected "skill": NAME or null, or should_trigger).',
            hint="A trigger item says which skill should load for its prompt; see docs/routing.md.",
        )
    given = fields["skill"]
    if given is None or (isinstance(given, str) and given.strip().lower() in ("", NONE)):
        return TriggerItem(item.id, item.input, None, source=item.source)
    return TriggerItem(item.id, item.input, _known(str(given), names, where), source=item.source)


def _known(name: str, names: Mapping[str, str], where: str) -> str:
    if name in names:
        return names[name]
    listed = sorted(set(names.values()))
    raise TaskSetError(
        f"{where} names skill {name!r}, which is not in the library ({', '.join(listed)}).",
        hint="Use a skill's frontmatter name or its [skills.<name>] table.",
    )


def _owner(source: str, names: Mapping[str, str]) -> str | None:
    path = PurePosixPath(re.sub(r":\d+$", "", source))
    for part in [path.stem, *reversed(path.parent.parts)]:
        if part in names:
            return part
    return None


def spellings(listed: Sequence[tuple[str, str]]) -> dict[str, str]:
    """``{spelling: listed name}`` from (listed name, table) pairs."""
    out: dict[str, str] = {}
    for name, table in listed:
        out.setdefault(table, name)
        out[name] = name
    return out
