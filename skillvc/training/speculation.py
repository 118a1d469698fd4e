"""Prefetching and speculation behind a small interface the spine calls.

The spine asks for rollouts through ``rollouts`` and tells this part where it is
(``prefetch_start``, ``prefetch_epoch_start``, ``after_step``, ``after_epoch``); calls for what
comes next may go out early (``training/prefetch.py``), and a gate's acceptance makes some of
them useless (``waste`` logs how many). Requests change when they go out, never an event of the
run's sequence: each stage still asks for its calls itself, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from skillvc.core.events import Event
from skillvc.core.hashing import sha256_hex
from skillvc.core.pricing import cost_usd
from skillvc.tasks.taskset import TaskItem
from skillvc.training.budget import Budget
from skillvc.training.evaluate import (
    Rollout,
)
from skillvc.training.prefetch import CERTAIN, LATER, NEXT, SPECULATIVE, Batch


@dataclass
class Bet:
    """What one gate's speculation sent: rollouts with the current skill (used if it
    rejects) and with the candidate (used if it accepts; none is sent today)."""

    candidate: str
    on_current: list[Batch | None] = field(default_factory=list)
    on_candidate: list[Batch | None] = field(default_factory=list)


class Speculation(Budget):
    # Calls sent ahead (see training/prefetch.py) ----------------------------------------

    def prefetch(
        self,
        skill: str,
        items: Sequence[TaskItem],
        split: str,
        *,
        speculative: bool = False,
        rank: int | None = None,
    ) -> Batch | None:
        if self.config.target.mode == "batch" or self.t.executor != "threads":
            # Target calls go out as provider batches (for their price) or as executor tasks
            # (on other machines): sent ahead on the driver's threads they would bypass both.
            return None
        return self.ahead.rollouts(
            skill, items, split, speculative=speculative, known=self.evaluator.memo, rank=rank
        )

    def prefetch_start(self) -> None:
        """Calls the run makes whatever its gates decide: the seed skill on test, the first
        step's rollouts and, when epoch 1 ends with a slow update, its evaluation of the seed
        skill."""
        self.prefetch_epoch_start(1)  # first: step 1 waits for its rollouts, the test does not
        self.prefetch(self.ctx.base_skill, self.ctx.test, "test", rank=LATER)

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
        self.prefetch(self.state.skill, self.batches(epoch)[0], "train", rank=NEXT)
        if self.slow_update_due(epoch):
            self.prefetch(self.state.skill, self.slow_items, "train", rank=CERTAIN)

    def rollouts(self, skill: str, items: Sequence[TaskItem], split: str) -> list[Rollout]:
        """``evaluator.run`` once the calls sent ahead for these rollouts have come back."""
        self.ahead.wait_for(skill, items, split, helpers=self.pool)
        return self.evaluator.run(skill, items, split)

    def speculate(self, candidate: str, *, certain: bool = False) -> Bet:
        """Before a gate: send what the loop runs next with the current skill if it rejects
        (most gates reject), ranked last in the calls-ahead pool. A replayed gate that
        rejected (its decision is in the log), or one that has decided (``certain``), sends
        those calls as certain. Every speculation runs to its end, whatever the gate decides:
        the calls a run makes, wasted ones included, are then the same however often it is
        killed and resumed."""
        bet = Bet(candidate)
        if self.t.speculate:
            rank = NEXT if certain or self.logged_decision() == "rejected" else SPECULATIVE
            bet.on_current = self.send_upcoming(self.state.skill, rank)
        return bet

    def send_upcoming(self, skill: str, rank: int) -> list[Batch | None]:
        speculative = rank == SPECULATIVE
        return [
            self.prefetch(skill, items, split, speculative=speculative, rank=rank)
            for items, split in self.upcoming
        ]

    def settle(self, bet: Bet, kind: str, decision: str, kept: str, gate_event: Event) -> None:
        """After a gate: record the rollouts its bet sent that the run will not use (``kept``:
        the candidate as committed, which attribution may have pruned)."""
        s = self.state
        lost: list[Batch | None] = []
        if decision == "rejected":
            lost = bet.on_candidate
        else:
            current = bet.on_current
            if current and kind == "step" and s.skill == self.epoch_start:
                # The epoch's slow update still runs the epoch-start skill (this one) on the
                # slow items: rollouts sent ahead for them are used, not wasted.
                current = [
                    b
                    for b, (items, _) in zip(current, self.upcoming, strict=True)
                    if items is not self.slow_items
                ]
            lost = current + (bet.on_candidate if kept != bet.candidate else [])
        self.waste(lost, gate_event)

    def logged_decision(self) -> str | None:
        """The decision of the gate about to run, when a resumed run replays it (None: it
        has not been made yet)."""
        if not self.ctx.resumed:
            return None
        rows = self.store.query(
            "SELECT json_extract(payload, '$.decision') AS decision FROM events "
            "WHERE run_id = ? AND type = 'gate' AND seq > ? ORDER BY seq LIMIT 1",
            (self.ctx.run_id, self.log.seq),
        )
        return str(rows[0]["decision"]) if rows else None

    def after_accept(self, skill: str) -> None:
        """``skill`` (a candidate just accepted) becomes the current skill: what the loop runs
        next with it is certain now. It goes out here, on the calls-ahead pool, while the loop
        commits it and runs its val pass (free after a gate, a real pass after a forced
        update), so neither blocks the next stage."""
        for items, split in self.upcoming:
            if items is self.slow_items:  # they wait for the epoch's end
                self.prefetch(skill, items, split, rank=CERTAIN)
                continue
            self.prefetch(skill, items, split, rank=NEXT)
            # The loop's pool is idle while it commits: it takes the rollouts the next stage
            # waits for as well, as it would once the loop reached them.
            self.ahead.lend(skill, items, split, self.pool)

    def after_step(
        self, epoch: int, following: Sequence[Sequence[TaskItem]]
    ) -> list[tuple[Sequence[TaskItem], str]]:
        """What the loop runs with the current skill after a step that keeps it."""
        if following:
            return [(following[0], "train")]
        if self.slow_update_due(epoch):
            return [(self.slow_items, "train")]
        return self.after_epoch(epoch)

    def after_epoch(self, epoch: int) -> list[tuple[Sequence[TaskItem], str]]:
        """What the loop runs with the current skill after an epoch end that keeps it."""
        if epoch < self.t.epochs:
            upcoming: list[tuple[Sequence[TaskItem], str]] = [(self.batches(epoch + 1)[0], "train")]
            if self.slow_update_due(epoch + 1):
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
