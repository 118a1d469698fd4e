"""``skillvc train``: the SkillOpt loop, event-sourced and git-native.

The spine is ``Trainer.train``: for each epoch, for each batch, the stages run in data-flow
order (rollout -> reflect -> aggregate -> select -> apply -> gate -> commit or reject), then the
epoch-end slow update and meta-skill update; finally the best skill is scored on test.

Invariants:
- Deterministic: for the same recorded answers the loop emits the same events in the same
  order. Resume re-runs it from the top with every recorded call answered from the log, so an
  interrupted run ends exactly like an uninterrupted one and pays no model call twice.
- The skill file (or a skill package's files) changes only through ``commits.commit`` (one
  commit per accepted candidate), never half-written; the run refuses to start when the user
  has uncommitted changes to it.
- A skill package is trained as one unit: its version is its bundle (``skillvc.packages``), an
  edit names its file, and a candidate is one commit touching only files of the package. A
  single-file skill goes through exactly the code paths and events it always did.
- An unfinished run is resumed with the settings it started with; only settings that cannot
  change its results (budget, workers, ...: ``training/resume.py``) may change.
- Calls may be sent ahead of the stage that uses them (``training/prefetch.py``: the next
  rollouts while a gate runs, the baseline test beside the baseline val, ...), but each stage
  still asks for its calls itself, in order, and gets them from the log: prefetching and
  speculation change when requests go out, never an event of the run's sequence.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from skillvc.core.config import Config, override, validate
from skillvc.core.errors import AuthenticationFailed, BudgetExceeded, ConfigError, RunFailed
from skillvc.core.events import Event
from skillvc.core.hashing import sha256_hex
from skillvc.core.pricing import cost_usd
from skillvc.core.progress import Progress
from skillvc.core.store import EventStore
from skillvc.models import prompts
from skillvc.models.calls import CallFailed, RoleStats
from skillvc.models.executors import make_executor
from skillvc.models.usage import run_usage
from skillvc.packages import SKILL_FILE, SkillPackage, skill_file_text
from skillvc.packages.edits import PackageApplyResult
from skillvc.packages.prompt import readable
from skillvc.packages.render import chat_rendering, config_view
from skillvc.secrets import scrub
from skillvc.skill.edits import ApplyResult, Edit, Unmatched
from skillvc.skill.formats import new_problems
from skillvc.skill.preflight import estimate_tokens
from skillvc.skill.skilldoc import SkillDocument
from skillvc.tasks.taskset import TaskItem
from skillvc.training import attribution, commits, significance
from skillvc.training.attribution import Attribution
from skillvc.training.commits import Honesty
from skillvc.training.evaluate import (
    Evaluator,
    GateResult,
    Rollout,
    focus_items,
    gate,
    mean,
    resample_gate,
)
from skillvc.training.matrix_gate import matrix_gate, matrix_projection
from skillvc.training.optimize import (
    Merged,
    Proposal,
    Reflection,
    aggregate,
    apply_selected,
    apply_selected_package,
    ask_json,
    minibatches,
    prompt_limit,
    reflect,
    select,
)
from skillvc.training.prefetch import Batch, Prefetcher
from skillvc.training.projection import ProjectionTooHigh, project, refuse_unbudgeted
from skillvc.training.resume import (
    NEW,
    REFUSE,
    RESTART,
    RESUME,
    abandon,
    plan_resume,
    resumed_config,
)
from skillvc.training.schedule import learning_rate
from skillvc.training.setup import RunContext, find_unfinished, finished_here, prepare_run
from skillvc.training.state import Edits, RunState
from skillvc.workspace.workspace import Workspace

SLOW_UPDATE_REGION = "slow-update"
Usage = Mapping[str, RoleStats]


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
    # Input tokens the providers read from their prompt cache, and their share of all input.
    cached_tokens: int = 0
    cache_hit_ratio: float | None = None
    calls_saved_by_early_stop: int = 0
    calls_by_role: dict[str, int] = field(default_factory=dict)
    # Steps and slow updates are counted apart: accepted/rejected above are step candidates.
    slow_updates_accepted: int = 0
    slow_updates_rejected: int = 0
    # Calls that reached a model for rollouts started while a gate ran, which the gate's
    # acceptance made useless (speculation on rejection; not part of ``calls``).
    speculation_wasted_calls: int = 0
    # Each accepted (or forced) candidate and how sure its gain is: label, p-value, verdict,
    # edits kept and dropped by attribution.
    gains: list[dict[str, Any]] = field(default_factory=list)
    # Reflections whose optimizer answered, and those whose answer gave usable edits: a run
    # with answers and none usable failed to train (the CLI exits non-zero).
    reflections: int = 0
    reflections_usable: int = 0

    @property
    def optimizer_unusable(self) -> bool:
        return self.reflections > 0 and self.reflections_usable == 0


def train(
    ws: Workspace,
    *,
    new: bool = False,
    resume: bool = False,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    budget_usd: float | None = None,
    progress: Progress | Callable[[str], None] | None = None,
) -> RunSummary:
    """Train the workspace's skill (resuming its unfinished run unless ``new``).

    An unfinished run whose settings changed since it started is resumed only with
    ``resume``; otherwise it restarts when no step completed, else the change is refused
    (``skillvc.training.resume``).

    ``progress`` gets the stages and step summaries (a plain callable: lines only).
    """
    if not isinstance(progress, Progress):
        progress = Progress.lines(progress)
    given = {
        section: {k: v for k, v in values.items() if v is not None}
        for section, values in (overrides or {}).items()
    }
    given = {section: values for section, values in given.items() if values}
    with ws.store(create=True) as store, store.writer_lock():
        # Many skills: only this skill's runs resume (another skill's run is not ours to finish).
        many = ws.config.skill.path if ws.config.skill_name else None
        unfinished = find_unfinished(store, many)
        config = ws.config
        for section, values in given.items():
            config = override(config, section, **values)
        if budget_usd is not None:
            config = dataclasses.replace(
                config, train=dataclasses.replace(config.train, budget_usd=budget_usd)
            )
            validate(config)  # a zero, negative or NaN budget is a usage error, not a stop
        plan = plan_resume(ws, store, config, unfinished, new=new, resume=resume)
        if resume and unfinished is None:
            raise ConfigError(
                "There is no unfinished run to resume.", hint="Run 'skillvc train' to start one."
            )
        if plan.action == REFUSE:
            raise plan.error()
        if plan.action == RESUME:
            assert unfinished is not None
            config = resumed_config(ws, unfinished, config)
        else:
            unfinished = None
            if plan.action == RESTART:
                progress.note(
                    f"Run {plan.run_id} stopped before its first step; starting over with "
                    f"the new settings ({plan.sentence()})."
                )
            done = None if new or plan.run_id else finished_here(ws, store, config)
            if done is not None:
                return up_to_date(done)
        ctx = prepare_run(ws, store, config, unfinished)
        if plan.action in (NEW, RESTART) and plan.unfinished is not None:
            reason = "settings changed" if plan.action == RESTART else "--new"
            abandon(store, plan, reason, ctx.run_id)
        trainer = Trainer(ws, store, config, ctx, progress)
        try:
            return trainer.train()
        except AuthenticationFailed as exc:
            ctx.log.note("run.stopped", {"reason": "authentication", "message": exc.message})
            raise
        except CallFailed as exc:
            # A slow or meta update whose optimizer call failed: the run stops (and resumes
            # later), recorded as stopped like any other failure, never as an empty update.
            ctx.log.note("run.stopped", {"reason": "failures", "message": exc.message})
            raise


UP_TO_DATE = "up-to-date"


def up_to_date(finished: Event) -> RunSummary:
    """The summary of a finished run that training again would only repeat (no call made)."""
    known = {f.name for f in dataclasses.fields(RunSummary)}
    recorded = {k: v for k, v in finished.payload.items() if k in known}
    return RunSummary(run_id=str(finished.run_id), status=UP_TO_DATE, resumed=False, **recorded)


class Trainer:
    def __init__(
        self,
        ws: Workspace,
        store: EventStore,
        config: Config,
        ctx: RunContext,
        progress: Progress,
    ) -> None:
        self.store, self.config, self.ctx, self.progress = store, config, ctx, progress
        self.t = config.train
        slots = [i.slots for i in ctx.client.servers.values() if i.slots]
        if slots and min(slots) < self.t.workers:
            # A local server runs ``slots`` requests at once and queues the rest, where they
            # would wait out their timeouts: as many workers as it has slots.
            self.t = dataclasses.replace(self.t, workers=min(slots))
        self.repo = ws.repo
        self.relpath = config.skill_relpath
        # Many skills: tags and rejected refs are under the skill's name (skillvc/<skill>/<run>/).
        self.refs = f"{config.skill_name}/" if config.skill_name else ""
        self.log, self.client = ctx.log, ctx.client
        progress.watch(self.client.totals)
        self.started = time.monotonic()
        self.phase = "setup"  # named in the sentence that stops a run for failed calls
        self.total_steps = self.t.epochs * math.ceil(len(ctx.train) / self.t.batch_size)
        sample = random.Random(f"{self.t.seed}:slow-update")
        self.slow_items = sample.sample(ctx.train, min(self.t.batch_size, len(ctx.train)))
        # A skill package: the seed is the bundle run.started recorded; the target gets what
        # its view renders of each version (skillvc.packages.render). None for a single file.
        root = config.package_dir
        package = None if root is None else SkillPackage.from_bundle(root, ctx.base_skill)
        self.state = RunState(
            doc=SkillDocument.parse(skill_file_text(ctx.base_skill).encode("utf-8")),
            head=ctx.base_commit,
            package=package,
        )
        self.render = None if root is None else config_view(config, root, ctx.carried)
        self.rendering = None if package is None else chat_rendering(config, package)
        # (items, split) the loop runs next with the current skill if the gate in progress
        # rejects: what a gate speculates on.
        self.upcoming: list[tuple[Sequence[TaskItem], str]] = []
        self.epoch_start = ""  # the skill the current epoch started with
        self.branch_ref = commits.branch_ref(self.repo)  # a run never switches branches
        # The gate's confidence: as set, else 0.8 with attribution and 0 (any strict gain,
        # the paper's gate) without.
        self.confidence = significance.effective_confidence(self.t)
        self.gains: list[dict[str, Any]] = []  # see RunSummary.gains
        # The alpha of each look of a test (more rounds of val only on a stochastic target).
        stochastic = config.target.temperature > 0 and self.t.samples == 1
        tests = self.t.attribution and self.t.gate_metric == "hard"
        rounds = self.t.gate_rounds if stochastic and tests else 1
        self.alphas = significance.look_alphas(significance.alpha_of(self.confidence), rounds)
        # The round of val draws that stands for the current skill in its gates: the seed's
        # first; an accepted candidate's on a stochastic target, a fresh one (its first-round
        # draws got it accepted: they are the lucky ones, and would make every later
        # candidate look worse than it is).
        self.current_round = 0

    # The spine ---------------------------------------------------------------------------

    def train(self) -> RunSummary:
        self.progress.note(
            f"run {self.ctx.run_id}: {'resuming' if self.ctx.resumed else 'starting'} "
            f"({_n(self.total_steps, 'step')} over {_n(self.t.epochs, 'epoch')})"
        )
        with (
            ThreadPoolExecutor(max_workers=self.t.workers) as self.pool,
            Prefetcher(self.client, self.t.workers, self.t.samples, self.render) as self.ahead,
        ):
            self.evaluator = Evaluator(
                self.client,
                self.ctx.scorer,
                self.pool,
                judge=self.ctx.judge,
                on_rollouts=self.record,
                scorer_options=self.config.tasks.scorer_options,
                samples=self.t.samples,
                progress=self.progress,
                executor=make_executor(self.t),
                render=self.render,
            )
            if self.rendering is not None:  # what the chat target is sent, and what was cut
                self.log.note("package.rendered", self.rendering.to_dict())
                if self.rendering.cut:
                    self.progress.note(cut_note(self.rendering.cut))
            self.phase = "the baseline evaluation"
            if self.cannot_be_refused():
                self.prefetch_start()  # in the baseline's wave
            with self.stage("baseline on val", [(self.state.skill, self.ctx.val, "val")]):
                self.baseline = self.evaluator.run(self.state.skill, self.ctx.val, "val")
            self.state.current_val = self.mean_of(self.baseline)
            self.log.emit("baseline", {"val": self.state.current_val, "n": len(self.ctx.val)})
            self.project()
            self.prefetch_start()  # sent already, unless the projection could stop the run
            for epoch in range(1, self.t.epochs + 1):
                epoch_start_skill = self.epoch_start = self.state.skill
                self.prefetch_epoch_start(epoch)
                batches = self.batches(epoch)
                for i, batch in enumerate(batches):
                    self.upcoming = self.after_step(epoch, batches[i + 1 : i + 2])
                    self.train_step(epoch, batch)
                self.end_epoch(epoch, epoch_start_skill)
            return self.finish()

    def train_step(self, epoch: int, batch: Sequence[TaskItem]) -> None:
        """One step, the stages in data-flow order."""
        s = self.state
        s.step += 1
        self.log.step, self.log.epoch = s.step, epoch
        before = self.client.snapshot()
        lr = learning_rate(
            s.step,
            self.total_steps,
            self.t.learning_rate,
            self.t.min_learning_rate,
            self.t.lr_schedule,
        )
        self.log.emit(
            "step.started",
            {"lr": lr, "batch": [it.id for it in batch], "total_steps": self.total_steps},
        )
        self.phase = f"step {s.step}"
        with self.stage(f"step {s.step}/{self.total_steps} rollouts", [(s.skill, batch, "train")]):
            rollouts = self.rollouts(s.skill, batch, "train")  # forward pass
        reflection = self.reflect(batch, rollouts, lr)  # backward pass
        merged = self.aggregate(reflection.proposals)
        chosen = self.select(merged, lr)
        result = self.apply(chosen)
        counts = (
            f"edits {len(reflection.proposals)} proposed, {len(chosen)} selected, "
            f"{len(result.unmatched)} unmatched"
        )
        if result.changed:
            verdict = self.decide(
                "step",
                epoch,
                lr,
                result.document,
                [e.to_dict() for e in result.applied],
                [_unmatched(u) for u in result.unmatched],
                before,
                package=result.package if isinstance(result, PackageApplyResult) else None,
                bundle=result.applied,
            )
        else:
            reason = "no edit could be applied" if chosen else "no edits proposed"
            self.log.emit("step.empty", {"reason": reason})
            verdict = f"val {_fmt(self.state.current_val)}, no candidate"
        self.report(epoch, lr, counts, verdict, before)
        self.check_budget()

    def reflect(
        self, batch: Sequence[TaskItem], rollouts: Sequence[Rollout], lr: int
    ) -> Reflection:
        s = self.state
        n = len(minibatches(batch, rollouts, self.t.gate_metric, self.t.minibatch_size))
        name = f"step {s.step}/{self.total_steps} reflection"
        with self.progress.stage(name, n, unit="minibatches"):
            reflection = reflect(
                self.client,
                self.pool,
                # SKILL.md's text: a package's other files go in their own section.
                skill=skill_file_text(s.skill),
                items=batch,
                rollouts=rollouts,
                metric=self.t.gate_metric,
                minibatch_size=self.t.minibatch_size,
                budget=lr,
                rejected=s.buffer if self.t.buffer else [],
                meta=s.meta if self.t.meta_skill else "",
                step=s.step,
                describe=self.t.train_description,
                done=self.progress.advance,
                package=s.package,
                package_chars=self.config.skill.optimizer_chars,
                carried=self.ctx.carried,
            )
        # Before any reflection event: a stopped run then retries these calls on resume.
        self.check_failures(reflection.call_failures, reflection.minibatches, "optimizer")
        with self.store.transaction():  # the stage's events in one write
            self.record_reflection(reflection)
        return reflection

    def record_reflection(self, reflection: Reflection) -> None:
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
        for refused in reflection.refused:
            self.log.emit("edit.refused", refused)
        for failure in reflection.failures:
            self.log.emit("reflection.failed", failure)
        self.state.reflections += reflection.minibatches - reflection.call_failures
        self.state.reflections_usable += reflection.usable

    def aggregate(self, proposals: Sequence[Proposal]) -> list[Merged]:
        merged = aggregate(proposals)
        self.log.emit(
            "edits.merged",
            {
                "edits": [
                    {"id": m.edit.id, "support": m.support, "merged_from": list(m.merged_from)}
                    for m in merged
                ]
            },
        )
        return merged

    def select(self, merged: Sequence[Merged], lr: int) -> list[Merged]:
        chosen, dropped = select(merged, lr)
        self.log.emit(
            "edits.selected",
            {
                "lr": lr,
                "selected": [m.edit.id for m in chosen],
                "dropped": [m.edit.id for m in dropped],
            },
        )
        return chosen

    def apply(self, chosen: Sequence[Merged]) -> ApplyResult | PackageApplyResult:
        edits = [m.edit for m in chosen]
        max_bytes, describe = self.config.skill.max_bytes, self.t.train_description
        result: ApplyResult | PackageApplyResult
        if self.state.package is None:
            result = apply_selected(
                self.state.doc, edits, self.relpath, max_bytes=max_bytes, describe=describe
            )
        else:
            result = apply_selected_package(
                self.state.package, edits, max_bytes=max_bytes, describe=describe
            )
        for miss in result.unmatched:
            edit = miss.edit.to_dict()
            if miss.reason == "secret":  # recorded as refused, with what it carried withheld
                edit = {
                    k: scrub(v) if isinstance(v, str) and k != "id" else v for k, v in edit.items()
                }
            self.log.emit(
                "edit.unmatched",
                {"edit": edit, "reason": miss.reason, "detail": miss.detail},
            )
        return result

    def end_epoch(self, epoch: int, epoch_start_skill: str) -> None:
        self.log.step, self.log.epoch = None, epoch
        # One wave for both slow-update evaluations and the meta update's call (which reads
        # only the epoch's step decisions, never the slow update's).
        if self.t.slow_update:
            self.prefetch(epoch_start_skill, self.slow_items, "train")
            self.prefetch(self.state.skill, self.slow_items, "train")
        if self.t.meta_skill:
            messages = self.meta_messages()
            self.ahead.call("meta", lambda c: ask_json(c, messages, "notes", None))
        self.upcoming = self.after_epoch(epoch)
        if self.t.slow_update:
            self.slow_update(epoch, epoch_start_skill)
        if self.t.meta_skill:
            self.meta_update()
        self.state.new_epoch()
        name = f"{self.refs}{self.ctx.run_id}/epoch-{epoch}"
        self.repo.tag(name, self.state.head)
        self.log.emit(
            "checkpoint",
            {"tag": f"skillvc/{name}", "sha": self.state.head, "val": self.state.current_val},
        )

    # Stages ------------------------------------------------------------------------------

    def decide(
        self,
        kind: str,
        epoch: int,
        lr: int | None,
        candidate: SkillDocument,
        edits: Edits,
        unmatched: Edits,
        before: Usage,
        *,
        gated: bool = True,
        package: SkillPackage | None = None,
        bundle: Sequence[Edit] = (),
    ) -> str:
        """Gate a candidate, then commit it (accepted) or keep it under a rejected ref.

        ``candidate`` is the skill file; for a skill package, ``package`` is the whole
        candidate (its SKILL.md is ``candidate``). ``bundle``: the applied edits, which
        attribution (``[train] attribution``) takes apart when the candidate passes."""
        s = self.state
        credit: Attribution | None = None
        if s.package is not None and package is None:  # a slow update: only SKILL.md changed
            package = s.package.with_file(SKILL_FILE, candidate.render())
        candidate_text, files = self.files_of(candidate, package)
        self.phase = (
            f"the gate of step {s.step}"
            if kind == "step"
            else f"the gate of the epoch {epoch} slow update"
        )
        result = None
        speculation: list[Batch | None] = []
        if gated and self.t.speculate:
            # Most gates reject: start what comes next with the current skill meanwhile.
            speculation = [
                self.prefetch(s.skill, items, split, speculative=True)
                for items, split in self.upcoming
            ]
        if gated:
            name = f"step {s.step}/{self.total_steps}" if kind == "step" else f"epoch {epoch}"
            with self.stage(f"{name} gate", [(candidate_text, self.ctx.val, "val")]):
                result = gate(
                    self.evaluator,
                    s.skill,
                    candidate_text,
                    self.ctx.val,
                    metric=self.t.gate_metric,
                    early_stop=self.t.early_stop,
                    chunk=self.t.workers,
                    confidence=1 - self.alphas[0] if self.t.attribution else self.confidence,
                    sequential=self.t.attribution and len(self.alphas) == 1,
                    current_round=self.current_round,
                )
                val, alphas = self.ctx.val, self.alphas
                result = resample_gate(
                    self.evaluator, s.skill, candidate_text, val, result, alphas=alphas
                )
            s.calls_saved += result.calls_saved * self.t.samples  # items -> calls
            if result.decision == "accepted" and self.t.attribution and len(bundle) > 1:
                credit = self.attribute(name, bundle, candidate_text, result)
                if credit.dropped:
                    candidate, package = credit.document, credit.package
                    candidate_text, files = self.files_of(candidate, package)
                    edits = [e.to_dict() for e in credit.kept]
                    result = credit.result
        # [train] gate_targets = "all": the other target models may veto an accepted candidate.
        matrix = None
        if result is not None and result.decision == "accepted":
            matrix = matrix_gate(self, s.skill, candidate_text)
            if matrix is not None and matrix["vetoed"]:
                result = dataclasses.replace(result, decision="rejected")
        decision = result.decision if result else "forced"
        gate_event = self.log.emit(
            "gate",
            {
                "kind": kind,
                "lr": lr,
                "edits": edits,
                "unmatched": unmatched,
                "current": self.store.put_blob(s.skill),
                "candidate": self.store.put_blob(candidate_text),
                **(result.payload() if result else self.ungated_payload()),
                **({"attribution": credit.payload()} if credit is not None else {}),
                **({"alpha": self.alphas[-1]} if self.t.attribution and result else {}),
                **({"targets": matrix} if matrix is not None else {}),
                # A skill package: the files the candidate changes (repository paths) and, for
                # the chat target, which linked files it was sent and which were cut.
                **({"files": sorted(files)} if package is not None else {}),
                **(
                    {"rendered": self.render(candidate_text).to_dict()}
                    if self.render is not None and self.rendering is not None
                    else {}
                ),
            },
        )
        honesty = self.honest(result, credit)
        sha = commits.commit(
            self.repo,
            self.log,
            gate_id=gate_event.id,
            files=files,
            version=candidate_text,
            text=commits.message(self.evidence(kind, epoch, lr, edits, result, before), honesty),
            accepted=decision != "rejected",
            parent=s.head,
            step_label=str(s.step) if kind == "step" else f"epoch-{epoch}-slow-update",
            skill=self.config.skill_name,
            fresh=not self.ctx.resumed,
            branch=self.branch_ref,
            significance_trailer=honesty.trailer() if honesty is not None else None,
        )
        if credit is not None and credit.dropped:
            s.drop(credit.dropped_edits(), self.t.rejected_buffer_size, len(bundle))
        if decision == "rejected":
            s.reject(
                edits,
                self.t.rejected_buffer_size,
                slow=kind != "step",
                evidence=rejection_evidence(result, self.alphas) if self.t.attribution else None,
            )
        else:
            if speculation and kind == "step" and s.skill == self.epoch_start:
                # The epoch's slow update still runs the epoch-start skill (this one) on the
                # slow items: rollouts sent ahead for them are used, not wasted.
                speculation = [
                    b
                    for b, (items, _) in zip(speculation, self.upcoming, strict=True)
                    if items is not self.slow_items
                ]
            self.waste(speculation, gate_event)
            alpha = self.alphas[-1] if self.t.attribution else significance.REVIEW_ALPHA
            p_value = result.p_value if result else None
            self.gains.append(
                {
                    "step": s.step if kind == "step" else f"epoch {epoch} slow update",
                    "p_value": p_value,
                    "alpha": alpha,
                    "verdict": "ungated"
                    if result is None
                    else significance.verdict(p_value, alpha),
                    "kept": len(edits),
                    "dropped": len(credit.dropped) if credit is not None else 0,
                }
            )
            s.accept(candidate, sha, edits, slow=kind != "step", package=package)
            # Free after a gate (the candidate was evaluated in full); after a forced update it
            # is the only way the checkpoint and best_val describe the skill they name.
            if result is not None and len(self.alphas) > 1:
                self.current_round = len(self.alphas)  # fresh draws: see __init__
            with self.stage(
                f"epoch {epoch} val of the forced update", [(s.skill, self.ctx.val, "val")]
            ):
                s.current_val = self.mean_of(
                    self.evaluator.run(s.skill, self.ctx.val, "val", self.current_round)
                )
        if result is None:
            return f"forced (ungated), val {_fmt(s.current_val)}"
        if honesty is not None:
            return f"{self.verdict_line(result)} ({honesty.summary()})"
        return self.verdict_line(result)

    def verdict_line(self, result: GateResult) -> str:
        if result.early_stopped:
            # The mean over the items evaluated (those the current skill fails come first) says
            # little; the best mean the candidate could still have reached is what decided.
            after = (
                f"at most {_fmt(result.after_bound)} "
                f"(stopped early after {result.n_evaluated} of {result.n})"
            )
        else:
            after = _fmt(result.after)
        return f"val {_fmt(result.before)} -> {after} {result.decision}"

    def files_of(
        self, candidate: SkillDocument, package: SkillPackage | None
    ) -> tuple[str, dict[str, bytes]]:
        """A candidate's identity text and the repository files its commit writes."""
        if package is None:
            return candidate.render().decode("utf-8"), {self.relpath: candidate.render()}
        assert self.state.package is not None
        files = {
            package.repo_path(name): raw
            for name, raw in package.files.items()
            if self.state.package.files.get(name) != raw
        }
        return package.bundle(), files

    def attribute(
        self, name: str, bundle: Sequence[Edit], candidate_text: str, result: GateResult
    ) -> Attribution:
        """Take apart a bundle that passed the gate (``training/attribution.py``): drop the
        edits that do not earn their place, then gate what is left against the current skill."""
        s, t = self.state, self.t
        alpha = significance.alpha_of(self.confidence)
        credit = Attribution(list(bundle), list(bundle), [], alpha, result)
        text = candidate_text
        document: SkillDocument | None = None
        package: SkillPackage | None = None
        focus = None
        if len(self.alphas) > 1:  # a stochastic target: fresh draws on the flipped items
            focus = focus_items(self.ctx.val, [*result.gained, *result.lost])
        total = len(self.ctx.val) * len(bundle) * t.samples
        with self.progress.stage(f"{name} attribution", total):
            for edit in reversed(bundle):  # the least supported edit first
                if len(credit.kept) == 1:
                    break  # the last edit's test is the gate of the pruned candidate
                rest = [e for e in credit.kept if e is not edit]
                applied = self.apply_quietly(rest)
                if len(applied.applied) != len(rest):
                    continue  # another kept edit needs this one (an anchor it wrote): keep it
                doc = applied.document
                pkg = applied.package if isinstance(applied, PackageApplyResult) else None
                without, _ = self.files_of(doc, pkg)
                test = attribution.compare(
                    self.evaluator,
                    text,
                    without,
                    self.ctx.val,
                    metric=t.gate_metric,
                    alphas=self.alphas,
                    chunk=t.workers,
                    early_stop=t.early_stop,
                    edit=edit.to_dict(),
                    focus=focus,
                )
                credit.tests.append(test)
                if test.outcome != attribution.KEPT:
                    credit.kept, text, document, package = rest, without, doc, pkg
        if credit.dropped:
            assert document is not None
            with self.stage(f"{name} gate of the kept edits", [(text, self.ctx.val, "val")]):
                credit.result = gate(
                    self.evaluator,
                    s.skill,
                    text,
                    self.ctx.val,
                    metric=t.gate_metric,
                    early_stop=t.early_stop,
                    chunk=t.workers,
                    confidence=1 - self.alphas[0],
                    sequential=len(self.alphas) == 1,
                    current_round=self.current_round,
                )
                credit.result = resample_gate(
                    self.evaluator, s.skill, text, self.ctx.val, credit.result, alphas=self.alphas
                )
            s.calls_saved += credit.result.calls_saved * t.samples
            credit.text, credit.document, credit.package = text, document, package
        return credit

    def apply_quietly(self, edits: Sequence[Edit]) -> ApplyResult | PackageApplyResult:
        """``apply`` without its events: attribution's versions of the candidate."""
        max_bytes, describe = self.config.skill.max_bytes, self.t.train_description
        if self.state.package is None:
            return apply_selected(
                self.state.doc, edits, self.relpath, max_bytes=max_bytes, describe=describe
            )
        return apply_selected_package(
            self.state.package, edits, max_bytes=max_bytes, describe=describe
        )

    def honest(self, result: GateResult | None, credit: Attribution | None) -> Honesty | None:
        """How sure the decision is, in numbers and words (None: the paper's bundle gate,
        whose messages stay as they were)."""
        if not self.t.attribution or result is None:
            return None
        return Honesty(
            alpha=significance.alpha_of(self.confidence),
            p_value=result.p_value,
            test=result.test,
            decision=result.decision,
            edits=tuple(
                (t.edit, t.outcome, t.up, t.down, t.n, t.p_value)
                for t in (credit.tests if credit is not None else [])
            ),
        )

    def slow_update(self, epoch: int, epoch_start_skill: str) -> None:
        s = self.state
        before = self.client.snapshot()
        self.phase = f"the epoch {epoch} slow update"
        metric = self.t.gate_metric
        runs = [(epoch_start_skill, self.slow_items, "train"), (s.skill, self.slow_items, "train")]
        with self.stage(f"epoch {epoch}/{self.t.epochs} slow update", runs):
            prev = self.rollouts(epoch_start_skill, self.slow_items, "train")
            now = self.rollouts(s.skill, self.slow_items, "train")
        cases = [
            {
                "id": it.id,
                "input": it.input,
                "expected": list(it.targets),
                "before": a.value(metric),
                "after": b.value(metric),
            }
            for it, a, b in zip(self.slow_items, prev, now, strict=True)
            if a.ok and b.ok
        ]
        region = s.doc.region(SLOW_UPDATE_REGION)
        previous = region.content.strip() if region is not None else ""
        try:
            messages = self.optimizer_prompt(
                "slow_update",
                n_cases=str(len(cases)),
                max_lines="12",
                previous_skill=self.shown(epoch_start_skill),
                current_skill=self.shown(s.skill),
                cases=cases,
                previous_guidance=previous or "(none yet)",
            )
        except prompts.PromptTooLong as exc:
            self.log.emit("slow_update", {"skipped": True, "reason": "context", "error": str(exc)})
            self.progress.note(f"epoch {epoch}/{self.t.epochs} slow update: skipped ({exc})")
            return
        payload, _, error = ask_json(self.client, messages, "guidance", None)
        guidance = str(payload.get("guidance", "")).strip() if payload else ""
        if not guidance or guidance == previous:
            reason = error or "no new guidance"
            self.log.emit("slow_update", {"skipped": True, "error": error, "reason": reason})
            self.progress.note(f"epoch {epoch}/{self.t.epochs} slow update: skipped ({reason})")
            return
        candidate = s.doc.with_region(SLOW_UPDATE_REGION, "\n" + guidance + "\n")
        problems = new_problems(
            self.relpath, s.doc, candidate, max_bytes=self.config.skill.max_bytes
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
        verdict = self.decide(
            "slow_update", epoch, None, candidate, [], [], before, gated=self.t.slow_update_gate
        )
        self.progress.note(f"epoch {epoch}/{self.t.epochs} slow update: {verdict}")

    def shown(self, skill: str) -> str:
        """A skill version as an optimizer prompt shows it whole: the skill's text, or a
        package's files one after another (``skillvc.packages.prompt.readable``)."""
        if self.state.package is None:
            return skill
        package = SkillPackage.from_bundle(self.state.package.root, skill)
        return readable(package, self.config.skill.optimizer_chars)

    def meta_messages(self) -> list[dict[str, str]]:
        s = self.state
        values: dict[str, Any] = {
            "max_lines": "20",
            "previous_notes": s.meta or "(none yet)",
            "accepted": s.epoch_accepted,
            "rejected": s.epoch_rejected,
        }
        try:
            return self.optimizer_prompt("meta_update", **values)
        except prompts.PromptTooLong:
            return prompts.render("meta_update", **values)

    def optimizer_prompt(self, name: str, **values: Any) -> list[dict[str, str]]:
        """An optimizer prompt, fitted to a local server's context (``prompts.render``);
        PromptTooLong when it cannot be (the meta update then sends it whole, and a server
        that refuses it stops the run with its reason: a context that small fits no step)."""
        return prompts.render(name, fit=prompt_limit(self.client), **values)

    def meta_update(self) -> None:
        s = self.state
        messages = self.meta_messages()
        self.ahead.wait("meta")  # sent at the epoch end; its answer is now in the log
        payload, _, error = ask_json(self.client, messages, "notes", None)
        if payload is not None:
            s.meta = str(payload.get("notes", "")).strip()
        self.log.emit("meta_update", {"notes": s.meta, "error": error})

    def finish(self) -> RunSummary:
        self.log.step = None
        s, ctx = self.state, self.ctx
        if s.head != ctx.base_commit:
            self.repo.tag(f"{self.refs}{ctx.run_id}/best", s.head)
        baseline_test = test = None
        if ctx.test:
            self.phase = "the test evaluation"
            runs = [(ctx.base_skill, ctx.test, "test"), (s.skill, ctx.test, "test")]
            self.prefetch(s.skill, ctx.test, "test")  # the seed's were sent with the baseline
            with self.stage("final test (seed and best skill)", runs):
                baseline_test = self.mean_of(self.rollouts(ctx.base_skill, ctx.test, "test"))
                test = self.mean_of(self.rollouts(s.skill, ctx.test, "test"))
        totals = self.client.totals()
        self.ahead.close()  # every speculation has ended: its wasted calls are all counted
        # The one definition of a run's calls, tokens and cost, as `runs` and `report` read it.
        usage = run_usage(self.store, ctx.run_id)
        summary = RunSummary(
            run_id=ctx.run_id,
            status="finished",
            resumed=ctx.resumed,
            steps=s.step,
            accepted=s.accepted,
            rejected=s.rejected,
            baseline_val=self.mean_of(self.baseline),
            best_val=s.current_val,
            baseline_test=baseline_test,
            test=test,
            best_commit=s.head,
            calls=totals.replies,
            fresh_calls=usage.calls,
            tokens=usage.tokens,
            cost_usd=usage.cost_usd,
            unpriced_calls=usage.unpriced_calls,
            cached_tokens=usage.cached_tokens,
            cache_hit_ratio=usage.cache_hit_ratio,
            calls_saved_by_early_stop=s.calls_saved,
            calls_by_role={role: st.replies for role, st in sorted(self.client.snapshot().items())},
            slow_updates_accepted=s.slow_accepted,
            slow_updates_rejected=s.slow_rejected,
            speculation_wasted_calls=self.ahead.wasted_calls(),
            gains=self.gains,
            reflections=s.reflections,
            reflections_usable=s.reflections_usable,
        )
        self.log.emit(
            "run.finished",
            {
                key: getattr(summary, key)
                for key in (
                    "baseline_val",
                    "best_val",
                    "baseline_test",
                    "test",
                    "best_commit",
                    "steps",
                    "accepted",
                    "rejected",
                    "calls",
                    "tokens",
                    "cost_usd",
                    "unpriced_calls",
                    "calls_saved_by_early_stop",
                    "slow_updates_accepted",
                    "slow_updates_rejected",
                )
            }
            # Said only when it happened, so other runs' events are as they were.
            | ({"optimizer_unusable": s.reflections} if summary.optimizer_unusable else {}),
        )
        return summary

    # Calls sent ahead (see training/prefetch.py) ----------------------------------------

    def prefetch(
        self, skill: str, items: Sequence[TaskItem], split: str, *, speculative: bool = False
    ) -> Batch | None:
        if self.config.target.mode == "batch" or self.t.executor != "threads":
            # Target calls go out as provider batches (for their price) or as executor tasks
            # (on other machines): sent ahead on the driver's threads they would bypass both.
            return None
        return self.ahead.rollouts(
            skill, items, split, speculative=speculative, known=self.evaluator.memo
        )

    def prefetch_start(self) -> None:
        """Calls the run makes whatever its gates decide: the seed skill on test, the first
        step's rollouts and the first slow update's evaluation of the seed skill."""
        self.prefetch(self.ctx.base_skill, self.ctx.test, "test")
        self.prefetch_epoch_start(1)

    def cannot_be_refused(self) -> bool:
        """True when the projection after the baseline cannot stop the run (it has a budget,
        or its models cost nothing we know of): only then may calls beyond the baseline go
        out beside it."""
        if self.t.budget_usd is not None:
            return True
        big = 10**9
        models = (self.config.target.model, self.config.optimizer.model)
        return all(not cost_usd(m, big, big, self.config.prices) for m in models)

    def prefetch_epoch_start(self, epoch: int) -> None:
        """The epoch's first rollouts and its slow update's evaluation of the epoch-start
        skill: both certain once the epoch has begun."""
        self.prefetch(self.state.skill, self.batches(epoch)[0], "train")
        if self.t.slow_update:
            self.prefetch(self.state.skill, self.slow_items, "train")

    def rollouts(self, skill: str, items: Sequence[TaskItem], split: str) -> list[Rollout]:
        """``evaluator.run`` once the calls sent ahead for ``skill`` have come back."""
        self.ahead.wait(skill)
        return self.evaluator.run(skill, items, split)

    def after_step(
        self, epoch: int, following: Sequence[Sequence[TaskItem]]
    ) -> list[tuple[Sequence[TaskItem], str]]:
        """What the loop runs with the current skill after a step that keeps it."""
        if following:
            return [(following[0], "train")]
        if self.t.slow_update:
            return [(self.slow_items, "train")]
        return self.after_epoch(epoch)

    def after_epoch(self, epoch: int) -> list[tuple[Sequence[TaskItem], str]]:
        """What the loop runs with the current skill after an epoch end that keeps it."""
        if epoch < self.t.epochs:
            upcoming: list[tuple[Sequence[TaskItem], str]] = [(self.batches(epoch + 1)[0], "train")]
            if self.t.slow_update:
                upcoming.append((self.slow_items, "train"))
            return upcoming
        return [(self.ctx.test, "test")] if self.ctx.test else []

    def waste(self, speculation: Sequence[Batch | None], gate_event: Event) -> None:
        """Record speculative rollouts an accepted candidate made useless (outside the run's
        sequence, once: a replay finds the record by its key)."""
        items, jobs = self.ahead.waste(speculation)
        if jobs:
            self.store.append(
                "speculation.wasted",
                {"skill": sha256_hex(self.state.skill), "items": items, "jobs": jobs},
                run_id=self.ctx.run_id,
                step=self.log.step,
                epoch=self.log.epoch,
                key=f"{self.ctx.run_id}:{gate_event.seq}",
            )

    # Bookkeeping -------------------------------------------------------------------------

    def batches(self, epoch: int) -> list[list[TaskItem]]:
        order = list(self.ctx.train)
        random.Random(f"{self.t.seed}:{epoch}").shuffle(order)
        size = self.t.batch_size
        return [order[i : i + size] for i in range(0, len(order), size)]

    def stage(
        self, name: str, runs: Sequence[tuple[str, Sequence[TaskItem], str]]
    ) -> AbstractContextManager[None]:
        """A progress stage over evaluator runs of (skill, items, split), counting only the
        rollouts not already known in this process (with two runs of the same skill the second
        is memoised, so it is counted once)."""
        total, seen = 0, set()
        for skill, items, split in runs:
            if (skill, split) not in seen:
                seen.add((skill, split))
                total += self.evaluator.pending(skill, items, split)
        return self.progress.stage(name, total)

    def record(self, split: str, rollouts: Sequence[Rollout]) -> None:
        """Log fresh rollouts, after checking their failure rate.

        The check comes first so a run that stops for failures has not logged the failed
        rollouts: on resume they are retried rather than replayed.
        """
        self.check_failures(sum(1 for r in rollouts if not r.ok), len(rollouts), "target")
        with self.store.transaction():  # one write for the stage, not one per rollout
            self.record_rollouts(split, rollouts)

    def record_rollouts(self, split: str, rollouts: Sequence[Rollout]) -> None:
        for r in rollouts:
            payload = {
                "split": split,
                "item": r.item_id,
                "skill": r.skill,
                "output": self.store.put_blob(r.output) if r.output is not None else None,
                "hard": r.hard,
                "soft": r.soft,
                "error": r.error,
                "call": r.call_key,
                "reason": r.reason,
            }
            if r.activated is not None:  # an agent harness's rollout
                payload |= {"activated": r.activated, "trajectory": r.trajectory}
            self.log.emit("rollout", payload)

    def mean_of(self, rollouts: Sequence[Rollout]) -> float | None:
        return mean([r.value(self.t.gate_metric) for r in rollouts if r.ok])

    def ungated_payload(self) -> dict[str, Any]:
        return {
            "decision": "forced",
            "metric": self.t.gate_metric,
            "before": {"mean": self.state.current_val, "n": len(self.ctx.val)},
            "after": {"mean": None, "n": 0},
            "early_stopped": False,
            "items": [],
            "flipped": {"gained": [], "lost": []},
            "errors": 0,
        }

    def evidence(
        self,
        kind: str,
        epoch: int,
        lr: int | None,
        edits: Edits,
        result: GateResult | None,
        before: Usage,
    ) -> commits.Evidence:
        usage = self.usage_since(before)
        return commits.Evidence(
            kind=kind,
            decision=result.decision if result else "forced",
            edits=edits,
            metric=self.t.gate_metric,
            before=result.before if result else self.state.current_val,
            after=result.after if result else None,
            after_bound=result.after_bound if result else None,
            n=result.n if result else 0,
            n_evaluated=result.n_evaluated if result else 0,
            early_stopped=result.early_stopped if result else False,
            gained=result.gained if result else [],
            lost=result.lost if result else [],
            p_value=result.p_value if result else None,
            test=result.test if result else None,
            confidence=self.confidence,
            run_id=self.ctx.run_id,
            step=self.state.step if kind == "step" else None,
            epoch=epoch,
            lr=lr,
            calls=usage["calls"],
            tokens=usage["tokens"],
            cost_usd=usage["cost_usd"],
        )

    def project(self) -> None:
        """Log and show what the run will cost; stop a costly run that has no budget."""
        recorded = self.store.query(
            "SELECT type FROM events WHERE run_id = ? AND seq = ?",
            [self.ctx.run_id, self.log.seq + 1],
        )
        if recorded and recorded[0]["type"] != "run.projected":
            return  # a run started by a skillvc without projections: replay it as it was
        projection = project(
            self.config,
            self.client.snapshot(),
            n_train=len(self.ctx.train),
            n_val=len(self.ctx.val),
            n_test=len(self.ctx.test),
            n_slow=len(self.slow_items),
            skill_tokens=estimate_tokens(self.target_text(self.ctx.base_skill).encode("utf-8")),
            local=[getattr(self.config, role).model for role in self.client.servers],
        )
        matrix = matrix_projection(self.config, len(self.ctx.val), self.total_steps)
        self.log.emit("run.projected", projection.to_dict() | matrix)
        for name, calls in matrix.get("matrix_calls", {}).items():
            self.progress.note(f"projected matrix gate on {name}: at most {calls:,} target calls")
        self.progress.note(
            f"projected for run {self.ctx.run_id}: about {projection.sentence()} "
            "(an upper estimate)"
        )
        try:
            refuse_unbudgeted(projection, self.ctx.run_id, self.t.budget_usd)
        except ProjectionTooHigh as exc:
            self.log.note("run.stopped", {"reason": "projection", "message": exc.message})
            raise

    def target_text(self, skill: str) -> str:
        """All the text the target gets of a skill version (a package: its rendering)."""
        if self.render is None:
            return skill
        given = self.render(skill)
        return given.system + "".join(f.text or "" for f in given.files)

    def check_failures(self, errors: int, total: int, role: str) -> None:
        """Stop the run when too many calls of ``role`` failed: an outage of the optimizer
        must not quietly turn every step into an empty one, as one of the target must not
        turn into scores."""
        if total and errors / total > self.t.max_failure_rate:
            message = (
                f"{errors} of {total} {role} calls failed in {self.phase} "
                f"(last error: {(self.client.last_error or 'unknown').rstrip('.')})."
            )
            self.log.note("run.stopped", {"reason": "failures", "message": message})
            raise RunFailed(message)

    def check_budget(self) -> None:
        budget = self.t.budget_usd
        if budget is None:
            return
        spent = self.client.totals().cost_usd + self.ahead.wasted_cost()
        if spent >= budget:
            self.log.note(
                "run.stopped",
                {
                    "reason": "budget",
                    "cost_usd": spent,
                    "budget_usd": budget,
                    "step": self.state.step,
                },
            )
            raise BudgetExceeded(
                f"Run {self.ctx.run_id} stopped after step {self.state.step}: it has cost "
                f"${spent:.4f} of its ${budget:.4f} budget."
            )

    def usage_since(self, before: Usage) -> dict[str, Any]:
        """Calls (per role), tokens and cost since ``before``; None cost when a price is
        unknown. Counts answers from the log too, so a resumed run reports the same."""
        calls: dict[str, int] = {}
        tokens, cost, unknown = 0, Fraction(0), False
        # Sorted roles and exact sums: the roles' order in the snapshot is the order threads
        # first used them, which must not show in a commit message.
        for role, now in sorted(self.client.snapshot().items()):
            was = before.get(role, RoleStats())
            if now.replies - was.replies:
                calls[role] = now.replies - was.replies
            tokens += now.tokens - was.tokens
            cost += now.cost_exact - was.cost_exact
            unknown |= now.unpriced > was.unpriced
        return {"calls": calls, "tokens": tokens, "cost_usd": None if unknown else float(cost)}

    def report(self, epoch: int, lr: int, edits: str, verdict: str, before: Usage) -> None:
        usage = self.usage_since(before)
        cost = "price unknown" if usage["cost_usd"] is None else f"${usage['cost_usd']:.4f}"
        self.progress.note(
            f"epoch {epoch}/{self.t.epochs} step {self.state.step}/{self.total_steps} lr {lr} | "
            f"{edits} | {verdict} | calls {sum(usage['calls'].values())} "
            f"tokens {usage['tokens']:,} {cost} | {time.monotonic() - self.started:.1f}s elapsed"
        )


def rejection_evidence(result: GateResult | None, alphas: Sequence[float]) -> dict[str, Any]:
    """What the rejected buffer says of a rejected candidate's edits: its paired counts and
    p-value, and ``inconclusive`` unless it did significantly worse than the current skill
    (a candidate within noise is no evidence against its edits, only not enough for them)."""
    if result is None:
        return {}
    up, down = result.discordant or (len(result.gained), len(result.lost))
    worse = significance.significant(significance.sign_test_p(down, up), alphas[-1])
    return {
        "evidence": {"up": up, "down": down, "p_value": result.p_value},
        "inconclusive": not worse,
    }


def _unmatched(miss: Unmatched) -> dict[str, Any]:
    """How an unmatched edit is shown in a gate event (and so in the log and report)."""
    edit = miss.edit
    shown = {
        "id": edit.id,
        "op": edit.op,
        "text": (edit.content or edit.target)[:120],
        "reason": miss.reason,
        "detail": miss.detail,
    }
    if edit.file != SKILL_FILE:  # a skill package's other file (single files: as before)
        shown["file"] = edit.file
    return shown


def cut_note(cut: Sequence[str]) -> str:
    """The progress line saying which linked files the chat target is not sent."""
    return (
        f"not sent to the chat target (over [skill] reference_bytes or the token cap): "
        f"{', '.join(cut)}"
    )


def _fmt(value: float | None) -> str:
    """A val score for a progress line; None when no item could be scored (all errors)."""
    return "n/a" if value is None else f"{value:.3f}"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
