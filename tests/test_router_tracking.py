"""MLflow tracking of router CV to a temporary SQLite store, read back through the UI's REST API."""

from __future__ import annotations

import json
import os
import urllib.request

import numpy as np
import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from ragrouter.routers import build_features, synthetic_dataset  # noqa: E402
from ragrouter.routers.tracking import PREDICTION_COLUMNS, load_model, start_ui, stop_ui, train_and_track  # noqa: E402


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    df = synthetic_dataset(300, seed=4)
    out = train_and_track(df, ["lr", "best_fixed"], ["qc"], uri, "router-test", seed=0)
    return tmp, uri, df, out


def test_results_predictions_and_artifacts(tracked):
    tmp, uri, df, out = tracked
    res, preds = out
    assert list(res["router"]) == ["lr", "best_fixed"]
    assert list(res["features"]) == ["qc", "none"]
    assert list(res["encoder"]) == ["onehot", "none"]
    assert res["run_id"].is_unique and (res["n_rows"] == 300).all()
    lr = res.set_index("router").loc["lr"]
    best = res.set_index("router").loc["best_fixed"]
    assert lr["routing_accuracy"] > best["routing_accuracy"]
    assert 0 < lr["aiq"] <= 1 and 0 < lr["aiq_fixed"] <= 1
    assert list(preds.columns) == list(PREDICTION_COLUMNS)
    assert len(preds) == 2 * len(df)
    for run_id, grp in preds.groupby("run_id"):
        assert sorted(grp["query_id"]) == sorted(df["query_id"]) and set(grp["fold"]) == {0, 1, 2, 3, 4}
        acc = (grp["predicted"] == grp["true_label"]).mean()
        assert abs(acc - res.set_index("run_id").loc[run_id, "routing_accuracy"]) < 0.03  # pooled vs fold mean
    first = json.loads(preds["probabilities"].iloc[0])
    assert set(first) == {"llm_only", "naive", "graph", "hybrid", "iterative", "cannot_answer"}
    # artefacts on disk, next to the SQLite file
    run_dirs = {p.parent.parent.name: p.parent for p in (tmp / "artifacts").rglob("artifacts/confusion_matrix.png")}
    for run_id in res["run_id"]:
        d = run_dirs[run_id]
        for f in ("confusion_matrix.png", "cost_quality.png", "cost_quality.csv", "fold_metrics.csv", "model/model.pkl"):
            assert (d / f).stat().st_size > 0, f
        assert (d / "confusion_matrix.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    model = load_model(run_dirs[lr["run_id"]] / "model" / "model.pkl")
    info = json.loads((run_dirs[lr["run_id"]] / "model" / "model_info.json").read_text())
    assert info["router"] == "lr" and info["features"] == "qc"
    X = build_features(df, "qc")
    pred = model.predict(X)
    assert pred.shape == (len(df),) and (pred == df["label"].to_numpy()).mean() > 0.4  # refit on all rows


def test_ui_lists_runs_and_metrics(tracked):
    tmp, uri, df, out = tracked
    proc, url = start_ui(uri, host="127.0.0.1", port=0)
    try:
        assert url.startswith("http://127.0.0.1:")
        exp = _get(f"{url}/api/2.0/mlflow/experiments/get-by-name?experiment_name=router-test")["experiment"]
        runs = _post(f"{url}/api/2.0/mlflow/runs/search", {"experiment_ids": [exp["experiment_id"]], "max_results": 100})["runs"]
        assert len(runs) == 2 * (1 + 5)  # two parents, five nested fold runs each
        by_id = {r["info"]["run_id"]: r for r in runs}
        for _, row in out.results.iterrows():
            run = by_id[row["run_id"]]
            assert run["info"]["status"] == "FINISHED"
            metrics = {m["key"]: m["value"] for m in run["data"]["metrics"]}
            for key in ("routing_accuracy", "macro_f1", "mrr", "correct_rate", "avg_tokens", "aiq"):
                assert metrics[key] == pytest.approx(row[key], rel=1e-9)
            params = {p["key"]: p["value"] for p in run["data"]["params"]}
            assert params["router"] == row["router"] and params["n_splits"] == "5"
            children = [r for r in runs if {t["key"]: t["value"] for t in r["data"].get("tags", [])}.get("mlflow.parentRunId") == row["run_id"]]
            assert len(children) == 5
            fold_acc = [next(m["value"] for m in c["data"]["metrics"] if m["key"] == "routing_accuracy") for c in children]
            assert np.mean(fold_acc) == pytest.approx(row["routing_accuracy"])
        filtered = _post(f"{url}/api/2.0/mlflow/runs/search", {
            "experiment_ids": [exp["experiment_id"]],
            "filter": "tags.router = 'lr' and tags.`ragrouter.kind` = 'router-cv'"})["runs"]
        assert [r["info"]["run_id"] for r in filtered] == [out.results.set_index("router").loc["lr", "run_id"]]
    finally:
        stop_ui(proc)
    assert proc.poll() is not None
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/health", timeout=5)


def test_api_key_never_reaches_mlflow(tmp_path, monkeypatch):
    """Keys live in the environment only: a marker key is nowhere in MLflow's store or artefacts."""
    from ragrouter.routers.dataset import synthetic_dataset
    from ragrouter.routers.tracking import train_and_track

    marker = "sk-test-MARKER-4f2a9c"
    monkeypatch.setenv("OPENAI_API_KEY", marker)
    monkeypatch.setenv("DEEPSEEK_API_KEY", marker)
    db = tmp_path / "mlflow.db"
    art = tmp_path / "artifacts"
    train_and_track(synthetic_dataset(n=120, seed=3), ["lr"], ["qc"], tracking_uri=f"sqlite:///{db}",
                    experiment="keys", seed=0, n_splits=2, artifact_location=str(art))
    blobs = [db.read_bytes()] + [p.read_bytes() for p in art.rglob("*") if p.is_file()]
    assert len(blobs) > 3
    assert not any(marker.encode() in b for b in blobs)
