"""``skillvc doctor``: is this repository ready to train against its configured models?

Checks, in order: ``skillvc.toml`` loads; then for each role (target, optimizer) the backend
resolves, its credentials and endpoint settings are present, and one tiny call gets an answer.
Each check is one line: ``ok``, ``FAIL`` with what exactly to fix, or ``skip`` (a check that
cannot run until an earlier one of its role passes).

When ``train`` would resume an unfinished run, the checks use that run's settings (what
``train`` really uses), and a first line says so; when the settings changed since the run
started, that line says what changed and how ``train`` goes on (a FAIL when it would stop).

Invariants:
- Read-only and live: it reads the event log only to learn whether ``train`` would resume
  (an existing log; nothing appended) and never writes a file; the reachability probe
  goes straight through the backend (no ``ModelClient``, so no cache, no retries, no events),
  one call per role with a small token limit and a short timeout.
- A secret is never printed: it reports whether a key variable is set, never its value, and
  every line passes through ``redact`` with the values of the key variables it looked at.
- ``sim:`` models need nothing and are always reachable. A ``command`` harness is checked by
  finding its executable, never by running it (an agent run takes minutes and real money).
  An agent preset (claude-code, codex) answers ``--version`` and then one tiny real prompt,
  which shows whether its key and API work (``--no-agent-prompt`` skips that paid request).
- The resolution rules (which variable, which URL) are the backends' own properties, so the
  doctor reports exactly what a training run would use.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillvc.core.config import CONFIG_FILE, Config, ModelConfig, listing, load_config
from skillvc.core.errors import AuthenticationFailed, BackendError, SkillvcError, redact
from skillvc.inputs import reader as inputs
from skillvc.models.backends.base import Backend, CallRequest, CallResult, TransientError
from skillvc.models.backends.local import (
    LOCAL_TIMEOUT_S,
    ServerInfo,
    is_loopback,
    served_models,
)
from skillvc.models.calls import secret_values
from skillvc.models.harness import get_backend
from skillvc.repo.skillrepo import SkillRepo
from skillvc.secrets import scrub
from skillvc.secrets import secret_values as known_secret_values
from skillvc.training.startcheck import check_model, check_scorer, sim_world_warning

OK, FAIL, SKIP, WARN = "ok", "fail", "skip", "warn"
ROLES = ("target", "optimizer")
PROBE_MESSAGES = ({"role": "user", "content": "Reply with the single word OK."},)
PROBE_MAX_TOKENS = 16  # enough for "OK"; a reasoning model may use them all and still answer 200
DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
# An agent CLI starts, loads its tools and may take a few turns: longer than one API call.
AGENT_PROBE_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 30.0  # a doctor that waits the run's full 120 s timeout feels hung
LOCAL_PROBE_TIMEOUT_S = 180.0  # a CPU model answers a first call in seconds to minutes


class DoctorFailed(BackendError):
    """One or more 'skillvc doctor' checks failed."""

    hint = "Fix the lines marked FAIL above, then run 'skillvc doctor' again."


@dataclass(frozen=True)
class Check:
    name: str  # e.g. "config", "target key", "optimizer reachable"
    status: str  # ok | fail | skip | warn (passes, with a remark)
    detail: str  # what was found, one sentence
    fix: str = ""  # what to do about a failure

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def redacted(self, secrets: list[str]) -> Check:
        return dataclasses.replace(
            self, detail=redact(self.detail, secrets), fix=redact(self.fix, secrets)
        )

    def line(self) -> str:
        label = "FAIL" if self.failed else self.status
        fix = f" Fix: {self.fix}" if self.status in (FAIL, WARN) and self.fix else ""
        return f"{label:<5} {self.name}: {self.detail}{fix}"

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Report:
    checks: list[Check]

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.failed]

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.to_dict() for c in self.checks]}

    def error(self) -> DoctorFailed:
        names = ", ".join(c.name for c in self.failures)
        return DoctorFailed(f"{len(self.failures)} of {len(self.checks)} checks failed ({names}).")


# -- the whole diagnosis ----------------------------------------------------------------------


def diagnose(
    path: str | Path = ".",
    skill: str | None = None,
    *,
    agent_prompt: bool = True,
    waiting: Callable[[str], None] | None = None,
) -> Report:
    """Every check for the repository containing ``path`` (nothing is raised for a failure).

    Many skills: ``skill`` names one (``--skill``); without it every skill's file and task set
    is checked, and each distinct model once; a server and model two roles share is asked
    once. ``waiting`` hears a line before each reachability call and while it waits (stderr).
    """
    config_check, config = check_config(path)
    checks = [config_check]
    if config is not None:
        skills = _skills(config, skill, checks)
        seen: list[tuple[str, ModelConfig]] = []
        asked: dict[tuple[str, str], tuple[str, Check]] = {}  # (url, model): (role, answer)
        for one in skills:
            label = f" {one.skill_name}" if one.skill_name else ""
            resuming, one = check_next_run(one)
            if resuming is not None:
                checks.append(dataclasses.replace(resuming, name=resuming.name + label))
            for check in (check_skill(one), check_tasks(one)):
                checks.append(dataclasses.replace(check, name=check.name + label))
            for role in ROLES:
                if (role, getattr(one, role)) not in seen:
                    seen.append((role, getattr(one, role)))
                    try:  # a mistyped backend or world: the nearest name and its line
                        check_model(one, role)
                    except SkillvcError as exc:
                        checks.append(Check(f"{role} backend", FAIL, exc.message, exc.hint))
                        continue
                    checks.extend(
                        check_role(role, getattr(one, role), agent_prompt, asked, waiting)
                    )
    secrets = secret_values(config) if config is not None else sorted(known_secret_values())
    return Report([c.redacted(secrets) for c in checks])


def _skills(config: Config, skill: str | None, checks: list[Check]) -> list[Config]:
    """The skills to check: the one named, else all; an unknown name is a failed check."""
    from skillvc.skill.skills import select_skill

    if skill is None:
        return config.all_skills()
    try:
        return [select_skill(config, skill)]
    except SkillvcError as exc:
        checks.append(Check("skill", FAIL, exc.message, exc.hint))
        return []


def check_next_run(config: Config) -> tuple[Check | None, Config]:
    """What the next ``train`` does with an unfinished run, and the config it will use: the
    run's own settings when it resumes, skillvc.toml's otherwise. None without one."""
    from skillvc.core.store import open_store
    from skillvc.training import resume
    from skillvc.training.setup import find_unfinished
    from skillvc.workspace.workspace import Workspace

    db = config.root / ".skillvc" / "events.db"
    if not db.is_file():
        return None, config
    ws = Workspace(root=config.root, config=config)
    try:
        with open_store(db, create=False) as store:
            unfinished = find_unfinished(store, config.skill.path if config.skill_name else None)
            if unfinished is None:
                return None, config
            plan = resume.plan_resume(ws, store, config, unfinished)
        run = plan.run_id
        if plan.action == resume.RESUME:
            used = resume.resumed_config(ws, unfinished, config)
            return Check(
                "next run",
                OK,
                f"train resumes run {run} with the settings it started with; "
                "the checks below use them",
            ), used
    except SkillvcError:
        return None, config  # the task and config checks report what is wrong
    if plan.action == resume.RESTART:
        return Check(
            "next run",
            OK,
            f"run {run} stopped before its first step; train starts over with "
            f"skillvc.toml's settings ({plan.sentence()})",
        ), config
    return Check(
        "next run",
        FAIL,
        f"the settings changed since run {run} started ({plan.steps_text}), "
        f"so train stops: {plan.sentence()}.",
        "'skillvc train --new' starts over with these settings, or 'skillvc train --resume' "
        "resumes it as it was.",
    ), config


def check_config(path: str | Path) -> tuple[Check, Config | None]:
    repo = SkillRepo.find(path)
    root = repo.root if repo is not None else Path(path).resolve()
    if repo is not None:
        repo.close()
    try:
        config = load_config(root)
    except SkillvcError as exc:
        return Check("config", FAIL, exc.message, exc.hint), None
    models = f"target {config.target.model}, optimizer {config.optimizer.model}"
    detail = f"{root / CONFIG_FILE} loads ({models})."
    if config.train.attribution and config.train.gate_confidence == 0:
        # What `skillvc init` wrote before attribution existed: alpha 1 passes every test.
        detail += (
            " Note: [train] gate_confidence = 0 with attribution on keeps every edit of a "
            "passing candidate (every test passes at alpha 1); remove the line for the default "
            "(0.8, 0.9 with a target temperature above 0), or set attribution = false for the "
            "paper's gate."
        )
    return Check("config", OK, detail), config


def check_skill(config: Config) -> Check:
    """The skill file exists and passes its format rules (what training will need)."""
    from skillvc.skill.formats import RULE_SIZE, check_bytes

    try:
        path = config.skill_path
    except SkillvcError as exc:  # a path outside the work tree is never read
        return Check("skill", FAIL, exc.message, exc.hint)
    regular = True  # until the look says it is missing
    try:
        regular = inputs.check_regular(path, config.skill.path)
        raw = inputs.read_bytes(path, config.skill.path, max_bytes=inputs.SKILL_MAX_BYTES)
    except SkillvcError as exc:  # a pipe, a device, a directory: named, never read
        if regular:
            return Check("skill", FAIL, exc.message, "Point [skill] path at a regular file.")
    if not regular:
        return Check(
            "skill",
            FAIL,
            f"{config.skill.path} does not exist.",
            "Point [skill] path in skillvc.toml at the skill file.",
        )
    # The file's own path decides its format rules (a package's [skill] path is its directory).
    rel = path.relative_to(config.root).as_posix()
    problems = check_bytes(rel, raw, max_bytes=config.skill.max_bytes)
    # The size budget blocks only growth (training refuses candidates that grow past it), so a
    # skill already over it can still be trained.
    problems = [p for p in problems if p.rule != RULE_SIZE]
    if problems:
        return Check(
            "skill",
            FAIL,
            problems[0].message,
            "Run 'skillvc validate' for every problem and fix the file.",
        )
    return _check_package(config) or Check(
        "skill", OK, f"{config.skill.path} passes its format rules."
    )


def _check_package(config: Config) -> Check | None:
    """A skill package's files as training will need them (None for a single-file skill)."""
    from skillvc.packages import load_package
    from skillvc.packages.checks import check_package_files

    package = load_package(config)
    if package is None:
        return None
    try:
        check_package_files(package, "in the working tree")
    except SkillvcError as exc:
        return Check("skill", FAIL, exc.message, exc.hint)
    n = len(package.files)
    return Check(
        "skill",
        OK,
        f"{config.skill.path} is a skill package of {n} file{'s' if n != 1 else ''} that "
        "passes its format rules and whose links resolve.",
    )


