"""``sim:<world>``: the offline simulator backend (target and optimizer).

A documented toy, not a model (see ``skillvc.models.simworld``; ``sim:support-package`` is that
world where a rule counts only in the file SKILL.md points its topic to:
``skillvc.models.simpackage`` and ``skillvc.models.backends.sim_package``). Deterministic: the
same request always gets the same answer, whatever the thread, process or order. Knobs:

- ``SKILLVC_SIM_LATENCY_MS``: sleep this long per call, so concurrency and resume can be
  exercised against realistic waits;
- ``temperature`` > 0 on the target (``sim:support``): the stochastic mode, where each call
  departs from the skill's rules with a probability set by the temperature and the true
  accuracy of any skill is exact (``simworld.true_accuracy``);
- ``SKILLVC_SIM_JOURNAL``: append each completed call's cache key to this file (tests use it to
  prove a resumed run makes no call twice).

``calls`` keeps the requests this instance answered (the fake's call history for tests).
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
from typing import Any

from skillvc.core.config import ModelConfig
from skillvc.core.errors import ConfigError, SkillDocumentError
from skillvc.core.hashing import sha256_hex
from skillvc.core.suggest import did_you_mean
from skillvc.models import simdraft, simpackage, simrouting, simtasks, simtools, simworld
from skillvc.models.backends import sim_package
from skillvc.models.backends.base import CallRequest, CallResult, text_of
from skillvc.models.prompts import edits_in, load_section, prompt_kind, section
from skillvc.skill.skilldoc import SkillDocument

WORLDS = ("support", "support-package", "inventory", "tasks", "routing")


class SimBackend:
    def __init__(self, model: str) -> None:
        world = model.split(":", 1)[1] if ":" in model else model
        judge = simworld.JUDGE_WORLD.match(world)
        if world not in WORLDS and world not in simworld.VARIANTS and judge is None:
            known = ["sim:" + w for w in [*WORLDS, *simworld.VARIANTS, "judge-<error %>"]]
            raise ConfigError(
                f"Unknown simulator world '{world}' in '{model}'.",
                hint=did_you_mean(model, known, listed="Use one of"),
            )
        self.model = model
        self.world = world
        # sim:judge-<pct>: a judge that flips <pct>% of its verdicts; as a target (a rubric
        # trained to agree with a person, skillvc.judge) it grades with the skill as rubric.
        self.judge_error = int(judge.group(1)) / 100 if judge else None
        self.calls: list[CallRequest] = []
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: ModelConfig) -> SimBackend:
        return cls(config.model)

    def complete(self, request: CallRequest) -> CallResult:
        started = time.perf_counter()
        latency = float(os.environ.get("SKILLVC_SIM_LATENCY_MS", "0") or 0)
        if latency > 0:
            time.sleep(latency / 1000)
        meta: dict[str, Any] = {"simulated": True}
        if request.role == "target" and self.world == "routing":  # skillvc.models.simrouting
            turn = simrouting.respond(
                request.system, request.user, [str(t["name"]) for t in request.tools]
            )
            text = turn.get("text", "")
            if turn.get("tool_calls"):
                meta |= {"tool_calls": turn["tool_calls"], "finish_reason": "tool_calls"}
        elif request.role == "target" and self.world == "inventory":
            turn = simtools.respond(
                request.system, request.messages, [str(t["name"]) for t in request.tools]
            )
            text = turn.get("text", "")
            if turn.get("tool_calls"):
                meta |= {"tool_calls": turn["tool_calls"], "finish_reason": "tool_calls"}
        elif request.role == "target":
            text = self._answer(request)
        elif request.role == "optimizer":
            text = self._optimize(request)
        elif request.role == "judge" and self.judge_error is not None:
            text = simworld.graded(request.system, request.user, self.judge_error)
        elif request.role == "judge":
            text = simworld.judge(request.user)
        else:
            text = "OK"
        with self._lock:
            self.calls.append(request)
            journal = os.environ.get("SKILLVC_SIM_JOURNAL")
            if journal:
                with open(journal, "a", encoding="utf-8") as fh:
                    fh.write(request.key + "\n")
        prompt = " ".join(text_of(m) for m in request.messages)  # tool turns, parts too
        return CallResult(
            text=text,
            prompt_tokens=max(1, len(prompt) // 4),
            completion_tokens=max(1, len(text) // 4),
            latency_ms=(time.perf_counter() - started) * 1000,
            meta=meta,
        )

    def _answer(self, request: CallRequest) -> str:
        """The simulated target: the world's answer to the task with the skill it was sent."""
        salt = f"{self.model}|{request.sample}"
        if self.judge_error is not None:
            return simworld.graded(request.system, request.user, self.judge_error)
        temperature = float(request.params.get("temperature") or 0.0)
        if self.world == "support" and temperature > 0:
            # The stochastic mode: one draw per call, keyed by the call (simworld).
            salt += f"|{request.params.get('seed')}"
            return simworld.answer_stochastic(request.system, request.user, temperature, salt=salt)
        if self.world in simworld.VARIANTS:
            return simworld.answer(request.system, request.user, salt=salt, variant=self.world)
        if self.world == "tasks":  # learns from the task set's own targets (simtasks)
            return simtasks.answer(request.system, request.user)
        if self.world == "support-package":
            # The installed text files (a simulated agent runs no carried script).
            texts = [(f.path, f.text) for f in request.files if f.text is not None]
            return simpackage.answer(request.system, request.user, texts, salt=salt)
        return simworld.answer(request.system, request.user, salt=salt)

    # -- the simulated optimizer ------------------------------------------------------------

    def _optimize(self, request: CallRequest) -> str:
        prompt = request.user
        kind = prompt_kind(prompt)
        rng = random.Random(int(sha256_hex(f"{request.key}")[:12], 16))
        package = self.world == "support-package"
        if kind == "draft_tasks":  # skillvc tasks draft, in every world (simdraft)
            return simdraft.draft(prompt)
        if self.world == "tasks":
            return simtasks.optimize(kind, prompt, rng)
        if self.world == "routing":
            if kind == "route_induce":
                return simrouting.induce(prompt)
            return simrouting.optimize(prompt, rng)
        if kind == "reflect" and self.world == "inventory":
            rejected: dict[str, int] = {}
            for e in edits_in(prompt, "rejected_edits"):
                if not e.get("inconclusive"):
                    text = str(e.get("content") or "").lstrip("- ").strip().lower()
                    size = int(e.get("candidate_size", 1) or 1)
                    rejected[text] = min(size, rejected.get(text, size))
            cases = load_section(prompt, "cases")
            edits = simtools.reflect(section(prompt, "skill"), cases, rejected, rng)
            return json.dumps({"edits": edits})
        if kind == "reflect" and package:
            return json.dumps({"edits": sim_package.reflect(prompt, rng)})
        if kind == "reflect":
            return json.dumps({"edits": _reflect(prompt, rng)})
        if kind == "slow_update" and self.world == "inventory":
            return json.dumps(
                {"guidance": simtools.slow_update(load_section(prompt, "comparison"))}
            )
        if kind == "slow_update":
            return json.dumps({"guidance": _slow_update(prompt)})
        if kind == "meta_update" and package:
            return json.dumps({"notes": sim_package.meta_update(prompt)})
        if kind == "meta_update":
            return json.dumps({"notes": _meta_update(prompt)})
        if kind == "repair":
            return section(prompt, "previous_answer")
        if kind == "rubric":
            return json.dumps({"rubric": simworld.draft_rubric(load_section(prompt, "examples"))})
        return json.dumps({"edits": []})


