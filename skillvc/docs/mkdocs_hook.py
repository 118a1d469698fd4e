"""The MkDocs hook (mkdocs.yml ``hooks``): adds the generated command reference under ``cli/``
to the site and to its navigation, puts any page of docs/ that mkdocs.yml's ``nav`` does not
list at the end of it (a new page is never left out of the site's menu), and shows the README's
tour on the home page (one copy of it, in the README). Imported by MkDocs only, never by
skillvc itself."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

TOUR_MARKER = "<!-- the README's tour, added when the site is built -->"


def _listed(nav: Any) -> set[str]:
    """The page paths a ``nav`` (strings, {title: path or list}, lists) names."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, dict):
        return set().union(*(_listed(v) for v in nav.values()))
    if isinstance(nav, list):
        return set().union(*(_listed(v) for v in nav)) if nav else set()
    return set()


def on_config(config: Any) -> Any:
    from skillvc.docs.clireference import pages

    nav = list(config.nav or [])
    listed = _listed(nav)
    docs = Path(config.docs_dir)
    nav += [p.name for p in sorted(docs.glob("*.md")) if p.name not in listed]
    names = [n for n in pages() if n != "index"]
    nav.append(
        {"Command reference": ["cli/index.md", *({f"skillvc {n}": f"cli/{n}.md"} for n in names)]}
    )
    config.nav = nav
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    from skillvc.docs.clireference import pages

    for name, text in pages().items():
        files.append(File.generated(config, f"cli/{name}.md", content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if TOUR_MARKER not in markdown:
        return markdown
    readme = (Path(config.config_file_path).parent / "README.md").read_text(encoding="utf-8")
    tour = re.search(r"^## A tour\n.*?(?=^## )", readme, re.S | re.M)
    text = tour.group(0) if tour else ""
    return markdown.replace(TOUR_MARKER, re.sub(r"\]\(docs/", "](", text).rstrip("\n"))