def check_tasks(config: Config) -> Check:
    """The task set loads and has the splits training needs (no model call)."""
    from skillvc.tasks.taskset import load_taskset

    try:
        taskset = load_taskset(config.tasks, config.root)
    except SkillvcError as exc:
        return Check("tasks", FAIL, exc.message, exc.hint)
    try:
        check_scorer(config)
    except SkillvcError as exc:
        return Check("tasks", FAIL, exc.message, exc.hint)
    counts = taskset.counts()
    summary = ", ".join(f"{n} {split}" for split, n in counts.items())
    fit = sim_world_warning(config, [i.input for i in (*taskset.train, *taskset.val)])
    if fit is not None:
        return Check("tasks", WARN, f"the task set loads ({summary}), but {fit}")
    if not counts.get("train") or not counts.get("val"):
        return Check(
            "tasks",
            FAIL,
            f"The task set has {summary}; training needs train and val.",
            "Set [tasks] train and val in skillvc.toml.",
        )
    return Check("tasks", OK, f"the task set loads ({summary}).")


def check_role(
    role: str,
    config: ModelConfig,
    agent_prompt: bool = True,
    asked: dict[tuple[str, str], tuple[str, Check]] | None = None,
    waiting: Callable[[str], None] | None = None,
) -> list[Check]:
    """The checks of one role; a failure skips the checks that depend on it. An agent preset
    gets one tiny real prompt unless ``agent_prompt`` is False (``--no-agent-prompt``).
    ``asked``: the reachability answers of earlier roles by (address, model), reused so a
    busy server is not asked twice; ``waiting`` hears that a call is out (``diagnose``)."""
    try:
        backend = get_backend(config)
    except SkillvcError as exc:
        return [Check(f"{role} backend", FAIL, exc.message, exc.hint)]
    if config.harness == "command":
        return [
            Check(f"{role} backend", OK, f"{config.model} runs an agent command per task."),
            check_executable(role, config),
        ]
    version = getattr(backend, "version", None)
    if callable(version):  # an agent preset (claude-code, codex): its CLI answers --version
        try:
            found = version()
        except SkillvcError as exc:
            return [Check(f"{role} backend", FAIL, exc.message, exc.hint)]
        checks = [
            Check(
                f"{role} backend",
                OK,
                f"{config.model} runs {config.harness} ({found}) per task, hermetically.",
            )
        ]
        if agent_prompt:
            checks.append(check_agent_prompt(role, config))
        else:
            checks.append(Check(f"{role} agent prompt", SKIP, "not sent (--no-agent-prompt)."))
        return checks
    if config.model.startswith("sim:"):
        return [
            Check(f"{role} backend", OK, f"{config.model} (offline simulator, always reachable).")
        ]
    checks = [check_endpoint(role, config, backend), *check_credentials(role, config, backend)]
    if any(c.failed for c in checks):
        checks.append(Check(f"{role} reachable", SKIP, "not tried until the checks above pass."))
    else:
        served = check_served_model(role, config, backend)
        if served is not None:
            checks.append(served)
        server = check_server(role, config, backend)
        prefix = config.model.split(":", 1)[0]
        where = getattr(backend, "base_url", None) or DEFAULT_URLS.get(prefix, "the default URL")
        earlier = asked.get((where, config.model)) if asked is not None else None
        if earlier is not None:
            first, answer = earlier
            checks.append(
                dataclasses.replace(
                    answer,
                    name=f"{role} reachable",
                    detail=f"the {first}'s server and model, asked once: {answer.detail}",
                )
            )
        else:
            # A server on this machine may be a busy CPU model, whether or not it says so.
            local = server is not None or is_loopback(where)
            reach = check_reachable(role, config, local=local, waiting=waiting, where=where)
            if asked is not None:
                asked[(where, config.model)] = (role, reach)
            checks.append(reach)
        if server is not None:
            checks.append(server)
    return checks


