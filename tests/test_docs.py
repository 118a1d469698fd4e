"""The manual is a MkDocs site (mkdocs.yml, docs/): it builds with warnings as errors, and every
command has a reference page generated from the click command itself."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import click

from skillvc.cli import cli

ROOT = Path(__file__).resolve().parent.parent


def test_the_docs_build_strictly_with_a_page_per_command(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr  # a warning fails the build
    for name, command in cli.commands.items():
        page = (site / "cli" / name / "index.html").read_text(encoding="utf-8")
        assert f"Usage: skillvc {name}" in page
        for param in command.params:
            if getattr(param, "hidden", False):
                continue
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert opt in page, (name, opt)
    index = (site / "cli" / "index.html").read_text(encoding="utf-8")
    assert all(f'href="{name}/"' in index for name in cli.commands)
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "A tour" in home and "skillvc log --rejected -p" in home  # the README's, built in
    for page in sorted((ROOT / "docs").glob("*.md")):  # every page of docs/ is in the site
        target = "" if page.stem == "index" else f"{page.stem}/"
        assert (site / target / "index.html").exists(), page.name


def _options(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        names.update(getattr(param, "opts", []))
        names.update(getattr(param, "secondary_opts", []))
    return names


def test_every_skillvc_command_line_in_the_manual_names_real_commands_and_options() -> None:
    """A `skillvc ...` line of a bash block in the README or docs/ names a command that exists
    and only options it takes, so a renamed flag cannot leave the manual behind."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                words = line.split("#")[0].split()
                while words and words[0] in ("$", "run=$(", "&&"):
                    words = words[1:]
                if len(words) < 2 or words[0] != "skillvc" or words[1].startswith("-"):
                    continue
                ends = [i for i, w in enumerate(words) if w[0] in "|>;&<" or w.startswith("2>")]
                words = words[: ends[0]] if ends else words  # up to a pipe or redirection
                command = cli.commands.get(words[1])
                assert command is not None, (page.name, line)
                rest = words[2:]
                if isinstance(command, click.Group) and rest and rest[0] in command.commands:
                    command = command.commands[rest[0]]
                for word in rest:
                    flag = word.split("=")[0]
                    if flag.startswith("-") and flag != "-":
                        assert flag in _options(command), (page.name, line, flag)
                checked += 1
    assert checked > 20
