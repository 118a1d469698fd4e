"""What can fail before any model call, checked before a run is created.

A run that stops at its first call (no key, a mistyped backend, world or scorer) used to leave
a 0-step stopped run in ``skillvc runs --all`` and, on the next try, a second id with a ".2"
suffix. ``check_before_run`` raises the error such a run would have met, with the line of
skillvc.toml to fix, before ``run.started`` is logged.

Invariants: no model call, no network, no write; the SDKs are not imported (the key rules are
the backends' own, read from ``skillvc.models.backends.keys``).
"""

from __future__ import annotations

from collections.abc import Sequence

from skillvc.core.config import CONFIG_FILE, Config, ModelConfig
from skillvc.core.errors import ConfigError, ScorerError, SkillvcError
from skillvc.core.suggest import config_line
from skillvc.models.backends import backend_names, provider_backend
from skillvc.models.backends.keys import missing_key
from skillvc.tasks.scorers import get_scorer, scorer_names

ROLES = ("target", "optimizer")


def check_before_run(config: Config) -> None:
    """Raise what the run's first calls would: an unknown backend, simulator world or scorer
    (naming its line of skillvc.toml and the nearest known name), or a missing key."""
    for role in ROLES:
        check_model(config, role)
    check_scorer(config)
    for role in ROLES:
        error = missing_key(getattr(config, role), role)
        if error is not None:
            raise error


def check_scorer(config: Config) -> None:
    """``[tasks] scorer`` names a registered scorer."""
    if config.tasks.scorer not in scorer_names():
        try:
            get_scorer(config.tasks.scorer)
        except ScorerError as exc:
            raise located(exc, config, "tasks", "scorer") from None


def check_model(config: Config, role: str) -> None:
    """The role's model string names a known backend (and a known world for ``sim:``)."""
    m: ModelConfig = getattr(config, role)
    if m.harness != "chat":
        return  # an agent CLI or a command: its model label is the agent's business
    prefix = m.model.split(":", 1)[0]
    try:
        if prefix == "sim" or prefix not in backend_names():
            provider_backend(m)  # the simulator is built at once; an unknown prefix raises
    except ConfigError as exc:
        raise located(exc, config, role, "model") from None


def located(exc: SkillvcError, config: Config, section: str, key: str) -> SkillvcError:
    """``exc`` with the line of skillvc.toml that sets ``[section] key``, when it is there."""
    try:
        text = (config.root / CONFIG_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return exc
    line = config_line(text, section, key)
    if line is None:
        return exc
    where = f"[{section}] {key} on line {line} of {CONFIG_FILE}"
    return type(exc)(f"{exc.message.rstrip('.')} ({where}).", hint=exc.hint)


# Simulator worlds that read only their own kind of task (Acme support tickets).
TICKET_WORLDS = ("support", "support-literal", "support-package")


def sim_world_warning(config: Config, inputs: Sequence[str]) -> str | None:
    """A warning when the target is a ``sim:`` world that cannot read most of these task
    inputs (every score would be 0 and no edit could help), else None."""
    model = config.target.model
    world = model.split(":", 1)[1] if model.startswith("sim:") else None
    if world not in TICKET_WORLDS or not inputs:
        return None
    from skillvc.models.simworld import parse_case

    readable = sum(1 for text in inputs if parse_case(text) is not None)
    if readable * 2 >= len(inputs):
        return None
    return (
        f"{model} is a simulator of Acme support tickets and recognises {readable} of "
        f"{len(inputs)} task inputs here, so it scores them 0 whatever the skill says. To try "
        'the loop on your own tasks offline, set model = "sim:tasks" in [target] and '
        "[optimizer] (a simulator that learns from the items' own targets); for real scores, "
        "an openai: or anthropic: model."
    )
