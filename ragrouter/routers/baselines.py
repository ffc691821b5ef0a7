"""Baseline routers: Random, Best-fixed, Oracle, and route-by-query-type (paper §4.1)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ragrouter.routers.base import Router
from ragrouter.routers.dataset import NOT_PARADIGMS, best_fixed
from ragrouter.routers.features import Features


class RandomRouter(Router):
    """Uniform over the training classes: each row gets i.i.d. uniform scores (seeded), so the
    arg-max is a uniform draw and the rank of the true class is uniform too."""

    name = "random"
    family = "baseline"
    fixed_feature_set = "none"

    def _fit(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> None:
        self._rng = np.random.default_rng(self.seed)

    def _predict_proba(self, X: Features) -> np.ndarray:
        scores = self._rng.random((len(X), len(self.classes_)))
        return scores / scores.sum(axis=1, keepdims=True)


class BestFixedRouter(Router):
    """Always the globally most frequent *optimal paradigm* of the training labels (paper §4.1):
    ``cannot_answer`` and ``unanswerable`` are no paradigm, so one is chosen only when no training label is a
    paradigm; ties go to the fewest mean tokens, then the paper's order
    (:func:`ragrouter.routers.dataset.best_fixed`). Probabilities are the training label frequencies, with the chosen class lifted to
    the top so that it is the arg-max (and the remaining classes keep their frequency order)."""

    name = "best_fixed"
    family = "baseline"
    fixed_feature_set = "none"

    def _fit(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> None:
        counts = np.array([(y == c).sum() for c in self.classes_], dtype=float)
        paradigm = ~np.isin(self.classes_, NOT_PARADIGMS)
        if paradigm.any():
            names = [str(c) for c in self.classes_[paradigm]]
            tokens = {p: float(meta[f"tokens__{p}"].mean()) for p in names
                      if meta is not None and f"tokens__{p}" in meta.columns}
            choice = best_fixed(dict(zip(names, counts[paradigm])), tokens)  # ties: fewest tokens
            best = int(np.flatnonzero(self.classes_ == choice)[0])
        else:
            best = int(np.argmax(counts))
        counts[best] = counts.max() + 1.0
        self.choice_ = str(self.classes_[best])
        self.prior_ = counts / counts.sum()

    def _predict_proba(self, X: Features) -> np.ndarray:
        return np.tile(self.prior_, (len(X), 1))


class OracleRouter(Router):
    """Returns the true label: ``predict_proba(X, labels=y)`` (one-hot). Labels never seen in
    training are still predicted: they are added to ``classes_`` on the fly."""

    name = "oracle"
    family = "baseline"
    needs_labels = True
    fixed_feature_set = "none"

    def _fit(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> None:
        pass

    def _predict_proba(self, X: Features, labels: np.ndarray) -> np.ndarray:
        if len(labels) != len(X):
            raise ValueError(f"router 'oracle': {len(X)} rows but {len(labels)} labels")
        unseen = np.setdiff1d(np.unique(labels), self.classes_)
        if len(unseen):
            self.classes_ = np.union1d(self.classes_, unseen)
        return (labels[:, None] == self.classes_[None, :]).astype(float)


class ByQueryTypeRouter(Router):
    """The training label distribution per query type (unknown types: the global one)."""

    name = "by_query_type"
    family = "baseline"
    fixed_feature_set = "q"

    def _fit(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> None:
        def dist(mask):
            counts = np.array([(y[mask] == c).sum() for c in self.classes_], dtype=float)
            return counts / max(counts.sum(), 1.0)

        self.global_ = dist(np.ones(len(y), bool))
        self.by_type_ = {t: dist(X.query_type == t) for t in np.unique(X.query_type)}

    def _predict_proba(self, X: Features) -> np.ndarray:
        return np.stack([self.by_type_.get(t, self.global_) for t in X.query_type]) if len(X) else np.zeros((0, len(self.classes_)))
