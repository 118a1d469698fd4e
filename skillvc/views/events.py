"""One readable text per event type, for ``skillvc show``.

Invariant: ``RENDERERS`` has an entry for every type in ``skillvc.core.events.EVENT_TYPES`` (a test
iterates over the catalogue), so a new event type without a text fails the tests instead of
falling back to raw JSON. Each renderer reads only the payload it is given (plus, for a few
types, context ``skillvc.review.history.show`` looked up: ``flips`` of a gate, ``previous``
guidance of a slow update) and never raises on a payload missing a key: old events lack newer keys.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Payload = Mapping[str, Any]
Renderer = Callable[[Payload, Mapping[str, Any]], list[str]]
WIDTH = 76  # a value is shortened to fit an 80-column terminal after its indent


def _s(value: Any, width: int = WIDTH) -> str:
    """A value on one line, shortened: text as is, anything else as compact JSON."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _score(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def _ids(ids: Sequence[Any], width: int = WIDTH - 10) -> str:
    return _s(", ".join(str(i) for i in ids), width) if ids else "none"


def _money(value: Any) -> str:
    return f"${value:.4f}" if isinstance(value, int | float) else "price unknown"


def _fields(p: Payload, names: Sequence[str]) -> list[str]:
    """``name: value`` for each named key present (the generic part of a renderer)."""
    return [f"  {n}: {_s(p[n], WIDTH - len(n))}" for n in names if p.get(n) not in (None, "", [])]


def _edit(edit: Mapping[str, Any]) -> str:
    op = edit.get("op", "?")
    into = f" in {edit['file']}" if edit.get("file") else ""
    if op == "replace":
        what = f"{_s(edit.get('target'), 28)} -> {_s(edit.get('content'), 32)}"
    elif op == "add":
        where = f" after {_s(edit.get('anchor'), 20)}" if edit.get("anchor") else ""
        what = f"{where.strip()} {_s(edit.get('content'), 44)}".strip()
    else:
        what = _s(edit.get("target"), 56)
    return f"  {op}{into}: {what} [{str(edit.get('id', ''))[:8]}]"


# -- run lifecycle -----------------------------------------------------------------------------


