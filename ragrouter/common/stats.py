"""How sure each number is: intervals and paired tests shared by the views, the report and routers.

* :func:`wilson_interval` — the 95 % Wilson score interval of a proportion ``k / n``; the SQL
  views (``v_accuracy_by_type``, ``v_judgment_breakdown``) compute the same formula with
  :data:`Z95` (tests prove both equal to ``statsmodels`` ``proportion_confint(method="wilson")``).
* :func:`mcnemar_exact` — the exact McNemar test of two paired 0/1 outcome vectors on the same
  queries (e.g. router vs. best-fixed, router vs. oracle, paradigm vs. runner-up); equal to
  ``statsmodels.stats.contingency_tables.mcnemar(table, exact=True)``.
* :func:`bootstrap_mean_ci` / :func:`paired_bootstrap` — a seeded percentile bootstrap for a mean
  (e.g. tokens per query) and for the mean paired difference of two cost vectors, with a
  two-sided bootstrap p-value; deterministic for a seed.
* :func:`best_of` — which of several paired outcome vectors is best, and whether that is
  significant (exact McNemar of the leader against the runner-up, on the queries both ran);
  the report writes the leader only when ``significant`` and "n.s." otherwise.

All functions take plain sequences / numpy arrays and return floats, so any module can import
them without pulling in the store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

Z95 = 1.959963984540054
"""``scipy.stats.norm.ppf(0.975)``: the z of a two-sided 95 % interval (also used in the SQL views)."""
ALPHA = 0.05
DEFAULT_BOOT = 2000
DEFAULT_SEED = 0


def _z(alpha: float) -> float:
    if alpha == ALPHA:
        return Z95
    from scipy.stats import norm

    return float(norm.ppf(1.0 - alpha / 2.0))


def wilson_interval(k, n, alpha: float = ALPHA):
    """The Wilson score interval ``(low, high)`` of ``k`` successes out of ``n`` (fractions in
    [0, 1]); scalars give floats, arrays give arrays; ``n = 0`` gives NaN."""
    k_arr = np.asarray(k, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    z = _z(alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k_arr / n_arr
        denom = 1.0 + z * z / n_arr
        center = (p + z * z / (2.0 * n_arr)) / denom
        half = z * np.sqrt(p * (1.0 - p) / n_arr + z * z / (4.0 * n_arr * n_arr)) / denom
        low, high = center - half, center + half
    low = np.where(n_arr > 0, np.clip(low, 0.0, 1.0), np.nan)
    high = np.where(n_arr > 0, np.clip(high, 0.0, 1.0), np.nan)
    if low.ndim == 0:
        return float(low), float(high)
    return low, high


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar on paired 0/1 outcomes: ``b`` = a right & b wrong, ``c`` = a wrong & b right."""

    n: int
    b: int
    c: int
    pvalue: float

    @property
    def significant(self) -> bool:
        return self.pvalue < ALPHA


def _paired(a: Sequence, b: Sequence) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired outcomes must be two vectors of one length (got {x.shape} and {y.shape})")
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep]


def mcnemar_exact(a: Sequence, b: Sequence) -> McNemar:
    """Exact (binomial) McNemar test of paired 0/1 outcomes ``a`` and ``b`` (NaN pairs dropped).

    p = min(1, 2 · BinomCDF(min(b, c); b + c, ½)); p = 1 when no pair disagrees."""
    from scipy.stats import binom

    x, y = _paired(a, b)
    if not np.isin(x, (0.0, 1.0)).all() or not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("mcnemar_exact: outcomes must be 0/1")
    bb = int(((x == 1) & (y == 0)).sum())
    cc = int(((x == 0) & (y == 1)).sum())
    m = bb + cc
    p = 1.0 if m == 0 else float(min(1.0, 2.0 * binom.cdf(min(bb, cc), m, 0.5)))
    return McNemar(n=int(len(x)), b=bb, c=cc, pvalue=p)


