"""The textual learning rate: how many edits a step may apply.

Cosine decay from ``learning_rate`` to ``min_learning_rate`` over all steps (the SkillOpt
default, 4 -> 2), or linear, or constant. Rounded to whole edits, never below the minimum.
"""

from __future__ import annotations

import math


def learning_rate(step: int, total_steps: int, lr_max: int, lr_min: int, schedule: str) -> int:
    """Edit budget of ``step`` (1-based) out of ``total_steps``."""
    if schedule == "constant" or total_steps <= 1:
        return lr_max
    progress = min(max((step - 1) / (total_steps - 1), 0.0), 1.0)
    if schedule == "linear":
        value = lr_max - (lr_max - lr_min) * progress
    elif schedule == "cosine":
        value = lr_min + (lr_max - lr_min) * 0.5 * (1 + math.cos(math.pi * progress))
    else:
        raise ValueError(f"unknown learning-rate schedule {schedule!r}")
    return max(lr_min, min(lr_max, int(math.floor(value + 0.5))))
