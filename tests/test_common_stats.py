"""ragrouter.common.stats against the references: statsmodels' Wilson interval and exact
McNemar, scipy's bootstrap; the seeded bootstrap is deterministic; best_of says n.s. where a
9-query sample cannot separate two paradigms and names the leader where it can."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from ragrouter.common import stats


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (0, 9), (3, 9), (9, 9), (17, 40), (1, 1000), (500, 1000)])
def test_wilson_equals_statsmodels(k, n):
    lo, hi = stats.wilson_interval(k, n)
    ref_lo, ref_hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert lo == pytest.approx(ref_lo, abs=1e-12) and hi == pytest.approx(ref_hi, abs=1e-12)
    lo90, hi90 = stats.wilson_interval(k, n, alpha=0.1)
    ref90 = proportion_confint(k, n, alpha=0.1, method="wilson")
    assert (lo90, hi90) == pytest.approx(ref90, abs=1e-12)


def test_wilson_vectorised_and_z():
    k, n = np.array([0, 2, 5, 7]), np.array([3, 9, 9, 10])
    lo, hi = stats.wilson_interval(k, n)
    ref_lo, ref_hi = proportion_confint(k, n, method="wilson")
    assert np.allclose(lo, ref_lo) and np.allclose(hi, ref_hi)
    assert stats.Z95 == pytest.approx(sps.norm.ppf(0.975), abs=1e-15)
    assert all(np.isnan(stats.wilson_interval(0, 0)))


PAIRS = [
    ([1, 1, 1, 1, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0, 0]),
    ([1, 0, 1, 0, 1, 1, 0, 1, 1], [1, 1, 0, 0, 1, 0, 0, 1, 0]),
    ([1] * 30 + [0] * 10, [0] * 20 + [1] * 20),
    ([1, 1, 0], [1, 1, 0]),
]


@pytest.mark.parametrize("a,b", PAIRS)
def test_mcnemar_exact_equals_statsmodels(a, b):
    a, b = np.array(a), np.array(b)
    got = stats.mcnemar_exact(a, b)
    table = [[int(((a == 1) & (b == 1)).sum()), int(((a == 1) & (b == 0)).sum())],
             [int(((a == 0) & (b == 1)).sum()), int(((a == 0) & (b == 0)).sum())]]
    ref = mcnemar(table, exact=True)
    assert got.pvalue == pytest.approx(ref.pvalue, abs=1e-12)
    assert (got.b, got.c) == (table[0][1], table[1][0])


def test_mcnemar_drops_nan_pairs_and_rejects_non_binary():
    got = stats.mcnemar_exact([1, 1, np.nan, 0], [0, 0, 1, np.nan])
    assert (got.n, got.b, got.c) == (2, 2, 0)
    assert got.pvalue == pytest.approx(mcnemar([[0, 2], [0, 0]], exact=True).pvalue)
    with pytest.raises(ValueError, match="0/1"):
        stats.mcnemar_exact([2, 0], [0, 1])


def test_bootstrap_seeded_and_close_to_scipy():
    rng = np.random.default_rng(7)
    x = rng.lognormal(8, 0.5, size=60)
    y = x * 0.8 + rng.normal(0, 200, size=60)
    one = stats.paired_bootstrap(x, y, n_boot=4000, seed=3)
    assert one == stats.paired_bootstrap(x, y, n_boot=4000, seed=3)  # deterministic for a seed
    assert one.estimate == pytest.approx(float(np.mean(x - y)))
    ref = sps.bootstrap((x, y), lambda a, b, axis=-1: np.mean(a - b, axis=axis), paired=True, n_resamples=4000,
                        method="percentile", random_state=np.random.default_rng(3))
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert one.low == pytest.approx(ref.confidence_interval.low, abs=0.08 * width)
    assert one.high == pytest.approx(ref.confidence_interval.high, abs=0.08 * width)
    assert one.low > 0 and one.pvalue < 0.05  # x costs clearly more
    same = stats.paired_bootstrap(x, x, seed=1)
    assert same.estimate == 0 and same.pvalue == 1.0
    m = stats.bootstrap_mean_ci(x, n_boot=4000, seed=5)
    ref_m = sps.bootstrap((x,), np.mean, n_resamples=4000, method="percentile", random_state=np.random.default_rng(5))
    w = ref_m.confidence_interval.high - ref_m.confidence_interval.low
    assert m.low == pytest.approx(ref_m.confidence_interval.low, abs=0.08 * w)
    assert m.high == pytest.approx(ref_m.confidence_interval.high, abs=0.08 * w)


def test_best_of_nine_queries_is_not_significant_and_forty_is():
    # 9 queries: 6/9 vs 4/9 correct -> exact McNemar p = 0.5 (b=3, c=1): n.s.
    nine = {"graph": dict(enumerate([1, 1, 1, 1, 1, 1, 0, 0, 0])), "naive": dict(enumerate([1, 1, 1, 0, 0, 0, 1, 0, 0]))}
    best = stats.best_of(nine)
    assert best.leader == "graph" and not best.significant
    assert best.test.pvalue == pytest.approx(mcnemar([[3, 3], [1, 2]], exact=True).pvalue)
    assert best.label().startswith("n.s.")
    # 40 queries: 30 vs 12 correct on the same queries, 18 discordant in one direction.
    a = [1] * 30 + [0] * 10
    b = [1] * 12 + [0] * 28
    forty = {"naive": dict(enumerate(b)), "hybrid": dict(enumerate(a))}
    best = stats.best_of(forty)
    assert best.leader == "hybrid" and best.significant and best.label().startswith("hybrid (p=")
    tie = stats.best_of({"a": {0: 1, 1: 0}, "b": {0: 0, 1: 1}})
    assert not tie.significant
