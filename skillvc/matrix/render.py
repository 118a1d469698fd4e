"""Text renderings of a matrix (model x split with intervals) and of paired changes."""

from __future__ import annotations

from collections.abc import Sequence

from skillvc.matrix.scores import Cell, MatrixResult, TargetChange
from skillvc.review.output import table


def cell_text(cell: Cell | None) -> str:
    if cell is None or cell.result.mean is None:
        return "-"
    low_high = cell.interval
    ci = f" [{low_high[0]:.2f}, {low_high[1]:.2f}]" if low_high else ""
    return f"{cell.result.mean:.3f}{ci} n={cell.result.n}"


def matrix_lines(result: MatrixResult, label: str) -> list[str]:
    """A model x split table of means with 95% intervals, then the calls it took."""
    rows = [
        [name, model, *(cell_text(result.cell(name, split)) for split in result.splits)]
        for name, model in result.targets
    ]
    fresh = sum(c.result.fresh_calls for c in result.cells)
    calls = sum(c.result.calls for c in result.cells)
    return [
        f"{label} on {len(result.targets)} target models (mean [95% interval]):",
        table(rows, ["target", "model", *result.splits]),
        f"model calls {calls} ({fresh} made, {calls - fresh} answered from the log)",
    ]


def change_lines(changes: Sequence[TargetChange], base: str, head: str) -> list[str]:
    """One line per model: the paired difference, items worse/better, the sign test."""
    rows = [
        [
            c.target,
            c.model,
            f"{c.comparison.a_mean:.3f}" if c.comparison.a_mean is not None else "-",
            f"{c.comparison.b_mean:.3f}" if c.comparison.b_mean is not None else "-",
            f"{c.comparison.diff:+.3f}" if c.comparison.diff is not None else "-",
            c.worse,
            c.better,
            f"{c.p:.3g}",
            "REGRESSION" if c.regression else "ok",
        ]
        for c in changes
    ]
    split = changes[0].comparison.a.split if changes else "val"
    headers = ["target", "model", base, head, "diff", "worse", "better", "p", "verdict"]
    return [f"matrix on {split} (one-sided sign test on paired items):", table(rows, headers)]
