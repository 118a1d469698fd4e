"""Rendering helpers shared by the CLI commands: JSON, tables and log entries."""

from __future__ import annotations

import csv
import functools
import io
import json
import textwrap
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def json_option(fn: F) -> F:
    """The ``--json`` flag every read command takes (stable keys, documented in the README)."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(fn)


def split_option(what: str) -> Callable[[F], F]:
    """``--split`` (val by default), the split a command uses ``what`` says how."""
    return click.option(
        "--split",
        type=click.Choice(["val", "test", "train"]),
        default="val",
        show_default=True,
        help=f"The split to {what}.",
    )


def source_option(fn: F) -> F:
    """``--from``: the agent whose transcripts ``harvest`` and ``sleep`` read."""
    return click.option(
        "--from",
        "source",
        type=click.Choice(["claude-code", "codex"]),
        help="Transcript format [[harvest] source].",
    )(fn)


def echo_json(value: Any) -> None:
    """``value`` as JSON on stdout, every string through the redaction pipeline first."""
    from skillvc.secrets import redact_json_counted

    click.echo(json.dumps(redact_json_counted(value)[0], indent=2, ensure_ascii=False, default=str))


def table_options(fn: F) -> F:
    """``--nl`` (newline-delimited JSON, one object a line) and ``--csv`` for every command whose
    output is a table; each row holds the keys of its ``--json`` object. Exclusive with
    ``--json`` and with each other (a usage error, exit 2)."""

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("as_json") and kwargs.get("table_format"):
            raise click.UsageError("Give one of --json, --nl and --csv.")
        return fn(*args, **kwargs)

    options = [
        click.option(
            "--nl", "table_format", flag_value="nl", help="Print one JSON object per line."
        ),
        click.option("--csv", "table_format", flag_value="csv", help="Print CSV."),
    ]
    for option in reversed(options):
        checked = option(checked)
    return checked  # type: ignore[return-value]


def echo_listing(
    rows: Sequence[dict[str, Any]],
    as_json: bool,
    table_format: str | None,
    columns: Sequence[str],
    none: str,
) -> bool:
    """Print ``rows`` as JSON or a table (``--json``, ``--nl``/``--csv``), or say ``none`` on
    stderr when there are no rows; False when the caller is to print its text form."""
    if as_json:
        echo_json(rows)
    elif table_format:
        echo_rows(rows, table_format, columns)
    elif not rows:
        click.echo(none, err=True)  # not an empty line on stdout as well
    else:
        return False
    return True


def echo_rows(
    rows: Sequence[dict[str, Any]], table_format: str, columns: Sequence[str] = ()
) -> None:
    """Rows as ``nl`` (one JSON object a line) or ``csv`` (a header of every key, nested values
    as compact JSON, None as an empty cell). ``columns`` start the header, so a CSV of no rows
    still names its columns. Every string passes the redaction pipeline first."""
    from skillvc.secrets import redact_json_counted

    rows = redact_json_counted(list(rows))[0]
    if table_format == "nl":
        for row in rows:
            click.echo(json.dumps(row, ensure_ascii=False, default=str))
        return
    header: dict[str, None] = dict.fromkeys(columns)
    for row in rows:
        header.update(dict.fromkeys(row))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in header])
    click.echo(out.getvalue(), nl=False)


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return value


def fmt_score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(
    rows: Sequence[Sequence[Any]],
    headers: Sequence[str],
    *,
    width: int | None = None,
    drop: Sequence[str] = (),
) -> str:
    """A plain left-aligned text table (numbers right-aligned).

    With ``width`` (a terminal's), the columns named in ``drop`` are left out in that order
    until the table fits, and a line under the table names them (a reader must know that a
    best score has a baseline beside it on a wider screen); a table that still does not fit
    is left to wrap."""
    hidden: list[str] = []
    if width is not None:
        keep = list(range(len(headers)))
        for name in drop:
            if _table_width(rows, headers, keep) <= width:
                break
            keep = [i for i in keep if headers[i] != name]
        hidden = [h for i, h in enumerate(headers) if i not in keep]
        headers = [headers[i] for i in keep]
        rows = [[r[i] for i in keep] for r in rows]
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

    note = (
        textwrap.wrap(
            f"Hidden to fit {width} columns: {', '.join(hidden)} (a wider terminal shows "
            "them; --json and --csv have every column).",
            width or 80,
        )
        if hidden
        else []
    )
    return "\n".join(
        [line(cells[0]), line(["-" * w for w in widths])] + [line(r) for r in cells[1:]] + note
    )


def _table_width(rows: Sequence[Sequence[Any]], headers: Sequence[str], keep: list[int]) -> int:
    def cell(c: Any) -> int:
        return len("-" if c is None else str(c))

    widths = [max([len(headers[i])] + [cell(r[i]) for r in rows]) for i in keep]
    return sum(widths) + 2 * (len(widths) - 1)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(text: str | None, width: int = 70) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _q(text: str | None, width: int) -> str:
    return f'"{_short(text, width)}"'


def format_edit(edit: dict[str, Any]) -> list[str]:
    op = edit.get("op", "?")
    # A skill package's edit to a file other than SKILL.md names it ("file" is absent else).
    into = f" in {_short(edit['file'], 60)}" if edit.get("file") else ""
    if op == "add":
        where = f" after {_q(edit.get('anchor'), 30)}" if edit.get("anchor") else ""
        head = f"add{into}{where}: {_q(edit.get('content'), 70)}"
    elif op == "replace":
        head = f"replace{into} {_q(edit.get('target'), 30)} -> {_q(edit.get('content'), 40)}"
    else:
        head = f"delete{into} {_q(edit.get('target'), 70)}"
    lines = [f"    {head}  [{str(edit.get('id', ''))[:8]}]"]
    if edit.get("rationale"):
        lines.append(f"      why: {_short(edit['rationale'], 90)}")
    return lines


def color_diff(patch: str) -> str:
    """A unified diff with git's colours (file headers bold, hunks cyan, - red, + green);
    ``click.echo`` drops them where colour is off."""
    lines = []
    for line in patch.split("\n"):
        if line.startswith(("+++ ", "--- ", "diff ")):
            line = click.style(line, bold=True)
        elif line.startswith("@@"):
            line = click.style(line, fg="cyan")
        elif line.startswith("+"):
            line = click.style(line, fg="green")
        elif line.startswith("-"):
            line = click.style(line, fg="red")
        lines.append(line)
    return "\n".join(lines)


def format_log_entry(entry: dict[str, Any]) -> str:
    from skillvc.review.history import gate_alpha
    from skillvc.training.significance import describe, stated

    decision = entry["decision"] or "?"
    colour = {"accepted": "green", "forced": "yellow", "rejected": "red"}.get(decision, "white")
    where = entry["commit"][:10] if entry["commit"] else "(no commit yet)"
    if entry["ref"] and entry["ref"].startswith("refs/skillvc/"):
        where = f"{where} {entry['ref']}"
    title = "slow update" if entry["kind"] == "slow_update" else f"step {entry['step']}"
    head = click.style(f"{decision:<9}", fg=colour, bold=True)
    lines = [
        f"{head}{title} (epoch {entry['epoch']})  run {entry['run']}  event {entry['id']}  {where}"
        if entry["kind"] != "apply"  # skillvc apply's gate: a hand patch, in no run
        else f"{head}patch applied by hand  event {entry['id']}  {where}"
    ]
    n = entry["n"]
    evaluated = entry["n_evaluated"]
    early = f", stopped early after {evaluated} of {n}" if entry["early_stopped"] else ""
    lr = f"  lr {entry['lr']}" if entry["lr"] is not None else ""
    if entry.get("p_value") is not None and entry["decision"] != "forced":
        # The words and alpha every view gives a gain (``significance.stated``).
        lr += f"  {entry['test']} test: {stated(entry['p_value'], gate_alpha(entry))}"
    elif entry.get("verdict") and entry["decision"] != "forced":
        lr += f"  {entry['verdict']}"
    after = fmt_score(entry["val_after"])
    if entry["early_stopped"] and entry.get("val_after_bound") is not None:
        # The best the candidate could still have reached when the gate stopped early.
        after = f"at most {fmt_score(entry['val_after_bound'])}"
    lines.append(
        f"    val {fmt_score(entry['val_before'])} -> {after} ({entry['metric']}, n={n}{early}){lr}"
    )
    flipped = entry.get("flipped") or {}
    if flipped.get("gained") or flipped.get("lost"):
        lines.append(
            f"    flipped on val: {len(flipped.get('gained', []))} fixed, "
            f"{len(flipped.get('lost', []))} broken"
        )
    routing = entry.get("routing")
    if routing:  # a description's gate: its reason and each skill's own val prompts lost
        lines.append(f"    routing: {routing.get('reason')}")
        lost = [
            f"{name} lost {len(s.get('lost', []))}, gained {len(s.get('gained', []))} "
            f"({describe(s.get('p_value'), gate_alpha(entry))})"
            for name, s in (routing.get("skills") or {}).items()
            if s.get("lost")
        ]
        if lost:
            lines.append("    own val prompts lost (exact sign test of a loss): " + "; ".join(lost))
    for edit in entry["edits"]:
        lines.extend(format_edit(edit))
    for edit in entry.get("dropped") or []:  # attribution took these out of the candidate
        how = "harmful" if edit.get("outcome") == "harmful" else "a neutral passenger"
        lines.append(
            f"    dropped as {how} ({edit.get('up')} items better with it, {edit.get('down')} "
            f"worse, p={edit.get('p_value', 1):.3g}):"
        )
        lines.extend("  " + line for line in format_edit(edit)[:1])
    for miss in entry.get("unmatched", []):
        into = f"in {_short(miss['file'], 60)} " if miss.get("file") else ""
        what = f"{miss['op']} {into}{_q(miss.get('text'), 40)} " if "op" in miss else ""
        lines.append(
            f"    not applied ({miss.get('reason')}): {what}[{str(miss.get('id', ''))[:8]}]: "
            f"{_short(miss.get('detail'), 80)}"
        )
    if entry.get("files"):  # a skill package's candidate: the files it changes
        lines.append(f"    files: {', '.join(entry['files'])}")
    if entry.get("patch"):
        lines.append("")
        lines.extend("    " + line for line in color_diff(entry["patch"].rstrip("\n")).splitlines())
    return "\n".join(lines)


# The runs table's columns a narrow terminal loses first (``--json`` always has them all).
# A best score keeps its baseline beside it longest: "test base" and "test best" go together,
# then the sparkline, and "val base" only after "status".
RUNS_DROP = (
    "tokens",
    "calls",
    "slow upd a/r",
    "steps",
    "test base",
    "test best",
    "val per step",
    "status",
    "val base",
)


def format_runs(rows: Sequence[dict[str, Any]], width: int | None = None) -> str:
    """The ``skillvc runs`` table: accepted and rejected count steps, slow updates apart.
    ``width``: a terminal's, the columns of ``RUNS_DROP`` give way in order until it fits."""
    from skillvc.review.charts import sparkline

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
        width=width,
        drop=RUNS_DROP,
    )