def _line_with(skill: str, key: str) -> str | None:
    for line in skill.splitlines():
        if key in " ".join(line.lower().split()):
            return line
    return None


def _add(rule: simworld.Rule, skill: str, why: str) -> dict[str, Any]:
    edit: dict[str, Any] = {"op": "add", "content": f"- {rule.text}", "rationale": why}
    if "## Policies" in skill:
        edit["anchor"] = "## Policies"
    return edit


def _sig(edit: dict[str, Any]) -> str:
    return json.dumps([edit.get("op"), edit.get("target") or "", edit.get("content") or ""])


def _reflect(prompt: str, rng: random.Random) -> list[dict[str, Any]]:
    skill = section(prompt, "skill")
    cases = load_section(prompt, "cases")
    rejected = edits_in(prompt, "rejected_edits")
    meta = section(prompt, "meta_skill")
    m = re.search(r"propose at most (\d+) edits", prompt)
    budget = int(m.group(1)) if m else 4
    known = {r.key for r in simworld.known_rules(skill)}
    # Evidence-based use of the buffer: an edit that was rejected is proposed again only when
    # it was rejected inside a bundle (never on its own) and this minibatch gives it at least
    # two supporting failures.
    # An edit whose test was inconclusive (it did better, within noise) is not evidence
    # against it: it may be proposed again like any other.
    refuted = [e for e in rejected if not e.get("inconclusive")]
    rejected_alone = {_sig(e) for e in refuted if e.get("candidate_size", 1) <= 1}
    rejected_any = {_sig(e) for e in refuted}
    avoid = [line[6:].strip().lower() for line in meta.splitlines() if line.startswith("AVOID:")]

    proposals: list[dict[str, Any]] = []
    describe = _describe(prompt, skill, cases)
    if describe is not None:
        proposals.append(describe)
    for case_data in cases:
        case = simworld.parse_case(case_data.get("input", ""))
        if case is None:
            continue
        failed = case_data.get("score", 0) < 1
        if not failed:
            if rng.random() < 0.15:
                rule = rng.choice(simworld.REDUNDANT)
                proposals.append(_add(rule, skill, "Successful answers were courteous."))
            continue
        why = (
            f"Ticket {case_data.get('id')} ({case.issue}, day {case.days}, {case.tier}) "
            f"expected {case_data.get('expected')}."
        )
        wrong = [r for r in simworld.HARMFUL if r.key in known and r.applies(case)]
        if wrong:
            line = _line_with(skill, wrong[0].key)
            if line is not None:
                # A harmful rule with a good counterpart is corrected in place; else removed.
                fix = wrong[0].fix
                if fix is not None and fix not in known:
                    prefix = line[: len(line) - len(line.lstrip("- *"))]
                    proposals.append(
                        {
                            "op": "replace",
                            "target": line,
                            "content": prefix + simworld.rule(fix).text,
                            "rationale": why,
                        }
                    )
                else:
                    proposals.append({"op": "delete", "target": line, "rationale": why})
                continue
        needed = simworld.needed_rule(case)
        if needed is None or needed.key in known:
            continue  # noise, or a rule the skill already states
        roll = rng.random()
        if roll < 0.55:
            proposals.append(_add(needed, skill, why))
        elif roll < 0.8:
            plausible = [r for r in simworld.HARMFUL if r.applies(case)] or list(simworld.HARMFUL)
            proposals.append(_add(rng.choice(plausible), skill, why))
        else:
            proposals.append(_add(rng.choice(simworld.REDUNDANT), skill, why))

    support: dict[str, int] = {}
    for edit in proposals:
        support[_sig(edit)] = support.get(_sig(edit), 0) + 1
    edits, seen = [], set()
    for edit in proposals:
        sig = _sig(edit)
        text = (edit.get("content") or edit.get("target") or "").lower()
        retry = sig not in rejected_alone and support[sig] >= 2
        if (
            sig in seen
            or (sig in rejected_any and not retry)
            or any(a and a in text for a in avoid)
        ):
            continue
        seen.add(sig)
        edits.append(edit)
    return edits[: max(budget * 2, 1)]