def check_served_model(role: str, config: ModelConfig, backend: Backend) -> Check | None:
    """A warning when the server at ``base_url`` lists its models (``GET /models``) and the
    configured name is not among them (None: it is, or the server lists none)."""
    url = None if config.azure else getattr(backend, "base_url", None)
    if not url:
        return None
    key = os.environ.get(getattr(backend, "key_env", "") or "", "").strip()
    served = served_models(url, {"Authorization": f"Bearer {key}"} if key else {})
    name = config.model.split(":", 1)[1] if ":" in config.model else config.model
    if not served or name in served:
        return None
    quoted = [f"'{m}'" for m in served]
    return Check(
        f"{role} model",
        WARN,
        f"{scrub(url)} serves {listing(quoted)}, not '{name}'; calls to '{name}' may fail "
        "with 404.",
        f'Set model = "openai:{served[0]}" (or the served model you meant) in [{role}] of '
        f"{CONFIG_FILE}.",
    )


def check_server(role: str, config: ModelConfig, backend: Backend) -> Check | None:
    """What a local server said about itself and what training makes of it (None: the model
    is not on a server that says; nothing changes for it)."""
    info_of = getattr(backend, "server_info", None)
    info = info_of() if callable(info_of) else None
    if not isinstance(info, ServerInfo):
        return None
    answer = info.answer_tokens(config.max_tokens)
    limit = info.prompt_limit(answer)
    uses = []
    if role == "optimizer" and limit is not None:
        uses.append(f"optimizer prompts fitted to ~{limit:,} tokens, answers capped at {answer:,}")
    if role == "optimizer" and info.json_schema:
        uses.append("edits asked for through a JSON Schema")
    if info.slots:
        uses.append(f"workers at most {info.slots}")
    timeout = getattr(backend, "timeout_s", config.timeout_s)
    uses.append(f"timeout {timeout:g} s")
    uses.append("cost local ($0 unless [prices] names the model)")
    return Check(f"{role} server", OK, f"{info.describe()}; {', '.join(uses)}.")


