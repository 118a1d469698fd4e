"""``skillvc check`` on a change of the library's descriptions: routing before and after.

A pull request that edits a skill's ``description`` (or its listed ``name``) changes which
skill an agent loads for a prompt, which the body score never sees. When BASE's
``skillvc.toml`` has ``[routing]``, the check measures the whole library's routing at BASE and
at the head on the trigger set and reports it beside the body score.

Invariants (the trust model of ``skillvc.review.trust``, DESIGN.md section 8):

* BASE decides: its ``skillvc.toml`` gives the skills of the library, the ``[routing]`` trigger
  set and the selector (model, base URL, tools); the trigger files are read from BASE's tree,
  exported to a temporary directory. The head brings only the skill files' text (names and
  descriptions are all the selector sees). A skill the head adds is not in the library: its
  ``[skills.<name>]`` table is a change of ``skillvc.toml``, reported by the body check.
* A head that changes ``[routing]`` or a trigger file's bytes is reported and fails
  (``ConfigChanged``) unless the caller allows it; the verdict is BASE's either way.
* A head whose names and descriptions are BASE's is not measured: nothing is reported and no
  call is made. Otherwise every selector call is answered from the event log when it was made
  before (re-checking the same change is free).
* The verdict: the paired exact sign test on the prompts routed right at one side only,
  one-sided in the direction the library moved, stated by ``significance.stated`` at the
  alpha of BASE's routing gate; a significantly worse library fails the check as a body
  regression does (``RegressionFound``, exit 7), and so does a change under which one
  skill's recall falls significantly (the routing gate's rule 2, ``skillvc.routing.gate``:
  the sign test on that skill's own prompts), however the library moved.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillvc.core.config import CONFIG_FILE, Config, RoutingConfig, parse_config
from skillvc.core.progress import Progress
from skillvc.repo.skillrepo import SkillRepo
from skillvc.review.trust import HeadFiles, _decode, _head_skill, _read_at, safe_relpath
from skillvc.routing.gate import RoutingVerdict, judge
from skillvc.routing.library import Library, load_library
from skillvc.routing.metrics import RoutingScore
from skillvc.training import significance as sig
from skillvc.workspace.workspace import Workspace


@dataclass(frozen=True)
class RoutingCheck:
    """The library's routing at BASE and at the head, under BASE's trigger set and selector."""

    base: str
    head: str | None
    split: str
    alpha: float
    changes_allowed: bool
    changed: tuple[str, ...] = ()  # skills whose listed name or description differs
    before: RoutingScore | None = None  # None: not measured (no description changed)
    after: RoutingScore | None = None
    model: str = ""
    config_changes: tuple[str, ...] = ()  # dotted [routing] keys the head changed
    trigger_files: tuple[str, ...] = ()  # trigger files whose bytes differ at the head
    calls: int = 0
    fresh_calls: int = 0
    skills: tuple[str, ...] = field(default=())  # the library's skills, in order

    @property
    def head_label(self) -> str:
        return self.head if self.head is not None else "the working tree"

    @property
    def measured(self) -> bool:
        return self.before is not None and self.after is not None

    def flips(self) -> tuple[list[str], list[str]]:
        """(prompts routed right at the head only, at BASE only), over the prompts both
        sides scored."""
        if self.before is None or self.after is None:
            return [], []
        a, b = self.before.outcomes(), self.after.outcomes()
        shared = [i for i in a if i in b]
        return [i for i in shared if b[i] and not a[i]], [i for i in shared if a[i] and not b[i]]

    @property
    def direction(self) -> str:
        up, down = self.flips()
        return "unchanged" if not (up or down) else ("better" if len(up) >= len(down) else "worse")

    @property
    def p_value(self) -> float | None:
        up, down = map(len, self.flips())
        if not (up or down):
            return None
        return sig.sign_test_p(up, down) if up >= down else sig.sign_test_p(down, up)

    def verdict(self) -> RoutingVerdict | None:
        """The routing gate's rules on the change (``skillvc.routing.gate``): each skill's
        own prompts lost and gained, with the p of a loss; None when not measured."""
        if self.before is None or self.after is None:
            return None
        return judge(self.before.items, self.before, self.after, self.alpha, self.changed)

    @property
    def worse(self) -> bool:
        """The library routes significantly worse."""
        return self.direction == "worse" and sig.significant(self.p_value, self.alpha)

    @property
    def losses(self) -> dict[str, float]:
        """Skills whose recall falls significantly (the gate's rule 2): skill -> p."""
        verdict = self.verdict()
        return {} if verdict is None else verdict.losses

    @property
    def regression(self) -> bool:
        return self.worse or bool(self.losses)

    @property
    def refused_changes(self) -> bool:
        return bool(self.config_changes or self.trigger_files) and not self.changes_allowed

    def message(self) -> str:
        """One sentence: the library score before and after, and the outcome."""
        if not self.measured:
            return f"The library's names and descriptions at {self.head_label} are {self.base}'s."
        assert self.before is not None and self.after is not None
        up, down = self.flips()
        moved = (
            f"library score {_f(self.before.library)} at {self.base} -> "
            f"{_f(self.after.library)} on {self.split} ({len(up)} prompts gained, {len(down)} "
            f"lost; {sig.stated(self.p_value, self.alpha)})"
        )
        if self.worse:
            return f"The library routes significantly worse at {self.head_label}: {moved}."
        if self.losses:
            verdict = self.verdict()
            assert verdict is not None
            lost = "; ".join(
                f"{k} lost {len(verdict.shifts[k].lost)} of its prompts, gained "
                f"{len(verdict.shifts[k].gained)} ({sig.stated(p, self.alpha)})"
                for k, p in self.losses.items()
            )
            return f"A skill's recall falls significantly at {self.head_label}: {lost}; {moved}."
        how = "the same" if self.direction == "unchanged" else self.direction
        return f"OK: the library routes {how} at {self.head_label}: {moved}."

    def skill_changes(self) -> dict[str, dict[str, float | None]]:
        """Per skill: precision, recall and F1 before and after."""
        out: dict[str, dict[str, float | None]] = {}
        if self.before is None or self.after is None:
            return out
        for name in dict.fromkeys([*self.before.names, *self.after.names]):
            row: dict[str, float | None] = {}
            for key in ("f1", "precision", "recall"):
                for side, score in (("before", self.before), ("after", self.after)):
                    s = score.skills.get(name)
                    value = None if s is None else getattr(s, key)
                    row[f"{key}_{side}"] = None if value is None else round(value, 4)
            out[name] = row
        return out

    def to_dict(self) -> dict[str, Any]:
        up, down = self.flips()
        before, after = self.before, self.after
        return {
            "verdict": "regression" if self.regression else "pass",
            "message": self.message(),
            "split": self.split,
            "model": self.model,
            "changed": list(self.changed),
            "library_before": None if before is None else _round(before.library),
            "library_after": None if after is None else _round(after.library),
            "n": None if after is None else after.n,
            "flipped": {"gained": up, "lost": down},
            "direction": self.direction if self.measured else None,
            "p_value": self.p_value,
            "significance": sig.verdict(self.p_value, self.alpha),
            "alpha": sig.shown_alpha(self.alpha),
            "skills": self.skill_changes(),
            "recall_losses": self._recall_losses(),
            "config_changes": list(self.config_changes),
            "trigger_files_changed": list(self.trigger_files),
            "calls": self.calls,
            "fresh_calls": self.fresh_calls,
        }

    def _recall_losses(self) -> dict[str, dict[str, Any]]:
        """Per skill that lost any of its own prompts: lost, gained, the p of the loss and its
        verdict at alpha, and which skills (or none) took them."""
        verdict = self.verdict()
        if verdict is None:
            return {}
        return {
            k: {
                "lost": len(s.lost),
                "gained": len(s.gained),
                "p_value": s.p_value,
                "significance": sig.verdict(s.p_value, self.alpha),
                "taken_by": {t: len(v) for t, v in s.taken.items()},
            }
            for k, s in verdict.shifts.items()
            if s.lost
        }


def check_routing_change(
    root: Path,
    base: str,
    head: str | None,
    split: str,
    *,
    allow_config_change: bool = False,
    workers: int | None = None,
    progress: Progress | None = None,
) -> RoutingCheck | None:
    """The change's routing under BASE's ``[routing]``; None when BASE has no ``[routing]``
    (or no library) or the head changes neither a name, a description, ``[routing]`` nor a
    trigger file."""
    with SkillRepo(root) as repo:
        base_sha = repo.resolve(base)
        raw = _read_at(repo, CONFIG_FILE, base)
        if raw is None:
            return None
        base_text = _decode(raw, f"{CONFIG_FILE} at {base}")
        config = parse_config(base_text, root)
        if config.routing is None:
            return None
        configs = config.all_skills() if config.many else [config]
        at_base = {c.skill_relpath: _skill_file(repo, c, base_sha) for c in configs}
        if not all(at_base.values()):
            return None  # a skill absent at BASE: no library to regress from
        head_files = _Cached(repo, root, head)
        head_config = _parse(head_files)
        base_library = load_library(config, repo, base, read=lambda c: at_base[c.skill_relpath])
        head_library = load_library(
            config, repo, head, read=lambda c: _head_text(head_files, c, head_config)
        )
        changed = _changed(base_library, head_library)
        config_keys = _routing_changes(config.routing, head_config)
        triggers = tuple(
            rel
            for rel in _trigger_files(config.routing, head_config)
            if _read_at(repo, rel, base_sha) != head_files.read(rel)
        )
        alpha = _alpha(config)
        check = RoutingCheck(
            base,
            head,
            split,
            alpha,
            allow_config_change,
            changed=changed,
            config_changes=config_keys,
            trigger_files=triggers,
            skills=tuple(base_library.names),
        )
        if not changed:
            return check if (config_keys or triggers) else None
        from skillvc.review.trust import refuse_tracked_log
        from skillvc.routing.evaluate import evaluate_routing

        refuse_tracked_log(repo, head)
        with tempfile.TemporaryDirectory(prefix="skillvc-base-") as tmp:
            tree = Path(tmp)
            repo.export_tree(base_sha, tree)
            # The selector's files (a local model's path, a key file) come from BASE's tree.
            base_config = dataclasses.replace(config, root=tree)
            ws = Workspace(root=root, config=base_config, _repo=repo)
            scores = []
            for rev, library in ((base, base_library), (head, head_library)):
                score, facts = evaluate_routing(
                    ws,
                    rev,
                    split,
                    workers=workers,
                    progress=progress,
                    config=base_config,
                    tasks_root=tree,
                    library=library,
                )
                scores.append((score, facts))
    (before, b_facts), (after, a_facts) = scores
    return dataclasses.replace(
        check,
        before=before,
        after=after,
        model=str(a_facts["model"]),
        calls=int(b_facts["calls"]) + int(a_facts["calls"]),
        fresh_calls=int(b_facts["fresh_calls"]) + int(a_facts["fresh_calls"]),
    )


class _Cached(HeadFiles):
    """The head's files, each read once (every read is a git call or two)."""

    def __init__(self, repo: SkillRepo, root: Path, rev: str | None) -> None:
        super().__init__(repo, root, rev)
        self._read: dict[str, bytes | None] = {}

    def read(self, relpath: str) -> bytes | None:
        if relpath not in self._read:
            self._read[relpath] = super().read(relpath)
        return self._read[relpath]


def _alpha(config: Config) -> float:
    """The alpha of BASE's routing gate: ``significance.gate_alpha`` for a one-pass gate, the
    rule ``train --routing`` judges at (``REVIEW_ALPHA`` where the confidence is 0)."""
    return sig.gate_alpha(config, rounds=False)


def _skill_file(repo: SkillRepo, c: Config, rev: str) -> bytes | None:
    rel = c.skill_relpath
    return _read_at(repo, rel, rev) or _read_at(repo, f"{rel}/SKILL.md", rev)


def _head_text(files: HeadFiles, c: Config, head_config: Config | None) -> bytes | None:
    """A skill's file at the head: at BASE's path, or where the head's config moved it."""
    own = None
    if head_config is not None and c.skill_name is not None:
        try:
            own = head_config.for_skill(c.skill_name)
        except Exception:  # untrusted input: a skill the head dropped reads at BASE's path
            own = None
    elif head_config is not None:
        own = head_config
    rel = c.skill_relpath
    found = _head_skill(files, rel, own)
    if found is None and files.read(f"{rel}/SKILL.md") is not None:
        found = f"{rel}/SKILL.md"
    return None if found is None else files.read(found)


def _parse(files: HeadFiles) -> Config | None:
    raw = files.read(CONFIG_FILE)
    if raw is None:
        return None
    try:
        return parse_config(raw.decode("utf-8"), files.root)
    except Exception:  # untrusted input: whatever is wrong with it is reported by the body check
        return None


def _changed(base: Library, head: Library) -> tuple[str, ...]:
    """The skills whose listed name or description differs at the head (BASE's names)."""
    return tuple(
        a.name
        for a, b in zip(base, head, strict=True)
        if (a.name, a.description) != (b.name, b.description)
    )


def _routing_changes(base: RoutingConfig, head: Config | None) -> tuple[str, ...]:
    a = dataclasses.asdict(base)
    b = dataclasses.asdict(head.routing) if head is not None and head.routing else {}
    return tuple(f"routing.{k}" for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k))


def _trigger_files(base: RoutingConfig, head: Config | None) -> list[str]:
    named = [base.path, base.train, base.val, base.test]
    if head is not None and head.routing is not None:
        r = head.routing
        named += [r.path, r.train, r.val, r.test]
    out = []
    for name in named:
        rel = safe_relpath(name) if name else None
        if rel is not None and rel not in out:
            out.append(rel)
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
