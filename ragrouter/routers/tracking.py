"""MLflow tracking of router cross-validation, and the MLflow UI as a local subprocess.

One MLflow run per (router, features, encoder, generator), with one nested run per fold:

* parent params: the router's hyperparameters, ``router``, ``features``, ``encoder``,
  ``generator``, ``n_splits``, ``seed``, ``n_rows``, ``classes``, ``paradigms``;
  parent metrics: fold means (and ``_std``) of every metric, ``aiq`` / ``aiq_fixed`` (area
  under the cost–quality frontier of the router's λ sweep / of the fixed paradigms), fit time;
* fold runs (tag ``mlflow.parentRunId``): fold params and metrics;
* artefacts: ``confusion_matrix.png``, ``cost_quality.png`` (+ ``cost_quality.csv``),
  ``fold_metrics.csv``, and ``model/model.pkl`` (the router refitted on all rows of the
  generator; a pickle, load it with :func:`load_model`) with ``model/model_info.json``.

The client API (``MlflowClient``) is used throughout, so no global MLflow state is touched.
Default store: ``sqlite:///<repo>/mlflow/mlflow.db`` with artefacts in ``<repo>/mlflow/artifacts``.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, NamedTuple, Sequence
from urllib.parse import urlparse

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ragrouter.paths import REPO_ROOT  # noqa: E402
from ragrouter.routers.dataset import paradigms_of, validate_router_dataset  # noqa: E402
from ragrouter.routers.evaluate import (  # noqa: E402
    METRICS, CVResult, aiq, cost_quality_curve, cross_validate, fallback_paradigm, fixed_paradigm_points, plan,
    route_outcomes,
)
from ragrouter.routers.features import Encoder, Features, build_features  # noqa: E402
from ragrouter.routers.registry import ROUTERS, make_router  # noqa: E402

PREDICTION_COLUMNS = ("query_id", "generator", "router", "features", "encoder", "fold", "predicted",
                      "probabilities", "true_label", "run_id")


class TrackingOutput(NamedTuple):
    results: pd.DataFrame  # one row per run
    predictions: pd.DataFrame  # one row per (run, dataset row): PREDICTION_COLUMNS


def default_tracking_uri() -> str:
    return f"sqlite:///{REPO_ROOT / 'mlflow' / 'mlflow.db'}"


def default_artifact_location(tracking_uri: str) -> str | None:
    """``<folder of the SQLite file>/artifacts`` for a SQLite store, else ``None`` (server decides)."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri[len("sqlite:///"):])
        return (db.parent / "artifacts").resolve().as_uri()
    if tracking_uri.startswith("file:"):
        return None
    return None


def _client(tracking_uri: str):
    from mlflow.tracking import MlflowClient

    if tracking_uri.startswith("sqlite:///"):
        Path(tracking_uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=tracking_uri)


def get_or_create_experiment(client, name: str, artifact_location: str | None) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    if artifact_location and artifact_location.startswith("file:"):
        Path(urlparse(artifact_location).path).mkdir(parents=True, exist_ok=True)
    return client.create_experiment(name, artifact_location=artifact_location)


def _log(client, run_id: str, params: dict | None = None, metrics: dict | None = None, tags: dict | None = None) -> None:
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    client.log_batch(
        run_id,
        metrics=[Metric(k, float(v), now, 0) for k, v in (metrics or {}).items() if v is not None and np.isfinite(v)],
        params=[Param(k, str(v)[:6000]) for k, v in (params or {}).items()],
        tags=[RunTag(k, str(v)) for k, v in (tags or {}).items()],
    )


def load_model(path: str | Path):
    """Unpickle a router logged as ``model/model.pkl`` (only load files you trust)."""
    with open(path, "rb") as fh:
        return pickle.load(fh)


def _refit(res: CVResult, part: pd.DataFrame, features: Features, seed: int, router_params: dict | None):
    model = make_router(res.router, seed=seed, **(router_params or {}))
    fs = res.feature_set if res.feature_set != "none" else "qc"
    model.fit(features.with_feature_set(fs), part["label"].to_numpy(str), part)
    return model


