"""The epoch-end stages: the slow update (a gated guidance region) and the meta-skill update."""

from __future__ import annotations

from typing import Any

from skillvc.models import prompts
from skillvc.packages import SkillPackage
from skillvc.packages.prompt import readable
from skillvc.skill.formats import new_problems
from skillvc.training.gating import Gating
from skillvc.training.optimize import (
    ask_json,
    prompt_limit,
)

SLOW_UPDATE_REGION = "slow-update"


class Updates(Gating):
    def slow_update(self, epoch: int, epoch_start_skill: str) -> None:
        s = self.state
        before = self.client.snapshot()
        self.phase = f"the epoch {epoch} slow update"
        metric = self.t.gate_metric
        runs = [(epoch_start_skill, self.slow_items, "train"), (s.skill, self.slow_items, "train")]
        with self.stage(f"epoch {epoch}/{self.t.epochs} slow update", runs):
            prev = self.rollouts(epoch_start_skill, self.slow_items, "train")
            now = self.rollouts(s.skill, self.slow_items, "train")
        cases = [
            {
                "id": it.id,
                "input": it.input,
                "expected": list(it.targets),
                "before": a.value(metric),
                "after": b.value(metric),
            }
            for it, a, b in zip(self.slow_items, prev, now, strict=True)
            if a.ok and b.ok
        ]
        region = s.doc.region(SLOW_UPDATE_REGION)
        previous = region.content.strip() if region is not None else ""
        try:
            messages = self.optimizer_prompt(
                "slow_update",
                n_cases=str(len(cases)),
                max_lines="12",
                previous_skill=self.shown(epoch_start_skill),
                current_skill=self.shown(s.skill),
                cases=cases,
                previous_guidance=previous or "(none yet)",
            )
        except prompts.PromptTooLong as exc:
            self.log.emit("slow_update", {"skipped": True, "reason": "context", "error": str(exc)})
            self.progress.note(f"epoch {epoch}/{self.t.epochs} slow update: skipped ({exc})")
            return
        # The gate's bet goes out beside the optimizer's call (see Trainer.train_step), and the
        # loop's pool, idle while this thread waits for that call, takes one wave of it: at
        # most ``workers`` calls, so none is still queued there when the gate's val comes.
        early_bet = None
        if self.t.slow_update_gate and len(self.alphas) == 1:
            early_bet = self.speculate("")
            room = self.t.workers
            for items, split in self.upcoming:
                wave = list(items)[:room]
                self.ahead.lend(s.skill, wave, split, self.pool)
                room -= len(wave)
        payload, _, error = ask_json(self.client, messages, "guidance", None)
        guidance = str(payload.get("guidance", "")).strip() if payload else ""
        if not guidance or guidance == previous:
            reason = error or "no new guidance"
            self.log.emit("slow_update", {"skipped": True, "error": error, "reason": reason})
            self.progress.note(f"epoch {epoch}/{self.t.epochs} slow update: skipped ({reason})")
            return
        candidate = s.doc.with_region(SLOW_UPDATE_REGION, "\n" + guidance + "\n")
        problems = new_problems(
            self.relpath, s.doc, candidate, max_bytes=self.config.skill.max_bytes
        )
        if problems:
            self.log.emit(
                "slow_update",
                {"skipped": True, "reason": "format", "problems": [p.message for p in problems]},
            )
            return
        self.log.emit(
            "slow_update",
            {"skipped": False, "guidance": guidance, "gated": self.t.slow_update_gate},
        )
        verdict = self.decide(
            "slow_update",
            epoch,
            None,
            candidate,
            [],
            [],
            before,
            gated=self.t.slow_update_gate,
            early_bet=early_bet,
        )
        self.progress.note(f"epoch {epoch}/{self.t.epochs} slow update: {verdict}")

    def shown(self, skill: str) -> str:
        """A skill version as an optimizer prompt shows it whole: the skill's text, or a
        package's files one after another (``skillvc.packages.prompt.readable``)."""
        if self.state.package is None:
            return skill
        package = SkillPackage.from_bundle(self.state.package.root, skill)
        return readable(package, self.config.skill.optimizer_chars)

    def meta_messages(self) -> list[dict[str, str]]:
        s = self.state
        values: dict[str, Any] = {
            "max_lines": "20",
            "previous_notes": s.meta or "(none yet)",
            "accepted": s.epoch_accepted,
            "rejected": s.epoch_rejected,
        }
        try:
            return self.optimizer_prompt("meta_update", **values)
        except prompts.PromptTooLong:
            return prompts.render("meta_update", **values)

    def optimizer_prompt(self, name: str, **values: Any) -> list[dict[str, str]]:
        """An optimizer prompt, fitted to a local server's context (``prompts.render``);
        PromptTooLong when it cannot be (the meta update then sends it whole, and a server
        that refuses it stops the run with its reason: a context that small fits no step)."""
        return prompts.render(name, fit=prompt_limit(self.client), **values)

    def meta_update(self) -> None:
        s = self.state
        messages = self.meta_messages()
        self.ahead.wait("meta")  # sent at the epoch end; its answer is now in the log
        payload, _, error = ask_json(self.client, messages, "notes", None)
        if payload is not None:
            s.meta = str(payload.get("notes", "")).strip()
        self.log.emit("meta_update", {"notes": s.meta, "error": error})
