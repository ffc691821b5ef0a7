"""Glue between the store and the router library: train routers on the store's router
dataset (or an imported one), record their per-query predictions, and load a trained
router for `ask`.

The router library (``ragrouter.routers``) works on DataFrames; this module reads the
``v_router_dataset`` shape from the store, runs stratified CV (``routers.folds``: up to 5 folds,
fewer on small data) through MLflow tracking and writes
every (router, features, encoder, generator, fold, query) prediction to ``router_predictions``
and every fold's metrics to ``router_fold_metrics`` (what ``v_router_scores`` aggregates).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Sequence

import pandas as pd
from sqlalchemy import delete, insert
from sqlalchemy.engine import Engine

from ragrouter.db import models
from ragrouter.db.engine import write_lock
from ragrouter.db.frames import read_sql
from ragrouter.db.values import json_value
from ragrouter.evaluation.judge import judge_key
from ragrouter.paths import git_commit
from ragrouter.report import data
from ragrouter.routers import tracking
from ragrouter.routers.dataset import CANNOT_ANSWER, DEFAULT_PARADIGMS, INDICATORS, paradigms_of
from ragrouter.routers.evaluate import METRICS
from ragrouter.routers.features import GatewayEncoder, ONEHOT
from ragrouter.routers.registry import ROUTERS
from ragrouter.routers.tracking import default_tracking_uri
from ragrouter.stages.services import Services


def tracking_uri(config) -> str:
    uri = config.get("routers.mlflow_uri", None)
    if uri:
        return str(uri)

    return default_tracking_uri()


def store_id(engine: Engine) -> str:
    """This store's id (``store_info``, a uuid4 made at ``db upgrade``)."""
    from sqlalchemy import text

    with engine.connect() as conn:
        sid = conn.execute(text("SELECT store_id FROM store_info ORDER BY created_at LIMIT 1")).scalar()
    if not sid:
        raise RuntimeError("the store has no id (store_info is empty): run 'python cli.py db upgrade'")
    return str(sid)


def encoder_names(config, requested: Sequence[str] | None = None) -> list[str]:
    """The query encoders to train neural routers with: ``--encoder`` names, else
    ``routers.encoders``; each is ``onehot`` or a backend under ``backends`` that serves
    embeddings (kind ``local-encoder`` or ``openai``)."""
    names = list(requested or []) or list(config.get("routers.encoders", None) or [ONEHOT])
    backends = config.section("backends")
    for name in names:
        if name == ONEHOT:
            continue
        spec = backends.get(name)
        if not isinstance(spec, dict):
            raise EncoderConfigError(f"{config.source}: routers encoder '{name}' is neither 'onehot' nor a backend "
                                     f"under 'backends' ({', '.join(sorted(backends))})")
        if spec.get("kind") not in ("local-encoder", "openai"):
            raise EncoderConfigError(f"{config.source}: routers encoder '{name}': backend kind "
                                     f"{spec.get('kind')!r} serves no embeddings (use a local-encoder or openai backend)")
    return list(dict.fromkeys(names))


class EncoderConfigError(ValueError):
    """A configured router encoder does not exist or serves no embeddings."""


def make_encoders(names: Sequence[str], gateway) -> list:
    """Encoder objects for :func:`ragrouter.routers.tracking.train_and_track` (``None`` = one-hot)."""
    return [None if n == ONEHOT else GatewayEncoder(gateway, n) for n in names]


def store_dataset(engine: Engine, config) -> pd.DataFrame:
    """The router dataset of the store for the configured judge (complete rows only);
    ``df.attrs['judge']`` names the judge, ``df.attrs['dropped']`` says which judged queries
    are not in it and why ({reason: queries}, :func:`dropped_rows`), ``df.attrs['judged']``
    how many (query, generator) pairs the judge has outcomes for."""
    judge = data.choose_judge(engine, judge_key(str(config.role("judge")), config))
    if judge is None:
        return pd.DataFrame()
    full = data.router_dataset(engine, judge=judge, complete=False)
    df, dropped = dropped_rows(full)
    undecided = read_sql(engine, "SELECT COUNT(*) AS n FROM v_oracle_label WHERE judge = :j AND label IS NULL",
                              {"j": judge})
    n_undecided = int(undecided["n"].iloc[0]) if len(undecided) else 0
    if n_undecided:
        dropped["a correct answer without a semantic F1 yet, so no label (run --stage score)"] = n_undecided
    if "judge" in df.columns:
        df = df.drop(columns=["judge"])
    # An indicator that is undefined for a corpus (e.g. hubness needs more than k = 10 chunk
    # vectors) is set to 0 — no signal — rather than dropping the corpus' queries.

    for col in INDICATORS:
        if col in df.columns and df[col].isna().any():
            df[col] = df[col].fillna(0.0)
    if len(df):
        df["query_id"] = df["query_id"].astype(str)
    df.attrs["judge"] = judge
    df.attrs["dropped"] = dropped
    df.attrs["judged"] = len(full) + n_undecided
    return df