def _log_cv_result(client, experiment_id: str, res: CVResult, part: pd.DataFrame, features: Features, *,
                   n_splits: int, seed: int, lambdas: Sequence[float] | None, log_models: bool,
                   router_params: dict | None) -> dict:
    from ragrouter.routers.plots import confusion_png, cost_quality_png

    name = f"{res.router}|{res.feature_set}|{res.encoder}|{res.generator}"
    tags = {"ragrouter.kind": "router-cv", "router": res.router, "features": res.feature_set,
            "encoder": res.encoder, "generator": res.generator, "family": ROUTERS[res.router].family}
    parent = client.create_run(experiment_id, run_name=name, tags=tags)
    pid = parent.info.run_id
    try:
        params = {**{f"router.{k}": v for k, v in res.params.items()},
                  "router": res.router, "features": res.feature_set, "encoder": res.encoder,
                  "generator": res.generator, "n_splits": n_splits, "seed": seed, "n_rows": len(part),
                  "classes": ",".join(res.classes), "paradigms": ",".join(paradigms_of(part))}
        # cost–quality: the router's λ sweep (λ = 0 is this CV) against fixed paradigms
        if lambdas and any(lam != 0.0 for lam in lambdas):
            cq = cost_quality_curve(part, res.router, res.feature_set, lambdas, features=features,
                                    n_splits=n_splits, seed=seed, router_params=router_params, base=res)
        else:
            m = res.metrics
            y = part["label"].to_numpy(str)
            _, c, t = route_outcomes(y, part, fallback_paradigm(y, paradigms_of(part), part))
            cq = pd.concat([
                pd.DataFrame([{"strategy": res.router, "kind": "router", "lam": 0.0, "avg_tokens": m["avg_tokens"],
                               "correct_rate": m["correct_rate"], "routing_accuracy": m["routing_accuracy"]},
                              {"strategy": "oracle", "kind": "oracle", "lam": 0.0, "avg_tokens": float(t.mean()),
                               "correct_rate": float(c.mean()), "routing_accuracy": 1.0}]),
                fixed_paradigm_points(part)], ignore_index=True)
        rng = (float(cq["avg_tokens"].min()), float(cq["avg_tokens"].max()))
        router_pts = cq[cq["kind"] == "router"]
        fixed_pts = cq[cq["kind"] == "fixed"]
        extra = {"aiq": aiq(router_pts["avg_tokens"], router_pts["correct_rate"], rng),
                 "aiq_fixed": aiq(fixed_pts["avg_tokens"], fixed_pts["correct_rate"], rng),
                 "fit_seconds": res.fit_seconds, "predict_seconds": res.predict_seconds}
        _log(client, pid, params=params, metrics={**res.metrics, **extra})
        for _, row in res.fold_metrics.iterrows():
            k = int(row["fold"])
            fold_run = client.create_run(experiment_id, run_name=f"{name}|fold{k}",
                                         tags={**tags, "ragrouter.kind": "router-cv-fold", "mlflow.parentRunId": pid, "fold": k})
            _log(client, fold_run.info.run_id,
                 params={"fold": k, "n_train": int(row["n_train"]), "n_test": int(row["n_test"]), "fallback": row["fallback"]},
                 metrics={m: row[m] for m in (*METRICS, "fit_seconds")})
            client.set_terminated(fold_run.info.run_id, "FINISHED")
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            confusion_png(res.confusion(), tmp / "confusion_matrix.png", title=name)
            cost_quality_png(cq, tmp / "cost_quality.png", title=name)
            cq.to_csv(tmp / "cost_quality.csv", index=False)
            res.fold_metrics.to_csv(tmp / "fold_metrics.csv", index=False)
            for f in ("confusion_matrix.png", "cost_quality.png", "cost_quality.csv", "fold_metrics.csv"):
                client.log_artifact(pid, str(tmp / f))
            if log_models:
                model = _refit(res, part, features, seed, router_params)
                mdir = tmp / "model"
                mdir.mkdir()
                with open(mdir / "model.pkl", "wb") as fh:
                    pickle.dump(model, fh)
                (mdir / "model_info.json").write_text(json.dumps({
                    "router": res.router, "features": res.feature_set, "encoder": res.encoder,
                    "generator": res.generator, "classes": [str(c) for c in model.classes_],
                    "params": {k: (v if isinstance(v, (int, float, str, bool)) or v is None else str(v)) for k, v in model.get_params().items()},
                }, indent=2))
                client.log_artifacts(pid, str(mdir), artifact_path="model")
        client.set_terminated(pid, "FINISHED")
    except BaseException:
        client.set_terminated(pid, "FAILED")
        raise
    return {"run_id": pid, **extra}