WORLD_DESCRIPTION = (
    "Decide the action for an Acme customer-support ticket: returns, refunds, replacements, "
    "late or damaged deliveries, defects and billing errors."
)


def _describe(prompt: str, skill: str, cases: list[dict[str, Any]]) -> dict[str, Any] | None:
    """With train_description: when an agent never loaded the skill, say what it is for."""
    if "you may replace the frontmatter description" not in prompt:
        return None
    if not any(c.get("skill_loaded") is False for c in cases):
        return None
    try:
        current = (SkillDocument.parse(skill).frontmatter or {}).get("description")
    except SkillDocumentError:
        return None
    if not isinstance(current, str) or current.strip() == WORLD_DESCRIPTION:
        return None
    return {
        "op": "replace",
        "target": current.strip(),
        "content": WORLD_DESCRIPTION,
        "rationale": "The agent never loaded the skill: its description does not match tickets.",
    }


def _slow_update(prompt: str) -> str:
    current = section(prompt, "current_skill")
    cases = load_section(prompt, "comparison")
    known = {r.key for r in simworld.known_rules(current)}
    fixed = sum(1 for c in cases if c.get("before", 0) < 1 <= c.get("after", 0))
    broke = sum(1 for c in cases if c.get("after", 0) < 1 <= c.get("before", 0))
    counts: dict[str, int] = {}
    for c in cases:
        case = simworld.parse_case(c.get("input", ""))
        if case is None or c.get("after", 0) >= 1:
            continue
        rule = simworld.needed_rule(case)
        if rule is not None and rule.key not in known:
            counts[rule.text] = counts.get(rule.text, 0) + 1
    lines = [f"This epoch's changes fixed {fixed} training tickets and broke {broke}."]
    for text, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:2]:
        if n >= 2:
            lines.append(f"- Still failing on {n} tickets; remember: {text}")
    return "\n".join(lines)


def _meta_update(prompt: str) -> str:
    """Notes from evidence: edits rejected on their own, or twice, are marked AVOID."""
    return simworld.meta_notes(
        section(prompt, "previous_notes"),
        [e for e in edits_in(prompt, "rejected_edits") if not e.get("inconclusive")],
        edits_in(prompt, "accepted_edits"),
        _sig,
        lambda edit: "",
    )
