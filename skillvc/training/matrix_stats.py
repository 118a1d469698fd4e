"""Small exact statistics for paired outcomes and agreement rates (no SciPy needed).

* ``wilson``: the Wilson score interval of a proportion (good at small n and near 0 or 1).
* ``sign_test``: the exact one-sided sign test on paired differences (McNemar's exact test when
  the outcomes are 0/1): the probability of at most ``better`` improvements among the
  ``better + worse`` items that changed, if a change were as likely to help as to hurt.
* ``mean_interval``: a mean's interval: Wilson for 0/1 values, else mean +- z * stderr.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of ``successes / n``; None when n is 0."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def binomial_tail(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), exactly."""
    if n <= 0:
        return 1.0
    return min(1.0, math.fsum(math.comb(n, i) for i in range(0, k + 1)) / 2**n)


def sign_test(diffs: Sequence[float], eps: float = 1e-9) -> tuple[int, int, float]:
    """(better, worse, p): the one-sided exact sign test that the change hurts; ties are left
    out. ``p`` is small when many more items got worse than better."""
    better = sum(1 for d in diffs if d > eps)
    worse = sum(1 for d in diffs if d < -eps)
    return better, worse, binomial_tail(better, better + worse)


def mean_interval(values: Sequence[float], z: float = Z95) -> tuple[float, float] | None:
    """A 95% interval of the mean of ``values`` (Wilson when every value is 0 or 1)."""
    n = len(values)
    if n == 0:
        return None
    if all(v in (0.0, 1.0) for v in values):
        return wilson(int(sum(values)), n, z)
    m = math.fsum(values) / n
    if n < 2:
        return (m, m)
    sd = math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1))
    half = z * sd / math.sqrt(n)
    return max(0.0, m - half), min(1.0, m + half)


def cohen_kappa(pairs: Sequence[tuple[int, int]]) -> float | None:
    """Cohen's kappa of two raters' 0/1 labels; None without pairs, 1.0 when both raters
    give one label throughout and agree (chance agreement 1)."""
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(1 for a, b in pairs if a == b) / n
    pa = sum(a for a, _ in pairs) / n
    pb = sum(b for _, b in pairs) / n
    chance = pa * pb + (1 - pa) * (1 - pb)
    if chance >= 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return (observed - chance) / (1 - chance)
