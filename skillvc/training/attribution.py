"""Edit-level credit: which edits of a candidate that passed the gate carry its gain.

Backward elimination on paired val outcomes. The candidate S starts as the whole bundle; for
each edit e (the least supported first) S without e is run on the same val items and compared
with S by the exact sign test (``significance``): e stays only when S is significantly better
than S without it. Otherwise e is dropped (a *neutral* passenger when removing it changed
nothing significant, a *harmful* one when S without it did better) and S becomes S without e.
The last edit standing is tested against the current skill on a stochastic target (the
caller, ``Gating.attribute``); on a deterministic one S against the current skill is the gate
itself, which the caller runs again on the pruned candidate before it commits anything.

Each comparison stops early only when its decision is certain (curtailment, see
``significance.decided``), so early stopping never changes what is kept. Every evaluation goes
through the run's evaluator (memoised, logged, answered from the log on resume) in a fixed
order, which keeps a resumed run exact.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from skillvc.tasks.taskset import TaskItem
from skillvc.training import significance
from skillvc.training.evaluate import Evaluator, GateResult, narrowing_rounds

NEUTRAL = "neutral"
HARMFUL = "harmful"
KEPT = "kept"


@dataclass(frozen=True)
class EditTest:
    """One edit's test: the candidate with it against the candidate without it."""

    edit: dict[str, Any]
    up: int  # val items right with the edit and wrong without it
    down: int  # wrong with it, right without
    n: int  # items compared
    n_evaluated: int  # items the candidate without the edit was run on
    early_stopped: bool
    p_value: float
    outcome: str  # kept | neutral | harmful
    rounds: int = 1  # passes over val (more on a stochastic target when undecided)
    # The edit's estimated gain in val accuracy: net wins per val item and round (on a
    # stochastic target the other val items are taken to gain nothing).
    gain: float | None = None
    # A stochastic target: the round of val draws its first round used (the split
    # ``val:<first_round>`` in the log), the next rounds following it.
    first_round: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "edit": self.edit.get("id"),
            "up": self.up,
            "down": self.down,
            "n": self.n,
            "n_evaluated": self.n_evaluated,
            "early_stopped": self.early_stopped,
            "p_value": self.p_value,
            "outcome": self.outcome,
            "rounds": self.rounds,
            "gain": self.gain,
            **({"first_round": self.first_round} if self.first_round is not None else {}),
        }

    def sentence(self, alpha: float) -> str:
        """Why the edit was kept or dropped, in words (commit messages, progress)."""
        counts = f"{self.up} val items better with it, {self.down} worse"
        p = significance.describe(self.p_value, alpha)
        if self.outcome == KEPT:
            return f"kept: {counts} ({p})"
        if self.outcome == HARMFUL:
            return f"dropped as harmful: {counts} ({p})"
        return f"dropped as a neutral passenger: {counts} ({p})"


