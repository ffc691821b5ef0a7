"""MLflow tracking of router CV as researchers read it: `routers train` on a demo-sized store,
read back through the MLflow REST API, the store's views, `routers compare` and the report;
routers as MLflow models (sklearn flavour or pyfunc); a relocatable MLflow folder; `mlflow-ui` stopping its whole group."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from sklearn.metrics import f1_score
from sqlalchemy import text

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from ragrouter.answering import routing  # noqa: E402
from ragrouter.commands.common import Ctx  # noqa: E402
from ragrouter.commands.routers import routers_group  # noqa: E402
from ragrouter.routers import synthetic_dataset  # noqa: E402
from ragrouter.routers.dataset import INDICATORS  # noqa: E402
from ragrouter.routers.evaluate import mrr  # noqa: E402
from ragrouter.routers.mlflow_model import model_input  # noqa: E402
from ragrouter.routers.tracking import (  # noqa: E402
    EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, VIEW_TAG, client, group_processes, start_ui, stop_ui, train_and_track,
)
from tests.support.router_store import config_for, make_store  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ROUTERS = ["lr", "xgboost", "dnn", "best_fixed"]
FEATURES = ["qc", "c"]
EXPECTED_RUNS = {("lr", "qc", "onehot"), ("lr", "c", "none"), ("xgboost", "qc", "onehot"), ("xgboost", "c", "none"),
                 ("dnn", "qc", "onehot"), ("dnn", "c", "none"), ("best_fixed", "none", "none")}
SKLEARN_FLAVOUR = {"lr", "xgboost"}  # the classical routers; the others are pyfunc models


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def _fetch(engine, sql: str, params: dict | None = None) -> pd.DataFrame:
    with engine.connect() as conn:
        return pd.DataFrame([dict(r) for r in conn.execute(text(sql), params or {}).mappings()])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """`routers train` on a demo-sized synthetic store (21 labelled queries, 3 folds)."""
    tmp = tmp_path_factory.mktemp("routers")
    url, engine = make_store(tmp / "store.duckdb", seed=0)
    uri = f"sqlite:///{tmp / 'mlflow' / 'mlflow.db'}"
    cfg = config_for(uri)
    args = ["train"] + [a for r in ROUTERS for a in ("--router", r)] + [a for f in FEATURES for a in ("--features", f)]
    res = CliRunner().invoke(routers_group, args, obj=Ctx(url, None, _config=cfg), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    yield {"tmp": tmp, "url": url, "engine": engine, "uri": uri, "cfg": cfg, "output": res.output}
    from ragrouter.db import engine as eng

    eng.dispose_all()


def test_rest_api_one_parent_run_per_router_with_context(trained):
    engine, uri = trained["engine"], trained["uri"]
    store_id = routing.store_id(engine)
    corpora = set(routing.store_dataset(engine, trained["cfg"])["corpus"])
    proc, url = start_ui(uri, host="127.0.0.1", port=0)
    try:
        exp = _get(f"{url}/api/2.0/mlflow/experiments/get-by-name?experiment_name=ragrouter")["experiment"]
        exp_tags = {t["key"]: t["value"] for t in exp["tags"]}
        assert exp_tags[EXPERIMENT_KIND_TAG] == EXPERIMENT_KIND
        view = json.loads(exp_tags[VIEW_TAG])  # the shared runs-table view: metric columns, best R.A first
        assert "metrics.`routing_accuracy_ci_low`" in view["selectedColumns"] and view["orderByAsc"] is False
        runs = _post(f"{url}/api/2.0/mlflow/runs/search", {"experiment_ids": [exp["experiment_id"]],
                                                            "max_results": 100})["runs"]
    finally:
        stop_ui(proc)
    keys = set()
    sessions = set()
    for run in runs:
        tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
        params = {p["key"]: p["value"] for p in run["data"]["params"]}
        assert "mlflow.parentRunId" not in tags  # one row per trained router: no fold runs
        key = (tags["router"], tags["features"], tags["encoder"])
        keys.add(key)
        assert run["info"]["run_name"] == " · ".join(key)
        assert run["info"]["status"] == "FINISHED"
        assert tags["ragrouter.store_id"] == store_id == params["store_id"]
        assert params["judge"] == tags["judge"] == "judge-x"
        assert params["corpora"] == ",".join(sorted(corpora)) and len(corpora) == 2
        assert re.fullmatch(r"[0-9a-f]{16}", params["config_hash"])
        assert params["config_hash"] == trained["cfg"].full_hash()
        assert re.fullmatch(r"([0-9a-f]{40}(\+dirty)?|unknown)", params["git_commit"])
        sessions.add(tags["ragrouter.training_session"])
        inputs = run["inputs"]["dataset_inputs"]
        assert len(inputs) == 1 and inputs[0]["dataset"]["name"] == "store"
        assert json.loads(inputs[0]["dataset"]["source"]) == {"uri": f"ragrouter-store:{store_id}"}
        assert inputs[0]["dataset"]["digest"] and "label" in inputs[0]["dataset"]["schema"]
        metrics = {m["key"] for m in run["data"]["metrics"]}
        assert {"routing_accuracy", "routing_accuracy_std", "routing_accuracy_ci_low", "macro_f1", "mrr",
                "correct_rate_ci_high", "fold.routing_accuracy"} <= metrics
        assert "aiq" not in metrics  # no λ sweep ran
    assert keys == EXPECTED_RUNS and len(runs) == len(EXPECTED_RUNS)
    assert len(sessions) == 1


def test_same_numbers_in_mlflow_view_compare_and_report(trained):
    from ragrouter.db.frames import read_view
    from ragrouter.report.tables import table_routers

    engine, uri = trained["engine"], trained["uri"]
    c = client(uri)
    scores = _fetch(engine, "SELECT * FROM v_router_scores WHERE routing_accuracy IS NOT NULL")
    assert len(scores) == len(EXPECTED_RUNS) and set(scores["judge"]) == {"judge-x"}
    res = CliRunner().invoke(routers_group, ["compare", "--format", "json"],
                             obj=Ctx(trained["url"], None, _config=trained["cfg"]), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    compare = {r["mlflow_run_id"]: r for r in json.loads(res.output)}
    report = table_routers(read_view(engine, "v_router_scores"))
    preds = _fetch(engine, "SELECT * FROM router_predictions")
    folds = _fetch(engine, "SELECT * FROM router_fold_metrics")
    classes = ["llm_only", "naive", "graph", "hybrid", "iterative", "iterative_naive", "cannot_answer"]
    for row in scores.itertuples(index=False):
        m = c.get_run(row.mlflow_run_id).data.metrics
        cmp = compare[row.mlflow_run_id]
        for metric in ("routing_accuracy", "macro_f1", "mrr", "correct_rate", "avg_tokens"):
            assert getattr(row, metric) == pytest.approx(m[metric], rel=1e-12, abs=1e-12), metric
            assert getattr(row, f"{metric}_std") == pytest.approx(m[f"{metric}_std"], rel=1e-9, abs=1e-12)
            assert cmp[metric] == pytest.approx(m[metric], rel=1e-12, abs=1e-12)
        for metric in ("routing_accuracy", "correct_rate"):
            for side in ("ci_low", "ci_high"):
                assert getattr(row, f"{metric}_{side}") == pytest.approx(m[f"{metric}_{side}"], abs=1e-12)
        # the report prints the same fold means (percent, one decimal)
        cell = f"{100 * m['routing_accuracy']:.1f} ± {100 * m['routing_accuracy_std']:.1f}"
        f1_cell = f"{100 * m['macro_f1']:.1f} ± {100 * m['macro_f1_std']:.1f}"
        line = next(ln for ln in report.splitlines()
                    if ln.startswith(f"| {row.router} | {row.features} | {row.encoder} |"))
        assert cell in line and f1_cell in line and f"{m['mrr']:.3f} ±" in line
        # … and they are recomputable from the stored predictions, fold by fold
        mine = preds[(preds["mlflow_run_id"] == row.mlflow_run_id)]
        fm = folds[folds["mlflow_run_id"] == row.mlflow_run_id].set_index("fold")
        assert len(mine) == row.n and len(fm) == row.n_folds
        for k, part in mine.groupby("fold"):
            ra = float((part["predicted"] == part["true_label"]).mean())
            f1 = f1_score(part["true_label"], part["predicted"], average="macro", zero_division=0)  # the classes present
            probs = [p if isinstance(p, dict) else json.loads(p) for p in part["probabilities"]]
            proba = np.array([[d.get(cl, 0.0) for cl in classes] for d in probs])
            assert fm.loc[k, "routing_accuracy"] == pytest.approx(ra, abs=1e-12)
            assert fm.loc[k, "macro_f1"] == pytest.approx(f1, abs=1e-12)
            assert fm.loc[k, "mrr"] == pytest.approx(mrr(part["true_label"], proba, classes), abs=1e-12)
            steps = {x.step: x.value for x in c.get_metric_history(row.mlflow_run_id, "fold.macro_f1")}
            assert steps[k] == pytest.approx(f1, abs=1e-12)
        assert row.routing_accuracy == pytest.approx(fm["routing_accuracy"].mean(), abs=1e-12)


def test_every_router_loads_with_pyfunc_and_reproduces_its_predictions(trained, tmp_path):
    """Every run's ``model/`` loads with ``mlflow.pyfunc.load_model`` and predicts, for every
    training row of the store, exactly (to 1e-12) the class probabilities in the run's
    ``refit_predictions.csv``: those are the predictions of the SAME fitted object that was
    saved as ``model/`` (the router refitted on all rows), computed in memory by `routers
    train` before saving. They are not the store's ``router_predictions``: those are the CV
    out-of-fold predictions of the fold models, which are not logged (checked here: same
    rows, and the refit's differ from them somewhere).

    Classical routers (lr, xgboost) are logged in MLflow's sklearn flavour (``MLmodel`` lists
    ``sklearn`` and ``python_function``, pyfunc ``predict_fn: predict_proba``, skops format),
    their pyfunc output an (n, classes) array whose columns the metadata ``classes`` name —
    XGBoost's fitted class indices decode through it to the run's paradigm names; the others
    are pyfunc models returning a frame with those names. Both answer MLflow's scoring server
    (what ``mlflow models serve`` runs on ``/invocations``) with the loaded model's numbers."""
    import mlflow.pyfunc
    import mlflow.sklearn
    from mlflow.pyfunc.scoring_server import invocations

    from ragrouter.routers.mlflow_model import class_probabilities

    engine, uri = trained["engine"], trained["uri"]
    df = routing.store_dataset(engine, trained["cfg"])
    stored = _fetch(engine, "SELECT mlflow_run_id, query_id, probabilities FROM router_predictions")
    c = client(uri)
    frame = model_input(df["qtype"], df[list(INDICATORS)])
    flavours = {}
    for run_id in sorted(stored["mlflow_run_id"].unique()):
        run = c.get_run(run_id)
        router = run.data.tags["router"]
        model = mlflow.pyfunc.load_model(f"{run.info.artifact_uri}/model")
        meta = model.metadata
        assert meta.metadata["store_id"] == routing.store_id(engine)
        assert meta.signature is not None
        classes = meta.metadata["classes"].split(",")  # the labels of the training rows, sorted
        assert classes == sorted(classes) and set(classes) <= set(run.data.params["classes"].split(","))
        flavours[router] = set(meta.flavors)
        ref = pd.read_csv(c.download_artifacts(run_id, "refit_predictions.csv", str(tmp_path / run_id)),
                          dtype={"query_id": str}).set_index("query_id")
        assert sorted(ref.index) == sorted(df["query_id"].astype(str))
        ref = ref.loc[df["query_id"].astype(str)]
        assert list(ref.columns) == classes
        raw = model.predict(frame)
        if router in SKLEARN_FLAVOUR:
            assert flavours[router] == {"sklearn", "python_function"}
            pf = meta.flavors["python_function"]
            assert pf["loader_module"] == "mlflow.sklearn" and pf["predict_fn"] == "predict_proba"
            assert meta.flavors["sklearn"]["serialization_format"] == "skops"
            assert isinstance(raw, np.ndarray) and raw.shape == ref.shape
            pipe = mlflow.sklearn.load_model(f"{run.info.artifact_uri}/model")
            assert type(pipe).__name__ == "Pipeline" and list(pipe.named_steps)[0] == "input"
            last = type(pipe.steps[-1][1]).__name__
            assert last == {"lr": "LogisticRegression", "xgboost": "XGBClassifier"}[router]
            if router == "xgboost":  # fitted on class indices; the metadata names them
                assert list(pipe.classes_) == list(range(len(ref.columns)))
        else:
            assert flavours[router] == {"python_function"}
            assert meta.flavors["python_function"]["loader_module"] == "mlflow.pyfunc.model"
            assert isinstance(raw, pd.DataFrame) and list(raw.columns) == list(ref.columns)
        got = class_probabilities(model, frame)
        assert list(got.columns) == list(ref.columns)
        np.testing.assert_allclose(got.to_numpy(), ref.to_numpy(), rtol=0, atol=1e-12)
        assert np.allclose(got.sum(axis=1), 1.0)
        # the stored CV predictions: same rows, other models (the fold models)
        oof = stored[stored["mlflow_run_id"] == run_id].astype({"query_id": str}).set_index("query_id")
        assert sorted(oof.index) == sorted(ref.index)
        oof = oof.loc[ref.index]
        oof = np.array([[(p if isinstance(p, dict) else json.loads(p)).get(k, 0.0) for k in ref.columns]
                        for p in oof["probabilities"]])
        assert oof.shape == ref.shape
        if router != "best_fixed":
            assert not np.allclose(oof, ref.to_numpy(), atol=1e-6), "refit and fold predictions cannot all agree"
        # what `mlflow models serve` answers on /invocations for the first rows
        body = json.dumps({"dataframe_split": frame.head(3).to_dict(orient="split")})
        served = invocations(body, "application/json", model, meta.get_input_schema())
        assert served.status == 200, served.response
        answer = json.loads(served.response)["predictions"]
        answer = [[row[k] for k in ref.columns] for row in answer] if isinstance(answer[0], dict) else answer
        # (the same 3-row batch through the loaded model: a float32 network's sums may round
        # differently with the batch size)
        np.testing.assert_allclose(np.array(answer, dtype=float), class_probabilities(model, frame.head(3)).to_numpy(),
                                   rtol=0, atol=1e-12)
    assert set(flavours) == set(ROUTERS)


