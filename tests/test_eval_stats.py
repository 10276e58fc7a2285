"""Wilson intervals, the unbiased pass^k estimator and the naive p̄^k."""

import math

import pytest

from toolkit.eval.stats import chain_bound, pass_hat_k, pass_k_table, wilson


def test_wilson_known_values_and_edges():
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-4)
    lo, hi = wilson(50, 100)
    assert (lo, hi) == (pytest.approx(0.4038, abs=1e-4), pytest.approx(0.5962, abs=1e-4))
    assert wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(11, 10)


def test_pass_hat_k_is_unbiased_for_p_to_the_k():
    # E over c ~ Binomial(n, p) of C(c,k)/C(n,k) equals p^k exactly
    n, p = 8, 0.7
    for k in range(1, n + 1):
        e = sum(math.comb(n, c) * p**c * (1 - p) ** (n - c) * pass_hat_k(n, c, k) for c in range(n + 1))
        assert e == pytest.approx(p**k, rel=1e-12)


def test_pass_hat_k_edges():
    assert pass_hat_k(8, 8, 8) == 1.0 and pass_hat_k(8, 3, 4) == 0.0 and pass_hat_k(8, 4, 1) == 0.5
    with pytest.raises(ValueError):
        pass_hat_k(8, 9, 1)
    with pytest.raises(ValueError):
        pass_hat_k(8, 4, 9)


def test_mixed_difficulty_makes_pass_k_exceed_naive():
    # half the tasks always work, half never: p̄ = 0.5, p̄^k halves each k, but pass^k stays 0.5
    rows = pass_k_table([(8, 8)] * 5 + [(8, 0)] * 5, range(1, 9))
    assert rows[0]["pass_hat_k"] == pytest.approx(0.5) and rows[0]["naive"] == pytest.approx(0.5)
    assert rows[-1]["pass_hat_k"] == pytest.approx(0.5) and rows[-1]["naive"] == pytest.approx(0.5**8)
    # equal tasks: the two agree in expectation; with c = n·p exactly they still differ (without replacement)
    same = pass_k_table([(8, 4)] * 10, [2])[0]
    assert same["pass_hat_k"] < same["naive"]


def test_chain_bound():
    assert chain_bound([0.95] * 20) == pytest.approx(0.3585, abs=1e-4)  # §14.5.4: 35.8% over 20 steps
    assert chain_bound([]) == 1.0
