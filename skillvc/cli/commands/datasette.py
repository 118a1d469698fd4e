"""``skillvc datasette``: browse the event log in Datasette (the optional extra)."""

from __future__ import annotations

import click


@click.command("datasette")
@click.option(
    "-p",
    "--port",
    type=click.IntRange(0, 65535),
    default=8001,
    show_default=True,
    help="Port on 127.0.0.1 (0 picks a free one).",
)
def command(port: int) -> None:
    """Serve .skillvc/events.db read-only on 127.0.0.1, with view docs and canned queries.

    Needs the extra: pip install 'skillvc[datasette]'.
    Example: skillvc datasette --port 8001
    """
    import os

    from skillvc.integrations.datasette_app import prepare, serve_command, usable_port
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(any_skill=True)
    with ws.store() as store:
        metadata_file = prepare(store, ws.state_dir)
    port = usable_port(port)
    args = serve_command(ws.db_path, metadata_file, port)
    click.echo(f"Serving {ws.db_path} read-only on http://127.0.0.1:{port}/", err=True)
    # Replace this process: the server then has our pid, and Ctrl-C or a kill reaches it.
    os.execv(args[0], args)