@dataclass(frozen=True)
class BootstrapCI:
    """A statistic with its seeded percentile-bootstrap interval (and a two-sided p for a
    paired difference against 0; NaN for a plain mean)."""

    estimate: float
    low: float
    high: float
    pvalue: float
    n: int
    n_boot: int
    seed: int

    @property
    def significant(self) -> bool:
        return self.pvalue < ALPHA


def bootstrap_mean_ci(x: Sequence, n_boot: int = DEFAULT_BOOT, seed: int = DEFAULT_SEED,
                      alpha: float = ALPHA) -> BootstrapCI:
    """Percentile bootstrap interval of the mean of ``x`` (NaN dropped), seeded."""
    v = np.asarray(x, dtype=float)
    v = v[~np.isnan(v)]
    if len(v) == 0:
        return BootstrapCI(math.nan, math.nan, math.nan, math.nan, 0, n_boot, seed)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(v), size=(n_boot, len(v)))
    means = v[idx].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return BootstrapCI(float(v.mean()), float(low), float(high), math.nan, int(len(v)), n_boot, seed)


def paired_bootstrap(a: Sequence, b: Sequence, n_boot: int = DEFAULT_BOOT, seed: int = DEFAULT_SEED,
                     alpha: float = ALPHA) -> BootstrapCI:
    """Mean paired difference ``mean(a − b)`` over the same queries (NaN pairs dropped) with its
    percentile-bootstrap interval (queries resampled with replacement, seeded) and a two-sided
    p-value: 2 · min(share of resampled means ≤ 0, share ≥ 0), capped at 1 (1 when a = b)."""
    x, y = _paired(a, b)
    d = x - y
    if len(d) == 0:
        return BootstrapCI(math.nan, math.nan, math.nan, math.nan, 0, n_boot, seed)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(d), size=(n_boot, len(d)))
    means = d[idx].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    if np.all(d == 0):
        p = 1.0
    else:
        p = float(min(1.0, 2.0 * min((means <= 0).mean(), (means >= 0).mean())))
    return BootstrapCI(float(d.mean()), float(low), float(high), p, int(len(d)), n_boot, seed)


@dataclass(frozen=True)
class Best:
    """The leader among several paired outcome vectors and whether it is significantly ahead."""

    leader: str | None
    runner_up: str | None
    rate: float
    runner_up_rate: float
    test: McNemar | None

    @property
    def significant(self) -> bool:
        return self.test is not None and self.test.significant

    def label(self) -> str:
        """'NAME (p=…)' where significant, else 'n.s. (p=…)' (or 'n.s.' with nothing to compare)."""
        if self.test is None:
            return "n.s."
        p = f"p={self.test.pvalue:.3g}"
        return f"{self.leader} ({p})" if self.significant else f"n.s. ({p})"


def best_of(outcomes: Mapping[str, Mapping]) -> Best:
    """``outcomes``: name → {query key: 0/1}. The leader is the highest correct rate (ties: the
    first name); it is significant when exact McNemar against the runner-up, on the queries both
    have, gives p < 0.05. A tie in rate is never significant."""
    rates = {}
    for name, per_query in outcomes.items():
        vals = [float(v) for v in per_query.values() if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if vals:
            rates[name] = sum(vals) / len(vals)
    if len(rates) < 2:
        only = next(iter(rates), None)
        return Best(only, None, rates.get(only, math.nan) if only else math.nan, math.nan, None)
    order = sorted(rates, key=lambda k: -rates[k])  # stable: ties keep the given order
    lead, second = order[0], order[1]
    common = sorted(set(outcomes[lead]) & set(outcomes[second]), key=str)
    test = mcnemar_exact([outcomes[lead][q] for q in common], [outcomes[second][q] for q in common])
    if rates[lead] == rates[second]:
        test = McNemar(test.n, test.b, test.c, max(test.pvalue, 1.0))
    return Best(lead, second, rates[lead], rates[second], test)
