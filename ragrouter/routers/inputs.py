"""The router's input frame: what a logged router model takes (and what the classical
routers' scikit-learn pipelines are fitted on), by column name.

``query_type`` (factual / reasoning / summary), the six corpus indicators of
``ragrouter.routers.dataset.INDICATORS`` and, for a router on a text encoder, the query
embedding as ``q_0 … q_{d-1}``. Light (no MLflow import), so the routers can use it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ragrouter.routers.dataset import INDICATORS
from ragrouter.routers.features import ONEHOT, Features, one_hot_query_type

QUERY_TYPE_COLUMN = "query_type"


def model_input(query_type, indicators: pd.DataFrame | np.ndarray, q_emb: np.ndarray | None = None) -> pd.DataFrame:
    """The input frame for rows of (query type, the six indicators[, embedding])."""
    ind = np.asarray(indicators, dtype=np.float64)
    frame = pd.DataFrame({QUERY_TYPE_COLUMN: np.asarray(query_type).astype(str)})
    for j, name in enumerate(INDICATORS):
        frame[name] = ind[:, j]
    if q_emb is not None:
        emb = np.asarray(q_emb, dtype=np.float64)
        frame = pd.concat([frame, pd.DataFrame(emb, columns=[f"q_{k}" for k in range(emb.shape[1])])], axis=1)
    return frame


def frame_from_features(features: Features, with_embedding: bool = True) -> pd.DataFrame:
    """The input frame of ``features`` (without the ``q_*`` columns when ``with_embedding`` is off)."""
    return model_input(features.query_type, features.c_raw, features.q_emb if with_embedding else None)


def features_from_frame(frame: pd.DataFrame, feature_set: str, encoder: str) -> Features:
    """The :class:`Features` of an input frame (the inverse of :func:`frame_from_features`)."""
    qcols = [c for c in frame.columns if c.startswith("q_") and c[2:].isdigit()]
    qcols.sort(key=lambda c: int(c[2:]))
    q_emb = frame[qcols].to_numpy(np.float32) if qcols else None
    return Features(feature_set=feature_set, query_type=frame[QUERY_TYPE_COLUMN].astype(str).to_numpy(),
                    q_onehot=one_hot_query_type(frame[QUERY_TYPE_COLUMN]),
                    c_raw=frame[list(INDICATORS)].to_numpy(np.float64), q_emb=q_emb,
                    encoder_name=encoder if q_emb is not None else ONEHOT)
