"""The ``skillvc`` command line: thin click commands over the library.

Each command parses options, makes one library call and renders the result. Errors from the
``SkillvcError`` family become one sentence plus a hint and a stable exit code; anything else
is a crash (exit 70) whose traceback ``SKILLVC_RAISE_ERRORS=1`` shows.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click

from skillvc import __version__
from skillvc.core.errors import (
    INTERNAL_ERROR_EXIT_CODE,
    SkillvcError,
    error_lines,
    one_line,
    redact,
    should_reraise,
    storage_error,
)
from skillvc.models.backends import children
from skillvc.review.output import (
    echo_json,
    echo_rows,
    format_log_entry,
    json_option,
    skill_option,
    table_options,
)
from skillvc.secrets import scrubbed_output
from skillvc.terminal.fit import fits_terminal, terminal_width
from skillvc.terminal.pager import screen_options

# Flags out of range are usage errors (exit 2) that name the flag, before any work starts.
POSITIVE = click.IntRange(min=1)


class SkillvcGroup(click.Group):
    """Turns library errors into one clear sentence, a hint and a stable exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        # Everything printed, by any command, loses the values of known secrets (any encoding).
        # SIGTERM (timeout, systemd, docker stop) and SIGHUP end a run like Ctrl-C does.
        with scrubbed_output(), children.stop_on_signals():
            return self._invoke(ctx)

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SkillvcError as exc:
            if should_reraise():
                raise
            click.echo(f"Error: {_printable(exc.message)}", err=True)
            if exc.hint:
                click.echo(f"Hint: {_printable(exc.hint)}", err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except BrokenPipeError:
            # Output piped into `head` and closed early: not an error worth a traceback.
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(1)
        except KeyboardInterrupt as exc:
            # Agents were killed by their process group and scratch folders removed on the
            # way here (``children``); the event log holds only what completed.
            signum = exc.signum if isinstance(exc, children.Interrupted) else signal.SIGINT
            by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
            training = ctx.invoked_subcommand == "train"
            resume = "; run 'skillvc train' again to resume" if training else ""
            click.echo(f"Interrupted{by}{resume}.", err=True)
            ctx.exit(128 + signum)
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if should_reraise():
                raise
            known = storage_error(exc)  # a full disk or read-only file system is not a bug
            if known is not None:
                click.echo(f"Error: {_printable(known.message)}", err=True)
                click.echo(f"Hint: {_printable(known.hint)}", err=True)
                ctx.exit(known.exit_code)
            click.echo(
                f"skillvc crashed: {type(exc).__name__}: {redact(str(exc))}\n"
                "Set SKILLVC_RAISE_ERRORS=1 to see the traceback, and please report it.",
                err=True,
            )
            ctx.exit(INTERNAL_ERROR_EXIT_CODE)


def _printable(text: str) -> str:
    """An error message or hint as printed: secrets redacted and control characters escaped
    in each line, so only the line breaks skillvc wrote on purpose (``Lines``) survive."""
    return "\n".join(one_line(redact(line)) for line in error_lines(text))


@click.group(cls=SkillvcGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="skillvc")
def cli() -> None:
    """Train LLM agent skills like neural networks, with every step under version control.

    \b
    skillvc demo            the whole loop offline on a bundled example
    skillvc init            set up a skills repo (skillvc.toml, .skillvc/)
    skillvc train           train the skill; accepted edits become commits
    skillvc log --rejected  what was tried and refused
    skillvc report          a pull-request description of a run
    skillvc check --base R  the gate, applied to any change
    skillvc help terms      what the words skillvc prints mean
    """


@cli.command()
@click.option(
    "--skill",
    "skill",
    metavar="PATH",
    help="The skill file to train (default: the one SKILL.md; with several, all of them).",
)
@click.option(
    "--target", "target_model", metavar="MODEL", help="Target model, e.g. openai:gpt-5.4-mini."
)
@click.option("--optimizer", "optimizer_model", metavar="MODEL", help="Optimizer model.")
@click.option("--train", "train_file", metavar="FILE", help="Train split task file.")
@click.option("--val", "val_file", metavar="FILE", help="Validation split task file (the gate).")
@click.option("--test", "test_file", metavar="FILE", help="Test split task file (reported only).")
@click.option("--scorer", default="exact", show_default=True, help="How answers are scored.")
@click.option("--seed", default=42, show_default=True, type=int, help="Training seed.")
@click.option("--hooks", "with_hooks", is_flag=True, help="Also install the pre-commit hook.")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init(directory: str, with_hooks: bool, **options: Any) -> None:
    """Set up skillvc in a skills repository (git init if needed). Safe to re-run.

    Example: skillvc init --skill skills/support/SKILL.md --train evals/train.jsonl
    """
    from skillvc.workspace.workspace import init_workspace

    result = init_workspace(directory, **options)
    if result.git_initialised:
        click.echo(f"Initialised a git repository in {result.root}.")
    if result.config_written and result.skills:
        click.echo(
            f"Wrote skillvc.toml listing {len(result.skills)} skills ([skills.<name>] tables); "
            "commit it. Name one with --skill NAME when training:"
        )
    elif result.config_written:
        what = f"the skill package {result.skill_path}" if result.package else result.skill_path
        click.echo(f"Wrote skillvc.toml (training {what}); commit it.")
    if result.state_created:
        click.echo("Created .skillvc/ (the event log, local state).")
    if result.gitignore_updated:
        click.echo("Added /.skillvc/ to .gitignore.")
    for note in result.notes:
        click.echo(note)
    if with_hooks:
        from skillvc.integrations.hooks import install_hooks

        for change in install_hooks(result.root):
            click.echo(change.message)


@cli.command()
@click.option("--rejected", "decision", flag_value="rejected", help="Only rejected candidates.")
@click.option("--accepted", "decision", flag_value="accepted", help="Only accepted candidates.")
@click.option("--run", "run_id", metavar="RUN", help="Only this run.")
@click.option(
    "-n",
    "--max-count",
    "limit",
    # SQLite reads LIMIT -1 as "no limit"; past its largest integer the query fails.
    type=click.IntRange(min=1, max=2**63 - 1),
    metavar="N",
    help="Show at most N entries.",
)
@click.option("-p", "--patch", is_flag=True, help="Show the skill diff of each candidate.")
@skill_option
@json_option
@table_options
@screen_options
def log(
    skill: str | None,
    decision: str | None,
    run_id: str | None,
    limit: int | None,
    patch: bool,
    as_json: bool,
    table_format: str | None,
) -> None:
    """Gate decisions, newest first, like 'git log' over the event log.

    Example: skillvc log --rejected -n 5 -p
    """
    from skillvc.review.history import entry_patch, log_entries
    from skillvc.skill.skills import run_skill_path
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill, any_skill=True)
    of_skill = ws.config.skill.path if skill is not None else None  # --skill filters

    def skill_path(store: Any, entry: Any) -> str:
        if not ws.config.many:
            return ws.skill_relpath
        return run_skill_path(store, str(entry.gate.run_id)) or "SKILL.md"  # its run's skill

    with ws.store() as store:
        entries = log_entries(
            store, decision=decision, run_id=run_id, limit=limit, skill_path=of_skill
        )
        rendered = [
            e.to_dict(patch=entry_patch(store, e, skill_path(store, e)) if patch else None)
            for e in entries
        ]
    if as_json:
        echo_json(rendered)
        return
    if table_format:
        from skillvc.review.history import LOG_KEYS

        echo_rows(rendered, table_format, LOG_KEYS)
        return
    if not rendered:
        click.echo("No gate decisions yet; run 'skillvc train' first.", err=True)
        return  # not an empty line on stdout as well
    click.echo("\n\n".join(format_log_entry(e) for e in rendered))


