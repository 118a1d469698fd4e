"""A SkillOpt run directory imported as skillvc history: events, commits, refs and tags.

What a run becomes (run id ``skillopt-<hash of its config.json>``):
- ``run.started`` (its models and schedule, ``imported``: where from), ``baseline``, and per
  step ``step.started``, the val and train ``rollout`` scores SkillOpt kept, and a ``gate``
  (before -> after, per-item scores, flips) or ``step.empty``; per epoch end a ``slow_update``
  with its ``gate`` (kind slow_update: ``forced`` when SkillOpt applied it ungated) and a
  ``meta_update``; ``run.finished`` once SkillOpt wrote ``summary.json``.
- One commit per accepted step (and per epoch-end slow update that changed the skill) on the
  branch ``skillvc/<run>`` (created from HEAD, never the checked-out one: no file of the work
  tree changes), its message the one training writes, with ``Skillvc-Run``, ``Skillvc-Event``
  and ``Skillvc-Gate`` trailers; a rejected candidate's commit under
  ``refs/skillvc/rejected/<run>/<step>``; epoch tags and ``best``.

Invariants:
- The run directory is only read (``skillvc.integrations.skillopt.runs``).
- Importing again is idempotent: the run's events are replayed at their sequence numbers and
  the store hands back the ones already there; a commit whose ``commit.done`` is logged is
  reused. A run directory that moved on (an interrupted run SkillOpt continued) adds what is
  new; one that changed what was imported is refused, naming the first difference.
- An imported run is never resumed by ``skillvc train`` (``run.started`` carries ``imported``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillvc.core.errors import SkillOptError
from skillvc.core.events import Event
from skillvc.core.hashing import canonical_json
from skillvc.core.store import EventStore
from skillvc.integrations.skillopt.runs import SkillOptRun, Step, ValScores, read_run, scores_of
from skillvc.skill.edits import Edit
from skillvc.training import commits
from skillvc.training.runlog import RunLog
from skillvc.workspace.patches import gate_trailer
from skillvc.workspace.workspace import Workspace

DECISIONS = {"accept": "accepted", "accept_new_best": "accepted", "reject": "rejected"}
DECISIONS["force_accept"] = "forced"
IGNORED = ("imported",)  # payload keys a re-import may change (where the directory is now)


@dataclass
class ImportResult:
    run_id: str
    branch: str
    steps: int = 0
    accepted: int = 0
    rejected: int = 0
    slow_updates: int = 0
    finished: bool = False
    new_events: int = 0
    skipped: list[str] = field(default_factory=list)
    best_commit: str | None = None


def run_id_of(root: Path) -> str:
    """``skillopt-`` and 8 hex of the run's config.json (else its seed skill): one SkillOpt run,
    the same id however often it is imported."""
    source = root / "config.json"
    data = (
        source.read_bytes()
        if source.is_file()
        else (root / "skills" / "skill_v0000.md").read_bytes()
    )
    return f"skillopt-{hashlib.sha256(data).hexdigest()[:8]}"


def convert_edit(raw: Mapping[str, Any]) -> Edit | None:
    """A SkillOpt patch edit as skillvc's: append -> add, insert_after -> add after its target
    (the anchor), replace and delete as they are. None for one that is not an edit."""
    op = str(raw.get("op") or "").strip().lower()
    content = str(raw.get("content") or "")
    target = str(raw.get("target") or "")
    why = str(raw.get("rationale") or raw.get("reasoning") or raw.get("reason") or "")
    if raw.get("support_count"):
        why = (why + " " if why else "") + f"(support {raw['support_count']})"
    try:
        if op in ("append", "add"):
            return Edit("add", content=content, rationale=why)
        if op == "insert_after":
            return Edit("add", content=content, anchor=target or None, rationale=why)
        if op == "replace":
            return Edit("replace", target=target, content=content, rationale=why)
        if op == "delete":
            return Edit("delete", target=target, rationale=why)
    except ValueError:
        return None
    return None


class _Importer:
    def __init__(self, ws: Workspace, store: EventStore, run: SkillOptRun, branch: str | None):
        self.ws, self.store, self.run = ws, store, run
        self.repo = ws.repo
        self.path = ws.skill_relpath
        self.run_id = run_id_of(run.root)
        self.branch = branch or f"skillvc/{self.run_id}"
        self.log = RunLog(store, self.run_id)
        self.result = ImportResult(self.run_id, self.branch, skipped=list(run.skipped))
        self.val: dict[str, ValScores] = {}  # skill blob -> its val scores
        # An ungated slow update's skill -> the skill it was written into: SkillOpt keeps that
        # one's val scores for it (it never evaluates the update), and so do the next gates.
        self.basis: dict[str, str] = {}
        cfg = run.config
        self.metric = str(cfg.get("gate_metric") or "hard")
        self.mixed = float(cfg.get("gate_mixed_weight", 0.5) or 0.5)

    # -- emitting ---------------------------------------------------------------------------

    def emit(self, type: str, payload: Mapping[str, Any], *, key: str | None = None) -> Event:
        before = self.store.next_seq(self.run_id)
        event = self.log.emit(type, payload, key=key)
        if (event.seq or 0) < before:  # already there: it must be what this import writes
            theirs = {k: v for k, v in event.payload.items() if k not in IGNORED}
            ours = {k: v for k, v in payload.items() if k not in IGNORED}
            if canonical_json(theirs) != canonical_json(ours):
                raise SkillOptError(
                    f"{self.run.root} has changed since run {self.run_id} was imported from it "
                    f"(event {event.seq}, {type}, differs); the log keeps what was imported.",
                    hint="Import the changed directory into another repository, or restore it.",
                )
        else:
            self.result.new_events += 1
        return event

    def score(self, scores: ValScores, item: str) -> float:
        hard, soft = scores.hard[item], scores.soft.get(item, scores.hard[item])
        if self.metric == "soft":
            return soft
        if self.metric == "mixed":
            return (1 - self.mixed) * hard + self.mixed * soft
        return hard

    def rollouts(self, scores: ValScores | None, skill: str, split: str) -> None:
        if scores is None:
            return
        if split == "val":
            self.val[skill] = scores
        for item in scores.hard:
            self.emit(
                "rollout",
                {
                    "item": item,
                    "split": split,
                    "hard": scores.hard[item],
                    "soft": scores.soft.get(item, scores.hard[item]),
                    "error": None,
                    "reason": scores.reasons.get(item, ""),
                    "skill": skill,
                    "call": None,
                    "output": None,
                },
            )

    # -- the run ----------------------------------------------------------------------------

    def started(self) -> tuple[str, str]:
        """Log ``run.started`` (first import: after the seed commit); the base commit and the
        seed skill's blob."""
        seed = self.store.put_blob(self.run.seed)
        logged = self.store.events(run_id=self.run_id, types=["run.started"], limit=1)
        if logged:
            base = str(logged[0].payload["base_commit"])
        else:
            head = self.repo.head_sha()
            if head is None:
                raise SkillOptError(
                    "The repository has no commit yet; the import branch starts from HEAD.",
                    hint="Commit skillvc.toml first (git add skillvc.toml && git commit).",
                )
            same = self.repo.has_file(self.path, head) and self.repo.read_file(
                self.path, head
            ) == self.run.seed.encode("utf-8")
            base = (
                head
                if same
                else self.repo.build_commit(
                    self.path,
                    self.run.seed.encode("utf-8"),
                    f"skillvc: the seed skill of SkillOpt run {self.run.root.name}\n\n"
                    f"skills/skill_v0000.md of {self.run.root.name}, imported as {self.run_id}.",
                    head,
                )
            )
        cfg = self.run.config
        self.emit(
            "run.started",
            {
                "base_commit": base,
                "branch": self.branch,
                "skill": seed,
                "models": {
                    "target": f"openai:{cfg.get('target_model', '?')}",
                    "optimizer": f"openai:{cfg.get('optimizer_model', '?')}",
                },
                "config": {
                    "skill": {"path": self.path},
                    "train": {
                        "epochs": cfg.get("num_epochs"),
                        "batch_size": cfg.get("batch_size"),
                        "minibatch_size": cfg.get("minibatch_size"),
                        "learning_rate": cfg.get("edit_budget"),
                        "min_learning_rate": cfg.get("min_edit_budget"),
                        "lr_schedule": cfg.get("lr_scheduler"),
                        "gate_metric": self.metric,
                        "seed": cfg.get("seed"),
                        "slow_update": cfg.get("use_slow_update"),
                        "slow_update_gate": cfg.get("slow_update_gate_with_selection", False),
                        "slow_update_from_epoch": 2,
                        "meta_skill": cfg.get("use_meta_skill"),
                        "attribution": False,
                    },
                },
                "imported": {
                    "from": "skillopt",
                    "directory": str(self.run.root.resolve()),
                    "env": cfg.get("env"),
                },
            },
        )
        return base, seed

    def run_all(self) -> ImportResult:
        run = self.run
        base, seed = self.started()
        baseline = run.baseline
        if baseline is not None:
            self.rollouts(baseline, seed, "val")
        before = _mean(baseline, self) if baseline else _baseline(run)
        if before is not None:
            self.emit("baseline", {"val": before, "n": len(baseline.hard) if baseline else 0})
        head, skill, current = base, seed, before
        # The run's planned steps (an interrupted run's later import must log the same).
        planned = int(run.config.get("num_epochs") or 0) * int(
            run.config.get("steps_per_epoch") or 0
        )
        total = planned or len(run.steps)
        ends = {e.epoch: e for e in run.epochs}
        for i, step in enumerate(run.steps):
            self.log.step, self.log.epoch = step.number, step.epoch
            head, skill, current = self.step(step, head, skill, current, total)
            last_of_epoch = i + 1 == len(run.steps) or run.steps[i + 1].epoch != step.epoch
            end = ends.get(step.epoch)
            if last_of_epoch and end is not None and (end.slow or end.meta):
                self.log.step = None
                head, skill = self.epoch_end(end, head, skill, current)
        self.log.step = self.log.epoch = None
        if run.finished:  # the final skill's val, which SkillOpt scores after the last epoch
            final = run.root / "final_selection_eval" / "results.jsonl"
            self.rollouts(scores_of(final), skill, "val")
        tip = head
        if tip != base or not self.repo.refs(f"refs/heads/{self.branch}"):
            self.move_branch(tip)
        if run.summary is not None:
            self.finish(base, seed, tip)
        return self.result

    def step(
        self, step: Step, head: str, skill: str, current: float | None, total: int
    ) -> tuple[str, str, float | None]:
        rec = step.record
        self.result.steps += 1
        self.emit(
            "step.started",
            {"batch": sorted(step.train.hard) if step.train else [], "lr": rec.get("edit_budget"),
             "total_steps": total},
        )  # fmt: skip
        self.rollouts(step.train, skill, "train")
        action = step.action
        if action not in DECISIONS:
            self.emit("step.empty", {"reason": action or "no record of a decision"})
            return head, skill, current
        edits = [e for e in (convert_edit(raw) for raw in step.edits) if e is not None]
        if len(edits) < len(step.edits):
            self.result.skipped.append(
                f"step {step.number}: {len(step.edits) - len(edits)} edit(s) not in a form "
                "skillvc reads"
            )
        candidate_text = step.candidate
        candidate = self.store.put_blob(candidate_text) if candidate_text is not None else None
        if candidate is not None:
            self.rollouts(step.val, candidate, "val")
        after = rec.get("candidate_gate_score", rec.get("selection_hard"))
        decision = DECISIONS[action]
        gate = self.gate_payload(
            "step", decision, rec.get("edit_budget"), [e.to_dict() for e in edits],
            skill, candidate, current, after,
        )  # fmt: skip
        event = self.emit("gate", gate)
        if candidate_text is None:
            self.result.skipped.append(f"step {step.number}: rejected candidate not kept (no ref)")
            self.result.rejected += 1
            return head, skill, current
        evidence = self.evidence("step", decision, gate, step, step.epoch, edits)
        sha = self.commit(event, gate, candidate_text, evidence, head, str(step.number))
        if decision == "rejected":
            self.result.rejected += 1
            return head, skill, current
        self.result.accepted += 1
        score = rec.get("current_score")
        return sha, str(candidate), float(score) if score is not None else after

    def epoch_end(self, end: Any, head: str, skill: str, current: float | None) -> tuple[str, str]:
        slow, meta = end.slow or {}, end.meta or {}
        new_text = end.skill
        action = str(slow.get("action") or "")
        if slow and action != "no_content" and new_text is not None:
            new = self.store.put_blob(new_text)
            gated = action in ("accept", "accept_new_best", "reject")
            decision = DECISIONS.get(action, "forced")
            guidance = str(slow.get("slow_update_content") or "")
            self.emit("slow_update", {"gated": gated, "guidance": guidance, "skipped": False})
            self.result.slow_updates += 1
            if new != skill or decision == "rejected":
                candidate_text = new_text
                if decision == "rejected":
                    path = self.run.root / "slow_update" / f"epoch_{end.epoch:02d}"
                    candidate_text = (
                        (path / "candidate_skill.md").read_text(encoding="utf-8")
                        if (path / "candidate_skill.md").is_file()
                        else new_text
                    )
                candidate = self.store.put_blob(candidate_text)
                after = slow.get("selection_hard") if gated else None
                gate = self.gate_payload(
                    "slow_update", decision, None, [], skill, candidate, current, after
                )
                event = self.emit("gate", gate)
                evidence = self.evidence("slow_update", decision, gate, None, end.epoch, [])
                label = f"epoch-{end.epoch}-slow-update"
                sha = self.commit(event, gate, candidate_text, evidence, head, label)
                if decision != "rejected":
                    if decision == "forced":
                        self.basis[candidate] = self.basis.get(skill, skill)
                    head, skill = sha, candidate
        elif slow:
            self.emit("slow_update", {"gated": False, "guidance": "", "skipped": True})
        if meta.get("meta_skill_content"):
            self.emit("meta_update", {"error": None, "notes": str(meta["meta_skill_content"])})
        tag = f"{self.run_id}/epoch-{end.epoch}"
        self.repo.tag(tag, head)
        self.emit("checkpoint", {"sha": head, "tag": f"skillvc/{tag}", "val": current})
        return head, skill

    def gate_payload(
        self,
        kind: str,
        decision: str,
        lr: Any,
        edits: list[dict[str, Any]],
        current: str,
        candidate: str | None,
        before: float | None,
        after: Any,
    ) -> dict[str, Any]:
        old = self.val.get(current) or self.val.get(self.basis.get(current, ""))
        new = self.val.get(candidate or "")
        items, gained, lost = [], [], []
        if old is not None and new is not None:
            for item in sorted(set(old.hard) & set(new.hard)):
                b, a = self.score(old, item), self.score(new, item)
                items.append({"id": item, "before": b, "after": a})
                if a > b:
                    gained.append(item)
                elif a < b:
                    lost.append(item)
        n = len(old.hard) if old is not None else len(new.hard) if new is not None else 0
        return {
            "kind": kind,
            "lr": lr,
            "edits": edits,
            "unmatched": [],
            "current": current,
            "candidate": candidate,
            "decision": decision,
            "metric": self.metric,
            "before": {"mean": before, "n": n},
            "after": {
                "mean": None if after is None else float(after),
                "n": len(new.hard) if new is not None else (0 if after is None else n),
            },
            "early_stopped": False,
            "items": items,
            "flipped": {"gained": gained, "lost": lost},
            "errors": 0,
            "p_value": None,
            "test": None,
        }

    def evidence(
        self,
        kind: str,
        decision: str,
        gate: Mapping[str, Any],
        step: Step | None,
        epoch: int,
        edits: Sequence[Edit],
    ) -> commits.Evidence:
        tokens = (step.record.get("tokens") if step else None) or {}
        calls = {
            stage: int(v.get("calls", 0)) for stage, v in tokens.items() if isinstance(v, dict)
        }
        total = sum(
            int(v.get("prompt_tokens", 0)) + int(v.get("completion_tokens", 0))
            for v in tokens.values()
            if isinstance(v, dict)
        )
        return commits.Evidence(
            kind=kind,
            decision=decision,
            edits=[e.to_dict() for e in edits],
            metric=self.metric,
            before=gate["before"]["mean"],
            after=gate["after"]["mean"],
            n=gate["before"]["n"],
            n_evaluated=gate["after"]["n"],
            early_stopped=False,
            gained=gate["flipped"]["gained"],
            lost=gate["flipped"]["lost"],
            run_id=self.run_id,
            step=step.number if step else None,
            epoch=epoch,
            lr=step.record.get("edit_budget") if step else None,
            calls=calls,
            tokens=total,
            cost_usd=None,
        )

    def commit(
        self,
        gate_event: Event,
        gate: Mapping[str, Any],
        text: str,
        evidence: commits.Evidence,
        parent: str,
        label: str,
    ) -> str:
        accepted = gate["decision"] != "rejected"
        ref = None if accepted else f"refs/skillvc/rejected/{self.run_id}/{label}"
        intent = self.emit(
            "commit.intent",
            {
                "gate_id": gate_event.id,
                "accepted": accepted,
                "parent": parent,
                "ref": ref,
                "content": self.store.put_blob(text),
            },
        )
        key = f"gate:{gate_event.id}"
        done = self.store.find("commit.done", key)
        if done is not None:
            self.emit("commit.done", dict(done.payload), key=key)
            return str(done.payload["sha"])
        trailers = {
            "Skillvc-Run": self.run_id,
            "Skillvc-Event": f"{self.run_id}/{intent.seq}",
            "Skillvc-Imported": f"SkillOpt run {self.run.root.name}",
        }
        if gate["after"]["mean"] is not None and gate["before"]["mean"] is not None:
            trailers["Skillvc-Gate"] = f"{gate_event.id}; {gate_trailer(gate)}"
        message = commits.message(evidence)
        files = {self.path: text.encode("utf-8")}
        if accepted:
            sha = self.repo.build_commit_files(files, message, parent, trailers)
        else:
            sha = self.repo.store_candidate_files(ref or "", files, message, parent, trailers)
        payload = {"gate_id": gate_event.id, "sha": sha, "ref": ref or f"refs/heads/{self.branch}",
                   "intent": intent.seq}  # fmt: skip
        self.emit("commit.done", payload, key=key)
        return sha

    def move_branch(self, tip: str) -> None:
        ref = f"refs/heads/{self.branch}"
        now = self.repo.refs(ref).get(ref)
        if now == tip:
            return
        if now is not None and not self.repo.is_ancestor(now, tip):
            raise SkillOptError(
                f"Branch '{self.branch}' exists and is not part of run {self.run_id}'s import "
                f"(it is at {now[:12]}).",
                hint="Name another branch with --branch, or delete that one.",
            )
        self.repo.move_branch(self.branch, tip, now)

    def finish(self, base: str, seed: str, tip: str) -> None:
        summary = self.run.summary or {}
        best_text = self.run.root / "best_skill.md"
        best = tip
        if best_text.is_file():
            wanted = self.store.put_blob(best_text.read_text(encoding="utf-8"))
            for event in self.store.events(run_id=self.run_id, types=["commit.intent"]):
                if event.payload.get("accepted") and event.payload.get("content") == wanted:
                    done = self.store.find("commit.done", f"gate:{event.payload['gate_id']}")
                    best = str(done.payload["sha"]) if done else best
            if wanted == seed:
                best = base
        self.repo.tag(f"{self.run_id}/best", best)
        self.emit("checkpoint", {"sha": best, "tag": f"skillvc/{self.run_id}/best",
                                 "val": summary.get("best_selection_hard")})  # fmt: skip
        tokens = (summary.get("token_summary") or {}).get("_total") or {}
        self.emit(
            "run.finished",
            {
                "accepted": self.result.accepted,
                "rejected": self.result.rejected,
                "steps": self.result.steps,
                "baseline_val": summary.get("baseline_selection_hard"),
                "best_val": summary.get("best_selection_hard"),
                "baseline_test": summary.get("baseline_test_hard"),
                "test": summary.get("test_hard"),
                "best_commit": best,
                "calls": int(tokens.get("calls", 0) or 0),
                "tokens": int(tokens.get("total_tokens", 0) or 0),
                "cost_usd": None,
            },
        )
        self.result.finished = True
        self.result.best_commit = best


def _mean(scores: ValScores, importer: _Importer) -> float:
    values = [importer.score(scores, item) for item in scores.hard]
    return sum(values) / len(values)


def _baseline(run: SkillOptRun) -> float | None:
    value = (run.summary or {}).get("baseline_selection_hard")
    return float(value) if isinstance(value, (int, float)) else None


def import_run(ws: Workspace, directory: str | Path, *, branch: str | None = None) -> ImportResult:
    """Import the SkillOpt run at ``directory`` into ``ws`` (see the module docstring)."""
    run = read_run(directory)
    store = ws.store()
    try:
        with store.writer_lock("train"):
            return _Importer(ws, store, run, branch).run_all()
    finally:
        store.close()
