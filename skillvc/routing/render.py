"""Routing scores as text for a terminal, rows for CSV, and an HTML table for the report."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from skillvc.routing.triggers import NONE


def _f(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _band(pair: Any) -> str:
    return f" [{pair[0]:.2f}, {pair[1]:.2f}]" if pair else ""


def score_lines(d: Mapping[str, Any]) -> list[str]:
    """A ``RoutingScore.to_dict()`` as lines: library score, per-skill P/R/F1, the matrix."""
    lines = [
        f"library score {_f(d['library'])}{_band(d.get('library_interval'))} "
        f"({d['correct']}/{d['n']} routed right, 'none' included"
        + (f"; {d['errors']} errors not scored" if d.get("errors") else "")
        + (f"; {d['unparsed']} answers naming no skill" if d.get("unparsed") else "")
        + ")",
        "",
        f"{'skill':<16} {'precision':>16} {'recall':>16} {'f1':>16}  wanted picked",
    ]
    for name, s in d["skills"].items():
        lines.append(
            f"{name[:16]:<16} "
            f"{_f(s['precision']) + _band(s['precision_interval']):>16} "
            f"{_f(s['recall']) + _band(s['recall_interval']):>16} "
            f"{_f(s['f1']) + _band(s['f1_interval']):>16}  {s['wanted']:>6} {s['picked']:>6}"
        )
    lines += ["", "confusion (rows: expected, columns: picked):", *matrix_lines(d["confusion"])]
    return lines


def matrix_lines(confusion: Mapping[str, Mapping[str, int]]) -> list[str]:
    if not confusion:
        return []
    cols = list(next(iter(confusion.values())))
    width = max(6, *(len(c) for c in cols))
    label = max(8, *(len(r) for r in confusion))
    out = [" " * label + " " + " ".join(f"{c[:width]:>{width}}" for c in cols)]
    for row, counts in confusion.items():
        cells = " ".join(f"{counts[c] or '.':>{width}}" for c in cols)
        out.append(f"{row:<{label}} {cells}")
    return out


def csv_rows(confusion: Mapping[str, Mapping[str, int]]) -> list[dict[str, Any]]:
    return [{"expected": row, **counts} for row, counts in confusion.items()]


def matrix_html(confusion: Mapping[str, Mapping[str, int]]) -> str:
    """The confusion matrix as an HTML table, cells shaded by their share of the row
    (the diagonal green, the rest red), inline styles only (no CDN, no script)."""
    if not confusion:
        return ""
    cols = list(next(iter(confusion.values())))
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    rows = []
    for row, counts in confusion.items():
        total = sum(counts.values()) or 1
        cells = []
        for c in cols:
            n = counts[c]
            right = (
                c == row or (row == NONE and c == NONE) or (row.startswith("not ") and c != row[4:])
            )
            hue = "46,160,67" if right else "214,39,40"
            alpha = round(0.15 + 0.7 * n / total, 2) if n else 0
            style = f"background:rgba({hue},{alpha});text-align:right;padding:2px 6px"
            cells.append(f'<td style="{style}">{n or ""}</td>')
        rows.append(f"<tr><th>{html.escape(row)}</th>{''.join(cells)}</tr>")
    return (
        '<table class="confusion"><caption>Routing: expected (rows) by picked (columns)'
        f"</caption><tr><th></th>{head}</tr>{''.join(rows)}</table>"
    )
