"""The backward pass: reflect on scored rollouts, aggregate the proposals, select under the lr.

- ``reflect``: one optimizer call per minibatch of failures and per minibatch of successes,
  each seeing the current skill, the rejected buffer and the meta skill. Malformed JSON (or an
  answer cut off at its token cap) gets one repair call; if that fails too the minibatch yields
  no edits and the reason is recorded. A usable answer's valid edits are kept and each
  malformed one is refused with its reason (``skillvc.training.structured``). On a local
  server the prompt is fitted to its context and the answer held to a JSON Schema.
- ``aggregate``: identical edits merge (their support adds up); edits that change the same
  target text conflict, and the one with more support wins (earlier on ties).
- ``select``: rank by support, then by first appearance, and keep ``lr`` edits.
All three are deterministic for the same inputs, which resume-by-replay relies on.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from skillvc.models import prompts
from skillvc.models.agents.description import (
    DescriptionRefused,
    targets_description,
    with_description,
)
from skillvc.models.agents.trajectory import Trajectory, render
from skillvc.models.calls import CallFailed, ModelClient
from skillvc.packages import SKILL_FILE, SkillPackage, apply_package_edits, broken_links
from skillvc.packages.edits import PackageApplyResult
from skillvc.packages.links import reachable_files
from skillvc.packages.packagefile import PackageFile
from skillvc.packages.prompt import optimizer_files
from skillvc.skill.edits import ApplyResult, Edit, Unmatched, apply_edits
from skillvc.skill.formats import new_problems, new_reference_problems
from skillvc.skill.skilldoc import SkillDocument
from skillvc.tasks.taskset import TaskItem
from skillvc.training.evaluate import Rollout
from skillvc.training.evidence import shape_evidence
from skillvc.training.repeats import edit_key
from skillvc.training.structured import (
    edits_schema,
    response_format,
    salvage,
    skill_lines,
    text_schema,
)


@dataclass(frozen=True)
class Proposal:
    edit: Edit
    minibatch: int
    kind: str  # failures | successes
    sample: int = 0  # which of the minibatch's answers ([train] proposals) proposed it


@dataclass
class Reflection:
    proposals: list[Proposal] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)  # unusable answers, with why
    calls: int = 0
    minibatches: int = 0
    call_failures: int = 0  # minibatches whose optimizer call failed (infrastructure, not JSON)
    # Edits of otherwise usable answers that broke the rules, each with its reason.
    refused: list[dict[str, Any]] = field(default_factory=list)
    usable: int = 0  # minibatches whose answer was a usable list of edits (maybe empty)


# Appended to the frontmatter rule only with [train] train_description (else the prompt is
# byte for byte what it was without the option); a template, so its hash is in every run.
DESCRIPTION_RULE = prompts.rule("description_rule")
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
        # An agent's rollout: whether it loaded the skill at all, like SkillOpt's analysts.
        case["skill_loaded"] = rollout.activated
    reference = item.fields.get("reference", item.metadata.get("reference"))
    if isinstance(reference, str) and reference.strip():  # for the optimizer's eyes only
        case["reference"] = _clip(reference)
    if rollout.trajectory is not None and load is not None:
        # An agent's or a tool-using chat target's rollout: what it did (tool calls, results,
        # errors, observations; head and tail kept under a budget).
        trajectory = Trajectory.from_json(load(rollout.trajectory))
        case["trajectory"] = render(trajectory, activated=rollout.activated)
    return case


def _acting_note(cases: Sequence[Mapping[str, Any]]) -> str:
    """What the reflection prompt says of trajectories and references, only when cases hold
    them (so the prompt of a target that only answers is as it was)."""
    parts = []
    if any("trajectory" in c for c in cases):
        parts.append(
            'a case\'s "trajectory" is what the target did, a line per step ("-> tool: '
            'arguments" a call, "<- tool: result" its result, "!!" an error); rules about '
            "when and how to use the tools belong in the skill"
        )
    if any("reference" in c for c in cases):
        parts.append(
            'a case\'s "reference" is a worked solution the target never sees: write what it '
            "shows as a general rule, never the reference itself"
        )
    return "; " + "; ".join(parts) if parts else ""


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


def _parse_edits(payload: Any) -> tuple[list[Edit], list[dict[str, Any]]]:
    """The valid edits of an answer and the refused ones with their reasons
    (``skillvc.training.structured.salvage``); ParseError when it holds no list of edits."""
    if not isinstance(payload, Mapping):
        raise prompts.ParseError('"edits" is not a list')
    try:
        return salvage(payload)
    except ValueError as exc:
        raise prompts.ParseError(str(exc)) from None


def optimizer_params(client: ModelClient, schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """What an optimizer call adds to its role's parameters on a local server: an answer cap
    (when ``max_tokens`` is not set, so a looping answer ends) and the answer's JSON Schema
    as ``response_format`` (when the server enforces one). Nothing for other models."""
    server = client.servers.get("optimizer")
    if server is None:
        return {}
    params: dict[str, Any] = {}
    configured = client.configs["optimizer"].max_tokens
    if configured is None:
        cap = server.answer_tokens(None)
        if cap is not None:
            params["max_tokens"] = cap
    if schema is not None and server.json_schema:
        params["response_format"] = response_format("answer", schema)
    return params


def prompt_limit(client: ModelClient) -> int | None:
    """The optimizer prompt's token limit on a local server of known context (else None)."""
    server = client.servers.get("optimizer")
    if server is None:
        return None
    return server.prompt_limit(server.answer_tokens(client.configs["optimizer"].max_tokens))