def dropped_rows(full: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """The complete rows of a router dataset (every paradigm present with correct, tokens and
    F1), and the others counted by why: a paradigm that did not answer or was not judged on
    the query (named, most often missing first), or answers without a semantic F1 yet."""
    if full.empty:
        return full, {}
    paradigms = paradigms_of(full)
    ran = pd.concat([full[f"{k}__{p}"].notna() for p in paradigms for k in ("correct", "tokens")], axis=1)
    ran.columns = [f"{k}__{p}" for p in paradigms for k in ("correct", "tokens")]
    all_ran = ran.all(axis=1)
    scored = pd.concat([full[f"f1__{p}"].notna() for p in paradigms], axis=1).all(axis=1)
    dropped: dict[str, int] = {}
    if (~all_ran).any():
        missing: dict[str, int] = {}
        for p in paradigms:
            n = int((~(ran[f"correct__{p}"] & ran[f"tokens__{p}"]) & ~all_ran).sum())
            if n:
                missing[p] = n
        names = ", ".join(p for p in sorted(missing, key=lambda p: (-missing[p], p)))
        dropped[f"not answered and judged by every paradigm (missing: {names})"] = int((~all_ran).sum())
    no_f1 = all_ran & ~scored
    if no_f1.any():
        dropped["no semantic F1 for every paradigm's answer yet (run --stage score)"] = int(no_f1.sum())
    return full[all_ran & scored].reset_index(drop=True), dropped


def describe_dropped(df: pd.DataFrame) -> str:
    """``" (of 6 judged queries, left out: 4 no semantic F1 …; 2 a correct answer …)"``, or ``""``."""
    dropped = df.attrs.get("dropped") or {}
    if not dropped:
        return ""
    parts = "; ".join(f"{n} {why}" for why, n in sorted(dropped.items(), key=lambda kv: -kv[1]))
    return f" (of {df.attrs.get('judged', len(df))} judged queries, left out: {parts})"


def describe_coverage(df: pd.DataFrame) -> str:
    """One line on what the labels cover: the paradigms the routers choose among, how often
    each is the oracle's label, and — when that is not the paper's five — that such routers are
    not comparable to the paper's (nor to routers trained over other paradigms)."""
    paradigms = paradigms_of(df)
    counts = df["label"].value_counts() if "label" in df.columns else pd.Series(dtype=int)
    labels = ", ".join(f"{p} {int(counts.get(p, 0))}" for p in [*paradigms, CANNOT_ANSWER] if p in counts or
                       p in paradigms)
    line = (f"routers: the labels cover {len(paradigms)} paradigm{'s' if len(paradigms) != 1 else ''} "
            f"({labels} of {len(df)} queries)")
    missing = [p for p in DEFAULT_PARADIGMS if p not in paradigms]
    if missing:
        line += (f"; {', '.join(missing)} {'was' if len(missing) == 1 else 'were'} not run on these queries, so "
                 f"these routers choose among {len(paradigms)} of the paper's {len(DEFAULT_PARADIGMS)} paradigms "
                 "and are not comparable to the paper's routers")
    return line


def n_splits_for(df: pd.DataFrame, wanted: int) -> int:
    """``wanted`` folds, fewer when the dataset is too small: stratified folds need the
    largest class to have at least one row per fold."""
    largest = int(df["label"].value_counts().max()) if len(df) else 0
    return max(2, min(int(wanted), len(df), largest))


def train(engine: Engine, config, df: pd.DataFrame, routers: Sequence[str], feature_sets: Sequence[str],
          dataset: str = "store", log: Callable[[str], None] = print, lambdas: Sequence[float] | None = None,
          encoders: Sequence[str] | None = None, judge: str | None = None, dataset_source: str | None = None,
          gateway=None, show_progress: bool = False):
    """Cross-validate ``routers`` × ``feature_sets`` × query encoders on ``df``, log each run to
    MLflow (tagged with this store's id, the judge, corpora, config hash, git commit and one
    training-session id), store every prediction and every fold's metrics.

    ``encoders``: encoder names (default: ``routers.encoders``); neural routers run once per
    encoder, classical routers and baselines once on the one-hot query type. Query
    embeddings go through the gateway, so they are ledger rows (cached across trainings)."""
    if df.empty or len(df) < 4:
        log(f"routers: {len(df)} labelled queries — too few to cross-validate (need ≥ 4); skipped"
            + describe_dropped(df))
        return None
    judge = judge if judge is not None else (df.attrs.get("judge") if dataset == "store" else None)
    log(describe_coverage(df))
    names = encoder_names(config, encoders)
    if not any(ROUTERS[r].uses_text_encoder for r in routers if r in ROUTERS):
        names = [ONEHOT]  # no router reads the query text: nothing to embed
    sid = store_id(engine)
    session = uuid.uuid4().hex[:12]
    corpora = ",".join(sorted(df["corpus"].astype(str).unique())) if "corpus" in df.columns else ""
    context = {"store_id": sid, "judge": judge or "", "corpora": corpora, "dataset": dataset,
               "dataset_source": dataset_source or (f"ragrouter-store:{sid}" if dataset == "store" else dataset),
               "config_hash": config.full_hash(), "git_commit": git_commit(), "training_session": session}
    folds = n_splits_for(df, int(config.get("routers.folds")))
    services = None
    if gateway is None and any(n != ONEHOT for n in names):
        services = Services(config, engine, command="routers train")
        gateway = services.gateway
    try:
        out = tracking.train_and_track(df, list(routers), list(feature_sets), tracking_uri=tracking_uri(config),
                                       experiment=str(config.get("routers.experiment")),
                                       seed=int(config.get("routers.seed")), n_splits=folds, lambdas=lambdas,
                                       encoders=make_encoders(names, gateway), context=context,
                                       show_progress=show_progress)
        if gateway is not None:
            gateway.flush()
    finally:
        if services is not None:
            services.finish()
    preds = out.predictions
    swept = bool(lambdas and any(lam != 0.0 for lam in lambdas))
    keys = ["router", "features", "encoder", "generator"]
    if len(preds):
        rows = [{"router": r.router, "features": r.features, "encoder": r.encoder, "generator": r.generator,
                 "dataset": dataset, "fold": int(r.fold), "query_key": str(r.query_id),
                 "query_id": int(r.query_id) if dataset == "store" and str(r.query_id).isdigit() else None,
                 "predicted": r.predicted, "true_label": r.true_label,
                 "probabilities": json_value(r.probabilities),
                 "mlflow_run_id": r.run_id} for r in preds.itertuples(index=False)]
        aiq_by_run = dict(zip(out.results["run_id"], out.results["aiq"])) if "aiq" in out.results else {}
        fold_rows = [{"router": f.router, "features": f.features, "encoder": f.encoder, "generator": f.generator,
                      "dataset": dataset, "fold": int(f.fold), "judge": judge, "n_train": int(f.n_train),
                      "n_test": int(f.n_test), "fallback": f.fallback,
                      **{m: _finite(getattr(f, m)) for m in METRICS},
                      "lambda_swept": swept, "aiq": _finite(aiq_by_run.get(f.run_id)) if swept else None,
                      "mlflow_run_id": f.run_id} for f in out.folds.itertuples(index=False)]
        with write_lock(engine), engine.begin() as conn:
            for key in out.results[keys].drop_duplicates().itertuples(index=False):
                for table in (models.RouterPrediction, models.RouterFoldMetric):
                    conn.execute(delete(table).where(
                        table.router == key.router, table.features == key.features, table.encoder == key.encoder,
                        table.generator == key.generator, table.dataset == dataset))
            for i in range(0, len(rows), 500):
                conn.execute(insert(models.RouterPrediction).values(rows[i:i + 500]))
            for i in range(0, len(fold_rows), 500):
                conn.execute(insert(models.RouterFoldMetric).values(fold_rows[i:i + 500]))
    log(f"routers: {len(out.results)} MLflow runs ({folds}-fold CV on {len(df)} queries; encoders "
        f"{', '.join(names)}; training session {session}), {len(preds)} predictions stored" + describe_dropped(df))
    return out.results


def _finite(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def train_from_store(engine: Engine, config, routers: Sequence[str], feature_sets: Sequence[str],
                     log: Callable[[str], None] = print, encoders: Sequence[str] | None = None):
    return train(engine, config, store_dataset(engine, config), routers, feature_sets, "store", log,
                 encoders=encoders)
