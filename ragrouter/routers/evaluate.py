"""Router evaluation (paper §4.1, App. D.3, Fig. 7): stratified CV, metrics, cost-aware labels,
cost–quality curves and the area under the cost–quality frontier (RouterBench's AIQ).

Metrics (per fold, then averaged over folds as in the paper):

* ``routing_accuracy`` — share of rows whose predicted class equals the label;
* ``macro_f1`` — unweighted mean of per-class F1 over the classes *present in the fold*: those
  that are a true label or a prediction there (a class predicted but never true counts 0, so
  predicting an absent class is still punished) — scikit-learn's
  ``f1_score(average='macro', zero_division=0)`` with its default labels. A class that is
  neither (no query has it, no router chose it) has no F1; averaging a 0 for it made the
  oracle's macro-F1 read 37.5 % at a routing accuracy of 100 % (issue 30). Predictions
  outside the label space (the dataset's paradigms, ``cannot_answer`` and, where a question is
  marked unanswerable, ``unanswerable``) are an error;
* ``mrr`` — from the unrounded probabilities: mean of 1/rank of the true class in the predicted probabilities, rank =
  #classes whose probability ≥ the true class's (pessimistic on ties, as scikit-learn's
  ``label_ranking_average_precision_score`` with one relevant label);
* ``correct_rate`` — LLM-judge correctness (``correct__p``) of the paradigm actually run:
  the prediction, or, for a ``cannot_answer`` prediction, the fallback = the most frequent
  optimal paradigm (non-``cannot_answer`` label) of the *training* fold (ties: alphabetical),
  so no test label leaks into the score. The paper says "the most frequent optimal paradigm
  globally"; computed on the training fold it is the same rule without the leak. An
  ``unanswerable`` prediction runs no paradigm (the router abstains): correct when the question
  is marked unanswerable, 0 tokens;
* ``avg_tokens`` — mean ``tokens__p`` of that same paradigm;
* ``abstain_rate`` — share of ``cannot_answer`` predictions.

The headline figure of every metric is its **fold mean** (``<metric>``) with the population
standard deviation over folds (``<metric>_std``) — the same numbers in MLflow,
``v_router_scores`` (which aggregates the stored per-fold rows of ``router_fold_metrics``),
``routers compare`` and the report. Per-query rates (routing accuracy, correct rate) also get a
95 % Wilson interval over the pooled CV predictions (``<metric>_ci_low`` / ``_ci_high``,
:func:`wilson_interval`, = statsmodels' ``proportion_confint(method='wilson')``); anything
pooled over folds is named ``pooled_*``.

Cost-aware labels (:func:`cost_aware_labels`): utility of paradigm p for a row is
``U_p = correct_p · (1 + 0.01 · f1_p) − λ · tokens_p / token_scale`` where ``token_scale`` is
the largest mean paradigm cost of the frame. The label is arg-max U_p when that maximum is
> 0, else ``cannot_answer`` (abstaining costs and earns nothing, U = 0). At λ = 0 this is the
paper's label (the correct paradigm with the highest F1; none correct → ``cannot_answer``),
with the oracle's candidates and tie-breaks (a missing F1 never wins; ties: fewest tokens, then
the fixed paradigm order), so at λ = 0 it equals ``v_oracle_label`` row for row.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
from sklearn.model_selection import StratifiedKFold

from ragrouter.common import stats
from ragrouter.routers.base import Router
from ragrouter.routers.dataset import (
    CANNOT_ANSWER,
    NOT_PARADIGMS,
    UNANSWERABLE,
    class_order,
    paradigms_of,
    unanswerable_mask,
    validate_router_dataset,
)
from ragrouter.routers.dataset import paradigm_rank
from ragrouter.routers.features import Encoder, Features, build_features, check_feature_set
from ragrouter.routers.registry import ROUTERS, make_router

F1_TIEBREAK = 0.01
DEFAULT_LAMBDAS: tuple[float, ...] = (0.0, 0.01, 0.1, 0.5, 1.0, 2.0, 5.0)
"""λ grid: any λ > 0 first turns the choice among correct paradigms from "best F1" into
"cheapest"; from λ ≈ token_scale / tokens_p upwards a correct paradigm p is not worth its cost."""
METRICS: tuple[str, ...] = ("routing_accuracy", "macro_f1", "mrr", "correct_rate", "avg_tokens", "abstain_rate")


# --------------------------------------------------------------------------------------------
# metrics


def routing_accuracy(y_true, y_pred) -> float:
    y_true, y_pred = np.asarray(y_true).astype(str), np.asarray(y_pred).astype(str)
    return float(np.mean(y_true == y_pred)) if len(y_true) else float("nan")


def macro_f1(y_true, y_pred, labels: Sequence[str] | None = None, present_only: bool = False) -> float:
    """Unweighted mean per-class F1 over ``labels`` (default: the union of true and predicted
    classes); a class with no true positive counts 0. ``present_only``: ``labels`` is only the
    label space the classes must belong to, and the mean runs over the classes present (true
    or predicted) — THE routing metric's definition (module docstring)."""
    y_true, y_pred = np.asarray(y_true).astype(str), np.asarray(y_pred).astype(str)
    labels = np.union1d(y_true, y_pred) if labels is None else np.asarray(list(labels)).astype(str)
    extra = sorted(set(np.union1d(y_true, y_pred)) - set(labels))
    if extra:
        raise ValueError(f"class {extra[0]!r} is not in the label space ({', '.join(labels)})")
    if present_only:
        labels = np.union1d(y_true, y_pred)
    if len(labels) == 0:
        return float("nan")
    f1s = []
    for c in labels:
        tp = np.sum((y_true == c) & (y_pred == c))
        fp = np.sum((y_true != c) & (y_pred == c))
        fn = np.sum((y_true == c) & (y_pred != c))
        f1s.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(f1s))