# -- skillvc show: the log as text ------------------------------------------------------------


def _section(title: str, text: str | None) -> list[str]:
    """A Markdown-style section, the way ``llm logs`` prints prompts and responses; on a
    terminal its text is wrapped by ``verbatim``."""
    from skillvc.terminal.fit import terminal_width

    body = (text if text is not None else "(not in the log)").rstrip("\n")
    return ["", f"## {title}", "", verbatim(body, terminal_width())]


WRAPPED = "↪ "  # starts each row a line of a prompt or an answer wraps onto


def verbatim(text: str, width: int | None) -> str:
    """A text shown as it is (a prompt, an answer), each line wider than ``width`` wrapped at
    word boundaries onto rows that start with ``WRAPPED``. The terminal's usual fitting
    indents a wrapped row instead, which in a prompt reads as indentation the prompt has.
    None: not a terminal, the text as it is."""
    if width is None:
        return text
    from skillvc.secrets import scrub_values

    # Scrubbed before the wrap, as the terminal's fitting does: a row must not split a secret.
    rows: list[str] = []
    for line in scrub_values(text).split("\n"):
        if len(line) <= width:
            rows.append(line)
            continue
        rows += textwrap.wrap(
            line,
            width,
            subsequent_indent=WRAPPED,
            expand_tabs=False,
            replace_whitespace=False,
            break_on_hyphens=False,
        )
    return "\n".join(rows)