def compare(
    evaluator: Evaluator,
    with_edit: str,
    without_edit: str,
    val: Sequence[TaskItem],
    *,
    metric: str,
    alphas: Sequence[float],
    chunk: int,
    early_stop: bool,
    edit: dict[str, Any],
    focus: Sequence[TaskItem] | None = None,
    first_round: int = 1,
    rounds: int | None = None,
    worse_round: int | None = None,
    lead: Collection[str] = (),
) -> EditTest:
    """Paired sign test of ``with_edit`` against ``without_edit`` on val (hard 0/1 outcomes),
    in one pass over val (a deterministic target). It stops early only when the decision is
    certain (curtailment).

    ``lead``: ids of the items where the edit's gain most likely is (the bundle's gate gained
    them). Then the items ``with_edit`` gets wrong (the only ones that can count against the
    edit) go first, the lead next, the rest last: once the first have run, an edit that earns
    its place is known as soon as its wins are significant, where it used to need every item
    (the items it gets wrong came last). The order never looks at ``without_edit``'s answers,
    and curtailment reaches the decision a full pass would, so the decision is the same in any
    order; only how many items a test ran (and the counts of one stopped early) depend on it.

    ``focus`` (a stochastic target): the test runs on these items only, with fresh draws for
    both versions in every round (from ``first_round`` on, past every round the gate ran: the
    candidate's answers there are the ones that passed it, a selection that would favour
    keeping every edit). ``worse_round``: ``without_edit`` is the current skill (the last edit
    standing's test), whose round ``r`` is its round ``worse_round + r`` (see ``more_rounds``)."""
    if focus is not None:
        n = len(alphas) if rounds is None else rounds
        return _fresh(
            evaluator,
            with_edit,
            without_edit,
            focus,
            metric=metric,
            alpha=math.fsum(alphas),  # the test's whole alpha (``significance.interim_looks``)
            rounds=n,
            edit=edit,
            val_size=len(val),
            first_round=first_round,
            worse_round=worse_round,
        )
    full = {r.item_id: r for r in evaluator.run(with_edit, val, "val")}
    scored = [it for it in val if full[it.id].ok]

    def right(it: TaskItem) -> bool:
        return full[it.id].value(metric) >= 1

    # Items the candidate gets right hold the evidence for the edit: they go first (with a
    # ``lead``, the ones it gets wrong first, then the lead, then the rest).
    if lead:
        ahead = set(lead)
        order = sorted(scored, key=lambda it: 0 if not right(it) else 1 if it.id in ahead else 2)
    else:
        order = sorted(scored, key=lambda it: 0 if right(it) else 1)
    alpha = alphas[0]
    up = down = done = 0
    size = max(1, chunk) if early_stop else max(1, len(order))
    early, keep = False, False
    for start in range(0, len(order), size):
        part = order[start : start + size]
        for it, r in zip(part, evaluator.run(without_edit, part, "val"), strict=True):
            if not r.ok:
                continue
            was, now = full[it.id].value(metric) >= 1, r.value(metric) >= 1
            up += was and not now
            down += now and not was
        done = start + len(part)
        rest = order[done:]
        can_up = sum(1 for it in rest if right(it))
        keep = significance.significant(significance.sign_test_p(up, down), alpha)
        if early_stop and rest:
            # The decision is already certain either way: stop.
            best = significance.sign_test_p(up + can_up, down)
            worst = significance.sign_test_p(up, down + len(rest) - can_up)
            if not significance.significant(best, alpha):
                early, keep = True, False
                break
            if significance.significant(worst, alpha):
                early, keep = True, True
                break
    p = significance.sign_test_p(up, down)
    outcome = KEPT if keep else (HARMFUL if down > up else NEUTRAL)
    gain = (up - down) / len(scored) if scored else None
    return EditTest(edit, up, down, len(scored), done, early, p, outcome, gain=gain)


def _fresh(
    evaluator: Evaluator,
    with_edit: str,
    without_edit: str,
    focus: Sequence[TaskItem],
    *,
    metric: str,
    alpha: float,
    rounds: int,
    edit: dict[str, Any],
    val_size: int,
    first_round: int,
    worse_round: int | None,
) -> EditTest:
    """``compare`` on ``focus`` with fresh draws: up to ``rounds`` rounds, the draws of rounds
    ``first_round``, ``first_round + 1``, ... (``worse_round``: see ``compare``).

    Round 1 runs on ``focus``; each later round only on the items the round before found
    discordant, either way. An edit acts on few items: there the two versions differ on most
    draws, elsewhere only by chance (two draws of the same answer distribution), so every round
    leaves a larger share of the items the edit acts on, and the next one costs fewer calls and
    carries less noise. The choice never looks at which side won an item, and each round's
    draws are fresh: under "no difference" every discordant pair of every round is still a fair
    coin, so the pooled sign test stays exact.

    Looks for significance (``significance.interim_looks``): after each round from the second
    on at a small share of ``alpha``, which ends the test of an edit that clearly acts, and
    after the last round at the rest. Futility (worse without the edit, or after a second
    round no better) also stops a test; it can turn a "significant" into a "no" but never the
    reverse, so it spends no alpha."""
    looks, last = significance.interim_looks(alpha, rounds)
    run = narrowing_rounds(
        evaluator,
        with_edit,
        without_edit,
        focus,
        metric=metric,
        rounds=rounds,
        round_of=lambda r: (
            first_round + r - 1,
            None if worse_round is None else worse_round + r,
        ),
        looks=looks,
    )
    p = significance.weighted_sign_test_p(run.by_round)
    keep = not run.futile and (run.won_early or significance.significant(p, last))
    outcome = KEPT if keep else (HARMFUL if run.down > run.up else NEUTRAL)
    # The gain from the first round (on every focus item; later rounds run on a chosen few):
    # net wins per val item, the val items outside the focus taken to gain nothing.
    first = run.first
    gain = (first[0] - first[1]) / val_size if val_size and first else None
    return EditTest(
        edit,
        run.up,
        run.down,
        len(focus),
        run.evaluated,
        run.won_early,
        p,
        outcome,
        run.done,
        gain,
        first_round,
    )


