"""The backward pass: reflect on scored rollouts, aggregate the proposals, select under the lr.

- ``reflect``: one optimizer call per minibatch of failures and per minibatch of successes,
  each seeing the current skill, the rejected buffer and the meta skill. Malformed JSON gets
  one repair call; if that fails too the minibatch yields no edits and the reason is recorded.
- ``aggregate``: identical edits merge (their support adds up); edits that change the same
  target text conflict, and the one with more support wins (earlier on ties).
- ``select``: rank by support, then by first appearance, and keep ``lr`` edits.
All three are deterministic for the same inputs, which resume-by-replay relies on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from skillvc import prompts
from skillvc.agents.description import DescriptionRefused, targets_description, with_description
from skillvc.agents.trajectory import Trajectory, render
from skillvc.calls import CallFailed, ModelClient
from skillvc.edits import ApplyResult, Edit, Unmatched, apply_edits
from skillvc.formats import new_problems
from skillvc.skilldoc import SkillDocument
from skillvc.tasks import TaskItem
from skillvc.training.evaluate import Rollout


@dataclass(frozen=True)
class Proposal:
    edit: Edit
    minibatch: int
    kind: str  # failures | successes


@dataclass
class Reflection:
    proposals: list[Proposal] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)  # unusable answers, with why
    calls: int = 0
    minibatches: int = 0
    call_failures: int = 0  # minibatches whose optimizer call failed (infrastructure, not JSON)


# Appended to the frontmatter rule only with [train] train_description (else the prompt is
# byte for byte what it was without the option).
DESCRIPTION_RULE = (
    "\n  Exception: you may replace the frontmatter description, which decides whether an agent"
    " loads the skill at all (cases with skill_loaded false never read it): a replace edit whose"
    ' "target" is the current description and whose "content" is the new one, at most 1024'
    " characters, one line, no XML tags."
)
MAX_CASE_CHARS = 4000  # per input and per output: keeps a minibatch prompt bounded


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_CASE_CHARS:
        return text
    half = MAX_CASE_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - MAX_CASE_CHARS} characters cut ...]\n{text[-half:]}"


def _case(
    item: TaskItem, rollout: Rollout, metric: str, load: Callable[[str], str] | None = None
) -> dict[str, Any]:
    case = {
        "id": item.id,
        "input": _clip(item.input),
        "output": _clip(rollout.output),
        "expected": list(item.targets) if len(item.targets) != 1 else item.targets[0],
        "score": rollout.value(metric),
    }
    if rollout.activated is not None:
        # An agent's rollout: what it did (tool calls, results, errors; head and tail kept
        # under a budget) and whether it loaded the skill at all, like SkillOpt's analysts.
        case["skill_loaded"] = rollout.activated
        if rollout.trajectory is not None and load is not None:
            trajectory = Trajectory.from_json(load(rollout.trajectory))
            case["trajectory"] = render(trajectory, activated=rollout.activated)
    return case


def minibatches(
    items: Sequence[TaskItem],
    rollouts: Sequence[Rollout],
    metric: str,
    size: int,
    load: Callable[[str], str] | None = None,
) -> list[tuple[str, list[dict[str, Any]]]]:
    """Failure and success minibatches; ``load`` reads a blob (an agent's trajectory)."""
    failures: list[dict[str, Any]] = []
    successes: list[dict[str, Any]] = []
    for item, r in zip(items, rollouts, strict=True):
        if not r.ok:
            continue
        (successes if r.value(metric) >= 1 else failures).append(_case(item, r, metric, load))
    batches = [("failures", failures[i : i + size]) for i in range(0, len(failures), size)]
    batches += [("successes", successes[i : i + size]) for i in range(0, len(successes), size)]
    return batches


def _parse_edits(payload: Any) -> list[Edit]:
    edits = payload.get("edits") if isinstance(payload, dict) else None
    if not isinstance(edits, list):
        raise prompts.ParseError('"edits" is not a list')
    out = []
    for raw in edits:
        if not isinstance(raw, dict):
            raise prompts.ParseError("an edit is not a JSON object")
        try:
            out.append(Edit.from_dict(raw))
        except ValueError as exc:
            raise prompts.ParseError(str(exc)) from None
    return out


def ask_json(
    client: ModelClient, messages: list[dict[str, str]], key: str, step: int | None
) -> tuple[Any, int, str | None]:
    """Call the optimizer for a JSON object with ``key``; one repair call on a bad answer.

    Returns (object or None, calls made, error sentence or None).
    """
    reply = client.call("optimizer", messages, step=step)
    try:
        return prompts.parse_json_object(reply.text, key), 1, None
    except prompts.ParseError as exc:
        error = str(exc)
    fmt = prompts.EDITS_FORMAT if key == "edits" else f'{{"{key}": "..."}}'
    repair = prompts.render("repair", error=error, previous=reply.text[:8000], format=fmt)
    fixed = client.call("optimizer", repair, step=step)
    try:
        return prompts.parse_json_object(fixed.text, key), 2, None
    except prompts.ParseError as exc:
        return None, 2, f"unusable optimizer answer after one repair: {exc}"


def reflect(
    client: ModelClient,
    pool: ThreadPoolExecutor,
    *,
    skill: str,
    items: Sequence[TaskItem],
    rollouts: Sequence[Rollout],
    metric: str,
    minibatch_size: int,
    budget: int,
    rejected: Sequence[dict[str, Any]],
    meta: str,
    step: int,
    describe: bool = False,
    done: Callable[[], None] = lambda: None,
) -> Reflection:
    """One optimizer call per minibatch (``done`` is called as each one finishes)."""
    batches = minibatches(items, rollouts, metric, minibatch_size, client.store.get_blob)
    notes = {
        "failures": "these answers scored below full marks",
        "successes": "these answers scored full marks; keep what made them work",
    }

    def reflect_prompt(batch: tuple[str, list[dict[str, Any]]]) -> list[dict[str, str]]:
        kind, cases = batch
        return prompts.render(
            "reflect",
            n_cases=str(len(cases)),
            kind=kind,
            kind_note=notes[kind],
            budget=str(budget),
            skill=skill,
            cases=cases,
            rejected=list(rejected),
            meta=meta or "(none yet)",
            description_rule=DESCRIPTION_RULE if describe else "",
        )

    def one(
        batch: tuple[str, list[dict[str, Any]]],
    ) -> tuple[list[Edit], int, str | None, bool]:
        try:
            return ask(batch)
        finally:
            done()

    def ask(
        batch: tuple[str, list[dict[str, Any]]],
    ) -> tuple[list[Edit], int, str | None, bool]:
        messages = reflect_prompt(batch)
        try:
            payload, calls, error = ask_json(client, messages, "edits", step)
        except CallFailed as exc:
            return [], 1, exc.message, True
        if payload is None:
            return [], calls, error, False
        try:
            return _parse_edits(payload), calls, None, False
        except prompts.ParseError as exc:
            return [], calls, f"unusable edits: {exc}", False

    # With [optimizer] mode = "batch" the first attempts go out as one batch; the calls below
    # then find them in the log (repairs stay synchronous).
    client.prefetch("optimizer", [reflect_prompt(b) for b in batches], step=step)
    result = Reflection(minibatches=len(batches))
    for index, ((kind, _), (edits, calls, error, call_failed)) in enumerate(
        zip(batches, pool.map(one, batches), strict=True)
    ):
        result.calls += calls
        result.call_failures += call_failed
        result.proposals.extend(Proposal(e, index, kind) for e in edits)
        if error:
            result.failures.append({"minibatch": index, "kind": kind, "error": error})
    return result


@dataclass(frozen=True)
class Merged:
    edit: Edit
    support: int
    order: int
    merged_from: tuple[str, ...]  # ids of conflicting edits folded into this one


def aggregate(proposals: Sequence[Proposal]) -> list[Merged]:
    by_id: dict[str, list[Any]] = {}
    for order, p in enumerate(proposals):
        entry = by_id.setdefault(p.edit.id, [p.edit, 0, order, []])
        entry[1] += 1
    # Conflicts: several different edits that change the same target text.
    by_target: dict[str, list[str]] = {}
    for edit_id, (edit, _, _, _) in by_id.items():
        if edit.op in ("replace", "delete"):
            by_target.setdefault(edit.target.strip(), []).append(edit_id)
    for ids in by_target.values():
        if len(ids) < 2:
            continue
        ids.sort(key=lambda i: (-by_id[i][1], by_id[i][2]))
        winner = by_id[ids[0]]
        for loser in ids[1:]:
            winner[3].append(loser)
            del by_id[loser]
    return [Merged(e, support, order, tuple(m)) for e, support, order, m in by_id.values()]


def select(merged: Sequence[Merged], lr: int) -> tuple[list[Merged], list[Merged]]:
    ranked = sorted(merged, key=lambda m: (-m.support, m.order))
    return ranked[:lr], ranked[lr:]


def apply_selected(
    doc: SkillDocument,
    edits: Sequence[Edit],
    path: str,
    *,
    max_bytes: int,
    describe: bool = False,
) -> ApplyResult:
    """Apply the selected edits one by one; an edit that would break the skill's format rules
    (frontmatter, Agent Skills / Cursor / Copilot rules, size budget) is refused as unmatched
    with reason "format", so a candidate never breaks what the file's agent expects.

    With ``describe`` a replace of the frontmatter description is applied too, within the
    Agent Skills limits (``skillvc.agents.description``); nothing else of the frontmatter."""
    current = doc
    applied: list[Edit] = []
    unmatched: list[Unmatched] = []
    for edit in edits:
        if describe and targets_description(current, edit):
            try:
                described = with_description(current, edit.content)
            except DescriptionRefused as exc:
                unmatched.append(Unmatched(edit, "format", str(exc)))
                continue
            result = ApplyResult(described, (edit,), ())
        else:
            result = apply_edits(current, [edit])
        unmatched.extend(result.unmatched)
        if not result.changed:
            continue
        if _visible_lines(result.document) == _visible_lines(current):
            # Only blank lines or trailing spaces changed: nothing a reader sees, yet the gate
            # would pay a val pass for it, and noise could even "accept" it as a commit.
            unmatched.append(Unmatched(edit, "no-op", "The edit changes only whitespace."))
            continue
        problems = new_problems(path, doc, result.document, max_bytes=max_bytes)
        if problems:
            detail = " ".join(p.message for p in problems)
            unmatched.append(Unmatched(edit, "format", detail))
            continue
        current = result.document
        applied.append(edit)
    return ApplyResult(document=current, applied=tuple(applied), unmatched=tuple(unmatched))


def _visible_lines(doc: SkillDocument) -> list[str]:
    # Leading indentation stays: it nests lists and makes code blocks in Markdown.
    return [line.rstrip() for line in doc.render().decode("utf-8").splitlines() if line.strip()]
