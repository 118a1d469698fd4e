"""What a person reviews: drafted and harvested task items, and model outputs to label.

One library path for every write, used alike by ``skillvc review``'s page and its command-line
flags (and, for harvested items, by ``harvest --review``, whose approvals are the same
``harvest.reviewed`` events):

- ``decide(ws, item, "approve" | "reject" | "edit", ...)``: a task-file item's row gets
  ``status`` approved or rejected (an edit saves the new input, answers or rubric and approves),
  rewritten in place in its task file; a harvested item is approved through
  ``harvest.review`` and rejected or edited by the ``tasks.reviewed`` event the harvest's
  projection reads. Each is one ``tasks.reviewed`` event with the row before and after.
- ``label(ws, item, output, passed, note)``: one ``label.recorded`` event; the labels file
  (``[judge] labels``, else ``LABELS_FILE``) is rewritten from the events for ``judge
  calibrate``, and a passed output of a judge-scored item becomes one of its acceptable answers.

Everything is validated before anything is written: the item exists, a named task file is one
of the configured ones and inside the repository, an input is not empty, an item whose scorer
needs answers keeps one, and no text holds a secret.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillvc.coldstart.draft import DRAFTED_BY, read_rows, row_input
from skillvc.core.errors import BadData, NotFound
from skillvc.core.paths import inside_repo
from skillvc.core.store import EventStore
from skillvc.tasks.taskset import SPLITS, TARGET_FIELDS, TARGETLESS_SCORERS
from skillvc.workspace.workspace import Workspace

LABELS_FILE = "evals/judge-labels.jsonl"
DECISIONS = ("approve", "reject", "edit")
MAX_OUTPUTS = 4  # outputs shown per item, newest first
MAX_TEXT = 100_000


class ReviewError(BadData):
    """A review decision or label that cannot be recorded as asked."""


@dataclass
class Entry:
    """One item as the review shows it."""

    id: str
    origin: str  # draft | task | harvest
    status: str  # pending | approved | rejected
    split: str
    file: str
    input: str
    targets: list[str]
    rubric: str
    kind: str
    section: str
    scorer: str
    provenance: dict[str, Any] = field(default_factory=dict)
    outputs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# -- reading ----------------------------------------------------------------------------------


def task_files(ws: Workspace) -> dict[str, str]:
    """split -> configured JSONL task file (the files drafts go to and reviews rewrite)."""
    tasks = ws.config.tasks
    return {
        s: str(getattr(tasks, s))
        for s in SPLITS
        if getattr(tasks, s) and str(getattr(tasks, s)).endswith(".jsonl")
    }


def _targets(row: Mapping[str, Any]) -> list[str]:
    for key in TARGET_FIELDS:
        value = row.get(key)
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        return [v if isinstance(v, str) else json.dumps(v) for v in values]
    return []


def _status(row: Mapping[str, Any]) -> str:
    value = str(row.get("status") or "approved").strip().lower()
    return value if value in ("pending", "rejected") else "approved"


def _entry(row: Mapping[str, Any], split: str, file: str, set_scorer: str) -> Entry:
    given_metadata, given_provenance = row.get("metadata"), row.get("provenance")
    metadata: dict[str, Any] = given_metadata if isinstance(given_metadata, dict) else {}
    provenance: dict[str, Any] = given_provenance if isinstance(given_provenance, dict) else {}
    return Entry(
        id=str(row.get("id", "")),
        origin="draft" if provenance.get("by") == DRAFTED_BY else "task",
        status=_status(row),
        split=split,
        file=file,
        input=row_input(row),
        targets=_targets(row),
        rubric=str(metadata.get("rubric") or ""),
        kind=str(metadata.get("kind") or ""),
        section=str(metadata.get("section") or ""),
        scorer=str(row.get("scorer") or set_scorer),
        provenance=dict(provenance),
    )


def _harvested(ws: Workspace) -> list[Entry]:
    if ws.config.harvest is None:
        return []
    from skillvc.sleep import harvest

    with ws.store(create=True) as store:
        state = harvest.load_state(store)
    config = dataclasses.replace(ws.config.harvest)
    kinds = harvest.views(harvest.mine_state(state, config), state)
    out = []
    for kind in kinds:
        for item in kind.items:
            out.append(
                Entry(
                    id=item["id"],
                    origin="harvest",
                    status="approved" if item["reviewed"] else "pending",
                    split=item["split"],
                    file=config.tasks,
                    input=item["input"],
                    targets=[item["target"]] if item.get("target") else [],
                    rubric=kind.rubric or "",
                    kind=kind.id,
                    section=kind.name,
                    scorer="judge",
                    provenance={"by": "skillvc harvest", "session": item["metadata"]["session"]},
                )
            )
    return out


def entries(ws: Workspace, *, outputs: bool = True) -> list[Entry]:
    """Every reviewable item: the configured task files' rows, then the harvested items."""
    found: list[Entry] = []
    for split, rel in task_files(ws).items():
        path = inside_repo(ws.root, rel, f"[tasks] {split}")
        for row in read_rows(path):
            if "id" in row and row_input(row):
                found.append(_entry(row, split, rel, ws.config.tasks.scorer))
    found.extend(_harvested(ws))
    if outputs and found:
        with ws.store(create=True) as store:
            shown = _outputs(store, {e.id for e in found})
            for e in found:
                e.outputs = shown.get(e.id, [])
    return found


