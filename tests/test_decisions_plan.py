"""``plan`` for a user's own corpus: only chat models among its options (an embedding backend
such as openai-embed was offered "for answer and judge"), the corpus's extraction in the cost
when a graph paradigm is planned (it said "fixed 5 s once" where the dry run said 72 h of
extraction), and a word when the fixed-N test is the cheaper one (it printed N 50 beside 25)."""

from __future__ import annotations

from sqlalchemy import text

from ragrouter.config import Config
from ragrouter.decisions import plan as pl
from ragrouter.decisions.sequential import Settings
from ragrouter.stages.base import Scope
from ragrouter.stages.services import Services
from tests.fake_openai import FakeOpenAI
from tests.test_decisions import _store_with_questions, planted
from tests.test_stages_answer import fake_config


def test_only_chat_backends_are_options():
    cfg = Config.load(env={})
    chat = {n for n, b in cfg.section("backends").items() if isinstance(b, dict) and pl.chat_backend(cfg, n, b)}
    assert "openai-embed" not in chat and "minilm" not in chat
    assert {"openai", "deepseek", "local-qwen-0.5b", "local-qwen-1.5b"} <= chat


def test_options_name_no_embedding_model(store):
    cfg = Config.load(env={})
    services = Services(cfg, store)
    per = {"wall_s": 40.0, "fixed_s": 5.0, "usd": None, "calls": 2.0, "tokens": 1500.0,
           "stages": [{"stage": "answer", "model": "qwen2.5-coder-0.5b", "calls": 1.0, "prompt": 900.0,
                       "completion": 150.0},
                      {"stage": "judge", "model": "qwen2.5-coder-1.5b", "calls": 1.0, "prompt": 300.0,
                       "completion": 40.0}]}
    try:
        got = pl.options(services, cfg, Settings.from_config(cfg), [0.5, 0.4, 0.4, 0.4, 0.4], 0.3, 0.8, per,
                         list(cfg.get("paradigms.enabled")), {}, reps=60)
    finally:
        services.finish()
    names = [o["option"] for o in got]
    assert any(n.startswith("remote backend openai (gpt-4o-mini) for answer and judge") for n in names), names
    assert not any("embed" in n for n in names), names


def test_extraction_is_in_the_cost_when_a_graph_paradigm_is_planned(store):
    _store_with_questions(store, 30)
    with FakeOpenAI(responder=planted(0.8, 0.5, correlated=True), embedding_dim=16) as srv:
        cfg = fake_config(srv)
        services = Services(cfg, store)
        try:
            graph = pl.build_cost(services, cfg, "toy", ["naive", "graph"])
            plain = pl.build_cost(services, cfg, "toy", ["llm_only", "naive"])
            cfg.data["paradigms"]["enabled"] = ["llm_only", "naive", "graph"]
            rows = pl.plan(services, Scope(corpus="toy", config=cfg), gap=0.3)
        finally:
            services.finish()
    assert "extract" in graph["stages"] and "extract" not in plain["stages"]
    assert graph["wall_s"] > plain["wall_s"] > 0
    (row,) = rows
    assert row["build_stages"] == graph["stages"] and row["fixed_s"] >= row["build_s"] == graph["wall_s"]
    assert row["wall_s"] >= row["build_s"] and row["fixed_design"]["wall_s"] >= row["build_s"]
    with store.connect() as conn:  # a plan writes nothing
        assert conn.execute(text("SELECT COUNT(*) FROM llm_calls")).scalar() == 0


def test_plan_says_when_the_fixed_test_is_cheaper(tmp_path):
    import os

    from click.testing import CliRunner

    import cli as cli_module
    from ragrouter.db import engine as eng

    db = f"duckdb:///{tmp_path / 's.duckdb'}"
    engine = eng.make_engine(db, create=True)
    from ragrouter.db import migrate

    migrate.upgrade(engine)
    _store_with_questions(engine, 200)
    eng.dispose_all()
    with FakeOpenAI(responder=planted(0.8, 0.5, correlated=True), embedding_dim=16) as srv:
        cfg = fake_config(srv)
        cfg.data["paradigms"]["enabled"] = ["llm_only", "naive"]
        path = tmp_path / "cfg.yaml"
        import yaml

        path.write_text(yaml.safe_dump(cfg.data))
        old = os.getcwd()
        try:
            out = CliRunner().invoke(cli_module.cli, ["--db", db, "--config", str(path), "plan", "--gap", "0.3"],
                                     catch_exceptions=False)
            rows = CliRunner().invoke(cli_module.cli, ["--db", db, "--config", str(path), "plan", "--gap", "0.3",
                                                       "--json"], catch_exceptions=False)
        finally:
            os.chdir(old)
            eng.dispose_all()
    assert out.exit_code == 0, out.output
    import json

    (row,) = json.loads(rows.output)
    fx = row["fixed_design"]
    # at a 30-point gap with two paradigms: the exact McNemar test's 25 queries × 2 runs against
    # the rule's N 40 and about 73 runs expected (stated rates, no pilot)
    assert (fx["n"], fx["runs"], row["n_needed"]) == (25, 50, 40) and row["mean_runs"] > 60
    assert row["fixed_cheaper"] is True
    (line,) = [ln for ln in out.output.splitlines() if "the fixed-N test is cheaper" in ln]
    assert line.startswith(f"toy/factual/{row['generator']}: at a 30-point gap the fixed-N test is cheaper: N 25, "
                           "every paradigm on each (50 runs, wall ")
    assert "against the rule's N 40, " in line and "--queries-per-type 25" in line and "exact McNemar" in line