def reciprocal_ranks(y_true, proba: np.ndarray, classes: Sequence[str]) -> np.ndarray:
    """1/rank of each true class; rank = #classes with probability ≥ the true one (0 if unknown)."""
    classes = np.asarray(classes).astype(str)
    y_true = np.asarray(y_true).astype(str)
    proba = np.asarray(proba, dtype=float)
    out = np.zeros(len(y_true))
    pos = {c: k for k, c in enumerate(classes)}
    for i, y in enumerate(y_true):
        k = pos.get(y)
        if k is not None:
            out[i] = 1.0 / np.sum(proba[i] >= proba[i, k])
    return out


def mrr(y_true, proba: np.ndarray, classes: Sequence[str]) -> float:
    return float(reciprocal_ranks(y_true, proba, classes).mean()) if len(proba) else float("nan")


def wilson_interval(k: float, n: float) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion ``k / n``: the one implementation,
    :func:`ragrouter.common.stats.wilson_interval` (= statsmodels' ``proportion_confint(k, n,
    method='wilson')``, tested); (nan, nan) for n = 0. The same formula is in
    ``queries/views/201_v_router_scores.sql``."""
    low, high = stats.wilson_interval(k, n)
    return float(low), float(high)


def fallback_paradigm(y_train, paradigms: Sequence[str], meta: pd.DataFrame | None = None) -> str:
    """The most frequent optimal paradigm among the training labels (ties: alphabetical — the
    rule ``v_router_routed`` applies too); with no paradigm label at all, the paradigm with the
    highest training correctness (or the first)."""
    y = np.asarray(y_train).astype(str)
    counts = [(int(np.sum(y == p)), p) for p in paradigms]
    best = min(counts, key=lambda c: (-c[0], c[1]))
    if best[0] > 0:
        return best[1]
    if meta is not None and len(meta):
        return max(paradigms, key=lambda p: (meta[f"correct__{p}"].mean(), -list(paradigms).index(p)))
    return paradigms[0]


def route_outcomes(pred, meta: pd.DataFrame, fallback: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(paradigm run, its correctness, its tokens) per row; ``cannot_answer`` → ``fallback``;
    ``unanswerable`` → no paradigm runs (the router abstains): correct when the question is
    marked unanswerable, 0 tokens."""
    pred = np.asarray(pred).astype(str).astype(object)
    paradigms = paradigms_of(meta)
    routed = pred.copy()
    routed[pred == CANNOT_ANSWER] = fallback
    unknown = sorted(set(routed) - set(paradigms) - {UNANSWERABLE})
    if unknown:
        raise ValueError(f"prediction {unknown[0]!r} is not a paradigm of the dataset ({', '.join(paradigms)})")
    correct = np.empty(len(pred))
    tokens = np.empty(len(pred))
    abstain = routed == UNANSWERABLE
    if abstain.any():
        correct[abstain] = unanswerable_mask(meta)[abstain].astype(float)
        tokens[abstain] = 0.0
    for p in np.unique(routed[~abstain]):
        m = routed == p
        correct[m] = meta[f"correct__{p}"].to_numpy(float)[m]
        tokens[m] = meta[f"tokens__{p}"].to_numpy(float)[m]
    return routed, correct, tokens