def ask_json(
    client: ModelClient,
    messages: list[dict[str, str]],
    key: str,
    step: int | None,
    *,
    edits_format: str = prompts.EDITS_FORMAT,
    schema: Mapping[str, Any] | None = None,
    sample: int = 0,
) -> tuple[Any, int, str | None]:
    """Call the optimizer for a JSON object with ``key``; one repair call on a bad answer
    (which is shown ``edits_format`` when ``key`` is "edits"). An answer cut off by its token
    cap (finish_reason "length": a small model looping inside a string) is a bad answer too.

    ``schema``: the answer's JSON Schema, sent to a local server that enforces one (default:
    ``{"<key>": "<text>"}``). Returns (object or None, calls made, error sentence or None).
    """
    if schema is None and key != "edits":
        schema = text_schema(key)
    params = optimizer_params(client, schema)
    reply = client.call("optimizer", messages, step=step, params=params, sample=sample)
    try:
        return prompts.parse_json_object(reply.text, key), 1, None
    except prompts.ParseError as exc:
        error = str(exc)
    if reply.meta.get("finish_reason") == "length":
        error = f"the answer was cut off at its token limit ({error}); answer shorter"
    fmt = edits_format if key == "edits" else f'{{"{key}": "..."}}'
    repair = _repair_prompt(client, error, reply.text, fmt)
    if repair is None:
        return None, 1, f"unusable optimizer answer, and no repair fits the context: {error}"
    fixed = client.call("optimizer", repair, step=step, params=params, sample=sample)
    try:
        return prompts.parse_json_object(fixed.text, key), 2, None
    except prompts.ParseError as exc:
        cut = " (cut off at its token limit)" if fixed.meta.get("finish_reason") == "length" else ""
        return None, 2, f"unusable optimizer answer after one repair: {exc}{cut}"


