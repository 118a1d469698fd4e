"""How sure a gain is: the exact sign test on paired outcomes, its curtailed sequential form, and
the words every view uses for it.

The test. Two skill versions run on the same val items; an item is *discordant* when one is
right and the other wrong (hard scores, one sample). Under "no difference" each discordant
item is equally likely to favour either side, so the number favouring the candidate is
Binomial(discordant, 1/2): the one-sided p-value of ``up`` wins out of ``up + down`` is
P(X >= up) (the exact McNemar test). Concordant items carry no information about the difference
and do not enter it.

Sequential use. The gate and the attribution of a bundle evaluate items chunk by chunk. After
each chunk the decision a full evaluation would reach may already be certain: "significant"
is out of reach when even every remaining item turning discordant in the candidate's favour
would leave p above alpha (``sign_test_p(up + can_up, down) > alpha``: futile), and it is
certain when every remaining item turning against it would still leave p at most alpha
(``sign_test_p(up, down + can_down) <= alpha``). Stopping only then (curtailment) keeps early
stopping exact: the decision is the one the full evaluation reaches, and no alpha is spent on
looks. What the stop saves is calls, never correctness.

More rounds. On a stochastic target (``[target] temperature`` > 0) a gate that one pass over
val leaves undecided (more wins than losses, not significant) runs more rounds of fresh draws,
and an attribution test runs in fresh rounds from the start; each round after the first only on
the items the round before found discordant, either way (``evaluate.more_rounds``,
``attribution._fresh``), and the rounds are judged together by the round-weighted sign test
(``weighted_sign_test_p``: round r's discordant items count r times). Under "no difference"
every fresh pair is still equally likely to favour either side, whichever items were chosen
without looking at the side, so the test stays exact. The gate's first pass
is a look at ``look_alphas``'s first alpha; the extra rounds take one look, at their end, at
the alpha left; an attribution test takes one look at the whole alpha. Before those looks a
test stops only for futility, which spends nothing. ``[train] gate_rounds`` sets the rounds. A
deterministic target would give the same answers again, which is why it gets one round only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

# The alpha a gain is judged at where the gate recorded none (the paper's bundle gate, which
# accepts any strict gain): ``report``'s threshold for "not significant".
REVIEW_ALPHA = 0.1

SIGNIFICANT = "significant"
WITHIN_NOISE = "within noise"
UNTESTED = "not tested"


def sign_test_p(up: int, down: int) -> float:
    """One-sided exact p-value of ``up`` wins and ``down`` losses under "no difference".

    ``sign_test_p(3, 0) == 0.125``; ``sign_test_p(0, 0) == 1.0`` (no evidence at all).
    """
    if up < 0 or down < 0:
        raise ValueError("counts of discordant items are never negative")
    n = up + down
    if n == 0 or up == 0:
        return 1.0
    return math.fsum(math.comb(n, k) for k in range(up, n + 1)) / 2**n


def weighted_sign_test_p(rounds: Sequence[tuple[int, int]]) -> float:
    """One-sided exact p-value of rounds of paired draws, round ``r`` (from 1) weighing ``r``.

    ``rounds``: each round's (wins, losses). The statistic is the sum over rounds of ``r`` x
    (wins - losses). Under "no difference" every discordant pair of every round is a fair coin
    (see the module's docstring), so the statistic's law is that of the sum of ``r`` x
    (2 Binomial(n_r, 1/2) - n_r): computed exactly here, by convolution. Later rounds run on
    the items the earlier ones found discordant, where an edit acts (a good one wins there
    round after round, chance does not), so they weigh more: the weights are fixed before any
    draw, which keeps the test exact. One round is the plain sign test.

    ``weighted_sign_test_p([(3, 0)]) == sign_test_p(3, 0)``.
    """
    if any(up < 0 or down < 0 for up, down in rounds):
        raise ValueError("counts of discordant items are never negative")
    if len(rounds) == 1:
        return sign_test_p(*rounds[0])
    # law[t]: the probability that the wins, weighted, sum to t (the statistic is increasing
    # in that sum for fixed counts).
    law = [1.0]
    for r, (up, down) in enumerate(rounds, start=1):
        n = up + down
        step = [math.comb(n, k) / 2**n for k in range(n + 1)]
        out = [0.0] * (len(law) + r * n)
        for t, p in enumerate(law):
            if p:
                for k, q in enumerate(step):
                    out[t + r * k] += p * q
        law = out
    observed = sum(r * up for r, (up, _) in enumerate(rounds, start=1))
    if observed == 0:
        return 1.0
    return min(1.0, math.fsum(law[observed:]))


def significant(p_value: float | None, alpha: float) -> bool:
    """True when ``p_value`` is at most ``alpha`` (with a tolerance for float sums)."""
    return p_value is not None and p_value <= alpha + 1e-12


def verdict(p_value: float | None, alpha: float) -> str:
    """The plain words for a p-value: "significant", "within noise" or "not tested"."""
    if p_value is None:
        return UNTESTED
    return SIGNIFICANT if significant(p_value, alpha) else WITHIN_NOISE


def describe(p_value: float | None, alpha: float) -> str:
    """``p = 0.125, within noise`` (or ``not tested``): how every view shows a gain's p."""
    if p_value is None:
        return UNTESTED
    return f"p = {p_value:.3g}, {verdict(p_value, alpha)}"


def shown_alpha(alpha: float) -> float:
    """``alpha`` as views show and ``--json`` gives it: 1 - 0.8 is 0.19999999999999996 in
    floats, which no one set; rounding to 10 places gives back the 0.2 they did."""
    return round(float(alpha), 10)


def stated(p_value: float | None, alpha: float) -> str:
    """``p = 0.109, significant (alpha 0.2)``: a gain's verdict with the alpha it was judged at,
    as every review surface states it (``train``'s summary, ``log``, ``show``, ``blame``,
    ``report`` in Markdown and HTML, ``check``); ``--json`` gives the same as ``verdict`` and
    ``alpha`` keys. ``not tested`` when there is no p-value."""
    if p_value is None:
        return UNTESTED
    return f"{describe(p_value, alpha)} (alpha {shown_alpha(alpha):.3g})"


INTERIM_SHARE = 0.2  # of alpha, spent on the looks before the last (Bonferroni)


def look_alphas(alpha: float, rounds: int) -> list[float]:
    """The alpha of each look of a test that may run up to ``rounds`` rounds of val.

    One round: ``[alpha]``. More: the looks before the last share ``INTERIM_SHARE`` of alpha
    and the last gets the rest, so by Bonferroni the chance of calling a no-difference change
    significant at any look is at most alpha. Stopping for futility (no more wins than losses)
    spends nothing: it can only turn a "significant" into a "no".
    """
    if rounds <= 1:
        return [alpha]
    interim = alpha * INTERIM_SHARE / (rounds - 1)
    return [interim] * (rounds - 1) + [alpha * (1 - INTERIM_SHARE)]


# An attribution test on a stochastic target decides at this share of the gate's alpha (0.075
# of 0.1): a bundle that its first pass leaves undecided meets a test per edit instead of more
# rounds of one gate, so a run meets more tests of edits that change nothing. Measured on the
# noisy simulator (docs/gains.md): at the gate's whole alpha those tests kept 8 neutral lines
# in 20 final skills, at half of it 4. Once a refuted edit stays held back across epochs that
# changed the skill (fewer second chances for an edit that changes nothing), three quarters
# kept 11 neutral lines in 80 final skills at temperature 0.8 against 10 at half, with 45
# fewer requests a run (an edit that acts wins an interim look sooner), for the same accuracy.
TEST_SHARE = 0.75

EARLY_SHARE = 0.1  # of an attribution test's alpha, spent on its interim looks (Bonferroni)


def interim_looks(alpha: float, rounds: int) -> tuple[dict[int, float], float]:
    """The looks of an attribution test that may run up to ``rounds`` rounds of fresh draws:
    (round -> alpha of the look after it, the last round's alpha).

    The rounds from the second to the one before the last each take a look at an equal share
    of ``EARLY_SHARE`` of alpha (0.0025 each at alpha 0.1 and 6 rounds), and the last round
    gets the rest (0.09): by Bonferroni the chance of calling a no-difference edit significant
    at any look is at most alpha. An edit that acts shows it within two or three rounds
    (p < 0.001); a look there ends its test, where the last rounds on its few items would
    only confirm it. The first round (all the focus items, most of them noise) takes no look."""
    interim = list(range(2, rounds))
    if not interim:
        return {}, alpha
    share = alpha * EARLY_SHARE / len(interim)
    return {r: share for r in interim}, alpha * (1 - EARLY_SHARE)


def decision_alpha(alphas: Sequence[float]) -> float:
    """The alpha a test with these looks (``look_alphas``) decides at, as its verdict is shown:
    its only look's; with more, the last look's, which takes what the first look left (a
    first-look acceptance, within the first alpha, meets it too)."""
    return math.fsum(alphas[1:]) if len(alphas) > 1 else alphas[0]


def wins_needed(alpha: float) -> int:
    """The fewest discordant items, all in the candidate's favour, that reach p <= alpha."""
    k = 1
    while not significant(sign_test_p(k, 0), alpha):
        k += 1
    return k


def smallest_detectable_gain(n: int, alpha: float) -> float | None:
    """The smallest gain in accuracy (a share of ``n`` val items) the sign test can call
    significant at ``alpha``: ``wins_needed`` items flipping up and none down. None when ``n``
    is too small for any change to be significant."""
    k = wins_needed(alpha)
    return None if n < k else k / n


DEFAULT_CONFIDENCE = 0.8  # the gate's with attribution on, one pass: one-sided alpha 0.2
# With attribution on a stochastic target, whose tests run rounds of fresh draws weighted
# toward the items an edit acts on (``weighted_sign_test_p``): one-sided alpha 0.1. The rounds
# give the tests the power to afford it, and a run meets many tests of edits that change
# nothing (courteous lines, restated rules), each a chance of a false "significant".
ROUNDS_CONFIDENCE = 0.9


def effective_confidence(t: Any, *, rounds: bool = False) -> float:
    """``[train] gate_confidence`` as the gate uses it (unset: by ``attribution``, and by
    ``rounds``: whether the tests run rounds of fresh draws, ``tests_in_rounds``)."""
    if t.gate_confidence is not None:
        return float(t.gate_confidence)
    if not t.attribution:
        return 0.0
    return ROUNDS_CONFIDENCE if rounds else DEFAULT_CONFIDENCE


def tests_in_rounds(config: Any) -> bool:
    """Whether a run's gate and attribution tests run rounds of fresh draws: attribution on the
    hard metric, with a stochastic target (``[target] temperature`` > 0) sampled once a call
    (``samples`` = 1). A deterministic target would give the same answers again."""
    t = config.train
    stochastic = config.target.temperature > 0 and t.samples == 1
    return bool(stochastic and t.attribution and t.gate_metric == "hard")


def alpha_of(confidence: float) -> float:
    """The one-sided alpha of a confidence setting (0.8 -> 0.2)."""
    return max(0.0, 1.0 - confidence)


def gate_alpha(config: Any, *, rounds: bool | None = None) -> float:
    """The alpha a gate judges gains at, and every view states them at: ``[train]
    gate_confidence`` (unset: by ``attribution`` and ``rounds``), or ``REVIEW_ALPHA`` where
    that confidence is 0. The one rule of the body gate's shown verdicts (with ``attribution =
    false`` its decision takes any strict gain, its gains are stated at ``REVIEW_ALPHA``), of
    ``check`` on a skill and on a library's routing, and of the routing gate (which tests at it
    whatever ``attribution`` says: a test at alpha 1 would be none). ``rounds``: whether the
    gate's tests run rounds of fresh draws (None: ``tests_in_rounds(config)``, the body gate's;
    the routing gate runs one pass)."""
    in_rounds = tests_in_rounds(config) if rounds is None else rounds
    confidence = effective_confidence(config.train, rounds=in_rounds)
    return alpha_of(confidence) if confidence > 0 else REVIEW_ALPHA