def correct_rate(pred, meta: pd.DataFrame, fallback: str) -> float:
    return float(route_outcomes(pred, meta, fallback)[1].mean())


def avg_tokens(pred, meta: pd.DataFrame, fallback: str) -> float:
    return float(route_outcomes(pred, meta, fallback)[2].mean())


def align_proba(proba: np.ndarray, router_classes: Sequence[str], classes: Sequence[str]) -> np.ndarray:
    """Re-index probability columns from a router's classes to ``classes`` (absent → 0)."""
    out = np.zeros((len(proba), len(classes)))
    pos = {c: k for k, c in enumerate(classes)}
    for j, c in enumerate(router_classes):
        if c not in pos:
            raise ValueError(f"router class {c!r} is not among the dataset classes ({', '.join(classes)})")
        out[:, pos[c]] = proba[:, j]
    return out


def score_predictions(y_true, y_pred, proba, classes, meta: pd.DataFrame, fallback: str) -> dict[str, float]:
    """All metrics of one fold."""
    _, correct, tokens = route_outcomes(y_pred, meta, fallback)
    return {
        "routing_accuracy": routing_accuracy(y_true, y_pred),
        "macro_f1": macro_f1(y_true, y_pred, labels=classes, present_only=True),
        "mrr": mrr(y_true, proba, classes),
        "correct_rate": float(correct.mean()),
        "avg_tokens": float(tokens.mean()),
        "abstain_rate": float(np.mean(np.asarray(y_pred).astype(str) == CANNOT_ANSWER)),
    }


# --------------------------------------------------------------------------------------------
# cost-aware labels


def token_scale_of(df: pd.DataFrame) -> float:
    """The largest mean paradigm cost (tokens per query) of the frame."""
    return float(max(df[f"tokens__{p}"].mean() for p in paradigms_of(df)))


def utilities(df: pd.DataFrame, lam: float, token_scale: float | None = None, f1_tiebreak: float = F1_TIEBREAK) -> np.ndarray:
    """(n, P) utilities ``correct·(1 + f1_tiebreak·f1) − λ·tokens/token_scale``."""
    paradigms = paradigms_of(df)
    scale = token_scale if token_scale is not None else token_scale_of(df)
    correct = df[[f"correct__{p}" for p in paradigms]].to_numpy(float)
    f1 = df[[f"f1__{p}" for p in paradigms]].to_numpy(float)
    tokens = df[[f"tokens__{p}" for p in paradigms]].to_numpy(float)
    if lam == 0:  # no cost term (a missing token count or scale must not turn it into NaN)
        return correct * (1.0 + f1_tiebreak * f1)
    return correct * (1.0 + f1_tiebreak * f1) - lam * np.where(np.isnan(tokens), np.inf, tokens) / scale


