"""Rollouts (the forward pass) and the gate.

Invariants:
- Results come back in item order whatever order the threads finish in, so everything derived
  from them (events, prompts, decisions) is deterministic and a resumed run replays exactly.
- A rollout whose model call failed carries an ``error`` and no score. It is never a 0: the gate
  leaves such items out of the paired comparison, and the loop stops the run when too many fail.
- The gate accepts only a strict improvement of the val mean (ties reject). With early stopping
  it stops as soon as the items left cannot change the decision, and that decision is provably
  the one a full evaluation would reach: each unevaluated item can move the paired difference
  only within [-current_i, 1 - current_i] (or not at all when it errors).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from skillvc.core.errors import AuthenticationFailed
from skillvc.core.hashing import sha256_hex
from skillvc.core.progress import Progress
from skillvc.models.calls import CallFailed, ModelClient, Reply, package_files
from skillvc.models.executors import Call, CallFailure, Executor, run_call
from skillvc.packages.packagefile import PackageFile
from skillvc.packages.render import TargetInput, TargetView
from skillvc.tasks.scorers import Acted, Scored, Scorer, score_item
from skillvc.tasks.taskset import TaskItem
from skillvc.training import significance

EPS = 1e-9


@dataclass(frozen=True)
class Rollout(Scored):
    item_id: str
    skill: str  # sha256 of the skill text
    output: str | None
    hard: float | None
    soft: float | None
    error: str | None = None
    call_key: str | None = None
    tokens: int = 0
    cost_usd: float | None = 0.0
    reason: str | None = None  # the scorer's explanation of the score, when it gives one
    # Agent harnesses: did the agent load the skill, and what it did (a blob hash).
    activated: bool | None = None
    trajectory: str | None = None


@dataclass
class Evaluator:
    """Runs items with a skill through the target, memoised per (skill, item) within a run.

    With ``samples`` > 1 each item is run that many times (sample index 0..k-1, each its own
    cached call) and its hard and soft scores are the means over the samples: a gate then
    compares expected scores rather than single draws. Any failed sample makes the item an
    error, never a partial score.
    """

    client: ModelClient
    scorer: Scorer
    pool: ThreadPoolExecutor
    judge: Callable[[str, str], str] | None = None
    on_rollouts: Callable[[str, Sequence[Rollout]], None] | None = None
    scorer_options: Mapping[str, Any] | None = None
    samples: int = 1
    progress: Progress = field(default_factory=Progress.off)  # advanced once per fresh job
    # Keyed by split too: ids are unique only within a split when allow_overlap is set (two
    # files both numbering their items 1, 2, 3...), and a val item must never be given the
    # rollout of the train item that happens to share its id.
    memo: dict[tuple[str, str, str], Rollout] = field(default_factory=dict)
    calls: int = 0
    # None: calls run in ``pool`` as they always have. Otherwise uncached target calls go out
    # through it and come back in item order (see skillvc.models.executors); scoring stays here.
    executor: Executor | None = None
    # A skill package's view (bundle -> what the target gets; skillvc.packages.render), or None
    # for a single-file skill, whose text is the system prompt as is.
    render: TargetView | None = None

    @property
    def environment(self) -> bool:
        """The target plays a ``[tasks] environment``: its items go with each request."""
        target = self.client.configs.get("target")
        return bool(target is not None and target.environment)

    def __post_init__(self) -> None:
        target = self.client.configs.get("target")
        if self.executor is None and target is not None and target.mode == "batch":
            from skillvc.models.batch import batch_executor

            self.executor = batch_executor(self.client.store, target, self.client.run_id)

    def pending(self, skill: str, items: Sequence[TaskItem], split: str, round: int = 0) -> int:
        """How many jobs (item x sample) ``run`` would do for these items: a stage's total."""
        skill_hash, split = sha256_hex(skill), resampled(split, round)
        return self.samples * sum(1 for it in items if (skill_hash, split, it.id) not in self.memo)

    def run(
        self, skill: str, items: Sequence[TaskItem], split: str, round: int = 0
    ) -> list[Rollout]:
        """Rollouts of ``items`` with ``skill``. ``round`` > 0: fresh draws of a stochastic
        target (sample indices after the first rounds'), logged as split ``<split>:<round>``."""
        skill_hash, split = sha256_hex(skill), resampled(split, round)
        todo = [it for it in items if (skill_hash, split, it.id) not in self.memo]
        first = round * self.samples
        jobs = [(it, first + k) for it in todo for k in range(self.samples)]

        def job(item: TaskItem, sample: int) -> Rollout:
            rollout = self._one(skill, skill_hash, item, sample)
            self.progress.advance()
            return rollout

        if self.executor is None:
            results = list(self.pool.map(lambda j: job(*j), jobs))
        else:
            results = self._run_out(skill, skill_hash, jobs)
        fresh = [
            _combine(results[i * self.samples : (i + 1) * self.samples]) for i in range(len(todo))
        ]
        for r in fresh:
            self.memo[(skill_hash, split, r.item_id)] = r
        self.calls += len(results)
        if fresh and self.on_rollouts is not None:
            self.on_rollouts(split, fresh)
        return [self.memo[(skill_hash, split, it.id)] for it in items]

    def _one(self, skill: str, skill_hash: str, item: TaskItem, sample: int) -> Rollout:
        try:
            messages, files = rollout_request(skill, item, self.render)
            params = rollout_params(item, self.environment)
            reply = self.client.call("target", messages, sample=sample, files=files, params=params)
        except CallFailed as exc:
            return Rollout(item.id, skill_hash, None, None, None, error=exc.message)
        return self._score(skill_hash, item, reply)

    def _run_out(
        self, skill: str, skill_hash: str, jobs: Sequence[tuple[TaskItem, int]]
    ) -> list[Rollout]:
        """``run``'s jobs through the executor: the log answers what it can, the rest goes out
        in one ``map``, and the answers are recorded in item order."""
        assert self.executor is not None
        requests = []
        for it, k in jobs:
            messages, files = rollout_request(skill, it, self.render)
            params = rollout_params(it, self.environment)
            requests.append(
                self.client.request("target", messages, sample=k, files=files, params=params)
            )
        replies: list[Reply | CallFailed | None] = []
        for req in requests:
            try:
                replies.append(self.client.from_log(req))
            except CallFailed as exc:  # a failure a resumed run replays
                replies.append(exc)
        fresh = [i for i, r in enumerate(replies) if r is None]
        for i in fresh:
            self.client.admit(requests[i])
        config = self.client.configs["target"]
        outcomes = self.executor.map(run_call, [Call(config, requests[i]) for i in fresh])
        for i, outcome in zip(fresh, outcomes, strict=True):
            if isinstance(outcome, CallFailure):
                error = self.client.record_failure(
                    requests[i],
                    outcome.error,
                    kind=outcome.kind,
                    transient=outcome.transient,
                    refused=outcome.refused,
                )
                if isinstance(error, AuthenticationFailed):
                    raise error
                replies[i] = error
            else:
                replies[i] = self.client.record(requests[i], outcome)

        def score(i: int) -> Rollout:
            item, reply = jobs[i][0], replies[i]
            self.progress.advance()
            if isinstance(reply, CallFailed):
                return Rollout(item.id, skill_hash, None, None, None, error=reply.message)
            assert reply is not None
            self.client.count("target", reply)
            return self._score(skill_hash, item, reply)

        return list(self.pool.map(score, range(len(jobs))))

    def _score(self, skill_hash: str, item: TaskItem, reply: Reply) -> Rollout:
        acted = Acted.of(reply.meta, self.client.store.get_blob)
        try:
            score = score_item(
                item, reply.text, self.scorer, self.scorer_options, judge=self.judge, acted=acted
            )
        except CallFailed as exc:  # the judge's model call failed: an error, never a score
            return Rollout(item.id, skill_hash, reply.text, None, None, error=exc.message)
        return Rollout(
            item.id,
            skill_hash,
            reply.text,
            float(score.hard),
            float(score.soft),
            call_key=reply.key,
            tokens=reply.prompt_tokens + reply.completion_tokens,
            cost_usd=reply.cost_usd,
            reason=score.detail or reply.meta.get("failure") or None,
            activated=reply.meta.get("activated"),
            trajectory=reply.meta.get("trajectory"),
        )


