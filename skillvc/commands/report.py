"""``skillvc report``: a pull-request description for a training run, or an HTML page."""

from __future__ import annotations

import click

from skillvc.output import echo_json, json_option


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
def command(run_id: str | None, fmt: str, as_json: bool, html_file: str | None) -> None:
    """Scores, curve, cost, steps, accepted diffs and rejected edits of a run, for a pull request.

    --json is the same as --format json.
    Example: skillvc report > pr-body.md; skillvc report --html run.html
    """
    from skillvc.report import render_markdown, run_report
    from skillvc.workspace import open_workspace

    ws = open_workspace()
    with ws.store() as store:
        report = run_report(store, run_id, ws.skill_relpath)
    if html_file is not None:
        from pathlib import Path

        from skillvc.htmlreport import render_html

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
            partial.write_text(render_html(report), encoding="utf-8")
            partial.replace(target)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            from skillvc.errors import SkillvcError, storage_error

            raise storage_error(exc, target) or SkillvcError(
                f"Cannot write {target}: {exc.strerror or exc}.",
                hint="Give --html a file in a directory you can write to, e.g. run.html.",
            ) from None
        click.echo(f"Wrote {target} (open it in a browser; it loads nothing).", err=True)
        return
    if as_json or fmt == "json":
        echo_json(report)
    else:
        click.echo(render_markdown(report), nl=False)
