"""Score a skill version on a split (``skillvc eval``) and compare two versions (``skillvc check``).

``evaluate(ws, rev, split)`` runs every item of the split with the skill as it is at git
revision ``rev`` (``None``: the working-tree file) through the configured target, scores it and
records one ``evaluation`` event. ``compare(ws, rev_a, rev_b, split)`` evaluates both and pairs
them item by item: ``a`` is the base, ``b`` the version under test, differences are ``b - a``.

Invariants:

* Free to repeat: every model call goes through ``ModelClient``, which answers a call it has
  seen before (same model, parameters and messages) from the event log, so re-evaluating an
  unchanged skill on an unchanged split makes no model call and gives the same numbers.
* Recorded once: the ``evaluation`` event is a cache event (no run id) whose key is the content
  hash of (skill blob hash, split, dataset hash, target model + parameters, scorer + options,
  judge model when a judge was asked, gate metric, samples, ids of items that errored, and
  every item's scores). Evaluating the same content again returns the stored event instead of
  writing another; the event keeps the revision named the first time. An evaluation with
  failed calls, or whose scorer now scores differently (a changed ``python`` scorer), gets its
  own key, so it is still recorded.
* Errors are never scores: an item whose target call failed after its retries has ``error``
  set and no score; it is left out of every mean and of the paired difference, and counted.
* Works from a fresh clone: the event log is created when missing (``ws.store(create=True)``);
  only the repository and ``skillvc.toml`` are needed.
* Statistics: ``stderr`` is the standard error of the mean (sample standard deviation over
  ``sqrt(n)``), ``None`` below two scored items; the paired difference has the same over the
  per-item differences.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillvc.core.config import Config, ModelConfig, listing
from skillvc.core.errors import ApplyRegression, BackendError, SkillDocumentError, TaskSetError
from skillvc.core.hashing import content_id
from skillvc.core.progress import Progress
from skillvc.core.records import entries_of, fields_of
from skillvc.core.store import EventStore
from skillvc.models.backends import Backend
from skillvc.models.calls import ModelClient, RoleStats, model_params
from skillvc.models.executors import make_executor
from skillvc.models.harness import LazyBackend, lazy_backend
from skillvc.packages.packagefile import PackageFile
from skillvc.packages.render import PackageVersion, TargetInput, TargetView
from skillvc.packages.version import package_version
from skillvc.review.output import shown
from skillvc.skill.preflight import check_skill
from skillvc.tasks.scorers import JudgeFn, Scored, extract_answer, get_scorer
from skillvc.tasks.taskset import SPLITS, TaskItem, TaskSet, load_taskset
from skillvc.training.evaluate import Evaluator, Rollout, mean
from skillvc.workspace.workspace import Workspace

WORKTREE = "worktree"


class AllItemsErrored(BackendError):
    """Every item of an evaluation errored (its model call failed), so there is no score."""


SHORT = 60  # characters of an expected / got answer kept for display
EPS = 1e-9


@dataclass(frozen=True)
class ItemResult(Scored):
    """One item of an evaluation: its scores, or the error that kept it from being scored."""

    id: str
    hard: float | None
    soft: float | None
    error: str | None
    expected: str  # the acceptable answers, shortened for display
    got: str | None  # the extracted answer, shortened (None when the call failed)
    output: str | None = None  # blob hash of the full output
    activated: bool | None = None  # agent harnesses: did the agent load the skill
    text: str | None = None  # the full output (what to_dict gives as "output")

    def to_dict(self) -> dict[str, Any]:
        return {
            **fields_of(self, "id hard soft error expected got"),
            # The answer as text for people and pipes; the log keeps it as a blob.
            "output": self.text,
            "output_blob": self.output,
            "activated": self.activated,
        }


@dataclass(frozen=True)
class EvalResult:
    """A skill version scored on one split, with what it cost."""

    rev: str | None  # the revision as given (None: the working tree)
    sha: str  # the commit it resolved to, or "worktree"
    skill: str  # blob hash of the skill text
    split: str
    dataset: str  # TaskSet.hash
    model: str
    metric: str  # the gate metric ``mean`` is computed with
    items: tuple[ItemResult, ...]
    mean: float | None
    hard: float | None
    soft: float | None
    stderr: float | None
    n: int  # items scored
    errors: int  # items whose call failed (excluded from the means)
    calls: int  # model answers used (fresh or from the log)
    fresh_calls: int  # calls that reached a model in this evaluation
    failed_calls: int  # calls that failed after their retries in this evaluation
    tokens: int
    cost_usd: float | None  # None when any call's price is unknown
    unpriced_calls: int
    event: int  # id of the evaluation event
    recorded: bool  # False when an identical evaluation was already in the log
    # A skill package: linked files sent and cut (chat), carried files, links left out
    # (``PackageVersion.report``); None for a single-file skill.
    package: dict[str, list[str]] | None = None
    notes: tuple[str, ...] = ()  # what the package's target was not given, as sentences

    @property
    def label(self) -> str:
        """How to name this version to a person: the revision given, or the working tree."""
        return self.rev if self.rev is not None else "the working tree"

    def failures(self) -> list[ItemResult]:
        return [i for i in self.items if i.ok and (i.hard or 0.0) < 1.0]

    @property
    def activation(self) -> dict[str, Any] | None:
        """How often an agent target loaded the skill (None: not an agent harness)."""
        known = [i.activated for i in self.items if i.activated is not None]
        if not known:
            return None
        loaded = sum(1 for a in known if a)
        return {"loaded": loaded, "of": len(known), "rate": loaded / len(known)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "rev": self.rev,
            "sha": self.sha,
            "skill": self.skill,
            "split": self.split,
            "dataset": self.dataset,
            "model": self.model,
            "metric": self.metric,
            "mean": self.mean,
            "hard": self.hard,
            "soft": self.soft,
            "stderr": self.stderr,
            "n": self.n,
            "errors": self.errors,
            "items": [i.to_dict() for i in self.items],
            "failures": [i.id for i in self.failures()],
            "activation": self.activation,
            "calls": self.calls,
            "fresh_calls": self.fresh_calls,
            "failed_calls": self.failed_calls,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "unpriced_calls": self.unpriced_calls,
            "event": self.event,
            "recorded": self.recorded,
            "package": self.package,
        }


@dataclass(frozen=True)
class Comparison:
    """Two evaluations paired item by item; ``diff`` is ``b - a`` over items both scored."""

    a: EvalResult  # the base
    b: EvalResult  # the version under test
    metric: str
    n: int  # items scored in both
    a_mean: float | None  # a's mean over the paired items
    b_mean: float | None  # b's mean over the paired items
    diff: float | None
    stderr: float | None
    up: tuple[str, ...]  # hard 0 in a, 1 in b
    down: tuple[str, ...]  # hard 1 in a, 0 in b

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "metric": self.metric,
            "n": self.n,
            "a_mean": self.a_mean,
            "b_mean": self.b_mean,
            "diff": self.diff,
            "stderr": self.stderr,
            "flipped": {"up": list(self.up), "down": list(self.down)},
        }


# -- statistics -------------------------------------------------------------------------------


def stderr_of_mean(values: Sequence[float]) -> float | None:
    """Sample standard deviation / sqrt(n); None for fewer than two values."""
    n = len(values)
    if n < 2:
        return None
    m = math.fsum(values) / n
    variance = math.fsum((v - m) ** 2 for v in values) / (n - 1)
    return math.sqrt(variance / n)


# -- evaluating ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SkillVersion:
    rev: str | None  # as given; None for the working tree
    sha: str  # the resolved commit, or "worktree"
    text: str  # the skill file's text, or a skill package's bundle (skillvc.packages)
    view: TargetView | None = None  # a package: what the target gets of it
    package: PackageVersion | None = None  # a package: its files, carried files, skipped links

    @classmethod
    def of_package(cls, rev: str | None, sha: str, version: PackageVersion) -> SkillVersion:
        return cls(rev, sha, version.bundle, version.view, version)

    @property
    def carried(self) -> tuple[PackageFile, ...]:
        """The carried files the target installs (none for a chat target)."""
        return () if self.package is None else self.view_input().carried

    def view_input(self) -> TargetInput:
        assert self.view is not None
        return self.view(self.text)


def evaluate(
    ws: Workspace,
    rev: str | None,
    split: str,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    skill_file: str | None = None,
) -> EvalResult:
    """Score the skill at ``rev`` (None: the working-tree file) on ``split``; record it once.
    ``skill_file``: score that file of the work tree instead (a skill from elsewhere, say
    SkillOpt's ``ckpt/<env>/gpt5.5_skill.md`` copied in), as if it were the configured skill."""
    check_split(split)
    version = read_skill(ws, rev) if skill_file is None else read_skill_file(ws, skill_file)
    result = _evaluate(ws, version, split, workers, progress or Progress.off())
    if result.n == 0 and result.errors:
        # Recorded first (the failures are evidence); then no score is not a success.
        first = next(i.error for i in result.items if not i.ok)
        raise AllItemsErrored(
            f"All {result.errors} items of the {split} split errored, so there is no score "
            f"(first error: {str(first).rstrip('.')})."
        )
    return result


def _evaluate(
    ws: Workspace,
    version: SkillVersion,
    split: str,
    workers: int | None,
    progress: Progress,
    tasks_root: Path | None = None,
) -> EvalResult:
    config = ws.config
    taskset = load_taskset(config.tasks, tasks_root or ws.root)
    items = split_items(taskset, split)
    with ws.store(create=True) as store:
        client = make_client(store, config)
        progress.watch(client.totals)
        judge = _judge(client)
        scorer = get_scorer(config.tasks.scorer, config.tasks.scorer_options, judge=judge)
        with (
            ThreadPoolExecutor(max_workers=workers or config.train.workers) as pool,
            contextlib.closing(client),  # what its backends started (MCP servers)
        ):
            evaluator = Evaluator(
                client,
                scorer,
                pool,
                judge=judge,
                scorer_options=config.tasks.scorer_options,
                samples=config.train.samples,
                progress=progress,
                executor=make_executor(config.train),
                render=version.view,
            )
            name = "the working tree" if version.rev is None else version.rev
            with progress.stage(f"eval {name} on {split}", len(items) * config.train.samples):
                rollouts = evaluator.run(version.text, items, split)
        return _record(store, config, client, version, split, taskset.hash, items, rollouts)


def compare(
    ws: Workspace,
    rev_a: str | None,
    rev_b: str | None,
    split: str,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Comparison:
    """Evaluate ``rev_a`` (the base) and ``rev_b`` on ``split`` and pair them item by item."""
    check_split(split)
    version_a, version_b = read_skill(ws, rev_a), read_skill(ws, rev_b)  # both, before any call
    progress = progress or Progress.off()
    return pair(
        _evaluate(ws, version_a, split, workers, progress),
        _evaluate(ws, version_b, split, workers, progress),
    )


def compare_versions(
    ws: Workspace,
    version_a: SkillVersion,
    version_b: SkillVersion,
    split: str,
    *,
    tasks_root: Path,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Comparison:
    """``compare`` for skill texts already read, with the task files under ``tasks_root``
    (``skillvc check``: the base revision's files, not the working tree's)."""
    check_split(split)
    progress = progress or Progress.off()
    a = _evaluate(ws, version_a, split, workers, progress, tasks_root)
    return pair(a, _evaluate(ws, version_b, split, workers, progress, tasks_root))


def pair(a: EvalResult, b: EvalResult) -> Comparison:
    """The paired comparison of two evaluations of the same split."""
    metric = a.metric
    in_b = {i.id: i for i in b.items}
    pairs = [(x, in_b[x.id]) for x in a.items if x.ok and x.id in in_b and in_b[x.id].ok]
    diffs = [y.value(metric) - x.value(metric) for x, y in pairs]
    return Comparison(
        a=a,
        b=b,
        metric=metric,
        n=len(pairs),
        a_mean=mean([x.value(metric) for x, _ in pairs]),
        b_mean=mean([y.value(metric) for _, y in pairs]),
        diff=mean(diffs),
        stderr=stderr_of_mean(diffs),
        up=tuple(x.id for x, y in pairs if (x.hard or 0.0) < 1.0 <= (y.hard or 0.0)),
        down=tuple(x.id for x, y in pairs if (y.hard or 0.0) < 1.0 <= (x.hard or 0.0)),
    )


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise TaskSetError(
            f"Unknown split '{split}' (expected train, val or test).",
            hint="Pass --split train, --split val or --split test.",
        )


def split_items(taskset: TaskSet, split: str) -> tuple[TaskItem, ...]:
    items = taskset.split(split)
    if not items and taskset.pending:
        waiting = sum(taskset.pending.values())
        raise TaskSetError(
            f"The {split} split of the task set has no approved items ({waiting} drafted "
            "items await review and are never used before a person approves them).",
            hint="Approve or edit them with 'skillvc review' (or 'skillvc review --approve ID').",
        )
    if not items:
        raise TaskSetError(
            f"The {split} split of the task set has no items.",
            hint=f"Give the {split} split task items in [tasks] of skillvc.toml.",
        )
    return items


def read_skill(ws: Workspace, rev: str | None) -> SkillVersion:
    """The configured skill file at ``rev`` (None: the working-tree file)."""
    if rev is None:
        sha, raw = WORKTREE, ws.read_skill()
    else:
        sha = ws.repo.resolve(rev)
        raw = ws.repo.read_file_following(ws.skill_relpath, rev)
    where = "in the working tree" if rev is None else f"at {rev}"
    # What validate rejects, or a skill too large to send, never reaches a model.
    check_skill(ws.skill_relpath, raw, max_tokens=ws.config.skill.max_tokens, where=where)
    try:
        # Decoded exactly as training does, so evaluations share its cached target calls.
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillDocumentError(
            f"The skill file {ws.skill_relpath} {where} is not UTF-8 text "
            f"(bad byte at offset {exc.start})."
        ) from None
    package = package_version(ws.config, ws.repo, rev, where)
    if package is not None:  # a skill package: its bundle is the version's identity
        return SkillVersion.of_package(rev, sha, package)
    return SkillVersion(rev, sha, text)


def read_skill_file(ws: Workspace, path: str) -> SkillVersion:
    """The text of the file at ``path`` (inside the work tree), checked as a skill file."""
    from skillvc.core.errors import PathOutsideRepo, SkillFileMissing

    full = Path(path).resolve()
    if not full.is_relative_to(ws.root.resolve()):
        raise PathOutsideRepo(
            f"--skill-file {path} is outside the repository; skillvc reads nothing outside it.",
            hint="Copy the file into the repository (it need not be committed), then name it.",
        )
    if ws.config.package_dir is not None:
        raise SkillDocumentError(
            "--skill-file scores one file; this skill is a package (a directory).",
            hint="Commit the other version on a branch and name it: skillvc eval BRANCH.",
        )
    rel = full.relative_to(ws.root.resolve()).as_posix()
    if not full.is_file():
        raise SkillFileMissing(f"No file {rel} in the work tree (--skill-file).")
    raw = full.read_bytes()
    check_skill(rel, raw, max_tokens=ws.config.skill.max_tokens, where="(--skill-file)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillDocumentError(
            f"{rel} is not UTF-8 text (bad byte at offset {exc.start})."
        ) from None
    return SkillVersion(rel, WORKTREE, text)


def make_client(store: EventStore, config: Config) -> ModelClient:
    """A client for the target and the judge (the optimizer's model), priced from the config.

    An SDK backend is built on its first fresh call, so an evaluation answered from the log
    imports no SDK; the judge's always is: most scorers never ask a judge, and an evaluation
    must not check a model it never calls."""
    backends: dict[str, Backend] = {
        "target": lazy_backend(config.target, config.root),
        "judge": LazyBackend(config.optimizer),
    }
    configs = {"target": config.target, "judge": config.optimizer}
    return ModelClient(store, backends, configs, prices=config.prices)


def _judge(client: ModelClient) -> JudgeFn:
    def judge(system: str, user: str) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return client.call("judge", messages).text

    return judge


def evaluation_key(
    config: Config,
    skill: str,
    split: str,
    dataset: str,
    failed: list[str],
    *,
    scores: Sequence[tuple[str, float | None, float | None]] | None = None,
    judge_used: bool = True,
    carried: Sequence[PackageFile] = (),
) -> str:
    """The cache key of an evaluation: what its numbers are a function of.

    ``scores`` (id, hard, soft per item) are part of it because the configuration does not
    pin a scorer down: a ``python`` or ``command`` scorer whose code changed gives other
    numbers for the same settings, and that evaluation must be recorded, not folded into the
    old one. The judge model is part of it only when a judge was asked (``judge_used``), so
    changing the optimizer does not record an exact-match evaluation a second time. A
    package's ``carried`` files (by hash) count when there are some: the same text files with
    another script are another version.
    """
    scorer: dict[str, Any] = {"name": config.tasks.scorer, "options": config.tasks.scorer_options}
    if judge_used:
        scorer["judge"] = _model_identity(config.optimizer)
    identity: dict[str, Any] = {
        "skill": skill,
        "split": split,
        "dataset": dataset,
        "target": _model_identity(config.target),
        "scorer": scorer,
        "metric": config.train.gate_metric,
        "samples": config.train.samples,
        "failed": failed,
    }
    if scores is not None:
        identity["scores"] = [list(s) for s in scores]
    if carried:
        identity["carried"] = [f.key() for f in carried]
    return content_id(identity, length=32)


def _model_identity(config: ModelConfig) -> dict[str, Any]:
    identity: dict[str, Any] = {"model": config.model, "params": model_params(config)}
    if config.harness == "command":
        identity["command"] = list(config.command)
    return identity


def _record(
    store: EventStore,
    config: Config,
    client: ModelClient,
    version: SkillVersion,
    split: str,
    dataset: str,
    items: Sequence[TaskItem],
    rollouts: Sequence[Rollout],
) -> EvalResult:
    """Build the result and append its evaluation event (or find the identical one)."""
    metric = config.train.gate_metric
    skill = store.put_blob(version.text)
    results = tuple(_item_result(store, it, r) for it, r in zip(items, rollouts, strict=True))
    scored = [r for r in results if r.ok]
    values = [r.value(metric) for r in scored]
    totals: RoleStats = client.totals()
    payload: dict[str, Any] = {
        "rev": version.rev,
        "sha": version.sha,
        "skill": skill,
        "split": split,
        "dataset": dataset,
        "model": config.target.model,
        "params": model_params(config.target),
        "scorer": config.tasks.scorer,
        "metric": metric,
        "items": [
            {"id": r.id, "hard": r.hard, "soft": r.soft, "error": r.error, "output": r.output}
            | ({} if r.activated is None else {"activated": r.activated})
            for r in results
        ],
        "mean": mean(values),
        "hard": mean([r.value("hard") for r in scored]),
        "soft": mean([r.value("soft") for r in scored]),
        "stderr": stderr_of_mean(values),
        "n": len(scored),
        "errors": len(results) - len(scored),
        "calls": totals.replies,
        "fresh_calls": totals.fresh,
        "failed_calls": totals.errors,
        "tokens": totals.tokens,
        "cost_usd": None if totals.unpriced else totals.cost_usd,
        "unpriced_calls": totals.unpriced,
    }
    report = None if version.package is None else version.package.report()
    if report is not None:  # only for a package: a single file's event is as it was
        payload["package"] = report
    failed = [r.id for r in results if not r.ok]
    judge = client.snapshot().get("judge")
    key = evaluation_key(
        config,
        skill,
        split,
        dataset,
        failed,
        scores=[(r.id, r.hard, r.soft) for r in results],
        judge_used=judge is not None and (judge.replies + judge.errors) > 0,
        carried=version.carried,
    )
    # Looked up, not inferred from the number of events: another process (a training run)
    # may append events to the same log meanwhile.
    recorded = store.find("evaluation", key) is None
    event = store.append("evaluation", payload, key=key)
    return EvalResult(
        rev=version.rev,
        sha=version.sha,
        skill=skill,
        split=split,
        dataset=dataset,
        model=config.target.model,
        metric=metric,
        items=results,
        **entries_of(payload, "mean hard soft stderr n errors"),
        calls=totals.replies,
        fresh_calls=totals.fresh,
        failed_calls=totals.errors,
        tokens=totals.tokens,
        cost_usd=payload["cost_usd"],
        unpriced_calls=totals.unpriced,
        event=event.id,
        recorded=recorded,
        package=report,
        notes=package_notes(config, version),
    )


def package_notes(config: Config, version: SkillVersion) -> tuple[str, ...]:
    """A skill package's target was not given everything: linked files cut whole for the size
    budget or the token cap (chat), symbolic links left out of the package. One sentence each
    (repository paths, escaped: a pull request names them)."""
    if version.package is None:
        return ()
    report, root = version.package.report(), version.package.package.root
    at = "in the working tree" if version.rev is None else f"at {version.rev}"

    def paths(names: list[str]) -> str:
        return listing([shown(f"{root}/{n}" if root else n) for n in names])

    notes = []
    if report["cut"]:
        verb = "is" if len(report["cut"]) == 1 else "are"
        notes.append(
            f"{paths(report['cut'])} {verb} linked from SKILL.md but left out of what the "
            f"target is sent {at}, to keep within [skill] reference_bytes "
            f"({config.skill.reference_bytes:,} bytes) and max_tokens "
            f"({config.skill.max_tokens:,} tokens)."
        )
    if report["skipped"]:
        one = len(report["skipped"]) == 1
        notes.append(
            f"The symbolic link{'' if one else 's'} {paths(report['skipped'])} in the skill "
            f"package {at} {'is' if one else 'are'} left out: skillvc never follows a link in "
            "a skill package."
        )
    return tuple(notes)


def _item_result(store: EventStore, item: TaskItem, rollout: Rollout) -> ItemResult:
    expected = _short(" | ".join(item.targets)) if item.targets else "-"
    if not rollout.ok or rollout.output is None:
        return ItemResult(item.id, None, None, rollout.error, expected, None)
    return ItemResult(
        item.id,
        rollout.hard,
        rollout.soft,
        None,
        expected,
        _short(extract_answer(rollout.output)),
        store.put_blob(rollout.output),
        rollout.activated,
        rollout.output,
    )


def _short(text: str, width: int = SHORT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


# -- the gate of a hand edit (skillvc apply) ----------------------------------------------------


class ApplyGate:
    """The check ``skillvc apply`` runs before it records a patch: HEAD and the patched skill
    scored on val, paired item by item; a lower mean is refused unless ``force``.

    Evaluations are recorded (and reused) like ``skillvc eval``'s, so a second apply of the
    same patch makes no model call.
    """

    def __init__(
        self,
        ws: Workspace,
        *,
        force: bool = False,
        workers: int | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.ws, self.force, self.workers = ws, force, workers
        self.progress = progress or Progress.off()
        self.comparison: Comparison | None = None

    def __call__(self, parent: str, candidate: str) -> None:
        import dataclasses

        # Named for the progress lines and the evaluation events: HEAD and "patched".
        a = dataclasses.replace(read_skill(self.ws, parent), rev="HEAD")
        b = dataclasses.replace(read_skill(self.ws, candidate), rev="patched")
        self.comparison = compare_versions(
            self.ws,
            a,
            b,
            "val",
            tasks_root=self.ws.root,
            workers=self.workers,
            progress=self.progress,
        )
        if self.regressed and not self.force:
            raise ApplyRegression(
                f"The patch makes the skill score worse on val: {gate_text(self.comparison)}; "
                "nothing was committed."
            )

    @property
    def regressed(self) -> bool:
        c = self.comparison
        return c is not None and c.diff is not None and c.diff < 0

    def evidence(self) -> dict[str, Any] | None:
        """The gate as a ``gate`` event's payload (kind "apply"), for the commit's trailers,
        ``show``, ``log`` and ``blame``; None before it ran or without a paired score."""
        from skillvc.training.significance import REVIEW_ALPHA, verdict

        c = self.comparison
        if c is None or c.diff is None:
            return None
        p, test = paired_p_value(c)
        return {
            "kind": "apply",
            "decision": "forced" if self.regressed else "accepted",
            "metric": c.metric,
            "before": {"mean": c.a_mean, "n": c.n},
            "after": {"mean": c.b_mean, "n": c.n},
            "p_value": p,
            "test": test,
            "alpha": REVIEW_ALPHA,
            "verdict": verdict(p, REVIEW_ALPHA),
            "flipped": {"gained": list(c.up), "lost": list(c.down)},
        }


def paired_p_value(c: Comparison) -> tuple[float | None, str | None]:
    """The training gate's one-sided test of ``c``'s paired differences, in the direction the
    change went: the chance of a change at least this large if it made no difference."""
    from skillvc.training.evaluate import one_sided_p_value

    in_b = {i.id: i for i in c.b.items}
    diffs = [
        in_b[x.id].value(c.metric) - x.value(c.metric)
        for x in c.a.items
        if x.ok and x.id in in_b and in_b[x.id].ok
    ]
    sign = -1.0 if c.diff is not None and c.diff < 0 else 1.0
    return one_sided_p_value([sign * d for d in diffs])


def gate_text(c: Comparison) -> str:
    """``0.967 -> 0.900 (-0.067 ± 0.046 s.e.; 2 worse, 0 better of 30; p=0.25 sign)``: the
    p-value is the chance of a change at least this large, up or down as it went, if the
    patch made no difference (the training gate's test, one-sided in the observed way)."""
    if c.a_mean is None or c.b_mean is None or c.diff is None:
        return f"no paired score ({c.n} items scored in both)"
    spread = f" ± {c.stderr:.3f} s.e." if c.stderr is not None else ""
    p, test = paired_p_value(c)
    significance = f"; p={p:.2g} {test}" if p is not None else ""
    return (
        f"{c.a_mean:.3f} -> {c.b_mean:.3f} ({c.diff:+.3f}{spread}; {len(c.down)} worse, "
        f"{len(c.up)} better of {c.n}{significance})"
    )
