"""The gate stage: a candidate against the current skill on val, attribution, commit or reject."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from skillvc.packages import SKILL_FILE, SkillPackage
from skillvc.packages.edits import PackageApplyResult
from skillvc.skill.edits import ApplyResult, Edit
from skillvc.skill.skilldoc import SkillDocument
from skillvc.training import attribution, commits, repeats, significance
from skillvc.training.attribution import Attribution
from skillvc.training.commits import Honesty
from skillvc.training.evaluate import (
    GateResult,
    focus_items,
    gate,
    resample_gate,
    undecided,
)
from skillvc.training.matrix_gate import matrix_gate
from skillvc.training.optimize import (
    apply_selected,
    apply_selected_package,
)
from skillvc.training.speculation import Bet
from skillvc.training.state import Edits
from skillvc.training.summary import Summaries
from skillvc.training.trainer_base import Usage, fmt_val


def rejection_evidence(result: GateResult | None, alphas: Sequence[float]) -> dict[str, Any]:
    """What the rejected buffer says of a rejected candidate's edits: its paired counts and
    p-value, and ``inconclusive`` unless it did significantly worse than the current skill
    (a candidate within noise is no evidence against its edits, only not enough for them)."""
    if result is None:
        return {}
    up, down = result.counts
    evidence = {"up": up, "down": down, "p_value": result.p_value}
    if result.changed_nothing:
        # Not "inconclusive": the edit reached no answer, which is evidence enough that it
        # will not help as worded (issue 46: a real optimizer proposed it again, word for word).
        return {"evidence": evidence, "changed_nothing": True}
    worse = significance.significant(significance.sign_test_p(down, up), alphas[-1])
    return {"evidence": evidence, "inconclusive": not worse}


class Gating(Summaries):
    # The gate stage ----------------------------------------------------------------------

    def decide(
        self,
        kind: str,
        epoch: int,
        lr: int | None,
        candidate: SkillDocument,
        edits: Edits,
        unmatched: Edits,
        before: Usage,
        *,
        gated: bool = True,
        package: SkillPackage | None = None,
        bundle: Sequence[Edit] = (),
        early_bet: Bet | None = None,
    ) -> str:
        """Gate a candidate, then commit it (accepted) or keep it under a rejected ref.

        ``candidate`` is the skill file; for a skill package, ``package`` is the whole
        candidate (its SKILL.md is ``candidate``). ``bundle``: the applied edits, which
        attribution (``[train] attribution``) takes apart when the candidate passes.
        ``early_bet``: the gate's bet, sent by the caller before the candidate existed."""
        s = self.state
        credit: Attribution | None = None
        if s.package is not None and package is None:  # a slow update: only SKILL.md changed
            package = s.package.with_file(SKILL_FILE, candidate.render())
        candidate_text, files = self.files_of(candidate, package)
        self.phase = (
            f"the gate of step {s.step}"
            if kind == "step"
            else f"the gate of the epoch {epoch} slow update"
        )
        result = None
        # What comes next goes out while the gate runs, on its likely outcome: a rejection.
        # Where the tests run in rounds, a bundle or a slow update whose first pass shows a
        # net gain is accepted more often than not (attribution keeps an edit): their bet
        # waits for that pass, and goes out only once it has decided a rejection.
        late = gated and len(self.alphas) > 1 and (kind != "step" or len(bundle) > 1)
        if early_bet is not None and gated:
            bet = dataclasses.replace(early_bet, candidate=candidate_text)
        else:
            bet = self.speculate(candidate_text) if gated and not late else Bet(candidate_text)
        if gated:
            name = f"step {s.step}/{self.total_steps}" if kind == "step" else f"epoch {epoch}"
            with self.stage(f"{name} gate", [(candidate_text, self.ctx.val, "val")]):
                result = gate(
                    self.evaluator,
                    s.skill,
                    candidate_text,
                    self.ctx.val,
                    metric=self.t.gate_metric,
                    early_stop=self.t.early_stop,
                    chunk=self.look_chunk,
                    confidence=1 - self.alphas[0] if self.t.attribution else self.confidence,
                    sequential=self.t.attribution and len(self.alphas) == 1,
                    current_round=self.current_round,
                )
                # A bundle of several edits that its first pass leaves undecided goes straight
                # to attribution (a stochastic target): every edit it keeps wins a test of its
                # own. More rounds of the whole bundle would let a harmful passenger sink the
                # good edit beside it, and tell nothing the edits' tests do not.
                split = self.t.attribution and len(bundle) > 1 and undecided(result, self.alphas)
                if not split:
                    result = self.more_rounds(candidate_text, result)
            if late and not split and result.decision == "rejected":
                bet = self.speculate(candidate_text, certain=True)  # the skill stays
            s.calls_saved += result.calls_saved * self.t.samples  # items -> calls
            if (result.decision == "accepted" or split) and self.t.attribution and len(bundle) > 1:
                credit = self.attribute(name, bundle, candidate_text, result)
                if credit.dropped:
                    candidate, package = credit.document, credit.package
                    candidate_text, files = self.files_of(candidate, package)
                    edits = [e.to_dict() for e in credit.kept]
                    result = credit.result
                elif split:
                    # Nothing dropped: every edit won its own test (the bundle's first pass
                    # showed a net gain). An edit kept untested (another needs it) leaves the
                    # bundle's own rounds to decide.
                    if credit.kept_tested():
                        result = dataclasses.replace(result, decision="accepted")
                    else:
                        result = self.more_rounds(candidate_text, result)
        # [train] gate_targets = "all": the other target models may veto an accepted candidate.
        matrix = None
        if result is not None and result.decision == "accepted":
            matrix = matrix_gate(self, s.skill, candidate_text)
            if matrix is not None and matrix["vetoed"]:
                result = dataclasses.replace(result, decision="rejected")
        decision = result.decision if result else "forced"
        changed_nothing = result is not None and result.changed_nothing
        if decision != "rejected":
            # What the loop runs next with the new skill goes out now, beside the commit.
            self.after_accept(candidate_text)
        self.finish_commit()  # the last rejected candidate's, written while this gate ran
        gate_event = self.log.emit(
            "gate",
            {
                "kind": kind,
                "lr": lr,
                "edits": edits,
                "unmatched": unmatched,
                "current": self.store.put_blob(s.skill),
                "candidate": self.store.put_blob(candidate_text),
                **(result.payload() if result else self.ungated_payload()),
                **({"attribution": credit.payload()} if credit is not None else {}),
                **({"alpha": self.gate_alpha} if self.t.attribution and result else {}),
                **({"changed_nothing": True} if self.t.attribution and changed_nothing else {}),
                **({"targets": matrix} if matrix is not None else {}),
                # A skill package: the files the candidate changes (repository paths) and, for
                # the chat target, which linked files it was sent and which were cut.
                **({"files": sorted(files)} if package is not None else {}),
                **(
                    {"rendered": self.render(candidate_text).to_dict()}
                    if self.render is not None and self.rendering is not None
                    else {}
                ),
            },
        )
        honesty = self.honest(result, credit)
        pending = commits.start_commit(
            self.repo,
            self.log,
            gate_id=gate_event.id,
            files=files,
            version=candidate_text,
            text=commits.message(self.evidence(kind, epoch, lr, edits, result, before), honesty),
            accepted=decision != "rejected",
            parent=s.head,
            step_label=str(s.step) if kind == "step" else f"epoch-{epoch}-slow-update",
            skill=self.config.skill_name,
            fresh=not self.ctx.resumed,
            branch=self.branch_ref,
            significance_trailer=honesty.trailer() if honesty is not None else None,
            # Nothing reads a rejected candidate's commit before the next gate: it is written
            # while the loop goes on (the next step's reflection, an epoch end, the final test).
            writer=self.committer if decision == "rejected" else None,
        )
        if decision == "rejected":
            self.pending_commit = pending
        self.settle(bet, kind, decision, candidate_text, gate_event)
        if credit is not None and credit.dropped:
            s.drop(credit.dropped_edits(), self.t.rejected_buffer_size, len(bundle))
        if decision == "rejected":
            s.refuted.update(self.refuted_edits(kind, bundle, credit, changed_nothing))
            s.reject(
                edits,
                self.t.rejected_buffer_size,
                slow=kind != "step",
                evidence=rejection_evidence(result, self.alphas) if self.t.attribution else None,
            )
        else:
            alpha = self.gate_alpha if self.t.attribution else significance.REVIEW_ALPHA
            p_value = result.p_value if result else None
            self.gains.append(
                {
                    "step": s.step if kind == "step" else f"epoch {epoch} slow update",
                    "p_value": p_value,
                    "alpha": alpha,
                    "verdict": "ungated"
                    if result is None
                    else significance.verdict(p_value, alpha),
                    "kept": len(edits),
                    "dropped": len(credit.dropped) if credit is not None else 0,
                }
            )
            s.accept(candidate, pending.finish(), edits, slow=kind != "step", package=package)
            # Free after a gate (the candidate was evaluated in full); after a forced update it
            # is the only way the checkpoint and best_val describe the skill they name.
            if result is not None and len(self.alphas) > 1:
                # Fresh draws (see __init__): past every round its gate and attribution ran
                # (drawn already when its last gate was a check for harm).
                self.current_round = self.accepted_round
            with self.stage(
                f"epoch {epoch} val of the forced update", [(s.skill, self.ctx.val, "val")]
            ):
                s.current_val = self.mean_of(
                    self.evaluator.run(s.skill, self.ctx.val, "val", self.current_round)
                )
        if result is None:
            return f"forced (ungated), val {fmt_val(s.current_val)}"
        if honesty is not None:
            return f"{self.verdict_line(result)} ({honesty.summary()})"
        return self.verdict_line(result)

    def more_rounds(self, candidate: str, result: GateResult) -> GateResult:
        """A gate's rounds of fresh draws after its first pass, when that left it undecided
        (``resample_gate``)."""
        return resample_gate(
            self.evaluator,
            self.state.skill,
            candidate,
            self.ctx.val,
            result,
            alphas=self.alphas,
            current_round=self.current_round,
            rounds=self.gate_rounds_more,
        )

    # The rounds of val draws a stochastic target's tests use, per skill version: 0 the gate's
    # first look, then ``gate_rounds_more`` more for an undecided gate, then the rounds an
    # accepted version runs as the current skill, then attribution's, a block of its own for
    # every step. Rounds after the first are cheap (only the items the round before found
    # discordant): twice ``gate_rounds``.

    @property
    def gate_rounds_more(self) -> int:
        return 2 * (len(self.alphas) - 1)

    @property
    def attribution_rounds(self) -> int:
        return 2 * len(self.alphas)

    @property
    def attribution_first_round(self) -> int:
        """The first round of val draws attribution's tests use at this step: past every round
        a version runs as a candidate or as the current skill, and past every earlier step's
        tests. A version met again in a later step (an edit dropped there and proposed again,
        so one that lost with the draws it had) gets fresh draws: reusing them would favour
        the edit tested against it."""
        current = self.accepted_round + max(self.gate_rounds_more, self.attribution_rounds)
        return current + 1 + (self.state.step - 1) * self.attribution_rounds

    @property
    def gate_alpha(self) -> float:
        """The alpha a gate's decision is made at, as its verdict is shown."""
        return significance.decision_alpha(self.alphas)

    @property
    def accepted_round(self) -> int:
        """The round of val draws an accepted version runs as the current skill (its later
        rounds there follow it)."""
        return 1 + self.gate_rounds_more + self.attribution_rounds

    def files_of(
        self, candidate: SkillDocument, package: SkillPackage | None
    ) -> tuple[str, dict[str, bytes]]:
        """A candidate's identity text and the repository files its commit writes."""
        if package is None:
            return candidate.render().decode("utf-8"), {self.relpath: candidate.render()}
        assert self.state.package is not None
        files = {
            package.repo_path(name): raw
            for name, raw in package.files.items()
            if self.state.package.files.get(name) != raw
        }
        return package.bundle(), files

    def attribute(
        self, name: str, bundle: Sequence[Edit], candidate_text: str, result: GateResult
    ) -> Attribution:
        """Take apart a bundle that passed the gate (``training/attribution.py``): drop the
        edits that do not earn their place, then gate what is left against the current skill."""
        s, t = self.state, self.t
        alpha = significance.alpha_of(self.confidence)
        focus = None
        rounds = self.attribution_rounds
        alphas = self.alphas
        if len(alphas) > 1:  # a stochastic target: fresh draws on the flipped items
            focus = focus_items(self.ctx.val, [*result.gained, *result.lost])
            # A test per edit, where the gate of the bundle was one (significance.TEST_SHARE).
            alphas = [a * significance.TEST_SHARE for a in alphas]
            alpha = significance.interim_looks(math.fsum(alphas), rounds)[1]  # the last look
        credit = Attribution(list(bundle), list(bundle), [], alpha, result)

        def test_edit(
            edit: Edit, with_edit: str, without: str, worse_round: int | None = None
        ) -> attribution.EditTest:
            return attribution.compare(
                self.evaluator,
                with_edit,
                without,
                self.ctx.val,
                metric=t.gate_metric,
                alphas=alphas,
                chunk=self.look_chunk,
                early_stop=t.early_stop,
                edit=edit.to_dict(),
                focus=focus,
                # Draws past the gate's rounds (which got the bundle accepted: lucky ones,
                # which would keep every edit) and past the rounds a version runs as the
                # current skill; fresh at every step (``attribution_first_round``). Every test
                # of this step uses the same rounds: a version tested twice (the candidate,
                # while its edits are kept) is run once.
                first_round=self.attribution_first_round,
                rounds=rounds,
                worse_round=worse_round,
                # A deterministic target: the items the bundle gained lead each test (the
                # decision is the same in any order; a kept edit is known sooner).
                lead=result.gained if focus is None else (),
            )

        text = candidate_text
        document: SkillDocument | None = None
        package: SkillPackage | None = None
        total = len(self.ctx.val) * len(bundle) * t.samples
        with self.progress.stage(f"{name} attribution", total):
            for edit in reversed(bundle):  # the least supported edit first
                if len(credit.kept) == 1:
                    break  # the last edit standing (tested below on a stochastic target)
                rest = [e for e in credit.kept if e is not edit]
                applied = self.apply_quietly(rest)
                if len(applied.applied) != len(rest):
                    continue  # another kept edit needs this one (an anchor it wrote): keep it
                doc = applied.document
                pkg = applied.package if isinstance(applied, PackageApplyResult) else None
                without, _ = self.files_of(doc, pkg)
                test = test_edit(edit, text, without)
                credit.tests.append(test)
                if test.outcome != attribution.KEPT:
                    credit.kept, text, document, package = rest, without, doc, pkg
            untested = len(credit.kept) == 1 and not credit.kept_tested()
            if focus is not None and credit.dropped and untested:
                # The last edit standing (the others dropped): on a stochastic target it gets a
                # test of its own too, against the current skill on the same focus items (its
                # draws past the current skill's own gate, as in ``more_rounds``). Then every
                # kept edit has won a test of its own, and the pruned gate checks for harm.
                (standing,) = credit.kept
                credit.tests.append(test_edit(standing, text, s.skill, self.current_round))
        if credit.dropped:
            assert document is not None
            # Independent tests on fresh draws (a stochastic target) settled every kept edit:
            # the pruned gate only checks for harm (``Attribution.confirm``), on a full pass.
            # A deterministic target's pruned gate sees the same answers again: it stays a
            # check that the kept edits together still beat the current skill.
            settled = len(self.alphas) > 1 and credit.kept_tested()
            refused = len(self.alphas) > 1 and not settled and credit.last_refused()
            with self.stage(f"{name} gate of the kept edits", [(text, self.ctx.val, "val")]):
                credit.result = gate(
                    self.evaluator,
                    s.skill,
                    text,
                    self.ctx.val,
                    metric=t.gate_metric,
                    early_stop=t.early_stop and not settled,
                    chunk=self.look_chunk,
                    confidence=1 - self.alphas[0],
                    sequential=len(self.alphas) == 1,
                    current_round=self.current_round,
                    # A check for harm decides nothing on a gain: its pass is fresh draws in
                    # the round the candidate keeps as the current skill, not a second pass.
                    candidate_round=self.accepted_round if settled else 0,
                )
                if settled:
                    credit.result = credit.confirm(credit.result)
                elif refused:
                    # The last edit standing lost its own test, which decides: the pruned
                    # candidate is refused with that test's counts and p-value (the pass above
                    # gives the val means, as a gate's first round does).
                    last = credit.tests[-1]
                    credit.result = dataclasses.replace(
                        credit.result,
                        decision="rejected",
                        p_value=last.p_value,
                        test="weighted sign",
                        rounds=last.rounds,
                        discordant=(last.up, last.down),
                    )
                else:
                    credit.result = self.more_rounds(text, credit.result)
            s.calls_saved += credit.result.calls_saved * t.samples
            credit.text, credit.document, credit.package = text, document, package
        return credit

    def refuted_edits(
        self,
        kind: str,
        bundle: Sequence[Edit],
        credit: Attribution | None,
        changed_nothing: bool = False,
    ) -> dict[str, str]:
        """The edits of a refused step candidate held back while the current skill stays, by
        normalised text (``repeats.edit_key``) -> why, with attribution:

        - every edit of a candidate that changed no answer (``repeats.CHANGED_NOTHING``);
        - an edit that lost a test of its own against the current skill (``repeats.LOST``): a
          one-edit candidate (its gate is the edit's test, stopped early or not), the edits
          attribution's tests did not keep, and the one edit a refused pruned candidate kept.

        On a deterministic target a new test would give the same answers again; on a
        stochastic one it would be a second chance at the same question: at a test's alpha
        (about 0.07) an edit that changes nothing proposed five times would pass about one
        in three. They are held back until the skill changes (or a logged decision releases
        the lost ones on a noisy target: ``Trainer.release_held``). Edits of a bundle refused
        whole were not tested one by one: they are not held, unless it changed nothing."""
        if kind != "step" or not self.t.attribution:
            return {}
        if changed_nothing:
            return {repeats.edit_key(e): repeats.CHANGED_NOTHING for e in bundle}
        held: dict[str, str] = {}
        if credit is not None:
            held = {
                repeats.edit_key(t.edit): repeats.LOST
                for t in credit.tests
                if t.outcome != attribution.KEPT
            }
            if credit.dropped and len(credit.kept) == 1:
                held[repeats.edit_key(credit.kept[0])] = repeats.LOST  # lost alone
            return held
        return {repeats.edit_key(bundle[0]): repeats.LOST} if len(bundle) == 1 else {}

    def apply_quietly(self, edits: Sequence[Edit]) -> ApplyResult | PackageApplyResult:
        """``apply`` without its events: attribution's versions of the candidate."""
        max_bytes, describe = self.config.skill.max_bytes, self.t.train_description
        if self.state.package is None:
            return apply_selected(
                self.state.doc, edits, self.relpath, max_bytes=max_bytes, describe=describe
            )
        return apply_selected_package(
            self.state.package, edits, max_bytes=max_bytes, describe=describe
        )

    def honest(self, result: GateResult | None, credit: Attribution | None) -> Honesty | None:
        """How sure the decision is, in numbers and words (None: the paper's bundle gate,
        whose messages stay as they were)."""
        if not self.t.attribution or result is None:
            return None
        tests = credit.tests if credit is not None else []
        dropped = credit.dropped if credit is not None else []

        def outcome(t: attribution.EditTest) -> str:
            # A last edit standing that lost its own test is refused with the candidate.
            return t.outcome if t.outcome == attribution.KEPT or t in dropped else "refused"

        return Honesty(
            alpha=self.gate_alpha,
            test_alpha=credit.alpha if credit is not None else None,
            p_value=result.p_value,
            test=result.test,
            decision=result.decision,
            edits=tuple((t.edit, outcome(t), t.up, t.down, t.n, t.p_value) for t in tests),
            bundle=len(credit.bundle) if credit is not None else 0,
        )

    def evidence(
        self,
        kind: str,
        epoch: int,
        lr: int | None,
        edits: Edits,
        result: GateResult | None,
        before: Usage,
    ) -> commits.Evidence:
        usage = self.usage_since(before)
        return commits.Evidence(
            kind=kind,
            decision=result.decision if result else "forced",
            edits=edits,
            metric=self.t.gate_metric,
            before=result.before if result else self.state.current_val,
            after=result.after if result else None,
            after_bound=result.after_bound if result else None,
            n=result.n if result else 0,
            n_evaluated=result.n_evaluated if result else 0,
            early_stopped=result.early_stopped if result else False,
            gained=result.gained if result else [],
            lost=result.lost if result else [],
            p_value=result.p_value if result else None,
            test=result.test if result else None,
            confidence=self.confidence,
            run_id=self.ctx.run_id,
            step=self.state.step if kind == "step" else None,
            epoch=epoch,
            lr=lr,
            calls=usage["calls"],
            tokens=usage["tokens"],
            cost_usd=usage["cost_usd"],
        )

    def ungated_payload(self) -> dict[str, Any]:
        return {
            "decision": "forced",
            "metric": self.t.gate_metric,
            "before": {"mean": self.state.current_val, "n": len(self.ctx.val)},
            "after": {"mean": None, "n": 0},
            "early_stopped": False,
            "items": [],
            "flipped": {"gained": [], "lost": []},
            "errors": 0,
        }
