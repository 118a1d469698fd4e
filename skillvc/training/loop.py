"""``skillvc train``: the SkillOpt loop, event-sourced and git-native.

The spine is ``Trainer.train``: for each epoch, for each batch, the stages run in data-flow
order (rollout -> reflect -> aggregate -> select -> apply -> gate -> commit or reject), then the
epoch-end slow update and meta-skill update; finally the best skill is scored on test.

Invariants:
- Deterministic: for the same recorded answers the loop emits the same events in the same
  order. Resume re-runs it from the top with every recorded call answered from the log, so an
  interrupted run ends exactly like an uninterrupted one and pays no model call twice.
- The skill file (or a skill package's files) changes only through ``commits.start_commit`` (one
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
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from skillvc.core.config import override, validate
from skillvc.core.errors import AuthenticationFailed, ConfigError
from skillvc.core.hashing import sha256_hex
from skillvc.core.progress import Progress
from skillvc.models.calls import CallFailed
from skillvc.models.executors import make_executor
from skillvc.packages import SKILL_FILE, skill_file_text
from skillvc.packages.edits import PackageApplyResult
from skillvc.secrets import scrub
from skillvc.secrets.taskfiles import warn_in_background
from skillvc.skill.edits import ApplyResult, Unmatched
from skillvc.tasks.taskset import TaskItem
from skillvc.training.evaluate import (
    Evaluator,
    Rollout,
)
from skillvc.training.forms import form_edit, label_edit
from skillvc.training.optimize import (
    Merged,
    Proposal,
    Reflection,
    aggregate,
    apply_selected,
    apply_selected_package,
    ask_json,
    minibatches,
    reflect,
    select,
)
from skillvc.training.prefetch import NEXT, Prefetcher
from skillvc.training.repeats import deterministic_target, edit_key
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
from skillvc.training.setup import find_unfinished, finished_here, prepare_run
from skillvc.training.startcheck import sim_world_warning
from skillvc.training.summary import UP_TO_DATE, RunSummary, up_to_date
from skillvc.training.trainer_base import fmt_val
from skillvc.training.updates import Updates
from skillvc.workspace.workspace import Workspace

__all__ = ["UP_TO_DATE", "Progress", "RunSummary", "Trainer", "train"]


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
        fit = sim_world_warning(config, [i.input for i in (*ctx.train, *ctx.val)])
        if fit is not None:
            progress.note(f"Warning: {fit}")
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
        finally:
            ctx.client.close()  # what backends started (a tool loop's MCP servers)


class Trainer(Updates):
    # The spine ---------------------------------------------------------------------------

    def train(self) -> RunSummary:
        self.progress.note(
            f"run {self.ctx.run_id}: {'resuming' if self.ctx.resumed else 'starting'} "
            f"({_n(self.total_steps, 'step')} over {_n(self.t.epochs, 'epoch')})"
        )
        with (
            ThreadPoolExecutor(max_workers=self.t.workers) as self.pool,
            # A run that stops before a rejected commit's done is logged still waits here for
            # its write; its resume finds the commit by its trailer (training/commits.py).
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="commit") as self.committer,
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
            self.client.warm_up("target")  # its SDK and client, before the wave that needs them
            if self.cannot_be_refused():
                self.prefetch_start()  # in the baseline's wave
            # While the baseline's wave is out, not before or after it: the optimizer's client
            # and the task files' credential scan (which compiles the detectors every logged
            # answer is scrubbed with).
            self.client.warm_up("optimizer", background=True)
            scan = warn_in_background(self.ctx.task_files)
            with self.stage("baseline on val", [(self.state.skill, self.ctx.val, "val")]):
                self.baseline = self.evaluator.run(self.state.skill, self.ctx.val, "val")
            scan.join()  # its warnings are said before the first step
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
        # The gate's bet on a rejection goes out beside the reflection, whose optimizer calls
        # leave the target's threads idle (on a stochastic target, with attribution, the gate
        # makes it: a bundle's bet waits for the gate's first pass).
        early_bet = None if len(self.alphas) > 1 else self.speculate("")
        reflection = self.reflect(batch, rollouts, lr)  # backward pass
        derived = self.derive(batch, rollouts)  # skillvc's own, first among equals
        merged = self.aggregate([*derived, *reflection.proposals])
        chosen, refuted = self.select(merged, lr)
        proposed = len(derived) + len(reflection.proposals)
        if not chosen and refuted:
            # Every proposal repeats an edit refuted against this skill: other evidence.
            reflection = self.reflect_again(batch, rollouts, lr)
            merged = self.aggregate(reflection.proposals)
            chosen, again = self.select(merged, lr)
            refuted += again
            proposed += len(reflection.proposals)
        result = self.apply(chosen)
        counts = (
            f"edits {proposed} proposed, {len(chosen)} selected, "
            f"{len(result.unmatched)} unmatched"
            + (f", {refuted} refuted against this skill already" if refuted else "")
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
                early_bet=early_bet,
            )
        else:
            reason = "no edit could be applied" if chosen else "no edits proposed"
            self.log.emit("step.empty", {"reason": reason})
            verdict = f"val {fmt_val(self.state.current_val)}, no candidate"
        self.report(epoch, lr, counts, verdict, before)
        self.check_budget()

    def reflect(
        self, batch: Sequence[TaskItem], rollouts: Sequence[Rollout], lr: int
    ) -> Reflection:
        s = self.state
        n = len(minibatches(batch, rollouts, self.t.gate_metric, self.t.minibatch_size))
        name = f"step {s.step}/{self.total_steps} reflection"
        with self.progress.stage(name, n, unit="minibatches"):
            reflection = self._reflect(batch, rollouts, self.t.minibatch_size, lr)
        for it, r in zip(batch, rollouts, strict=True):
            if r.ok and r.value(self.t.gate_metric) < 1:  # shown in a failures minibatch
                s.shown[it.id] = s.shown.get(it.id, 0) + 1
        # Before any reflection event: a stopped run then retries these calls on resume.
        self.check_failures(reflection.call_failures, reflection.minibatches, "optimizer")
        with self.store.transaction():  # the stage's events in one write
            self.record_reflection(reflection)
        return reflection

    def _reflect(
        self, items: Sequence[TaskItem], rollouts: Sequence[Rollout], minibatch_size: int, lr: int
    ) -> Reflection:
        """The optimizer's reflection on ``items`` with the current state (buffer, meta
        skill, package), in minibatches of ``minibatch_size``, proposing at most ``lr`` edits."""
        s = self.state
        return reflect(
            self.client,
            self.pool,
            # SKILL.md's text: a package's other files go in their own section.
            skill=skill_file_text(s.skill),
            items=items,
            rollouts=rollouts,
            metric=self.t.gate_metric,
            minibatch_size=minibatch_size,
            budget=lr,
            rejected=s.buffer if self.t.buffer else [],
            meta=s.meta if self.t.meta_skill else "",
            step=s.step,
            describe=self.t.train_description,
            done=self.progress.advance,
            package=s.package,
            package_chars=self.config.skill.optimizer_chars,
            carried=self.ctx.carried,
            samples=self.t.proposals,
        )

    def derive(self, batch: Sequence[TaskItem], rollouts: Sequence[Rollout]) -> list[Proposal]:
        """skillvc's own proposal for the step: worked examples of the expected answers' form
        when most of the batch's failures give the expected content in another form
        (training/forms.py). One edit per rule while the skill is current, logged as
        ``edit.proposed`` with ``source`` "skillvc" and its evidence."""
        if not (self.t.form_examples or self.t.label_examples):
            return []
        failures = [
            case
            for kind, cases in minibatches(batch, rollouts, self.t.gate_metric, len(batch))
            if kind == "failures"
            for case in cases
        ]
        text = skill_file_text(self.state.skill)
        expected = [item.targets[0] for item in batch if len(item.targets) == 1]
        found = form_edit(failures, text, expected) if self.t.form_examples else None
        kind = "form"
        if found is None and self.t.label_examples:
            found, kind = label_edit(failures, expected, text), "label"
        if found is None:
            return []
        edit = self.state.forms.setdefault(found.rule, found.edit)
        self.log.emit(
            "edit.proposed",
            {"edit": edit.to_dict(), "source": "skillvc", "kind": kind, **found.to_dict()},
        )
        return [Proposal(edit, 0, kind)]

    def reflect_again(
        self, batch: Sequence[TaskItem], rollouts: Sequence[Rollout], lr: int
    ) -> Reflection:
        """One more reflection when every edit the step's reflections proposed repeats one
        refuted against the current skill (issue 46): a deterministic optimizer shown the
        same cases answers the same again. It is shown other evidence: one minibatch of the
        batch's failures, those shown to it least first, at half the minibatch size (so its
        cases differ from every minibatch it has seen), and the buffer that now says why the
        repeats were refused. Logged (``reflection.retried``) before its call."""
        s, metric = self.state, self.t.gate_metric
        failing = [
            (it, r) for it, r in zip(batch, rollouts, strict=True) if r.ok and r.value(metric) < 1
        ]
        if not failing:
            return Reflection()
        failing.sort(
            key=lambda pair: (
                s.shown.get(pair[0].id, 0),
                sha256_hex(f"{self.t.seed}:{s.step}:{pair[0].id}"),
            )
        )
        size = max(1, min(self.t.minibatch_size, len(failing)) // 2)
        chosen = failing[:size]
        self.log.emit(
            "reflection.retried",
            {
                "reason": "every proposed edit repeats one refuted against the current skill",
                "items": [it.id for it, _ in chosen],
            },
        )
        items = [it for it, _ in chosen]
        runs = [r for _, r in chosen]
        name = f"step {s.step}/{self.total_steps} reflection on other failures"
        with self.progress.stage(name, 1, unit="minibatches"):
            reflection = self._reflect(items, runs, size, lr)
        self.check_failures(reflection.call_failures, reflection.minibatches, "optimizer")
        for it in items:
            s.shown[it.id] = s.shown.get(it.id, 0) + 1
        with self.store.transaction():
            self.record_reflection(reflection, retry=True)
        return reflection

    def record_reflection(self, reflection: Reflection, *, retry: bool = False) -> None:
        for p in reflection.proposals:
            self.log.emit(
                "edit.proposed",
                {
                    "edit": p.edit.to_dict(),
                    "source": "optimizer",
                    "minibatch": p.minibatch,
                    "kind": p.kind,
                    **({"sample": p.sample} if p.sample else {}),
                    **({"retry": True} if retry else {}),
                },
            )
        for refused in reflection.refused:
            self.log.emit("edit.refused", refused)
        for failure in reflection.failures:
            self.log.emit("reflection.failed", failure)
        self.state.reflections += reflection.minibatches - reflection.call_failures
        self.state.reflections_usable += reflection.usable

    def aggregate(self, proposals: Sequence[Proposal]) -> list[Merged]:
        # With attribution, proposals that differ only in case, whitespace or punctuation are
        # one edit (the first one's text); the paper's bundle gate merges identical ones only.
        # Edits held back as refuted are merged apart: one must not win a conflict over a
        # fresh edit of the same target and then be held back, leaving neither (issue 46).
        key = edit_key if self.t.attribution else None
        held = self.state.refuted
        fresh = [p for p in proposals if edit_key(p.edit) not in held]
        repeated = [p for p in proposals if edit_key(p.edit) in held]
        merged = aggregate(fresh, key=key) + aggregate(repeated, key=key)
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

    def select(self, merged: Sequence[Merged], lr: int) -> tuple[list[Merged], int]:
        """The edits this step's candidate applies, and how many were held back as refuted.

        An edit that changed no answer or lost its own test against the current skill is not
        evaluated again while it is current, matched by its normalised text
        (``Gating.refuted_edits``, ``repeats.edit_key``): its slot goes to the next edit."""
        held = self.state.refuted
        refuted = [m for m in merged if edit_key(m.edit) in held]
        chosen, dropped = select([m for m in merged if edit_key(m.edit) not in held], lr)
        self.log.emit(
            "edits.selected",
            {
                "lr": lr,
                "selected": [m.edit.id for m in chosen],
                "dropped": [m.edit.id for m in dropped],
                **({"refuted": [m.edit.id for m in refuted]} if refuted else {}),
            },
        )
        return chosen, len(refuted)

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
        slow = self.slow_update_due(epoch)
        # One wave for both slow-update evaluations and the meta update's call (which reads
        # only the epoch's step decisions, never the slow update's).
        if slow:
            self.prefetch(epoch_start_skill, self.slow_items, "train")
            self.prefetch(self.state.skill, self.slow_items, "train")
        if self.t.meta_skill:
            messages = self.meta_messages()
            self.ahead.call("meta", lambda c: ask_json(c, messages, "notes", None))
        self.upcoming = self.after_epoch(epoch)
        if slow:
            self.slow_update(epoch, epoch_start_skill)
        else:  # the skill stays: what comes next is certain, and goes out beside the meta call
            self.send_upcoming(self.state.skill, NEXT)
        if self.t.meta_skill:
            self.meta_update()
        self.release_held(epoch)
        name = f"{self.refs}{self.ctx.run_id}/epoch-{epoch}"
        self.repo.tag(name, self.state.head)
        self.log.emit(
            "checkpoint",
            {"tag": f"skillvc/{name}", "sha": self.state.head, "val": self.state.current_val},
        )

    def release_held(self, epoch: int) -> None:
        """Start the next epoch, deciding (and logging) whether the edits held back as refuted
        get a second look. Only on a noisy target, after an epoch that changed nothing, and
        only the edits that lost a test (fresh draws may say otherwise): held for good, an
        edit that helps only beside others could stall a run (docs/gains.md). An edit that
        changed no answer, or any edit on a deterministic target, stays held: asked again,
        the target would give the same answers."""
        s = self.state
        held, changed = dict(s.refuted), s.epoch_changed
        noisy = not deterministic_target(self.config)
        released = s.new_epoch(release=noisy and not changed)
        if not held or changed:
            return
        if released:
            reason = (
                f"epoch {epoch} accepted nothing and the target samples (temperature "
                f"{self.config.target.temperature:g}): edits that lost a test get a second "
                "look on fresh draws"
            )
        else:
            reason = (
                "the target is deterministic: a second look would give the same answers"
                if not noisy
                else "every held edit changed no answer"
            )
        self.log.emit(
            "edits.released" if released else "edits.held",
            {
                "epoch": epoch,
                "reason": reason,
                "released": len(released),
                "held": len(held) - len(released),
            },
        )


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


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
