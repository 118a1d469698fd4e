"""The manual is a MkDocs site (mkdocs.yml, docs/): it builds with warnings as errors, and every
command has a reference page generated from the click command itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    for page in sorted((ROOT / "docs").glob("*.md")):  # every page of docs/ is in the site
        target = "" if page.stem == "index" else f"{page.stem}/"
        assert (site / target / "index.html").exists(), page.name
