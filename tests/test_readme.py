"""The manual's commands are real: the README's tour and the walkthroughs of docs/ run as
written, and CI runs the README's test command."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# The README and the pages of docs/ (the manual's walkthroughs live there).
MANUAL = "\n".join([README, *(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))])


def test_ci_runs_exactly_the_readme_test_command() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    demo, tests = blocks[0].strip(), blocks[1].strip()
    assert demo.endswith("skillvc demo")
    assert "pytest" in tests
    assert tests in (ROOT / ".ci" / "run").read_text()


def skillvc_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a README script: ``skillvc`` on PATH."""
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    if not (bin_dir / "skillvc").exists():  # running from a checkout without the script
        shim = tmp_path / "bin"
        shim.mkdir()
        (shim / "skillvc").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m skillvc "$@"\n')
        (shim / "skillvc").chmod(0o755)
        env["PATH"] = f"{shim}{os.pathsep}{env['PATH']}"
    return env


def test_review_walkthrough_runs_as_written(tmp_path: Path) -> None:
    marker = "<!-- walkthrough: executed by tests/test_readme.py -->"
    script = re.search(re.escape(marker) + r"\n```bash\n(.*?)```", MANUAL, re.S).group(1)
    env = skillvc_env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "skillvc: " in out  # the accepted commits
    assert out.count("## skillvc training run") == 1
    assert "regression caught (exit 7)" in out
    assert (work / "acme" / "pr-body.md").read_text().startswith("## skillvc training run")


def test_the_tours_read_commands_run_on_the_demo(tmp_path: Path) -> None:
    """Each `skillvc` line of "A tour" that reads or re-runs, as written, on a trained demo
    (not init, apply and hooks install, which need the user's own repository or files)."""
    tour = re.search(r"## A tour\n\n```bash\n(.*?)```", README, re.S).group(1)
    lines = [
        line.split("  #")[0].strip().replace("<run>", "$run").replace("[REV]", "HEAD~1")
        for line in tour.splitlines()
        if line.startswith("skillvc ")
        and not line.startswith(("skillvc init", "skillvc apply", "skillvc hooks"))
    ]
    assert len(lines) == 12, lines  # 12: the tour lists skillvc calls (issue 24)
    setup = [
        "skillvc demo --dir acme --quiet > /dev/null",
        "cd acme",
        "run=$(git tag -l 'skillvc/*/best' | cut -d/ -f2)",
    ]
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", "\n".join(setup + lines)],
        cwd=work,
        env=skillvc_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, "\n".join(lines) + "\n" + result.stdout + result.stderr
    assert "Nothing to do: run " in result.stdout  # train after the demo's finished run
    assert "OK: the skill scores" in result.stdout  # check --base main
    # The tour's diff compares two versions that differ on the demo (epoch-1 and best were
    # the same commit there: "(no change to the skill)").
    assert re.search(r"^@@ -\d", result.stdout, re.M) and "(no change" not in result.stdout
    assert (work / "acme" / "pr-body.md").read_text().startswith("## skillvc training run")
    # 10 points (the baseline and 9 steps), in the wide curve and the phone's.
    assert (work / "acme" / "run.html").read_text().count('<g class="point ') == 2 * 10


def test_package_walkthrough_runs_as_written(tmp_path: Path) -> None:
    marker = "<!-- package walkthrough: executed by tests/test_readme.py -->"
    script = re.search(re.escape(marker) + r"\n```bash\n(.*?)```", MANUAL, re.S).group(1)
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=skillvc_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "no problems" in out  # validate
    assert "references/" in out  # an accepted commit changed a reference file
    assert re.search(r"run-\w+ step \d+ [+-]\d\.\d{3}", out)  # blame of a trained line
    assert "+++ b/skills/acme-support/" in out  # a rejected candidate's diff
    committed = out.strip().splitlines()[-1]
    assert committed.startswith("Committed ") and (
        "2 edit(s) to skills/acme-support/SKILL.md, skills/acme-support/references/damage.md"
        in committed
    )


def test_mkdocs_serve_is_named_with_the_extra_that_installs_it() -> None:
    """The README named `mkdocs serve` while MkDocs came only with the test extra."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert [r for r in extras["docs"] if r.startswith("mkdocs")]
    assert "MkDocs comes with the `docs` extra: `.venv/bin/pip install -e '.[docs]'`" in README