# -- single checks ----------------------------------------------------------------------------


def check_endpoint(role: str, config: ModelConfig, backend: Backend) -> Check:
    """Where the calls go, and whether that address can work at all."""
    name = f"{role} backend"
    if getattr(backend, "azure", False):
        where = f"Azure OpenAI deployment '{getattr(backend, 'deployment', '?')}'"
        return Check(name, OK, f"{config.model} via {where}.")
    url = getattr(backend, "base_url", None)
    if url is None:
        default = DEFAULT_URLS.get(config.model.split(":", 1)[0], "the provider's default address")
        return Check(name, OK, f"{config.model} via {default} (the default).")
    source = "base_url" if config.base_url else _base_url_variable(config)
    shown = scrub(url)  # a gateway URL with credentials: its password is a secret too
    if not url.startswith(("http://", "https://")):
        return Check(
            name,
            FAIL,
            f"{source} '{shown}' does not start with http:// or https://.",
            "Write the full URL, e.g. http://localhost:8000/v1 for a local server.",
        )
    return Check(name, OK, f"{config.model} via {shown} (from {source}).")


def check_credentials(role: str, config: ModelConfig, backend: Backend) -> list[Check]:
    checks = []
    key_env = getattr(backend, "key_env", None)
    if key_env and getattr(backend, "uses_placeholder_key", False):
        checks.append(
            Check(
                f"{role} key",
                OK,
                f"{key_env} is not set; the server is on this machine, so a placeholder key is "
                "sent (a local server accepts any).",
            )
        )
    elif key_env:
        checks.append(_check_key(role, key_env, local_ok=_is_openai(config) and not config.azure))
    if getattr(backend, "azure", False):
        checks.append(
            _check_setting(
                f"{role} azure endpoint",
                getattr(backend, "azure_endpoint", None),
                "No Azure endpoint: neither azure_endpoint nor AZURE_OPENAI_ENDPOINT is set.",
                f'Set azure_endpoint = "https://<resource>.openai.azure.com" in [{role}] of '
                f"{CONFIG_FILE}, or export AZURE_OPENAI_ENDPOINT.",
            )
        )
        checks.append(
            _check_setting(
                f"{role} azure api version",
                getattr(backend, "api_version", None),
                "No Azure API version: api_version is not set and neither "
                "AZURE_OPENAI_API_VERSION nor OPENAI_API_VERSION is set.",
                f'Set api_version = "2024-10-21" (or your version) in [{role}] of {CONFIG_FILE}, '
                "or export AZURE_OPENAI_API_VERSION.",
            )
        )
    return checks


