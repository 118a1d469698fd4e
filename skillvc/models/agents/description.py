"""Training the frontmatter ``description``: it decides whether an agent loads the skill at all.

Opt-in (``[train] train_description = true``). The optimizer proposes an ordinary ``replace``
edit whose ``target`` is the current description (the value, or the whole ``description:``
line) and whose ``content`` is the new one. Only that one frontmatter line is rewritten; the
rest of the frontmatter and the body stay byte for byte.

Limits (the Agent Skills specification): a description is non-empty, at most 1024 characters,
one line here, and holds no XML tags (``<``/``>``), which agents treat as markup.
"""

from __future__ import annotations

import re

import yaml

from skillvc.skill.edits import Edit
from skillvc.skill.skilldoc import SkillDocument

MAX_CHARS = 1024
_LINE = re.compile(r"^description:[^\n]*$", re.M)


class DescriptionRefused(ValueError):
    """A proposed description breaks the limits; the message says which."""


def targets_description(doc: SkillDocument, edit: Edit) -> bool:
    """Is ``edit`` a replace of the skill's current description (value or whole line)?"""
    current = (doc.frontmatter or {}).get("description")
    if edit.op != "replace" or not isinstance(current, str) or not current.strip():
        return False
    line = _LINE.search(doc.text[: doc.frontmatter_end])
    accepted = {current.strip(), f"description: {current.strip()}"}
    if line is not None:
        accepted.add(line.group(0).strip())  # the line as written (quoted, say)
    return edit.target.strip() in accepted


def with_description(doc: SkillDocument, content: str) -> SkillDocument:
    """``doc`` with its description replaced by ``content`` (a value or a ``description:`` line)."""
    new = content.strip()
    if new.startswith("description:"):
        new = new[len("description:") :].strip()
        try:  # the optimizer may have written it YAML-quoted
            loaded = yaml.safe_load(new)
            new = loaded.strip() if isinstance(loaded, str) else new
        except yaml.YAMLError:
            pass
    new = " ".join(new.split())
    if not new:
        raise DescriptionRefused("The new description is empty.")
    if len(new) > MAX_CHARS:
        raise DescriptionRefused(
            f"The new description has {len(new)} characters; the limit is {MAX_CHARS}."
        )
    if "<" in new or ">" in new:
        raise DescriptionRefused("The new description contains '<' or '>' (XML tags).")
    head = doc.text[: doc.frontmatter_end]
    match = _LINE.search(head)
    if match is None:  # a folded or block description: not rewritten by this simple path
        raise DescriptionRefused("The description is not a single 'description:' line.")
    dumped = yaml.safe_dump(new, width=10**9, allow_unicode=True)
    line = "description: " + dumped.removesuffix("\n...\n").strip()  # plain or quoted scalar
    text = head[: match.start()] + line + head[match.end() :] + doc.text[doc.frontmatter_end :]
    return doc.with_text(text)
