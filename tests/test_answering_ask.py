"""`ask` uses only routers trained on its own store, picks among tied routers deterministically,
and encodes the question with the router's own encoder."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import text

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from ragrouter.answering import ask as ask_mod  # noqa: E402
from ragrouter.answering import routing  # noqa: E402
from ragrouter.routers import tracking  # noqa: E402
from tests.support.router_store import config_for, make_store  # noqa: E402


def _corpus_with_profile(engine) -> str:
    with engine.connect() as conn:
        return conn.execute(text("SELECT corpus FROM v_corpus_profile WHERE lcc_ratio IS NOT NULL "
                                 "ORDER BY corpus LIMIT 1")).scalar_one()


@pytest.fixture(scope="module")
def two_stores(tmp_path_factory):
    """Stores A and B, both trained into ONE MLflow store (the repository's default case)."""
    tmp = tmp_path_factory.mktemp("ask")
    uri = f"sqlite:///{tmp / 'mlflow' / 'mlflow.db'}"
    cfg = config_for(uri)
    _, a = make_store(tmp / "a.duckdb", seed=0)
    _, b = make_store(tmp / "b.duckdb", seed=1)
    _, untrained = make_store(tmp / "c.duckdb", seed=2)
    res_a = routing.train(a, cfg, routing.store_dataset(a, cfg), ["lr"], ["qc"], log=lambda m: None)
    res_b = routing.train(b, cfg, routing.store_dataset(b, cfg), ["lr"], ["qc"], log=lambda m: None)
    yield {"cfg": cfg, "a": a, "b": b, "untrained": untrained, "run_a": res_a["run_id"].item(),
           "run_b": res_b["run_id"].item()}
    from ragrouter.db import engine as eng

    eng.dispose_all()


def test_store_ids_differ_and_runs_carry_them(two_stores):
    sa, sb = routing.store_id(two_stores["a"]), routing.store_id(two_stores["b"])
    assert sa != sb and len(sa) == 36
    c = tracking.client(two_stores["cfg"].get("routers.mlflow_uri"))
    assert c.get_run(two_stores["run_a"]).data.tags["ragrouter.store_id"] == sa
    assert c.get_run(two_stores["run_b"]).data.tags["ragrouter.store_id"] == sb


def test_reading_layer_fallback_is_the_training_rule(two_stores):
    from ragrouter.answering import lookup
    from ragrouter.routers.evaluate import fallback_paradigm

    b = two_stores["b"]
    with b.connect() as conn:
        labels = [r[0] for r in conn.execute(text("SELECT true_label FROM router_predictions WHERE mlflow_run_id = :r"),
                                             {"r": two_stores["run_b"]})]
    paradigms = sorted(set(labels) - {"cannot_answer"})
    assert lookup.router_fallback(b, two_stores["run_b"]) == fallback_paradigm(labels, paradigms)
    assert lookup.router_fallback(b, "no-such-run") is None
    assert len(lookup.corpus_indicators(b, _corpus_with_profile(b))) == 6


def test_ask_on_store_b_never_loads_a_router_of_store_a(two_stores, monkeypatch):
    cfg, a, b = two_stores["cfg"], two_stores["a"], two_stores["b"]
    loaded = []
    real = tracking.load_model
    monkeypatch.setattr(tracking, "load_model", lambda uri, *args: loaded.append(str(uri)) or real(uri, *args))
    routed = ask_mod.route(b, cfg, _corpus_with_profile(b), "What about it?", query_type="factual")
    assert routed.chosen.run_id == two_stores["run_b"] and loaded == [f"runs:/{two_stores['run_b']}/model"]
    assert abs(sum(routed.probabilities.values()) - 1.0) < 1e-9
    # A's run, named explicitly on B: refused before anything is loaded
    with pytest.raises(ask_mod.AskError, match="not a router trained on this store"):
        ask_mod.route(b, cfg, _corpus_with_profile(b), "What about it?", query_type="factual",
                      run_id=two_stores["run_a"])
    # … and even if B's tables pointed at A's run, the run's store tag stops it
    with pytest.raises(ask_mod.AskError, match="was trained on store"):
        ask_mod.load_router(cfg, ask_mod.TrainedRouter("lr", "qc", "onehot", two_stores["run_a"]), routing.store_id(b))
    assert loaded == [f"runs:/{two_stores['run_b']}/model"]
    # a store without routers finds none, although MLflow holds A's and B's
    with pytest.raises(ask_mod.AskError, match="no trained router in this store"):
        ask_mod.pick_router(two_stores["untrained"], None, "gen-a")


def test_a_router_whose_model_folder_is_gone_is_one_line_naming_the_folder(two_stores):
    """The run is in MLflow but its artifacts were deleted (a cleaned disk, a moved mlruns):
    the message says which folder is missing, not only that something failed."""
    import shutil
    from pathlib import Path
    from urllib.parse import unquote, urlparse

    cfg, a = two_stores["cfg"], two_stores["a"]
    run = tracking.client(cfg.get("routers.mlflow_uri")).get_run(two_stores["run_a"])
    folder = Path(unquote(urlparse(run.info.artifact_uri).path)) / "model"
    assert folder.is_dir()
    key = (routing.tracking_uri(cfg), two_stores["run_a"], routing.store_id(a))
    ask_mod._LOADED.pop(key, None)
    shutil.move(folder, folder.with_name("model.away"))
    try:
        with pytest.raises(ask_mod.AskError) as err:
            ask_mod.load_router(cfg, ask_mod.TrainedRouter("lr", "qc", "onehot", two_stores["run_a"]),
                                routing.store_id(a))
        msg = str(err.value)
        assert f"at {run.info.artifact_uri.rstrip('/')}/model " in msg and "\n" not in msg
        assert str(folder) in unquote(msg) and "retrain" in msg
    finally:
        shutil.move(folder.with_name("model.away"), folder)
    assert ask_mod.load_router(cfg, ask_mod.TrainedRouter("lr", "qc", "onehot", two_stores["run_a"]),
                               routing.store_id(a)) is not None
    ask_mod._LOADED.pop(key, None)


def test_choice_among_tied_routers_is_deterministic(two_stores):
    b = two_stores["b"]
    with b.begin() as conn:  # a second router with exactly the scores of lr, under a later and an earlier name
        for name in ("zz_twin", "aa_twin"):
            for table in ("router_predictions", "router_fold_metrics"):
                cols = [r[0] for r in conn.execute(text(f"SELECT * FROM {table} LIMIT 0")).cursor.description
                        if r[0] not in ("id", "router", "created_at")]
                conn.execute(text(f"INSERT INTO {table} (router, {', '.join(cols)}) "
                                  f"SELECT '{name}', {', '.join(cols)} FROM {table} WHERE router = 'lr'"))
    try:
        picks = {ask_mod.pick_router(b, None, "gen-a").router for _ in range(3)}
        assert picks == {"aa_twin"}  # equal correct rate, accuracy and F1: the first name
        assert ask_mod.pick_router(b, "lr", "gen-a").run_id == two_stores["run_b"]
    finally:
        with b.begin() as conn:
            for table in ("router_predictions", "router_fold_metrics"):
                conn.execute(text(f"DELETE FROM {table} WHERE router IN ('zz_twin', 'aa_twin')"))


def test_ask_encodes_the_question_with_the_routers_encoder(tmp_path, monkeypatch):
    """A neural router on a (scripted) remote embedder: two questions, two encodings through
    the gateway, two different probability vectors."""
    try:
        from tests.fake_openai import FakeOpenAI
    except ModuleNotFoundError:  # rootdir-less import mode
        from fake_openai import FakeOpenAI

    monkeypatch.setenv("RAGROUTER_TEST_FAKE_KEY", "sk-test-not-a-key")
    _, engine = make_store(tmp_path / "s.duckdb", seed=3)
    with FakeOpenAI(embedding_dim=16) as srv:
        be = "RAGROUTER__backends__remote-embed__"
        cfg = config_for(f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}", encoders="[remote-embed]",
                         **{be + "kind": "openai", be + "base_url": srv.base_url, be + "model": "bge-small",
                            be + "api_key_env": "RAGROUTER_TEST_FAKE_KEY"})
        res = routing.train(engine, cfg, routing.store_dataset(engine, cfg), ["dnn"], ["q"], log=lambda m: None)
        before = srv.stats()["by_path"].get("/v1/embeddings", 0)
        corpus = _corpus_with_profile(engine)
        one = ask_mod.route(engine, cfg, corpus, "Which drug treats malaria?", query_type="factual")
        two = ask_mod.route(engine, cfg, corpus, "Summarise the whole legal agreement.", query_type="factual")
        assert srv.stats()["by_path"]["/v1/embeddings"] == before + 2
        inputs = [r["body"]["input"] for r in srv.requests if r["path"] == "/v1/embeddings"][-2:]
        assert inputs == [["Which drug treats malaria?"], ["Summarise the whole legal agreement."]]
    assert one.chosen.encoder == two.chosen.encoder == "remote-embed"
    assert one.chosen.run_id == res["run_id"].item()
    assert one.probabilities != two.probabilities