def _repair_prompt(
    client: ModelClient, error: str, previous: str, fmt: str
) -> list[dict[str, str]] | None:
    limit = prompt_limit(client)
    if limit is None:
        return prompts.render("repair", error=error, previous=previous[:8000], format=fmt)
    try:  # a looping answer can be most of the context: it is cut to fit
        return prompts.render("repair", fit=limit, error=error, previous=previous, format=fmt)
    except prompts.PromptTooLong:
        return None


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
    package: SkillPackage | None = None,
    package_chars: int = 0,
    carried: Sequence[PackageFile] = (),
    samples: int = 1,
) -> Reflection:
    """One optimizer call per minibatch (``done`` is called as each one finishes).

    ``skill`` is the skill file's text; with a skill ``package`` (whose SKILL.md it is) the
    prompt also lists the package's other files within ``package_chars`` characters
    (``skillvc.packages.prompt``) and asks every edit to name its file.

    ``samples`` > 1 (``[train] proposals``): each minibatch's prompt is answered that many
    times (sample index 0..n-1, each its own cached call), so one stubborn answer does not
    decide the step. A minibatch's answers are deduplicated by normalised edit text
    (``repeats.edit_key``) and interleaved (every answer's first edit, then every second
    one...), so its support still counts minibatches, not answers."""
    batches = minibatches(items, rollouts, metric, minibatch_size, client.store.get_blob)
    package_values: dict[str, str] = {}
    # An optimizer on a local server (a small model, often) is shown one shape per op and held
    # to it by a schema; its prompts are fitted to the server's context.
    local = "optimizer" in client.servers
    answer_format, edits_format = prompts.answer_formats(package is not None, local)
    if package is not None:
        entries = optimizer_files(package, package_chars, carried)
        listing = json.dumps(entries, indent=1, ensure_ascii=False)
        package_values = {
            "package_rule": prompts.rule("package_rule"),
            "package_files": f"\n<package_files>\n{listing}\n</package_files>\n",
        }
    if local or package is not None:
        package_values["answer_format"] = answer_format
    schema = edits_schema(
        budget, package=package is not None, lines=skill_lines(skill) if local else None
    )
    limit = prompt_limit(client)
    notes = {
        "failures": "these answers scored below full marks",
        "successes": "these answers scored full marks; keep what made them work",
    }

    def reflect_prompt(batch: tuple[str, list[dict[str, Any]]]) -> list[dict[str, str]]:
        kind, cases = batch
        return prompts.render(
            "reflect",
            fit=limit,
            n_cases=str(len(cases)),
            kind=kind,
            kind_note=notes[kind] + _acting_note(cases),
            budget=str(budget),
            skill=skill,
            cases=cases,
            rejected=list(rejected),
            meta=meta or "(none yet)",
            description_rule=DESCRIPTION_RULE if describe else "",
            evidence=shape_evidence(cases) if kind == "failures" else "",
            **package_values,
        )

    def one(batch: tuple[str, list[dict[str, Any]]]) -> Answer:
        try:
            answers = [ask(batch, k) for k in range(samples)]
            return answers[0] if samples == 1 else _combined(answers)
        finally:
            done()

    def ask(batch: tuple[str, list[dict[str, Any]]], sample: int = 0) -> Answer:
        try:
            messages = reflect_prompt(batch)
        except prompts.PromptTooLong as exc:
            return Answer(error=f"no reflection prompt fits the optimizer's context: {exc}")
        try:
            payload, calls, error = ask_json(
                client,
                messages,
                "edits",
                step,
                edits_format=edits_format,
                schema=schema,
                sample=sample,
            )
        except CallFailed as exc:
            return Answer(calls=1, error=exc.message, call_failed=True)
        if payload is None:
            return Answer(calls=calls, error=error)
        try:
            edits, refused = _parse_edits(payload)
        except prompts.ParseError as exc:
            return Answer(calls=calls, error=f"unusable edits: {exc}")
        if refused and not edits:
            reasons = "; ".join(sorted({r["reason"] for r in refused}))
            return Answer([], refused, calls, f"unusable edits: {reasons}")
        return Answer(edits, refused, calls)

    # With [optimizer] mode = "batch" the first attempts go out as one batch; the calls below
    # then find them in the log (repairs stay synchronous).
    client.prefetch("optimizer", _fitting(reflect_prompt, batches), step=step)
    result = Reflection(minibatches=len(batches))
    for index, ((kind, _), answer) in enumerate(zip(batches, pool.map(one, batches), strict=True)):
        result.calls += answer.calls
        result.call_failures += answer.call_failed
        result.proposals.extend(
            Proposal(e, index, kind, answer.samples[i] if answer.samples else 0)
            for i, e in enumerate(answer.edits)
        )
        result.refused.extend({"minibatch": index, "kind": kind, **r} for r in answer.refused)
        if answer.error:
            result.failures.append({"minibatch": index, "kind": kind, "error": answer.error})
        elif not answer.call_failed:
            result.usable += 1
    return result


