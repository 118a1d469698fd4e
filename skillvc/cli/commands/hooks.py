"""``skillvc hooks``: install or remove the git hooks shipped with skillvc."""

from __future__ import annotations

import click


@click.group("hooks")
def command() -> None:
    """Install or remove skillvc's git hooks (pre-commit, and optionally pre-push).

    \b
    skillvc hooks install             pre-commit: 'skillvc validate --staged'
    skillvc hooks install --pre-push  also pre-push: 'skillvc check --base <remote tip>'
    skillvc hooks uninstall           remove them; put back the hooks they kept aside
    skillvc hooks workflow            print a GitHub Actions workflow running 'skillvc check'
    """


@command.command()
@click.option("--pre-push", is_flag=True, help="Also install the pre-push hook (skillvc check).")
@click.option(
    "--force",
    is_flag=True,
    help="Rewrite skillvc's hooks even if up to date; if <hook>.legacy is taken, keep it as "
    "<hook>.legacy.N so the hook in the way can be kept aside.",
)
def install(pre_push: bool, force: bool) -> None:
    """Install the hooks into the repository's hooks directory; safe to re-run.

    A hook already there is kept as <hook>.legacy and runs before skillvc's. A hook run by
    the pre-commit framework, husky or lefthook is left alone: install refuses and prints the
    entry to add to that manager's config instead.
    Example: skillvc hooks install --pre-push
    """
    from skillvc.integrations.hooks import install_hooks

    for change in install_hooks(pre_push=pre_push, force=force):
        click.echo(change.message)


@command.command()
def uninstall() -> None:
    """Remove skillvc's hooks and restore the hooks they kept aside.

    Hooks that are not skillvc's are left alone. Example: skillvc hooks uninstall
    """
    from skillvc.integrations.hooks import uninstall_hooks

    for change in uninstall_hooks():
        click.echo(change.message)


@command.command()
def workflow() -> None:
    """Print the GitHub Actions workflow that runs 'skillvc check' on pull requests.

    SKILLVC_SPEC at its top names where CI installs skillvc from: the source this skillvc was
    installed from when that is pinned (a git URL at a commit, a wheel URL with its sha256),
    else a placeholder to set.

    Example: skillvc hooks workflow > .github/workflows/skillvc-check.yml
    """
    from skillvc.integrations.workflow import render_workflow

    rendered = render_workflow()
    click.echo(rendered.text, nl=False)
    if rendered.spec is None:
        click.echo(
            "Set SKILLVC_SPEC at the top of the workflow to a pinned skillvc source (a git URL "
            "at a commit, or a wheel URL with #sha256=) before the first run.",
            err=True,
        )
    else:
        click.echo(f"SKILLVC_SPEC is the source this skillvc came from: {rendered.spec}", err=True)
