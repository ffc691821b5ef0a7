"""Traditional ML routers (paper Tab. 18): LR, SVM, XGBoost, MLP on the classical features.

Inputs are the classical features — one-hot query type (Q) and/or the six raw corpus indicators
(C), the matrix of :meth:`Features.classical` — standardised inside each pipeline (fitted on the
training fold only).

Each router's fitted object (``model_``) is ONE scikit-learn :class:`~sklearn.pipeline.Pipeline`
that takes the router's input frame (:mod:`ragrouter.routers.inputs`: ``query_type`` and the six
indicators, by column name) and does everything itself: a :class:`ColumnTransformer`
(:func:`input_columns`: one-hot of ``query_type`` over the three types, the indicators passed
through — the same matrix as :meth:`Features.classical`), then the scaler and the estimator.
So ``mlflow.sklearn`` logs it as a plain scikit-learn model (XGBoost's ``XGBClassifier``
inside such a Pipeline too: the ``sklearn`` flavour, not ``mlflow.xgboost``, which logs a bare
booster) whose ``predict_proba`` is the router's. Its classes are the router's ``classes_``
(the paradigm names), except XGBoost's, fitted on their indices into ``classes_``.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.svm import SVC

from ragrouter.routers.base import Router
from ragrouter.routers.dataset import INDICATORS, QUERY_TYPES
from ragrouter.routers.features import Features
from ragrouter.routers.inputs import QUERY_TYPE_COLUMN, frame_from_features


def input_columns(feature_set: str) -> ColumnTransformer:
    """The classical matrix of feature set ``feature_set`` from the input frame: one-hot
    ``query_type`` (Q; an unknown type is all zeros, as :func:`one_hot_query_type`), then the
    six indicators as they are (C)."""
    parts = []
    if "q" in feature_set:
        parts.append(("q", OneHotEncoder(categories=[list(QUERY_TYPES)], handle_unknown="ignore",
                                         sparse_output=False, dtype=np.float64), [QUERY_TYPE_COLUMN]))
    if "c" in feature_set:
        parts.append(("c", "passthrough", list(INDICATORS)))
    if not parts:
        raise ValueError(f"feature set {feature_set!r} has no classical input")
    return ColumnTransformer(parts, remainder="drop", verbose_feature_names_out=False)


def input_frame(X: Features) -> pd.DataFrame:
    """The classical routers' input frame of ``X`` (no embedding columns: they read no text)."""
    return frame_from_features(X, with_embedding=False)


