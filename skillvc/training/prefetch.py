"""Model calls made ahead of the training loop: they warm the call cache, never the run's record.

The loop stays sequential and deterministic: each stage still asks for its calls in order and
logs what it gets. A prefetch only sends the same requests earlier, on its own threads and
through a forked client (its own statistics), so that when the loop asks, the answer is already
in the log and comes back as a cached reply. Events, decisions, commits and the final skill are
therefore the same with or without prefetching, and a resumed run replays exactly.

Two kinds of prefetch:
- certain: calls the loop makes whatever happens (the baseline test next to the baseline val,
  the first step's rollouts, the slow update's rollouts of both skills, the meta update);
- speculative: calls the loop makes only if a gate rejects its candidate (the next stage's
  rollouts with the current skill). When the gate accepts, the batch is ``waste``d: its calls
  are counted and reported, and never read by the loop.

Invariants:
- The loop calls ``wait(tag)`` before it asks for calls of a skill (``tag``) that may be in
  flight here, so no request is sent twice by one process.
- A failed prefetched call is neither logged nor acted on here (the loop makes the call itself
  and meets the error there), so a prefetch can never change what the run records; after a
  first failure nothing more is sent ahead, so an outage is not met twice.
- Speculative and prefetched calls run in a pool of their own (``workers`` threads), so they
  never queue in front of the gate's calls: up to twice ``workers`` requests may be in flight.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from skillvc.core.hashing import sha256_hex
from skillvc.models.calls import ModelClient
from skillvc.packages.packagefile import PackageFile
from skillvc.packages.render import TargetView
from skillvc.tasks.taskset import TaskItem
from skillvc.training.evaluate import rollout_request


@dataclass
class Batch:
    """Calls sent ahead under one tag (a skill's hash, or a name like ``meta``)."""

    tag: str
    client: ModelClient  # a fork: its statistics are this batch's calls only
    futures: list[Future[Any]]
    speculative: bool
    items: list[str] = field(default_factory=list)  # "split:item" of rollout batches
    wasted: bool = False

    def done(self) -> None:
        concurrent.futures.wait(self.futures)

    def fresh_calls(self) -> int:
        return self.client.totals().fresh


class Prefetcher:
    def __init__(
        self,
        client: ModelClient,
        workers: int,
        samples: int = 1,
        render: TargetView | None = None,
    ) -> None:
        self.client, self.samples, self.render = client, samples, render
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="skillvc-ahead")
        self.batches: list[Batch] = []
        self.sent: set[tuple[str, str, str]] = set()  # (skill hash, split, item id)
        # Set by the first failed call: an outage must not be met by every call sent ahead
        # too, so from then on only the loop sends (what is queued here is skipped).
        self.failed = threading.Event()

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # a stopped run: what has not started yet is not worth sending any more
            self.pool.shutdown(wait=True, cancel_futures=True)

    def rollouts(
        self,
        skill: str,
        items: Sequence[TaskItem],
        split: str,
        *,
        speculative: bool = False,
        known: Mapping[tuple[str, str, str], object] | None = None,
    ) -> Batch | None:
        """Send the target calls of ``items`` with ``skill`` (those not ``known`` nor sent)."""
        tag = sha256_hex(skill)
        todo = [
            it
            for it in items
            if (tag, split, it.id) not in self.sent
            and (known is None or (tag, split, it.id) not in known)
        ]
        if not todo:
            return None
        self.sent.update((tag, split, it.id) for it in todo)
        fork = self.client.fork()
        futures = [
            self.pool.submit(self._warm, fork, *rollout_request(skill, it, self.render), k)
            for it in todo
            for k in range(self.samples)
        ]
        batch = Batch(tag, fork, futures, speculative, [f"{split}:{it.id}" for it in todo])
        self.batches.append(batch)
        return batch

    def call(self, tag: str, fn: Callable[[ModelClient], object]) -> Batch:
        """Run ``fn`` with a forked client ahead of the loop (e.g. the meta update's call)."""
        fork = self.client.fork()
        batch = Batch(tag, fork, [self.pool.submit(self._quietly, fn, fork)], speculative=False)
        self.batches.append(batch)
        return batch

    def wait(self, tag: str) -> None:
        """Wait for every batch under ``tag`` (a skill's text or a name) to finish."""
        hashed = sha256_hex(tag)
        for b in self.batches:
            if b.tag in (tag, hashed):
                b.done()

    def waste(self, batches: Sequence[Batch | None]) -> tuple[list[str], int]:
        """Mark speculative batches as never to be used; returns their items and job count."""
        items: list[str] = []
        jobs = 0
        for b in batches:
            if b is not None:
                b.wasted = True
                items += b.items
                jobs += len(b.futures)
        return items, jobs

    def wasted_calls(self) -> int:
        """Calls that reached a model for a speculation that was not used (finished ones)."""
        return sum(b.fresh_calls() for b in self.batches if b.wasted)

    def wasted_cost(self) -> float:
        return sum(b.client.totals().cost_usd for b in self.batches if b.wasted)

    def close(self) -> None:
        for b in self.batches:
            b.done()
        self.pool.shutdown(wait=True)

    def _warm(
        self,
        client: ModelClient,
        messages: list[dict[str, str]],
        files: tuple[PackageFile, ...],
        sample: int,
    ) -> None:
        self._quietly(lambda c: c.call("target", messages, sample=sample, files=files), client)

    def _quietly(self, fn: Callable[[ModelClient], object], client: ModelClient) -> None:
        if self.failed.is_set():
            return
        try:
            fn(client)
        except Exception:  # noqa: BLE001 - the loop makes this call itself and meets the error
            self.failed.set()