@cli.command()
@click.argument("ident", metavar="ID")
@json_option
@screen_options
def show(ident: str, as_json: bool) -> None:
    """One event, edit, commit or run with its full evidence, like 'git show'.

    ID is an event id, RUN/SEQ (a commit's Skillvc-Event trailer), an edit id, a run id, a
    model call's key or a blob hash (or a unique prefix of 6+ characters of either), or a
    commit named any way git names it (sha prefix, HEAD~2, a skillvc/ tag): a training commit
    shows its gate, any other commit that touches a skill (apply, a hand edit) its message,
    recorded edits and diff. Model calls show their messages and response as text; rollouts
    their task, answer and score; every other event a text of its own.
    Example: skillvc show 42
    """
    from skillvc.core.errors import SkillvcError
    from skillvc.review.history import show as show_event
    from skillvc.review.history import skill_commit
    from skillvc.review.output import format_blob, format_call, format_rollout, format_runs
    from skillvc.views.events import event_text, flip_lines
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(any_skill=True)

    def git_rev(rev: str) -> str | None:
        try:
            return ws.repo.resolve(rev)
        except SkillvcError:
            return None

    with ws.store() as store:
        skills = [
            s.package_dir if s.package_dir is not None else s.skill.path for s in skills_of(ws)
        ]

        def commit_view(sha: str) -> dict[str, Any] | None:
            return skill_commit(store, ws.repo, skills, sha)

        data = show_event(store, ident, resolve_rev=git_rev, commit_view=commit_view)
    if as_json:
        echo_json(data)
        return
    if "blob" in data:
        click.echo(format_blob(data["blob"], data["messages"]))
        return
    if "commit" in data:
        click.echo(format_commit(data["commit"]))
        return
    if "entry" in data:
        click.echo(format_log_entry(data["entry"]))
        flips = flip_lines(data["event"]["payload"], data.get("flips"))
        if flips:
            click.echo("\n".join(flips))
        return
    if data.get("run") is not None:
        click.echo(format_runs([data["run"]], terminal_width()))
        for entry in data["entries"]:
            click.echo("\n" + format_log_entry(entry))
        return
    event = data["event"]
    if "call" in data:
        click.echo(format_call(event, data["call"]))
        return
    if "rollout" in data:
        click.echo(format_rollout(event, data["rollout"]))
        return
    click.echo(event_text(event, data))
    if data.get("gates"):
        click.echo(f"  in candidates (gate events): {', '.join(map(str, data['gates']))}")


