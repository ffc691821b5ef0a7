"""The router interface.

A router is fitted on :class:`~ragrouter.routers.features.Features` of the training rows, their
labels, and ``meta`` (the training rows of the router dataset: ``query_type``, ``correct__p``,
``tokens__p``, ``f1__p``), which some routers use (MBA-RAG's rewards, RouterDC's positives).
``predict_proba`` returns an ``(n, len(classes_))`` array; ``predict`` is its arg-max.

A router that needs the true labels at prediction time (the Oracle) sets ``needs_labels = True``
and takes them as the explicit ``labels=`` keyword of ``predict_proba``; the evaluator passes
them only to such routers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import pandas as pd

from ragrouter.routers.features import Features


class Router(ABC):
    """Base class: subclasses implement :meth:`_fit` and :meth:`_predict_proba`."""

    name: str = "router"
    family: str = "classical"  # 'classical' | 'neural' | 'baseline'
    needs_labels: bool = False
    uses_text_encoder: bool = False  # True: the query input is the text embedding when available
    fixed_feature_set: str | None = None  # baselines that ignore the requested feature set

    def __init__(self, seed: int = 0, **params):
        self.seed = int(seed)
        self.params = dict(params)
        self.classes_: np.ndarray = np.array([], dtype=str)

    def get_params(self) -> dict:
        """Hyperparameters, for tracking."""
        return {"seed": self.seed, **self.params}

    def fit(self, X: Features, y, meta: pd.DataFrame | None = None) -> "Router":
        y = np.asarray(y).astype(str)
        if len(y) != len(X):
            raise ValueError(f"router {self.name!r}: {len(X)} feature rows but {len(y)} labels")
        if len(y) == 0:
            raise ValueError(f"router {self.name!r}: cannot fit on zero rows")
        if meta is not None and len(meta) != len(y):
            raise ValueError(f"router {self.name!r}: meta has {len(meta)} rows but there are {len(y)} labels")
        self.classes_ = np.unique(y)
        self._fit(X, y, meta)
        return self

    def predict_proba(self, X: Features, *, labels=None) -> np.ndarray:
        if labels is not None and not self.needs_labels:
            raise TypeError(f"router {self.name!r} does not take labels at prediction time")
        if self.needs_labels:
            if labels is None:
                raise TypeError(f"router {self.name!r} needs the true labels: predict_proba(X, labels=y)")
            proba = self._predict_proba(X, labels=np.asarray(labels).astype(str))
        else:
            proba = self._predict_proba(X)
        proba = np.asarray(proba, dtype=np.float64)
        if proba.shape != (len(X), len(self.classes_)):
            raise RuntimeError(f"router {self.name!r} returned probabilities of shape {proba.shape}, expected {(len(X), len(self.classes_))}")
        return proba

    def predict(self, X: Features, *, labels=None) -> np.ndarray:
        proba = self.predict_proba(X, labels=labels)
        return self.classes_[np.argmax(proba, axis=1)]

    # -- to implement ----------------------------------------------------------------------
    @abstractmethod
    def _fit(self, X: Features, y: np.ndarray, meta: pd.DataFrame | None) -> None:
        """Learn from the training fold."""

    @abstractmethod
    def _predict_proba(self, X: Features, **kw) -> np.ndarray:
        """(n, len(classes_)) probabilities."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"
