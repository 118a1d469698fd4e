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
- That pool serves by priority, not arrival: each call is sent with the rank of the stage that
  needs it (``NEXT`` before ``CERTAIN`` before ``LATER`` before ``SPECULATIVE``; arrival order
  within a rank), and a call the loop waits for jumps to the front. ``wait`` waits for exactly
  the calls a stage consumes, never for other batches of the same skill.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
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
from skillvc.training.evaluate import rollout_params, rollout_request

# Ranks of the calls sent ahead, most urgent first (see the module docstring).
NOW = -1  # a call the loop is waiting for
NEXT = 0  # what the next dependent stage consumes
CERTAIN = 1  # made whatever happens, but after the next stage
LATER = 2  # made whatever happens, at the end of the run (the final test)
SPECULATIVE = 3  # made only if a gate decides one way


class _Job:
    """One call of the pool: run at most once, by whichever queue entry reaches it first."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn
        self.future: Future[Any] = Future()
        self.taken = False


class PriorityPool:
    """A thread pool that starts the most urgent queued job first (a stable heap by rank).

    ``promote`` moves queued jobs to the front: a second heap entry for the same job, and
    whichever entry comes first runs it (``_Job.taken``)."""

    def __init__(self, workers: int, name: str) -> None:
        self._heap: list[tuple[int, int, _Job | None]] = []
        self._order = itertools.count()
        self._ready = threading.Condition()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(max(1, workers))
        ]
        for t in self._threads:
            t.start()

    def submit(self, rank: int, fn: Callable[[], object]) -> _Job:
        job = _Job(fn)
        with self._ready:
            if self._closed:
                job.future.cancel()
                return job
            heapq.heappush(self._heap, (rank, next(self._order), job))
            self._ready.notify()
        return job

    def promote(self, jobs: Sequence[_Job]) -> None:
        with self._ready:
            for job in jobs:
                if not job.taken and not self._closed:
                    heapq.heappush(self._heap, (NOW, next(self._order), job))
            self._ready.notify_all()

    def run_here(self, job: _Job) -> None:
        """Run a queued job on the calling thread (a thread of the loop's own pool that would
        otherwise wait for it); nothing when a thread of this pool took it first."""
        with self._ready:
            if job.taken:
                return
            job.taken = True
        if job.future.set_running_or_notify_cancel():
            try:
                job.future.set_result(job.fn())
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on it
                job.future.set_exception(exc)

    def shutdown(self, *, cancel: bool) -> None:
        """Stop taking jobs (``cancel``: drop the queued ones) and wait for the running ones."""
        with self._ready:
            if cancel:
                for _, _, job in self._heap:
                    if job is not None and not job.taken:
                        job.taken = True
                        job.future.cancel()
                self._heap.clear()
            self._closed = True
            for _ in self._threads:  # one stop mark per thread, after every queued job
                heapq.heappush(self._heap, (SPECULATIVE + 1, next(self._order), None))
            self._ready.notify_all()
        for t in self._threads:
            t.join()

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._heap:
                    self._ready.wait()
                _, _, job = heapq.heappop(self._heap)
                if job is None:
                    return
                if job.taken:
                    continue
                job.taken = True
            if not job.future.set_running_or_notify_cancel():
                continue
            try:
                job.future.set_result(job.fn())
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on it
                job.future.set_exception(exc)


@dataclass
class Batch:
    """Calls sent ahead under one tag (a skill's hash, or a name like ``meta``)."""

    tag: str
    client: ModelClient  # a fork: its statistics are this batch's calls only
    futures: list[Future[Any]]
    speculative: bool
    items: list[str] = field(default_factory=list)  # "split:item" of rollout batches
    wasted: bool = False
    jobs: list[_Job] = field(default_factory=list)

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
        self.pool = PriorityPool(workers, "skillvc-ahead")
        self.batches: list[Batch] = []
        # (skill hash, split, item id) -> the jobs of that rollout's samples
        self.sent: dict[tuple[str, str, str], list[_Job]] = {}
        # Set by the first failed call: an outage must not be met by every call sent ahead
        # too, so from then on only the loop sends (what is queued here is skipped).
        self.failed = threading.Event()
        target = client.configs.get("target")
        self.environment = bool(target is not None and target.environment)

    def __enter__(self) -> Prefetcher:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # a stopped run: what has not started yet is not worth sending any more
            self.pool.shutdown(cancel=True)

    def rollouts(
        self,
        skill: str,
        items: Sequence[TaskItem],
        split: str,
        *,
        speculative: bool = False,
        known: Mapping[tuple[str, str, str], object] | None = None,
        rank: int | None = None,
    ) -> Batch | None:
        """Send the target calls of ``items`` with ``skill`` (those not ``known`` nor sent),
        ranked ``rank`` (default: ``SPECULATIVE`` when ``speculative``, else ``NEXT``)."""
        if rank is None:
            rank = SPECULATIVE if speculative else NEXT
        tag = sha256_hex(skill)
        todo = [
            it
            for it in items
            if (tag, split, it.id) not in self.sent
            and (known is None or (tag, split, it.id) not in known)
        ]
        if not todo:
            return None
        fork = self.client.fork()
        jobs: list[_Job] = []
        for it in todo:
            messages, files = rollout_request(skill, it, self.render)
            params = rollout_params(it, self.environment)
            mine = [
                self.pool.submit(rank, self._warm_job(fork, messages, files, k, params))
                for k in range(self.samples)
            ]
            self.sent[(tag, split, it.id)] = mine
            jobs += mine
        futures = [j.future for j in jobs]
        labels = [f"{split}:{it.id}" for it in todo]
        batch = Batch(tag, fork, futures, speculative, labels, jobs=jobs)
        self.batches.append(batch)
        return batch

    def call(self, tag: str, fn: Callable[[ModelClient], object]) -> Batch:
        """Run ``fn`` with a forked client ahead of the loop (e.g. the meta update's call)."""
        fork = self.client.fork()
        job = self.pool.submit(NEXT, lambda: self._quietly(fn, fork))
        batch = Batch(tag, fork, [job.future], speculative=False, jobs=[job])
        self.batches.append(batch)
        return batch

    def wait(self, tag: str) -> None:
        """Wait for every batch under ``tag`` (a name like ``meta``) to finish."""
        hashed = sha256_hex(tag)
        for b in self.batches:
            if b.tag in (tag, hashed):
                self.pool.promote(b.jobs)
                b.done()

    def wait_for(
        self,
        skill: str,
        items: Sequence[TaskItem],
        split: str,
        helpers: ThreadPoolExecutor | None = None,
    ) -> None:
        """Wait for the calls sent ahead for exactly these rollouts: queued ones go first, and
        the idle threads of ``helpers`` (the loop's pool) take them too, so a stage's calls
        run on both pools at once."""
        jobs = self.lend(skill, items, split, helpers)
        concurrent.futures.wait([j.future for j in jobs])

    def lend(
        self,
        skill: str,
        items: Sequence[TaskItem],
        split: str,
        helpers: ThreadPoolExecutor | None,
    ) -> list[_Job]:
        """``wait_for`` without the wait: the calls sent ahead for these rollouts go first,
        and the idle threads of ``helpers`` (the loop's pool, lent while the loop commits a
        skill) take the queued ones now; returns their jobs."""
        tag = sha256_hex(skill)
        jobs = [j for it in items for j in self.sent.get((tag, split, it.id), ())]
        self.pool.promote(jobs)
        if helpers is not None:
            for job in jobs:
                if not job.taken:
                    helpers.submit(self.pool.run_here, job)
        return jobs

    def waste(self, batches: Sequence[Batch | None]) -> tuple[list[str], int]:
        """Mark speculative batches as never to be used; returns their items and job count."""
        items: list[str] = []
        jobs = 0
        for b in batches:
            if b is None:
                continue
            # Not dropped: the calls a run makes must not depend on timing (a killed and
            # resumed run makes the same ones as an uninterrupted run).
            b.wasted = True
            items += b.items
            jobs += len(b.jobs)
        return items, jobs

    def wasted_calls(self) -> int:
        """Calls that reached a model for a speculation that was not used (finished ones)."""
        return sum(b.fresh_calls() for b in self.batches if b.wasted)

    def wasted_cost(self) -> float:
        return sum(b.client.totals().cost_usd for b in self.batches if b.wasted)

    def close(self) -> None:
        for b in self.batches:
            b.done()
        self.pool.shutdown(cancel=False)

    def _warm_job(
        self,
        client: ModelClient,
        messages: list[dict[str, Any]],
        files: tuple[PackageFile, ...],
        sample: int,
        params: dict[str, Any] | None,
    ) -> Callable[[], None]:
        def warm() -> None:
            # The Evaluator's request exactly (its item files, an environment's item), or the
            # call sent ahead answers a key the loop never asks for.
            self._quietly(
                lambda c: c.call("target", messages, sample=sample, files=files, params=params),
                client,
            )

        return warm

    def _quietly(self, fn: Callable[[ModelClient], object], client: ModelClient) -> None:
        if self.failed.is_set():
            return
        try:
            fn(client)
        except Exception:  # noqa: BLE001 - the loop makes this call itself and meets the error
            self.failed.set()
