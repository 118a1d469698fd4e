"""``skillvc report --html FILE``: a run as one self-contained HTML page.

Invariants:
- The page loads nothing: no script, stylesheet, font or image from anywhere; the charts are
  inline SVG drawn by ``skillvc.review.charts``. It can be mailed, archived or opened offline.
- Every value from the log (edit texts, diffs, model names, rationales) goes through
  ``html.escape``: a skill or a rationale holding ``<script>`` is shown, never run.
- It renders the same data as ``skillvc report --json`` (``report.run_report``), nothing more.
- It fits any screen: charts scale to the page's width (their viewBox keeps the proportions),
  tables and diffs scroll inside their own box, so a phone shows no sideways scrolling of the
  page itself (tests/test_curves.py measures it in headless Chromium at 390 and 1280 px).
- A phone gets charts drawn for its width (``compact``; CSS shows one pair or the other), so
  their text stays readable, and table cells that do not wrap (a p-value or a val arrow on one
  line; the table scrolls instead). A phone has no hover: each point of the curve links to its
  row of the steps table, which the link highlights (tests/test_small_screens.py).
- A step's p-value is shown as every surface shows it, with its verdict at the step's own
  alpha (``report.p_text``, ``significance.stated``).
"""

from __future__ import annotations

import html
from string import Template
from typing import Any

from skillvc.review.charts import svg_bars, svg_curve
from skillvc.review.curves import Curve
from skillvc.review.report import edit_sentence, p_text, val_arrow