def _outputs(store: EventStore, ids: set[str]) -> dict[str, list[dict[str, Any]]]:
    """Per item, its newest distinct outputs in evaluations, with the person's label if any."""
    labels = latest_labels(store)
    out: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    skills: dict[str, str] = {}
    for ev in store.events(types=["evaluation"], newest_first=True):
        p = ev.payload
        skill = str(p.get("skill") or "")
        if skill not in skills:
            try:
                skills[skill] = "no skill" if not store.get_blob(skill).strip() else "skill"
            except Exception:  # noqa: BLE001 - a missing blob only loses a caption
                skills[skill] = "skill"
        for item in p.get("items") or []:
            blob = item.get("output")
            if item.get("id") not in ids or not blob or (item["id"], blob) in seen:
                continue
            if len(out.get(item["id"], [])) >= MAX_OUTPUTS:
                continue
            seen.add((item["id"], blob))
            label = labels.get((item["id"], blob))
            out.setdefault(item["id"], []).append(
                {
                    "output": blob,
                    "text": store.get_blob(blob),
                    "with": skills[skill],
                    "rev": p.get("rev") or p.get("sha"),
                    "hard": item.get("hard"),
                    "label": None if label is None else label["label"],
                    "note": "" if label is None else label.get("note", ""),
                }
            )
    return out


def latest_labels(store: EventStore) -> dict[tuple[str, str], dict[str, Any]]:
    labels: dict[tuple[str, str], dict[str, Any]] = {}
    for ev in store.events(types=["label.recorded"]):
        labels[(str(ev.payload.get("item")), str(ev.payload.get("output")))] = dict(ev.payload)
    return labels


def find(ws: Workspace, item_id: str, file: str | None = None) -> Entry:
    if file is not None:
        _check_file(ws, file)
    for e in entries(ws, outputs=False):
        if e.id == item_id and (file is None or e.file == file):
            return e
    raise NotFound(
        f"No task item '{item_id}' to review.",
        hint="List them with 'skillvc review --list'.",
    )


def _check_file(ws: Workspace, file: str) -> Path:
    """A task file named by a request: inside the repository and one of the configured ones."""
    path = inside_repo(ws.root, file, "the task file named")
    allowed = set(task_files(ws).values())
    if ws.config.harvest is not None:
        allowed.add(ws.config.harvest.tasks)
    if Path(file).as_posix() not in {Path(a).as_posix() for a in allowed}:
        raise ReviewError(
            f"{file} is not one of the configured task files.",
            hint="Review items of the files [tasks] names in skillvc.toml.",
        )
    return path