@dataclass
class Answer:
    """One minibatch's outcome: its valid edits, the refused ones, calls and why it failed."""

    edits: list[Edit] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0
    error: str | None = None
    call_failed: bool = False
    samples: list[int] = field(default_factory=list)  # each edit's answer (several answers)


def _combined(answers: Sequence[Answer]) -> Answer:
    """A minibatch's several answers as one: their edits deduplicated by normalised text and
    interleaved (each answer's first edit, then each one's second...), their refusals and
    calls summed; unusable only when every answer is (the first one's reason). A failed call
    (infrastructure) fails the whole minibatch: going on with the other answers alone would
    make a transient error a decision, and a stopped run retries them all on resume."""
    out = Answer(calls=sum(a.calls for a in answers))
    failed = next((a for a in answers if a.call_failed), None)
    if failed is not None:
        out.error, out.call_failed = failed.error, True
        return out
    seen: set[str] = set()
    depth = max((len(a.edits) for a in answers), default=0)
    for i in range(depth):
        for k, answer in enumerate(answers):
            if i < len(answer.edits) and edit_key(answer.edits[i]) not in seen:
                seen.add(edit_key(answer.edits[i]))
                out.edits.append(answer.edits[i])
                out.samples.append(k)
    for answer in answers:
        out.refused.extend(answer.refused)
    if all(a.error is not None for a in answers):
        out.error = answers[0].error
    return out


def _fitting(
    render: Callable[[Any], list[dict[str, str]]], batches: Sequence[Any]
) -> list[list[dict[str, str]]]:
    """The prompts of ``batches`` that fit the context (the others fail without a call)."""
    out = []
    for batch in batches:
        try:
            out.append(render(batch))
        except prompts.PromptTooLong:
            continue
    return out


@dataclass(frozen=True)
class Merged:
    edit: Edit
    support: int
    order: int
    merged_from: tuple[str, ...]  # ids of conflicting edits folded into this one


def aggregate(
    proposals: Sequence[Proposal], key: Callable[[Edit], str] | None = None
) -> list[Merged]:
    """Merge the step's proposals. ``key``: what makes two proposals one edit (default its
    id, the exact text; ``repeats.edit_key`` also merges rewordings in case, whitespace or
    punctuation, the first one's text kept)."""
    by_id: dict[str, list[Any]] = {}
    for order, p in enumerate(proposals):
        entry = by_id.setdefault(key(p.edit) if key else p.edit.id, [p.edit, 0, order, []])
        entry[1] += 1
        if entry[0].id != p.edit.id and p.edit.id not in entry[3]:
            entry[3].append(p.edit.id)  # a rewording folded into the first one
    # Conflicts: several different edits that change the same target text of the same file.
    by_target: dict[tuple[str, str], list[str]] = {}
    for edit_id, (edit, _, _, _) in by_id.items():
        if edit.op in ("replace", "delete"):
            by_target.setdefault((edit.file, edit.target.strip()), []).append(edit_id)
    for ids in by_target.values():
        if len(ids) < 2:
            continue
        ids.sort(key=lambda i: (-by_id[i][1], by_id[i][2]))
        winner = by_id[ids[0]]
        for loser in ids[1:]:
            winner[3].append(by_id[loser][0].id)
            del by_id[loser]
    return [Merged(e, support, order, tuple(m)) for e, support, order, m in by_id.values()]


def select(merged: Sequence[Merged], lr: int) -> tuple[list[Merged], list[Merged]]:
    ranked = sorted(merged, key=lambda m: (-m.support, m.order))
    return ranked[:lr], ranked[lr:]