def _check_key(role: str, key_env: str, *, local_ok: bool) -> Check:
    name = f"{role} key"
    value = os.environ.get(key_env, "")
    if not value:
        local = (
            " A server on this machine (localhost, 127.0.0.1) needs none; another "
            "OpenAI-compatible server may accept any placeholder value (e.g. 'local')."
            if local_ok
            else ""
        )
        return Check(
            name,
            FAIL,
            f"{key_env} is not set.",
            f"Export it (export {key_env}=...), or name another variable with api_key_env in "
            f"[{role}] of {CONFIG_FILE}.{local}",
        )
    if value != value.strip():
        # A pasted newline makes the HTTP client refuse the header, which looks like an outage.
        return Check(
            name,
            FAIL,
            f"{key_env} has leading or trailing whitespace.",
            f'Export it again without spaces or newlines, e.g. export {key_env}="$(cat keyfile | '
            "tr -d '[:space:]')\".",
        )
    return Check(name, OK, f"{key_env} is set (value not shown).")


def _check_setting(name: str, value: str | None, missing: str, fix: str) -> Check:
    if not value:
        return Check(name, FAIL, missing, fix)
    return Check(name, OK, f"{value}.")


def check_reachable(
    role: str,
    config: ModelConfig,
    *,
    local: bool = False,
    waiting: Callable[[str], None] | None = None,
    where: str = "",
) -> Check:
    """One tiny call straight through the backend: not cached, not retried, not recorded.
    ``local``: a model on a local server, which may be on a busy CPU (a longer wait).
    ``waiting`` hears a line when the call goes out and every ``WAIT_NOTE_S`` while it waits."""
    name = f"{role} reachable"
    timeout = config.timeout_s
    if local and timeout == ModelConfig().timeout_s:
        timeout = LOCAL_TIMEOUT_S  # what a run would wait (skillvc.models.backends.openai_backend)
    wait = LOCAL_PROBE_TIMEOUT_S if local else PROBE_TIMEOUT_S
    quick = dataclasses.replace(config, timeout_s=min(timeout, wait))
    request = CallRequest(
        role="doctor",
        model=config.model,
        messages=PROBE_MESSAGES,
        params={"max_tokens": PROBE_MAX_TOKENS},
    )
    what = "model name and deployment" if config.azure else "model name"

    def hint(exc: SkillvcError) -> str:
        if isinstance(exc, TransientError):
            return (
                "Check that the server is running and the address above is right; a 429 or "
                "5xx means it is busy, so try again or lower requests_per_minute."
            )
        return f"Check the {what} in [{role}] of {CONFIG_FILE} and that your account may use it."

    with _waiting_notes(waiting, f"{config.model} at {scrub(where)}", quick.timeout_s):
        probed = _probe(name, quick, request, hint)
    if isinstance(probed, Check):
        return probed
    result, seconds = probed
    ms = seconds * 1000.0
    tokens = result.prompt_tokens + result.completion_tokens
    return Check(name, OK, f"answered one tiny call in {ms:.0f} ms ({tokens} tokens).")