PAGE = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>skillvc run $run</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #24292f;
       margin: 24px auto; max-width: 1100px; padding: 0 16px; background: #ffffff;
       overflow-wrap: anywhere; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; } h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.accepted { color: #1a7f37; } .rejected { color: #cf222e; } .forced { color: #9a6700; }
.warn { color: #9a6700; font-weight: 600; }
pre.diff { background: #f6f8fa; border: 1px solid #d0d7de; padding: 8px; overflow-x: auto;
           font-size: 12px; line-height: 1.4; }
pre.diff span { display: inline-block; min-width: 100%; }
pre.diff .add { color: #116329; background: #dafbe1; }
pre.diff .del { color: #82071e; background: #ffebe9; }
pre.diff .hunk { color: #0550ae; }
pre.diff .file { font-weight: 600; }
.muted { color: #57606a; font-size: 13px; }
svg { display: block; margin: 8px 0; max-width: 100%; height: auto; }
svg a:focus { outline: 2px solid #0969da; }
.scroll { overflow-x: auto; max-width: 100%; }
.scroll table { overflow-wrap: normal; }
table.steps td { white-space: nowrap; }
tr:target td { background: #fff8c5; }
.narrow { display: none; }
@media (max-width: 600px) { body { margin: 12px auto; padding: 0 8px; }
                            th, td { padding: 3px 5px; }
                            .wide { display: none; } .narrow { display: block; } }
</style>
</head>
<body>
<h1>skillvc training run <code>$run</code> ($status)</h1>
<p class="muted">target <code>$target</code> · optimizer <code>$optimizer</code> ·
base commit <code>$base</code> · best commit <code>$best</code></p>
$stopped
<div class="scroll"><table id="scores">
<tr><th>$metric</th><th>baseline</th><th>best</th></tr>
<tr><td>val (n=$n_val)</td><td class="num">$baseline_val</td><td class="num">$best_val</td></tr>
<tr><td>test (n=$n_test)</td><td class="num">$baseline_test</td><td class="num">$test</td></tr>
</table></div>
$worth
<p>$counts</p>
<p>$usage</p>
<h2>Score per step</h2>
$curve
<p class="muted">Step 0 is the baseline. Each point is the val score of the skill in effect after
that step (and after the epoch's slow update, marked above the point); hover a point for its
decision and p-value, or tap it (or Tab to it) to go to its row of the steps table. The train
line is the mean score of each step's own batch.</p>
<h2>Steps</h2>
<div class="scroll"><table class="steps">
<tr><th>step</th><th>epoch</th><th>lr</th><th>decision</th><th>val</th><th>p-value</th>
<th>edits</th><th>commit</th></tr>
$steps
</table></div>
<h2>Cost and tokens per step</h2>
$cost_chart
$token_chart
<div class="scroll"><table>
<tr><th>phase</th><th>calls</th><th>tokens</th><th>cost</th></tr>
$phases
</table></div>
<h2>Accepted edits</h2>
$accepted
<h2>Rejected candidates</h2>
$rejected
$routing
</body>
</html>
""")

e = html.escape


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _cost(value: float | None) -> str:
    return "price unknown" if value is None else f"${value:.4f}"


def _val(step: dict[str, Any]) -> str:
    if step["decision"] == "no candidate":
        return "–"
    return val_arrow(step.get("val_before"), step.get("val_after"), step)


def _title(step: dict[str, Any]) -> str:
    return "slow update" if step["kind"] == "slow_update" else f"step {step['step']}"


def _row_id(step: dict[str, Any]) -> str:
    """A steps-table row's id, where the curve's point for it links (``charts.point_href``)."""
    if step["kind"] == "slow_update":
        return f"slow-{step.get('epoch')}"
    return f"step-{step['step']}"


def _both(wide: str, narrow: str) -> str:
    """A chart drawn for a wide screen and for a phone; the page's CSS shows one of them."""
    return f'<div class="wide">{wide}</div><div class="narrow">{narrow}</div>'


def _p(step: dict[str, Any]) -> str:
    text = p_text(step)
    if "⚠" in text:
        return f'<span class="warn">{e(text)}</span>'
    return e(text) or "–"


def _edit(edit: dict[str, Any]) -> str:
    return f"<li>{edit_sentence(edit, _code, _text, '<b>{}</b>', '<i>{}</i>')}</li>"


def _code(value: str | None, _width: int) -> str:
    return f"<code>{e(str(value))}</code>"


def _text(value: str | None, _width: int) -> str:
    # The page shows edits whole (the Markdown report cuts them to fit a PR comment).
    return e(str(value or ""))


def _diff(patch: str) -> str:
    lines = []
    for line in patch.rstrip("\n").splitlines():
        css = ""
        if line.startswith("+") and not line.startswith("+++"):
            css = "add"
        elif line.startswith("-") and not line.startswith("---"):
            css = "del"
        elif line.startswith("@@"):
            css = "hunk"
        elif line.startswith(("--- ", "+++ ")):
            css = "file"  # a package's diff has a header pair per file
        lines.append(f'<span class="{css}">{e(line)}</span>' if css else e(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"


def _files(step: dict[str, Any]) -> str:
    """The files a package's candidate changed (single-file skills' steps have none)."""
    files = step.get("files") or []
    if not files:
        return ""
    return '<p class="muted">Files: ' + ", ".join(f"<code>{e(f)}</code>" for f in files) + "</p>"


def _phase_label(u: dict[str, Any]) -> str:
    if u["phase"] == "step":
        return str(u["step"])
    if u["phase"] == "epoch end":
        return f"e{u['epoch']}"
    return str(u["phase"])


def render_html(report: dict[str, Any]) -> str:
    """The page for a ``run_report`` (see the module docstring)."""
    sc, usage, n = report["scores"], report["usage"], report["counts"]
    counts = report["dataset"].get("counts", {})
    empty = n["steps"] - n["accepted"] - n["rejected"]
    count_line = (
        f"{n['steps']} steps: {n['accepted']} accepted, {n['rejected']} rejected, {empty} "
        f"with nothing to try; {n['slow_updates']} slow updates "
        f"({n['slow_updates_accepted']} accepted, {n['slow_updates_rejected']} rejected)"
    )
    if report.get("withheld"):
        count_line += f"; {report['withheld']} value(s) that looked like credentials withheld"
    unpriced = (
        f" + {usage['unpriced_calls']} calls of unknown price" if usage["unpriced_calls"] else ""
    )
    usage_line = (
        f"model calls {usage['calls']:,} · tokens {usage['tokens']:,} · cost "
        f"{_cost(usage['cost_usd'])}{unpriced} (calls this run made; answers reused from the "
        "log cost nothing)"
    )
    steps = []
    for s in report["steps"]:
        commit = f"<code>{e(s['commit'][:10])}</code>" if s.get("commit") else "–"
        decision = s["decision"] or "?"
        label = {"forced": "ungated"}.get(decision, decision)
        lr = "–" if s.get("lr") is None else e(str(s["lr"]))
        steps.append(
            f'<tr id="{_row_id(s)}"><td>{e(_title(s))}</td>'
            f"<td>{e(str(s.get('epoch')))}</td><td>{lr}</td>"
            f'<td class="{e(decision.replace(" ", "-"))}">{e(label)}</td><td>{e(_val(s))}</td>'
            f'<td>{_p(s)}</td><td class="num">{len(s["edits"])}</td><td>{commit}</td></tr>'
        )
    phases = report["usage_by_phase"]
    labels = [_phase_label(u) for u in phases]
    phase_rows = [
        f"<tr><td>{e(u['phase'] + ('' if u['phase'] in ('baseline', 'test') else ' ' + lab))}"
        f'</td><td class="num">{u["calls"]:,}</td><td class="num">{u["tokens"]:,}</td>'
        f'<td class="num">{e(_cost(u["cost_usd"]))}</td></tr>'
        for u, lab in zip(phases, labels, strict=True)
    ]
    accepted, rejected = [], []
    for s in report["steps"]:
        if s["decision"] in ("accepted", "forced"):
            p = _p(s)
            edits = "".join(_edit(x) for x in s["edits"]) or (
                "<li>guidance in the protected slow-update region</li>"
            )
            accepted.append(
                f"<h3>{e(_title(s).capitalize())} — <code>{e((s.get('commit') or '')[:10])}"
                f"</code> (val {e(_val(s))}{', ' + p if p != '–' else ''})</h3>"
                f"<ul>{edits}</ul>{_files(s)}{_diff(s['patch']) if s.get('patch') else ''}"
            )
        elif s["decision"] == "rejected":
            edits = "".join(_edit(x) for x in s["edits"]) or "<li>slow-update guidance</li>"
            rejected.append(
                f"<details><summary>{e(_title(s).capitalize())}: val {e(_val(s))}</summary>"
                f"<ul>{edits}</ul>{_files(s)}{_diff(s['patch']) if s.get('patch') else ''}"
                "</details>"
            )
    stopped = (
        f'<p class="warn">Stopped: {e(report["stopped"])}</p>' if report.get("stopped") else ""
    )
    return PAGE.substitute(
        routing=_routing(report.get("routing")),
        run=e(report["run"]),
        status=e(report["status"]),
        target=e(str(report["models"].get("target"))),
        optimizer=e(str(report["models"].get("optimizer"))),
        base=e(str(report.get("base_commit") or "–")[:10]),
        best=e(str(report.get("best_commit") or "–")[:10]),
        stopped=stopped,
        metric=e(str(sc["metric"] or "score")),
        n_val=e(str(counts.get("val", "?"))),
        n_test=e(str(counts.get("test", "?"))),
        baseline_val=_score(sc["baseline_val"]),
        best_val=_score(sc["best_val"]),
        baseline_test=_score(sc["baseline_test"]),
        test=_score(sc["test"]),
        worth=_worth(report.get("worth")),
        counts=e(count_line),
        usage=e(usage_line),
        curve=_both(
            svg_curve(Curve.from_dict(report["curve"])),
            svg_curve(Curve.from_dict(report["curve"]), compact=True),
        ),
        steps="\n".join(steps)
        or '<tr><td colspan="8" class="muted">No step has run yet.</td></tr>',
        cost_chart=(
            _both(
                svg_bars(labels, [u["cost_usd"] or 0.0 for u in phases], "cost"),
                svg_bars(labels, [u["cost_usd"] or 0.0 for u in phases], "cost", compact=True),
            )
            if any(u["cost_usd"] for u in phases)
            else '<p class="muted">No call of this run has a price above $0: no cost chart.</p>'
        ),
        token_chart=_both(
            svg_bars(labels, [float(u["tokens"]) for u in phases], "tokens"),
            svg_bars(labels, [float(u["tokens"]) for u in phases], "tokens", compact=True),
        ),
        phases="\n".join(phase_rows),
        accepted="\n".join(accepted) or "<p>None.</p>",
        rejected="\n".join(rejected) or "<p>None.</p>",
    )


def _worth(worth: dict[str, Any] | None) -> str:
    """The skill against no skill (``eval --baseline``, skillvc.review.worth), in the words
    every surface uses; nothing when it was never measured."""
    if not worth:
        return ""
    diff = worth.get("diff")
    shown = "–" if diff is None else f"{diff:+.3f}"
    return (
        f'<p id="worth"><strong>Worth:</strong> {e(str(worth.get("sentence", "")))} '
        f"({_score(worth.get('baseline_mean'))} &rarr; {_score(worth.get('skill_mean'))}, "
        f"{e(shown)} over {e(str(worth.get('n')))} items)</p>"
    )


def _routing(routing: dict[str, Any] | None) -> str:
    """The library's routing (skillvc.routing): scores before and after and the trained
    library's confusion matrix on val."""
    if not routing:
        return ""
    from skillvc.routing.render import matrix_html

    before, after = routing.get("before") or {}, routing.get("after") or {}
    was = before.get("skills") or {}
    rows = "".join(
        f'<tr><td>{e(name)}</td><td class="num">{_score(was.get(name, {}).get("f1"))}</td>'
        f'<td class="num">{_score(s.get("f1"))}</td></tr>'
        for name, s in (after.get("skills") or {}).items()
    )
    return (
        f"<h2>Routing (run <code>{e(str(routing.get('run')))}</code>)</h2>"
        f"<p>library score on val {_score(before.get('library'))} &rarr; "
        f"{_score(after.get('library'))}; {routing.get('accepted', 0)} description edits "
        f"accepted, {routing.get('rejected', 0)} rejected</p>"
        f'<div class="scroll"><table><tr><th>skill</th><th>F1 before</th><th>F1 after</th></tr>'
        f"{rows}</table></div>"
        f'<div class="scroll">{matrix_html(after.get("confusion") or {})}</div>'
    )