def test_copied_mlflow_folder_keeps_every_artifact(trained, tmp_path):
    import mlflow.pyfunc

    src = Path(trained["uri"][len("sqlite:///"):]).parent
    dst = tmp_path / "elsewhere" / "mlflow"
    shutil.copytree(src, dst)
    hidden = src.with_name("mlflow-hidden")
    src.rename(hidden)  # the original is gone: every read must come from the copy
    try:
        c = client(f"sqlite:///{dst / 'mlflow.db'}")
        exp = c.get_experiment_by_name("ragrouter")
        assert exp.artifact_location == (dst / "artifacts").resolve().as_uri()
        runs = c.search_runs([exp.experiment_id])
        assert len(runs) == len(EXPECTED_RUNS)
        n_files = 0
        for run in runs:
            assert run.info.artifact_uri.startswith((dst / "artifacts").resolve().as_uri())
            todo = [None]
            while todo:
                for info in c.list_artifacts(run.info.run_id, todo.pop()):
                    if info.is_dir:
                        todo.append(info.path)
                        continue
                    local = Path(c.download_artifacts(run.info.run_id, info.path, str(tmp_path / "dl")))
                    assert local.stat().st_size > 0 and local.stat().st_size == info.file_size
                    n_files += 1
            if run.data.tags["router"] == "lr":
                mlflow.pyfunc.load_model(f"{run.info.artifact_uri}/model")
        assert n_files >= 8 * len(EXPECTED_RUNS)
    finally:
        hidden.rename(src)
    assert client(trained["uri"]).get_experiment_by_name("ragrouter").artifact_location == (src / "artifacts").resolve().as_uri()