WAIT_NOTE_S = 15.0  # how often a waiting doctor says it is still waiting


@contextlib.contextmanager
def _waiting_notes(
    waiting: Callable[[str], None] | None, what: str, limit_s: float
) -> Iterator[None]:
    """Tell ``waiting`` that a call to ``what`` is out, and every ``WAIT_NOTE_S`` that it still
    is (a local CPU model may take minutes, and a silent doctor looks hung)."""
    if waiting is None:
        yield
        return
    waiting(f"doctor: waiting for one tiny answer from {what} (at most {limit_s:g} s)...")
    done = threading.Event()
    started = time.perf_counter()

    def note() -> None:
        while not done.wait(WAIT_NOTE_S):
            waiting(f"doctor: still waiting for {what} ({time.perf_counter() - started:.0f} s)")

    thread = threading.Thread(target=note, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _probe(
    name: str, config: ModelConfig, request: CallRequest, hint: Callable[[SkillvcError], str]
) -> tuple[CallResult, float] | Check:
    """The call's result and its seconds, or the failed check (a refused key gives its own
    hint; any other error ``hint(error)``)."""
    started = time.perf_counter()
    try:
        result = get_backend(config).complete(request)
    except AuthenticationFailed as exc:
        return Check(name, FAIL, exc.message, exc.hint)
    except SkillvcError as exc:
        return Check(name, FAIL, exc.message, hint(exc))
    return result, time.perf_counter() - started


def check_agent_prompt(role: str, config: ModelConfig) -> Check:
    """One tiny prompt through the agent CLI, hermetically like a task: does its key work and
    its API answer? Not cached, not recorded; a refused key is reported after the CLI's
    second refusal (seconds), a dead server when the short timeout ends, with the CLI's own
    last retry notice."""
    name = f"{role} agent prompt"
    quick = dataclasses.replace(
        config, task_timeout_s=min(config.task_timeout_s, AGENT_PROBE_TIMEOUT_S)
    )
    request = CallRequest(role="doctor", model=config.model, messages=PROBE_MESSAGES)
    hint = (
        "Check the agent's key and API address in [target] env of "
        f"{CONFIG_FILE}, and run the agent by hand on one prompt."
    )
    probed = _probe(name, quick, request, lambda _exc: hint)
    if isinstance(probed, Check):
        return probed
    result, seconds = probed
    cost = f", ${result.cost_usd:.4f}" if result.cost_usd is not None else ""
    tokens = result.prompt_tokens + result.completion_tokens
    return Check(name, OK, f"answered one tiny prompt in {seconds:.1f} s ({tokens} tokens{cost}).")


def check_executable(role: str, config: ModelConfig) -> Check:
    name = f"{role} executable"
    program = config.command[0]
    if ("/" in program or os.sep in program) and not os.path.isabs(program):
        # The agent runs inside a scratch directory, where a relative path means nothing.
        return Check(
            name,
            FAIL,
            f"command[0] '{program}' is a relative path, but each task runs in a scratch "
            "directory.",
            "Use an absolute path or a program name found on PATH.",
        )
    found = shutil.which(program)
    if found is None:
        where = (
            "does not exist or is not executable" if os.path.isabs(program) else "is not on PATH"
        )
        return Check(
            name,
            FAIL,
            f"'{program}' {where}.",
            "Install the agent CLI, or put its absolute path first in command = [...] in "
            f"[{role}] of {CONFIG_FILE}.",
        )
    return Check(name, OK, f"{found} found (not started; the first task runs it).")


# -- helpers ----------------------------------------------------------------------------------


def _is_openai(config: ModelConfig) -> bool:
    return config.model.startswith("openai:")


def _base_url_variable(config: ModelConfig) -> str:
    return "OPENAI_BASE_URL" if _is_openai(config) else "ANTHROPIC_BASE_URL"
