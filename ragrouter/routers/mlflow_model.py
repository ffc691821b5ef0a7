"""A trained router as an MLflow ``pyfunc`` model.

Every router is saved with :func:`save_router_model` as an MLflow model folder (``MLmodel``,
a signature, the pickled :class:`RouterModel`) and logged as the run's ``model`` artefact, so
``mlflow.pyfunc.load_model("runs:/<run id>/model")`` — and ``mlflow models serve`` — give a
router that maps a feature frame to class probabilities.

The input frame (:func:`model_input`) is what the router saw in training, by column name:
``query_type`` (factual / reasoning / summary), the six corpus indicators of
``ragrouter.routers.dataset.INDICATORS`` and, for a router on a text encoder, the query
embedding as ``q_0 … q_{d-1}`` (the encoder itself is not inside the model: it may be a remote
endpoint; its name is the model's metadata ``encoder``). The output is a frame with one
probability column per class (the router's ``classes_``).

All routers use this one flavour: the classical routers wrap a scikit-learn / XGBoost
pipeline on features the wrapper derives from the frame (one-hot type, raw indicators), which
the sklearn/xgboost flavours could not derive themselves.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import mlflow.pyfunc  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ragrouter.routers.dataset import INDICATORS  # noqa: E402
from ragrouter.routers.features import ONEHOT, Features, one_hot_query_type  # noqa: E402


def model_input(query_type, indicators: pd.DataFrame | np.ndarray, q_emb: np.ndarray | None = None) -> pd.DataFrame:
    """The pyfunc input frame for rows of (query type, the six indicators[, embedding])."""
    ind = np.asarray(indicators, dtype=np.float64)
    frame = pd.DataFrame({"query_type": np.asarray(query_type).astype(str)})
    for j, name in enumerate(INDICATORS):
        frame[name] = ind[:, j]
    if q_emb is not None:
        emb = np.asarray(q_emb, dtype=np.float64)
        frame = pd.concat([frame, pd.DataFrame(emb, columns=[f"q_{k}" for k in range(emb.shape[1])])], axis=1)
    return frame


def frame_from_features(features: Features) -> pd.DataFrame:
    return model_input(features.query_type, features.c_raw, features.q_emb)


def features_from_frame(frame: pd.DataFrame, feature_set: str, encoder: str) -> Features:
    qcols = [c for c in frame.columns if c.startswith("q_") and c[2:].isdigit()]
    qcols.sort(key=lambda c: int(c[2:]))
    q_emb = frame[qcols].to_numpy(np.float32) if qcols else None
    return Features(feature_set=feature_set, query_type=frame["query_type"].astype(str).to_numpy(),
                    q_onehot=one_hot_query_type(frame["query_type"]),
                    c_raw=frame[list(INDICATORS)].to_numpy(np.float64), q_emb=q_emb,
                    encoder_name=encoder if q_emb is not None else ONEHOT)


import warnings  # noqa: E402

warnings.filterwarnings("ignore", message=".*Add type hints to the `predict` method.*")


class RouterModel(mlflow.pyfunc.PythonModel):
    """pyfunc wrapper of a fitted :class:`ragrouter.routers.base.Router`."""

    def __init__(self, router, feature_set: str, encoder: str):
        self.router = router
        self.feature_set = feature_set
        self.encoder = encoder

    @property
    def classes(self) -> list[str]:
        return [str(c) for c in self.router.classes_]

    def predict(self, context, model_input, params=None):  # noqa: D401 - MLflow's signature
        frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
        feats = features_from_frame(frame, self.feature_set if self.feature_set != "none" else "qc", self.encoder)
        proba = self.router.predict_proba(feats)
        return pd.DataFrame(proba, columns=self.classes)


def pip_requirements() -> list[str]:
    """The packages a served router needs (pinned as in requirements.txt)."""
    from ragrouter.paths import REPO_ROOT

    wanted = ("mlflow", "scikit-learn", "xgboost-cpu", "torch", "numpy", "pandas")
    out = []
    req = REPO_ROOT / "requirements.txt"
    for line in req.read_text().splitlines() if req.exists() else []:
        name = line.split("==")[0].strip()
        if name in wanted:
            out.append(line.strip())
    return out


def save_router_model(path: str | Path, router, feature_set: str, encoder: str, example: Features,
                      metadata: dict | None = None) -> Path:
    """Save ``router`` as a pyfunc model folder at ``path`` with a signature inferred from
    ``example`` (a few training rows)."""
    from mlflow.models import infer_signature

    wrapper = RouterModel(router, feature_set, encoder)
    frame = frame_from_features(example)
    signature = infer_signature(frame, wrapper.predict(None, frame))
    import logging

    logging.getLogger("mlflow.pyfunc").setLevel(logging.ERROR)  # the CloudPickle notice, once per router
    mlflow.pyfunc.save_model(str(path), python_model=wrapper, signature=signature,
                             pip_requirements=pip_requirements(),
                             metadata={"router": router.name, "features": feature_set, "encoder": encoder,
                                       "classes": ",".join(wrapper.classes), **(metadata or {})})
    return Path(path)
