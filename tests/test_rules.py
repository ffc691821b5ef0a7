"""One rule per figure (issue 30 item 5): cost-aware labels at λ = 0 are the oracle's labels
(v_oracle_label) on random stores with ties and missing F1; best-fixed ties are broken like the
oracle (fewest tokens); one macro-F1 definition."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings

from ragrouter.report import synthetic
from ragrouter.routers.evaluate import cost_aware_labels
from tests.test_views import fetch, rows_strategy


@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows=rows_strategy)
def test_cost_aware_labels_at_lambda_zero_equal_the_oracle_view(store, rows):
    with store.connect() as conn:
        trans = conn.begin()
        try:
            synthetic.insert_rows(conn, rows)
            view = fetch(conn, "SELECT query_id, generator, judge, label FROM v_oracle_label")
            outcomes = fetch(conn, "SELECT query_id, generator, judge, paradigm, correct, tokens, f1 FROM v_router_outcomes")
        finally:
            trans.rollback()
    if outcomes.empty:
        return
    wide = outcomes.set_index(["query_id", "generator", "judge", "paradigm"])[["correct", "tokens", "f1"]].unstack("paradigm")
    flat = pd.DataFrame(index=wide.index)
    # reversed paper order: the column order must not decide a tie
    paradigms = sorted(outcomes["paradigm"].unique(), reverse=True)
    for prefix in ("correct", "tokens", "f1"):
        for p in paradigms:
            flat[f"{prefix}__{p}"] = pd.to_numeric(wide[(prefix, p)], errors="coerce")
    got = dict(zip([(int(q), g, j) for q, g, j in flat.index], cost_aware_labels(flat, 0.0)))
    want = {(int(r.query_id), r.generator, r.judge): (None if r.label is None or (isinstance(r.label, float)
                                                                                  and np.isnan(r.label)) else r.label)
            for r in view.itertuples(index=False)}
    assert got == want


def test_cost_aware_labels_never_let_a_missing_f1_or_column_order_win():
    df = pd.DataFrame({
        "correct__hybrid": [1, 1, 1], "correct__naive": [1, 1, 0],
        "tokens__hybrid": [300, 300, 300], "tokens__naive": [100, 300, 100],
        "f1__hybrid": [0.5, 0.5, 0.5], "f1__naive": [0.5, 0.5, np.nan]})
    # equal F1: fewest tokens (naive); equal F1 and tokens: paper order (naive before hybrid)
    assert cost_aware_labels(df, 0.0).tolist() == ["naive", "naive", "hybrid"]
    df.loc[2, "correct__naive"] = 1  # naive correct without an F1: it cannot win
    assert cost_aware_labels(df, 0.0)[2] == "hybrid"
    df.loc[2, "f1__hybrid"] = np.nan  # correct paradigms, none scored: undecided
    assert cost_aware_labels(df, 0.0)[2] is None


def test_best_fixed_ties_go_to_the_fewest_tokens_then_the_paper_order():
    from ragrouter.routers.dataset import best_fixed

    # the case: hybrid and naive correct at the same rate, naive a third of the cost
    assert best_fixed({"hybrid": 0.5, "naive": 0.5, "graph": 0.25}, {"hybrid": 900, "naive": 300, "graph": 10}) == "naive"
    assert best_fixed({"hybrid": 0.5, "naive": 0.5}, {"hybrid": 100, "naive": 300}) == "hybrid"
    assert best_fixed({"hybrid": 0.5, "naive": 0.5}) == "naive"  # no costs known: paper order
    assert best_fixed({"hybrid": 0.6, "naive": 0.5}, {"hybrid": 900, "naive": 1}) == "hybrid"  # rate first


def test_best_fixed_router_breaks_label_ties_by_tokens():
    from ragrouter.routers.baselines import BestFixedRouter

    meta = pd.DataFrame({"correct__hybrid": [1, 1, 0, 0], "correct__naive": [0, 0, 1, 1],
                         "tokens__hybrid": [900.0] * 4, "tokens__naive": [300.0] * 4,
                         "f1__hybrid": [0.5] * 4, "f1__naive": [0.5] * 4})
    y = np.array(["hybrid", "hybrid", "naive", "naive"])
    router = BestFixedRouter()
    router.classes_ = np.array(["hybrid", "naive", "cannot_answer"], dtype=object)
    router._fit(None, y, meta)  # Best-fixed reads no feature
    assert router.choice_ == "naive"
