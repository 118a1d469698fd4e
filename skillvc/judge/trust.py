"""The judge trust gate: a ``judge`` scorer may gate training or ``skillvc check`` only when
its latest calibration (``judge.calibrated`` for this model, rubric and threshold) reaches
``[judge] min_accuracy`` and ``min_kappa`` (or, with ``[judge] require_calibration``, only when
it was calibrated at all); ``--trust-judge`` overrides."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillvc.core.config import CONFIG_FILE, Config, parse_config
from skillvc.core.errors import ConfigError
from skillvc.core.paths import STATE_DIR
from skillvc.judge.identity import EVENT, judge_id, judge_options, meets, read_in, rubric_text


class JudgeNotTrusted(ConfigError):
    """The judge scorer's agreement with a person is unknown or below the thresholds."""


def latest_calibration(db: Path, jid: str) -> dict[str, Any] | None:
    """The newest recorded calibration of judge ``jid`` (None: never calibrated, or no log)."""
    if not db.is_file():
        return None
    from skillvc.core.store import open_store

    with open_store(db) as store:
        rows = store.query(
            "SELECT id FROM events WHERE type = ? AND json_extract(payload, '$.judge_id') = ? "
            "ORDER BY id DESC LIMIT 1",
            [EVENT, jid],
        )
        return dict(store.get(rows[0]["id"]).payload) if rows else None


def require_trusted_judge(
    config: Config, db: Path, read: Callable[[str], str | None], trust: bool
) -> None:
    """Raise JudgeNotTrusted (exit 2) when the judge scorer may not gate."""
    if trust or config.tasks.scorer != "judge":
        return
    jid = judge_id(config, rubric_text(judge_options(config), read))
    found = latest_calibration(db, jid)
    j = config.judge
    if found is None:
        if j.require_calibration:
            raise JudgeNotTrusted(
                "The judge has not been calibrated against a person's labels, and [judge] "
                "require_calibration is set.",
                hint="Run skillvc judge calibrate --labels FILE, or pass --trust-judge.",
            )
        return
    if not meets(found, j):
        kappa = found.get("kappa")
        raise JudgeNotTrusted(
            f"The judge agrees with the person on {found['accuracy']:.0%} of "
            f"{found['n']} labels (kappa {kappa if kappa is None else round(kappa, 2)}), "
            f"below [judge] min_accuracy {j.min_accuracy:g} or min_kappa {j.min_kappa:g}, "
            "so it may not gate.",
            hint="Improve the rubric (skillvc judge improve) or pass --trust-judge.",
        )


def require_trusted_judge_at(root: Path, base: str, skill: str | None, trust: bool) -> None:
    """``skillvc check``: the judge as BASE configures it (rubric file at BASE)."""
    if trust:
        return
    from skillvc.repo.skillrepo import SkillRepo
    from skillvc.review.trust import _decode, _read_at

    with SkillRepo(root) as repo:
        repo.resolve(base)
        raw = _read_at(repo, CONFIG_FILE, base)
        if raw is None or b"judge" not in raw:
            return  # no judge scorer at BASE: nothing to look up (keeps check fast)
        config = parse_config(_decode(raw, f"{CONFIG_FILE} at {base}"), root)
        if config.many and skill is None:
            configs = config.all_skills()
        else:
            configs = [config.for_skill(skill) if skill else config]

        def read(name: str) -> str | None:
            blob = _read_at(repo, name, base)
            return None if blob is None else blob.decode("utf-8", "replace")

        for one in configs:
            require_trusted_judge(one, root / STATE_DIR / "events.db", read, trust)


def require_trusted_judge_here(config: Config, trust: bool) -> None:
    """``skillvc train``: the judge as the working tree configures it."""
    require_trusted_judge(
        config, config.root / STATE_DIR / "events.db", read_in(config.root), trust
    )