def format_messages(messages: Sequence[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):  # text and image parts
            content = "\n".join(
                p.get("text", "") if p.get("type") == "text" else f"[{p.get('media_type')} image]"
                for p in content
            )
        calls = "\n".join(
            f"-> {c.get('name')}: {c.get('arguments')}" for c in m.get("tool_calls", [])
        )
        text = "\n".join(t for t in (content, calls) if t)
        lines.extend(_section(m["role"].capitalize(), text))
    return lines


def _cost(cost: Any) -> str:
    return "price unknown" if cost is None else f"${cost:.6f}"


def _param(name: str, value: Any) -> str:
    """One parameter of a call's header; a tool loop's identity (tools, sources, hashes) as
    the names of its tools and its turn limit, not the whole dict (``--json`` has it)."""
    if name == "agent" and isinstance(value, dict) and "max_turns" in value:
        tools = [t.get("name") for t in (value.get("tools") or {}).get("tools", [])]
        shown = f"tools {', '.join(map(str, tools))}  " if tools else ""
        env = value.get("environment")
        shown += f"environment {env.get('environment')}  " if isinstance(env, dict) else ""
        return f"{shown}max_turns {value['max_turns']}"
    if name == "item" and isinstance(value, dict):
        return f"item {value.get('id')}"
    return f"{name} {value}"


def format_call(event: dict[str, Any], call: dict[str, Any]) -> str:
    """A model call as text: a header, every message, the response, tokens and cost."""
    params = "  ".join(_param(k, v) for k, v in sorted(call["params"].items()))
    prompt, completion = call["prompt_tokens"] or 0, call["completion_tokens"] or 0
    lines = [
        f"# model call {event['id']}  {call['role']}  {call['model']}  {event['created_at']}",
        f"run {event['run_id'] or '-'}  step {event['step'] if event['step'] is not None else '-'}"
        f"  sample {call['sample']}  {params}".rstrip(),
        f"tokens {prompt + completion:,} ({prompt:,} prompt + {completion:,} completion)  "
        f"cost {_cost(call['cost_usd'])}  latency {call['latency_ms']} ms  key {call['key']}",
    ]
    if call["messages"] is None:
        lines.extend(_section("Prompt", None))
    else:
        lines.extend(format_messages(call["messages"]))
    lines.extend(_section("Response", call["response"]))
    lines.extend(_trajectory_section(call.get("trajectory")))
    return "\n".join(lines)


def _trajectory_section(trajectory: dict[str, Any] | None) -> list[str]:
    """What an acting rollout did, a line per turn, call, result and observation."""
    if not trajectory:
        return []
    from skillvc.models.agents.trajectory import Trajectory, render

    info = trajectory.get("info") or {}
    head = f"{info.get('turns', '?')} turns, {info.get('tool_calls', 0)} tool calls"
    if "reward" in info:
        head += f", reward {info['reward']}"
    body = render(Trajectory.from_json(json.dumps(trajectory)), budget=20_000)
    return _section(f"Trajectory ({head})", body)


def format_rollout(event: dict[str, Any], rollout: dict[str, Any]) -> str:
    """A rollout as text: the task input, the answer, its score and why."""
    if rollout["error"]:
        verdict = f"error (not scored): {rollout['error']}"
    else:
        verdict = f"hard {fmt_score(rollout['hard'])}  soft {fmt_score(rollout['soft'])}"
        if rollout["reason"]:
            verdict += f"  ({rollout['reason']})"
    call = (
        f"model call {rollout['call']} ({rollout['model']})" if rollout["call"] else "no model call"
    )
    lines = [
        f"# rollout {event['id']}  {rollout['split']} item {rollout['item']}  "
        f"{event['created_at']}",
        f"run {event['run_id'] or '-'}  step {event['step'] if event['step'] is not None else '-'}"
        f"  skill {str(rollout['skill'])[:12]}  {call}",
        f"score {verdict}",
    ]
    lines.extend(_section("Task", rollout["input"]))
    lines.extend(_section("Answer", rollout["answer"]))
    lines.extend(_trajectory_section(rollout.get("trajectory")))
    return "\n".join(lines)


def format_blob(blob: dict[str, Any], messages: Sequence[dict[str, str]] | None) -> str:
    """A blob as text; a model call's prompt as its messages."""
    lines = [f"# blob {blob['hash']}  {blob['size']:,} characters"]
    if messages is not None:
        lines.extend(format_messages(messages))
    else:
        lines.extend(["", blob["content"].rstrip("\n")])
    return "\n".join(lines)


def skill_option(fn: F) -> F:
    """``--skill NAME``: the skill a command acts on in a repository with many (skills.py)."""
    return click.option(
        "--skill",
        "skill",
        metavar="NAME",
        help="The skill (its [skills.<name>] table, frontmatter name or path) when "
        "skillvc.toml lists several.",
    )(fn)


def shown(text: str) -> str:
    """``text`` with control and format characters escaped (``\\n``, ``\\x1b``, ``\\u202e``).

    For text a pull request controls (item ids, keys, paths): a line break in it would let it
    print lines of its own, such as a CI workflow command (``::error::...``) or a fake verdict.
    """
    return "".join(
        ch.encode("unicode_escape").decode("ascii")
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")
        else ch
        for ch in text
    )
