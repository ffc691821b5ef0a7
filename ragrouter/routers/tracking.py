"""MLflow tracking of router cross-validation, and the MLflow UI as a local subprocess.

One MLflow run per (router, features, encoder, generator) — one row of the runs table per
trained router, named ``xgboost · qc · minilm`` (``· <generator>`` when several generators):

* params: the router's hyperparameters (``router.<name>``), ``router``, ``features``,
  ``encoder``, ``generator``, ``n_splits``, ``seed``, ``n_rows``, ``classes``, ``paradigms``,
  and the run context passed by the caller (``judge``, ``corpora``, ``store_id``,
  ``config_hash``, ``git_commit``, …);
* tags: ``ragrouter.kind = router-cv``, ``router``, ``features``, ``encoder``, ``generator``,
  ``family``, and the context (``ragrouter.store_id``, ``ragrouter.training_session`` — one id
  per ``routers train`` —, ``judge``, ``corpora``, ``config_hash``, ``git_commit``);
* metrics: the headline fold mean of every metric with ``<metric>_std``, the Wilson 95 %
  interval of the per-query rates (``routing_accuracy_ci_low`` …), ``n``; each fold's value
  as ``fold.<metric>`` with step = fold; ``aiq`` / ``aiq_fixed`` only when a λ sweep ran;
* the training frame as an MLflow dataset input (``mlflow.log_input``: name, digest, schema);
* artefacts: ``confusion_matrix.png``, ``cost_quality.png`` (+ ``.csv``), ``fold_metrics.csv``
  ``model/`` — the router refitted on all rows as an MLflow model, the classical ones in the
  scikit-learn flavour, the others as pyfunc (:mod:`ragrouter.routers.mlflow_model`; load any
  with ``mlflow.pyfunc.load_model``) — and ``refit_predictions.csv``, that same fitted
  object's class probabilities for every training row (``query_id`` + one column per class),
  computed in memory before it was saved (a loaded model must reproduce them). The CV
  predictions of the store's ``router_predictions`` are out-of-fold: they come from the fold
  models, which are not logged.

The experiment carries ``mlflow.experimentKind = custom_model_development``, which MLflow 3.17's
UI ignores (it follows the browser's workflow setting, default GenAI): the UI started here
(:func:`start_ui`, :mod:`ragrouter.routers.mlflow_ui`) makes a fresh browser open experiments on
their runs table. Runs carry ``mlflow.source.name``/``type``/``git.commit`` so "Source" is filled.

Relocatable store: see :mod:`ragrouter.routers.mlflow_store` (every open here rebases a copied
folder's artefact URIs; ``routers copy`` makes a copy plain MLflow opens at once).

The client API (``MlflowClient``) is used throughout, so no global MLflow state is touched.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, NamedTuple, Sequence
from urllib.parse import urlparse

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ragrouter import console
from ragrouter.routers.dataset import paradigms_of, validate_router_dataset  # noqa: E402
from ragrouter.routers.evaluate import (  # noqa: E402
    METRICS, CVResult, aiq, cost_quality_curve, cross_validate, fallback_paradigm, fixed_paradigm_points, plan,
    route_outcomes,
)
from ragrouter.routers.features import Encoder, Features, build_features  # noqa: E402
from ragrouter.routers.mlflow_store import (  # noqa: E402,F401  (re-exported: callers name tracking.*)
    default_artifact_location, default_tracking_uri, relocate_store, sqlite_path,
)
from ragrouter.routers.mlflow_ui import source_tags
from ragrouter.routers.registry import ROUTERS, make_router  # noqa: E402

PREDICTION_COLUMNS = ("query_id", "generator", "router", "features", "encoder", "fold", "predicted",
                      "probabilities", "true_label", "run_id")
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
VIEW_KEY = "routers"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"  # MLflow's shared runs-table view (experiment tag)
VIEW_COLUMNS = ("params.`router`", "params.`features`", "params.`encoder`", "params.`judge`",
                "metrics.`routing_accuracy`", "metrics.`routing_accuracy_std`", "metrics.`routing_accuracy_ci_low`",
                "metrics.`routing_accuracy_ci_high`", "metrics.`macro_f1`", "metrics.`mrr`",
                "metrics.`correct_rate`", "metrics.`correct_rate_ci_low`", "metrics.`correct_rate_ci_high`",
                "metrics.`avg_tokens`", "metrics.`n`")


def view_url(base_url: str, experiment_id: str) -> str:
    """The runs table of the experiment opened on the ``routers`` view (R.A, F1, MRR, C.R,
    tokens and their intervals as columns, best routing accuracy first)."""
    return f"{base_url}/#/experiments/{experiment_id}/runs?viewStateShareKey={VIEW_KEY}"
FOLD_PREFIX = "fold."


class TrackingOutput(NamedTuple):
    results: pd.DataFrame  # one row per run
    predictions: pd.DataFrame  # one row per (run, dataset row): PREDICTION_COLUMNS
    folds: pd.DataFrame | None = None  # one row per (run, fold): run key, run_id and every fold metric


def _client(tracking_uri: str):
    from mlflow.tracking import MlflowClient

    db = sqlite_path(tracking_uri)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
        relocate_store(tracking_uri)
    return MlflowClient(tracking_uri=tracking_uri)


def client(tracking_uri: str | None = None):
    """An ``MlflowClient`` on ``tracking_uri`` (default store), after :func:`relocate_store`."""
    return _client(tracking_uri or default_tracking_uri())


def get_or_create_experiment(client, name: str, artifact_location: str | None) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is None:
        if artifact_location and artifact_location.startswith("file:"):
            Path(urlparse(artifact_location).path).mkdir(parents=True, exist_ok=True)
        exp_id = client.create_experiment(name, artifact_location=artifact_location)
    else:
        exp_id = exp.experiment_id
    if (exp is None or exp.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND):
        # MLflow 3 opens an experiment without this tag on its GenAI "Traces" page
        client.set_experiment_tag(exp_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    view = json.dumps({"selectedColumns": list(VIEW_COLUMNS), "orderByKey": "metrics.`routing_accuracy`",
                       "orderByAsc": False})
    if exp is None or exp.tags.get(VIEW_TAG) != view:
        client.set_experiment_tag(exp_id, VIEW_TAG, view)  # a shared view: the URL of view_url()
    return exp_id


def _log(client, run_id: str, params: dict | None = None, metrics: dict | None = None, tags: dict | None = None,
         steps: list[tuple[str, float, int]] | None = None) -> None:
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    ms = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items() if v is not None and np.isfinite(v)]
    ms += [Metric(k, float(v), now, int(step)) for k, v, step in (steps or []) if v is not None and np.isfinite(v)]
    ps = [Param(k, str(v)[:6000]) for k, v in (params or {}).items()]
    ts = [RunTag(k, str(v)) for k, v in (tags or {}).items()]
    for i in range(0, max(len(ms), len(ps), len(ts), 1), 100):  # log_batch limits: 1000 metrics, 100 params
        client.log_batch(run_id, metrics=ms[i:i + 100], params=ps[i:i + 100], tags=ts[i:i + 100])


def load_model(model_uri: str | Path, tracking_uri: str | None = None):
    """A router logged by :func:`train_and_track` (``runs:/<id>/model`` or a model folder/URI)
    as an MLflow pyfunc model (``mlflow.pyfunc.load_model``, either flavour); class
    probabilities by name: ``mlflow_model.class_probabilities(model, frame)``. A ``runs:/`` URI is resolved in ``tracking_uri`` (default: the default
    store), not in MLflow's global tracking URI."""
    import mlflow.pyfunc

    uri = str(model_uri)
    if uri.startswith("runs:/"):
        run_id, _, path = uri[len("runs:/"):].partition("/")
        run = client(tracking_uri).get_run(run_id)
        uri = f"{run.info.artifact_uri.rstrip('/')}/{path or 'model'}"
    return mlflow.pyfunc.load_model(uri)