# -- validating -------------------------------------------------------------------------------


def _clean_text(value: Any, what: str, *, required: bool) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ReviewError(f"The {what} must be text.")
    value = value.strip()
    if required and not value:
        raise ReviewError(f"The {what} is empty.", hint=f"Write the task's {what}.")
    if len(value) > MAX_TEXT:
        raise ReviewError(f"The {what} is over {MAX_TEXT:,} characters.")
    return value


def _check_secrets(texts: Sequence[str]) -> None:
    from skillvc.secrets import findings

    for text in texts:
        found = findings(text)
        if found:
            raise ReviewError(
                f"The edit holds what looks like a secret ({found[0].kind}); it is not saved.",
                hint="Take the credential out of the task: task files are committed.",
            )


# -- writing ----------------------------------------------------------------------------------


def _rewrite(ws: Workspace, entry: Entry, change: Mapping[str, Any]) -> tuple[dict, dict]:
    """Rewrite ``entry``'s row in its task file with ``change`` merged in; (before, after)."""
    from skillvc.repo.skillrepo import write_atomic

    path = _check_file(ws, entry.file)
    lines = path.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and str(row.get("id")) == entry.id:
            before = dict(row)
            after = dict(row)
            for key, value in change.items():
                if key == "metadata":
                    merged = {**(row.get("metadata") or {}), **value}
                    after["metadata"] = {k: v for k, v in merged.items() if v is not None}
                elif value is None:
                    after.pop(key, None)
                else:
                    after[key] = value
            lines[i] = json.dumps(after, ensure_ascii=False, sort_keys=True)
            write_atomic(path, "\n".join(lines).encode("utf-8"))
            return before, after
    raise NotFound(f"Task item '{entry.id}' is no longer in {entry.file}.")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def decide(
    ws: Workspace,
    item_id: str,
    decision: str,
    *,
    input: str | None = None,
    targets: Sequence[str] | None = None,
    rubric: str | None = None,
    file: str | None = None,
    by: str = "skillvc review",
) -> Entry:
    """Approve, reject or edit (and so approve) one item; one ``tasks.reviewed`` event."""
    if decision not in DECISIONS:
        raise ReviewError(f"Unknown decision '{decision}' (expected approve, reject or edit).")
    entry = find(ws, item_id, file)
    change: dict[str, Any] = {}
    if decision == "edit":
        new_input = _clean_text(entry.input if input is None else input, "input", required=True)
        if targets is not None and (
            not isinstance(targets, (list, tuple)) or not all(isinstance(t, str) for t in targets)
        ):
            raise ReviewError("The acceptable answers must be a list of texts.")
        new_targets = [t.strip() for t in (entry.targets if targets is None else targets)]
        new_targets = [t for t in new_targets if t]
        new_rubric = _clean_text(
            entry.rubric if rubric is None else rubric, "rubric", required=False
        )
        scorer = "judge" if new_rubric and entry.scorer not in TARGETLESS_SCORERS else entry.scorer
        if not new_targets and scorer not in TARGETLESS_SCORERS:
            raise ReviewError(
                f"Item {item_id} is scored by '{scorer}', which needs an acceptable answer.",
                hint="Give at least one acceptable answer, or a rubric for the judge.",
            )
        _check_secrets([new_input, *new_targets, new_rubric])
        change = {
            "input": new_input,
            "target": new_targets or None,
            "metadata": {"rubric": new_rubric} if new_rubric else {},
        }
        if scorer != entry.scorer:
            change["scorer"] = scorer
        if not new_rubric and entry.rubric:
            change["metadata"] = {"rubric": None}
    status = "rejected" if decision == "reject" else "approved"
    with ws.store(create=True) as store, store.writer_lock("review"):
        if entry.origin == "harvest":
            before = entry.to_dict()
            after = {**before, "status": status}
            if decision == "edit":
                after |= {"input": change["input"], "targets": change["target"] or []}
        else:
            review = {"by": by, "at": _now()}
            before, after = _rewrite(
                ws,
                entry,
                {
                    **{k: v for k, v in change.items() if k != "metadata"},
                    "status": status,
                    "reviewed": review,
                }
                | ({"metadata": change["metadata"]} if change.get("metadata") else {}),
            )
        store.append(
            "tasks.reviewed",
            {
                "item": item_id,
                "origin": entry.origin,
                "decision": {"approve": "approved", "reject": "rejected", "edit": "edited"}[
                    decision
                ],
                "by": by,
                "file": entry.file,
                "before": before,
                "after": after,
            },
        )
    if entry.origin == "harvest" and decision != "reject":
        from skillvc.sleep import harvest

        harvest.review(ws, approve=[item_id])
    elif entry.origin == "harvest":
        from skillvc.sleep import harvest

        harvest.rewrite_task_file(ws)
    return find(ws, item_id, entry.file)


