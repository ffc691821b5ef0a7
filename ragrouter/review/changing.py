"""The judged runs whose label decides their query's oracle label: the disagreements that matter.

A reviewer's label replaces the judge's in every table (``v_run_judged.label_source``), and the
oracle label (``v_oracle_label``) depends only on which paradigms are correct. A run's review
can change the oracle label only when flipping the run between correct and not correct changes
it — e.g. the only correct paradigm (flipped: ``cannot_answer``), the winner (flipped: the
runner-up wins), or an incorrect run with a higher F1 than the winner (flipped: it wins). A
question marked unanswerable never changes (its label is ``unanswerable``). The rule applied to
the flipped row is the oracle's one rule, :func:`ragrouter.routers.dataset.oracle_labels`,
which equals the view.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sqlalchemy.engine import Engine

from ragrouter.db.frames import read_sql


def _label(v) -> str | None:
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)


def oracle_changing_runs(engine: Engine, judge: str) -> dict[int, tuple[str | None, str | None]]:
    """{run id: (its query's oracle label now, the label if that run's correctness flipped)} for
    every current judged run of ``judge`` whose flip changes the oracle label of its (query,
    generator, judge)."""
    # deferred (start-up): pulls in sklearn, torch
    from ragrouter.routers.dataset import oracle_labels

    out = read_sql(engine, "SELECT o.query_id, o.generator, o.paradigm, o.run_id, o.correct, o.tokens, o.f1, "
                           "l.unanswerable FROM v_router_outcomes o JOIN v_oracle_label l ON l.query_id = o.query_id "
                           "AND l.generator = o.generator AND l.judge = o.judge WHERE o.judge = :j", {"j": judge})
    if out.empty:
        return {}
    keys = ["query_id", "generator"]
    paradigms = sorted(out["paradigm"].unique())
    wide = out.set_index(keys + ["paradigm"])[["correct", "tokens", "f1"]].unstack("paradigm")
    base = pd.DataFrame(index=wide.index)
    for prefix in ("correct", "tokens", "f1"):
        for p in paradigms:
            base[f"{prefix}__{p}"] = pd.to_numeric(wide[(prefix, p)], errors="coerce")
    base["unanswerable"] = out.groupby(keys)["unanswerable"].max().reindex(base.index).to_numpy()
    now = dict(zip(base.index, oracle_labels(base, paradigms)))
    flipped = base.loc[[tuple(k) for k in out[keys].itertuples(index=False)]].reset_index(drop=True)
    for i, (p, c) in enumerate(zip(out["paradigm"], out["correct"])):
        flipped.at[i, f"correct__{p}"] = 0.0 if c == 1 else 1.0
    then = oracle_labels(flipped, paradigms)
    changed = {}
    for (q, g, run_id), new in zip(out[["query_id", "generator", "run_id"]].itertuples(index=False), then):
        old = _label(now[(q, g)])
        if old != _label(new):
            changed[int(run_id)] = (old, _label(new))
    return changed