def skills_of(ws: Any) -> list[Any]:
    """Every skill of the workspace's config (one for a single-skill repository)."""
    return list(ws.config.all_skills())


def format_commit(commit: dict[str, Any]) -> str:
    """A commit that touches a skill but is no training step (``apply``, a hand edit)."""
    from skillvc.review.output import format_edit

    lines = [
        f"commit {commit['sha'][:10]}  {commit['authored_at']}",
        f"    {commit['subject']}",
        f"    skill files: {', '.join(commit['files'])}",
    ]
    if commit["edits"]:
        lines.append(
            f"    recorded edits (events {', '.join(str(e['id']) for e in commit['edits'])}):"
        )
        for e in commit["edits"]:
            lines.extend(format_edit(e["payload"].get("edit") or {}))
    else:
        lines.append("    a hand commit: no edit events (not made by skillvc)")
    if commit["patch"]:
        lines.append("")
        lines.extend("    " + line for line in commit["patch"].rstrip("\n").splitlines())
    return "\n".join(lines)


def _progress(quiet: bool) -> Any:
    from skillvc.core.progress import Progress

    return Progress.to_stderr(quiet)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _summary_lines(summary: Any) -> list[str]:
    """A run's summary in plain words (``skillvc help terms`` explains the rest)."""
    from skillvc.review.output import fmt_score

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
        f"run {summary.run_id} {summary.status} after {_plural(summary.steps, 'step')}: "
        f"{_plural(summary.accepted, 'change')} kept, {summary.rejected} tried and refused "
        "(they did not beat the current skill on val), "
        f"{_plural(empty, 'step')} with nothing to try",
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
        f"{calls - summary.fresh_calls} answered from the log of earlier runs), "
        f"tokens {summary.tokens:,}, cost {cost}",
    ]
    if summary.calls_saved_by_early_stop:
        lines.append(
            f"early stopping saved {summary.calls_saved_by_early_stop} calls (a gate stops "
            "once the change can no longer win)"
        )
    for gain in getattr(summary, "gains", []):
        what = f"step {gain['step']}" if isinstance(gain["step"], int) else str(gain["step"])
        p = "" if gain["p_value"] is None else f"p = {gain['p_value']:.3g}, "
        dropped = (
            f"; {gain['dropped']} edit(s) dropped by attribution, {gain['kept']} kept"
            if gain["dropped"]
            else ""
        )
        lines.append(f"accepted {what}: {p}{gain['verdict']} (alpha {gain['alpha']:.2g}){dropped}")
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