def resampled(split: str, round: int) -> str:
    """The split a resampling round's rollouts are kept and logged under (``val:1``, ...)."""
    return split if round == 0 else f"{split}:{round}"


def rollout_request(
    skill: str, item: TaskItem, view: TargetView | None = None
) -> tuple[list[dict[str, Any]], tuple[PackageFile, ...]]:
    """The target's request for one item, as (messages, files): the skill is the system prompt
    and there are no files; a package goes through its ``view`` (skillvc.packages.render): a
    chat rendering, or SKILL.md with the other package files and the carried ones to install
    beside it (sorted by path, as ``CallRequest.files`` keeps them). An item's images go with
    its input as content parts (``skillvc.models.tools.spec``)."""
    target = TargetInput(skill) if view is None else view(skill)
    user: Any = item.input
    if item.images:
        user = [{"type": "text", "text": item.input}] + [
            {"type": "image", "media_type": media, "data": data} for _, media, data in item.images
        ]
    messages = [
        {"role": "system", "content": target.system},
        {"role": "user", "content": user},
    ]
    if not target.system:  # no skill at all (eval --baseline none): no system prompt either
        messages = messages[1:]
    return messages, package_files([*target.files, *target.carried])


def rollout_params(item: TaskItem, environment: bool) -> dict[str, Any] | None:
    """What a tool-using rollout needs of its item besides its input (``models.tools.backend``):
    the files to copy into its scratch directory and, for an environment, the item itself. In
    the request's parameters, so in its cache key; None when there is nothing to add."""
    params: dict[str, Any] = {}
    if item.files:
        params["item_files"] = [{"path": p, "sha256": h} for p, h in item.files]
    if environment:
        params["item"] = {
            "id": item.id,
            "input": item.input,
            "targets": list(item.targets),
            "metadata": dict(item.metadata),
        }
    return params or None


