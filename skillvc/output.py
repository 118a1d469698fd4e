"""Rendering helpers shared by the CLI commands: JSON, tables and log entries."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def json_option(fn: F) -> F:
    """The ``--json`` flag every read command takes (stable keys, documented in the README)."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(fn)


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def fmt_score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain left-aligned text table (numbers right-aligned)."""
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [
        all(_is_number(r[i]) for r in rows if r[i] is not None) and bool(rows)
        for i in range(len(headers))
    ]

    def line(row: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(row, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join(
        [line(cells[0]), line(["-" * w for w in widths])] + [line(r) for r in cells[1:]]
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(text: str | None, width: int = 70) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _q(text: str | None, width: int) -> str:
    return f'"{_short(text, width)}"'


def format_edit(edit: dict[str, Any]) -> list[str]:
    op = edit.get("op", "?")
    if op == "add":
        where = f" after {_q(edit.get('anchor'), 30)}" if edit.get("anchor") else ""
        head = f"add{where}: {_q(edit.get('content'), 70)}"
    elif op == "replace":
        head = f"replace {_q(edit.get('target'), 30)} -> {_q(edit.get('content'), 40)}"
    else:
        head = f"delete {_q(edit.get('target'), 70)}"
    lines = [f"    {head}  [{str(edit.get('id', ''))[:8]}]"]
    if edit.get("rationale"):
        lines.append(f"      why: {_short(edit['rationale'], 90)}")
    return lines


def format_log_entry(entry: dict[str, Any]) -> str:
    decision = entry["decision"] or "?"
    colour = {"accepted": "green", "forced": "yellow", "rejected": "red"}.get(decision, "white")
    where = entry["commit"][:10] if entry["commit"] else "(no commit yet)"
    if entry["ref"] and entry["ref"].startswith("refs/skillvc/"):
        where = f"{where} {entry['ref']}"
    title = "slow update" if entry["kind"] == "slow_update" else f"step {entry['step']}"
    head = click.style(f"{decision:<9}", fg=colour, bold=True)
    lines = [
        f"{head}{title} (epoch {entry['epoch']})  run {entry['run']}  event {entry['id']}  {where}"
    ]
    n = entry["n"]
    evaluated = entry["n_evaluated"]
    early = f", stopped early after {evaluated} of {n}" if entry["early_stopped"] else ""
    lr = f"  lr {entry['lr']}" if entry["lr"] is not None else ""
    if entry.get("p_value") is not None:
        lr += f"  p={entry['p_value']:.3g} ({entry['test']} test)"
    after = fmt_score(entry["val_after"])
    if entry["early_stopped"] and entry.get("val_after_bound") is not None:
        after = f"<={fmt_score(entry['val_after_bound'])}"
    lines.append(
        f"    val {fmt_score(entry['val_before'])} -> {after} ({entry['metric']}, n={n}{early}){lr}"
    )
    flipped = entry.get("flipped") or {}
    if flipped.get("gained") or flipped.get("lost"):
        lines.append(
            f"    flipped: +{len(flipped.get('gained', []))} -{len(flipped.get('lost', []))}"
        )
    for edit in entry["edits"]:
        lines.extend(format_edit(edit))
    for miss in entry.get("unmatched", []):
        what = f"{miss['op']} {_q(miss.get('text'), 40)} " if "op" in miss else ""
        lines.append(
            f"    unmatched {what}[{str(miss.get('id', ''))[:8]}] ({miss.get('reason')}): "
            f"{_short(miss.get('detail'), 80)}"
        )
    if entry.get("patch"):
        lines.append("")
        lines.extend("    " + line for line in entry["patch"].rstrip("\n").splitlines())
    return "\n".join(lines)


def format_runs(rows: Sequence[dict[str, Any]]) -> str:
    """The ``skillvc runs`` table: accepted and rejected count steps, slow updates apart."""
    from skillvc.charts import sparkline

    return table(
        [
            [
                r["run"],
                r["status"],
                r["steps"],
                r["accepted"],
                r["rejected"],
                f"{r.get('slow_updates_accepted', 0)}/{r.get('slow_updates_rejected', 0)}",
                fmt_score(r["baseline_val"]),
                fmt_score(r["best_val"]),
                fmt_score(r["baseline_test"]),
                fmt_score(r["test"]),
                r["calls"],
                r["tokens"],
                "unknown" if r["cost_usd"] is None else f"${r['cost_usd']:.4f}",
                sparkline(r.get("val_curve") or []) or "-",
            ]
            for r in rows
        ],
        [
            "run",
            "status",
            "steps",
            "accepted",
            "rejected",
            "slow upd a/r",
            "val base",
            "val best",
            "test base",
            "test best",
            "calls",
            "tokens",
            "cost",
            "val per step",
        ],
    )