def cost_aware_labels(df: pd.DataFrame, lam: float, token_scale: float | None = None, f1_tiebreak: float = F1_TIEBREAK) -> np.ndarray:
    """Labels from utility (see the module docstring). The candidates and tie-breaks are the
    oracle's (``v_oracle_label``, :func:`ragrouter.routers.dataset.oracle_labels`): only a
    paradigm judged correct with an F1 can win (a missing F1 or missing tokens never wins);
    the highest utility, then the highest F1, then the fewest tokens, then the fixed paradigm
    order — never the column order. So λ = 0 gives exactly the oracle's labels (a property
    test proves it on random stores with ties and missing F1). A row with correct paradigms but
    no F1 is undecided (None), as in the view."""
    if lam < 0:
        raise ValueError(f"cost weight lambda must be ≥ 0 (got {lam})")
    paradigms = paradigms_of(df)
    u = utilities(df, lam, token_scale, f1_tiebreak)
    correct = df[[f"correct__{p}" for p in paradigms]].to_numpy(float) == 1.0
    f1 = df[[f"f1__{p}" for p in paradigms]].to_numpy(float)
    tokens = df[[f"tokens__{p}" for p in paradigms]].to_numpy(float)
    tokens = np.where(np.isnan(tokens), np.inf, tokens)
    candidate = correct & ~np.isnan(f1) & ~np.isnan(u)
    rank = np.array([paradigm_rank(p)[0] for p in paradigms], dtype=float)
    names = [paradigm_rank(p)[1] for p in paradigms]
    order = sorted(range(len(paradigms)), key=lambda j: (rank[j], names[j]))  # fixed order, then name
    labels = np.empty(len(df), dtype=object)
    marked = unanswerable_mask(df)
    for i in range(len(df)):
        if marked[i]:  # the oracle's first rule: its right answer is a refusal
            labels[i] = UNANSWERABLE
            continue
        best = None
        for j in order:  # strict comparisons keep the earlier paradigm of the fixed order
            if not candidate[i, j]:
                continue
            key = (-u[i, j], -f1[i, j], tokens[i, j])
            if best is None or key < best[0]:
                best = (key, j)
        if best is None:
            labels[i] = None if correct[i].any() else CANNOT_ANSWER
        elif -best[0][0] <= 0:
            labels[i] = CANNOT_ANSWER  # abstaining (U = 0) is worth more than any paradigm's cost
        else:
            labels[i] = paradigms[best[1]]
    return labels.astype(str) if all(v is not None for v in labels) else labels


# --------------------------------------------------------------------------------------------
# cross-validation


@dataclass
class CVResult:
    """Outcome of one router × feature set × encoder × generator cross-validation."""

    router: str
    feature_set: str
    encoder: str
    generator: str
    classes: list[str]
    predictions: pd.DataFrame  # one row per dataset row: fold, predicted, true_label, routed, correct, tokens, probabilities
    proba: np.ndarray  # (n, len(classes)) in predictions' row order
    fold_metrics: pd.DataFrame  # one row per fold
    params: dict = field(default_factory=dict)
    fit_seconds: float = 0.0
    predict_seconds: float = 0.0
    models: list = field(default_factory=list)
    lam: float = 0.0

    @property
    def metrics(self) -> dict[str, float]:
        """Fold means of every metric plus ``<metric>_std`` (population std over folds), and
        the Wilson 95 % interval of the pooled per-query rates (``routing_accuracy_ci_low`` …,
        ``correct_rate_ci_*``) with ``n`` (predictions) — see the module docstring."""
        out = summarise_folds(self.fold_metrics)
        p = self.predictions
        n = len(p)
        out["n"] = float(n)
        for m, k in (("routing_accuracy", float((p["predicted"] == p["true_label"]).sum())),
                     ("correct_rate", float(p["correct"].sum()))):
            out[f"{m}_ci_low"], out[f"{m}_ci_high"] = wilson_interval(k, n)
        return out

    def confusion(self) -> pd.DataFrame:
        """Pooled confusion matrix over folds (rows: true, columns: predicted)."""
        cm = pd.crosstab(self.predictions["true_label"], self.predictions["predicted"])
        return cm.reindex(index=self.classes, columns=self.classes, fill_value=0)


