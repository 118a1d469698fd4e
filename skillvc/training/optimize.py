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

import dataclasses
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from skillvc import prompts
from skillvc.agents.description import DescriptionRefused, targets_description, with_description
from skillvc.agents.trajectory import Trajectory, render
from skillvc.backends.base import PackageFile
from skillvc.calls import CallFailed, ModelClient
from skillvc.edits import ApplyResult, Edit, Unmatched, apply_edits
from skillvc.formats import new_problems, new_reference_problems
from skillvc.packages import SKILL_FILE, SkillPackage, apply_package_edits, broken_links
from skillvc.packages.edits import PackageApplyResult
from skillvc.packages.links import reachable_files
from skillvc.packages.prompt import optimizer_files
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
    client: ModelClient,
    messages: list[dict[str, str]],
    key: str,
    step: int | None,
    *,
    edits_format: str = prompts.EDITS_FORMAT,
) -> tuple[Any, int, str | None]:
    """Call the optimizer for a JSON object with ``key``; one repair call on a bad answer
    (which is shown ``edits_format`` when ``key`` is "edits").

    Returns (object or None, calls made, error sentence or None).
    """
    reply = client.call("optimizer", messages, step=step)
    try:
        return prompts.parse_json_object(reply.text, key), 1, None
    except prompts.ParseError as exc:
        error = str(exc)
    fmt = edits_format if key == "edits" else f'{{"{key}": "..."}}'
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
    package: SkillPackage | None = None,
    package_chars: int = 0,
    carried: Sequence[PackageFile] = (),
) -> Reflection:
    """One optimizer call per minibatch (``done`` is called as each one finishes).

    ``skill`` is the skill file's text; with a skill ``package`` (whose SKILL.md it is) the
    prompt also lists the package's other files within ``package_chars`` characters
    (``skillvc.packages.prompt``) and asks every edit to name its file."""
    batches = minibatches(items, rollouts, metric, minibatch_size, client.store.get_blob)
    package_values: dict[str, str] = {}
    edits_format = prompts.EDITS_FORMAT
    if package is not None:
        entries = optimizer_files(package, package_chars, carried)
        listing = json.dumps(entries, indent=1, ensure_ascii=False)
        package_values = {
            "package_rule": prompts.rule("package_rule"),
            "package_files": f"\n<package_files>\n{listing}\n</package_files>\n",
            "answer_format": prompts.PACKAGE_ANSWER_FORMAT,
        }
        edits_format = prompts.PACKAGE_EDITS_FORMAT
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
            **package_values,
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
            payload, calls, error = ask_json(
                client, messages, "edits", step, edits_format=edits_format
            )
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
            winner[3].append(loser)
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
    Agent Skills limits (``skillvc.agents.description``); nothing else of the frontmatter."""
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
