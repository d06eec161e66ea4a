"""The statistics of an evaluation report: bootstrap intervals, paired tests, Holm's correction.

Intervals and tests come from SciPy (``scipy.stats.bootstrap`` with percentile intervals,
``scipy.stats.permutation_test`` over sign flips of paired differences, exact when the pairs
are few). SciPy has no Holm step-down correction, so :func:`holm` is written here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

#: Resamples of the bootstrap and of the permutation test (when it is not exact).
RESAMPLES = 10_000


@dataclass(frozen=True)
class Interval:
    """A mean with its confidence interval (NaN bounds when there are fewer than two values)."""

    mean: float
    low: float
    high: float
    n: int

    def text(self, percent: bool = True) -> str:
        """``mean [low, high]``, in percent by default."""
        scale, unit = (100.0, "%") if percent else (1.0, "")
        if self.n == 0:
            return "-"
        if math.isnan(self.low):
            return f"{self.mean * scale:.1f}{unit}"
        return (f"{self.mean * scale:.1f}{unit} [{self.low * scale:.1f}, "
                f"{self.high * scale:.1f}]")


def bootstrap_interval(values: Sequence[float], *, confidence: float = 0.95,
                       seed: int = 0) -> Interval:
    """The mean of ``values`` with a percentile bootstrap interval.

    Raises:
        ValueError: a value is not finite, or ``confidence`` is not in (0, 1).
    """
    data = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(data)):
        raise ValueError("bootstrap_interval needs finite values")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if data.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    if data.size < 2:
        return Interval(float(data.mean()), math.nan, math.nan, int(data.size))
    if np.all(data == data[0]):
        return Interval(float(data[0]), float(data[0]), float(data[0]), int(data.size))
    result = stats.bootstrap((data,), np.mean, confidence_level=confidence,
                             n_resamples=RESAMPLES, method="percentile",
                             rng=np.random.default_rng(seed))
    ci = result.confidence_interval
    return Interval(float(data.mean()), float(ci.low), float(ci.high), int(data.size))


def paired_p_value(first: Sequence[float], second: Sequence[float], *, seed: int = 0) -> float:
    """Two-sided p-value that paired values differ in mean: a sign-flip permutation test of
    the differences (1.0 when every difference is zero or there is a single pair).

    Raises:
        ValueError: the sequences differ in length, are empty, or hold non-finite values.
    """
    a = np.asarray(first, dtype=np.float64)
    b = np.asarray(second, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"paired values must be two equal, non-empty lists; got {a.shape} "
                         f"and {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("paired values must be finite")
    if np.all(a == b) or a.size < 2:
        return 1.0  # one pair: both signs of its difference are as extreme as the one seen
    result = stats.permutation_test(
        (a, b), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples",
        vectorized=True, n_resamples=RESAMPLES, alternative="two-sided",
        rng=np.random.default_rng(seed))
    return float(min(1.0, result.pvalue))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``p_values`` (same order; family-wise error control).

    Raises:
        ValueError: a p-value outside [0, 1].
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.size and (np.any(~np.isfinite(p)) or p.min() < 0.0 or p.max() > 1.0):
        raise ValueError("p-values must lie in [0, 1]")
    order = np.argsort(p, kind="stable")
    adjusted = np.empty_like(p)
    running = 0.0
    m = p.size
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return [float(v) for v in adjusted]
