"""Benchmark: the whole router zoo × feature sets × 5-fold CV on a synthetic router dataset.

Goal (2 cores): the whole zoo × 3 feature sets × 5 folds on 7,727 queries in ≤ 10 min,
classical routers (lr, svm, xgboost, mlp) ≤ 1 min. Neural routers get real all-MiniLM-L6-v2
query embeddings (encoded once, cached on disk under ``$RAGROUTER_HOME/embeddings``).

    .venv/bin/python benchmarks/bench_routers.py                 # full run
    .venv/bin/python benchmarks/bench_routers.py --n 1000 --encoder hash --routers lr,dnn

Prints one line per (router, feature set) and a summary; ``--out FILE.csv`` saves the table,
``--lambdas`` adds a cost-aware λ sweep (and AIQ) for the routers named in ``--sweep``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pandas as pd  # noqa: E402

from ragrouter.routers import (  # noqa: E402
    ROUTERS, HashEncoder, aiq, build_features, cost_quality_curve, cross_validate, minilm_encoder, plan,
    synthetic_dataset,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=7727, help="synthetic queries (default: the paper's 7,727)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--routers", default=",".join(ROUTERS), help="comma-separated registry names (default: all)")
    ap.add_argument("--feature-sets", default="q,c,qc")
    ap.add_argument("--encoder", choices=("minilm", "hash"), default="minilm")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--lambdas", default="", help="comma-separated λ grid for a cost–quality sweep, e.g. 0,0.1,0.3,1")
    ap.add_argument("--sweep", default="xgboost", help="routers to sweep over --lambdas (features qc)")
    ap.add_argument("--out", help="write the per-run table to this CSV")
    ap.add_argument("--track", metavar="URI", help="also time train_and_track (MLflow runs, fold runs, PNGs, "
                    "refitted model) of the same zoo into this tracking URI, e.g. sqlite:////tmp/bench-mlflow/mlflow.db")
    args = ap.parse_args(argv)

    t_all = time.perf_counter()
    df = synthetic_dataset(args.n, seed=args.seed)
    print(f"dataset: {len(df)} rows, {df['query_text'].nunique()} distinct texts, labels "
          + ", ".join(f"{k} {v:.1%}" for k, v in df["label"].value_counts(normalize=True).items()))
    encoder = minilm_encoder() if args.encoder == "minilm" else HashEncoder()
    t0 = time.perf_counter()
    features = build_features(df, "qc", encoder)
    enc_s = time.perf_counter() - t0
    computed = getattr(encoder, "computed", len(df))
    print(f"encode: {enc_s:.1f} s ({computed} texts computed, the rest from the cache) with {features.encoder_name}")

    rows = []
    for router, fs in plan(args.routers.split(","), args.feature_sets.split(",")):
        t0, c0 = time.perf_counter(), time.process_time()
        res = cross_validate(df, router, fs, features=features, n_splits=args.folds, seed=args.seed)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        m = res.metrics
        rows.append({"router": router, "family": ROUTERS[router].family, "features": res.feature_set,
                     "encoder": res.encoder, **{k: m[k] for k in ("routing_accuracy", "macro_f1", "mrr", "correct_rate",
                                                                   "avg_tokens", "abstain_rate")},
                     "wall_s": wall, "cpu_s": cpu})
        print(f"{router:14s} {res.feature_set:4s} R.A {m['routing_accuracy']:.3f}  F1 {m['macro_f1']:.3f}  "
              f"MRR {m['mrr']:.3f}  C.R {m['correct_rate']:.3f}  tokens {m['avg_tokens']:8.0f}  "
              f"{wall:6.1f} s wall {cpu:6.1f} s cpu", flush=True)
    table = pd.DataFrame(rows)
    total = time.perf_counter() - t_all
    print("\nwall seconds by family (5-fold CV, all feature sets):")
    print(table.groupby("family")[["wall_s", "cpu_s"]].sum().round(1).to_string())
    print(f"zoo CV total: {table['wall_s'].sum():.1f} s; with data + encoding: {total:.1f} s")
    print("\nmean R.A / C.R by feature set (classical and neural routers):")
    learnt = table[table["family"] != "baseline"]
    print(learnt.groupby("features")[["routing_accuracy", "correct_rate"]].mean().round(3).to_string())

    if args.lambdas:
        lambdas = [float(x) for x in args.lambdas.split(",")]
        for router in args.sweep.split(","):
            t0 = time.perf_counter()
            cq = cost_quality_curve(df, router, "qc", lambdas, features=features, n_splits=args.folds, seed=args.seed)
            rng = (cq["avg_tokens"].min(), cq["avg_tokens"].max())
            r, f = cq[cq["kind"] == "router"], cq[cq["kind"] == "fixed"]
            print(f"\nλ sweep {router} ({time.perf_counter() - t0:.1f} s): AIQ router {aiq(r['avg_tokens'], r['correct_rate'], rng):.3f} "
                  f"vs fixed paradigms {aiq(f['avg_tokens'], f['correct_rate'], rng):.3f}")
            print(cq.round(3).to_string(index=False))
    if args.track:
        from ragrouter.routers.tracking import train_and_track

        t0 = time.perf_counter()
        out = train_and_track(df, args.routers.split(","), args.feature_sets.split(","), args.track,
                              experiment="bench-routers", seed=args.seed, encoder=encoder, n_splits=args.folds)
        print(f"\ntrain_and_track: {len(out.results)} runs, {len(out.predictions)} prediction rows "
              f"in {time.perf_counter() - t0:.1f} s (tracking store {args.track})")
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
