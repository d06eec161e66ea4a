"""Bootstrap intervals, paired permutation tests and Holm's correction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mimir.evaluation.stats import bootstrap_interval, holm, paired_p_value


def test_interval_holds_the_mean_and_narrows_with_more_layouts() -> None:
    rng = np.random.default_rng(3)
    few = rng.choice([0.0, 0.5, 1.0], size=10)
    many = rng.choice([0.0, 0.5, 1.0], size=200)
    small, large = bootstrap_interval(few), bootstrap_interval(many)
    for got, data in ((small, few), (large, many)):
        assert got.low <= got.mean <= got.high
        assert got.mean == pytest.approx(float(np.mean(data)))
    assert large.high - large.low < small.high - small.low


def test_degenerate_samples() -> None:
    same = bootstrap_interval([1.0, 1.0, 1.0])
    assert (same.mean, same.low, same.high) == (1.0, 1.0, 1.0)
    one = bootstrap_interval([0.5])
    assert one.mean == 0.5 and math.isnan(one.low) and one.text() == "50.0%"
    assert bootstrap_interval([]).n == 0 and bootstrap_interval([]).text() == "-"


@pytest.mark.parametrize("values", [[0.5, math.nan], [math.inf, 1.0]])
def test_non_finite_values_are_refused(values: list[float]) -> None:
    with pytest.raises(ValueError, match="finite"):
        bootstrap_interval(values)


def test_paired_test_is_exact_for_few_pairs() -> None:
    # six pairs, all in favour of the first: 2 of the 64 sign patterns are as extreme
    assert paired_p_value([1.0] * 6, [0.0] * 6) == pytest.approx(2 / 64)
    assert paired_p_value([0.5, 1.0, 0.0], [0.5, 1.0, 0.0]) == 1.0
    assert paired_p_value([1.0], [0.0]) == 1.0  # a single pair proves nothing
    # a mixed difference is far from significant
    assert paired_p_value([1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]) > 0.5


@pytest.mark.parametrize(("a", "b"), [([1.0], [1.0, 0.0]), ([], []), ([math.nan], [1.0])])
def test_paired_test_refuses_bad_pairs(a: list[float], b: list[float]) -> None:
    with pytest.raises(ValueError, match="paired"):
        paired_p_value(a, b)


def test_holm_steps_down_and_stays_monotone() -> None:
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([0.2, 0.9]) == pytest.approx([0.4, 0.9])
    assert holm([]) == []


@pytest.mark.parametrize("bad", [[1.5], [-0.1], [math.nan]])
def test_holm_refuses_values_that_are_no_p_values(bad: list[float]) -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm(bad)