def run_name(router: str, features: str, encoder: str, generator: str | None = None) -> str:
    """The short run name: ``xgboost · qc · minilm`` (``· generator`` when given)."""
    return " · ".join([router, features, encoder] + ([generator] if generator else []))


def _refit(res: CVResult, part: pd.DataFrame, features: Features, seed: int, router_params: dict | None):
    model = make_router(res.router, seed=seed, **(router_params or {}))
    fs = res.feature_set if res.feature_set != "none" else "qc"
    model.fit(features.with_feature_set(fs), part["label"].to_numpy(str), part)
    return model


def _store_source(uri: str):
    """An MLflow dataset source naming where the router dataset came from (a store id, a file)."""
    from mlflow.data.dataset_source import DatasetSource

    class RagrouterSource(DatasetSource):
        def __init__(self, uri: str):
            self.uri = uri

        @staticmethod
        def _get_source_type() -> str:
            return "ragrouter"

        def load(self, **kwargs):
            return self.uri

        @staticmethod
        def _can_resolve(raw_source) -> bool:
            return False

        @classmethod
        def _resolve(cls, raw_source):
            return cls(str(raw_source))

        def to_dict(self) -> dict:
            return {"uri": self.uri}

        @classmethod
        def from_dict(cls, source_dict):
            return cls(source_dict["uri"])

    return RagrouterSource(uri)


