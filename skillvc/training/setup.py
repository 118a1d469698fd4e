"""Starting or resuming a run: everything the loop needs before its first step.

Invariants:
- A new run's id is derived from what determines it (config without the budget, base commit,
  seed skill, dataset, prompt templates), so the same inputs in a fresh clone give the same run
  id, commit trailers and messages.
- A resumed run is rebuilt from its ``run.started`` event (its config snapshot and seed skill),
  never from the current working tree or skillvc.toml.
- The repository is put in order before the dirty-file check: temp files of a killed write are
  removed and a commit whose branch move landed but whose file write did not is completed.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from skillvc.core.config import Config, ModelConfig
from skillvc.core.errors import (
    ConfigError,
    DirtySkillFile,
    LogRepoMismatch,
    SkillDocumentError,
    SkillvcError,
    StateConflict,
    TaskSetError,
)
from skillvc.core.events import Event
from skillvc.core.hashing import content_id, sha256_hex
from skillvc.core.pricing import price_for
from skillvc.core.store import EventStore
from skillvc.models import prompts
from skillvc.models.backends.local import ServerInfo, probe
from skillvc.models.calls import ModelClient, secret_values
from skillvc.models.harness import lazy_backend
from skillvc.packages.carried import load_carried
from skillvc.packages.model import load_package
from skillvc.packages.packagefile import PackageFile
from skillvc.packages.render import installs
from skillvc.packages.version import target_view
from skillvc.repo.skillrepo import SkillRepo, ensure_ready_to_train
from skillvc.secrets.taskfiles import scanned_later
from skillvc.skill.preflight import check_skill
from skillvc.tasks.scorers import Scorer, get_scorer
from skillvc.tasks.taskset import TaskItem, TaskSet, load_taskset
from skillvc.training import commits
from skillvc.training.runlog import RunLog
from skillvc.training.startcheck import check_before_run
from skillvc.workspace.workspace import Workspace

JudgeFn = Callable[[str, str], str]


@dataclass
class RunContext:
    """What stays fixed for the whole run."""

    run_id: str
    resumed: bool
    log: RunLog
    client: ModelClient
    scorer: Scorer
    judge: JudgeFn
    train: list[TaskItem]
    val: list[TaskItem]
    test: list[TaskItem]
    base_commit: str
    base_skill: str
    # How many val items a gate evaluates between two looks at its result: the workers the run
    # started with (``run.started``'s config). A resumed run keeps it whatever its workers are
    # now, so its gates stop where the interrupted run's did.
    look_chunk: int
    # A skill package under an installing harness: the base commit's carried files (scripts,
    # assets), which training never edits, so every version of the run is installed with them.
    carried: tuple[PackageFile, ...] = ()
    # The task files as read, (display, text): their credential warnings are for the trainer
    # to give once its first calls are out (``warn_in_background``).
    task_files: tuple[tuple[str, str], ...] = ()


def find_unfinished(store: EventStore, skill_path: str | None = None) -> Event | None:
    """The newest run, when it has not finished (stopped and killed runs count);
    ``skill_path``: the newest run of that skill (many skills in one repository).

    A run imported from SkillOpt (``imported`` in its ``run.started``) is never resumed here.
    Only the newest run is a candidate: a run left unfinished and then superseded by
    ``--new`` is abandoned. Resuming it after the newer run finished would replay it on a
    branch that has moved on, and fail at its first commit after paying for the replay.
    """
    rows = store.query(  # an abandoned run (a stopped sleep run) is never resumed here
        "SELECT s.id, EXISTS (SELECT 1 FROM events f WHERE f.type IN ('run.finished', "
        "'run.abandoned') AND f.run_id = s.run_id) AS finished FROM events s "
        "WHERE s.type = 'run.started' AND json_extract(s.payload, '$.imported') IS NULL "
        + ("AND json_extract(s.payload, '$.config.skill.path') = ? " if skill_path else "")
        + "ORDER BY s.id DESC LIMIT 1",
        [skill_path] if skill_path else [],
    )
    if not rows or rows[0]["finished"]:
        return None
    return store.get(rows[0]["id"])


def finished_here(ws: Workspace, store: EventStore, config: Config) -> Event | None:
    """The ``run.finished`` event of the newest run of this skill when training now would only
    repeat it: it finished at the commit training would start from (or at one whose skill
    folder is the same: other skills' commits since do not count), on the same branch, with
    the same config (the budget aside), prompt templates and task set.

    ``skillvc train`` then says so instead of quietly paying for a new run (``--new`` does).
    A dirty skill file is never "up to date": the normal checks report it.
    """
    rows = store.query(
        "SELECT id FROM events WHERE type = 'run.started' "
        "AND json_extract(payload, '$.config.skill.path') = ? ORDER BY id DESC LIMIT 1",
        [config.skill.path],
    )
    if not rows:
        return None
    started = store.get(rows[0]["id"])
    finished = store.events(run_id=started.run_id, types=["run.finished"], limit=1)
    if not finished:
        return None
    repo, payload = ws.repo, started.payload
    branch = config.train.branch or repo.current_branch()
    start_at = repo.head_sha() if branch == repo.current_branch() else _branch_tip(repo, branch)
    best = finished[0].payload.get("best_commit")
    # Another skill's commits since (many skills in one repository) change nothing training
    # this one reads: the skill's folder is compared, not the commit.
    skill_dir = posixpath.dirname(config.skill.path) or config.skill.path
    if start_at is None or not isinstance(best, str):
        return None
    if start_at != best and not repo.has_commit(best):
        raise LogRepoMismatch(
            f"The event log and this repository disagree: run {started.run_id} finished at "
            f"commit {best[:12]} (its best skill, on branch '{payload.get('branch')}', tag "
            f"skillvc/{started.run_id}/best), which this repository does not have (a log "
            "copied from another clone, or kept across a history rewrite)."
        )
    if start_at != best and not repo.same_between(best, start_at, skill_dir):
        return None
    if payload.get("branch") != branch or repo.is_dirty(config.skill.path):
        return None
    if payload.get("templates") != prompts.template_hashes():
        return None
    if _without_budget(payload.get("config", {})) != _without_budget(config.to_dict()):
        return None
    if (payload.get("dataset") or {}).get("hash") != load_taskset(config.tasks, ws.root).hash:
        return None
    return finished[0]


def _without_budget(config: dict[str, Any]) -> str:
    """A config snapshot as canonical JSON, without the budget (which a resume may change)."""
    snapshot = json.loads(json.dumps(config))
    snapshot.get("train", {}).pop("budget_usd", None)
    snapshot.get("train", {}).pop("speculate", None)  # changes when calls are sent, not results
    return json.dumps(snapshot, sort_keys=True)


def _branch_tip(repo: SkillRepo, branch: str | None) -> str | None:
    if branch is None:
        return None
    try:
        return repo.resolve(f"refs/heads/{branch}")
    except SkillvcError:
        return None


def prepare_run(
    ws: Workspace, store: EventStore, config: Config, unfinished: Event | None
) -> RunContext:
    with scanned_later() as task_files:  # scanned while the first calls are out
        taskset = load_taskset(config.tasks, ws.root)
    if unfinished is not None:
        _check_same_inputs(unfinished, taskset)
    if not taskset.val or not taskset.train:
        raise TaskSetError(
            "Training needs train and val items "
            f"(found {len(taskset.train)} train, {len(taskset.val)} val"
            + (
                f"; {sum(taskset.pending.values())} drafted items await review and never "
                "train or gate before a person approves them)."
                if taskset.pending
                else ")."
            ),
            hint="Approve the drafts with 'skillvc review'."
            if taskset.pending
            else "Point [tasks] in skillvc.toml at task files with both splits.",
        )
    _check_budget_prices(config)
    check_before_run(config)  # no key, a mistyped backend or scorer: before any run exists
    repo, relpath = ws.repo, config.skill_relpath  # PathOutsideRepo before any git work
    # Before anything is repaired, switched or committed: not in the middle of a git operation.
    ensure_ready_to_train(repo, branch=config.train.branch)
    repo.ensure_identity()
    repo.ensure_can_sign()  # commit.gpgsign: sign every commit, or stop before spending
    # The caller holds the writer lock: temp files beside the skill are leftovers of a killed
    # write, and the last commit intent may need finishing.
    package_dir = config.package_dir
    repo.remove_stale_temp_files(relpath if package_dir is None else package_dir)
    if unfinished is not None:
        run_id = str(unfinished.run_id)
        log = RunLog(store, run_id)
        commits.reconcile_pending(repo, log, relpath, package_dir)
    if config.train.branch and repo.current_branch() != config.train.branch:
        repo.switch_branch(config.train.branch)
    repo.ensure_clean(relpath)
    if package_dir is not None:  # and every file of the package (training writes them too)
        _ensure_package_clean(repo, config, package_dir)
    if unfinished is not None:
        _check_branch_position(repo, log, unfinished)

    if unfinished is None:
        ws.require_skill()
        base_commit = repo.head_sha()
        if base_commit is None:
            raise ConfigError(
                "The repository has no commit yet.", hint="Commit the skill file first."
            )
        raw = repo.read_file(relpath, base_commit)
        _require_utf8(raw, relpath)
        # What validate rejects, or a skill too large to send, never starts a run.
        check_skill(relpath, raw, max_tokens=config.skill.max_tokens)
        # A skill package: every file UTF-8, its links resolve; its bundle is the seed skill.
        _, package = target_view(config, repo, base_commit)
        if package is not None:
            raw = package.bundle().encode("utf-8")
        run_id = new_run_id(store, config, base_commit, raw, taskset)
        log = RunLog(store, run_id)

    backends = {
        role: lazy_backend(getattr(config, role), config.root) for role in ("target", "optimizer")
    }
    backends["judge"] = backends["optimizer"]
    # What local servers say about themselves, as the run first saw it: a resumed run fits
    # its prompts to the recorded info, so it sends the calls the interrupted run sent.
    if unfinished is not None:
        servers = {
            role: ServerInfo.from_dict(info)
            for role, info in (unfinished.payload.get("servers") or {}).items()
        }
    else:
        servers = probe_servers(config)
    client = ModelClient(
        store,
        backends,
        {"target": config.target, "optimizer": config.optimizer, "judge": config.optimizer},
        prices=config.prices,
        run_id=run_id,
        replay_failures=failures_to_replay(store, run_id) if unfinished is not None else {},
        secrets=secret_values(config),
    )
    client.use_servers(servers, {r: base_url(getattr(config, r)) or r for r in servers})

    def judge(system: str, user: str) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return client.call("judge", messages).text

    scorer = get_scorer(config.tasks.scorer, config.tasks.scorer_options, judge=judge)
    if unfinished is None:
        started = log.emit(
            "run.started",
            {
                "config": config.to_dict(),
                "base_commit": base_commit,
                "skill": store.put_blob(raw.decode("utf-8")),
                "dataset": {
                    "hash": taskset.hash,
                    "counts": taskset.counts(),
                    "overlaps": list(taskset.overlaps),
                },
                "templates": prompts.template_hashes(),
                "models": {"target": config.target.model, "optimizer": config.optimizer.model},
                "branch": repo.current_branch(),
            }
            | _agent_versions(backends)
            | ({"servers": {r: i.to_dict() for r, i in servers.items()}} if servers else {})
            | ({"skill_name": config.skill_name} if config.skill_name else {}),
        )
    else:
        started = log.emit("run.started", unfinished.payload)
        log.note("run.resumed", {"budget_usd": config.train.budget_usd})
    return RunContext(
        run_id=run_id,
        resumed=unfinished is not None,
        log=log,
        client=client,
        scorer=scorer,
        judge=judge,
        train=list(taskset.train),
        val=list(taskset.val),
        test=list(taskset.test),
        base_commit=started.payload["base_commit"],
        base_skill=store.get_blob(started.payload["skill"]),
        look_chunk=int(started.payload["config"]["train"]["workers"]),
        carried=_carried(config, repo, started.payload["base_commit"]),
        task_files=tuple(task_files),
    )


def base_url(m: ModelConfig) -> str | None:
    """Where an ``openai:`` model's calls go (the backend's rule), None for the default."""
    return m.base_url or os.environ.get("OPENAI_BASE_URL") or None


def probe_servers(config: Config) -> dict[str, ServerInfo]:
    """``{role: ServerInfo}`` for the roles whose model is on a local server that says what
    it is (``skillvc.models.backends.local``); hosted APIs and the simulator are not asked."""
    found: dict[str, ServerInfo] = {}
    for role in ("target", "optimizer"):
        m = getattr(config, role)
        if not m.model.startswith("openai:") or m.harness != "chat" or m.azure:
            continue
        url = base_url(m)
        if not url:
            continue
        key = os.environ.get(m.api_key_env or "OPENAI_API_KEY", "").strip()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        info = probe(url, m.model.split(":", 1)[1], headers)
        if info is not None:
            found[role] = info
    return found


def _carried(config: Config, repo: SkillRepo, base_commit: str) -> tuple[PackageFile, ...]:
    """The carried files of the package at the run's base commit (an installing harness only;
    read again on resume, from the same commit, so the replay sends the same calls)."""
    if config.package_dir is None or not installs(config):
        return ()
    package = load_package(config, repo, base_commit)
    assert package is not None
    return load_carried(config, package, repo, base_commit).files


def _agent_versions(backends: Mapping[str, Any]) -> dict[str, Any]:
    """``{"agents": {role: CLI version}}`` for agent presets (run once, hermetically)."""
    versions = {
        role: b.version() for role, b in backends.items() if callable(getattr(b, "version", None))
    }
    return {"agents": versions} if versions else {}


def new_run_id(
    store: EventStore, config: Config, base_commit: str, raw: bytes, taskset: TaskSet
) -> str:
    snapshot = config.to_dict()
    # Neither the budget nor speculation changes what a run does, only when it stops or
    # when its calls are sent: a run's id (in its commits) is the same with or without them.
    snapshot["train"] = {
        k: v for k, v in snapshot["train"].items() if k not in ("budget_usd", "speculate")
    }
    identity: dict[str, Any] = {
        "config": snapshot,
        "base": base_commit,
        "skill": sha256_hex(raw),
        "dataset": taskset.hash,
        "templates": prompts.template_hashes(),
    }
    digest = content_id(identity, 8)
    earlier = store.query(
        "SELECT COUNT(*) AS n FROM events WHERE type = 'run.started' AND run_id LIKE ?",
        [f"run-{digest}%"],
    )[0]["n"]
    return f"run-{digest}" + (f".{earlier + 1}" if earlier else "")


def failures_to_replay(store: EventStore, run_id: str) -> dict[str, str]:
    """Failed calls the interrupted run went on past: a replay must fail them again.

    A failure logged before the run's last sequenced event was already part of the run's
    history (its rollout or reflection was logged as failed), so answering it now would make
    the replay diverge. Failures after that point were never acted on and are retried.
    """
    rows = store.query(
        "SELECT json_extract(e.payload, '$.cache_key') AS key, "
        "json_extract(e.payload, '$.error') AS error FROM events e "
        "WHERE e.type = 'model.error' AND e.run_id = ? AND e.id < "
        "(SELECT MAX(id) FROM events WHERE run_id = ? AND seq IS NOT NULL) "
        "AND NOT EXISTS (SELECT 1 FROM events c WHERE c.type = 'model.call' "
        "AND c.key = json_extract(e.payload, '$.cache_key'))",
        [run_id, run_id],
    )
    return {r["key"]: r["error"] for r in rows}


def _check_same_inputs(unfinished: Event, taskset: TaskSet) -> None:
    """Refuse to resume a run whose task set or prompt templates changed since it started.

    The replay would send different prompts: every call would miss the cache, the run would
    mix rollouts of two task sets, and its events would no longer be those of one recipe.
    """
    started = unfinished.payload
    recorded = (started.get("dataset") or {}).get("hash")
    if recorded is not None and recorded != taskset.hash:
        raise TaskSetError(
            f"The task set changed since run {unfinished.run_id} started "
            f"(dataset {str(recorded)[:12]}, now {taskset.hash[:12]}).",
            hint="Restore the task files to resume the run, or start another run with "
            "'skillvc train --new'.",
        )
    templates = started.get("templates")
    if templates is not None and templates != prompts.template_hashes():
        raise ConfigError(
            f"The optimizer's prompt templates changed since run {unfinished.run_id} started "
            "(was skillvc upgraded?).",
            hint="Resume it with the skillvc version that started it, or start another run "
            "with 'skillvc train --new'.",
        )


def _check_branch_position(repo: SkillRepo, log: RunLog, unfinished: Event) -> None:
    """Refuse to resume when HEAD is not where the run left its branch.

    The run commits with a compare-and-swap on its last commit, so a branch that moved (a
    commit, reset or checkout since the run stopped) would fail the run at its first new
    accepted step, after paying for the replay and the step. Say so before any call.
    """
    expected = str(unfinished.payload["base_commit"])
    for done in log.store.events(run_id=log.run_id, types=["commit.done"], newest_first=True):
        if not str(done.payload.get("ref") or "").startswith("refs/skillvc/"):
            expected = str(done.payload["sha"])  # the run's last commit on its branch
            break
    head = repo.head_sha()
    if head == expected:
        return
    # A kill between moving the branch and logging commit.done leaves HEAD at the commit of
    # the pending intent (reconcile_pending has restored its file): that is the run's too.
    pending = log.store.events(
        run_id=log.run_id, types=["commit.intent"], newest_first=True, limit=1
    )
    if pending and pending[0].payload.get("accepted") and head is not None:
        marker = f"{log.run_id}/{pending[0].seq}"
        if repo.find_trailer("Skillvc-Event", marker, max_count=1) == head:
            return
    where = repo.current_branch() or "HEAD"
    started_on = unfinished.payload.get("branch")
    if started_on and started_on != where:
        raise StateConflict(
            f"Run {log.run_id} trains branch {started_on}, and {where} is checked out.",
            hint=f"Run 'git switch {started_on}' to resume the run, or start another run here "
            "with 'skillvc train --new'.",
        )
    raise StateConflict(
        f"{where} moved since run {log.run_id} stopped: it is at {(head or 'no commit')[:10]}, "
        f"the run left it at {expected[:10]}.",
        hint=f"Move {where} back to {expected[:10]} (e.g. 'git reset --keep {expected[:10]}') "
        "to resume the run, or start another run from here with 'skillvc train --new'.",
    )


def _check_budget_prices(config: Config) -> None:
    if config.train.budget_usd is None:
        return
    for role in ("target", "optimizer"):
        model = getattr(config, role).model
        # Claude Code reports each run's cost itself (total_cost_usd), so a budget needs no
        # price for it; Codex reports tokens only and needs one like any model.
        if getattr(config, role).harness == "claude-code":
            continue
        if price_for(model, config.prices) is None:
            raise ConfigError(
                f"--budget-usd needs a price for {model}, and it has none.",
                hint=f'Add [prices."{model}"] input = ... output = ... (USD per 1M tokens) '
                "to skillvc.toml.",
            )


def _ensure_package_clean(repo: SkillRepo, config: Config, package_dir: str) -> None:
    """Refuse to train when a file of the skill package has uncommitted changes, or an
    uncommitted file would belong to it: a commit of the package must never clobber them."""
    from skillvc.packages.model import is_package_file

    prefix = f"{package_dir}/" if package_dir else ""
    head = repo.head_sha()
    for path in repo.dirty_paths(package_dir):
        rel = path[len(prefix) :] if path.startswith(prefix) else path
        if not is_package_file(config, rel):
            continue  # scripts and assets: training never writes them
        if head is not None and repo.has_file(path, head):
            raise DirtySkillFile(
                f"{path} (a file of the skill package) has uncommitted changes.",
                hint="Commit or stash your changes to the skill package first.",
            )
        raise DirtySkillFile(
            f"{path} is in the skill package's directory and not committed.",
            hint="Commit it, move it away, or leave it out of the package with [skill] "
            "exclude in skillvc.toml.",
        )


def _require_utf8(raw: bytes, relpath: str) -> None:
    """A skill that is not UTF-8 text is refused before the run records anything."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillDocumentError(
            f"The skill file {relpath} is not UTF-8 text (bad byte 0x{raw[exc.start]:02x} at "
            f"offset {exc.start})."
        ) from None