def summarise_folds(fold_metrics: pd.DataFrame) -> dict[str, float]:
    """``<metric>`` = fold mean and ``<metric>_std`` = population std (ddof 0) of every metric."""
    out = {}
    for m in METRICS:
        out[m] = float(fold_metrics[m].mean())
        out[f"{m}_std"] = float(fold_metrics[m].std(ddof=0))
    return out


def _effective_encoder(cls: type[Router], feature_set: str, features: Features) -> str:
    if "q" not in feature_set:
        return "none"
    if cls.uses_text_encoder:
        return features.encoder_name
    return "onehot"


def _single_generator(df: pd.DataFrame) -> str:
    gens = df["generator"].unique()
    if len(gens) != 1:
        raise ValueError(f"cross-validation needs rows of one generator; got {len(gens)} ({', '.join(map(str, gens[:5]))}); filter with df[df.generator == ...]")
    return str(gens[0])


def cross_validate(
    df: pd.DataFrame,
    router: str,
    feature_set: str = "qc",
    *,
    encoder: Encoder | None = None,
    features: Features | None = None,
    labels: Sequence[str] | None = None,
    n_splits: int = 5,
    seed: int = 0,
    router_params: dict | None = None,
    keep_models: bool = False,
    lam: float = 0.0,
) -> CVResult:
    """Stratified ``n_splits``-fold CV of one registered router on one generator's rows.

    ``features`` may be precomputed with :func:`build_features` for ``df`` (any feature set; it is
    re-viewed as ``feature_set``); otherwise they are built with ``encoder``. ``labels`` override
    ``df['label']`` (e.g. :func:`cost_aware_labels`). Baselines with a fixed feature set ignore
    ``feature_set`` and report their own.
    """
    df = validate_router_dataset(df)
    generator = _single_generator(df)
    cls = ROUTERS.get(router)
    if cls is None:
        raise ValueError(f"unknown router {router!r} (known: {', '.join(ROUTERS)})")
    feature_set = cls.fixed_feature_set or check_feature_set(feature_set)
    fs_for_features = feature_set if feature_set != "none" else "qc"
    if features is None:
        features = build_features(df, fs_for_features, encoder)
    elif len(features) != len(df):
        raise ValueError(f"features have {len(features)} rows but the frame has {len(df)}")
    X = features.with_feature_set(fs_for_features)
    y = np.asarray(labels if labels is not None else df["label"]).astype(str)
    if len(y) != len(df):
        raise ValueError(f"{len(y)} labels for {len(df)} rows")
    classes = class_order(df)
    extra = sorted(set(y) - set(classes))
    if extra:
        raise ValueError(f"label {extra[0]!r} is neither a paradigm nor one of {', '.join(NOT_PARADIGMS)}")
    paradigms = paradigms_of(df)
    counts = pd.Series(y).value_counts()
    if counts.max() < n_splits:
        raise ValueError(f"too few rows for {n_splits}-fold CV: the largest class has {counts.max()} rows")
    skf = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    import warnings

    fold = np.full(len(df), -1)
    proba = np.zeros((len(df), len(classes)))
    pred = np.empty(len(df), dtype=object)
    fallbacks = np.empty(len(df), dtype=object)
    fold_rows, models = [], []
    fit_s = pred_s = 0.0
    params: dict = {}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The least populated class")
        splits = list(skf.split(np.zeros(len(y)), y))
    for k, (tr, te) in enumerate(splits):
        model = make_router(router, seed=seed + k, **(router_params or {}))
        params = model.get_params()
        t0 = time.perf_counter()
        model.fit(X.subset(tr), y[tr], df.iloc[tr])
        t1 = time.perf_counter()
        kw = {"labels": y[te]} if model.needs_labels else {}
        p = align_proba(model.predict_proba(X.subset(te), **kw), model.classes_, classes)
        pred_s += time.perf_counter() - t1
        fit_s += t1 - t0
        yhat = np.asarray(classes)[np.argmax(p, axis=1)]
        fb = fallback_paradigm(y[tr], paradigms, df.iloc[tr])
        fold[te], proba[te], pred[te], fallbacks[te] = k, p, yhat, fb
        fold_rows.append({"fold": k, "n_train": len(tr), "n_test": len(te), "fallback": fb,
                          "fit_seconds": t1 - t0,
                          **score_predictions(y[te], yhat, p, classes, df.iloc[te], fb)})
        if keep_models:
            models.append(model)
    routed = np.empty(len(df), dtype=object)
    correct = np.zeros(len(df))
    tokens = np.zeros(len(df))
    for fb in np.unique(fallbacks):
        m = fallbacks == fb
        r, c, t = route_outcomes(pred[m], df[m], fb)
        routed[m], correct[m], tokens[m] = r, c, t
    encoder_name = _effective_encoder(cls, feature_set, X)
    predictions = pd.DataFrame({
        "query_id": df["query_id"].to_numpy(),
        "generator": generator,
        "router": router,
        "features": feature_set,
        "encoder": encoder_name,
        "fold": fold,
        "predicted": pred.astype(str),
        "true_label": y,
        "routed_paradigm": routed.astype(str),
        "correct": correct.astype(int),
        "tokens": tokens.astype(np.int64),
        # unrounded (repr round-trips a float exactly): MRR's ranks must not see ties rounding made
        "probabilities": [json.dumps({c: float(v) for c, v in zip(classes, row)}) for row in proba],
    })
    return CVResult(router=router, feature_set=feature_set, encoder=encoder_name, generator=generator,
                    classes=classes, predictions=predictions, proba=proba, fold_metrics=pd.DataFrame(fold_rows),
                    params=params, fit_seconds=fit_s, predict_seconds=pred_s, models=models, lam=lam)


