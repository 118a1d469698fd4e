"""``skillvc report``: a pull-request description for a training run, or an HTML page."""

from __future__ import annotations

import click

from skillvc.output import echo_json, json_option, skill_option


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
@skill_option
def command(
    run_id: str | None, fmt: str, as_json: bool, html_file: str | None, skill: str | None
) -> None:
    """Scores, curve, cost, steps, accepted diffs and rejected edits of a run, for a pull request.

    --json is the same as --format json.
    Example: skillvc report > pr-body.md; skillvc report --html run.html
    """
    from skillvc.report import render_markdown, run_report
    from skillvc.skills import report_targets
    from skillvc.workspace import open_workspace

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

        from skillvc.htmlreport import render_html

        target = Path(html_file)
        partial = target.with_name(target.name + ".partial")
        # Written beside the target, then renamed: an interrupted write leaves no half page.
        partial.write_text(render_html(report), encoding="utf-8")
        partial.replace(target)
        click.echo(f"Wrote {target} (open it in a browser; it loads nothing).", err=True)
        return
    if as_json or fmt == "json":
        echo_json(report)
    else:
        click.echo(render_markdown(report), nl=False)
