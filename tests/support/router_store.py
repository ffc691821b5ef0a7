"""Demo-sized stores for the router tests: random but consistent rows (report/synthetic.py),
one generator, one judge, every paradigm run for every query; and a config pointing MLflow at
a temporary store."""

from __future__ import annotations

from pathlib import Path

from ragrouter.config import Config
from ragrouter.db import engine as eng
from ragrouter.db import migrate
from ragrouter.report import synthetic


def make_store(path: Path, seed: int = 0, queries_per_corpus: int = 40):
    """A migrated DuckDB store at ``path`` with a labelled router dataset (no predictions)."""
    url = f"duckdb:///{path}"
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    rows = synthetic.random_rows(seed, n_corpora=2, queries_per_corpus=queries_per_corpus, generators=("gen-a",),
                                 judges=("judge-x",), p_missing_run=0.0, p_old_config=0.0, p_correct=0.45,
                                 with_router=False)
    synthetic.insert_rows(engine, rows)
    # the rows carry explicit ids: move the sequences past them, so later writes (the
    # gateway's ledger rows, a worker run) get fresh ids
    from sqlalchemy import text

    with engine.begin() as conn:
        for table, items in rows.items():
            if items:
                top = max(int(r["id"]) for r in items)
                conn.execute(text(f"SELECT max(nextval('{table}_id_seq')) FROM range({top})"))
    return url, engine


def config_for(mlflow_uri: str, encoders: str = "[onehot]", folds: int = 3, **extra: str) -> Config:
    # the synthetic rows' generator 'gen-a' as a (never called) backend, so `ask` routes for it
    gen = "RAGROUTER__backends__gen-a__"
    env = {"RAGROUTER__routers__mlflow_uri": mlflow_uri, "RAGROUTER__routers__encoders": encoders,
           "RAGROUTER__routers__folds": str(folds), "RAGROUTER__roles__generators": "[gen-a]",
           gen + "kind": "openai", gen + "base_url": "http://127.0.0.1:9/v1", gen + "model": "gen-a",
           gen + "api_key_env": "RAGROUTER_TEST_FAKE_KEY", **extra}
    return Config.load(env=env)