def plan(routers: Iterable[str], feature_sets: Iterable[str]) -> list[tuple[str, str]]:
    """(router, feature set) pairs to run; baselines with a fixed feature set appear once."""
    out: list[tuple[str, str]] = []
    feature_sets = [check_feature_set(f) for f in feature_sets]
    for r in routers:
        if r not in ROUTERS:
            raise ValueError(f"unknown router {r!r} (known: {', '.join(ROUTERS)})")
        fixed = ROUTERS[r].fixed_feature_set
        for fs in ([fixed] if fixed else feature_sets):
            if (r, fs) not in out:
                out.append((r, fs))
    return out


def iter_cross_validations(
    df: pd.DataFrame,
    routers: Iterable[str],
    feature_sets: Iterable[str] = ("q", "c", "qc"),
    *,
    encoder: Encoder | None = None,
    n_splits: int = 5,
    seed: int = 0,
    router_params: dict[str, dict] | None = None,
    keep_models: bool = False,
) -> Iterator[CVResult]:
    """Cross-validate every (generator, router, feature set); features are built once per generator."""
    df = validate_router_dataset(df) if "label" in df.columns else df
    pairs = plan(routers, feature_sets)
    for generator, part in df.groupby("generator", sort=True):
        part = part.reset_index(drop=True)
        features = build_features(part, "qc", encoder)
        for router, fs in pairs:
            yield cross_validate(part, router, fs, features=features, n_splits=n_splits, seed=seed,
                                 router_params=(router_params or {}).get(router), keep_models=keep_models)


# --------------------------------------------------------------------------------------------
# cost–quality


def fixed_paradigm_points(df: pd.DataFrame) -> pd.DataFrame:
    """Mean tokens and correct rate of always running each paradigm."""
    rows = [{"strategy": p, "kind": "fixed", "lam": np.nan, "avg_tokens": float(df[f"tokens__{p}"].mean()),
             "correct_rate": float(df[f"correct__{p}"].mean())} for p in paradigms_of(df)]
    return pd.DataFrame(rows)


