"""``skillvc report``: a pull-request description for a training run, or an HTML page."""

from __future__ import annotations

import click

from skillvc.review.output import echo_json, json_option, skill_option


@click.command("report")
@click.option("--run", "run_id", metavar="RUN", help="The run to report (default: the latest).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
)
@json_option
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="Write the run as one self-contained HTML page (curve, costs, diffs) instead.",
)
@click.option(
    "--matrix",
    is_flag=True,
    help="Add the best skill vs the seed on every [targets.<name>] model (docs/matrix.md).",
)
@skill_option
def command(
    run_id: str | None,
    fmt: str,
    as_json: bool,
    html_file: str | None,
    skill: str | None,
    matrix: bool,
) -> None:
    """Scores, curve, cost, steps, accepted diffs and rejected edits of a run, for a pull request.

    --json is the same as --format json.
    Example: skillvc report > pr-body.md; skillvc report --html run.html
    """
    from skillvc.review.report import render_markdown, run_report
    from skillvc.skill.skills import report_targets
    from skillvc.workspace.workspace import open_workspace

    if html_file is not None and (as_json or fmt == "json"):
        raise click.UsageError("Give one of --html and --json (or --format json).")
    ws = open_workspace(skill=skill, any_skill=True)
    with ws.store() as store:
        targets = report_targets(ws.config, store, run_id)
        reports = [(name, run_report(store, run, path)) for name, run, path in targets]
    if len(reports) > 1:  # many skills, none named: each skill's latest run
        if html_file is not None:
            ws.config.require_named()  # one page is one run: ask for --skill (exit 2)
        if as_json or fmt == "json":
            echo_json([{"skill": name, **report} for name, report in reports])
        else:
            click.echo(
                "\n".join(f"# Skill {n}\n\n{render_markdown(r)}" for n, r in reports), nl=False
            )
        return
    report = reports[0][1]
    if html_file is not None:
        from pathlib import Path

        from skillvc.review.htmlreport import render_html

        page = render_html(report)
        if html_file == "-":  # as click does for files: the page on stdout
            click.echo(page, nl=False)
            return
        target = Path(html_file)
        # The rename below would replace whatever is there: /dev/null (as root), a FIFO.
        if target.exists() and not target.is_file():
            raise click.BadParameter(f"{html_file} is not a regular file.", param_hint="'--html'")
        if not target.parent.is_dir():
            raise click.BadParameter(
                f"the directory {str(target.parent)!r} does not exist.", param_hint="'--html'"
            )
        partial = target.with_name(target.name + ".partial")
        # Written beside the target, then renamed: an interrupted write leaves no half page.
        try:
            partial.write_text(page, encoding="utf-8")
            partial.replace(target)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            from skillvc.core.errors import SkillvcError, storage_error

            raise storage_error(exc, target) or SkillvcError(
                f"Cannot write {target}: {exc.strerror or exc}.",
                hint="Give --html a file in a directory you can write to, e.g. run.html.",
            ) from None
        click.echo(f"Wrote {target} (open it in a browser; it loads nothing).", err=True)
        return
    extra = None
    if matrix:
        from skillvc.matrix.cli import report_matrix

        extra = report_matrix(ws, report)
    if as_json or fmt == "json":
        echo_json(report | ({"matrix": extra["matrix"]} if extra else {}))
    else:
        click.echo(render_markdown(report) + (str(extra["markdown"]) if extra else ""), nl=False)
