"""Fig. 5, 6, 7 and 13 as a reader sees them, for checking labels and colours by eye.

Builds a small synthetic store (two corpora, one generator, one judge; ragrouter/report/synthetic.py),
trains a few routers with the random and oracle baselines (their scores are Fig. 5's bounds),
writes the report and copies its Fig. 5, 6, 7 and 13 here (fig5.png: error bars and each router's
N; fig6.png; fig7.png; fig13.png). It also draws Fig. 5 with a Random and an Oracle bound of the
same value (fig5_equal_bounds.png), the case whose two labels used to print on top of each other,
Fig. 6 for a corpus whose graph is empty (fig6_zero_panels.png: its all-zero panels used to get a
1e-13 offset axis) and Fig. 7 with three routers at one point (fig7_shared_point.png: their stars
used to hide each other).

Usage: ``PYTHONPATH=. python benchmarks/figures/render.py`` (about a minute on 2 cores; no model
is called; MLflow writes to a temporary folder).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def main() -> None:
    import pandas as pd

    from ragrouter.answering import routing
    from ragrouter.report import figures
    from ragrouter.report.build import build_report
    from tests.support.router_store import config_for, make_store

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _, engine = make_store(tmp / "s.duckdb", seed=7, queries_per_corpus=40)
        cfg = config_for(f"sqlite:///{tmp / 'mlflow.db'}")
        routing.train(engine, cfg, routing.store_dataset(engine, cfg),
                      ["lr", "xgboost", "mlp", "svm", "random", "oracle", "best_fixed"], ["q", "c", "qc"],
                      log=lambda m: None)
        build_report(engine, tmp / "report", config=cfg)
        for pattern, name in (("fig5_routing__*.png", "fig5.png"), ("fig6_corpus_profile*.png", "fig6.png"),
                              ("fig7_cost_quality__*.png", "fig7.png"), ("fig13_breakdown__*.png", "fig13.png")):
            found = sorted((tmp / "report").glob(pattern))
            shutil.copy(found[0], HERE / name)
            print(f"{HERE / name} <- {found[0].name}")
    scores = pd.DataFrame([{"router": r, "features": f, "routing_accuracy": ra, "correct_rate": cr}
                           for r, base in (("lr", 30.0), ("mlp", 34.0), ("xgboost", 32.5))
                           for f, ra, cr in (("q", base, base + 3), ("c", base + 1, base + 2), ("qc", base + 2, base))])
    bounds = {"Random": {"routing_accuracy": 33.3, "correct_rate": 33.3},
              "Oracle": {"routing_accuracy": 100.0, "correct_rate": 33.3}}
    figures.save(figures.routing_bounds(scores, bounds, "Routing per feature configuration\n(Random and Oracle "
                                                         "C.R both 33.3)"), HERE / "fig5_equal_bounds.png")
    (HERE / "fig5_equal_bounds.svg").unlink(missing_ok=True)
    print(HERE / "fig5_equal_bounds.png")
    prof = pd.DataFrame([{"corpus": "no-triples", "nodes": 0, "edges": 0, "density": 0.0, "lcc_ratio": 0.0,
                          "clustering": 0.0, "intrinsic_dim": 9.4, "hubness": 1.3, "dist_mean": 0.71},
                         {"corpus": "medical", "nodes": 812, "edges": 1033, "density": 0.0031, "lcc_ratio": 0.62,
                          "clustering": 0.08, "intrinsic_dim": 11.2, "hubness": 2.1, "dist_mean": 0.66}])
    figures.save(figures.corpus_profile(prof, "Corpus profile\n(a corpus whose graph is empty)"),
                 HERE / "fig6_zero_panels.png")
    acc = pd.DataFrame([{"corpus": "medical", "paradigm": p, "qtype": "all", "avg_tokens": t, "correct_pct": y,
                         "ci_low": y - 8, "ci_high": y + 8}
                        for p, t, y in (("llm_only", 120.0, 22.0), ("naive", 900.0, 48.0), ("graph", 2600.0, 51.0),
                                        ("hybrid", 3400.0, 55.0), ("iterative", 5200.0, 53.0))])
    routers = pd.DataFrame([{"corpus": "medical", "label": f"router {r}", "avg_tokens": 1800.0, "correct_rate": 52.0,
                             "ci_low": 45.0, "ci_high": 59.0} for r in ("lr (q)", "lr (qc)", "mlp (qc)")])
    figures.save(figures.cost_quality(acc, routers, "Tokens per query vs. % correct\n(three routers at one point)"),
                 HERE / "fig7_shared_point.png")
    for name in ("fig6_zero_panels", "fig7_shared_point"):
        (HERE / f"{name}.svg").unlink(missing_ok=True)
        print(HERE / f"{name}.png")


if __name__ == "__main__":
    main()