def test_a_corpus_whose_graph_is_empty_has_indicators_and_one_without_metrics_has_none(tmp_path):
    """The metrics stage on a corpus with no triples stores 0 nodes and no LCC ratio, density or
    clustering: its indicators read (the undefined ones 0, as in training) instead of 'no
    indicators yet: run the metrics stage', advice that led nowhere; a corpus the stage never
    measured still has none."""
    from ragrouter.answering import lookup
    from ragrouter.corpus.indicators import structural_indicators
    from ragrouter.graph.kg import KnowledgeGraph

    _, engine = make_store(tmp_path / "g.duckdb", seed=3)
    measured = dict(structural_indicators(KnowledgeGraph.from_triples([])))
    measured.update({"intrinsic_dim": 7.5, "hubness": 0.4, "dist_mean": 0.6, "dist_std": 0.1, "dist_min": 0.2,
                     "dist_max": 0.9})
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO corpora (name) VALUES ('empty-graph'), ('unmeasured')"))
        cid = conn.execute(text("SELECT id FROM corpora WHERE name = 'empty-graph'")).scalar_one()
        for metric, value in measured.items():
            conn.execute(text("INSERT INTO corpus_metrics (corpus_id, metric, variant, value) VALUES (:c, :m, 'x', :v)"),
                         {"c": cid, "m": metric, "v": value if value == value else None})  # NaN stored as NULL
    values = lookup.corpus_indicators(engine, "empty-graph")
    assert values is not None and len(values) == 6
    from ragrouter.routers.dataset import INDICATORS

    got = dict(zip(INDICATORS, values))
    assert got["lcc_ratio"] == 0.0 and got["density"] == 0.0 and got["clustering"] == 0.0
    assert got["hubness"] == 0.4 and got["intrinsic_dim"] == 7.5
    assert lookup.corpus_indicators(engine, "unmeasured") is None
