"""``skillvc train --routing``: train a library's descriptions for routing, gated on the
whole library.

The spine is ``RoutingTrainer.train``: a baseline of the library's routing on val; then per
epoch, per batch of train prompts: route (forward) -> propose description edits from the
misrouted prompts (backward) -> gate each edit on its own against the current library on val
-> commit it (accepted) or keep it under a rejected ref and in the buffer; with ``--body`` a
body training pass of every skill with a task set after each routing epoch; finally the
first and last library on test.

Invariants:
- The gate scores the whole library (``skillvc.routing.gate``): an edit is accepted only when
  no other skill whose recall fell lost a prompt to the edited skill (a direct steal), no
  skill's recall falls significantly (one-sided exact sign test on its own val prompts), and
  the library's score on val rises significantly (the same test on the prompts it flips), all
  at ``significance.gate_alpha`` (``check``'s alpha for routing too).
- A description edit the gate refused is not gated again while the library stays as it was
  (matched by skill and normalised text, ``_key``): a deterministic selector would give the
  same verdict; the step's next edit takes its slot, or the step ends empty.
- Each accepted edit is one commit that changes only that skill's ``description:`` line, with
  its evidence in the message and trailers (``Skillvc-Routing``, ``Skillvc-Significance``);
  a rejected one is a commit under ``refs/skillvc/rejected/<run>/routing-<step>-<skill>``.
- Event-sourced like the body loop (``skillvc.training.runlog``): a resumed run replays from
  the top with every call answered from the log and every event found at its number, so it
  ends with the same descriptions, commits and events, and pays no call twice. Its run id
  comes from what determines it (settings, base commit, library, trigger set, template).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from skillvc.core.config import Config, ModelConfig
from skillvc.core.errors import ConfigError, TaskSetError
from skillvc.core.events import Event
from skillvc.core.hashing import content_id
from skillvc.core.progress import Progress
from skillvc.core.store import EventStore
from skillvc.models.calls import ModelClient, secret_values
from skillvc.models.harness import lazy_backend
from skillvc.repo.skillrepo import ensure_ready_to_train
from skillvc.routing.derive import missed_prompts_edit
from skillvc.routing.gate import RoutingVerdict, judge
from skillvc.routing.induce import chosen_skill, induce, induce_template
from skillvc.routing.library import Library, load_library
from skillvc.routing.measure import agent_of, measure, uses_tools
from skillvc.routing.metrics import Pick, RoutingScore
from skillvc.routing.optimize import DescriptionEdit, propose, template_hash
from skillvc.routing.triggers import TriggerItem, load_triggers, spellings
from skillvc.training import commits, significance
from skillvc.training.repeats import normalised
from skillvc.training.runlog import RunLog
from skillvc.workspace.workspace import Workspace

STARTED, FINISHED = "routing.started", "routing.finished"
UP_TO_DATE = "up_to_date"


@dataclass
class RoutingSummary:
    run_id: str
    status: str  # finished | up_to_date
    resumed: bool = False
    steps: int = 0
    accepted: int = 0
    rejected: int = 0
    before: dict[str, Any] = field(default_factory=dict)  # val routing of the base library
    after: dict[str, Any] = field(default_factory=dict)  # val routing of the trained library
    test_before: dict[str, Any] | None = None
    test_after: dict[str, Any] | None = None
    head: str | None = None
    body: list[dict[str, Any]] = field(default_factory=list)  # per body run: skill, val scores
    calls: int = 0
    fresh_calls: int = 0
    calls_by_role: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    cost_usd: float = 0.0


def selector_config(config: Config) -> ModelConfig:
    """The selector: [target], with [routing] model when set."""
    rc = config.routing
    if rc is not None and rc.model:
        return dataclasses.replace(config.target, model=rc.model)
    return config.target


def library_config(ws: Workspace) -> Config:
    """The whole library's config (every skill), whichever skill ``ws`` was opened for."""
    from skillvc.core.config import load_config

    return load_config(ws.root) if ws.config.skill_name else ws.config


def check_routing(config: Config) -> None:
    rc = config.routing
    if rc is None:
        raise ConfigError(
            "skillvc.toml has no [routing] section, so there is no trigger set.",
            hint="Add [routing] with train/val/test trigger files (e.g. val = "
            '"evals/routing/val.jsonl"); see docs/routing.md.',
        )
    for key in ("edits", "epochs", "batch_size"):
        value = getattr(rc, key)
        if value is not None and value < 1:
            raise ConfigError(f"[routing] {key} = {value} in skillvc.toml must be at least 1.")


