"""Which judge a calibration holds for, and whether its numbers pass (light: ``skillvc check``
and ``train`` consult it before any model is set up, so it imports no SDK or evaluator)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillvc.core.config import Config, JudgeConfig
from skillvc.core.errors import ConfigError
from skillvc.core.hashing import content_id, sha256_hex
from skillvc.core.paths import inside_repo

EVENT = "judge.calibrated"
# The judge scorer's default rubric (skillvc.tasks.scorers.DEFAULT_RUBRIC; a test keeps them equal).
DEFAULT_RUBRIC = "The output is correct if it gives the same answer as an acceptable answer."
_MODEL_KEYS = (
    "model",
    "harness",
    "temperature",
    "max_tokens",
    "seed",
    "reasoning_effort",
    "base_url",
    "azure",
    "deployment",
    "command",
)


def judge_options(config: Config) -> dict[str, Any]:
    """The judge scorer's options (the configured ones when the scorer is ``judge``)."""
    return dict(config.tasks.scorer_options) if config.tasks.scorer == "judge" else {}


def rubric_text(options: dict[str, Any], read: Callable[[str], str | None]) -> str:
    """The rubric the judge grades with (``rubric_file`` read with ``read``)."""
    if "rubric_file" in options:
        text = read(str(options["rubric_file"]))
        if text is None:
            raise ConfigError(
                f"The judge's rubric file {options['rubric_file']} does not exist.",
                hint="Write the rubric there and commit it, or use the rubric option instead.",
            )
        return text
    return str(options.get("rubric", DEFAULT_RUBRIC))


def judge_id(config: Config, rubric: str) -> str:
    """What a calibration holds for: the judge model with its parameters, rubric, threshold."""
    model = {key: getattr(config.optimizer, key) for key in _MODEL_KEYS}
    threshold = judge_options(config).get("threshold", 0.5)
    return content_id({"judge": model, "rubric": sha256_hex(rubric), "threshold": threshold})


def read_in(root: Path) -> Callable[[str], str | None]:
    def read(name: str) -> str | None:
        path = inside_repo(root, name, "[tasks.scorer_options] rubric_file")
        return path.read_text(encoding="utf-8") if path.is_file() else None

    return read


def meets(agreement: dict[str, Any], judge: JudgeConfig) -> bool:
    """True when the recorded agreement reaches [judge] min_accuracy and min_kappa."""
    kappa = agreement.get("kappa")
    return agreement["accuracy"] >= judge.min_accuracy and (
        kappa is not None and kappa >= judge.min_kappa
    )
