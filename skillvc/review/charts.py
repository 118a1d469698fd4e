"""Pictures of training: a Mermaid chart, inline SVG and a terminal sparkline.

Invariants:
- Charts draw a ``Curve`` (``skillvc.review.curves.run_curve``), which is read from the event log
  alone; nothing here reads git, the working tree or the network.
- Output is self-contained text: SVG without scripts, external references or fonts to load,
  and every label that comes from data goes through ``html.escape``.
- One SVG point per step: a ``<g class="point DECISION">`` with a ``<title>`` saying what it is,
  inside a link to its row of the page's steps table (``point_href``): hovering shows the title,
  and a tap (a phone has no hover) or Tab and Enter take the reader to the row's numbers.
- ``compact=True`` draws the same chart for a phone: about as many units wide as the phone has
  pixels, so its text stays near its nominal size, with the legend below the plot.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

from skillvc.review.curves import Curve

SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None]) -> str:
    """One character per value on a fixed 0..1 scale (scores), a space for a missing value.

    The scale is fixed, not the values' own range, so two runs' sparklines compare at a glance
    and a flat run does not look like a dramatic one.
    """
    out = []
    for v in values:
        if v is None:
            out.append(" ")
            continue
        level = round(min(1.0, max(0.0, v)) * (len(SPARKS) - 1))
        out.append(SPARKS[level])
    return "".join(out)


def _filled(values: Sequence[float | None]) -> list[float]:
    """Mermaid lines cannot have gaps: a missing value repeats the one before (or the first
    known one, at the start)."""
    known = next((v for v in values if v is not None), 0.0)
    out: list[float] = []
    for v in values:
        known = v if v is not None else (out[-1] if out else known)
        out.append(known)
    return out


def _num(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"


# Each Mermaid line's colour and the square that names it in the legend. Every colour has a
# contrast of at least 3:1 (WCAG's figure for graphics) against both GitHub's light page
# (#ffffff) and its dark one (#0d1117); Mermaid's default palette starts with #ECECFF, which
# vanishes on white. Emoji squares are coloured the same in every theme.
MERMAID_LINES = {
    "val": ("#1f6feb", "🟦"),
    "train batch mean": ("#8250df", "🟪"),
    "test at start": ("#bc4c00", "🟧"),
    "test at end": ("#238636", "🟩"),
}


def mermaid_xychart(curve: Curve) -> list[str]:
    """A fenced ``xychart-beta`` block (GitHub renders it), then a legend naming the lines.

    x is the step (0 = baseline). Lines in order: val; the train batch mean when the run has
    train rollouts (step 0 repeats step 1, whose batch the baseline skill ran); test at the
    start and at the end, as flat reference lines, when the run measured them. The block opens
    with an init directive giving each line its colour (``MERMAID_LINES``).
    """
    points = curve.points
    labels = ", ".join(f'"{p.step}"' for p in points)
    series = [("val", _filled([p.val for p in points]))]
    if any(p.train is not None for p in points):
        series.append(("train batch mean", _filled([p.train for p in points])))
    if curve.test_start is not None:
        series.append(("test at start", [curve.test_start] * len(points)))
    if curve.test_end is not None:
        series.append(("test at end", [curve.test_end] * len(points)))
    palette = ", ".join(MERMAID_LINES[name][0] for name, _ in series)
    theme = {"themeVariables": {"xyChart": {"plotColorPalette": palette}}}
    lines = [
        "```mermaid",
        f"%%{{init: {json.dumps(theme)}}}%%",
        "xychart-beta",
        f'    title "{curve.metric} score per step"',
        f'    x-axis "step" [{labels}]',
        '    y-axis "score" 0 --> 1',
    ]
    lines += [f"    line [{', '.join(_num(v) for v in values)}]" for _, values in series]
    lines.append("```")
    legend = " · ".join(f"{MERMAID_LINES[name][1]} {name}" for name, _ in series)
    lines += ["", f"Legend: {legend}."]
    return lines


# -- SVG --------------------------------------------------------------------------------

_COLOURS = {
    "val": "#1f6feb",
    "train": "#8b949e",
    "test_start": "#bf8700",
    "test_end": "#1a7f37",
    "accepted": "#1a7f37",
    "forced": "#bf8700",
    "rejected": "#cf222e",
    "none": "#6e7781",
}


def point_href(step: int) -> str:
    """Where a point of the curve links: its row of the HTML report's steps table (step 0,
    the baseline, has none: the scores table)."""
    return f"#step-{step}" if step else "#scores"


def svg_curve(curve: Curve, width: int = 880, height: int = 340, *, compact: bool = False) -> str:
    """Val per step with each step's decision marked; train and test as lighter lines.
    ``compact``: a phone's chart (the module's docstring), 360 units wide."""
    if compact:
        width, height = 360, 360
    # The legend sits right of the plot, or (compact) below it in two columns of 4 rows.
    left, right, top, bottom = (40, 12, 16, 124) if compact else (56, 170, 20, 44)
    plot_w, plot_h = width - left - right, height - top - bottom
    points = curve.points
    last = max(1, points[-1].step if points else 1)

    def x(step: float) -> float:
        return left + plot_w * step / last

    def y(value: float) -> float:
        return top + plot_h * (1 - min(1.0, max(0.0, value)))

    e = html.escape
    parts = [
        f'<svg class="curve" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{e(curve.metric)} score per step">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line x1="{left}" y1="{y(tick):.1f}" x2="{left + plot_w}" y2="{y(tick):.1f}" '
            'stroke="#d0d7de" stroke-width="1"/>'
            f'<text x="{left - 8}" y="{y(tick) + 4:.1f}" text-anchor="end" '
            f'font-size="12" fill="#57606a">{tick:.2f}</text>'
        )
    # Step labels at least 28 units apart (a compact chart has room for fewer).
    every = max(1, -(-len(points) // (plot_w // 28))) if compact else max(1, len(points) // 20)
    for p in points[::every]:
        parts.append(
            f'<text x="{x(p.step):.1f}" y="{top + plot_h + 18}" text-anchor="middle" '
            f'font-size="12" fill="#57606a">{p.step}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 38}" text-anchor="middle" '
        'font-size="12" fill="#57606a">step (0 = baseline)</text>'
    )

    def polyline(values: list[tuple[float, float]], colour: str, dash: str = "") -> str:
        coords = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in values)
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        return (
            f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"{dashed}/>'
        )

    legend: list[tuple[str, str, str]] = []
    for value, key, name in (
        (curve.test_start, "test_start", "test at start"),
        (curve.test_end, "test_end", "test at end"),
    ):
        if value is not None:
            parts.append(polyline([(0, value), (last, value)], _COLOURS[key], "2 4"))
            legend.append((_COLOURS[key], "2 4", f"{name} {value:.3f}"))
    train = [(p.step, p.train) for p in points if p.train is not None]
    if train:
        parts.append(polyline(train, _COLOURS["train"], "6 4"))  # type: ignore[arg-type]
        legend.append((_COLOURS["train"], "6 4", "train batch mean"))
    vals = [(p.step, p.val) for p in points if p.val is not None]
    parts.append(polyline(vals, _COLOURS["val"]))  # type: ignore[arg-type]
    legend.insert(0, (_COLOURS["val"], "", f"val ({curve.metric})"))
    for p in points:
        cx, cy = x(p.step), y(p.val if p.val is not None else 0.0)
        decision = p.decision or ("baseline" if p.step == 0 else "in progress")
        what = {
            "baseline": "baseline",
            "accepted": "accepted",
            "forced": "ungated",
            "rejected": "rejected",
            "no candidate": "no candidate",
        }.get(decision, decision)
        title = f"step {p.step}: {what}, val {'n/a' if p.val is None else f'{p.val:.3f}'}"
        if p.p_value is not None:
            title += f", p = {p.p_value:.3g}"
        if p.train is not None:
            title += f", train batch {p.train:.3f}"
        if p.slow_update:
            title += f"; then the epoch's slow update: {p.slow_update}"
        if decision == "rejected":
            c, r = _COLOURS["rejected"], 5
            shape = (
                f'<path d="M{cx - r:.1f},{cy - r:.1f} L{cx + r:.1f},{cy + r:.1f} '
                f'M{cx - r:.1f},{cy + r:.1f} L{cx + r:.1f},{cy - r:.1f}" stroke="{c}" '
                'stroke-width="3"/>'
            )
        elif decision in ("accepted", "forced"):
            shape = f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="{_COLOURS[decision]}"/>'
        else:
            shape = (
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="#ffffff" '
                f'stroke="{_COLOURS["none"]}" stroke-width="2"/>'
            )
        css = e(decision.replace(" ", "-"))
        parts.append(
            f'<a href="{point_href(p.step)}" aria-label="{e(title)}">'
            f'<g class="point {css}" data-step="{p.step}"><title>{e(title)}</title>{shape}</g></a>'
        )
        if p.slow_update:
            colour = _COLOURS.get(p.slow_update, _COLOURS["none"])
            d = 5
            parts.append(
                f'<g class="slow {e(p.slow_update)}"><title>slow update after step {p.step}: '
                f'{e(p.slow_update)}</title><path d="M{cx:.1f},{cy - 14 - d:.1f} '
                f"L{cx + d:.1f},{cy - 14:.1f} L{cx:.1f},{cy - 14 + d:.1f} "
                f'L{cx - d:.1f},{cy - 14:.1f} Z" fill="{colour}"/></g>'
            )
    legend += [
        (_COLOURS["accepted"], "dot", "accepted step"),
        (_COLOURS["rejected"], "cross", "rejected step"),
        (_COLOURS["none"], "ring", "no candidate"),
        (_COLOURS["none"], "diamond", "slow update"),
    ]
    for i, (colour, style, name) in enumerate(legend):
        if compact:  # below the plot: two columns, top to bottom
            lx, ly = 8 + (i // 4) * 176, top + plot_h + 58 + (i % 4) * 18
        else:
            lx, ly = left + plot_w + 16, top + 10 + i * 20
        if style in ("", "2 4", "6 4"):
            dash = f' stroke-dasharray="{style}"' if style else ""
            mark = (
                f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" stroke="{colour}" '
                f'stroke-width="2"{dash}/>'
            )
        elif style == "dot":
            mark = f'<circle cx="{lx + 9}" cy="{ly}" r="5" fill="{colour}"/>'
        elif style == "cross":
            mark = (
                f'<path d="M{lx + 5},{ly - 4} L{lx + 13},{ly + 4} M{lx + 5},{ly + 4} '
                f'L{lx + 13},{ly - 4}" stroke="{colour}" stroke-width="3"/>'
            )
        elif style == "ring":
            mark = (
                f'<circle cx="{lx + 9}" cy="{ly}" r="4" fill="#ffffff" stroke="{colour}" '
                'stroke-width="2"/>'
            )
        else:
            mark = (
                f'<path d="M{lx + 9},{ly - 5} L{lx + 14},{ly} L{lx + 9},{ly + 5} '
                f'L{lx + 4},{ly} Z" fill="{colour}"/>'
            )
        parts.append(
            f'{mark}<text x="{lx + 24}" y="{ly + 4}" font-size="12" fill="#24292f">{e(name)}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def svg_bars(
    labels: Sequence[str],
    values: Sequence[float],
    unit: str,
    width: int = 880,
    height: int = 180,
    *,
    compact: bool = False,
) -> str:
    """A plain bar chart (cost or tokens per phase); each bar's title gives the exact figure.
    ``compact``: a phone's (360 units wide; a label under every bar that has room for one)."""
    if compact:
        width = 360
    left, right, top, bottom = 16, 16, 22, 28
    plot_w, plot_h = width - left - right, height - top - bottom
    top_value = max(values, default=0.0) or 1.0
    slot = plot_w / max(1, len(values))
    e = html.escape
    parts = [
        f'<svg class="bars" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{e(unit)}">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#8c959f"/>',
        f'<text x="{left}" y="{top - 8}" font-size="11" fill="#57606a">'
        f"{e(unit)} (highest bar {e(_fmt_value(top_value, unit))})</text>",
    ]
    # Labels at least as far apart as the longest one (but the first) is wide, about 7 units a
    # character at 11; a compact chart's first label, "baseline", starts at its bar instead.
    longest = max((len(label) for label in labels[1:]), default=1)
    every = max(1, -(-(7 * longest + 6) // max(1, int(slot)))) if compact else 1
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        h = plot_h * value / top_value
        bx = left + i * slot + slot * 0.15
        parts.append(
            f'<rect x="{bx:.1f}" y="{top + plot_h - h:.1f}" width="{slot * 0.7:.1f}" '
            f'height="{h:.1f}" fill="#54aeff"><title>{e(label)}: '
            f"{e(_fmt_value(value, unit))}</title></rect>"
        )
        if i % every == 0:
            first = compact and i == 0 and label == "baseline"
            anchor, lx = ("start", bx) if first else ("middle", bx + slot * 0.35)
            parts.append(
                f'<text x="{lx:.1f}" y="{top + plot_h + 16}" text-anchor="{anchor}" '
                f'font-size="11" fill="#57606a">{e("base" if first else label)}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


def _fmt_value(value: float, unit: str) -> str:
    return f"${value:.4f}" if unit == "cost" else f"{value:,.0f} {unit}"
