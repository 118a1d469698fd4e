"""``skillvc train``: the SkillOpt loop, event-sourced and git-native.

The spine is ``Trainer.run``: for each epoch, for each batch, the stages run in data-flow order
(rollout -> reflect -> aggregate -> select -> apply -> gate -> commit or reject), then the
epoch-end slow update and meta-skill update; finally the best skill is scored on test.

Invariants:
- Deterministic: for the same recorded answers the loop emits the same events in the same
  order. Resume re-runs it from the top with every recorded call answered from the log, so an
  interrupted run ends exactly like an uninterrupted one and pays no model call twice.
- The skill file changes only through ``commits.commit`` (one commit per accepted candidate),
  never half-written; the run refuses to start when the user has uncommitted changes to it.
- An unfinished run is resumed with the settings it started with; only the budget may change.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from skillvc import prompts
from skillvc.backends import get_backend
from skillvc.backends.pricing import price_for
from skillvc.calls import ModelClient, secret_values
from skillvc.config import Config, parse_config_dict
from skillvc.errors import (
    AuthenticationFailed,
    BudgetExceeded,
    ConfigError,
    RunFailed,
    TaskSetError,
)
from skillvc.events import Event
from skillvc.formats import new_problems
from skillvc.hashing import content_id, sha256_hex
from skillvc.scorers import get_scorer
from skillvc.skilldoc import SkillDocument
from skillvc.store import EventStore
from skillvc.tasks import TaskItem, TaskSet, load_taskset
from skillvc.training import commits
from skillvc.training.evaluate import Evaluator, Rollout, gate, mean
from skillvc.training.optimize import aggregate, apply_selected, ask_json, reflect, select
from skillvc.training.runlog import RunLog
from skillvc.training.schedule import learning_rate
from skillvc.workspace import Workspace

SLOW_UPDATE_REGION = "slow-update"
Progress = Callable[[str], None]


@dataclass
class RunSummary:
    run_id: str
    status: str
    resumed: bool
    steps: int = 0
    accepted: int = 0
    rejected: int = 0
    baseline_val: float | None = None
    best_val: float | None = None
    baseline_test: float | None = None
    test: float | None = None
    best_commit: str | None = None
    calls: int = 0
    fresh_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    calls_saved_by_early_stop: int = 0
    calls_by_role: dict[str, int] = field(default_factory=dict)


# -- starting or resuming ------------------------------------------------------------------


def find_unfinished(store: EventStore) -> Event | None:
    rows = store.query(
        "SELECT s.id FROM events s WHERE s.type = 'run.started' AND NOT EXISTS "
        "(SELECT 1 FROM events f WHERE f.type = 'run.finished' AND f.run_id = s.run_id) "
        "ORDER BY s.id DESC LIMIT 1"
    )
    return store.get(rows[0]["id"]) if rows else None


def _run_identity(config: Config, base: str, skill_hash: str, taskset: TaskSet) -> dict[str, Any]:
    snapshot = config.to_dict()
    snapshot["train"] = {k: v for k, v in snapshot["train"].items() if k != "budget_usd"}
    return {
        "config": snapshot,
        "base": base,
        "skill": skill_hash,
        "dataset": taskset.hash,
        "templates": prompts.template_hashes(),
    }


def train(
    ws: Workspace,
    *,
    new: bool = False,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    budget_usd: float | None = None,
    progress: Progress | None = None,
) -> RunSummary:
    """Train the workspace's skill (resuming its unfinished run unless ``new``)."""
    overrides = {
        s: {k: v for k, v in o.items() if v is not None} for s, o in (overrides or {}).items()
    }
    overrides = {s: o for s, o in overrides.items() if o}
    with ws.store(create=True) as store, store.writer_lock():
        unfinished = None if new else find_unfinished(store)
        if unfinished is not None and overrides:
            raise ConfigError(
                f"Run {unfinished.run_id} is unfinished and resumes with the settings it "
                "started with.",
                hint="Drop the overrides to resume it, or pass --new to start another run.",
            )
        if unfinished is not None:
            config = parse_config_dict(unfinished.payload["config"], ws.root)
        else:
            config = ws.config
            for section, values in overrides.items():
                from skillvc.config import override

                config = override(config, section, **values)
        if budget_usd is not None:
            config = dataclasses.replace(
                config, train=dataclasses.replace(config.train, budget_usd=budget_usd)
            )
        trainer = Trainer(ws, store, config, progress=progress)
        return trainer.run(unfinished)


