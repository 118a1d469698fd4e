"""Cold start: a bare SKILL.md gets a drafted task set, reviewed by a person on a local page."""