def _log_dataset(client, run_id: str, part: pd.DataFrame, name: str, source: str) -> None:
    """``mlflow.log_input`` of the training frame: name, digest, schema, row count, source."""
    from mlflow.data.pandas_dataset import from_pandas
    from mlflow.entities import DatasetInput, InputTag

    cols = [c for c in part.columns if c != "probabilities"]
    ds = from_pandas(part[cols], source=_store_source(source), targets="label", name=name)
    client.log_inputs(run_id, datasets=[DatasetInput(ds._to_mlflow_entity(),
                                                     tags=[InputTag("mlflow.data.context", "training")])])


def _log_cv_result(client, experiment_id: str, res: CVResult, part: pd.DataFrame, features: Features, *,
                   n_splits: int, seed: int, lambdas: Sequence[float] | None, log_models: bool,
                   router_params: dict | None, context: dict | None = None, with_generator: bool = False) -> dict:
    # deferred (start-up): pulls in mlflow
    from ragrouter.routers.mlflow_model import save_router_model
    # deferred (start-up): pulls in matplotlib
    from ragrouter.routers.plots import confusion_png, cost_quality_png

    context = dict(context or {})
    name = run_name(res.router, res.feature_set, res.encoder, res.generator if with_generator else None)
    session = context.pop("training_session", None)
    store_id = context.get("store_id")
    tags = {"ragrouter.kind": "router-cv", "router": res.router, "features": res.feature_set,
            "encoder": res.encoder, "generator": res.generator, "family": ROUTERS[res.router].family,
            **{k: v for k, v in context.items() if k in ("judge", "corpora", "dataset", "config_hash", "git_commit")}}

    tags.update(source_tags(context.get("git_commit")))
    if store_id:
        tags["ragrouter.store_id"] = store_id
    if session:
        tags["ragrouter.training_session"] = session
    parent = client.create_run(experiment_id, run_name=name, tags=tags)
    pid = parent.info.run_id
    try:
        params = {**{f"router.{k}": v for k, v in res.params.items()},
                  "router": res.router, "features": res.feature_set, "encoder": res.encoder,
                  "generator": res.generator, "n_splits": n_splits, "seed": seed, "n_rows": len(part),
                  "classes": ",".join(res.classes), "paradigms": ",".join(paradigms_of(part)),
                  **{k: v for k, v in context.items() if v is not None}}
        sweep = bool(lambdas and any(lam != 0.0 for lam in lambdas))
        # cost–quality: the router's λ sweep (λ = 0 is this CV) against fixed paradigms
        if sweep:
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
        extra: dict = {"fit_seconds": res.fit_seconds, "predict_seconds": res.predict_seconds}
        if sweep:  # a single point ranks random above oracle: the area needs the sweep
            rng = (float(cq["avg_tokens"].min()), float(cq["avg_tokens"].max()))
            router_pts = cq[cq["kind"] == "router"]
            fixed_pts = cq[cq["kind"] == "fixed"]
            extra["aiq"] = aiq(router_pts["avg_tokens"], router_pts["correct_rate"], rng)
            extra["aiq_fixed"] = aiq(fixed_pts["avg_tokens"], fixed_pts["correct_rate"], rng)
        steps = [(f"{FOLD_PREFIX}{m}", row[m], int(row["fold"]))
                 for _, row in res.fold_metrics.iterrows() for m in (*METRICS, "n_test", "fit_seconds")]
        _log(client, pid, params=params, metrics={**res.metrics, **extra}, steps=steps)
        _log_dataset(client, pid, part, name=str(context.get("dataset") or "router-dataset"),
                     source=str(context.get("dataset_source") or context.get("dataset") or "router-dataset"))
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            confusion_png(res.confusion(), tmp / "confusion_matrix.png", title=name)
            cost_quality_png(cq, tmp / "cost_quality.png", title=name)
            cq.to_csv(tmp / "cost_quality.csv", index=False)
            res.fold_metrics.to_csv(tmp / "fold_metrics.csv", index=False)
            for f in ("confusion_matrix.png", "cost_quality.png", "cost_quality.csv", "fold_metrics.csv"):
                client.log_artifact(pid, str(tmp / f))
            if log_models and not ROUTERS[res.router].needs_labels:
                if res.encoder in ("onehot", "none"):  # the model's input has no embedding columns
                    from dataclasses import replace

                    features = replace(features, q_emb=None, encoder_name="onehot")
                model = _refit(res, part, features, seed, router_params)
                fs = res.feature_set if res.feature_set != "none" else "qc"
                save_router_model(tmp / "model", model, res.feature_set, res.encoder,
                                  features.with_feature_set(fs).subset(np.arange(min(3, len(part)))),
                                  metadata={"generator": res.generator, "store_id": store_id or ""})
                client.log_artifacts(pid, str(tmp / "model"), artifact_path="model")
                # what this same refitted router object predicted in memory for every training
                # row, before it was saved: a loaded model must reproduce it (the stored CV
                # predictions come from the fold models, not from this one)
                # deferred (start-up): pulls in mlflow
                from ragrouter.routers.mlflow_model import in_memory_probabilities

                refit = in_memory_probabilities(model, res.feature_set, res.encoder, features.with_feature_set(fs))
                refit.insert(0, "query_id", part["query_id"].astype(str).to_numpy())
                refit.to_csv(tmp / "refit_predictions.csv", index=False, float_format="%.17g")
                client.log_artifact(pid, str(tmp / "refit_predictions.csv"))
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
    encoders: Sequence[Encoder | None] | None = None,
    n_splits: int = 5,
    lambdas: Sequence[float] | None = None,
    log_models: bool = True,
    router_params: dict[str, dict] | None = None,
    artifact_location: str | None = None,
    progress: Callable[[CVResult], None] | None = None,
    context: dict | None = None,
    show_progress: bool = False,
) -> TrackingOutput:
    """Cross-validate every (generator, router, feature set, encoder) and log each to MLflow.

    ``encoders`` (default ``[encoder]``) are the query encoders to try: a text encoder (a
    callable with a ``name``) or ``None`` (the one-hot query type). Neural routers run once per
    encoder; classical routers and baselines do not read the text and run once (``onehot`` /
    ``none``). ``context`` adds params and tags to every run (``store_id``, ``judge``,
    ``corpora``, ``dataset``, ``config_hash``, ``git_commit``, ``training_session``).

    Returns :class:`TrackingOutput` ``(results, predictions, folds)``: ``results`` has one row
    per run (``router, features, encoder, generator, run_id, n_rows``, every metric with its
    ``_std`` and intervals, ``fit_seconds``, ``aiq`` when swept); ``predictions`` has one row
    per (run, query) with :data:`PREDICTION_COLUMNS` (``probabilities`` is a JSON object class →
    unrounded probability; ``fold`` is the CV fold that predicted the row) for the
    ``router_predictions`` table; ``folds`` one row per (run, fold) for ``router_fold_metrics``.
    ``lambdas`` (e.g. ``evaluate.DEFAULT_LAMBDAS``) adds a cost-aware λ sweep per run (one
    more CV per λ ≠ 0) for the cost–quality plot and ``aiq``. ``show_progress``: a bar on
    stderr over router × feature set × encoder × fold.
    """
    df = validate_router_dataset(df)
    for r in routers:  # a router whose extra is missing stops here, before any run is logged
        if getattr(ROUTERS.get(r), "missing_extra", None):
            make_router(r)
    encoders = list(encoders) if encoders is not None else [encoder]
    if not encoders:
        encoders = [None]
    tracking_uri = tracking_uri or default_tracking_uri()
    client = _client(tracking_uri)
    art = artifact_location or default_artifact_location(tracking_uri)
    experiment_id = get_or_create_experiment(client, experiment, art)
    rows, preds, folds = [], [], []
    pairs = plan(routers, feature_sets)
    generators = sorted(df["generator"].astype(str).unique())

    def skipped(i: int, enc, router: str, fs: str) -> bool:
        if i > 0 and not (ROUTERS[router].uses_text_encoder and "q" in fs):
            return True  # reads no query text: the same run as on the first encoder
        return i > 0 and enc is None and encoders[0] is None

    planned = len(generators) * sum(1 for i, enc in enumerate(encoders) for r, fs in pairs if not skipped(i, enc, r, fs))
    progress_bar = console.bar(planned * n_splits, "routers (router × features × fold)", enabled=show_progress)
    for generator, part in df.groupby("generator", sort=True):
        part = part.reset_index(drop=True)
        for i, enc in enumerate(encoders):
            features = build_features(part, "qc", enc)
            for router, fs in pairs:
                if skipped(i, enc, router, fs):
                    continue
                progress_bar.set_postfix_str(f"{router}/{fs}/{getattr(enc, 'name', 'onehot')}", refresh=False)
                res = cross_validate(part, router, fs, features=features, n_splits=n_splits, seed=seed,
                                     router_params=(router_params or {}).get(router))
                if any(r["router"] == res.router and r["features"] == res.feature_set and r["encoder"] == res.encoder
                       and r["generator"] == res.generator for r in rows):
                    continue  # e.g. a neural router with the one-hot encoder listed twice
                logged = _log_cv_result(client, experiment_id, res, part, features, n_splits=n_splits, seed=seed,
                                        lambdas=lambdas, log_models=log_models,
                                        router_params=(router_params or {}).get(res.router), context=context,
                                        with_generator=len(generators) > 1)
                rows.append({"router": res.router, "features": res.feature_set, "encoder": res.encoder,
                             "generator": res.generator, "run_id": logged["run_id"], "n_rows": len(part),
                             **res.metrics, **{k: v for k, v in logged.items() if k != "run_id"}})
                p = res.predictions.copy()
                p["run_id"] = logged["run_id"]
                preds.append(p[list(PREDICTION_COLUMNS)])
                f = res.fold_metrics.copy()
                for k in ("router", "encoder", "generator"):
                    f[k] = getattr(res, k)
                f["features"] = res.feature_set
                f["run_id"] = logged["run_id"]
                folds.append(f)
                progress_bar.update(n_splits)
                if progress is not None:
                    progress(res)
    progress_bar.close()
    results = pd.DataFrame(rows)
    predictions = pd.concat(preds, ignore_index=True) if preds else pd.DataFrame(columns=list(PREDICTION_COLUMNS))
    fold_frame = pd.concat(folds, ignore_index=True) if folds else pd.DataFrame()
    return TrackingOutput(results, predictions, fold_frame)


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
    """Start MLflow's server (UI + REST API, :mod:`ragrouter.routers.mlflow_ui`: experiments open on
    their runs table) on ``host:port`` (0 = a free port) as a subprocess in its own process
    group, and return ``(process, url)`` once ``/health`` answers.

    Stop it with :func:`stop_ui`. Output goes to ``log_path`` (default: ``mlflow-ui.log`` beside
    a SQLite store, else a temporary file); ``process.log_path`` says where."""
    tracking_uri = tracking_uri or default_tracking_uri()
    db = sqlite_path(tracking_uri)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
        relocate_store(tracking_uri)
    port = port or _free_port(host)
    art = artifact_location or default_artifact_location(tracking_uri)
    # MLflow's server and UI, its landing page opening experiments on their runs table (mlflow_ui.py)
    cmd = [sys.executable, "-m", "ragrouter.routers.mlflow_ui", "--backend-store-uri", tracking_uri,
           "--host", host, "--port", str(port)]
    if art:
        cmd += ["--default-artifact-root", art]
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    if log_path is None:
        log_path = db.parent / "mlflow-ui.log" if db is not None else Path(tempfile.mkstemp(prefix="mlflow-ui-", suffix=".log")[1])
    log_path = Path(log_path)
    log = open(log_path, "ab")
    # No signal may land between the fork and `proc` being known (the server would be orphaned):
    # SIGTERM/SIGHUP/SIGINT are held while Popen runs, and unblocked again in the child.
    held = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT}
    main = threading.current_thread() is threading.main_thread()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, held) if main else None
    try:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                preexec_fn=(lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, held)) if main else None)
    finally:
        if old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)  # a held SIGTERM is delivered here
        log.close()
    try:
        proc.log_path = str(log_path)  # type: ignore[attr-defined]
        url = f"http://{host}:{port}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"mlflow server exited with status {proc.returncode} (log {log_path}):\n{tail}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        return proc, url
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"mlflow server did not answer on {url} within {timeout:.0f} s (log {log_path})")
    except BaseException:  # SIGTERM / Ctrl-C while it starts (15-40 s), or it failed: stop its whole group
        stop_ui(proc)
        raise


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid → (parent pid, process group) of every live process (from /proc)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        if rest and rest[0] != "Z":  # zombies hold no port
            out[int(d)] = (int(rest[1]), int(rest[2]))
    return out


def group_processes(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``."""
    return sorted(pid for pid, (_, g) in _proc_table().items() if g == pgid)


def _family(root: int) -> set[int]:
    """``root``'s process group and every descendant of ``root`` (also those that left the group)."""
    table = _proc_table()
    members = {pid for pid, (_, g) in table.items() if g == root}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in table.items():
            if ppid == parent and pid not in members:
                members.add(pid)
                frontier.append(pid)
    return members - {os.getpid()}


def stop_ui(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """Stop the server and everything it started: SIGTERM to its process group (and to any
    descendant outside it), then SIGKILL to whatever is left after ``timeout`` seconds."""
    family = _family(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in family:
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = (set(group_processes(proc.pid)) | family) & set(_proc_table())
        if not left:
            break
        time.sleep(0.2)
    for pid in (set(group_processes(proc.pid)) | family) & set(_proc_table()):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=timeout)
