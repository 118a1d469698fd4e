"""The simulated optimizer of ``sim:support-package`` (its world: ``skillvc.models.simpackage``).

A simulator, not a model. Like the support world's optimizer (``skillvc.models.backends.sim``) it
diagnoses the rule each failing ticket needs; here it also decides the file the rule must go
to, reading the package from the reflection prompt (SKILL.md under ``<skill>``, the other files
under ``<package_files>``):

- a general rule goes to SKILL.md (after its ``## Policies`` heading when it has one); a harmful
  rule a ticket followed is corrected, or deleted, in the file it sits in;
- a topic rule goes to the file SKILL.md points the topic to (after its ``## Rules`` heading when
  it has one). For a topic SKILL.md points nowhere it proposes a new ``references/<topic>.md``
  holding the rule together with a pointer line in SKILL.md that links it: two edits proposed
  next to each other in every answer that proposes them, so they get the same support and are
  selected together (if a file of that path exists unpointed, it gets the pointer line and the
  rule instead);
- sometimes it errs as the support world's optimizer does: the rule written into SKILL.md or
  another topic's file (where it does nothing for the ticket), a harmful rule, a redundant one;
- it skips edits the rejected buffer advises against (the support world's rule on evidence,
  per file) and edits its meta notes mark ``AVOID in <file>: <text>``.

Known edge: a new file's content is the rules one answer's tickets call for (one creation per
file and answer), so two answers that call for different rules of a topic with several (damage,
returns) propose two different creations; the loop then applies the second as an add to the
first's file. The bundled demo points those topics to files from the start.

Invariant: every edit applies to the package as the prompt shows it. Targets and anchors are
whole lines copied from the file the edit names, found there once and outside frontmatter and
protected regions; an add never repeats a rule its file already states; an edit names a file
the prompt does not show only to create it.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from skillvc.core.errors import SkillDocumentError
from skillvc.models import simpackage, simworld
from skillvc.models.prompts import edits_in, load_section, section
from skillvc.models.simpackage import Topic
from skillvc.models.simworld import Rule
from skillvc.packages.model import SKILL_FILE, skill_file_text
from skillvc.skill.skilldoc import SkillDocument

Edit = dict[str, Any]
Group = list[Edit]  # edits proposed together (a new file and its link), kept or dropped together


@dataclass(frozen=True)
class PackageView:
    """The package as a reflection prompt shows it."""

    skill: str  # SKILL.md's text
    files: dict[str, str]  # every other file, by package path

    @classmethod
    def from_prompt(cls, prompt: str) -> PackageView:
        # skill_file_text: a loop that sends the bundle under <skill> is read the same way.
        skill = skill_file_text(section(prompt, "skill"))
        files = {
            str(f["path"]): str(f.get("text", ""))
            for f in load_section(prompt, "package_files")
            if isinstance(f, dict) and "path" in f
        }
        return cls(skill, files)

    def text(self, path: str) -> str:
        return self.skill if path == SKILL_FILE else self.files.get(path, "")

    def line(self, path: str, wanted: str, *, exact: bool = False) -> str | None:
        """A whole line of file ``path`` that is (or, without ``exact``, holds) ``wanted``,
        when it occurs there exactly once and an edit may touch it."""
        text = self.text(path)
        lines = [
            ln
            for ln in text.splitlines()
            if (ln.strip() == wanted if exact else wanted in " ".join(ln.lower().split()))
        ]
        if not lines or text.count(lines[0]) != 1 or "characters cut ...]" in lines[0]:
            return None
        try:
            doc = SkillDocument.parse(text.encode("utf-8"), frontmatter=path == SKILL_FILE)
        except SkillDocumentError:
            return None
        start = doc.text.find(lines[0])
        if not any(s <= start and start + len(lines[0]) <= e for s, e in doc.editable_spans()):
            return None
        return lines[0]


def _add(view: PackageView, path: str, rule: Rule, why: str) -> Group:
    """Add ``rule`` to file ``path`` ([] when the file states it already)."""
    if simpackage.has(view.text(path), rule):
        return []
    edit: Edit = {"file": path, "op": "add", "content": f"- {rule.text}", "rationale": why}
    anchor = view.line(path, "## Policies" if path == SKILL_FILE else "## Rules", exact=True)
    if anchor is not None:
        edit["anchor"] = anchor
    return [edit]


def _pointer(view: PackageView, topic: Topic, why: str) -> Edit:
    """The SKILL.md line that points ``topic`` to its file."""
    path = topic.path
    edit: Edit = {
        "file": SKILL_FILE,
        "op": "add",
        "content": f"- {topic.title} ({topic.about}): read [{path}]({path}).",
        "rationale": why,
    }
    anchor = view.line(SKILL_FILE, "## Topics", exact=True)
    if anchor is None:
        lines = [line for line, _ in simpackage.pointer_lines(view.skill).values()]
        anchor = view.line(SKILL_FILE, lines[-1], exact=True) if lines else None
    if anchor is not None:
        edit["anchor"] = anchor
    return edit


def _new_file(view: PackageView, topic: Topic, rule: Rule, why: str) -> Group:
    """Move ``topic`` to its own reference file: the file (created, or completed when it
    exists unpointed) and the pointer line, in that order."""
    path = topic.path
    if path in view.files:
        return _add(view, path, rule, why) + [_pointer(view, topic, why)]
    content = f"# {topic.title}\n\nTickets about {topic.about}.\n\n## Rules\n- {rule.text}\n"
    create: Edit = {"file": path, "op": "add", "content": content, "rationale": why}
    return [create, _pointer(view, topic, why)]


def _correct(view: PackageView, path: str, wrong: Rule, known: set[str], why: str) -> Group:
    """Fix a harmful rule where it sits: replaced by its good counterpart, else deleted."""
    line = view.line(path, wrong.key)
    if line is None:
        return []
    if wrong.fix is not None and wrong.fix not in known:
        prefix = line[: len(line) - len(line.lstrip("- *"))]
        fixed = prefix + simworld.rule(wrong.fix).text
        return [{"file": path, "op": "replace", "target": line, "content": fixed, "rationale": why}]
    return [{"file": path, "op": "delete", "target": line, "rationale": why}]


def _home(rule: Rule, view: PackageView, topic: Topic) -> str:
    """The file where ``rule`` counts for tickets of ``topic``."""
    if simpackage.rule_topic(rule) is None:
        return SKILL_FILE
    return simpackage.pointer(view.skill, topic) or SKILL_FILE


def _diagnose(view: PackageView, case_data: dict[str, Any], rng: random.Random) -> Group:
    """What one failing ticket makes the optimizer propose (see the module docstring)."""
    case = simworld.parse_case(str(case_data.get("input", "")))
    if case is None:
        return []
    why = (
        f"Ticket {case_data.get('id')} ({case.issue}, day {case.days}, {case.tier}) "
        f"expected {case_data.get('expected')}."
    )
    topic = simpackage.topic_of(case)
    counted = simpackage.effective_rules(view.skill, view.files, case)
    known = {r.key for r in counted}
    wrong = [r for r in simworld.HARMFUL if r in counted and r.applies(case)]
    if wrong:
        return _correct(view, _home(wrong[0], view, topic), wrong[0], known, why)
    needed = simworld.needed_rule(case)
    if needed is None or needed.key in known:
        return []  # noise, or a rule that already counts
    home = _home(needed, view, topic)
    roll = rng.random()
    if simpackage.rule_topic(needed) is not None and roll < 0.62:
        if simpackage.pointer(view.skill, topic) is None:
            if roll < 0.55:
                return _new_file(view, topic, needed, why)
            return _add(view, SKILL_FILE, needed, why)  # also counts: the topic has no file
        if roll < 0.5:
            return _add(view, home, needed, why)
        # The right rule in the wrong place: mostly SKILL.md, else another topic's file.
        others = sorted(p for p in view.files if p != home)
        wrong_file = rng.choice(others) if others and roll >= 0.58 else SKILL_FILE
        return _add(view, wrong_file, needed, why)
    if simpackage.rule_topic(needed) is None and roll < 0.55:
        return _add(view, home, needed, why)
    if roll < 0.85:
        plausible = [r for r in simworld.HARMFUL if r.applies(case)] or list(simworld.HARMFUL)
        harmful = rng.choice(plausible)
        return _add(view, _home(harmful, view, topic), harmful, why)
    return _add(view, SKILL_FILE, rng.choice(simworld.REDUNDANT), why)


def _one_creation_per_file(view: PackageView, groups: list[Group]) -> list[Group]:
    """A new file is created by one edit per answer: another ticket's rule for the same new
    file joins the first creation's content, and each ticket that calls for it counts as its
    support (the same group again)."""
    first: dict[str, Group] = {}
    out: list[Group] = []
    for group in groups:
        path = group[0]["file"] if group else SKILL_FILE
        if path == SKILL_FILE or path in view.files:
            out.append(group)
            continue
        if path not in first:
            first[path] = group
        else:
            content = first[path][0]["content"]
            rule_line = group[0]["content"].rstrip("\n").splitlines()[-1]
            if rule_line not in content.splitlines():
                first[path][0]["content"] = content + rule_line + "\n"
        out.append(first[path])
    return out


def _sig(edit: Edit) -> str:
    file = edit.get("file") or SKILL_FILE
    return json.dumps([file, edit.get("op"), edit.get("target") or "", edit.get("content") or ""])


def _flat(text: str) -> str:
    return " ".join(text.lower().split()).lstrip("- ")


def _avoided(meta: str) -> list[tuple[str, str]]:
    """(file, text) of the meta notes' ``AVOID in <file>: <text>`` lines."""
    out = []
    for line in meta.splitlines():
        if line.startswith("AVOID in ") and ": " in line:
            file, text = line[len("AVOID in ") :].split(": ", 1)
            out.append((file.strip(), _flat(text)))
    return out


