"""The wheel carries templates/, hooks/ and the LICENSE, and an installed skillvc finds them."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_templates_and_hooks_and_installed_package_reads_them(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("skillvc-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in (ROOT / "templates", ROOT / "hooks"):
        for f in shipped.rglob("*"):
            if f.is_file():
                assert f"skillvc/{shipped.name}/{f.relative_to(shipped).as_posix()}" in names
    # The license pyproject.toml promises travels with the wheel, named in its metadata.
    with zipfile.ZipFile(wheel) as archive:
        license_text = archive.read("skillvc-0.1.0.dist-info/licenses/LICENSE").decode()
        metadata = archive.read("skillvc-0.1.0.dist-info/METADATA").decode().splitlines()
    assert license_text == (ROOT / "LICENSE").read_text()
    assert license_text.startswith("MIT License\n\nCopyright (c) 2026 The skillvc authors\n")
    assert "License-Expression: MIT" in metadata
    assert "License-File: LICENSE" in metadata

    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    probe = (
        "import skillvc, skillvc.core.resources as r;"
        "print(skillvc.__file__);"
        "print(r.resource_dir('templates'));"
        "print(r.read_text('templates', 'skillvc.toml').splitlines()[0])"
    )
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0].startswith(str(target))  # the installed copy, not the checkout
    assert out[1].startswith(str(target))
    assert out[2].startswith("# skillvc configuration")


def test_sdist_carries_the_license(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (sdist,) = tmp_path.glob("skillvc-*.tar.gz")
    with tarfile.open(sdist) as archive:
        license_file = archive.extractfile("skillvc-0.1.0/LICENSE")
        assert license_file is not None
        assert license_file.read().decode() == (ROOT / "LICENSE").read_text()
        pkg_info = archive.extractfile("skillvc-0.1.0/PKG-INFO")
        assert pkg_info is not None
        assert "License-File: LICENSE" in pkg_info.read().decode().splitlines()
