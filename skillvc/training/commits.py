"""Commits of the training loop, kept consistent with the event log across crashes.

A commit changes only the skill file, or only files of one skill package (those the candidate
changed). Protocol for every commit (accepted step, slow update, rejected candidate):
1. ``commit.intent`` is logged (run-sequenced, so a replay finds it again);
2. if ``commit.done`` for that gate exists, the commit was made: reuse its sha;
3. otherwise look for a commit carrying ``Skillvc-Event: <run>/<seq of the intent>`` on the
   branch (or the candidate ref): a crash between the git write and step 4 left it there;
4. otherwise write the commit; then log ``commit.done`` with its sha.
So the same intent never produces two commits, and a resumed run ends with the same trees and
messages as an uninterrupted one (messages hold only deterministic facts: no times, no ids that
depend on thread timing).

A rejected candidate's commit moves no branch and nothing the loop does next reads it, so the
loop may write it on a thread of its own (``start_commit(writer=...)``) while its next stage
runs; its ``commit.done`` is logged where the loop next asks for it (``Pending.finish``: before
the next gate or the run's end), a fixed place in the run's sequence whatever the timing. A
run logged before this (``commit.done`` right after its intent) replays as it was.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

from skillvc.core.events import Event
from skillvc.packages.model import SkillPackage
from skillvc.repo.skillrepo import SkillRepo
from skillvc.training import significance
from skillvc.training.runlog import RunLog


def _short(text: str | None, width: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _q(text: str | None, width: int) -> str:
    """Quoted for a commit message: plain double quotes, no escaping (this is prose)."""
    return f'"{_short(text, width)}"'


def _bare(text: str | None) -> str:
    """The text without a leading Markdown list marker, for the one-line subject."""
    return re.sub(r"^\s*[-*+]\s+", "", " ".join((text or "").split()))


def describe_edit(edit: dict[str, Any]) -> str:
    op = edit["op"]
    # A skill package's edit to a file other than SKILL.md names it ("file" is absent else).
    into = f" in {edit['file']}" if edit.get("file") else ""
    if op == "add":
        where = f" after {_q(edit.get('anchor'), 40)}" if edit.get("anchor") else ""
        return f"add{into}{where}: {_q(edit.get('content'), 200)}"
    if op == "replace":
        return f"replace{into} {_q(edit.get('target'), 80)} with {_q(edit.get('content'), 120)}"
    return f"delete{into} {_q(edit.get('target'), 120)}"


def subject(kind: str, edits: Sequence[dict[str, Any]], step: int | None, epoch: int) -> str:
    if kind == "slow_update":
        return f"skillvc: slow update of the epoch guidance [epoch {epoch}]"
    if not edits:
        return f"skillvc: step {step}"
    head = edits[0]
    more = f" (+{len(edits) - 1} more)" if len(edits) > 1 else ""
    if head["op"] == "replace":
        what = f"{_q(_bare(head.get('target')), 30)} -> {_q(_bare(head.get('content')), 30)}"
    else:
        what = _q(_bare(head.get("content") or head.get("target")), 50)
    into = f" in {head['file']}" if head.get("file") else ""
    return f"skillvc: {head['op']}{into} {what}{more} [step {step}]"


@dataclass(frozen=True)
class Evidence:
    kind: str  # step | slow_update
    decision: str  # accepted | rejected | forced
    edits: Sequence[dict[str, Any]]
    metric: str
    before: float | None
    after: float | None
    n: int
    n_evaluated: int
    early_stopped: bool
    gained: Sequence[str]
    lost: Sequence[str]
    run_id: str
    step: int | None
    epoch: int
    lr: int | None
    calls: dict[str, int]
    tokens: int
    cost_usd: float | None
    p_value: float | None = None
    test: str | None = None
    confidence: float = 0.0
    after_bound: float | None = None  # early stop: the best mean the candidate could reach


@dataclass(frozen=True)
class Honesty:
    """How sure a gate decision is, for the commit message and the progress line (with
    attribution on; the paper's bundle gate keeps its messages as they were)."""

    alpha: float  # the gate's (``Gating.gate_alpha``)
    p_value: float | None
    test: str | None
    decision: str
    # Attribution's tests: (edit, outcome, up, down, n, p_value) per edit tested; outcome
    # "refused" for a last edit standing that lost its own test (the candidate is refused).
    edits: tuple[tuple[dict[str, Any], str, int, int, int, float], ...] = ()
    bundle: int = 0  # edits in the candidate attribution took apart (not all are tested)
    test_alpha: float | None = None  # the tests' alpha, when it is not the gate's

    @property
    def verdict(self) -> str:
        return significance.verdict(self.p_value, self.alpha)

    def trailer(self) -> str:
        """The ``Skillvc-Significance`` trailer: ``p=0.0312; significant; alpha=0.2``."""
        p = "none" if self.p_value is None else f"{self.p_value:.4g}"
        return f"p={p}; {self.verdict}; alpha={self.alpha:.3g}"

    def summary(self) -> str:
        """For a progress line: ``p = 0.031, significant (alpha 0.2); dropped 2 of 4 edits``."""
        said = significance.stated(self.p_value, self.alpha)
        dropped = sum(1 for _, outcome, *_ in self.edits if outcome in ("neutral", "harmful"))
        if dropped:
            said += f"; dropped {dropped} of {self.bundle} edits"
        return said

    def lines(self) -> list[str]:
        said = significance.describe(self.p_value, self.alpha)
        how = f" ({self.test} test, one-sided)" if self.test else ""
        out = [f"Significance: {said}{how} at alpha {self.alpha:.3g}."]
        if self.edits:
            tests_alpha = self.alpha if self.test_alpha is None else self.test_alpha
            out.append("Attribution (each edit against the candidate without it, same val items):")
            for edit, outcome, up, down, _, p in self.edits:
                why = {
                    "kept": "kept",
                    "neutral": "DROPPED as a neutral passenger",
                    "harmful": "DROPPED as harmful",
                    "refused": "REFUSED (the last edit standing, against the current skill)",
                }[outcome]
                out.append(
                    f"- {why}: {describe_edit(edit)}; {up} items better with it, {down} worse, "
                    f"{significance.describe(p, tests_alpha)}"
                )
        return out


def message(ev: Evidence, honesty: Honesty | None = None) -> str:
    lines = [subject(ev.kind, ev.edits, ev.step, ev.epoch), ""]
    if ev.kind == "slow_update":
        lines.append("Guidance written into the protected slow-update region of the skill.")
    else:
        lines.append("Edits:")
        for edit in ev.edits:
            lines.append(f"- {describe_edit(edit)}")
            if edit.get("rationale"):
                lines.append(f"  Why: {_short(edit['rationale'], 300)}")
    lines.append("")
    if ev.decision == "forced":
        lines.append("Gate: none (slow_update_gate = false): applied UNGATED.")
    else:
        flips = ""
        if ev.gained or ev.lost:
            names = ", ".join([*(f"+{i}" for i in ev.gained[:8]), *(f"-{i}" for i in ev.lost[:8])])
            flips = f"; flipped {len(ev.gained)} up, {len(ev.lost)} down: {names}"
        early = f", stopped early after {ev.n_evaluated} of {ev.n}" if ev.early_stopped else ""
        if ev.decision == "accepted":
            verdict = "accepted"
        elif (
            # Only a significance requirement can refuse a gain. (Means over different items,
            # after candidate errors, can show after > before without a paired gain.)
            ev.confidence > 0
            and ev.p_value is not None
            and ev.p_value > 1 - ev.confidence
            and ev.after is not None
            and ev.before is not None
            and ev.after > ev.before
        ):
            verdict = f"rejected (gain not significant at {ev.confidence:.0%})"
        else:
            verdict = "rejected (no strict improvement)"
        if ev.p_value is not None:
            verdict += f", p = {ev.p_value:.3g} ({ev.test} test)"
        # After an early stop the candidate's mean covers only the items the current skill
        # fails most; the bound it could still reach is the number that decided.
        after = (
            f"<={_score(ev.after_bound)}"
            if ev.early_stopped and ev.after_bound is not None
            else _score(ev.after)
        )
        lines.append(
            f"Gate: val {ev.metric} {_score(ev.before)} -> {after} "
            f"(n={ev.n}{early}{flips}); {verdict}."
        )
    if honesty is not None:
        lines.extend(honesty.lines())
    where = f"step {ev.step}, " if ev.step is not None else ""
    lr = f", lr {ev.lr}" if ev.lr is not None else ""
    lines.append(f"Run {ev.run_id}, {where}epoch {ev.epoch}{lr}.")
    per_role = ", ".join(f"{role} {n}" for role, n in sorted(ev.calls.items()))
    cost = "price unknown" if ev.cost_usd is None else f"${ev.cost_usd:.4f}"
    lines.append(
        f"Model calls: {sum(ev.calls.values())} ({per_role}); tokens {ev.tokens:,}; {cost}."
    )
    return "\n".join(lines)


def start_commit(
    repo: SkillRepo,
    log: RunLog,
    *,
    gate_id: int,
    files: Mapping[str, bytes],
    version: str,
    text: str,
    accepted: bool,
    parent: str,
    step_label: str,
    skill: str | None = None,
    fresh: bool = False,
    branch: str | None = None,
    significance_trailer: str | None = None,
    writer: Executor | None = None,
    extra_trailers: Mapping[str, str] | None = None,
) -> Pending:
    """Log the intent of one gate decision's commit and write (or find again) the commit;
    ``Pending.finish`` logs ``commit.done`` and returns its sha.

    ``files`` maps repository paths to the bytes the commit gives them (the skill file, or the
    files of a skill package the candidate changed); ``version`` is the candidate's identity
    text (the skill's text, or the package's bundle), which the intent records so a resume can
    finish the write. A rejected candidate is kept under
    refs/skillvc/rejected/[<skill>/]<run>/<step> (the skill's name only in a repository with
    many skills: single-skill repositories keep their layout); with a ``writer`` its commit is
    written there, beside the caller. ``fresh``: the run was never interrupted, so no commit
    of this decision can exist yet and the search for one (git calls between the gate and the
    next step) is skipped. ``branch``: the ref accepted commits move, when the caller knows it
    (else git is asked).
    """
    where = f"{skill}/{log.run_id}" if skill else log.run_id
    ref = None if accepted else f"refs/skillvc/rejected/{where}/{step_label}"
    intent = log.emit(
        "commit.intent",
        {
            "gate_id": gate_id,
            "accepted": accepted,
            "parent": parent,
            "ref": ref,
            "content": log.store.put_blob(version),
        },
    )
    done = log.store.find("commit.done", f"gate:{gate_id}")
    if done is not None:  # the commit was made: log its done as the run first did
        pending = Pending(log, intent, ref="", step=log.step, epoch=log.epoch, logged=done)
        if accepted or writer is None or done.seq == (intent.seq or 0) + 1:
            pending.finish()  # right after its intent (a run from before deferred commits too)
        return pending
    pending = Pending(
        log, intent, ref=ref or branch or branch_ref(repo), step=log.step, epoch=log.epoch
    )
    marker = f"{log.run_id}/{intent.seq}"
    trailers = {"Skillvc-Run": log.run_id, "Skillvc-Event": marker}
    if significance_trailer is not None:
        trailers["Skillvc-Significance"] = significance_trailer
    trailers.update(extra_trailers or {})  # a routing edit's evidence (skillvc.routing)
    sha = (
        repo.find_trailer("Skillvc-Event", marker, rev=ref or "HEAD", max_count=50)
        if not fresh and (ref is None or ref in repo.refs(ref))
        else None
    )
    if sha is not None:
        if accepted:  # the branch moved before a kill: its files are put in place
            for path, content in files.items():
                repo.restore_file(path, content)
    elif accepted:
        sha = repo.commit_files(files, text, trailers, expected_parent=parent)
    elif writer is None:
        sha = repo.store_candidate_files(ref or "", files, text, parent, trailers)
    else:
        pending.writing = writer.submit(
            repo.store_candidate_files, ref or "", files, text, parent, trailers
        )
    pending.sha = sha
    if accepted:
        pending.finish()
    return pending


class Pending:
    """One commit whose ``commit.done`` is not logged yet (see the module docstring)."""

    def __init__(
        self,
        log: RunLog,
        intent: Event,
        *,
        ref: str,
        step: int | None,
        epoch: int | None,
        logged: Event | None = None,  # commit.done as a replayed run logged it
    ) -> None:
        self.log, self.intent, self.ref, self.logged = log, intent, ref, logged
        self.step, self.epoch = step, epoch
        self.sha: str | None = None
        self.writing: Future[str] | None = None  # the write, on the caller's writer
        self.done: Event | None = None

    def finish(self) -> str:
        """Wait for the write, log ``commit.done`` (once) at the gate's step and epoch, and
        return the commit's sha."""
        if self.done is None:
            if self.logged is not None:
                payload, key = dict(self.logged.payload), self.logged.key
            else:
                if self.writing is not None:
                    self.sha = self.writing.result()
                payload = {
                    "gate_id": self.intent.payload["gate_id"],
                    "sha": self.sha,
                    "ref": self.ref,
                    "intent": self.intent.seq,
                }
                key = f"gate:{self.intent.payload['gate_id']}"
            with self.log.at(self.step, self.epoch):
                self.done = self.log.emit("commit.done", payload, key=key)
        return str(self.done.payload["sha"])


def branch_ref(repo: SkillRepo) -> str:
    branch = repo.current_branch()
    return f"refs/heads/{branch}" if branch else "HEAD"


def reconcile_pending(
    repo: SkillRepo, log: RunLog, relpath: str, package_root: str | None = None
) -> None:
    """Finish an accepted commit whose branch move happened but whose file writes did not.

    Called before the dirty-file check on resume: the half-finished state a SIGKILL can leave
    (HEAD has the commit, the working files still have the old text) is ours to complete. For
    a skill package (``package_root``) every file of the recorded bundle is put in place.
    """
    intents = log.store.events(
        run_id=log.run_id, types=["commit.intent"], newest_first=True, limit=1
    )
    if not intents or not intents[0].payload.get("accepted"):
        return
    intent = intents[0]
    if log.store.find("commit.done", f"gate:{intent.payload['gate_id']}") is not None:
        return
    marker = f"{log.run_id}/{intent.seq}"
    if repo.head_sha() and repo.find_trailer("Skillvc-Event", marker, max_count=5):
        for path, content in version_files(
            log.store.get_blob(intent.payload["content"]), relpath, package_root
        ).items():
            repo.restore_file(path, content)


def version_files(version: str, relpath: str, package_root: str | None) -> dict[str, bytes]:
    """The repository files a skill version consists of: the skill file, or every file of a
    package bundle under its root."""
    if package_root is None:
        return {relpath: version.encode("utf-8")}
    package = SkillPackage.from_bundle(package_root, version)
    return {package.repo_path(name): raw for name, raw in package.files.items()}