@cli.command()
@click.option(
    "--new",
    is_flag=True,
    help="Start a new run even if one is unfinished (it is marked abandoned) or done.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Resume the unfinished run with the settings it started with, whatever changed.",
)
@click.option("--epochs", type=POSITIVE, help="Passes over the train split [4].")
@click.option("--batch-size", type=POSITIVE, help="Train items per step [40].")
@click.option("--minibatch-size", type=POSITIVE, help="Trajectories per reflection call [8].")
@click.option("--lr", "learning_rate", type=POSITIVE, help="Edits per step at the start [4].")
@click.option("--min-lr", "min_learning_rate", type=POSITIVE, help="Edits per step at the end [2].")
@click.option(
    "--lr-schedule",
    type=click.Choice(["cosine", "linear", "constant"]),
    help="How the edit budget decays over the steps [cosine].",
)
@click.option(
    "--gate-metric",
    type=click.Choice(["hard", "soft", "mixed"]),
    help="Score the gate compares: 0/1, 0..1, or their mean [hard].",
)
@click.option("--samples", type=POSITIVE, help="Runs of each item per skill version, averaged [1].")
@click.option(
    "--gate-confidence",
    type=click.FloatRange(0, 1, max_open=True),
    help="Confidence a gain must reach, e.g. 0.9 [0.8 with attribution, else 0].",
)
@click.option(
    "--no-attribution",
    "attribution",
    flag_value=False,
    default=None,
    help="The paper's bundle gate: commit a passing candidate's edits as a whole.",
)
@click.option("--workers", type=POSITIVE, help="Model calls in flight at once [16].")
@click.option("--seed", type=int, help="Shuffling seed [42].")
@click.option("--branch", help="Train on this branch (created from HEAD if needed).")
@click.option(
    "--no-buffer",
    "buffer",
    flag_value=False,
    default=None,
    help="Do not show rejected edits to later reflections.",
)
@click.option(
    "--no-slow-update",
    "slow_update",
    flag_value=False,
    default=None,
    help="Skip the epoch-end slow update.",
)
@click.option(
    "--no-slow-update-gate",
    "slow_update_gate",
    flag_value=False,
    default=None,
    help="Apply slow updates without gating them (marked ungated).",
)
@click.option(
    "--no-meta-skill",
    "meta_skill",
    flag_value=False,
    default=None,
    help="Skip the optimizer-side meta skill.",
)
@click.option(
    "--no-early-stop",
    "early_stop",
    flag_value=False,
    default=None,
    help="Evaluate every val item in every gate.",
)
@click.option(
    "--no-speculate",
    "speculate",
    flag_value=False,
    default=None,
    help="Do not start the next rollouts while a candidate is gated.",
)
@click.option(
    "--budget-usd",
    type=click.FloatRange(0, min_open=True),
    help="Stop cleanly at a step boundary past this cost.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option("--trust-judge", is_flag=True, help="Let an uncalibrated or disagreeing judge gate.")
@skill_option
@json_option
@fits_terminal
def train(
    new: bool,
    resume: bool,
    budget_usd: float | None,
    quiet: bool,
    as_json: bool,
    skill: str | None,
    trust_judge: bool,
    **train_options: Any,
) -> None:
    """Train the skill: accepted edits become commits; resumes an unfinished run.

    When the last run already finished at HEAD with the same settings, templates and task
    set, it says so and makes no call (--new trains again). When the settings changed since
    an unfinished run started, it says what changed: a run with no step done starts over by
    itself; otherwise pick --new or --resume. Budget, workers and speculation may change on
    a resume. Every option overrides the [train] key of the same name in skillvc.toml.
    Example: skillvc train --epochs 2 --lr-schedule constant
    """
    import dataclasses

    from skillvc.judge.trust import require_trusted_judge_here
    from skillvc.training.loop import UP_TO_DATE
    from skillvc.training.loop import train as run_training
    from skillvc.workspace.workspace import open_workspace

    if new and resume:
        raise click.UsageError("--new and --resume exclude each other; pick one.")
    ws = open_workspace(skill=skill)
    require_trusted_judge_here(ws.config, trust_judge)
    summary = run_training(
        ws,
        new=new,
        resume=resume,
        overrides={"train": train_options},
        budget_usd=budget_usd,
        progress=_progress(quiet),  # stderr: never mixed into the JSON
    )
    if as_json:
        data = dataclasses.asdict(summary)
        data = {"run": data.pop("run_id"), **data}  # the same key as `skillvc runs --json`
        echo_json(data)
        _fail_when_optimizer_unusable(summary)
        return
    if summary.status == UP_TO_DATE:
        click.echo(
            f"Nothing to do: run {summary.run_id} already finished at HEAD "
            f"({(summary.best_commit or '')[:10]}) with this config, templates and task set; "
            "pass --new to train again."
        )
        return
    click.echo("\n".join(_summary_lines(summary)))
    _fail_when_optimizer_unusable(summary)
    named = f" --skill {ws.config.skill_name}" if ws.config.skill_name else ""  # many skills
    click.echo(
        f"Review it: git log -p (accepted edits), skillvc log --rejected -p{named} (refused "
        f"ones), skillvc report{named} (a pull-request description)."
    )


def _fail_when_optimizer_unusable(summary: Any) -> None:
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


@cli.command()
@click.option(
    "-n",
    "--max-count",
    "limit",
    type=click.IntRange(min=1, max=2**63 - 1),  # SQLite's largest integer
    metavar="N",
    help="Show at most N runs.",
)
@click.option(
    "--all", "show_all", is_flag=True, help="Also list abandoned runs (replaced by a new one)."
)
@skill_option
@json_option
@table_options
@fits_terminal
def runs(
    limit: int | None,
    show_all: bool,
    skill: str | None,
    as_json: bool,
    table_format: str | None,
) -> None:
    """Training runs with their scores, calls, tokens and cost.

    Example: skillvc runs --json
    """
    from skillvc.review.output import format_runs
    from skillvc.review.runs import list_runs
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill, any_skill=True)
    with ws.store() as store:
        rows = list_runs(
            store,
            limit,
            ws.config.skill.path if skill is not None else None,
            abandoned=show_all,
        )
    if as_json:
        echo_json(rows)
        return
    if table_format:
        from skillvc.review.runs import RUN_KEYS

        echo_rows(rows, table_format, RUN_KEYS)
        return
    if not rows:
        click.echo("No runs yet; start one with 'skillvc train'.", err=True)
        return
    click.echo(format_runs(rows, terminal_width()))


