"""Traditional ML routers (paper Tab. 18): LR, SVM, XGBoost, MLP on the classical features.

Inputs are :meth:`Features.classical` — one-hot query type and/or the six raw corpus indicators —
standardised inside each pipeline (fitted on the training fold only).
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.calibration import CalibratedClassifierCV
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from ragrouter.routers.base import Router
from ragrouter.routers.features import Features


class SklearnRouter(Router):
    """A scikit-learn classifier on the classical features."""

    family = "classical"

    @abstractmethod
    def _make(self):
        """The unfitted scikit-learn / XGBoost estimator."""

    def _fit(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> None:
        if len(self.classes_) == 1:  # nothing to learn
            self.model_ = None
            return
        self.model_ = self._make_for(y)
        self.model_.fit(X.classical(), y)
        if not np.array_equal(np.asarray(self.model_.classes_).astype(str), self.classes_):
            raise RuntimeError(f"router {self.name!r}: estimator classes differ from the labels")

    def _make_for(self, y: np.ndarray):
        """The estimator for one training fold's labels (default: :meth:`_make`)."""
        return self._make()

    def _predict_proba(self, X: Features) -> np.ndarray:
        if self.model_ is None:
            return np.ones((len(X), 1))
        return self.model_.predict_proba(X.classical())


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
    calibration on decision values from a 5-fold CV of the training rows, then one SVC on all of
    them), with the SVC fitted on weighted distinct rows (:class:`WeightedDedupSVC`).
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

    def _fit(self, X, y, meta):
        if len(self.classes_) == 1:
            self.model_ = None
            return
        self.model_ = self._make(y)
        self.model_.fit(X.classical(), y)


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


class XGBoostRouter(Router):
    """XGBoost (``xgboost-cpu``): 100 trees of depth 6, histogram method.

    ``n_jobs=1`` by default: on the shared 2-core machine ``n_jobs=2`` made these small fits
    10× slower whenever another process was busy (measured: 5 fits on 320 rows, 0.4 s vs 5.7 s).
    """

    name = "xgboost"
    family = "classical"

    def __init__(self, seed: int = 0, n_estimators: int = 100, max_depth: int = 6, learning_rate: float = 0.1, n_jobs: int = 1):
        super().__init__(seed, n_estimators=n_estimators, max_depth=max_depth, learning_rate=learning_rate, n_jobs=n_jobs)

    def _fit(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> None:
        self.model_ = None
        if len(self.classes_) == 1:
            return
        from xgboost import XGBClassifier

        codes = np.searchsorted(self.classes_, y)
        self.model_ = XGBClassifier(
            n_estimators=self.params["n_estimators"], max_depth=self.params["max_depth"],
            learning_rate=self.params["learning_rate"], n_jobs=self.params["n_jobs"],
            tree_method="hist", random_state=self.seed, verbosity=0,
        )
        self.model_.fit(X.classical(), codes)

    def _predict_proba(self, X: Features) -> np.ndarray:
        if self.model_ is None:
            return np.ones((len(X), 1))
        proba = self.model_.predict_proba(X.classical())
        if proba.ndim == 1 or proba.shape[1] == 1:  # binary case returns one column in some versions
            p1 = proba.reshape(-1)
            proba = np.stack([1 - p1, p1], axis=1)
        return proba
