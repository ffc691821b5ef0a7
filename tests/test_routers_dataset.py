"""``routers train`` on a small store says which judged queries it left out and why.

It said "0 labelled queries" while the store's views held labelled queries: the router
dataset keeps only rows with every paradigm's correctness, tokens and semantic F1, and the
rest vanished without a word. Reproduced on the toy corpus and the fake endpoint: answered
and judged but not scored (4 queries labelled cannot_answer, 2 undecided), then scored with
one paradigm missing on some queries (what ``run --until-decided`` leaves when it stops
running a clearly worse paradigm).
"""

from __future__ import annotations

from click.testing import CliRunner
from sqlalchemy import text

from ragrouter.answering import routing
from ragrouter.stages.base import Scope
from tests.fake_openai import FakeOpenAI
from tests.test_stages_answer import fake_config, ingest
from tests.test_trust import judging_responder


def _stage(store, cfg, name, **scope):
    from ragrouter.stages import registry
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    services = Services(cfg, store)
    try:
        rep = run_stage(registry.all_stages()[name], services, Scope(corpus="toy", config=cfg, **scope),
                        progress=False)
    finally:
        services.finish()
    assert rep.failed == 0, rep.errors
    return rep


def test_routers_train_names_what_it_left_out(store, duck_url, tmp_path):
    import yaml

    import cli as cli_module
    from ragrouter.db import engine as eng

    ingest(store)
    with FakeOpenAI(responder=judging_responder, embedding_dim=32) as srv:
        cfg = fake_config(srv)
        cfg.data["paradigms"]["enabled"] = ["llm_only", "naive"]
        cfg.data["routers"]["mlflow_uri"] = f"file://{tmp_path / 'mlruns'}"
        for name in ("chunk", "extract", "embed", "metrics"):
            _stage(store, cfg, name)
        with store.connect() as conn:
            ids = [int(r[0]) for r in conn.execute(text("SELECT id FROM queries ORDER BY id")).all()]
        _stage(store, cfg, "answer", paradigms=["llm_only"])
        _stage(store, cfg, "answer", paradigms=["naive"], query_ids=ids[:2])  # naive on 2 of the 6 queries
        _stage(store, cfg, "judge")
        with store.connect() as conn:
            labels = dict(conn.execute(text("SELECT COALESCE(label, '-'), COUNT(*) FROM v_oracle_label "
                                            "GROUP BY label")).all())
        df = routing.store_dataset(store, cfg)
        assert len(df) == 0 and df.attrs["judged"] == 6
        # the scripted judge calls llm_only right on 2 of the 4 queries naive did not answer: a correct
        # answer without F1 has no label yet (undecided); the other 2 lack naive; the 2 with both
        # paradigms lack their F1
        assert labels == {"cannot_answer": 4, "-": 2}
        assert df.attrs["dropped"] == {
            "not answered and judged by every paradigm (missing: naive)": 2,
            "no semantic F1 for every paradigm's answer yet (run --stage score)": 2,
            "a correct answer without a semantic F1 yet, so no label (run --stage score)": 2}
        (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg.data))
        eng.dispose_all()
        out = CliRunner().invoke(cli_module.cli, ["--db", duck_url, "--config", str(tmp_path / "cfg.yaml"), "routers",
                                                  "train", "--router", "lr", "--features", "q"],
                                 catch_exceptions=False)
        eng.dispose_all()
        assert out.exit_code == 0, out.output
        assert "routers: 0 labelled queries — too few to cross-validate (need ≥ 4); skipped (of 6 judged queries, " \
               "left out: 2 not answered and judged by every paradigm (missing: naive); 2 no semantic F1" in out.output, out.output
        # scored, and naive on every query: every judged query is in the dataset
        _stage(store, cfg, "answer", paradigms=["naive"])
        _stage(store, cfg, "judge")
        _stage(store, cfg, "score")
    df = routing.store_dataset(store, cfg)
    assert len(df) == 6 and df.attrs["dropped"] == {} and routing.describe_dropped(df) == ""
    # routers trained on it say which paradigms the labels cover, and that two of the paper's five
    # make routers not comparable to the paper's
    line = routing.describe_coverage(df)
    counts = df["label"].value_counts()
    assert line.startswith(f"routers: the labels cover 2 paradigms (llm_only {int(counts.get('llm_only', 0))}, "
                           f"naive {int(counts.get('naive', 0))}"), line
    assert f"of 6 queries); graph, hybrid, iterative were not run on these queries, so these routers choose " \
           "among 2 of the paper's 5 paradigms and are not comparable to the paper's routers" in line, line
    logged = []
    cfg.data["routers"]["mlflow_uri"] = f"sqlite:///{tmp_path / 'mlflow.db'}"
    routing.train(store, cfg, df, ["best_fixed"], ["q"], log=logged.append, encoders=[routing.ONEHOT])
    assert logged[0] == line


def test_coverage_of_the_papers_five_paradigms_says_no_caveat():
    from ragrouter.routers.dataset import synthetic_dataset

    df = synthetic_dataset(40, seed=1)
    line = routing.describe_coverage(df)
    assert line.startswith("routers: the labels cover 5 paradigms (llm_only ") and "not comparable" not in line
    assert line.endswith("of 40 queries)")
    counts = df["label"].value_counts()
    for p, n in counts.items():
        assert f"{p} {n}" in line