def test_sigterm_to_mlflow_ui_stops_its_whole_group(trained):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAGROUTER__routers__mlflow_uri": trained["uri"], "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(REPO / "cli.py"), "mlflow-ui", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
    try:
        line = ""
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and "MLflow UI at" not in line:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "mlflow-ui exited early"
        assert "MLflow UI at" in line, line
        server = int(re.search(r"server pid (\d+)", line).group(1))
        log = Path(re.search(r"log (\S+);", line).group(1))
        assert log.exists()
        assert group_processes(server), "the server's process group is running"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
            assert r.status == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 10
    while group_processes(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert group_processes(server) == []
    with socket.socket() as s:  # nobody listens any more …
        assert s.connect_ex(("127.0.0.1", port)) != 0
    with socket.socket() as s:  # … and a new server may bind the port (TIME_WAIT leftovers aside)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()


def test_remote_embedder_is_a_router_encoder_and_cached(tmp_path, monkeypatch):
    """A scripted OpenAI-compatible /v1/embeddings serves the neural router's query encoder;
    the second training finds every embedding in the ledger."""
    try:
        from tests.fake_openai import FakeOpenAI
    except ModuleNotFoundError:  # rootdir-less import mode
        from fake_openai import FakeOpenAI

    monkeypatch.setenv("RAGROUTER_TEST_FAKE_KEY", "sk-test-not-a-key")
    url, engine = make_store(tmp_path / "store.duckdb", seed=1)
    with FakeOpenAI(embedding_dim=24) as srv:
        be = "RAGROUTER__backends__remote-embed__"
        cfg = config_for(f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}", encoders="[remote-embed]",
                         **{be + "kind": "openai", be + "base_url": srv.base_url, be + "model": "bge-small",
                            be + "api_key_env": "RAGROUTER_TEST_FAKE_KEY", be + "batch_size": "8"})
        df = routing.store_dataset(engine, cfg)
        first = routing.train(engine, cfg, df, ["dnn"], ["q"], log=lambda m: None)
        calls = srv.stats()["by_path"].get("/v1/embeddings", 0)
        assert calls == -(-len(df) // 8)  # one request per batch of 8 questions
        second = routing.train(engine, cfg, df, ["dnn"], ["q"], log=lambda m: None)
        assert srv.stats()["by_path"].get("/v1/embeddings", 0) == calls  # all from the ledger
    assert list(first["encoder"]) == list(second["encoder"]) == ["remote-embed"]
    assert first["routing_accuracy"].item() == second["routing_accuracy"].item()
    stored = _fetch(engine, "SELECT DISTINCT encoder FROM router_predictions")
    assert list(stored["encoder"]) == ["remote-embed"]
    scores = _fetch(engine, "SELECT encoder, routing_accuracy FROM v_router_scores WHERE routing_accuracy IS NOT NULL")
    assert list(scores["encoder"]) == ["remote-embed"]
    ledger = _fetch(engine, "SELECT COUNT(*) AS n FROM llm_calls WHERE kind = 'embedding' AND stage = 'routers'")
    assert ledger["n"].item() == calls
    run = client(cfg.get("routers.mlflow_uri")).get_run(second["run_id"].item())
    assert run.data.params["encoder"] == "remote-embed" and run.info.run_name == "dnn · q · remote-embed"


def test_api_key_never_reaches_mlflow(tmp_path, monkeypatch):
    """Keys live in the environment only: a marker key is nowhere in MLflow's store or artefacts."""
    marker = "sk-test-MARKER-4f2a9c"
    monkeypatch.setenv("OPENAI_API_KEY", marker)
    monkeypatch.setenv("DEEPSEEK_API_KEY", marker)
    db = tmp_path / "mlflow.db"
    art = tmp_path / "artifacts"
    train_and_track(synthetic_dataset(n=120, seed=3), ["lr"], ["qc"], tracking_uri=f"sqlite:///{db}",
                    experiment="keys", seed=0, n_splits=2, artifact_location=art.as_uri())
    blobs = [db.read_bytes()] + [p.read_bytes() for p in art.rglob("*") if p.is_file()]
    assert len(blobs) > 3
    assert not any(marker.encode() in b for b in blobs)


PLAIN_MLFLOW = r"""
import json, os, sys
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
import mlflow, pandas as pd
from mlflow.tracking import MlflowClient
folder, run_id, rows = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
mlflow.set_tracking_uri(f"sqlite:///{folder}/mlflow.db")
c = MlflowClient()
names = sorted(a.path for a in c.list_artifacts(run_id))
frame = pd.DataFrame(rows)
by_run = mlflow.pyfunc.load_model(f"runs:/{run_id}/model").predict(frame)
by_name = mlflow.pyfunc.load_model("models:/copied-router/1").predict(frame)
print(json.dumps({"artifacts": names, "modules": sorted(m for m in sys.modules if m.startswith("ragrouter")),
                  "by_run": pd.DataFrame(by_run).to_numpy().tolist(),
                  "by_name": pd.DataFrame(by_name).to_numpy().tolist()}))
"""


def test_a_copied_mlflow_folder_loads_with_plain_mlflow_after_the_original_is_gone(tmp_path):
    """Issue 32: `routers copy DEST` gives a folder plain MLflow opens at once; or copy mlflow/ (cp -r), delete the original, let ragrouter rebase the copy once
    (`routers relocate`, also done by every command that opens it), then plain MLflow — a fresh
    interpreter without ragrouter — lists the run's artefacts and loads its model by run and by
    registered name, predicting what the original predicted."""
    import mlflow

    src = tmp_path / "orig" / "mlflow"
    uri = f"sqlite:///{src / 'mlflow.db'}"
    df = synthetic_dataset(n=90, seed=5)
    train_and_track(df, ["lr"], ["qc"], tracking_uri=uri, experiment="copy", seed=0, n_splits=2)
    c = client(uri)
    (run,) = c.search_runs([c.get_experiment_by_name("copy").experiment_id])
    mlflow.set_tracking_uri(uri)
    try:
        mlflow.register_model(f"runs:/{run.info.run_id}/model", "copied-router")
        frame = model_input(df["qtype"].head(5), df[list(INDICATORS)].head(5))
        expected = pd.DataFrame(mlflow.pyfunc.load_model(f"runs:/{run.info.run_id}/model").predict(frame)).to_numpy()
    finally:
        mlflow.set_tracking_uri(None)
    exported = tmp_path / "exported" / "mlflow"  # the one-step export: plain MLflow opens it at once
    res = CliRunner().invoke(routers_group, ["copy", str(exported), "--from", str(src)],
                             obj=Ctx("duckdb:///:memory:", None))
    assert res.exit_code == 0 and "1 experiment(s) rebased" in res.output, res.output
    again = CliRunner().invoke(routers_group, ["copy", str(exported), "--from", str(src)],
                               obj=Ctx("duckdb:///:memory:", None))
    assert again.exit_code != 0 and "already exists" in again.output
    none = CliRunner().invoke(routers_group, ["copy", str(tmp_path / "x"), "--from", str(tmp_path / "nothing")],
                              obj=Ctx("duckdb:///:memory:", None))
    assert none.exit_code != 0 and "no MLflow SQLite store to copy" in none.output
    assert not (tmp_path / "x").exists()
    dst = tmp_path / "elsewhere" / "mlflow"
    shutil.copytree(src, dst)
    shutil.rmtree(src.parent)  # the original is gone for good

    def plain(folder=dst):
        return subprocess.run([sys.executable, "-c", PLAIN_MLFLOW, str(folder), run.info.run_id,
                               frame.to_json(orient="records")], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""})

    out = plain(exported)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["modules"] == [] and np.allclose(got["by_run"], expected) and np.allclose(got["by_name"], expected)

    before = plain()
    assert before.returncode != 0  # MLflow wrote absolute paths: the bare copy points at the deleted folder
    res = CliRunner().invoke(routers_group, ["relocate", str(dst)], obj=Ctx("duckdb:///:memory:", None))
    assert res.exit_code == 0 and "1 experiment(s) rebased" in res.output, res.output
    out = plain()
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["modules"] == []  # plain MLflow: nothing of ragrouter was imported
    assert {"model", "fold_metrics.csv", "refit_predictions.csv"} <= set(got["artifacts"])
    assert np.allclose(got["by_run"], expected) and np.allclose(got["by_name"], expected)
    with sqlite3_connect(dst / "mlflow.db") as con:  # no path of the deleted folder is left anywhere
        assert not [r for r in con.execute("SELECT source, storage_location FROM model_versions")
                    if str(src) in " ".join(map(str, r))]
    again = CliRunner().invoke(routers_group, ["relocate", str(dst)], obj=Ctx("duckdb:///:memory:", None))
    assert again.exit_code == 0 and "already at home" in again.output
    bad = CliRunner().invoke(routers_group, ["relocate", str(tmp_path / "nothing")], obj=Ctx("duckdb:///:memory:", None))
    assert bad.exit_code != 0 and "no MLflow SQLite store to relocate" in bad.output


def sqlite3_connect(path):
    import contextlib
    import sqlite3

    return contextlib.closing(sqlite3.connect(path))
