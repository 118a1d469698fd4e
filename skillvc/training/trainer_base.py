"""What every part of the ``Trainer`` shares: the run's settings, state and log, set up once.

``TrainerBase.__init__`` is the trainer's constructor; the mixins above it (``budget``,
``speculation``, ``summary``, ``gating``, ``updates``) and the spine in ``loop`` read these
attributes. Each mixin calls only its own methods and those of the ones below it, in the order
``TrainerBase`` <- ``Budget`` <- ``Speculation`` <- ``Summaries`` <- ``Gating`` <- ``Updates``
<- ``loop.Trainer``.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

from skillvc.core.config import Config
from skillvc.core.progress import Progress
from skillvc.core.store import EventStore
from skillvc.models.calls import RoleStats
from skillvc.packages import SkillPackage, skill_file_text
from skillvc.packages.render import chat_rendering, config_view
from skillvc.skill.skilldoc import SkillDocument
from skillvc.tasks.taskset import TaskItem
from skillvc.training import commits, significance
from skillvc.training.evaluate import (
    Evaluator,
    Rollout,
    mean,
)
from skillvc.training.prefetch import Prefetcher
from skillvc.training.setup import RunContext
from skillvc.training.state import RunState
from skillvc.workspace.workspace import Workspace

Usage = Mapping[str, RoleStats]


def fmt_val(value: float | None) -> str:
    """A val score for a progress line; None when no item could be scored (all errors)."""
    return "n/a" if value is None else f"{value:.3f}"


class TrainerBase:
    # Set by ``loop.Trainer.train`` for the run's duration (the pools it opens and closes).
    pool: ThreadPoolExecutor
    ahead: Prefetcher
    committer: ThreadPoolExecutor  # writes a rejected candidate's commit beside the loop
    evaluator: Evaluator
    baseline: list[Rollout]

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
        # A gate's items between looks: the run's recipe, not this process's workers (a resumed
        # run may have others), clamped as the run's first process clamped its workers (a
        # resumed run's servers are the recorded ones).
        self.look_chunk = min([ctx.look_chunk, *slots])
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
        # The gate's confidence: as set, else with attribution 0.8 (0.9 where its tests run in
        # rounds), and 0 (any strict gain, the paper's gate) without.
        in_rounds = significance.tests_in_rounds(config)
        self.confidence = significance.effective_confidence(self.t, rounds=in_rounds)
        self.gains: list[dict[str, Any]] = []  # see RunSummary.gains
        # The alpha of each look of a test (more rounds of val only on a stochastic target).
        rounds = self.t.gate_rounds if in_rounds else 1
        self.alphas = significance.look_alphas(significance.alpha_of(self.confidence), rounds)
        # The round of val draws that stands for the current skill in its gates: the seed's
        # first; an accepted candidate's on a stochastic target, a fresh one (its first-round
        # draws got it accepted: they are the lucky ones, and would make every later
        # candidate look worse than it is).
        self.current_round = 0
        # A rejected candidate's commit, written beside the loop until ``finish_commit`` logs
        # it (training/commits.py).
        self.pending_commit: commits.Pending | None = None

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

    def mean_of(self, rollouts: Sequence[Rollout]) -> float | None:
        return mean([r.value(self.t.gate_metric) for r in rollouts if r.ok])

    # Bookkeeping -------------------------------------------------------------------------

    def finish_commit(self) -> None:
        """Log the pending commit's ``commit.done``, once its write has ended: before the next
        gate and at the run's end (a fixed place in the run's sequence)."""
        if self.pending_commit is not None:
            self.pending_commit.finish()
            self.pending_commit = None

    def slow_update_due(self, epoch: int) -> bool:
        """Whether ``epoch``'s end runs the slow update (``slow_update_from_epoch``)."""
        return self.t.slow_update and epoch >= self.t.slow_update_from_epoch

    def batches(self, epoch: int) -> list[list[TaskItem]]:
        order = list(self.ctx.train)
        random.Random(f"{self.t.seed}:{epoch}").shuffle(order)
        size = self.t.batch_size
        return [order[i : i + size] for i in range(0, len(order), size)]