def train_routing(
    ws: Workspace,
    *,
    new: bool = False,
    body: bool | None = None,
    progress: Progress | Callable[[str], None] | None = None,
) -> RoutingSummary:
    """Train the library's descriptions (and, with ``body``, its bodies in alternation)."""
    if not isinstance(progress, Progress):
        progress = Progress.lines(progress)
    config = library_config(ws)
    check_routing(config)
    assert config.routing is not None
    train_body = config.routing.train_body if body is None else body
    with ws.store(create=True) as store:
        trainer = RoutingTrainer(ws, store, config, progress, train_body=train_body, new=new)
        return trainer.run()


class RoutingTrainer:
    def __init__(
        self,
        ws: Workspace,
        store: EventStore,
        config: Config,
        progress: Progress,
        *,
        train_body: bool,
        new: bool,
    ) -> None:
        assert config.routing is not None
        self.ws, self.store, self.config, self.progress = ws, store, config, progress
        self.rc = config.routing
        self.train_body, self.new = train_body, new
        self.repo = ws.repo
        # The rule check states routing at (never alpha 1: attribution = false tests at 0.1).
        self.alpha = significance.gate_alpha(config, rounds=False)
        self.selector = selector_config(config)
        self.agent = agent_of(self.selector)  # an agent preset: its activation is the pick
        self.tools = self.agent is None and uses_tools(self.selector.model, self.rc.tools)
        self.buffer: list[dict[str, Any]] = []
        # Description edits the gate refused against the current library, by skill and
        # normalised text -> why: not gated again until an edit is accepted (issue 46).
        self.refuted: dict[str, str] = {}
        self.hold_refuted = self.quote_prompts = self.induce = True
        # Skills whose induced description the gate refused (or held) against the current
        # library: the next step induces for another skill until an edit is accepted.
        self.induced_refused: set[str] = set()
        self.body_runs: list[dict[str, Any]] = []
        self.accepted = self.rejected = self.step = 0

    # -- start or resume ------------------------------------------------------------------

    def run(self) -> RoutingSummary:
        with contextlib.ExitStack() as lock:
            lock.enter_context(self.store.writer_lock())
            self.lock = lock
            ensure_ready_to_train(self.repo, branch=self.config.train.branch)
            self.repo.ensure_identity()
            if self.config.train.branch and self.repo.current_branch() != self.config.train.branch:
                self.repo.switch_branch(self.config.train.branch)
            unfinished = self.find_unfinished()
            if unfinished is not None and self.new:
                RunLog(self.store, str(unfinished.run_id)).note(
                    "run.abandoned", {"reason": "--new", "kind": "routing"}
                )
                unfinished = None
            self.resumed = unfinished is not None
            if unfinished is not None:
                self.run_id = str(unfinished.run_id)
                self.log = RunLog(self.store, self.run_id)
                self.reconcile()
                base = str(unfinished.payload["base_commit"])
            else:
                base = self.repo.head_sha() or ""
                if not base:
                    raise ConfigError(
                        "The repository has no commit yet.", hint="Commit the skill files first."
                    )
            library = load_library(self.config, self.repo, base)
            for s in library:
                self.repo.ensure_clean(s.path)
            self.triggers = load_triggers(
                self.rc, self.ws.root, spellings([(s.name, s.table) for s in library])
            )
            if not self.triggers.train or not self.triggers.val:
                counts = self.triggers.counts()
                raise TaskSetError(
                    "Training routing needs train and val trigger items "
                    f"(found {counts['train']} train, {counts['val']} val).",
                    hint="Point [routing] in skillvc.toml at trigger files with both splits.",
                )
            settings = self.settings()
            if unfinished is not None:
                if unfinished.payload.get("dataset", {}).get("hash") != self.triggers.hash:
                    raise TaskSetError(
                        f"The trigger set changed since routing run {self.run_id} started.",
                        hint="Restore the trigger files to resume it, or start another run "
                        "with 'skillvc train --routing --new'.",
                    )
            else:
                done = None if self.new else self.finished_here(settings)
                if done is not None:
                    return RoutingSummary(
                        run_id=str(done.run_id),
                        status=UP_TO_DATE,
                        head=done.payload.get("head"),
                        before=done.payload.get("before", {}),
                        after=done.payload.get("after", {}),
                    )
                self.run_id = self.new_run_id(settings, base, library)
                self.log = RunLog(self.store, self.run_id)
            self.client = self.make_client()
            started = self.log.emit(
                STARTED,
                {
                    "kind": "routing",
                    "settings": settings,
                    "config": {
                        "routing": dataclasses.asdict(self.rc),
                        "selector": self.selector.model,
                        "optimizer": self.config.optimizer.model,
                    },
                    "base_commit": base,
                    "library": [
                        {"name": s.name, "path": s.path, "description": s.description}
                        for s in library
                    ],
                    "dataset": {"hash": self.triggers.hash, "counts": self.triggers.counts()},
                    "templates": {
                        "route_descriptions": template_hash(),
                        "route_induce": induce_template(),
                    },
                    "models": {
                        "target": self.selector.model,
                        "optimizer": self.config.optimizer.model,
                    },
                    "tools": self.tools,
                    "agent": self.agent,
                    "body": self.train_body,
                    "branch": self.repo.current_branch(),
                },
            )
            recorded = started.payload.get("settings", {})
            self.hold_refuted = bool(recorded.get("hold_refuted"))
            # A run recorded before skillvc quoted missed prompts resumes without it.
            self.quote_prompts = bool(recorded.get("routing", {}).get("quote_prompts"))
            # ... and one recorded before skillvc induced descriptions, without that.
            self.induce = bool(recorded.get("routing", {}).get("induce"))
            if self.resumed:
                self.log.note("run.resumed", {"kind": "routing"})
            self.base_commit = str(started.payload["base_commit"])
            return self.train(library)

    def settings(self) -> dict[str, Any]:
        """What decides a routing run besides its base commit, library and trigger set."""
        t = self.config.train
        return {
            "routing": dataclasses.asdict(self.rc) | {"model": self.selector.model},
            "selector": dataclasses.asdict(self.selector),
            "optimizer": dataclasses.asdict(self.config.optimizer),
            "train": {"epochs": t.epochs, "batch_size": t.batch_size, "seed": t.seed},
            "alpha": self.alpha,
            "rejected_buffer_size": t.rejected_buffer_size,
            "template": template_hash(),
            "body": self.train_body,
            # Refuted descriptions are held back while the library stays (issue 46); runs
            # recorded before that resume without it, so their replay does not diverge.
            "hold_refuted": True,
        } | ({"induce_template": induce_template()} if self.rc.induce else {})

    def new_run_id(self, settings: dict[str, Any], base: str, library: Library) -> str:
        digest = content_id(
            {
                "settings": settings,
                "base": base,
                "library": library.key,
                "triggers": self.triggers.hash,
            },
            8,
        )
        earlier = self.store.query(
            "SELECT COUNT(*) AS n FROM events WHERE type = ? AND run_id LIKE ?",
            [STARTED, f"route-{digest}%"],
        )[0]["n"]
        return f"route-{digest}" + (f".{earlier + 1}" if earlier else "")

    def find_unfinished(self) -> Event | None:
        rows = self.store.query(
            "SELECT s.id, EXISTS (SELECT 1 FROM events f WHERE f.type IN (?, 'run.abandoned') "
            "AND f.run_id = s.run_id) AS finished FROM events s WHERE s.type = ? "
            "ORDER BY s.id DESC LIMIT 1",
            [FINISHED, STARTED],
        )
        if not rows or rows[0]["finished"]:
            return None
        return self.store.get(rows[0]["id"])

    def finished_here(self, settings: dict[str, Any]) -> Event | None:
        """The last routing run's end, when it finished at HEAD with these settings and this
        trigger set: training again would only repeat it."""
        rows = self.store.query(
            "SELECT id, run_id FROM events WHERE type = ? ORDER BY id DESC LIMIT 1", [STARTED]
        )
        if not rows:
            return None
        started = self.store.get(rows[0]["id"])
        finished = self.store.events(run_id=started.run_id, types=[FINISHED], limit=1)
        if not finished or finished[0].payload.get("head") != self.repo.head_sha():
            return None
        if started.payload.get("settings") != settings:
            return None
        if started.payload.get("dataset", {}).get("hash") != self.triggers.hash:
            return None
        return finished[0]

    def reconcile(self) -> None:
        """Finish an accepted commit whose branch moved before its file was written."""
        intents = self.store.events(
            run_id=self.run_id, types=["commit.intent"], newest_first=True, limit=1
        )
        if intents and intents[0].payload.get("accepted"):
            gate = self.store.get(int(intents[0].payload["gate_id"]))
            for path in gate.payload.get("files", []):
                commits.reconcile_pending(self.repo, self.log, path)

    def make_client(self) -> ModelClient:
        backends = {
            "target": lazy_backend(self.selector, self.config.root),
            "optimizer": lazy_backend(self.config.optimizer, self.config.root),
        }
        return ModelClient(
            self.store,
            backends,
            {"target": self.selector, "optimizer": self.config.optimizer},
            prices=self.config.prices,
            run_id=self.run_id,
            secrets=secret_values(self.config),
        )

    # -- the spine --------------------------------------------------------------------------

    def train(self, library: Library) -> RoutingSummary:
        epochs = self.rc.epochs or self.config.train.epochs
        size = self.rc.batch_size or self.config.train.batch_size
        self.head = self.base_commit
        self.progress.note(
            f"routing run {self.run_id}: {'resuming' if self.resumed else 'starting'} "
            f"({len(library)} skills, {len(self.triggers.train)} train / "
            f"{len(self.triggers.val)} val prompts, {epochs} epochs)"
        )
        self.progress.note(power_note(len(self.triggers.val), self.alpha))
        with ThreadPoolExecutor(max_workers=self.config.train.workers) as self.pool:
            self.library = library
            self.current = self.evaluate(library, self.triggers.val, "val", "baseline")
            baseline = self.current
            for epoch in range(1, epochs + 1):
                self.log.epoch = epoch
                for batch in self.batches(epoch, size):
                    self.routing_step(epoch, batch)
                if self.train_body:
                    self.body_epoch(epoch)
            self.log.step = None
            test_before = test_after = None
            if self.triggers.test:
                base_library = load_library(self.config, self.repo, self.base_commit)
                test_before = self.evaluate(base_library, self.triggers.test, "test", "baseline")
                test_after = self.evaluate(self.library, self.triggers.test, "test", "final")
            if self.head != self.base_commit:
                self.repo.tag(f"skillvc/routing/{self.run_id}/best", self.head)
            totals = self.client.totals()
            snapshot = self.client.snapshot()
            summary = RoutingSummary(
                run_id=self.run_id,
                status="finished",
                resumed=self.resumed,
                steps=self.step,
                accepted=self.accepted,
                rejected=self.rejected,
                before=brief(baseline),
                after=brief(self.current),
                test_before=brief(test_before) if test_before else None,
                test_after=brief(test_after) if test_after else None,
                head=self.head,
                body=self.body_runs,
                calls=totals.replies,
                fresh_calls=totals.fresh,
                calls_by_role={r: s.replies for r, s in sorted(snapshot.items())},
                tokens=totals.tokens,
                cost_usd=totals.cost_usd,
            )
            self.log.emit(
                FINISHED,
                {
                    k: v
                    for k, v in dataclasses.asdict(summary).items()
                    if k not in ("fresh_calls", "status", "resumed", "run_id")
                },
            )
            return summary

    def batches(self, epoch: int, size: int) -> list[list[TriggerItem]]:
        order = list(self.triggers.train)
        random.Random(f"{self.config.train.seed}:routing:{epoch}").shuffle(order)
        return [order[i : i + size] for i in range(0, len(order), size)]

    def evaluate(
        self, library: Library, items: Sequence[TriggerItem], split: str, label: str | None
    ) -> RoutingScore:
        with self.progress.stage(f"routing {label or 'gate'} on {split}", len(items)):
            result = measure(
                self.client,
                library,
                items,
                self.pool,
                tools=self.tools,
                agent=self.agent is not None,
                step=self.log.step,
                done=self.progress.advance,
            )
        if label is not None:
            self.log.emit(
                "routing.evaluated",
                {"label": label, "split": split, "library_key": library.key, **result.to_dict()},
            )
        return result

    def routing_step(self, epoch: int, batch: Sequence[TriggerItem]) -> None:
        self.step += 1
        self.log.step = self.step
        self.log.emit(
            "step.started",
            {"kind": "routing", "lr": self.rc.edits, "batch": [i.id for i in batch]},
        )
        with self.progress.stage(f"routing step {self.step} routes", len(batch)):
            from skillvc.routing.measure import route

            picks = route(
                self.client,
                self.library,
                batch,
                self.pool,
                tools=self.tools,
                agent=self.agent is not None,
                step=self.step,
                done=self.progress.advance,
            )
        wrong = [i for i, p in zip(batch, picks, strict=True) if p.ok and not i.correct(p.picked)]
        if not wrong:
            self.log.emit("step.empty", {"reason": "every prompt of the batch routed right"})
            self.progress.note(f"routing step {self.step}: every prompt routed right")
            return
        proposals = propose(
            self.client,
            self.library,
            batch,
            picks,
            self.buffer[-self.config.train.rejected_buffer_size :],
            self.rc.edits,
            step=self.step,
        )
        induced, not_induced = self.induced_edit(batch, picks)
        derived = missed_prompts_edit(self.library, batch, picks) if self.quote_prompts else None
        if derived is not None and induced is not None and derived.id == induced.id:
            derived = None  # the same description twice: the induced one's slot
        own = [e for e in (induced, derived) if e is not None]
        if own:  # slots beyond the optimizer's; an optimizer's copy of one is that one
            ids = {e.id for e in own}
            proposals.edits = [*(e for e in proposals.edits if e.id not in ids), *own]
        with self.store.transaction():
            for edit in proposals.edits:
                kind = "induced" if edit is induced else "description"
                source = "skillvc" if edit is derived else "optimizer"
                self.log.emit(
                    "edit.proposed", {"edit": edit.to_dict(), "source": source, "kind": kind}
                )
            if not_induced is not None:
                self.log.emit("edit.refused", not_induced)
            for refused in proposals.refused:
                self.log.emit("edit.refused", refused)
            if proposals.failure is not None:
                self.log.emit("reflection.failed", {"error": proposals.failure})
        if not proposals.edits:
            self.log.emit("step.empty", {"reason": "no usable description edit proposed"})
            return
        held = [e for e in proposals.edits if self.hold_refuted and _key(e) in self.refuted]
        fresh = [e for e in proposals.edits if e not in held]
        chosen = _within(fresh, self.rc.edits, own)
        if induced is not None and induced in held:
            self.induced_refused.add(induced.skill)
        if held:
            self.log.emit(
                "edits.selected",
                {
                    "lr": self.rc.edits,
                    "selected": [e.id for e in chosen],
                    "dropped": [e.id for e in fresh if e not in chosen],
                    "refuted": [e.id for e in held],
                },
            )
            if not chosen:
                reason = "every proposed description repeats one refuted against this library"
                self.log.emit("step.empty", {"reason": reason})
                self.progress.note(f"routing step {self.step}: {reason}")
                return
        touched: set[str] = set()
        for edit in chosen:
            if edit.skill in touched:  # its description changed this step: the edit is stale
                continue
            if self.gate(epoch, edit):
                touched.add(edit.skill)
            elif edit is induced:
                self.induced_refused.add(edit.skill)

    def induced_edit(
        self, batch: Sequence[TriggerItem], picks: Sequence[Pick]
    ) -> tuple[DescriptionEdit | None, dict[str, Any] | None]:
        """The step's induced description (``induce.py``) and, when there is none after a
        skill was chosen, the ``edit.refused`` payload saying why."""
        skill = chosen_skill(batch, picks, self.induced_refused) if self.induce else None
        if skill is None:
            return None, None
        edit, why = induce(
            self.client, self.library, skill, self.triggers.train, batch, picks, step=self.step
        )
        if edit is None:
            self.induced_refused.add(skill)
            return None, {"edit": {"skill": skill, "kind": "induced"}, "reason": why}
        return edit, None

    # -- the gate ---------------------------------------------------------------------------

    def gate(self, epoch: int, edit: DescriptionEdit) -> bool:
        before = self.client.snapshot()
        candidate = self.library.with_description(edit.skill, edit.after)
        result = self.evaluate(candidate, self.triggers.val, "val", None)
        verdict = judge(self.triggers.val, self.current, result, self.alpha, (edit.skill,))
        up, down, p_value = list(verdict.up), list(verdict.down), verdict.p_value
        recall = {
            name: [self.current.skills[name].recall, result.skills[name].recall]
            for name in self.library.names
        }
        steals = verdict.steals
        accepted, reason = verdict.accepted, verdict.reason
        skill = self.library.get(edit.skill)
        new_text = candidate.get(edit.skill).text
        decision = "accepted" if accepted else "rejected"
        lib_before, lib_after = self.current.library, result.library
        gate_event = self.log.emit(
            "gate",
            {
                "kind": "routing",
                "skill": edit.skill,
                "lr": None,
                "edits": [edit.to_dict()],
                "unmatched": [],
                "current": self.store.put_blob(skill.text),
                "candidate": self.store.put_blob(new_text),
                "decision": decision,
                "reason": reason,
                "metric": "routing",
                "before": {"mean": lib_before, "n": self.current.n},
                "after": {"mean": lib_after, "n": result.n},
                "flipped": {"gained": up, "lost": down},
                "p_value": p_value,
                "test": "sign",
                "alpha": self.alpha,
                "early_stopped": False,
                "routing": {
                    "library": [lib_before, lib_after],
                    "recall": recall,
                    "steals": steals,
                    "losses": verdict.losses,
                    "skills": {k: v.to_dict() for k, v in verdict.shifts.items()},
                    "confusion": result.confusion(),
                },
                "files": [skill.path],
            },
        )
        honesty = commits.Honesty(self.alpha, p_value, "sign", decision)
        pending = commits.start_commit(
            self.repo,
            self.log,
            gate_id=gate_event.id,
            files={skill.path: new_text.encode("utf-8")},
            version=new_text,
            text=self.message(
                edit,
                skill.path,
                decision,
                verdict,
                recall,
                (lib_before, lib_after),
                honesty,
                before,
            ),
            accepted=accepted,
            parent=self.head,
            step_label=f"routing-{self.step}-{edit.skill}",
            fresh=not self.resumed,
            significance_trailer=honesty.trailer(),
            extra_trailers={
                "Skillvc-Routing": f"library {_f(lib_before)} -> {_f(lib_after)}; "
                f"{edit.skill} recall {_f(recall[edit.skill][0])} -> {_f(recall[edit.skill][1])}"
                + (f"; steals from {', '.join(steals)}" if steals else ""),
                # Each skill that lost any of its own val prompts, with the p of that loss.
                "Skillvc-Recall-Loss": verdict.loss_line(),
                "Skillvc-Skill": edit.skill,
            },
        )
        sha = pending.finish()
        stated = significance.stated(p_value, self.alpha)
        if accepted:
            self.accepted += 1
            self.head = sha
            self.library = candidate
            self.current = result
            self.refuted = {}  # their gates were against the library this one replaces
            self.induced_refused = set()
            self.progress.note(
                f"routing step {self.step}: {edit.skill} description accepted, library "
                f"{_f(lib_before)} -> {_f(lib_after)} ({stated}; {verdict.loss_line()})"
            )
        else:
            self.rejected += 1
            self.refuted[_key(edit)] = reason
            self.buffer.append(
                {
                    "skill": edit.skill,
                    "description": edit.after,
                    "reason": reason,
                    "up": len(up),
                    "down": len(down),
                }
            )
            self.progress.note(
                f"routing step {self.step}: {edit.skill} description rejected ({reason}; "
                f"library {_f(lib_before)} -> {_f(lib_after)}, {stated}; {verdict.loss_line()})"
            )
        return accepted

    def message(
        self,
        edit: DescriptionEdit,
        path: str,
        decision: str,
        verdict: RoutingVerdict,
        recall: dict[str, list[float | None]],
        library: tuple[float | None, float | None],
        honesty: commits.Honesty,
        before: dict[str, Any],
    ) -> str:
        lines = [
            f"skillvc: describe {edit.skill} {commits._q(edit.after, 50)} "
            f"[routing step {self.step}]",
            "",
            f"Description of {edit.skill} ({path}):",
            f"- before: {edit.before}",
            f"- after: {edit.after}",
        ]
        if edit.rationale:
            lines.append(f"  Why: {commits._short(edit.rationale, 300)}")
        up, down, reason = verdict.up, verdict.down, verdict.reason
        flips = ", ".join([*(f"+{i}" for i in up[:8]), *(f"-{i}" for i in down[:8])])
        lines += [
            "",
            f"Gate: val routing (library score) {_f(library[0])} -> {_f(library[1])} "
            f"(n={self.current.n}; flipped {len(up)} up, {len(down)} down"
            f"{': ' + flips if flips else ''}); {decision} ({reason}).",
        ]
        lines.append(
            "Recall per skill on val: "
            + ", ".join(f"{n} {_f(b)} -> {_f(a)}" for n, (b, a) in recall.items())
            + "."
        )
        lines.append(
            "Own val prompts lost per skill (one-sided exact sign test of a loss): "
            + verdict.loss_line()
            + "."
        )
        lines.extend(honesty.lines())
        lines.append(f"Run {self.run_id}, step {self.step}, epoch {self.log.epoch}.")
        after = self.client.snapshot()
        calls = {
            role: after[role].replies - (before[role].replies if role in before else 0)
            for role in after
        }
        lines.append(
            f"Model calls: {sum(calls.values())} ("
            + ", ".join(f"{r} {n}" for r, n in sorted(calls.items()) if n)
            + ")."
        )
        return "\n".join(lines)

    # -- both halves ------------------------------------------------------------------------

    def body_epoch(self, epoch: int) -> None:
        """One body training epoch of every skill with a task set, between routing epochs
        (the lock is let go: the body run takes it). Logged as ``routing.body``; a replay
        finds the event and skips the training it records."""
        from skillvc.training.loop import train as train_body
        from skillvc.workspace.workspace import Workspace as Ws

        configs = self.config.all_skills() if self.config.many else [self.config]
        for c in configs:
            if not (c.tasks.train or c.tasks.path or c.tasks.skillopt_dir):
                continue
            name = c.skill_name or c.skill_names[0]
            self.log.step = None
            seq = self.log.seq + 1
            logged = self.store.query(
                "SELECT id FROM events WHERE run_id = ? AND seq = ? AND type = 'routing.body'",
                [self.run_id, seq],
            )
            if not logged:
                self.lock.close()  # let the body run take the writer lock
                try:
                    summary = train_body(
                        Ws(root=self.ws.root, config=c),
                        overrides={"train": {"epochs": 1}},
                        new=True,
                        progress=self.progress,
                    )
                finally:
                    self.lock.enter_context(self.store.writer_lock())
                payload = {
                    "skill": name,
                    "epoch": epoch,
                    "run": summary.run_id,
                    "baseline_val": summary.baseline_val,
                    "best_val": summary.best_val,
                    "accepted": summary.accepted,
                    "head": self.repo.head_sha(),
                }
            else:
                payload = {}
            event = self.log.emit("routing.body", payload)
            self.body_runs.append(
                {
                    k: event.payload.get(k)
                    for k in ("skill", "epoch", "run", "baseline_val", "best_val", "accepted")
                }
            )
            self.head = str(event.payload.get("head") or self.head)
            # The bodies changed; the descriptions did not (a chat selector reads only those).
            library = load_library(self.config, self.repo, self.head)
            if self.agent is not None and library.text_key != self.library.text_key:
                # An agent reads the whole SKILL.md: the next gates pair against the library
                # it will be given now.
                self.library = library
                self.current = self.evaluate(library, self.triggers.val, "val", "bodies")
            self.library = library


