"""``skillvc validate``: check skill documents against their format rules (the pre-commit hook)."""

from __future__ import annotations

import click

from skillvc.review.output import echo_json, json_option, shown


@click.command("validate")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--staged",
    is_flag=True,
    help="Check the staged skill files (what 'git commit' would record), not the working tree.",
)
@click.option(
    "--allow-protected",
    is_flag=True,
    help="With --staged, allow changes to protected regions (also: SKILLVC_ALLOW_PROTECTED=1).",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Size budget per file [skillvc.toml [skill] max_bytes, else 16000].",
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when every check passes.")
@json_option
def command(
    paths: tuple[str, ...],
    staged: bool,
    allow_protected: bool,
    max_bytes: int | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Check skill documents: frontmatter, format rules, protected regions, size.

    PATHS are files or directories (every SKILL.md, *.mdc and *.instructions.md under them);
    with --staged, their staged versions (how the pre-commit framework runs it); without
    PATHS the configured skill (every one, when there are several) is checked (without a
    skillvc.toml: every skill file in the repository). A skill package is checked whole: each
    file, and every relative link resolving inside it. Prints one line per problem and exits 5
    when there is any; warnings (size guidance, a size budget not grown past, package files no
    link leads to or that the chat target is not sent) go to stderr and never fail.

    Example: skillvc validate --staged
    """
    from skillvc.integrations.hooks import protected_allowed_by_env, validate

    if max_bytes is None:
        max_bytes = _configured_max_bytes()
    report = validate(
        paths,
        staged=staged,
        allow_protected=allow_protected or protected_allowed_by_env(),
        max_bytes=max_bytes,
    )
    if as_json:
        echo_json(report.to_dict())
    else:
        for warning in report.warnings:
            click.echo(f"warning: {shown(warning.message)}", err=True)
        for problem in report.problems:
            # Paths come from the repository (a pull request's too): one problem, one line.
            click.echo(shown(problem.message))
        if report.ok and not quiet:
            n = len(report.files)
            click.echo(f"Checked {n} file{'s' if n != 1 else ''}: no problems.")
    if not paths and not staged:
        _warn_task_files()
    report.raise_for_problems()


def _warn_task_files() -> None:
    """Name (file:line, kind) credentials in the configured task files, never their values;
    the files themselves are the user's and stay as they are (skillvc.secrets.taskfiles)."""
    from skillvc.core.errors import SkillvcError
    from skillvc.secrets.taskfiles import warn_task_file
    from skillvc.workspace.workspace import open_workspace

    try:
        ws = open_workspace(any_skill=True)
    except SkillvcError:
        return
    tasks = ws.config.tasks
    for rel in (tasks.train, tasks.val, tasks.test, tasks.path):
        if not rel:
            continue
        try:
            text = (ws.root / rel).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError):
            continue  # eval and train say what is wrong with the file itself
        warn_task_file(rel, text)


def _configured_max_bytes() -> int:
    """The size budget of skillvc.toml when there is one (validate also runs outside repos)."""
    from skillvc.core.errors import SkillvcError
    from skillvc.skill.formats import DEFAULT_MAX_BYTES
    from skillvc.workspace.workspace import open_workspace

    try:  # many skills: the shared [skill] max_bytes
        return open_workspace(any_skill=True).config.skill.max_bytes
    except SkillvcError:
        return DEFAULT_MAX_BYTES