def secret_refusal(edit: Edit, skill_text: str) -> Unmatched | None:
    """An edit whose content or rationale holds a credential (a finding of the redaction
    pipeline, or the ``[redacted]`` left where a model answer's secret was removed before it was
    stored) is refused, so the optimizer can never write a secret into a skill, a commit or a
    report. The refused edit keeps its id; what it carries is scrubbed where it is recorded."""
    from skillvc.secrets import REDACTED, findings

    kinds = sorted({f.kind for text in (edit.content, edit.rationale) for f in findings(text)})
    if not kinds and REDACTED in edit.content + edit.rationale and REDACTED not in skill_text:
        kinds = ["withheld value"]
    if not kinds:
        return None
    return Unmatched(
        edit,
        "secret",
        f"The edit holds what looks like a credential ({', '.join(kinds)}); refused so that no "
        "secret reaches the skill, a commit or a report.",
    )


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
    Agent Skills limits (``skillvc.models.agents.description``); nothing else of the frontmatter."""
    current = doc
    applied: list[Edit] = []
    unmatched: list[Unmatched] = []
    for edit in edits:
        outcome = _skill_edit(doc, current, edit, path, max_bytes=max_bytes, describe=describe)
        if isinstance(outcome, SkillDocument):
            current = outcome
            applied.append(edit)
        elif outcome is not None:
            unmatched.append(outcome)
    return ApplyResult(document=current, applied=tuple(applied), unmatched=tuple(unmatched))


def _skill_edit(
    seed: SkillDocument,
    current: SkillDocument,
    edit: Edit,
    path: str,
    *,
    max_bytes: int,
    describe: bool,
) -> SkillDocument | Unmatched | None:
    """One selected edit to the skill file: the new document, why it was refused, or None
    when it changed nothing (``apply_edits`` reports that as unmatched itself)."""
    secret = secret_refusal(edit, seed.text)
    if secret is not None:
        return secret
    if describe and targets_description(current, edit):
        try:
            return with_description(current, edit.content)
        except DescriptionRefused as exc:
            return Unmatched(edit, "format", str(exc))
    result = apply_edits(current, [edit])
    if result.unmatched:
        return result.unmatched[0]
    if not result.changed:
        return None
    if _visible_lines(result.document) == _visible_lines(current):
        # Only blank lines or trailing spaces changed: nothing a reader sees, yet the gate
        # would pay a val pass for it, and noise could even "accept" it as a commit.
        return Unmatched(edit, "no-op", "The edit changes only whitespace.")
    problems = new_problems(path, seed, result.document, max_bytes=max_bytes)
    if problems:
        return Unmatched(edit, "format", " ".join(p.message for p in problems))
    return result.document


def apply_selected_package(
    package: SkillPackage,
    edits: Sequence[Edit],
    *,
    max_bytes: int,
    describe: bool = False,
) -> PackageApplyResult:
    """``apply_selected`` for a skill package: each edit applies to the file it names.

    SKILL.md's edits follow ``apply_selected``'s rules. A reference file's edit follows
    ``skillvc.packages.edits`` (an add to a new path creates the file; nothing is deleted),
    must change something a reader sees and may not break the file's rules (protected
    markers, ``max_bytes``, which every file of the package gets on its own). Then the whole
    candidate must keep the package's link rules: an edit whose file ends up with a broken
    relative link, or that creates a file no link from SKILL.md leads to (directly or through
    other linked files: an agent would never be pointed to it), is refused as unmatched
    ("format") and the rest is applied again without it, until the candidate holds.
    """
    refused: dict[int, Unmatched] = {}
    while True:
        result = _apply_package_once(
            package, edits, refused, max_bytes=max_bytes, describe=describe
        )
        blame = _link_problem(package, result)
        if blame is None:
            return result
        refused[blame[0]] = blame[1]


def _apply_package_once(
    package: SkillPackage,
    edits: Sequence[Edit],
    refused: dict[int, Unmatched],
    *,
    max_bytes: int,
    describe: bool,
) -> PackageApplyResult:
    current = package
    applied: list[Edit] = []
    unmatched: list[Unmatched] = []
    order: list[int] = []  # index in ``edits`` of each applied edit
    for index, edit in enumerate(edits):
        if index in refused:
            unmatched.append(refused[index])
            continue
        name = package_name(package, edit.file)
        outcome: SkillPackage | Unmatched | None
        if name == SKILL_FILE:
            seed, now = package.document(SKILL_FILE), current.document(SKILL_FILE)
            path = package.repo_path(SKILL_FILE)
            doc = _skill_edit(seed, now, edit, path, max_bytes=max_bytes, describe=describe)
            outcome = (
                current.with_file(SKILL_FILE, doc.render())
                if isinstance(doc, SkillDocument)
                else doc
            )
        else:
            outcome = _reference_edit(package, current, edit, name, max_bytes=max_bytes)
        if isinstance(outcome, SkillPackage):
            current = outcome
            applied.append(edit)
            order.append(index)
        elif outcome is not None:
            unmatched.append(outcome)
    changed = tuple(sorted(n for n in current.files if package.files.get(n) != current.files[n]))
    created = tuple(sorted(n for n in current.files if n not in package.files))
    return PackageApplyResult(
        current, tuple(applied), tuple(unmatched), changed, created, tuple(order)
    )


def package_name(package: SkillPackage, file: str) -> str:
    """An edit's ``file`` as a package path: a path given from the repository root (the
    package's own directory in front) is taken as the package file it names."""
    prefix = f"{package.root}/" if package.root else ""
    if prefix and file.startswith(prefix) and file[len(prefix) :] in package.files:
        return file[len(prefix) :]
    return file