def power_note(n: int, alpha: float) -> str:
    """What the gate can see on ``n`` val prompts: the fewest net wins an accepted edit needs
    (the sign test at ``alpha`` with no prompt lost), as prompts and as library score."""
    wins = significance.wins_needed(alpha)
    test = f"sign test at alpha {significance.shown_alpha(alpha):g}"
    if n < wins:
        return (
            f"gate: no edit can be kept on {n} val prompts ({test}: {wins} prompts routed "
            "better and none worse at the least); add val prompts"
        )
    return (
        f"gate: an edit is kept when at least {wins} of the {n} val prompts route better and "
        f"none worse (+{wins / n:.3f} library score; more when some route worse), {test}"
    )


def _within(
    edits: Sequence[DescriptionEdit], budget: int, own: Sequence[DescriptionEdit]
) -> list[DescriptionEdit]:
    """The optimizer's first ``budget`` edits, then skillvc's own (each in a slot of its
    own: the induced description, then the quoted prompts)."""
    return [e for e in edits if e not in own][:budget] + [e for e in edits if e in own]


def _key(edit: DescriptionEdit) -> str:
    """What makes two description edits the same: the skill and the text, normalised."""
    return f"{edit.skill}\x1f{normalised(edit.after)}"


def brief(score: RoutingScore) -> dict[str, Any]:
    """A routing score for summaries: library score, its interval, n and per-skill P/R/F1."""
    d = score.to_dict()
    return {
        "library": d["library"],
        "library_interval": d["library_interval"],
        "n": d["n"],
        "errors": d["errors"],
        "skills": {
            n: {k: s[k] for k in ("precision", "recall", "f1")} for n, s in d["skills"].items()
        },
        "confusion": d["confusion"],
    }


