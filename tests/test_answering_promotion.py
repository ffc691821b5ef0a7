"""A router that leaves the project (issue 33 items 1-2): `routers promote` logs a self-contained
MLflow 3 logged model that takes {"question", "corpus"} rows, registers it under an alias, and
ask uses the alias; the model loads by alias in a fresh Python outside the clone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from ragrouter.answering import ask as ask_mod  # noqa: E402
from ragrouter.answering import promotion  # noqa: E402
from ragrouter.answering import routing  # noqa: E402
from ragrouter.routers import tracking  # noqa: E402
from tests.support.router_store import config_for, make_store  # noqa: E402


@pytest.fixture(scope="module")
def promoted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("promote")
    uri = f"sqlite:///{tmp / 'mlflow' / 'mlflow.db'}"
    cfg = config_for(uri)
    _, engine = make_store(tmp / "s.duckdb", seed=5)
    res = routing.train(engine, cfg, routing.store_dataset(engine, cfg), ["lr", "dnn"], ["qc"], log=lambda m: None)
    said = []
    dnn = res[res["router"] == "dnn"].iloc[0]
    out = promotion.promote(engine, cfg, ask_mod.TrainedRouter("dnn", "qc", str(dnn["encoder"]), str(dnn["run_id"])),
                            echo=said.append)
    yield {"tmp": tmp, "uri": uri, "cfg": cfg, "engine": engine, "res": res, "out": out, "said": said}
    from ragrouter.db import engine as eng

    eng.dispose_all()


def test_promote_registers_a_logged_model_with_an_alias(promoted):
    import mlflow

    out, uri = promoted["out"], promoted["uri"]
    client = tracking.client(uri)
    mv = client.get_model_version_by_alias(out["name"], "champion")
    assert str(mv.version) == out["version"] and mv.tags["ragrouter.store_id"] == routing.store_id(promoted["engine"])
    assert mv.tags["ragrouter.router"] == "dnn" and mv.tags["ragrouter.run_id"] == out["run_id"]
    assert out["name"].startswith("ragrouter-") and out["name"].endswith("-gen-a")
    registered = client.get_registered_model(out["name"])
    assert "question router for generator gen-a" in registered.description and "champion" in registered.description
    assert f"dnn router" in mv.description and out["run_id"] in mv.description
    mlflow.set_tracking_uri(uri)
    logged = mlflow.get_logged_model(out["model_id"])  # an MLflow 3 LoggedModel, in the router's run
    assert logged.name == promotion.MODEL_NAME and logged.source_run_id == out["run_id"]
    assert "models:/" in promoted["said"][0] and "@champion" in promoted["said"][0]


def test_ask_uses_the_champion_by_default(promoted):
    engine, cfg = promoted["engine"], promoted["cfg"]
    with engine.connect() as conn:
        from sqlalchemy import text

        corpus = conn.execute(text("SELECT corpus FROM v_corpus_profile WHERE lcc_ratio IS NOT NULL ORDER BY corpus "
                                   "LIMIT 1")).scalar_one()
    routed = ask_mod.route(engine, cfg, corpus, "What about it?", query_type="factual")
    assert routed.chosen.router == "dnn" and routed.chosen.run_id == promoted["out"]["run_id"]
    # naming a router still wins over the alias
    assert ask_mod.route(engine, cfg, corpus, "What about it?", router="lr", query_type="factual").chosen.router == "lr"


def test_the_model_loads_by_alias_in_a_fresh_python_without_store_or_clone(promoted, tmp_path):
    """In a fresh interpreter, from a folder outside the clone and without ragrouter on the path
    (the model carries its code), models:/name@champion answers {question, corpus} rows with the
    same probabilities as the router's own model on the same inputs."""
    out = promoted["out"]
    script = textwrap.dedent(f"""
        import json, sys
        import mlflow, pandas as pd
        assert not any('ragrouter' in p for p in sys.path if p), sys.path
        mlflow.set_tracking_uri({promoted['uri']!r})
        m = mlflow.pyfunc.load_model("models:/{out['name']}@champion")
        meta = json.load(open(m._model_impl.context.artifacts["routing"]))
        corpus = sorted(meta["indicators"])[0]
        rows = pd.DataFrame([{{"question": "What about it?", "corpus": corpus, "query_type": "factual"}},
                             {{"question": "Summarise it all.", "corpus": corpus}}])
        res = m.predict(rows)
        print(json.dumps({{"columns": list(res.columns), "rows": res.to_dict("records"), "corpus": corpus,
                           "modules": sorted(k for k in sys.modules if k.startswith("ragrouter"))[:3]}}))
        try:
            m.predict(pd.DataFrame([{{"question": "x", "corpus": "no-such-corpus"}}]))
        except Exception as exc:
            print("ERR", str(exc).splitlines()[0])
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["HF_HUB_OFFLINE"] = "1"
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.strip().splitlines()
    got = json.loads([line for line in lines if line.startswith("{")][-1])
    assert {"paradigm", "query_type"} <= set(got["columns"])
    first, second = got["rows"]
    probs = {k: v for k, v in first.items() if k not in ("paradigm", "query_type")}
    assert abs(sum(probs.values()) - 1) < 1e-6 and first["query_type"] == "factual"
    assert second["query_type"] in ("factual", "reasoning", "summary")  # inferred from the centroids
    from ragrouter.routers.dataset import PARADIGM_ORDER

    assert first["paradigm"] in PARADIGM_ORDER  # the synthetic store runs iterative_naive too
    assert any(line.startswith("ERR unknown corpus no-such-corpus") for line in lines)
    # the same probabilities as this process's route() through the run's own model
    routed = ask_mod.route(promoted["engine"], promoted["cfg"], got["corpus"], "What about it?", query_type="factual",
                           run_id=out["run_id"])
    for k, v in routed.probabilities.items():
        assert first[k] == pytest.approx(v, abs=1e-6)  # the DNN computes in float32


def test_a_model_promoted_before_the_class_moved_still_loads(promoted, tmp_path):
    """Models promoted before the answering package pickled their pyfunc class as
    ``ragrouter.routers.promotion.QuestionRouter``: such a model still loads in a process that
    imported this ragrouter (the old path is kept) and answers as one promoted now."""
    import pickle
    import shutil

    import mlflow
    import pandas as pd

    mlflow.set_tracking_uri(promoted["uri"])
    new = Path(mlflow.artifacts.download_artifacts(f"models:/{promoted['out']['name']}@champion",
                                                   dst_path=str(tmp_path / "new")))
    old = tmp_path / "old"
    shutil.copytree(new, old)
    pickled = pickle.dumps(promotion.QuestionRouter(), protocol=0)  # the class by its module path, as text
    assert b"ragrouter.answering.promotion" in pickled
    pkl = old / "python_model.pkl"  # the promoted class; artifacts/model/ holds the router's own model
    pkl.write_bytes(pickled.replace(b"ragrouter.answering.promotion", b"ragrouter.routers.promotion"))
    m_old, m_new = mlflow.pyfunc.load_model(str(old)), mlflow.pyfunc.load_model(str(new))
    (routing_json,) = new.rglob("routing.json")
    corpus = sorted(json.loads(routing_json.read_text())["indicators"])[0]
    rows = pd.DataFrame([{"question": "What about it?", "corpus": corpus, "query_type": "factual"},
                         {"question": "Summarise it all.", "corpus": corpus}])
    pd.testing.assert_frame_equal(m_old.predict(rows), m_new.predict(rows))


def test_routers_train_promote_picks_the_best_by_the_stated_metric(tmp_path):
    from tests.test_store_cli import run_fast

    url, _ = make_store(tmp_path / "t.duckdb", seed=6)
    from ragrouter.db import engine as eng

    eng.dispose_all()
    env = {"RAGROUTER_DB": url, "RAGROUTER__routers__mlflow_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
           "RAGROUTER__routers__encoders": "[onehot]", "RAGROUTER__routers__folds": "3",
           "RAGROUTER__roles__generators": "[gen-a]", "RAGROUTER__backends__gen-a__kind": "openai",
           "RAGROUTER__backends__gen-a__base_url": "http://127.0.0.1:9/v1", "RAGROUTER__backends__gen-a__model": "gen-a",
           "RAGROUTER__backends__gen-a__api_key_env": "RAGROUTER_TEST_FAKE_KEY"}
    out = run_fast("routers", "train", "--router", "lr", "--router", "best_fixed", "--features", "qc", "--promote",
                   "routing_accuracy", env=env)
    assert out.returncode == 0, out.stderr
    assert "best by routing_accuracy: lr/qc/onehot" in out.stdout and "@champion" in out.stdout
    none = run_fast("routers", "train", "--router", "lr", "--features", "qc", "--promote", "correct_rate",
                    "--max-avg-tokens", "0", env=env)
    assert none.returncode == 2 and "no trained router (baselines aside) qualifies within 0 tokens" in none.stderr
    bad = run_fast("routers", "promote", "no-such-router", env=env)
    assert bad.returncode == 2 and "no-such-router" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
