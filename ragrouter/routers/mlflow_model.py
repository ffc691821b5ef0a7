"""A trained router as an MLflow model, in its own flavour.

Every router is saved with :func:`save_router_model` as an MLflow model folder (``MLmodel``, a
signature, the model) and logged as the run's ``model`` artefact, so
``mlflow.pyfunc.load_model("runs:/<run id>/model")`` — and ``mlflow models serve`` — give a
router that maps an input frame to class probabilities:

* classical routers (LR, SVM, XGBoost, MLP) with the **scikit-learn flavour**
  (``mlflow.sklearn``; ``MLmodel`` flavours ``sklearn`` and ``python_function``): the fitted
  object is one Pipeline on the input frame (:mod:`ragrouter.routers.classical`; XGBoost's
  ``XGBClassifier`` sits inside it, so it is the sklearn flavour too, not ``mlflow.xgboost``),
  logged with ``pyfunc_predict_fn="predict_proba"`` in MLflow's default ``skops`` format (no
  pickle; :func:`skops_trusted_types` names the XGBoost/ragrouter types it trusts): its pyfunc ``predict`` returns an
  ``(n, k)`` array of probabilities whose columns are the model's metadata ``classes`` (the
  paradigm names, in order — XGBoost's class indices decode through it);
  ``mlflow.sklearn.load_model`` gives the Pipeline itself;
* neural routers and baselines as a **pyfunc** :class:`RouterModel` wrapping the fitted
  :class:`~ragrouter.routers.base.Router`; ``predict`` returns a frame with one probability
  column per class (the same ``classes``).

:func:`class_probabilities` reads either as a frame with the class names as columns (what
``ask`` uses). The input frame (:func:`model_input`, :mod:`ragrouter.routers.inputs`) is what
the router saw in training, by column name: ``query_type``, the six indicators of
``ragrouter.routers.dataset.INDICATORS`` and, for a router on a text encoder, the query
embedding as ``q_0 … q_{d-1}`` (the encoder itself is not inside the model: it may be a remote
endpoint; its name is the model's metadata ``encoder``).

The pickled models refer to ragrouter's classes (the SVM's estimator, the neural routers), so
loading or serving one needs ragrouter importable (and the venv on PATH, for uvicorn):
``PATH=<repo>/.venv/bin:$PATH PYTHONPATH=<repo> mlflow models serve -m
<model dir> --env-manager local``.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import mlflow.pyfunc  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ragrouter.paths import DATA_ROOT
from ragrouter.routers.features import Features  # noqa: E402
from ragrouter.routers.inputs import features_from_frame, frame_from_features, model_input  # noqa: E402,F401


class RouterModel(mlflow.pyfunc.PythonModel):
    """pyfunc wrapper of a fitted :class:`ragrouter.routers.base.Router`."""

    def __init__(self, router, feature_set: str, encoder: str):
        self.router = router
        self.feature_set = feature_set
        self.encoder = encoder

    @property
    def classes(self) -> list[str]:
        return [str(c) for c in self.router.classes_]

    # a pd.DataFrame hint: the signature validates (an untyped predict warned "Add type hints ...")
    def predict(self, context, model_input: pd.DataFrame, params=None):  # noqa: D401 - MLflow's signature
        frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
        feats = features_from_frame(frame, self.feature_set if self.feature_set != "none" else "qc", self.encoder)
        proba = self.router.predict_proba(feats)
        return pd.DataFrame(proba, columns=self.classes)


TRUSTED_MODULES = ("sklearn.", "xgboost.", "ragrouter.")


def skops_trusted_types(pipeline) -> list[str]:
    """The types outside scikit-learn/NumPy that skops must be told to trust to load
    ``pipeline``: XGBoost's classifier and booster, ragrouter's SVM pieces, scikit-learn
    internals skops does not list (the SVM calibration's). Anything else
    is refused (a type nobody vetted would load without a word otherwise)."""
    import skops.io

    found = skops.io.get_untrusted_types(data=skops.io.dumps(pipeline))
    other = [t for t in found if not t.startswith(TRUSTED_MODULES)]
    if other:
        raise ValueError(f"router pipeline holds types skops does not trust: {', '.join(other)}")
    return sorted(found)


def pip_requirements(with_skops: bool = False) -> list[str]:
    """The packages a served router needs (pinned as in requirements.txt; ``skops``, which
    loads the scikit-learn flavour, at the installed version: MLflow requires it)."""
    wanted = ("mlflow", "scikit-learn", "xgboost-cpu", "torch", "numpy", "pandas")
    out = []
    req = DATA_ROOT / "requirements.txt"
    for line in req.read_text().splitlines() if req.exists() else []:
        name = line.split("==")[0].strip()
        if name in wanted:
            out.append(line.strip())
    if with_skops:
        from importlib.metadata import version

        out.append(f"skops=={version('skops')}")
    return out


def class_probabilities(model, frame: pd.DataFrame) -> pd.DataFrame:
    """``model.predict(frame)`` of a loaded router (either flavour) as a frame with one
    probability column per class, named by the model's metadata ``classes``."""
    out = model.predict(frame)
    if isinstance(out, pd.DataFrame):
        return out
    classes = str((model.metadata.metadata or {}).get("classes", "")).split(",")
    proba = np.asarray(out, dtype=np.float64)
    if proba.ndim == 1:
        proba = proba[:, None]
    if proba.shape[1] != len(classes):
        raise ValueError(f"router model returned {proba.shape[1]} probability columns for {len(classes)} classes "
                         f"({','.join(classes)})")
    return pd.DataFrame(proba, columns=classes)


def in_memory_probabilities(router, feature_set: str, encoder: str, features: Features) -> pd.DataFrame:
    """What the fitted ``router`` predicts for ``features`` through the same path its saved
    model takes (the Pipeline on the input frame, or :class:`RouterModel`), as a frame."""
    pipeline = getattr(router, "pipeline", None)
    if pipeline is not None:
        frame = frame_from_features(features, with_embedding=False)
        return pd.DataFrame(pipeline.predict_proba(frame), columns=[str(c) for c in router.classes_])
    return RouterModel(router, feature_set, encoder).predict(None, frame_from_features(features))


def save_router_model(path: str | Path, router, feature_set: str, encoder: str, example: Features,
                      metadata: dict | None = None) -> Path:
    """Save ``router`` as an MLflow model folder at ``path`` with a signature inferred from
    ``example`` (a few training rows): the sklearn flavour for a router with a fitted
    ``pipeline`` (the classical ones), else a pyfunc :class:`RouterModel`."""
    import logging

    from mlflow.models import infer_signature

    classes = [str(c) for c in router.classes_]
    meta = {"router": router.name, "features": feature_set, "encoder": encoder, "classes": ",".join(classes),
            **(metadata or {})}
    pipeline = getattr(router, "pipeline", None)
    if pipeline is not None:
        import mlflow.sklearn as mlflow_sklearn

        frame = frame_from_features(example, with_embedding=False)
        signature = infer_signature(frame, pipeline.predict_proba(frame))
        meta["output"] = "probabilities, one column per class of 'classes'"
        mlflow_sklearn.save_model(pipeline, str(path), signature=signature,
                                  pip_requirements=pip_requirements(with_skops=True),
                                  pyfunc_predict_fn="predict_proba", metadata=meta,
                                  serialization_format=mlflow_sklearn.SERIALIZATION_FORMAT_SKOPS,
                                  skops_trusted_types=skops_trusted_types(pipeline))
        return Path(path)
    wrapper = RouterModel(router, feature_set, encoder)
    frame = frame_from_features(example)
    signature = infer_signature(frame, wrapper.predict(None, frame))
    logging.getLogger("mlflow.pyfunc").setLevel(logging.ERROR)  # the CloudPickle notice, once per router
    mlflow.pyfunc.save_model(str(path), python_model=wrapper, signature=signature,
                             pip_requirements=pip_requirements(), metadata=meta)
    return Path(path)