def _combine(samples: Sequence[Rollout]) -> Rollout:
    """One rollout from an item's samples: mean scores, the first sample's output and call."""
    first = samples[0]
    if len(samples) == 1:
        return first
    failed = next((r for r in samples if not r.ok), None)
    if failed is not None:
        return failed
    costs = [r.cost_usd for r in samples]
    return dataclasses.replace(
        first,
        hard=math.fsum(r.hard or 0.0 for r in samples) / len(samples),
        soft=math.fsum(r.soft or 0.0 for r in samples) / len(samples),
        tokens=sum(r.tokens for r in samples),
        cost_usd=None if None in costs else math.fsum(c or 0.0 for c in costs),
    )


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


@dataclass(frozen=True)
class GateResult:
    decision: str  # accepted | rejected
    metric: str
    before: float | None  # current skill's mean over the compared val items
    after: float | None  # candidate's mean over the items it was evaluated on
    after_bound: float | None  # best full mean the candidate could still have reached
    n: int  # val items the current skill has a score for
    n_evaluated: int  # candidate rollouts actually run
    early_stopped: bool
    items: list[dict[str, Any]]
    gained: list[str]
    lost: list[str]
    errors: int
    p_value: float | None = None  # one-sided: "the candidate is not better" (None: not tested)
    test: str | None = None  # "sign" (exact, 0/1 differences), "weighted sign" (rounds), "normal"
    # Passes over val (> 1: more rounds on a stochastic target) and the discordant items of
    # all of them, when more than one ran.
    rounds: int = 1
    discordant: tuple[int, int] | None = None
    # The candidate gave the very same answer as the current skill on every val item it ran
    # (its first pass): the skill's change reached no answer (issue 46).
    changed_nothing: bool = False

    @property
    def counts(self) -> tuple[int, int]:
        """(up, down): the discordant items of every round, or of the one pass."""
        return self.discordant or (len(self.gained), len(self.lost))

    @property
    def calls_saved(self) -> int:
        return max(0, self.n - self.n_evaluated)

    def payload(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "metric": self.metric,
            "before": {"mean": self.before, "n": self.n},
            "after": {"mean": self.after, "n": self.n_evaluated, "bound": self.after_bound},
            "early_stopped": self.early_stopped,
            "items": self.items,
            "flipped": {"gained": self.gained, "lost": self.lost},
            "errors": self.errors,
            "p_value": self.p_value,
            "test": self.test,
            **(
                {"rounds": self.rounds, "discordant": list(self.discordant)}
                if self.discordant is not None
                else {}
            ),
        }