def run_started(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    models = p.get("models") or {}
    data = p.get("dataset") or {}
    counts = ", ".join(f"{n} {s}" for s, n in (data.get("counts") or {}).items())
    train = (p.get("config") or {}).get("train") or {}
    settings = ", ".join(
        f"{k} {train[k]}" for k in ("epochs", "batch_size", "learning_rate", "seed") if k in train
    )
    return [
        f"  target {models.get('target', '?')}, optimizer {models.get('optimizer', '?')}",
        f"  from {str(p.get('base_commit', '?'))[:10]} on {p.get('branch') or 'detached HEAD'}"
        + (f", skill {p['skill_name']}" if p.get("skill_name") else ""),
        f"  tasks: {counts or '?'} (task set {str(data.get('hash', '?'))[:12]})",
        f"  settings: {settings}",
    ]


def run_resumed(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    budget = p.get("budget_usd")
    return ["  picked up again" + (f" with a budget of ${budget:g}" if budget else "")]


def run_stopped(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [f"  reason: {p.get('reason', '?')}"] + _fields(p, ("message", "budget_usd", "spent"))


def run_abandoned(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    lines = [f"  reason: {p.get('reason', '?')}"]
    if p.get("by"):
        lines.append(f"  replaced by run {p['by']}")
    lines.extend(f"  changed: {_s(c, WIDTH - 11)}" for c in p.get("changes") or [])
    return lines


def run_finished(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  val {_score(p.get('baseline_val'))} -> {_score(p.get('best_val'))}, "
        f"test {_score(p.get('baseline_test'))} -> {_score(p.get('test'))}",
        f"  {p.get('steps', '?')} steps: {p.get('accepted', '?')} accepted, "
        f"{p.get('rejected', '?')} rejected; best commit {str(p.get('best_commit') or '-')[:10]}",
        f"  {p.get('calls', '?')} calls, {p.get('tokens', 0):,} tokens, "
        f"cost {_money(p.get('cost_usd'))}",
    ]


def run_projected(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    calls = p.get("calls") or {}
    per_role = ", ".join(f"{n} {role}" for role, n in calls.items())
    lines = [
        f"  about {per_role} calls, {p.get('tokens', 0):,} tokens, {_money(p.get('cost_usd'))}"
    ]
    if p.get("unpriced"):
        lines.append(f"  no price for: {_ids(p['unpriced'])}")
    return lines


def package_rendered(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  sent with SKILL.md: {_ids(p.get('included') or [])}",
        f"  left out (too large): {_ids(p.get('cut') or [])}",
    ]


def baseline(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [f"  the seed skill scores {_score(p.get('val'))} on val ({p.get('n', '?')} items)"]


def checkpoint(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  tag {p.get('tag', '?')} at {str(p.get('sha', '?'))[:10]}, val {_score(p.get('val'))}"
    ]


# -- a step ------------------------------------------------------------------------------------


def step_started(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    batch = p.get("batch") or []
    return [
        f"  learning rate {p.get('lr', '?')} edits, of {p.get('total_steps', '?')} steps",
        f"  batch of {len(batch)}: {_ids(batch)}",
    ]


def rollout(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    lines = [f"  {p.get('split', '?')} item {p.get('item', '?')}: hard {_score(p.get('hard'))}"]
    lines.extend(_fields(p, ("reason", "error")))
    return lines


def model_call(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  {p.get('role', '?')} {p.get('model', '?')}: {p.get('prompt_tokens', 0)} + "
        f"{p.get('completion_tokens', 0)} tokens, {_money(p.get('cost_usd'))}"
    ]


def model_error(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    transient = " (transient)" if p.get("transient") else ""
    return [
        f"  {p.get('role', '?')} {p.get('model', '?')}: {p.get('kind', 'error')}{transient}",
        f"  {_s(p.get('error'), WIDTH - 2)}",
    ]


def edit_proposed(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    edit = p.get("edit") or {}
    lines = [f"  by {p.get('source', '?')}" + (f" ({p['kind']})" if p.get("kind") else "")]
    lines.append(_edit(edit))
    if edit.get("rationale"):
        lines.append(f"  why: {_s(edit['rationale'], WIDTH - 7)}")
    lines.extend(_fields(p, ("message",)))
    return lines


def edits_merged(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    edits = p.get("edits") or []
    lines = [f"  {len(edits)} distinct edits (support = how many reflections proposed each):"]
    for e in edits:
        merged = f", merged {_ids(e.get('merged_from') or [], 30)}" if e.get("merged_from") else ""
        lines.append(f"    {str(e.get('id', ''))[:8]} support {e.get('support', '?')}{merged}")
    return lines


def edits_selected(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  kept {len(p.get('selected') or [])} (learning rate {p.get('lr', '?')}): "
        f"{_ids([str(i)[:8] for i in p.get('selected') or []])}",
        f"  dropped: {_ids([str(i)[:8] for i in p.get('dropped') or []])}",
    ] + (
        [f"  held back as refuted: {_ids([str(i)[:8] for i in p['refuted']])}"]
        if p.get("refuted")
        else []
    )


def reflection_retried(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [f"  reflected again: {p.get('reason', '?')}"] + _fields(p, ("items",))


def edits_released(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [f"  {p.get('released', '?')} held edits released: {p.get('reason', '?')}"]


def edits_held(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [f"  {p.get('held', '?')} edits still held back: {p.get('reason', '?')}"]


def edit_unmatched(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    lines = [f"  could not be placed ({p.get('reason', '?')}): {_s(p.get('detail'), 48)}"]
    if p.get("edit"):
        lines.append(_edit(p["edit"]))
    return lines


def reflection_failed(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return ["  the optimizer's answer was unusable after repair"] + _fields(
        p, ("kind", "minibatch", "error", "reason")
    )


def edit_refused(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    lines = [f"  a malformed edit, refused: {_s(p.get('reason', '?'), WIDTH - 28)}"]
    return lines + _fields(p, ("kind", "minibatch", "edit", "detail"))


def step_empty(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [f"  no candidate: {p.get('reason', '?')}"]


def gate(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    before, after = p.get("before") or {}, p.get("after") or {}
    early = " (stopped early)" if p.get("early_stopped") else ""
    lines = [
        f"  {p.get('decision', '?')}: val {_score(before.get('mean'))} -> "
        f"{_score(after.get('mean'))} on {after.get('n', '?')} items{early}"
    ]
    if p.get("p_value") is not None:
        lines.append(f"  p = {p['p_value']:.3g} ({p.get('test', 'test')})")
    if p.get("changed_nothing"):
        lines.append("  changed nothing: not one val answer differed")
    lines.extend(_edit(e) for e in p.get("edits") or [])
    lines.extend(flip_lines(p, ctx.get("flips")))
    return lines


def flip_lines(p: Payload, flips: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The items the candidate flipped, with the answers before and after when known."""
    flipped = p.get("flipped") or {}
    if not (flipped.get("gained") or flipped.get("lost")):
        return []
    lines = [
        f"  flipped: {len(flipped.get('gained') or [])} now right, "
        f"{len(flipped.get('lost') or [])} now wrong (answer before -> after)"
    ]
    known = {f["item"]: f for f in flips or []}
    for sign, key in (("+", "gained"), ("-", "lost")):
        for item in flipped.get(key) or []:
            f = known.get(item)
            answers = f" {_s(f['before'], 24)} -> {_s(f['after'], 24)}" if f else ""
            lines.append(f"    {sign} {item}{answers}")
    return lines


def commit_intent(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    kind = "an accepted candidate" if p.get("accepted") else "a rejected candidate"
    where = p.get("ref") or "the branch"
    return [
        f"  about to commit {kind} on {where} (gate event {p.get('gate_id', '?')}), "
        f"parent {str(p.get('parent') or '-')[:10]}"
    ]


def commit_done(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [f"  committed {str(p.get('sha', '?'))[:10]} to {p.get('ref') or 'the branch'}"]


def slow_update(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    if p.get("skipped"):
        return [f"  skipped: {_s(p.get('reason') or 'nothing to say', 60)}"]
    gated = "gated" if p.get("gated", True) else "applied without a gate"
    lines = [f"  epoch-end guidance for the protected region ({gated}); the change:"]
    before = str(ctx.get("previous") or "").splitlines()
    after = str(p.get("guidance") or "").splitlines()
    diff = difflib.unified_diff(before, after, "before", "after", n=1, lineterm="")
    lines.extend(f"    {line}" for line in list(diff)[2:])  # without the ---/+++ header
    if p.get("error"):
        lines.append(f"  error: {_s(p['error'], WIDTH - 9)}")
    return lines


def meta_update(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    if p.get("error"):
        return [f"  failed: {_s(p['error'], WIDTH - 10)}"]
    notes = str(p.get("notes") or "").splitlines()
    return ["  optimizer-side notes (never shipped in the skill):"] + [
        f"    {_s(n, WIDTH - 4)}" for n in notes
    ]


def routing_started(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    data = p.get("dataset") or {}
    counts = ", ".join(f"{n} {s}" for s, n in (data.get("counts") or {}).items())
    models = p.get("models") or {}
    skills = [str(s.get("name")) for s in p.get("library") or []]
    return [
        f"  library: {_ids(skills)}",
        f"  selector {models.get('target', '?')}, optimizer {models.get('optimizer', '?')}",
        f"  trigger set {str(data.get('hash', '?'))[:12]} ({counts or '?'})",
    ] + _fields(p, ("base_commit", "branch"))


def _library(p: Payload) -> str:
    interval = p.get("library_interval") or []
    band = f" [{_score(interval[0])}, {_score(interval[1])}]" if len(interval) == 2 else ""
    return f"library {_score(p.get('library'))}{band}"


def routing_evaluated(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    lines = [f"  {p.get('label', '?')} on {p.get('split', '?')}: {_library(p)}, n {p.get('n')}"]
    for name, s in (p.get("skills") or {}).items():
        lines.append(
            f"  {name}: precision {_score(s.get('precision'))}, recall "
            f"{_score(s.get('recall'))}, f1 {_score(s.get('f1'))}"
        )
    return lines


def routing_body(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  {p.get('skill', '?')} epoch {p.get('epoch', '?')}: run {p.get('run', '?')}, val "
        f"{_score(p.get('baseline_val'))} -> {_score(p.get('best_val'))}"
    ]


def routing_finished(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    before, after = p.get("before") or {}, p.get("after") or {}
    return [
        f"  val {_library(before)} -> {_library(after)}",
        f"  {p.get('steps', '?')} steps: {p.get('accepted', '?')} accepted, "
        f"{p.get('rejected', '?')} rejected",
    ] + _fields(p, ("head",))


def evaluation(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    rev = p.get("rev") or "the working tree"
    items = p.get("items") or []
    wrong = [i.get("id") for i in items if i.get("hard") == 0]
    return [
        f"  {rev} ({str(p.get('sha', '?'))[:10]}) on {p.get('split', '?')}: "
        f"{_score(p.get('mean'))} {p.get('metric', '')} over {p.get('n', '?')} items"
        + (f", {p['errors']} errors" if p.get("errors") else ""),
        f"  model {p.get('model', '?')}, scorer {p.get('scorer', '?')}",
        f"  wrong: {_ids(wrong)}",
    ]


def speculation_wasted(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  {p.get('jobs', len(p.get('items') or []))} rollouts started while a gate ran, unused "
        "because it accepted its candidate",
        f"  items: {_ids(p.get('items') or [])}",
    ]


# -- harvest and sleep -------------------------------------------------------------------------


def harvest_started(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [f"  reading {p.get('source', '?')} transcripts from {_ids(p.get('dirs') or [])}"] + (
        _fields(p, ("min_support", "similarity"))
    )


def harvest_session(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    exchanges = p.get("exchanges") or []
    return [
        f"  {p.get('source', '?')} session {p.get('session', '?')}: "
        f"{len(exchanges)} task exchanges (secrets redacted)"
    ] + _fields(p, ("file", "skipped_lines"))


def harvest_kind(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  kind {p.get('kind', '?')}: {_s(p.get('name', ''), 50)}",
        f"  seen {p.get('support', '?')} times; items {_ids(p.get('items') or [])}",
    ]


def harvest_rubric(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    rubric = str(p.get("rubric") or "").splitlines()
    return [f"  rubric for kind {p.get('kind', '?')}, by {p.get('by', '?')}:"] + [
        f"    {_s(line, WIDTH - 4)}" for line in rubric
    ]


def harvest_reviewed(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    items = p.get("items") or []
    return [f"  {len(items)} items approved by {p.get('by', '?')}: {_ids(items)}"]


def harvest_finished(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  {p.get('sessions_read', '?')} sessions read ({p.get('sessions_new', '?')} new), "
        f"{p.get('exchanges', '?')} exchanges, {p.get('redactions', 0)} redactions",
        f"  kinds: {_ids(p.get('kinds') or [])}; one-offs: {p.get('one_offs', 0)}",
    ] + _fields(p, ("tasks", "file"))


def sleep_finished(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  nightly run of {p.get('date', '?')}: {p.get('status', '?')}",
        f"  branch {p.get('branch') or '-'} from {p.get('base_branch') or '-'} "
        f"({str(p.get('base_commit') or '-')[:10]}), run {p.get('run') or '-'}",
    ] + _fields(p, ("report", "message"))


# -- provider batches --------------------------------------------------------------------------


def batch_submitting(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  state: submitting; a {p.get('provider', '?')} batch of {p.get('n', '?')} requests "
        "is about to be created"
    ]


def batch_submitted(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  state: submitted; {p.get('provider', '?')} batch {p.get('batch_id', '?')} holds "
        f"{p.get('n', '?')} requests",
        "  (a resume polls it instead of sending the requests again)",
    ]


def batch_ended(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  state: ended; {p.get('provider', '?')} batch {p.get('batch_id', '?')}: results of "
        f"{p.get('n', '?')} requests read"
    ]


# -- judge calibration -------------------------------------------------------------------------


def _interval(value: Any) -> str:
    ok = isinstance(value, list | tuple) and len(value) == 2
    return f" [{_score(value[0])}, {_score(value[1])}]" if ok else ""


def judge_calibrated(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    verdict = "trusted to gate" if p.get("trusted") else "below its thresholds (not trusted)"
    lines = [
        f"  judge {p.get('model', '?')} vs a person on {p.get('n', '?')} labels "
        f"({p.get('labels', '?')}): {verdict}",
        f"  accuracy {_score(p.get('accuracy'))}{_interval(p.get('accuracy_interval'))}, "
        f"kappa {_score(p.get('kappa'))}",
        f"  false accept {_score(p.get('false_accept'))}"
        f"{_interval(p.get('false_accept_interval'))}, false reject "
        f"{_score(p.get('false_reject'))}{_interval(p.get('false_reject_interval'))}",
    ]
    return lines + _fields(p, ("thresholds",))


def tasks_drafted(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    items = p.get("items") or []
    dropped = p.get("dropped") or {}
    drops = ", ".join(f"{n} {why}" for why, n in sorted(dropped.items()) if n) or "none"
    return [
        f"  {len(items)} items drafted by {p.get('model', '?')} for {p.get('skill', '?')}, "
        "pending review",
        f"  dropped: {drops}",
    ] + _fields(p, ("prompt", "files"))


def tasks_reviewed(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    return [
        f"  item {p.get('item', '?')} ({p.get('origin', '?')}) {p.get('decision', '?')} "
        f"by {p.get('by', '?')}"
    ] + _fields(p, ("file",))


def label_recorded(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    verdict = "pass" if p.get("label") else "fail"
    note = f": {_s(p.get('note') or '', 60)}" if p.get("note") else ""
    return [f"  item {p.get('item', '?')} output {str(p.get('output', '?'))[:12]} {verdict}{note}"]


def skill_worth(p: Payload, ctx: Mapping[str, Any]) -> list[str]:
    diff = p.get("diff")
    shown = "-" if diff is None else f"{diff:+.3f}"
    return [
        f"  {p.get('skill_label', 'the skill')} vs {p.get('baseline_label', '?')} on "
        f"{p.get('split', '?')}: {shown} over {p.get('n', '?')} items; "
        f"{p.get('stated', 'not tested')}"
    ]


RENDERERS: dict[str, Renderer] = {
    "run.started": run_started,
    "run.resumed": run_resumed,
    "package.rendered": package_rendered,
    "baseline": baseline,
    "run.finished": run_finished,
    "run.stopped": run_stopped,
    "step.started": step_started,
    "rollout": rollout,
    "model.call": model_call,
    "model.error": model_error,
    "edit.proposed": edit_proposed,
    "edits.merged": edits_merged,
    "edits.selected": edits_selected,
    "reflection.retried": reflection_retried,
    "edits.released": edits_released,
    "edits.held": edits_held,
    "edit.unmatched": edit_unmatched,
    "reflection.failed": reflection_failed,
    "edit.refused": edit_refused,
    "step.empty": step_empty,
    "gate": gate,
    "commit.intent": commit_intent,
    "commit.done": commit_done,
    "slow_update": slow_update,
    "meta_update": meta_update,
    "checkpoint": checkpoint,
    "evaluation": evaluation,
    "routing.started": routing_started,
    "routing.evaluated": routing_evaluated,
    "routing.body": routing_body,
    "routing.finished": routing_finished,
    "run.projected": run_projected,
    "harvest.started": harvest_started,
    "harvest.session": harvest_session,
    "harvest.kind": harvest_kind,
    "harvest.rubric": harvest_rubric,
    "harvest.reviewed": harvest_reviewed,
    "harvest.finished": harvest_finished,
    "sleep.finished": sleep_finished,
    "run.abandoned": run_abandoned,
    "speculation.wasted": speculation_wasted,
    "batch.submitting": batch_submitting,
    "batch.submitted": batch_submitted,
    "batch.ended": batch_ended,
    "judge.calibrated": judge_calibrated,
    "tasks.drafted": tasks_drafted,
    "tasks.reviewed": tasks_reviewed,
    "label.recorded": label_recorded,
    "skill.worth": skill_worth,
}


def event_text(event: Mapping[str, Any], context: Mapping[str, Any] | None = None) -> str:
    """An event (``Event.to_dict()``) as text: a header line and its renderer's lines. A type
    no renderer knows (a newer skillvc's log) lists its payload's keys and values."""
    where = f"  run {event['run_id']}" if event.get("run_id") else ""
    step = f"  step {event['step']}" if event.get("step") is not None else ""
    head = f"event {event['id']}  {event['type']}{where}{step}  {event.get('created_at', '')}"
    if event.get("key") and event["type"].startswith("batch."):
        head += f"\n  wave {event['key']}"
    payload = event.get("payload") or {}
    render = RENDERERS.get(event["type"])
    lines = render(payload, context or {}) if render else _fields(payload, sorted(payload))
    return "\n".join([head, *lines])
