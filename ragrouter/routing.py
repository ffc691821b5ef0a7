"""Glue between the store and the router library: train routers on the store's router
dataset (or an imported one), record their per-query predictions, and load a trained
router for `ask`.

The router library (``ragrouter.routers``) works on DataFrames; this module reads the
``v_router_dataset`` shape from the store, runs 5-fold CV through MLflow tracking and writes
every (router, features, encoder, generator, fold, query) prediction to ``router_predictions``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import pandas as pd
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Engine

from ragrouter.db import models
from ragrouter.db.engine import write_lock
from ragrouter.paths import REPO_ROOT


def tracking_uri(config) -> str:
    uri = config.get("routers.mlflow_uri", None)
    if uri:
        return str(uri)
    (REPO_ROOT / "mlflow").mkdir(exist_ok=True)
    return f"sqlite:///{REPO_ROOT / 'mlflow' / 'mlflow.db'}"


def store_dataset(engine: Engine, config) -> pd.DataFrame:
    """The router dataset of the store for the configured judge (complete rows only)."""
    from ragrouter.report import data

    from ragrouter.evaluation.judge import judge_key

    judge = data.choose_judge(engine, judge_key(str(config.role("judge")), config))
    if judge is None:
        return pd.DataFrame()
    df = data.router_dataset(engine, judge=judge, complete=True)
    if "judge" in df.columns:
        df = df.drop(columns=["judge"])
    # An indicator that is undefined for a corpus (e.g. hubness needs more than k = 10 chunk
    # vectors) is set to 0 — no signal — rather than dropping the corpus' queries.
    from ragrouter.routers.dataset import INDICATORS

    for col in INDICATORS:
        if col in df.columns and df[col].isna().any():
            df[col] = df[col].fillna(0.0)
    if len(df):
        df["query_id"] = df["query_id"].astype(str)
    return df


def n_splits_for(df: pd.DataFrame, wanted: int) -> int:
    """``wanted`` folds, fewer when the dataset is too small: stratified folds need the
    largest class to have at least one row per fold."""
    largest = int(df["label"].value_counts().max()) if len(df) else 0
    return max(2, min(int(wanted), len(df), largest))


def train(engine: Engine, config, df: pd.DataFrame, routers: Sequence[str], feature_sets: Sequence[str],
          dataset: str = "store", log: Callable[[str], None] = print, lambdas: Sequence[float] | None = None):
    """Cross-validate ``routers`` × ``feature_sets`` on ``df``, log to MLflow, store predictions."""
    from ragrouter.routers import tracking

    if df.empty or len(df) < 4:
        log(f"routers: {len(df)} labelled queries — too few to cross-validate (need ≥ 4); skipped")
        return None
    folds = n_splits_for(df, int(config.get("routers.folds")))
    out = tracking.train_and_track(df, list(routers), list(feature_sets), tracking_uri=tracking_uri(config),
                                   experiment=str(config.get("routers.experiment")),
                                   seed=int(config.get("routers.seed")), n_splits=folds, lambdas=lambdas)
    preds = out.predictions
    if len(preds):
        rows = [{"router": r.router, "features": r.features, "encoder": r.encoder, "generator": r.generator,
                 "dataset": dataset, "fold": int(r.fold), "query_key": str(r.query_id),
                 "query_id": int(r.query_id) if dataset == "store" and str(r.query_id).isdigit() else None,
                 "predicted": r.predicted, "true_label": r.true_label,
                 "probabilities": json.loads(r.probabilities) if isinstance(r.probabilities, str) else r.probabilities,
                 "mlflow_run_id": r.run_id} for r in preds.itertuples(index=False)]
        with write_lock(engine), engine.begin() as conn:
            for i in range(0, len(rows), 500):
                stmt = insert(models.RouterPrediction).values(rows[i:i + 500])
                conn.execute(stmt.on_conflict_do_update(
                    index_elements=["router", "features", "encoder", "generator", "dataset", "fold", "query_key"],
                    set_={"predicted": stmt.excluded.predicted, "true_label": stmt.excluded.true_label,
                          "probabilities": stmt.excluded.probabilities,
                          "mlflow_run_id": stmt.excluded.mlflow_run_id}))
    log(f"routers: {len(out.results)} MLflow runs ({folds}-fold CV on {len(df)} queries), "
        f"{len(preds)} predictions stored")
    return out.results


def train_from_store(engine: Engine, config, routers: Sequence[str], feature_sets: Sequence[str],
                     log: Callable[[str], None] = print):
    return train(engine, config, store_dataset(engine, config), routers, feature_sets, "store", log)