def scan(
    current: Sequence[float | None],
    evaluate: Callable[[int, int], Sequence[float | None]],
    *,
    early_stop: bool,
    chunk: int,
    futile: Callable[[int], bool] | None = None,
) -> tuple[float, int, bool]:
    """Evaluate the candidate chunk by chunk; return (paired difference, evaluated, early).

    ``current[i]`` is the current skill's score on item i (None: it errored); ``evaluate(a, b)``
    scores the candidate on items a..b-1 (None for an error). Stops early only when even a
    perfect score on every item left could not make the difference strictly positive, or when
    ``futile(stop)`` says the items from ``stop`` on cannot make it significant.
    """
    diff, n = 0.0, len(current)
    size = max(1, chunk) if early_stop else max(1, n)
    for start in range(0, n, size):
        stop = min(n, start + size)
        for i, value in zip(range(start, stop), evaluate(start, stop), strict=True):
            was = current[i]
            if value is not None and was is not None:
                diff += value - was
        rest = [c for c in current[stop:] if c is not None]
        if early_stop and rest and diff + math.fsum(1 - c for c in rest) <= EPS:
            return diff, stop, True
        if early_stop and futile is not None and stop < n and futile(stop):
            return diff, stop, True
    return diff, n, False


def gate(
    evaluator: Evaluator,
    current: str,
    candidate: str,
    val: Sequence[TaskItem],
    *,
    metric: str,
    early_stop: bool,
    chunk: int,
    confidence: float = 0.0,
    sequential: bool = False,
    current_round: int = 0,
    candidate_round: int = 0,
) -> GateResult:
    """Candidate vs current on val: accept only a strict improvement of the paired mean.

    With ``confidence`` > 0 the improvement must also be significant: the one-sided p-value of
    "the candidate is not better" must be at most 1 - confidence. Early stopping stays exact,
    because it only rejects candidates that cannot even reach a positive difference, which
    both rules require. ``sequential`` (attribution's gate) also stops once a significant gain
    is out of reach on 0/1 scores (the exact sign test with every item left flipping up), exact
    for the same reason. (A certain acceptance is still evaluated in full: the candidate
    becomes the current skill, whose scores the next gate needs anyway.)
    """
    # ``current_round``: which draws of a stochastic target stand for the current skill (not
    # the ones that got it accepted, which are biased in its favour); ``candidate_round``: the
    # candidate's (a pruned candidate's check for harm draws the ones it will keep as the
    # current skill).
    cur = {r.item_id: r for r in evaluator.run(current, val, "val", current_round)}
    cand: dict[str, Rollout] = {}

    def score(it: TaskItem) -> float | None:
        return cur[it.id].value(metric) if cur[it.id].ok else None

    def rank(it: TaskItem) -> float:
        value = score(it)
        return 2.0 if value is None else value

    # Items the current skill fails hold all the candidate's upside, so they go first: once
    # they are evaluated without a net gain, nothing left can make the candidate better.
    order = sorted(val, key=rank)

    def evaluate(a: int, b: int) -> list[float | None]:
        out = evaluator.run(candidate, order[a:b], "val", candidate_round)
        cand.update((r.item_id, r) for r in out)
        return [r.value(metric) if r.ok else None for r in out]

    current_values = [score(it) for it in order]

    def futile(stop: int) -> bool:
        """No significant gain can come from the items from ``stop`` on (0/1 scores only)."""
        known: list[tuple[float, float]] = []
        for i, it in enumerate(order[:stop]):
            was = current_values[i]
            if was is not None and cand[it.id].ok:
                known.append((was, cand[it.id].value(metric)))
        if any(v not in (0.0, 1.0) for pair in known for v in pair):
            return False
        up = sum(1 for was, now in known if now > was)
        down = sum(1 for was, now in known if now < was)
        can_up = sum(1 for c in current_values[stop:] if c is not None and c < 1)
        return not significance.significant(significance.sign_test_p(up + can_up, down), alpha)

    alpha = significance.alpha_of(confidence)
    diff, _, early = scan(
        current_values,
        evaluate,
        early_stop=early_stop,
        chunk=chunk,
        futile=futile if sequential and confidence > 0 and evaluator.samples == 1 else None,
    )
    scored = [it.id for it in val if cur[it.id].ok]
    pairs = [i for i in scored if i in cand and cand[i].ok]
    unevaluated = [i for i in scored if i not in cand]
    bound = None
    if pairs or unevaluated:
        best = math.fsum(cand[i].value(metric) for i in pairs) + len(unevaluated)
        bound = best / (len(pairs) + len(unevaluated))
    differences = [cand[i].value(metric) - cur[i].value(metric) for i in pairs]
    p_value, test = (None, None) if early else one_sided_p_value(differences)
    improved = diff > EPS and (
        confidence <= 0 or (p_value is not None and p_value <= 1 - confidence + EPS)
    )
    return GateResult(
        decision="accepted" if improved else "rejected",
        metric=metric,
        before=mean([cur[i].value(metric) for i in scored]),
        after=mean([cand[i].value(metric) for i in pairs]),
        after_bound=bound,
        n=len(scored),
        n_evaluated=len(cand),
        early_stopped=early,
        items=[
            {"id": i, "before": cur[i].value(metric), "after": cand[i].value(metric)} for i in pairs
        ],
        gained=[i for i in pairs if (cur[i].hard or 0) < 1 <= (cand[i].hard or 0)],
        lost=[i for i in pairs if (cand[i].hard or 0) < 1 <= (cur[i].hard or 0)],
        errors=sum(1 for r in cand.values() if not r.ok) + len(val) - len(scored),
        p_value=p_value,
        test=test,
        changed_nothing=bool(pairs)
        and all(cand[i].output == cur[i].output for i in pairs)
        and not any(differences),
    )


