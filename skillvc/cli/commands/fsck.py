"""``skillvc fsck [--repair] [--json]``: check the event log; copy a damaged one to a new log."""

from __future__ import annotations

import click

from skillvc.review.output import echo_json, json_option


@click.command("fsck")
@click.option(
    "--repair",
    is_flag=True,
    help="Copy every readable event and blob into a new log that replaces the damaged one "
    "(which is kept aside as events.db.damaged-<time>).",
)
@json_option
def command(repair: bool, as_json: bool) -> None:
    """Check the event log: SQLite's full integrity check, every payload JSON, every blob
    matching its hash. Exits 5 when the log is damaged (0 after a repair).

    Example: skillvc fsck --repair
    """
    from skillvc.core.errors import LogDamaged, NotInitialised
    from skillvc.fsck.log import fsck
    from skillvc.fsck.log import repair as repair_log
    from skillvc.workspace.workspace import DB_NAME, STATE_DIR, find_root

    path = find_root() / STATE_DIR / DB_NAME
    if not path.exists():
        raise NotInitialised(f"No event log at {STATE_DIR}/{DB_NAME}: nothing to check.")
    if repair:
        done = repair_log(path)
        report, data = done.check, done.to_dict()
    else:
        report, data = fsck(path), None
    if as_json:
        echo_json(data or report.to_dict())
    else:
        click.echo(f"events read: {report.events:,}   blobs read: {report.blobs:,}")
        for line in report.sqlite[:10]:
            click.echo(f"sqlite: {line}")
        if report.bad_payloads:
            ids = ", ".join(map(str, report.bad_payloads[:10]))
            click.echo(f"events whose payload is not JSON: {len(report.bad_payloads)} ({ids})")
        if report.bad_blobs:
            click.echo(f"blobs whose content does not match their hash: {len(report.bad_blobs)}")
        for line in report.unreadable[:10]:
            click.echo(f"unreadable: {line}")
        if data is not None and done.repaired:
            click.echo(
                f"repaired: copied {done.copied_events:,} events and {done.copied_blobs:,} blobs "
                f"into a new {STATE_DIR}/{DB_NAME}; the damaged log is kept as {done.kept_aside}"
            )
        elif report.ok:
            click.echo("ok: the event log is sound")
    if not report.ok and not repair:
        raise LogDamaged(
            f"The event log {STATE_DIR}/{DB_NAME} is damaged.",
            hint="Run 'skillvc fsck --repair' to copy every readable event into a new log (the "
            "damaged one is kept aside).",
        )