def reflect(prompt: str, rng: random.Random) -> list[Edit]:
    """The edits the simulated optimizer answers a reflection prompt with."""
    view = PackageView.from_prompt(prompt)
    cases = load_section(prompt, "cases")
    rejected = edits_in(prompt, "rejected_edits")
    avoid = _avoided(section(prompt, "meta_skill"))
    m = re.search(r"propose at most (\d+) edits", prompt)
    budget = int(m.group(1)) if m else 4
    groups: list[Group] = []
    for case_data in cases:
        if not isinstance(case_data, dict):
            continue
        if case_data.get("score", 0) >= 1:
            if rng.random() < 0.15:
                rule = rng.choice(simworld.REDUNDANT)
                groups.append(_add(view, SKILL_FILE, rule, "Successful answers were courteous."))
            continue
        groups.append(_diagnose(view, case_data, rng))
    groups = _one_creation_per_file(view, groups)

    # The support world's use of evidence: an edit rejected before is proposed again only when
    # it was rejected inside a bundle (never on its own) and two tickets here call for it.
    rejected_alone = {_sig(e) for e in rejected if e.get("candidate_size", 1) <= 1}
    rejected_any = {_sig(e) for e in rejected}
    key = [json.dumps([_sig(e) for e in g]) for g in groups]
    support = {k: key.count(k) for k in key}
    kept: list[Group] = []
    seen: set[str] = set()
    for group, k in zip(groups, key, strict=True):
        if not group or k in seen:
            continue
        seen.add(k)
        retry = support[k] >= 2
        if any(_sig(e) in rejected_any and (_sig(e) in rejected_alone or not retry) for e in group):
            continue
        if any(
            file == (e.get("file") or SKILL_FILE)
            and text in _flat(e.get("content") or e.get("target") or "")
            for e in group
            for file, text in avoid
            if text
        ):
            continue
        kept.append(group)
    out: list[Edit] = []
    for group in kept:
        # An edit two groups share (a rule for a file that also gets its pointer) once.
        fresh = [e for e in group if _sig(e) not in {_sig(o) for o in out}]
        if len(out) + len(fresh) > budget * 2:
            break
        out.extend(fresh)
    return out


def meta_update(prompt: str) -> str:
    """Notes from evidence, per file: edits rejected on their own, or twice, are marked
    ``AVOID in <file>:``; accepted ones ``HELPED in <file>:``."""
    return simworld.meta_notes(
        section(prompt, "previous_notes"),
        edits_in(prompt, "rejected_edits"),
        edits_in(prompt, "accepted_edits"),
        _sig,
        lambda edit: f" in {edit.get('file') or SKILL_FILE}",
    )