def discordant_items(
    evaluator: Evaluator,
    better: str,
    worse: str,
    val: Sequence[TaskItem],
    *,
    metric: str,
    round: int,
    worse_round: int | None = None,
) -> tuple[list[TaskItem], list[TaskItem]]:
    """(items ``better`` gets right and ``worse`` wrong, the reverse) in one round of val.
    ``worse_round``: the round of ``worse``'s draws, when not ``round``."""
    a = evaluator.run(better, val, "val", round)
    b = evaluator.run(worse, val, "val", round if worse_round is None else worse_round)
    up: list[TaskItem] = []
    down: list[TaskItem] = []
    for it, x, y in zip(val, a, b, strict=True):
        if x.ok and y.ok:
            right_x, right_y = x.value(metric) >= 1, y.value(metric) >= 1
            if right_x and not right_y:
                up.append(it)
            elif right_y and not right_x:
                down.append(it)
    return up, down


def focus_items(val: Sequence[TaskItem], flipped: Sequence[str], least: int = 20) -> list[TaskItem]:
    """The val items further rounds of a test run on (a stochastic target): those the first
    round found discordant, where the edits act, then others in val order up to ``least``."""
    chosen = set(flipped)
    items = [it for it in val if it.id in chosen]
    for it in val:
        if len(items) >= least:
            break
        if it.id not in chosen:
            items.append(it)
    return items


def more_rounds(
    evaluator: Evaluator,
    better: str,
    worse: str,
    items: Sequence[TaskItem],
    *,
    metric: str,
    up: int,
    down: int,
    alphas: Sequence[float],
    current_round: int = 0,
    rounds: int | None = None,
) -> tuple[int, int, int, bool, float]:
    """Go on with a paired sign test the first round left undecided, with fresh draws: round 1
    on ``items``, each later one only on the items the round before found discordant (either
    way, see ``training/attribution.py``: the test stays exact), up to ``rounds`` more
    (default ``len(alphas) - 1``). One look at the end, at the alpha the first look left
    (``sum(alphas[1:])``), with the round-weighted sign test (``significance``: the first
    pass weighs 1, the next round 2, ...); before it only futility stops (no more wins than
    losses), which spend nothing. Returns (up, down, rounds run with the first, significant,
    p-value).

    ``worse`` (the current skill) draws from round ``current_round + r``: the rounds below
    ``current_round`` are the ones its own gate ran, whose draws got it accepted (lucky ones,
    which would hold every candidate back)."""
    n = len(alphas) - 1 if rounds is None else rounds
    alpha = significance.decision_alpha(alphas)
    run = narrowing_rounds(
        evaluator,
        better,
        worse,
        items,
        metric=metric,
        rounds=n,
        round_of=lambda r: (r, current_round + r),
        up=up,
        down=down,
    )
    p = significance.weighted_sign_test_p([(up, down), *run.by_round])
    won = not run.futile and significance.significant(p, alpha)
    return run.up, run.down, run.done + 1, won, p


@dataclass(frozen=True)
class NarrowedRounds:
    """What ``narrowing_rounds`` counted."""

    up: int
    down: int
    done: int  # rounds run
    futile: bool  # stopped: no more wins than losses
    evaluated: int  # item pairs evaluated, over all rounds
    by_round: tuple[tuple[int, int], ...] = ()  # (up, down) of each round run
    won_early: bool = False  # stopped at an interim look, significant

    @property
    def first(self) -> tuple[int, int] | None:
        """(up, down) of the first round alone."""
        return self.by_round[0] if self.by_round else None