@dataclass
class Attribution:
    """What attribution made of a bundle: the edits kept, the tests, and (when it dropped any)
    the pruned candidate and its gate against the current skill."""

    bundle: Sequence[Any]  # the applied edits (skillvc.skill.edits.Edit), in selection order
    kept: list[Any]
    tests: list[EditTest]
    alpha: float
    bundle_result: Any  # the bundle's GateResult
    text: str = ""  # the pruned candidate's identity text
    document: Any = None  # its SkillDocument
    package: Any = None  # its SkillPackage (a package skill), else None
    result: Any = None  # the pruned candidate's GateResult

    @property
    def dropped(self) -> list[EditTest]:
        """The tests of the edits taken out (not the last edit standing's: when it loses its
        test, the pruned candidate is refused with it)."""
        kept = {e.id for e in self.kept}
        return [t for t in self.tests if t.outcome != KEPT and t.edit.get("id") not in kept]

    def last_refused(self) -> bool:
        """The last edit standing lost its own test (against the current skill)."""
        kept = {e.id for e in self.kept}
        return any(t.outcome != KEPT and t.edit.get("id") in kept for t in self.tests)

    def confirm(self, result: GateResult) -> GateResult:
        """The pruned candidate's gate, decided. When every kept edit won its own test (each
        significantly better than the candidate without it, on fresh draws), the pruned
        candidate is their sum less passengers that were not shown to help: its gate is a
        check that together they do no harm, so it is refused only when it did significantly
        worse than the current skill. Asking every kept edit to win a second test in a row
        (the pruned candidate's gain over the current skill on one pass over val, where an edit
        that acts on 3 of 60 items is lost in the noise of the other 57 about one time in
        three) is what threw good edits away with the passengers. An edit that had no test of
        its own (the last one standing on a deterministic target, or one another kept edit
        needs) still needs the gate's significance: that gate is its only test. ``result`` must
        be a full pass over val (no early stop)."""
        if result.decision == "accepted" or not self.kept_tested():
            return result
        up, down = result.counts
        if significance.significant(significance.sign_test_p(down, up), self.alpha):
            return result
        return dataclasses.replace(result, decision="accepted")

    def kept_tested(self) -> bool:
        """Every kept edit won its own test (none is the untested last one standing)."""
        ids = {t.edit.get("id") for t in self.tests if t.outcome == KEPT}
        return bool(self.kept) and all(e.id in ids for e in self.kept)

    def dropped_edits(self) -> list[dict[str, Any]]:
        """The dropped edits as the rejected buffer keeps them, with their evidence."""
        return [
            {
                **t.edit,
                "decision": "dropped",
                "dropped_as": t.outcome,
                "evidence": {"up": t.up, "down": t.down, "n": t.n, "p_value": t.p_value},
                # Not significantly worse without it: not enough for the edit, but no
                # evidence against it either (only a significant loss refutes it).
                "inconclusive": not significance.significant(
                    significance.sign_test_p(t.down, t.up), self.alpha
                ),
            }
            for t in self.dropped
        ]

    def payload(self) -> dict[str, Any]:
        bundle = self.bundle_result
        return {
            "alpha": self.alpha,
            "bundle": [e.id for e in self.bundle],
            "bundle_edits": [e.to_dict() for e in self.bundle],
            "kept": [e.id for e in self.kept],
            "tests": [t.to_dict() for t in self.tests],
            "bundle_gate": {
                "after": bundle.after,
                "p_value": bundle.p_value,
                "gained": bundle.gained,
                "lost": bundle.lost,
            },
        }