def _reference_edit(
    seed: SkillPackage, current: SkillPackage, edit: Edit, name: str, *, max_bytes: int
) -> SkillPackage | Unmatched | None:
    """One selected edit to a file other than SKILL.md (see ``apply_selected_package``)."""
    secret = secret_refusal(edit, seed.document(SKILL_FILE).text)
    if secret is not None:
        return secret
    one = apply_package_edits(current, [dataclasses.replace(edit, file=name)])
    if one.unmatched:
        return dataclasses.replace(one.unmatched[0], edit=edit)
    if not one.changed:
        return None
    path = current.repo_path(name)
    after = one.package.document(name)
    if name in current.files:
        before = current.document(name)
        if _visible_lines(after) == _visible_lines(before):
            return Unmatched(edit, "no-op", "The edit changes only whitespace.")
    problems = new_reference_problems(
        path, seed.files.get(name, b""), after.render(), max_bytes=max_bytes
    )
    if problems:
        return Unmatched(edit, "format", " ".join(p.message for p in problems))
    return one.package


def _link_problem(seed: SkillPackage, result: PackageApplyResult) -> tuple[int, Unmatched] | None:
    """The last applied edit to blame for a link rule the candidate breaks, or None."""
    candidate = result.package
    before = {(p.path, p.message) for p in broken_links(seed)}
    broken = {p.path for p in broken_links(candidate) if (p.path, p.message) not in before}
    reachable = reachable_files(candidate)
    orphans = [n for n in result.created if n not in reachable]
    for edit, index in reversed(list(zip(result.applied, result.order, strict=True))):
        name = package_name(seed, edit.file)
        if candidate.repo_path(name) in broken:
            detail = (
                f"{name}: the edit leaves a relative link that names no file of the package "
                "(a new file needs its own add edit)."
            )
            return index, Unmatched(edit, "format", detail)
        if name in orphans:
            detail = (
                f"{name}: no link from SKILL.md leads to this new file, so no agent would read "
                f"it; add a Markdown link to {name} in SKILL.md in the same answer."
            )
            return index, Unmatched(edit, "format", detail)
    return None


def _visible_lines(doc: SkillDocument) -> list[str]:
    # Leading indentation stays: it nests lists and makes code blocks in Markdown.
    return [line.rstrip() for line in doc.render().decode("utf-8").splitlines() if line.strip()]
