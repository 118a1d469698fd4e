"""``skillvc review``: approve, edit or reject drafted and harvested task items, and label
model outputs pass/fail, on a local page (or with ``--approve``/``--reject`` here).

The page is served on 127.0.0.1 at a free port with a random token in its URL, opened in the
browser (``--no-open`` only prints the URL); it stops with Ctrl-C. Every decision and label is
an event, written through the same library path as the flags below. See docs/coldstart.md.

JSON (``--list --json``): ``[{id, origin, status, split, file, input, targets, rubric, kind,
section, scorer, provenance, outputs}]``.
"""

from __future__ import annotations

import click

from skillvc.review.output import echo_json, json_option, skill_option


@click.command("review")
@click.option("--no-open", is_flag=True, help="Print the page's URL; do not open a browser.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="Port (default: free).")
@click.option("--list", "listing", is_flag=True, help="List the items instead of serving.")
@click.option("--approve", multiple=True, metavar="ID", help="Approve an item (repeatable).")
@click.option("--reject", multiple=True, metavar="ID", help="Reject an item (repeatable).")
@click.option("--yes", "approve_all", is_flag=True, help="Approve every pending item.")
@skill_option
@json_option
def command(
    skill: str | None,
    no_open: bool,
    port: int,
    listing: bool,
    approve: tuple[str, ...],
    reject: tuple[str, ...],
    approve_all: bool,
    as_json: bool,
) -> None:
    """Review drafted and harvested task items and label outputs, on a local page.

    Example: skillvc review            (opens http://127.0.0.1:<port>/?review=...)
    Example: skillvc review --approve d1a2b3c4d5 --reject d0f9e8d7c6
    """
    from skillvc.coldstart import queue
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill)
    if approve or reject or approve_all:
        chosen = list(approve)
        if approve_all:
            chosen += [e.id for e in queue.entries(ws, outputs=False) if e.status == "pending"]
        for item in dict.fromkeys(chosen):
            done = queue.decide(ws, item, "approve", by="skillvc review --approve")
            click.echo(f"approved {done.id} ({done.split}, {done.file})")
        for item in reject:
            done = queue.decide(ws, item, "reject", by="skillvc review --reject")
            click.echo(f"rejected {done.id} ({done.split}, {done.file})")
        return
    if listing:
        items = queue.entries(ws)
        if as_json:
            echo_json([e.to_dict() for e in items])
            return
        for e in items:
            text = " ".join(e.input.split())
            text = text if len(text) <= 60 else text[:59] + "…"
            click.echo(f"{e.status:<8} {e.id}  {e.origin:<7} {e.split:<5} {text}")
        return
    from skillvc.coldstart.server import ReviewServer

    server = ReviewServer(ws, port=port)
    items = queue.entries(ws, outputs=False)
    pending = sum(1 for e in items if e.status == "pending")
    click.echo(
        f"Serving the review of {len(items)} items ({pending} pending) of {ws.skill_relpath} "
        f"on 127.0.0.1 only, until Ctrl-C:\n  {server.url}"
    )
    if not no_open:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("Stopped.", err=True)
    finally:
        server.stop()