# -- the trainer -------------------------------------------------------------------------


class Trainer:
    def __init__(
        self, ws: Workspace, store: EventStore, config: Config, progress: Progress | None
    ) -> None:
        self.ws = ws
        self.store = store
        self.config = config
        self.t = config.train
        self.repo = ws.repo
        self.relpath = config.skill.path
        self.progress = progress or (lambda line: None)
        self.started = time.monotonic()
        self.phase = "setup"
        self.summary: RunSummary
        self.log: RunLog

    # The spine -------------------------------------------------------------------------

    def run(self, unfinished: Event | None) -> RunSummary:
        self.start(unfinished)
        try:
            return self.train_all()
        except AuthenticationFailed as exc:
            self.log.note("run.stopped", {"reason": "authentication", "message": exc.message})
            raise

    def train_all(self) -> RunSummary:
        with ThreadPoolExecutor(max_workers=self.t.workers) as self.pool:
            self.evaluator = Evaluator(
                self.client, self.scorer, self.pool, judge=self.judge, on_rollouts=self.record
            )
            self.phase = "the baseline evaluation"
            self.baseline = self.evaluator.run(self.skill, self.val, "val")
            self.current_val = self.mean_of(self.baseline)
            for epoch in range(1, self.t.epochs + 1):
                epoch_start_skill = self.skill
                for batch in self.batches(epoch):
                    self.train_step(epoch, batch)
                self.end_epoch(epoch, epoch_start_skill)
            return self.finish()

    def train_step(self, epoch: int, batch: Sequence[TaskItem]) -> None:
        self.step += 1
        self.summary.steps = self.step
        self.log.step, self.log.epoch = self.step, epoch
        before = self.client.snapshot()
        lr = learning_rate(
            self.step,
            self.total_steps,
            self.t.learning_rate,
            self.t.min_learning_rate,
            self.t.lr_schedule,
        )
        self.log.emit(
            "step.started",
            {"lr": lr, "batch": [it.id for it in batch], "total_steps": self.total_steps},
        )
        self.phase = f"step {self.step}"
        rollouts = self.evaluator.run(self.skill, batch, "train")
        reflection = reflect(
            self.client,
            self.pool,
            skill=self.skill,
            items=batch,
            rollouts=rollouts,
            metric=self.t.gate_metric,
            minibatch_size=self.t.minibatch_size,
            budget=lr,
            rejected=self.buffer if self.t.buffer else [],
            meta=self.meta if self.t.meta_skill else "",
            step=self.step,
        )
        for p in reflection.proposals:
            self.log.emit(
                "edit.proposed",
                {
                    "edit": p.edit.to_dict(),
                    "source": "optimizer",
                    "minibatch": p.minibatch,
                    "kind": p.kind,
                },
            )
        for failure in reflection.failures:
            self.log.emit("reflection.failed", failure)
        merged = aggregate(reflection.proposals)
        self.log.emit(
            "edits.merged",
            {
                "edits": [
                    {"id": m.edit.id, "support": m.support, "merged_from": list(m.merged_from)}
                    for m in merged
                ]
            },
        )
        chosen, dropped = select(merged, lr)
        self.log.emit(
            "edits.selected",
            {
                "lr": lr,
                "selected": [m.edit.id for m in chosen],
                "dropped": [m.edit.id for m in dropped],
            },
        )
        result = apply_selected(
            self.doc, [m.edit for m in chosen], self.relpath, max_bytes=self.config.skill.max_bytes
        )
        for miss in result.unmatched:
            self.log.emit(
                "edit.unmatched",
                {"edit": miss.edit.to_dict(), "reason": miss.reason, "detail": miss.detail},
            )
        line = (
            f"edits {len(reflection.proposals)} proposed, {len(chosen)} selected, "
            f"{len(result.unmatched)} unmatched"
        )
        if not result.changed:
            self.log.emit(
                "step.empty",
                {"reason": "no edit could be applied" if chosen else "no edits proposed"},
            )
            self.report(epoch, lr, line, "no candidate", before)
            self.check_budget()
            return
        edits = [e.to_dict() for e in result.applied]
        unmatched = [
            {"id": u.edit.id, "reason": u.reason, "detail": u.detail} for u in result.unmatched
        ]
        verdict = self.decide("step", epoch, lr, result.document, edits, unmatched, before)
        self.report(epoch, lr, line, verdict, before)
        self.check_budget()

    def end_epoch(self, epoch: int, epoch_start_skill: str) -> None:
        self.log.step, self.log.epoch = None, epoch
        if self.t.slow_update:
            self.slow_update(epoch, epoch_start_skill)
        if self.t.meta_skill:
            self.meta_update(epoch)
        head = self.repo.head_sha()
        if head:
            name = f"{self.run_id}/epoch-{epoch}"
            self.repo.tag(name, head)
            self.log.emit(
                "checkpoint", {"tag": f"skillvc/{name}", "sha": head, "val": self.current_val}
            )

    # Stages ----------------------------------------------------------------------------

    def decide(
        self,
        kind: str,
        epoch: int,
        lr: int | None,
        candidate: SkillDocument,
        edits: list[dict[str, Any]],
        unmatched: list[dict[str, Any]],
        before: Mapping[str, Any],
        *,
        gated: bool = True,
    ) -> str:
        """Gate a candidate, then commit it (accepted) or keep it under a rejected ref."""
        candidate_text = candidate.render().decode("utf-8")
        self.phase = (
            f"the gate of step {self.step}"
            if kind == "step"
            else (f"the gate of the epoch {epoch} slow update")
        )
        if gated:
            result = gate(
                self.evaluator,
                self.skill,
                candidate_text,
                self.val,
                metric=self.t.gate_metric,
                early_stop=self.t.early_stop,
                chunk=self.t.workers,
            )
            decision = result.decision
        else:
            result = None
            decision = "forced"
        payload: dict[str, Any] = {
            "kind": kind,
            "lr": lr,
            "edits": edits,
            "unmatched": unmatched,
            "current": self.store.put_blob(self.skill),
            "candidate": self.store.put_blob(candidate_text),
        }
        payload |= (
            result.payload()
            if result
            else {
                "decision": "forced",
                "metric": self.t.gate_metric,
                "before": {"mean": self.current_val, "n": len(self.val)},
                "after": {"mean": None, "n": 0},
                "early_stopped": False,
                "items": [],
                "flipped": {"gained": [], "lost": []},
                "errors": 0,
            }
        )
        gate_event = self.log.emit("gate", payload)
        if result is not None:
            self.saved_calls += result.calls_saved
        accepted = decision in ("accepted", "forced")
        usage = self.usage_since(before)
        evidence = commits.Evidence(
            kind=kind,
            decision=decision,
            edits=edits,
            metric=self.t.gate_metric,
            before=result.before if result else self.current_val,
            after=result.after if result else None,
            n=result.n if result else 0,
            n_evaluated=result.n_evaluated if result else 0,
            early_stopped=result.early_stopped if result else False,
            gained=result.gained if result else [],
            lost=result.lost if result else [],
            run_id=self.run_id,
            step=self.step if kind == "step" else None,
            epoch=epoch,
            lr=lr,
            calls=usage["calls"],
            tokens=usage["tokens"],
            cost_usd=usage["cost_usd"],
        )
        label = str(self.step) if kind == "step" else f"epoch-{epoch}-slow-update"
        sha = commits.commit(
            self.repo,
            self.log,
            gate_id=gate_event.id,
            relpath=self.relpath,
            content=candidate.render(),
            text=commits.message(evidence),
            accepted=accepted,
            parent=self.head,
            step_label=label,
        )
        if accepted:
            self.head = sha
            self.doc, self.skill = candidate, candidate_text
            if result is not None:
                self.current_val = mean(
                    [
                        r.value(self.t.gate_metric)
                        for r in self.evaluator.run(self.skill, self.val, "val")
                        if r.ok
                    ]
                )
            self.summary.accepted += 1
            self.epoch_decisions.append(("accepted", edits))
        else:
            self.summary.rejected += 1
            # Only facts both a full and an early-stopped gate agree on go into the buffer, so
            # early stopping never changes what later reflections see.
            # candidate_size tells the optimizer whether an edit failed on its own or in a bundle.
            rejected = [{**e, "decision": "rejected", "candidate_size": len(edits)} for e in edits]
            self.buffer.extend(rejected)
            self.buffer = self.buffer[-self.t.rejected_buffer_size :]
            self.epoch_decisions.append(("rejected", rejected))
        if result is None:
            return "forced (ungated)"
        after = "-" if result.after is None else f"{result.after:.3f}"
        early = (
            f" (stopped early at {result.n_evaluated}/{result.n})" if result.early_stopped else ""
        )
        return f"val {result.before:.3f} -> {after}{early} {decision}"

    def slow_update(self, epoch: int, epoch_start_skill: str) -> None:
        before = self.client.snapshot()
        self.phase = f"the epoch {epoch} slow update"
        items = self.slow_items
        prev = self.evaluator.run(epoch_start_skill, items, "train")
        now = self.evaluator.run(self.skill, items, "train")
        metric = self.t.gate_metric
        cases = [
            {
                "id": it.id,
                "input": it.input,
                "expected": list(it.targets),
                "before": a.value(metric),
                "after": b.value(metric),
            }
            for it, a, b in zip(items, prev, now, strict=True)
            if a.ok and b.ok
        ]
        region = self.doc.region(SLOW_UPDATE_REGION)
        previous_guidance = region.content if region is not None else ""
        messages = prompts.render(
            "slow_update",
            n_cases=str(len(cases)),
            max_lines="12",
            previous_skill=epoch_start_skill,
            current_skill=self.skill,
            cases=cases,
            previous_guidance=previous_guidance or "(none yet)",
        )
        payload, _, error = ask_json(self.client, messages, "guidance", None)
        guidance = str(payload.get("guidance", "")).strip() if payload else ""
        if not guidance or guidance.strip() == previous_guidance.strip():
            self.log.emit(
                "slow_update",
                {"skipped": True, "error": error, "reason": error or "no new guidance"},
            )
            return
        candidate = self.doc.with_region(SLOW_UPDATE_REGION, "\n" + guidance + "\n")
        problems = new_problems(
            self.relpath, self.doc, candidate, max_bytes=self.config.skill.max_bytes
        )
        if problems:
            self.log.emit(
                "slow_update",
                {"skipped": True, "reason": "format", "problems": [p.message for p in problems]},
            )
            return
        self.log.emit(
            "slow_update",
            {"skipped": False, "guidance": guidance, "gated": self.t.slow_update_gate},
        )
        decision = self.decide(
            "slow_update", epoch, None, candidate, [], [], before, gated=self.t.slow_update_gate
        )
        self.progress(f"epoch {epoch}/{self.t.epochs} slow update: {decision}")

    def meta_update(self, epoch: int) -> None:
        accepted = [e for d, es in self.epoch_decisions if d != "rejected" for e in es]
        rejected = [e for d, es in self.epoch_decisions if d == "rejected" for e in es]
        messages = prompts.render(
            "meta_update",
            max_lines="20",
            previous_notes=self.meta or "(none yet)",
            accepted=accepted,
            rejected=rejected,
        )
        payload, _, error = ask_json(self.client, messages, "notes", None)
        if payload is not None:
            self.meta = str(payload.get("notes", "")).strip()
        self.log.emit("meta_update", {"notes": self.meta, "error": error})
        self.epoch_decisions = []

    def finish(self) -> RunSummary:
        self.log.step = None
        s = self.summary
        s.baseline_val = self.mean_of(self.baseline)
        s.best_val = self.current_val
        s.best_commit = self.head
        if self.head != self.base_commit:
            self.repo.tag(f"{self.run_id}/best", self.head)
        if self.test:
            self.phase = "the test evaluation"
            s.baseline_test = self.mean_of(self.evaluator.run(self.base_skill, self.test, "test"))
            s.test = self.mean_of(self.evaluator.run(self.skill, self.test, "test"))
        totals = self.client.totals()
        s.calls, s.fresh_calls, s.tokens = totals.replies, totals.fresh, totals.tokens
        s.cost_usd, s.unpriced_calls = totals.cost_usd, totals.unpriced
        s.calls_saved_by_early_stop = self.saved_calls
        s.calls_by_role = {role: st.replies for role, st in self.client.snapshot().items()}
        s.status = "finished"
        self.log.emit(
            "run.finished",
            {
                "baseline_val": s.baseline_val,
                "best_val": s.best_val,
                "baseline_test": s.baseline_test,
                "test": s.test,
                "best_commit": s.best_commit,
                "steps": s.steps,
                "accepted": s.accepted,
                "rejected": s.rejected,
                "calls": s.calls,
                "tokens": s.tokens,
                "cost_usd": s.cost_usd,
                "unpriced_calls": s.unpriced_calls,
                "calls_saved_by_early_stop": s.calls_saved_by_early_stop,
            },
        )
        return s

    # Setup and bookkeeping -------------------------------------------------------------

    def start(self, unfinished: Event | None) -> None:
        c = self.config
        self.taskset = load_taskset(c.tasks, self.ws.root)
        self.val = list(self.taskset.val)
        self.test = list(self.taskset.test)
        self.train_items = list(self.taskset.train)
        if not self.val or not self.train_items:
            raise TaskSetError(
                "Training needs train and val items "
                f"(found {len(self.train_items)} train, {len(self.val)} val).",
                hint="Point [tasks] in skillvc.toml at task files with both splits.",
            )
        self.repo.ensure_identity()
        # We hold the writer lock: temp files beside the skill are leftovers of a killed write.
        self.repo.remove_stale_temp_files(self.relpath)
        if unfinished is not None:
            self.run_id = str(unfinished.run_id)
            self.log = RunLog(self.store, self.run_id)
            commits.reconcile_pending(self.repo, self.log, self.relpath)
        if c.train.branch and self.repo.current_branch() != c.train.branch:
            self.repo.switch_branch(c.train.branch)
        self.repo.ensure_clean(self.relpath)
        self.ws_skill_file = self.ws.root / self.relpath
        if unfinished is None:
            self.ws.require_skill()
            base_commit = self.repo.head_sha()
            if base_commit is None:
                raise ConfigError(
                    "The repository has no commit yet.", hint="Commit the skill file first."
                )
            raw = self.repo.read_file(self.relpath, base_commit)
            identity = _run_identity(c, base_commit, sha256_hex(raw), self.taskset)
            digest = content_id(identity, 8)
            ordinal = len(
                self.store.query(
                    "SELECT 1 FROM events WHERE type = 'run.started' AND run_id LIKE ?",
                    [f"run-{digest}%"],
                )
            )
            self.run_id = f"run-{digest}" + (f".{ordinal + 1}" if ordinal else "")
            self.log = RunLog(self.store, self.run_id)
        self.resumed = unfinished is not None
        self.summary = RunSummary(run_id=self.run_id, status="running", resumed=self.resumed)
        backends = {role: get_backend(getattr(c, role)) for role in ("target", "optimizer")}
        backends["judge"] = backends["optimizer"]
        replay_failures = self.failures_to_replay() if unfinished is not None else {}
        if c.train.budget_usd is not None:
            for role in ("target", "optimizer"):
                model = getattr(c, role).model
                if price_for(model, c.prices) is None:
                    raise ConfigError(
                        f"--budget-usd needs a price for {model}, and it has none.",
                        hint=f'Add [prices."{model}"] input = ... output = ... (USD per 1M '
                        "tokens) to skillvc.toml.",
                    )
        self.client = ModelClient(
            self.store,
            backends,
            {"target": c.target, "optimizer": c.optimizer, "judge": c.optimizer},
            prices=c.prices,
            run_id=self.run_id,
            replay_failures=replay_failures,
            secrets=secret_values(c),
        )
        self.scorer = get_scorer(c.tasks.scorer, c.tasks.scorer_options, judge=self.judge)
        if unfinished is None:
            started = self.log.emit(
                "run.started",
                {
                    "config": c.to_dict(),
                    "base_commit": base_commit,
                    "skill": self.store.put_blob(raw.decode("utf-8")),
                    "dataset": {
                        "hash": self.taskset.hash,
                        "counts": self.taskset.counts(),
                        "overlaps": list(self.taskset.overlaps),
                    },
                    "templates": prompts.template_hashes(),
                    "models": {"target": c.target.model, "optimizer": c.optimizer.model},
                    "branch": self.repo.current_branch(),
                },
            )
        else:
            started = self.log.emit("run.started", unfinished.payload)
            self.log.note("run.resumed", {"budget_usd": c.train.budget_usd})
        self.base_commit = started.payload["base_commit"]
        self.base_skill = self.store.get_blob(started.payload["skill"])
        self.doc = SkillDocument.parse(self.base_skill.encode("utf-8"))
        self.skill = self.base_skill
        self.head = self.base_commit
        self.buffer: list[dict[str, Any]] = []
        self.meta = ""
        self.epoch_decisions: list[tuple[str, list[dict[str, Any]]]] = []
        self.step = 0
        self.saved_calls = 0
        self.total_steps = self.t.epochs * math.ceil(len(self.train_items) / self.t.batch_size)
        rng = random.Random(f"{self.t.seed}:slow-update")
        self.slow_items = rng.sample(
            self.train_items, min(self.t.batch_size, len(self.train_items))
        )
        self.current_val: float | None = None
        self.progress(
            f"run {self.run_id}: {'resuming' if self.resumed else 'starting'} "
            f"({self.total_steps} steps over {self.t.epochs} epochs)"
        )

    def failures_to_replay(self) -> dict[str, str]:
        """Failed calls the interrupted run went on past: a replay must fail them again.

        A failure logged before the run's last logged step event was already part of the run's
        history (its rollout or reflection was logged as failed), so answering it now would make
        the replay diverge. Failures after that point were never acted on and are retried.
        """
        rows = self.store.query(
            "SELECT json_extract(e.payload, '$.cache_key') AS key, "
            "json_extract(e.payload, '$.error') AS error FROM events e "
            "WHERE e.type = 'model.error' AND e.run_id = ? AND e.id < "
            "(SELECT MAX(id) FROM events WHERE run_id = ? AND seq IS NOT NULL) "
            "AND NOT EXISTS (SELECT 1 FROM events c WHERE c.type = 'model.call' "
            "AND c.key = json_extract(e.payload, '$.cache_key'))",
            [self.run_id, self.run_id],
        )
        return {r["key"]: r["error"] for r in rows}

    def batches(self, epoch: int) -> list[list[TaskItem]]:
        order = list(self.train_items)
        random.Random(f"{self.t.seed}:{epoch}").shuffle(order)
        size = self.t.batch_size
        return [order[i : i + size] for i in range(0, len(order), size)]

    def record(self, split: str, rollouts: Sequence[Rollout]) -> None:
        """Log fresh rollouts, after checking their failure rate.

        The check comes first so a run that stops for failures has not logged the failed
        rollouts: on resume they are retried rather than replayed.
        """
        self.check_failures(rollouts)
        for r in rollouts:
            self.log.emit(
                "rollout",
                {
                    "split": split,
                    "item": r.item_id,
                    "skill": r.skill,
                    "output": self.store.put_blob(r.output) if r.output is not None else None,
                    "hard": r.hard,
                    "soft": r.soft,
                    "error": r.error,
                    "call": r.call_key,
                },
            )

    def judge(self, system: str, user: str) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return self.client.call("judge", messages).text

    def mean_of(self, rollouts: Sequence[Rollout]) -> float | None:
        return mean([r.value(self.t.gate_metric) for r in rollouts if r.ok])

    def check_failures(self, rollouts: Sequence[Rollout]) -> None:
        errors = sum(1 for r in rollouts if not r.ok)
        if rollouts and errors / len(rollouts) > self.t.max_failure_rate:
            message = (
                f"{errors} of {len(rollouts)} target calls failed in {self.phase} "
                f"(last error: {(self.client.last_error or 'unknown').rstrip('.')})."
            )
            self.log.note("run.stopped", {"reason": "failures", "message": message})
            raise RunFailed(message)

    def check_budget(self) -> None:
        budget = self.t.budget_usd
        if budget is None:
            return
        spent = self.client.totals().cost_usd
        if spent >= budget:
            self.log.note(
                "run.stopped",
                {"reason": "budget", "cost_usd": spent, "budget_usd": budget, "step": self.step},
            )
            raise BudgetExceeded(
                f"Run {self.run_id} stopped after step {self.step}: it has cost "
                f"${spent:.4f} of its ${budget:.4f} budget."
            )

    def usage_since(self, before: Mapping[str, Any]) -> dict[str, Any]:
        now = self.client.snapshot()
        calls, tokens, cost, unknown = {}, 0, 0.0, False
        for role, s in now.items():
            b = before.get(role)
            n = s.replies - (b.replies if b else 0)
            if n:
                calls[role] = n
            tokens += s.tokens - (b.tokens if b else 0)
            cost += s.cost_usd - (b.cost_usd if b else 0.0)
            unknown |= s.unpriced > (b.unpriced if b else 0)
        return {"calls": calls, "tokens": tokens, "cost_usd": None if unknown else cost}

    def report(
        self, epoch: int, lr: int, edits: str, verdict: str, before: Mapping[str, Any]
    ) -> None:
        usage = self.usage_since(before)
        cost = "price unknown" if usage["cost_usd"] is None else f"${usage['cost_usd']:.4f}"
        if verdict == "no candidate":
            verdict = f"val {self.current_val:.3f}, no candidate"
        self.progress(
            f"epoch {epoch}/{self.t.epochs} step {self.step}/{self.total_steps} lr {lr} | "
            f"{edits} | {verdict} | calls {sum(usage['calls'].values())} "
            f"tokens {usage['tokens']:,} {cost} | {time.monotonic() - self.started:.1f}s"
        )