class SklearnRouter(Router):
    """A scikit-learn classifier on the classical features, as one Pipeline on the input frame."""

    family = "classical"

    @abstractmethod
    def _make(self):
        """The unfitted scikit-learn / XGBoost estimator (or Pipeline) on the classical matrix."""

    def _make_for(self, y: np.ndarray):
        """The estimator for one training fold's labels (default: :meth:`_make`)."""
        return self._make()

    def _pipeline(self, feature_set: str, estimator) -> Pipeline:
        steps = estimator.steps if isinstance(estimator, Pipeline) else [("classifier", estimator)]
        return Pipeline([("input", input_columns(feature_set)), *steps])

    def _targets(self, y: np.ndarray) -> np.ndarray:
        """What the estimator is fitted on (default: the labels themselves)."""
        return y

    def _fit(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> None:
        if len(self.classes_) == 1:  # nothing to learn
            self.model_ = None
            return
        self.model_ = self._pipeline(X.feature_set, self._make_for(y))
        self.model_.fit(input_frame(X), self._targets(y))
        fitted = np.asarray(self.model_.classes_)
        expected = np.arange(len(self.classes_)) if fitted.dtype.kind in "iu" else self.classes_
        if not np.array_equal(fitted.astype(expected.dtype), expected):
            raise RuntimeError(f"router {self.name!r}: estimator classes differ from the labels")

    def _predict_proba(self, X: Features) -> np.ndarray:
        if self.model_ is None:
            return np.ones((len(X), 1))
        return self.model_.predict_proba(input_frame(X))

    @property
    def pipeline(self) -> Pipeline | None:
        """The fitted Pipeline (input frame → class probabilities in ``classes_`` order), or
        ``None`` when the training rows had one label only."""
        return getattr(self, "model_", None)


class LogisticRegressionRouter(SklearnRouter):
    """Multinomial logistic regression, L2 regularisation (C=1)."""

    name = "lr"

    def __init__(self, seed: int = 0, C: float = 1.0, max_iter: int = 2000):
        super().__init__(seed, C=C, max_iter=max_iter)

    def _make(self):
        return make_pipeline(StandardScaler(), LogisticRegression(C=self.params["C"], max_iter=self.params["max_iter"], random_state=self.seed))


class WeightedDedupSVC(ClassifierMixin, BaseEstimator):
    """RBF ``SVC`` fitted on the distinct (x, y) rows, each weighted by its count.

    Per-sample weights scale C, so this is the same optimisation problem as fitting every
    duplicate, hence the same decision function (checked: max difference ~1e-4, the solver's
    tolerance) — but classical router inputs have only a few distinct rows (≤ 3 query types ×
    a few corpora), so it is 30–80× faster. ``gamma="scale"`` is resolved on all rows.
    """

    def __init__(self, C: float = 1.0, gamma: str | float = "scale", random_state: int | None = None):
        self.C = C
        self.gamma = gamma
        self.random_state = random_state

    def fit(self, X, y, sample_weight=None):
        X = np.asarray(X, dtype=float)
        classes, codes = np.unique(np.asarray(y), return_inverse=True)
        w = np.ones(len(codes)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        rows, inverse = np.unique(np.hstack([X, codes[:, None]]), axis=0, return_inverse=True)
        weights = np.bincount(inverse.ravel(), weights=w)
        gamma = self.gamma
        if gamma == "scale":
            var = X.var()
            gamma = 1.0 / (X.shape[1] * var) if var > 0 else 1.0
        self.svc_ = SVC(kernel="rbf", C=self.C, gamma=gamma, random_state=self.random_state)
        self.svc_.fit(rows[:, :-1], classes[rows[:, -1].astype(int)], sample_weight=weights)
        self.classes_ = self.svc_.classes_
        return self

    def decision_function(self, X):
        return self.svc_.decision_function(np.asarray(X, dtype=float))

    def predict(self, X):
        return self.svc_.predict(np.asarray(X, dtype=float))


class SVMRouter(SklearnRouter):
    """RBF-kernel SVM with Platt-scaled probabilities (paper Tab. 18: ``probability=True``).

    ``SVC(probability=True)`` is deprecated in scikit-learn 1.9; we use its documented
    replacement, ``CalibratedClassifierCV(SVC(), method='sigmoid', ensemble=False)`` (sigmoid
    calibration on decision values from a CV of the training rows: up to 5 folds, fewer when the
    smallest class has fewer rows; then one SVC on all of them), with the SVC fitted on weighted
    distinct rows (:class:`WeightedDedupSVC`).
    """

    name = "svm"

    def __init__(self, seed: int = 0, C: float = 1.0, gamma: str | float = "scale", calibration_folds: int = 5):
        super().__init__(seed, C=C, gamma=gamma, calibration_folds=calibration_folds)

    def _make(self, y: np.ndarray | None = None):
        svc = WeightedDedupSVC(C=self.params["C"], gamma=self.params["gamma"], random_state=self.seed)
        smallest = int(min(np.unique(y, return_counts=True)[1])) if y is not None else self.params["calibration_folds"]
        folds = min(self.params["calibration_folds"], smallest)
        if folds < 2:  # a class with one row: no CV possible, softmax of the decision values instead
            return make_pipeline(StandardScaler(), _SoftmaxDecision(svc))
        cv = StratifiedKFold(folds, shuffle=True, random_state=self.seed)
        return make_pipeline(StandardScaler(), CalibratedClassifierCV(svc, method="sigmoid", cv=cv, ensemble=False))

    def _make_for(self, y: np.ndarray):
        return self._make(y)


class _SoftmaxDecision(ClassifierMixin, BaseEstimator):
    """Probabilities as the softmax of a classifier's (one-vs-rest) decision values."""

    def __init__(self, estimator):
        self.estimator = estimator

    def fit(self, X, y):
        self.estimator.fit(X, y)
        self.classes_ = self.estimator.classes_
        return self

    def predict_proba(self, X):
        d = np.asarray(self.estimator.decision_function(X), dtype=float)
        if d.ndim == 1:
            d = np.stack([-d, d], axis=1)
        e = np.exp(d - d.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)


class MLPRouter(SklearnRouter):
    """scikit-learn MLPClassifier, hidden layers (64, 32), Adam, early stopping on 10 % of the fold
    (when the fold is large enough to hold one out, see ``_fit``)."""

    name = "mlp"

    def __init__(self, seed: int = 0, hidden: tuple[int, ...] = (64, 32), max_iter: int = 200, alpha: float = 1e-4):
        super().__init__(seed, hidden=tuple(hidden), max_iter=max_iter, alpha=alpha)

    VALIDATION_FRACTION = 0.1

    def _make(self, early_stopping: bool = True):
        return make_pipeline(StandardScaler(), MLPClassifier(
            hidden_layer_sizes=self.params["hidden"], max_iter=self.params["max_iter"], alpha=self.params["alpha"],
            early_stopping=early_stopping, validation_fraction=self.VALIDATION_FRACTION, n_iter_no_change=10,
            random_state=self.seed))

    def _make_for(self, y: np.ndarray):
        # Early stopping holds out a stratified 10 %: it needs a row of every class there and two
        # of every class in the whole fold. A fold too small for that (a demo-sized store) trains
        # for max_iter epochs without it instead of failing.
        counts = np.unique(y, return_counts=True)[1]
        enough = counts.min() >= 2 and int(self.VALIDATION_FRACTION * len(y)) >= len(counts)
        return self._make(early_stopping=bool(enough))


class XGBoostRouter(SklearnRouter):
    """XGBoost (``xgboost-cpu``): 100 trees of depth 6, histogram method, fitted on the labels'
    indices into ``classes_`` (XGBoost takes integer classes only).

    ``n_jobs=1`` by default: on the shared 2-core machine ``n_jobs=2`` made these small fits
    10× slower whenever another process was busy (measured: 5 fits on 320 rows, 0.4 s vs 5.7 s).
    """

    name = "xgboost"

    def __init__(self, seed: int = 0, n_estimators: int = 100, max_depth: int = 6, learning_rate: float = 0.1, n_jobs: int = 1):
        super().__init__(seed, n_estimators=n_estimators, max_depth=max_depth, learning_rate=learning_rate, n_jobs=n_jobs)

    def _make(self):
        from xgboost import XGBClassifier

        return XGBClassifier(
            n_estimators=self.params["n_estimators"], max_depth=self.params["max_depth"],
            learning_rate=self.params["learning_rate"], n_jobs=self.params["n_jobs"],
            tree_method="hist", random_state=self.seed, verbosity=0,
        )

    def _targets(self, y: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.classes_, y)

    def _predict_proba(self, X: Features) -> np.ndarray:
        proba = super()._predict_proba(X)
        if self.model_ is not None and (proba.ndim == 1 or proba.shape[1] == 1):
            p1 = proba.reshape(-1)  # binary case returns one column in some versions
            proba = np.stack([1 - p1, p1], axis=1)
        return proba