def cost_quality_curve(
    df: pd.DataFrame,
    router: str,
    feature_set: str = "qc",
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    *,
    encoder: Encoder | None = None,
    features: Features | None = None,
    n_splits: int = 5,
    seed: int = 0,
    router_params: dict | None = None,
    base: CVResult | None = None,
) -> pd.DataFrame:
    """The router's (avg tokens, correct rate) when trained on cost-aware labels for each λ,
    with the fixed paradigms and the λ-oracle for reference. ``base`` (a λ = 0 result) is reused."""
    df = df.reset_index(drop=True)
    if features is None:
        features = build_features(df, "qc", encoder)
    scale = token_scale_of(df)
    paradigms = paradigms_of(df)
    rows = []
    for lam in lambdas:
        y = cost_aware_labels(df, lam, scale)
        if base is not None and lam == 0.0:
            res = base
        else:
            res = cross_validate(df, router, feature_set, features=features, labels=y, n_splits=n_splits, seed=seed,
                                 router_params=router_params, lam=lam)
        m = res.metrics
        rows.append({"strategy": router, "kind": "router", "lam": float(lam), "avg_tokens": m["avg_tokens"],
                     "correct_rate": m["correct_rate"], "routing_accuracy": m["routing_accuracy"]})
        _, c, t = route_outcomes(y, df, fallback_paradigm(y, paradigms, df))
        rows.append({"strategy": "oracle", "kind": "oracle", "lam": float(lam), "avg_tokens": float(t.mean()),
                     "correct_rate": float(c.mean()), "routing_accuracy": 1.0})
    return pd.concat([pd.DataFrame(rows), fixed_paradigm_points(df)], ignore_index=True)


def quality_frontier(costs, qualities, hull: bool = True) -> np.ndarray:
    """Vertices (cost, quality) of the non-decreasing frontier, sorted by cost.

    Points that are dominated (another point is no more expensive and at least as good) are
    dropped; with ``hull=True`` the upper concave hull is taken too (mixing two routers at random
    realises any point on the segment between them, RouterBench's convention)."""
    pts = np.asarray(sorted(zip(np.asarray(costs, float), np.asarray(qualities, float)), key=lambda p: (p[0], -p[1])))
    if len(pts) == 0:
        return pts.reshape(0, 2)
    front = []
    best = -np.inf
    for c, q in pts:
        if q > best:
            front.append((c, q))
            best = q
    front = np.asarray(front)
    if not hull or len(front) <= 2:
        return front
    out: list[tuple[float, float]] = []
    for p in front:  # monotone-chain upper hull (cost increasing, quality increasing)
        while len(out) >= 2:
            (x1, y1), (x2, y2) = out[-2], out[-1]
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) >= 0:  # out[-1] on or below the chord
                out.pop()
            else:
                break
        out.append((float(p[0]), float(p[1])))
    return np.asarray(out)


def aiq(costs, qualities, cost_range: tuple[float, float] | None = None, hull: bool = True) -> float:
    """Area under the non-decreasing quality-vs-cost frontier over the normalised cost range.

    Costs are mapped to [0, 1] by ``cost_range`` (default: the min and max of ``costs``). Below
    the cheapest frontier point the quality is 0 (nothing is achievable); after the last point
    it stays at its quality. Between vertices the frontier is linear (``hull=True``) or a step
    (``hull=False``: only the points themselves are achievable)."""
    costs = np.asarray(costs, float)
    qualities = np.asarray(qualities, float)
    if len(costs) == 0:
        raise ValueError("aiq needs at least one (cost, quality) point")
    lo, hi = cost_range if cost_range is not None else (costs.min(), costs.max())
    if hi <= lo:
        # a single cost: the frontier is a constant at the best quality over a unit range
        return float(qualities.max())
    x = (costs - lo) / (hi - lo)
    front = quality_frontier(x, qualities, hull=hull)
    front = front[(front[:, 0] <= 1.0)]
    if len(front) == 0:
        return 0.0
    area = 0.0
    xs, ys = np.clip(front[:, 0], 0.0, 1.0), front[:, 1]
    for i in range(len(xs) - 1):
        if hull:
            area += (xs[i + 1] - xs[i]) * (ys[i] + ys[i + 1]) / 2.0
        else:
            area += (xs[i + 1] - xs[i]) * ys[i]
    area += (1.0 - xs[-1]) * ys[-1]
    return float(area)