def train_and_track(
    df: pd.DataFrame,
    routers: Sequence[str],
    feature_sets: Sequence[str] = ("q", "c", "qc"),
    tracking_uri: str | None = None,
    experiment: str = "ragrouter-routers",
    seed: int = 0,
    *,
    encoder: Encoder | None = None,
    n_splits: int = 5,
    lambdas: Sequence[float] | None = None,
    log_models: bool = True,
    router_params: dict[str, dict] | None = None,
    artifact_location: str | None = None,
    progress: Callable[[CVResult], None] | None = None,
) -> TrackingOutput:
    """Cross-validate every (generator, router, feature set) and log each to MLflow.

    Returns :class:`TrackingOutput` ``(results, predictions)``: ``results`` has one row per run
    (``router, features, encoder, generator, run_id, n_rows``, every metric and its ``_std``,
    ``aiq``, ``aiq_fixed``, ``fit_seconds``); ``predictions`` has one row per (run, query) with
    :data:`PREDICTION_COLUMNS` (``probabilities`` is a JSON object class → probability;
    ``fold`` is the CV fold that predicted the row) for the ``router_predictions`` table.
    ``lambdas`` (e.g. ``evaluate.DEFAULT_LAMBDAS``) adds a cost-aware λ sweep per run (one
    more CV per λ ≠ 0) for the cost–quality plot and ``aiq``.
    """
    df = validate_router_dataset(df)
    tracking_uri = tracking_uri or default_tracking_uri()
    client = _client(tracking_uri)
    art = artifact_location or default_artifact_location(tracking_uri)
    experiment_id = get_or_create_experiment(client, experiment, art)
    rows, preds = [], []
    features_by_gen: dict[str, tuple[pd.DataFrame, Features]] = {}
    for generator, part in df.groupby("generator", sort=True):
        part = part.reset_index(drop=True)
        features_by_gen[str(generator)] = (part, build_features(part, "qc", encoder))
    for generator, (part, features) in features_by_gen.items():
        for res in _iter_one(part, features, routers, feature_sets, n_splits, seed, router_params):
            logged = _log_cv_result(client, experiment_id, res, part, features, n_splits=n_splits, seed=seed,
                                    lambdas=lambdas, log_models=log_models,
                                    router_params=(router_params or {}).get(res.router))
            rows.append({"router": res.router, "features": res.feature_set, "encoder": res.encoder,
                         "generator": res.generator, "run_id": logged["run_id"], "n_rows": len(part),
                         **res.metrics, "aiq": logged["aiq"], "aiq_fixed": logged["aiq_fixed"],
                         "fit_seconds": res.fit_seconds})
            p = res.predictions.copy()
            p["run_id"] = logged["run_id"]
            preds.append(p[list(PREDICTION_COLUMNS)])
            if progress is not None:
                progress(res)
    results = pd.DataFrame(rows)
    predictions = pd.concat(preds, ignore_index=True) if preds else pd.DataFrame(columns=list(PREDICTION_COLUMNS))
    return TrackingOutput(results, predictions)


def _iter_one(part, features, routers, feature_sets, n_splits, seed, router_params):
    for router, fs in plan(routers, feature_sets):
        yield cross_validate(part, router, fs, features=features, n_splits=n_splits, seed=seed,
                             router_params=(router_params or {}).get(router))


# --------------------------------------------------------------------------------------------
# UI


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def start_ui(
    tracking_uri: str | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    timeout: float = 120.0,
    artifact_location: str | None = None,
    log_path: str | Path | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start ``mlflow server`` (UI + REST API) on ``host:port`` (0 = a free port) as a subprocess
    in its own process group, and return ``(process, url)`` once ``/health`` answers.

    Stop it with :func:`stop_ui`. Output goes to ``log_path`` (default: a temporary file)."""
    tracking_uri = tracking_uri or default_tracking_uri()
    if tracking_uri.startswith("sqlite:///"):
        Path(tracking_uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    port = port or _free_port(host)
    art = artifact_location or default_artifact_location(tracking_uri)
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", tracking_uri,
           "--host", host, "--port", str(port), "--workers", "1"]
    if art:
        cmd += ["--default-artifact-root", art, "--no-serve-artifacts"]
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="mlflow-ui-", suffix=".log")[1])
    log = open(log_path, "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    log.close()
    url = f"http://{host}:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"mlflow server exited with status {proc.returncode} (log {log_path}):\n{tail}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    proc.log_path = str(log_path)  # type: ignore[attr-defined]
                    return proc, url
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(0.5)
    stop_ui(proc)
    raise TimeoutError(f"mlflow server did not answer on {url} within {timeout:.0f} s (log {log_path})")


def stop_ui(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """Terminate the server's process group (the server and its workers only)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)