def latest_routing(store: EventStore) -> dict[str, Any] | None:
    """The newest finished routing run's end (``routing.finished``), with its run id; None
    when the log has none. What the report shows beside the body scores."""
    found = store.events(types=[FINISHED], newest_first=True, limit=1)
    if not found:
        return None
    return {"run": found[0].run_id, **found[0].payload}


def routing_markdown(r: dict[str, Any]) -> list[str]:
    """The report's routing section: library score and per-skill F1 and recall."""
    before, after = r.get("before") or {}, r.get("after") or {}
    lines = [
        f"### Routing (run `{r['run']}`)",
        "",
        f"Library score on val {_f(before.get('library'))} -> {_f(after.get('library'))}"
        + (
            f", on test {_f((r.get('test_before') or {}).get('library'))} -> "
            f"{_f((r.get('test_after') or {}).get('library'))}"
            if r.get("test_after")
            else ""
        )
        + f"; {r.get('accepted', 0)} description edits accepted, {r.get('rejected', 0)} rejected.",
        "",
        "| skill | F1 before | F1 after | recall before | recall after |",
        "|---|---|---|---|---|",
    ]
    for name, a in (after.get("skills") or {}).items():
        b = (before.get("skills") or {}).get(name, {})
        lines.append(
            f"| {name} | {_f(b.get('f1'))} | {_f(a.get('f1'))} | {_f(b.get('recall'))} | "
            f"{_f(a.get('recall'))} |"
        )
    return lines


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def summary_lines(s: RoutingSummary) -> list[str]:
    """The end of ``train --routing``: routing before -> after beside the bodies' task scores."""
    if s.status == UP_TO_DATE:
        return [
            f"Nothing to do: routing run {s.run_id} already finished at HEAD with these "
            "settings and trigger set; pass --new to train again."
        ]
    lines = [
        f"routing run {s.run_id}: {s.steps} steps, {s.accepted} description edits accepted, "
        f"{s.rejected} rejected",
        f"library score on val {_f(s.before.get('library'))} -> {_f(s.after.get('library'))}"
        + (
            f"; on test {_f(s.test_before.get('library'))} -> {_f(s.test_after.get('library'))}"
            if s.test_before and s.test_after
            else ""
        ),
        f"  {'skill':<16} {'f1 before':>10} {'f1 after':>10} {'recall':>15}  task val",
    ]
    tasks: dict[str, str] = {}
    for run in s.body:
        tasks[str(run.get("skill"))] = f"{_f(run.get('baseline_val'))} -> {_f(run.get('best_val'))}"
    names = list((s.after.get("skills") or {}).keys())
    for name in names:
        b = (s.before.get("skills") or {}).get(name, {})
        a = (s.after.get("skills") or {}).get(name, {})
        lines.append(
            f"  {name[:16]:<16} {_f(b.get('f1')):>10} {_f(a.get('f1')):>10} "
            f"{_f(b.get('recall')) + ' -> ' + _f(a.get('recall')):>15}  {tasks.get(name, '-')}"
        )
    lines.append(
        f"model calls {s.calls} ({s.fresh_calls} made; "
        + ", ".join(f"{r} {n}" for r, n in s.calls_by_role.items())
        + f"), tokens {s.tokens:,}"
    )
    lines.append(
        "Review it: git log -p (accepted descriptions), skillvc log --rejected -p (refused "
        "ones), skillvc eval --routing (the confusion matrix)."
    )
    return lines
