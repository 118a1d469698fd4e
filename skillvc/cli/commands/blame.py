"""``skillvc blame``: each skill line with the commit, run, step and val gain behind it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from skillvc.review.output import echo_json

if TYPE_CHECKING:
    from skillvc.workspace.workspace import Workspace


@click.command("blame")
@click.argument("args", metavar="[REV] [SKILL]", nargs=-1)
# Deprecated spelling of the positional REV (every other command names revisions positionally).
@click.option("--rev", "rev_option", hidden=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option(
    "--skill", "skill_name", metavar="NAME", help="The skill when skillvc.toml lists several."
)
def command(
    args: tuple[str, ...], rev_option: str | None, as_json: bool, skill_name: str | None
) -> None:
    """Annotate each line of the skill at REV (default: HEAD) with the commit behind it.

    Training commits show their run, step, and the gain and p-value of the edit that wrote
    the line (with its verdict: significant or within noise); human lines say so. SKILL defaults
    to the configured skill file; a single argument that names a file is SKILL. For a skill
    package SKILL may be any file of the package, named from the package directory
    (references/forms.md) or from the repository root.
    Examples: skillvc blame; skillvc blame HEAD~3; skillvc blame main skills/support/SKILL.md;
    skillvc blame references/forms.md
    """
    from skillvc.review.report import blame
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill_name, any_skill=True)
    if len(args) > 2:
        raise click.UsageError("Give at most a revision and a skill file.")
    package = _package_dir(ws)
    rev, skill = "HEAD", None
    if len(args) == 2:
        rev, skill = args
    elif len(args) == 1:
        is_file = Path(args[0]).is_file() or (ws.root / args[0]).is_file()
        if package is not None and not is_file:
            is_file = (ws.root / package / args[0]).is_file() or not _is_revision(ws, args[0])
        rev, skill = ("HEAD", args[0]) if is_file else (args[0], None)
    if rev_option is not None:
        if len(args) == 2 or (args and skill is None):
            raise click.UsageError("Give the revision once: skillvc blame REV [SKILL].")
        rev = rev_option
    if package is not None and skill is not None:
        skill = _in_package(ws, package, skill, rev, either=len(args) == 1)
    path = skill or ws.skill_relpath  # many skills and none named: exit 2 naming them
    store = ws.store() if ws.db_path.exists() else None
    try:
        lines = blame(store, ws.repo, path, rev)
    finally:
        if store is not None:
            store.close()
    if as_json:
        echo_json([line.to_dict() for line in lines])
        return
    from skillvc.training.significance import stated

    rows = []
    for line in lines:
        d = line.to_dict()
        if line.human:
            who = f"human ({line.author})"
            if d["p_value"] is not None:  # skillvc apply's gate
                who += f" {d['edit_gain']:+.3f} {stated(d['p_value'], d['alpha'])}"
        elif line.kind == "slow_update":
            who = f"{line.run} slow update"
        else:
            gain = "" if d["edit_gain"] is None else f" {d['edit_gain']:+.3f}"
            # The verdict in the words and with the alpha every view uses.
            sure = "" if d["p_value"] is None else f" {stated(d['p_value'], d['alpha'])}"
            who = f"{line.run} step {line.step}{gain}{sure}"
        rows.append((line, who))
    width = min(WIDTH, max((len(who) for _, who in rows), default=0))
    for line, who in rows:
        click.echo(f"{line.commit[:8]} {who:<{width}.{width}} {line.number:>4}| {line.text}")


# The widest annotation shown whole: "run-xxxxxxxx step 12 +0.133 p = 0.109, within noise
# (alpha 0.0675)"; a column as wide as the widest annotation of the file, up to this.
WIDTH = 66


def _package_dir(ws: Workspace) -> str | None:
    """The selected skill's package directory; None for a single-file skill or when
    skillvc.toml lists several skills and none is named (SKILL is then taken as given)."""
    if ws.config.many and ws.config.skill_name is None:
        return None
    return ws.config.package_dir


def _is_revision(ws: Workspace, rev: str) -> bool:
    from skillvc.core.errors import UnknownRevision

    try:
        ws.repo.resolve(rev)
    except UnknownRevision:
        return False
    return True


def _in_package(ws: Workspace, package: str, given: str, rev: str, *, either: bool) -> str:
    """The repository path of the package file ``given`` names at ``rev`` or in the working
    tree (git blame then says when it is not committed); NotAPackageFile otherwise.
    ``either``: ``given`` was a lone argument, which may have been meant as a revision."""
    from skillvc.packages import load_package
    from skillvc.packages.files import require_package_file

    versions: list[str | None] = [None]  # the working tree
    if _is_revision(ws, rev):  # else git blame reports the revision
        versions.append(rev)
    names: set[str] = set()
    for version in versions:
        found = load_package(ws.config, ws.repo, version)
        names |= set(found.files if found is not None else ())
    return require_package_file(ws.root, package, names, given, Path.cwd(), or_revision=either)