@cli.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to create the demo repo [a new temporary directory].",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option(
    "--package",
    is_flag=True,
    help="Train a skill package (SKILL.md and reference files) with sim:support-package.",
)
@fits_terminal
def demo(directory: str | None, quiet: bool, package: bool) -> None:
    """Train a bundled example skill offline with the simulator, then show the result.

    Needs no network and no API key. With --package the skill is a directory whose SKILL.md
    links reference files, and training edits (and creates) them.
    Example: skillvc demo --dir /tmp/acme
    """
    import tempfile

    from skillvc.review.history import log_entries
    from skillvc.review.output import format_log_entry, format_runs
    from skillvc.review.runs import list_runs
    from skillvc.training.demo import PACKAGE_INTRO, run_demo
    from skillvc.workspace.workspace import open_workspace

    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="skillvc-demo-"))
    me = _own_command()
    click.echo(f"Creating the demo skills repo in {root}", err=True)
    if package:
        click.echo(PACKAGE_INTRO)
    summary = run_demo(root, progress=_progress(quiet), package=package)
    ws = open_workspace(root)
    click.echo("\n".join(_summary_lines(summary)))
    with ws.store() as store:
        click.echo("\n== Runs (skillvc runs) ==")
        click.echo(format_runs(list_runs(store), terminal_width()))
    click.echo("\n== Accepted edits are commits (git log --oneline) ==")
    click.echo(ws.repo.git_repo.git.log("--oneline", "--decorate=short"))
    if package:
        click.echo("\n== The package files each accepted commit changes ==")
        click.echo("\n".join(_package_lines(ws, summary.run_id)))
    with ws.store() as store:
        rejected = [e.to_dict() for e in log_entries(store, decision="rejected", limit=3)]
    click.echo("\n== Rejected candidates (skillvc log --rejected -n 3) ==")
    click.echo("\n\n".join(format_log_entry(e) for e in rejected) or "(none)")
    steps = [
        (f"cd {root}", ""),
        (f"{me} runs", "the runs table"),
        (f"{me} log --rejected -p", "what was tried and refused, with diffs"),
        ("git log -p skills/", "accepted edits with their evidence"),
        *([(f"{me} validate", "every link in the package resolves")] if package else []),
        (f"{me} report", "the run as a pull-request description"),
        (f"{me} train --new --no-buffer", "an ablation: watch rejected edits repeat"),
    ]
    width = max(len(cmd) for cmd, _ in steps)
    click.echo("\nTry next:")
    for cmd, why in steps:
        click.echo(f"  {cmd:<{width}}  # {why}" if why else f"  {cmd}")
    click.echo("\n".join(["", *OWN_SKILL]))  # for a skillvc on PATH: their own install


