"""What ``train`` and ``demo`` print about a run: progress, the summary lines, the exit."""

from __future__ import annotations

from typing import Any


def progress_for(quiet: bool) -> Any:
    from skillvc.core.progress import Progress

    return Progress.to_stderr(quiet)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary_lines(summary: Any) -> list[str]:
    """A run's summary in plain words (``skillvc help terms`` explains the rest)."""
    from skillvc.review.output import fmt_score
    from skillvc.training.significance import stated

    cost = (
        f"${summary.cost_usd:.4f}"
        if not summary.unpriced_calls
        else f"${summary.cost_usd:.4f} + {summary.unpriced_calls} calls of unknown price"
    )
    # Steps and slow updates counted apart (a slow update is a candidate, not a step).
    empty = summary.steps - summary.accepted - summary.rejected
    slow = summary.slow_updates_accepted + summary.slow_updates_rejected
    # Every call paid for, as `runs` and `report` count them: speculation's unused ones too.
    wasted = getattr(summary, "speculation_wasted_calls", 0)
    calls = summary.calls + wasted
    lines = [
        f"run {summary.run_id} {summary.status} after {plural(summary.steps, 'step')}: "
        f"{plural(summary.accepted, 'change')} kept, {summary.rejected} tried and refused "
        "(they did not beat the current skill on val), "
        f"{plural(empty, 'step')} with nothing to try",
    ]
    if slow:
        lines.append(
            f"epoch-end reviews (slow updates): {summary.slow_updates_accepted} kept, "
            f"{summary.slow_updates_rejected} refused"
        )
    lines += [
        f"val  {fmt_score(summary.baseline_val)} -> {fmt_score(summary.best_val)}  "
        "(the split that decides what is kept)",
        f"test {fmt_score(summary.baseline_test)} -> {fmt_score(summary.test)}  "
        "(held out: reported, never used to decide)",
        f"model calls {calls} ({summary.fresh_calls} made by this run, "
        f"{calls - summary.fresh_calls} answered from the log), "
        f"tokens {summary.tokens:,}, cost {cost}",
    ]
    if summary.calls_saved_by_early_stop:
        lines.append(
            f"early stopping saved {summary.calls_saved_by_early_stop} calls (a gate stops "
            "once the change can no longer win)"
        )
    for gain in getattr(summary, "gains", []):
        what = f"step {gain['step']}" if isinstance(gain["step"], int) else str(gain["step"])
        dropped = (
            f"; {gain['dropped']} edit(s) dropped by attribution, {gain['kept']} kept"
            if gain["dropped"]
            else ""
        )
        said = (
            gain["verdict"]
            if gain["verdict"] == "ungated"
            else stated(gain["p_value"], gain["alpha"])  # the words every view uses
        )
        lines.append(f"accepted {what}: {said}{dropped}")
    from skillvc.review.runs import cache_text

    cache = cache_text(
        getattr(summary, "cached_tokens", 0), getattr(summary, "cache_hit_ratio", None)
    )
    if cache:
        lines.append(cache)
    if wasted:
        lines.append(
            f"speculation: {wasted} of these calls were started ahead for the next step while "
            "a gate ran, and not needed because the gate kept its change"
        )
    answered = getattr(summary, "reflections", 0)
    usable = getattr(summary, "reflections_usable", 0)
    if answered > usable:
        lines.append(
            f"optimizer: {answered - usable} of {answered} reflections gave no usable edits "
            "(the reflection.failed events in .skillvc/events.db say why)"
        )
    lines.append("What these words mean: skillvc help terms")
    return lines


def fail_when_optimizer_unusable(summary: Any) -> None:
    """A run whose optimizer answered and never usably did trained nothing: exit 6, loudly."""
    if not getattr(summary, "optimizer_unusable", False):
        return
    from skillvc.core.errors import OptimizerOutputError

    raise OptimizerOutputError(
        f"Run {summary.run_id} trained nothing: none of the optimizer's {summary.reflections} "
        "answers gave a usable edit (the reflection.failed events in .skillvc/events.db say why).",
        hint="Use a stronger optimizer model, or one on a server that enforces JSON Schema "
        "output (llama.cpp, Ollama, vLLM); then run 'skillvc train --new'.",
    )