def narrowing_rounds(
    evaluator: Evaluator,
    better: str,
    worse: str,
    items: Sequence[TaskItem],
    *,
    metric: str,
    rounds: int,
    round_of: Callable[[int], tuple[int, int | None]],
    up: int = 0,
    down: int = 0,
    looks: Mapping[int, float] | None = None,
) -> NarrowedRounds:
    """Paired rounds of fresh draws, added to ``up``/``down``: round 1 on ``items``, each
    later one only on the items the round before found discordant (either way, so the pooled
    sign test stays exact; see ``training/attribution.py``), stopping early for futility
    (worse, or after a second round no better). ``round_of(r)``: the draws round ``r`` uses,
    (``better``'s round, ``worse``'s round or None for the same).

    ``looks``: round -> alpha of an interim look after that round (``significance.
    interim_looks``): the rounds so far significant at it (round-weighted sign test) end the
    test as won."""
    done = evaluated = 0
    by_round: list[tuple[int, int]] = []
    futile, won, items = False, False, list(items)
    for r in range(1, rounds + 1):
        better_round, worse_round = round_of(r)
        ups, downs = discordant_items(
            evaluator,
            better,
            worse,
            items,
            metric=metric,
            round=better_round,
            worse_round=worse_round,
        )
        evaluated += len(items)
        up, down, done = up + len(ups), down + len(downs), r
        by_round.append((len(ups), len(downs)))
        futile = up < down or (up == down and r > 1)
        if futile:
            break
        if looks and r in looks:
            p = significance.weighted_sign_test_p(by_round)
            won = significance.significant(p, looks[r])
            if won:
                break
        flipped = {it.id for it in (*ups, *downs)}
        if flipped:
            items = [it for it in items if it.id in flipped]
    return NarrowedRounds(up, down, done, futile, evaluated, tuple(by_round), won)


def undecided(result: GateResult, alphas: Sequence[float]) -> bool:
    """A gate's first round showed a net gain, not a significant one, where more rounds of
    fresh draws can decide (a stochastic target: ``alphas`` has more than one look)."""
    up, down = len(result.gained), len(result.lost)
    return (
        len(alphas) > 1 and not result.early_stopped and result.decision != "accepted" and up > down
    )


def resample_gate(
    evaluator: Evaluator,
    current: str,
    candidate: str,
    val: Sequence[TaskItem],
    result: GateResult,
    *,
    alphas: Sequence[float],
    current_round: int = 0,
    rounds: int | None = None,
) -> GateResult:
    """A gate's first round left it undecided (a net gain, not significant at the first look):
    more rounds decide (``more_rounds``); the result keeps the first round's means."""
    if not undecided(result, alphas):
        return result
    up, down = len(result.gained), len(result.lost)
    # Fresh draws on the items the first round found discordant (either way: the choice does
    # not look at which side won), where the candidate's edits act, and enough others.
    items = focus_items(val, [*result.gained, *result.lost])
    up, down, rounds, won, p = more_rounds(
        evaluator,
        candidate,
        current,
        items,
        metric=result.metric,
        up=up,
        down=down,
        alphas=alphas,
        current_round=current_round,
        rounds=rounds,
    )
    return dataclasses.replace(
        result,
        decision="accepted" if won else "rejected",
        p_value=p,
        test="weighted sign",  # rounds weighted 1, 2, ... (significance.weighted_sign_test_p)
        rounds=rounds,
        discordant=(up, down),
    )


def one_sided_p_value(differences: Sequence[float]) -> tuple[float | None, str | None]:
    """P-value of "the candidate is not better", from paired per-item differences.

    Differences that are all -1, 0 or 1 (hard scores, one sample) get the exact sign test on
    the items that flipped (McNemar's test, one-sided); anything else the normal
    approximation of the paired mean. No test without a nonzero difference.
    """
    nonzero = [d for d in differences if abs(d) > EPS]
    if not nonzero:
        return None, None
    if all(abs(abs(d) - 1) <= EPS for d in nonzero):
        n, up = len(nonzero), sum(1 for d in nonzero if d > 0)
        return math.fsum(math.comb(n, k) for k in range(up, n + 1)) / 2**n, "sign"
    n = len(differences)
    mu = math.fsum(differences) / n
    if n < 2:
        return None, None  # one item cannot show significance either way
    sd = math.sqrt(math.fsum((d - mu) ** 2 for d in differences) / (n - 1))
    if sd <= EPS:
        return (0.0 if mu > 0 else 1.0), "normal"
    return 1 - statistics.NormalDist().cdf(mu / (sd / math.sqrt(n))), "normal"