# How to go from the demo to one's own skill: the demo's last words.
OWN_SKILL = (
    "Start on your own skill (in your skills repository):",
    "  1. Task files: JSONL, one example a line, for train, val and test, e.g.",
    '       {"id": "t1", "input": "the task", "target": "the expected answer"}',
    "  2. skillvc init --skill skills/NAME/SKILL.md --train evals/train.jsonl \\",
    "       --val evals/val.jsonl --test evals/test.jsonl \\",
    "       --target openai:gpt-5.4-mini --optimizer anthropic:claude-sonnet-4-5",
    "     (models: openai:..., anthropic:..., or an OpenAI-compatible server through",
    "     OPENAI_BASE_URL; keys come from OPENAI_API_KEY and ANTHROPIC_API_KEY)",
    "  3. skillvc doctor    # checks the config, task files, keys and that the models answer",
    "  4. skillvc train     # then review: git log -p, skillvc log --rejected -p",
    "What the words mean: skillvc help terms",
)


def _package_lines(ws: Any, run_id: str) -> list[str]:
    """Each accepted commit of the package demo's run with the files it changes, then the
    reference files training changed and those it created (and whether SKILL.md links them)."""
    from skillvc.training.demo import package_changes

    changes = package_changes(ws.repo, run_id, ws.config.package_dir or "")
    lines: list[str] = []
    for commit in changes.commits:
        lines.append(f"{commit.sha[:7]} {commit.subject}")
        lines.extend(f"    {status}  {path}" for status, path in commit.files)
    changed = ", ".join(changes.changed) or "none"
    lines.append(f"Reference files changed by accepted commits: {changed}")
    for name, linked in changes.created:
        how = "linked from SKILL.md" if linked else "NOT linked from SKILL.md"
        lines.append(f"Created by training: {name}, {how}")
    return lines


def _own_command() -> str:
    """How to run this skillvc again from another directory: "skillvc" when PATH finds this
    very script, else its absolute path (e.g. a virtualenv that is not activated)."""
    import shutil

    script = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    found = shutil.which("skillvc")
    if script is None or not script.exists() or (found and Path(found).resolve() == script):
        return "skillvc"
    return str(script) if script.name == "skillvc" else "skillvc"


def _register_command_modules() -> None:
    import importlib
    import pkgutil

    # cli/__init__ is still being imported here, so ``skillvc.cli`` is not yet an attribute
    # of ``skillvc``: take the commands package from the import itself.
    from skillvc.cli import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"skillvc.cli.commands.{info.name}")
        cli.add_command(module.command)


_register_command_modules()


def main() -> None:
    cli(prog_name="skillvc")


if __name__ == "__main__":  # pragma: no cover
    main()
