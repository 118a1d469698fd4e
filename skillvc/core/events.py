"""Event records, the catalogue of event types, and upcasting of old payloads.

Invariants:
- An ``Event`` is frozen: once appended it is never changed (the database refuses UPDATE and
  DELETE). Old payloads are upcast when read, never rewritten.
- Run events carry ``seq``, their position in the run. The training loop is deterministic, so a
  resumed run re-emits the same events in the same order; the store answers a re-emitted
  ``(run_id, seq)`` with the event already there instead of writing it twice.
- Cache events (model calls, evaluations) carry ``key`` instead, a content hash unique per type.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skillvc.core.records import entries_of, fields_of


@dataclass(frozen=True)
class Event:
    id: int
    type: str
    payload: Mapping[str, Any]
    run_id: str | None = None
    seq: int | None = None
    step: int | None = None
    epoch: int | None = None
    key: str | None = None
    created_at: str = ""
    version: int = 1

    def to_dict(self) -> dict[str, Any]:
        names = "id type run_id seq step epoch key created_at version"
        return {**fields_of(self, names), "payload": dict(self.payload)}


@dataclass(frozen=True)
class EventType:
    name: str
    version: int
    doc: str
    upcasters: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] = field(
        default_factory=dict
    )


# The catalogue. ``doc`` is the reference users read (README "Event types").
EVENT_TYPES: dict[str, EventType] = {
    t.name: t
    for t in [
        EventType("run.started", 1, "config snapshot, models, dataset and template hashes"),
        EventType("run.resumed", 1, "a later process picked up an unfinished run"),
        EventType(
            "package.rendered",
            1,
            "a skill package's linked files sent to the chat target, and those cut",
        ),
        EventType("baseline", 1, "the seed skill's val score, before the first step"),
        EventType("run.finished", 1, "baseline, best and test scores, calls, tokens, cost"),
        EventType("run.stopped", 1, "the run stopped early (budget, failures); resumable"),
        EventType("step.started", 1, "learning rate and the batch of train items"),
        EventType("rollout", 1, "one item run by the target with one skill version, scored"),
        EventType("model.call", 1, "one model call: role, model, params, blobs, tokens, cost"),
        EventType("model.error", 1, "a model call that failed after its last retry"),
        EventType("edit.proposed", 1, "one edit proposed by a reflection (or a human patch)"),
        EventType("edits.merged", 1, "aggregation of the step's proposals into one list"),
        EventType("edits.selected", 1, "edits kept under the learning-rate budget"),
        EventType(
            "reflection.retried", 1, "every proposal repeated a refuted edit: other failures"
        ),
        EventType("edits.released", 1, "held-back refuted edits given a second look, and why"),
        EventType("edits.held", 1, "held-back refuted edits kept at an epoch's end, and why"),
        EventType("edit.unmatched", 1, "an edit whose target or anchor could not be placed"),
        EventType("reflection.failed", 1, "a reflection whose answer was unusable after repair"),
        EventType("edit.refused", 1, "a malformed edit of a reflection's answer, and why"),
        EventType("step.empty", 1, "a step that produced no usable edits"),
        EventType("gate", 1, "candidate vs current on val: decision and per-item scores"),
        EventType("commit.intent", 1, "a commit about to be written (crash reconciliation)"),
        EventType("commit.done", 1, "the sha of a commit whose intent was logged"),
        EventType("slow_update", 1, "epoch-end guidance written into the protected region"),
        EventType("meta_update", 1, "optimizer-side meta skill notes (never shipped)"),
        EventType("checkpoint", 1, "a tag for an epoch end or the best skill"),
        EventType("evaluation", 1, "a skill version scored on a split (skillvc eval)"),
        EventType("routing.started", 1, "a routing run: library, trigger set, selector, settings"),
        EventType("routing.evaluated", 1, "a library's routing on a split: P/R/F1, confusion"),
        EventType("routing.body", 1, "a body training pass between routing epochs (--body)"),
        EventType("routing.finished", 1, "routing before and after, edits kept, calls"),
        EventType("run.projected", 1, "calls, tokens and cost projected after the baseline"),
        EventType("harvest.started", 1, "a harvest of agent transcripts began (source, dirs)"),
        EventType("harvest.session", 1, "one transcript read: its redacted task exchanges"),
        EventType("harvest.kind", 1, "a recurring task kind mined from the sessions"),
        EventType("harvest.rubric", 1, "a judge rubric for a kind, drafted or edited"),
        EventType("harvest.reviewed", 1, "harvested items a person approved for training"),
        EventType("harvest.finished", 1, "counts of a harvest and the task file it wrote"),
        EventType("sleep.finished", 1, "a nightly run: its harvest, branch, run and report"),
        EventType("run.abandoned", 1, "a stopped run nobody will resume (a sleep run's)"),
        EventType("speculation.wasted", 1, "rollouts started during a gate its acceptance voided"),
        EventType("batch.submitting", 1, "a wave about to be sent as a provider batch"),
        EventType("batch.submitted", 1, "the provider's id of a wave's batch, before waiting"),
        EventType("batch.ended", 1, "a batch whose results were read"),
        EventType("judge.calibrated", 1, "the judge's agreement with a person's labels"),
        EventType("tasks.drafted", 1, "task items drafted for a skill, pending review, and drops"),
        EventType("tasks.reviewed", 1, "a person approved, edited or rejected a task item"),
        EventType("label.recorded", 1, "a person's pass or fail of a model output, with a note"),
        EventType("skill.worth", 1, "a skill against no skill (or a revision), paired on a split"),
    ]
}


def upcast(type_: str, version: int, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Bring a stored payload up to the current version of its type (read path only)."""
    spec = EVENT_TYPES.get(type_)
    if spec is None:
        return version, payload
    while version < spec.version:
        payload = spec.upcasters[version](payload)
        version += 1
    return version, payload


def current_version(type_: str) -> int:
    spec = EVENT_TYPES.get(type_)
    return spec.version if spec else 1


DAMAGED = "damaged"  # the payload key of an event whose stored payload is not a JSON object


def read_payload(text: Any) -> dict[str, Any]:
    """A stored payload; one that is not a JSON object (edited by hand, a damaged page) is
    ``{"damaged": "<why>"}``, so readers show it as damaged instead of crashing."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        return {DAMAGED: f"the stored payload is not JSON ({type(exc).__name__})"}
    if not isinstance(value, dict):
        return {DAMAGED: "the stored payload is not a JSON object"}
    return value


def event_from_row(row: Mapping[str, Any]) -> Event:
    payload = read_payload(row["payload"])
    if DAMAGED in payload:
        version = row["version"]  # never upcast: an upcaster would fail on it
    else:
        version, payload = upcast(row["type"], row["version"], payload)
    names = "id type run_id seq step epoch key created_at"
    return Event(payload=payload, version=version, **entries_of(row, names))
