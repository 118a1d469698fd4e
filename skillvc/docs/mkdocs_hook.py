"""The MkDocs hook (mkdocs.yml ``hooks``): adds the generated CLI reference pages under
``cli/`` to the site. Imported by MkDocs only, never by skillvc itself."""

from __future__ import annotations

from typing import Any


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    from skillvc.docs.clireference import pages

    for name, text in pages().items():
        files.append(File.generated(config, f"cli/{name}.md", content=text))
    return files