def label(
    ws: Workspace,
    item_id: str,
    output: str,
    passed: bool,
    note: str = "",
    *,
    by: str = "skillvc review",
) -> dict[str, Any]:
    """Record a person's pass or fail of one output of an item; rewrite the labels file."""
    entry = find(ws, item_id)
    note = _clean_text(note, "note", required=False)
    _check_secrets([note])
    with ws.store(create=True) as store, store.writer_lock("review"):
        known = _outputs(store, {item_id}).get(item_id, [])
        shown = next((o for o in known if o["output"] == output), None)
        if shown is None:
            raise ReviewError(
                f"Item {item_id} has no output {output[:12]} to label.",
                hint="Label one of the outputs the review shows (from 'skillvc eval').",
            )
        payload = {
            "item": item_id,
            "output": output,
            "label": 1 if passed else 0,
            "note": note,
            "by": by,
        }
        store.append("label.recorded", payload)
        labels_file = ws.config.judge.labels or LABELS_FILE
        _write_labels(ws, store, labels_file)
    added = False
    judged = entry.scorer == "judge" or ws.config.tasks.scorer == "judge"
    text = str(shown["text"]).strip()
    if passed and judged and entry.origin != "harvest" and text and text not in entry.targets:
        # A passed output of a judge-scored item is an acceptable answer the judge is shown.
        with ws.store(create=True) as store, store.writer_lock("review"):
            before, after = _rewrite(ws, entry, {"target": [*entry.targets, text]})
            store.append(
                "tasks.reviewed",
                {
                    "item": item_id,
                    "origin": entry.origin,
                    "decision": "expected",
                    "by": by,
                    "file": entry.file,
                    "before": before,
                    "after": after,
                },
            )
        added = True
    return payload | {"labels_file": labels_file, "target_added": added}


def _write_labels(ws: Workspace, store: EventStore, labels_file: str) -> None:
    """The labels file ``judge calibrate`` reads, from the events (latest label per output)."""
    from skillvc.repo.skillrepo import write_atomic

    path = inside_repo(ws.root, labels_file, "[judge] labels")
    by_id = {e.id: e for e in entries(ws, outputs=False)}
    rows = []
    for (item_id, blob), p in sorted(latest_labels(store).items()):
        entry = by_id.get(item_id)
        if entry is None:
            continue
        row: dict[str, Any] = {
            "id": f"{item_id}-{blob[:8]}",
            "input": entry.input,
            "output": store.get_blob(blob),
            "label": p["label"],
        }
        if p.get("note"):
            row["note"] = p["note"]
        if entry.targets:
            row["targets"] = entry.targets
        rows.append(row)
    body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    write_atomic(path, body.encode("utf-8"))
