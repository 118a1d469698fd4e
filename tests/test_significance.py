"""The statistics of honest gains (training/significance.py) against exact values, and the
simulator's stochastic mode (simworld): exact true accuracy, draws keyed by the call."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from skillvc.models import simworld
from skillvc.models.backends.base import CallRequest
from skillvc.models.backends.sim import SimBackend
from skillvc.training import significance as sig


def test_sign_test_p_matches_the_binomial_tail() -> None:
    assert sig.sign_test_p(3, 0) == 0.125
    assert sig.sign_test_p(5, 0) == 0.03125
    assert sig.sign_test_p(1, 0) == 0.5
    # P(X >= 8 | n = 10, 1/2) = (45 + 10 + 1) / 1024
    assert sig.sign_test_p(8, 2) == 56 / 1024
    assert sig.sign_test_p(11, 0) == 1 / 2048
    assert sig.sign_test_p(0, 0) == 1.0
    assert sig.sign_test_p(0, 4) == 1.0
    assert sig.sign_test_p(2, 2) == 11 / 16
    # The demo's fluff: one item up, nothing down.
    assert sig.sign_test_p(1, 0) == 0.5
    for up in range(12):
        for down in range(12):
            exact = Fraction(
                sum(math.comb(up + down, k) for k in range(up, up + down + 1)), 2 ** (up + down)
            )
            expected = 1.0 if up == 0 else float(exact)
            assert sig.sign_test_p(up, down) == pytest.approx(expected, abs=1e-15)
    with pytest.raises(ValueError):
        sig.sign_test_p(-1, 2)


def _weighted_tail(rounds: list[tuple[int, int]]) -> Fraction:
    """The weighted statistic's tail by brute force: every way the discordant pairs could
    have fallen, each as likely."""
    pairs = [r for r, (up, down) in enumerate(rounds, start=1) for _ in range(up + down)]
    observed = sum(r * up for r, (up, _) in enumerate(rounds, start=1))
    hits = sum(
        1
        for signs in range(2 ** len(pairs))
        if sum(w for i, w in enumerate(pairs) if signs >> i & 1) >= observed
    )
    return Fraction(hits, 2 ** len(pairs))


def test_weighted_sign_test_is_exact_and_one_round_is_the_sign_test() -> None:
    for up in range(6):
        for down in range(6):
            assert sig.weighted_sign_test_p([(up, down)]) == sig.sign_test_p(up, down)
    for rounds in ([(2, 1), (1, 0)], [(3, 3), (2, 1), (1, 0)], [(0, 2), (2, 0)], [(4, 2), (0, 0)]):
        assert sig.weighted_sign_test_p(rounds) == pytest.approx(float(_weighted_tail(rounds)))
    assert sig.weighted_sign_test_p([(0, 0), (0, 0)]) == 1.0
    # Later rounds weigh more: wins there count for more than the same wins in the first.
    assert sig.weighted_sign_test_p([(5, 5), (3, 0)]) < sig.sign_test_p(8, 5)
    assert sig.weighted_sign_test_p([(8, 5), (0, 0)]) == pytest.approx(sig.sign_test_p(8, 5))
    with pytest.raises(ValueError):
        sig.weighted_sign_test_p([(1, 0), (-1, 0)])


def test_verdicts_and_the_smallest_detectable_gain() -> None:
    assert sig.verdict(0.03, 0.05) == "significant"
    assert sig.verdict(0.05, 0.05) == "significant"  # at alpha is significant
    assert sig.verdict(0.125, 0.05) == "within noise"
    assert sig.verdict(None, 0.05) == "not tested"
    assert sig.describe(0.125, 0.2) == "p = 0.125, significant"
    assert sig.wins_needed(0.05) == 5  # 1/32 <= 0.05 < 1/16
    assert sig.wins_needed(0.2) == 3  # 1/8
    assert sig.wins_needed(0.1) == 4
    assert sig.smallest_detectable_gain(3, 0.05) is None  # the 3-item val
    assert sig.smallest_detectable_gain(30, 0.2) == 0.1
    assert sig.smallest_detectable_gain(40, 0.05) == 0.125
    assert sig.alpha_of(0.8) == pytest.approx(0.2)


def test_look_alphas_spend_at_most_alpha() -> None:
    assert sig.look_alphas(0.2, 1) == [0.2]
    looks = sig.look_alphas(0.2, 5)
    assert len(looks) == 5
    assert sum(looks) == pytest.approx(0.2)
    assert looks[-1] == pytest.approx(0.16)
    assert looks[0] == pytest.approx(0.01)


def test_an_attribution_tests_interim_looks_spend_a_tenth_of_its_alpha() -> None:
    looks, last = sig.interim_looks(0.1, 6)
    # After rounds 2 to 5 (not the first, on every focus item), 0.0025 each; 0.09 at the end.
    assert sorted(looks) == [2, 3, 4, 5]
    assert all(a == pytest.approx(0.0025) for a in looks.values())
    assert last == pytest.approx(0.09)
    assert sum(looks.values()) + last == pytest.approx(0.1)  # Bonferroni: at most alpha
    assert sig.interim_looks(0.1, 2) == ({}, 0.1)  # no round between the first and the last


def test_effective_confidence_follows_attribution() -> None:
    class Train:
        gate_confidence: float | None = None
        attribution = True

    t = Train()
    assert sig.effective_confidence(t) == sig.DEFAULT_CONFIDENCE == 0.8
    # Tests in rounds of fresh draws (a stochastic target) afford alpha 0.1.
    assert sig.effective_confidence(t, rounds=True) == sig.ROUNDS_CONFIDENCE == 0.9
    t.attribution = False
    assert sig.effective_confidence(t) == 0.0  # the paper's gate: any strict gain
    assert sig.effective_confidence(t, rounds=True) == 0.0
    t.gate_confidence = 0.85
    assert sig.effective_confidence(t) == sig.effective_confidence(t, rounds=True) == 0.85


def test_true_accuracy_is_exact_and_rule_effects_have_their_sign() -> None:
    t = 0.8
    error = simworld.error_rate(t)
    assert error == pytest.approx(0.2)
    best = "\n".join(r.text for r in simworld.GOOD)
    assert simworld.true_accuracy(best, t) == pytest.approx(1 - error)
    assert simworld.best_reachable(t) == pytest.approx(0.8)
    effects = simworld.rule_effects(t, best)
    for rule in simworld.REDUNDANT:
        assert effects[rule.key] == 0.0  # neutral: exactly no effect
    for rule in simworld.HARMFUL:
        assert effects[rule.key] < -0.05
    empty = simworld.rule_effects(t)
    for rule in simworld.GOOD:
        assert empty[rule.key] > 0.04
    assert simworld.line_kinds(best + "\n- Thank the customer for their patience.") == {
        "good": len(simworld.GOOD),
        "harmful": 0,
        "redundant": 1,
    }


def _target(skill: str, task: str, temperature: float, sample: int = 0) -> str:
    request = CallRequest(
        role="target",
        model="sim:support",
        messages=({"role": "system", "content": skill}, {"role": "user", "content": task}),
        params={"temperature": temperature},
        sample=sample,
    )
    return SimBackend("sim:support").complete(request).text


def test_stochastic_answers_are_keyed_by_the_call_and_right_as_often_as_predicted() -> None:
    skill = "\n".join(r.text for r in simworld.GOOD)
    items = simworld.generate_items(300, 5)
    t = 0.8
    # The same call gives the same answer (the log's cache stays exact); samples differ.
    first = [_target(skill, str(it["input"]), t) for it in items[:20]]
    assert first == [_target(skill, str(it["input"]), t) for it in items[:20]]
    answers = [
        simworld.final_answer(_target(skill, str(it["input"]), t, sample=k))
        for it in items
        for k in range(3)
    ]
    expected = [it["target"] for it in items for _ in range(3)]
    right = sum(a == e for a, e in zip(answers, expected, strict=True))
    rate = right / len(answers)
    assert abs(rate - simworld.true_accuracy(skill, t)) < 0.05  # 900 draws: sd 0.013
    # Temperature 0 keeps the deterministic world of the demo.
    assert _target(skill, str(items[0]["input"]), 0.0) == simworld.answer(
        skill, str(items[0]["input"]), salt="sim:support|0"
    )
