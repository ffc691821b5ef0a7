"""The judge against a reviewer's labels (ragrouter.review.figures, issue 34): Cohen's kappa
checked against scikit-learn, its analytic 95 % interval against a seeded bootstrap over the
items, the false-correct rate and the edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from ragrouter.review import figures
from ragrouter.review.figures import LABELS


def test_kappa_interval_against_sklearn_and_bootstrap():
    rng = np.random.default_rng(7)
    human = rng.choice(LABELS, size=300, p=[0.5, 0.3, 0.2])
    judge = np.where(rng.random(300) < 0.7, human, rng.choice(LABELS, size=300))
    a = figures.agreement(list(zip(judge.tolist(), human.tolist())))
    assert a.kappa == pytest.approx(cohen_kappa_score(human, judge, labels=list(LABELS)))
    # percentile bootstrap over the items (seeded): the analytic interval is within 0.02 of it
    idx = rng.integers(0, 300, size=(2000, 300))
    boot = [cohen_kappa_score(human[i], judge[i], labels=list(LABELS)) for i in idx]
    lo, hi = np.quantile(boot, [0.025, 0.975])
    assert a.kappa_low == pytest.approx(lo, abs=0.02) and a.kappa_high == pytest.approx(hi, abs=0.02)
    assert a.kappa_low < a.kappa < a.kappa_high
    # correct vs. not: the same against sklearn on the collapsed labels
    hb, jb = (human == "correct"), (judge == "correct")
    assert a.binary_kappa == pytest.approx(cohen_kappa_score(hb, jb))
    assert a.false_correct == pytest.approx(float(np.mean(jb[~hb])))
    # perfect agreement: [1, 1]; no items: undefined
    p = figures.agreement([("correct", "correct"), ("incorrect", "incorrect")] * 5)
    assert (p.kappa, p.kappa_low, p.kappa_high) == (1.0, 1.0, 1.0)
    # below 10 items no large-sample interval (one disagreeing item would give a width of 0)
    one = figures.agreement([("correct", "incorrect")])
    assert one.kappa == 0.0 and np.isnan(one.kappa_low)
    assert figures.kappa_text(one.kappa, one.kappa_low, one.kappa_high) == "0.00"
    assert figures.kappa_text(figures.agreement([]).kappa, np.nan, np.nan) == "undefined"
