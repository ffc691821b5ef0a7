"""A quiet console (issue 32 item 5): library warnings go to a log file with one line saying
so, and long commands show progress."""

from __future__ import annotations

import logging
import warnings

from ragrouter import console


def test_library_warnings_go_to_the_log_file_with_one_line_on_the_console(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAGROUTER_HOME", str(tmp_path))
    said = []
    from sklearn.exceptions import ConvergenceWarning

    with console.library_warnings("routers train", echo=said.append) as path:
        warnings.warn("Stochastic Optimizer: Maximum iterations (200) reached", ConvergenceWarning)
        warnings.warn("Hint: Inferred schema contains integer column(s)", UserWarning)
        logging.getLogger("mlflow.models.model").warning("Model logged without a signature")
        logging.getLogger("ragrouter.stages").warning("ours: meant for the user")
    err = capsys.readouterr().err
    assert "Maximum iterations" not in err and "Inferred schema" not in err and "without a signature" not in err
    text = path.read_text()
    assert path == tmp_path / "logs" / "warnings.log"
    assert "[routers train] ConvergenceWarning: Stochastic Optimizer" in text
    assert "UserWarning: Hint: Inferred schema" in text and "mlflow.models.model WARNING: Model logged" in text
    assert "ours: meant for the user" not in text  # our own loggers are not hidden
    assert said == [f"(3 library warnings written to {path})"]
    # outside the context, warnings behave as before
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("after", UserWarning)
    assert [str(w.message) for w in seen] == ["after"]
    said.clear()
    with console.library_warnings("report", echo=said.append):
        pass
    assert said == []  # nothing to say when nothing was written


def test_routers_promote_says_one_line_without_mlflow_warnings_prints_or_download_bars(tmp_path, monkeypatch):
    """`routers promote` printed MLflow's UserWarnings, its 'Successfully registered model' and
    'Created version' prints and a 'Downloading artifacts' bar per artifact fetch; now it says
    what it did in one line (and where the library warnings went)."""
    import os

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from ragrouter.answering import routing
    from ragrouter.db import engine as eng
    from tests.support.router_store import config_for, make_store
    from tests.test_store_cli import run_fast

    monkeypatch.setenv("RAGROUTER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    url, engine = make_store(tmp_path / "s.duckdb", seed=4, queries_per_corpus=20)
    cfg = config_for(uri)
    routing.train(engine, cfg, routing.store_dataset(engine, cfg), ["lr"], ["qc"], log=lambda m: None)
    eng.dispose_all()
    g = "RAGROUTER__backends__gen-a__"
    env = {"RAGROUTER_DB": url, "RAGROUTER__routers__mlflow_uri": uri, "RAGROUTER__routers__encoders": "[onehot]",
           "RAGROUTER__roles__generators": "[gen-a]", g + "kind": "openai", g + "base_url": "http://127.0.0.1:9/v1",
           g + "model": "gen-a", g + "api_key_env": "RAGROUTER_TEST_FAKE_KEY"}
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        out = run_fast("routers", "promote", "lr", env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("promoted lr/qc/onehot (run ") and "@champion (version 1, logged model m-" in lines[0]
    assert len(lines) <= 2 and all(line.startswith("(") and "library warning" in line for line in lines[1:])
    for noise in ("Downloading artifacts", "Warning", "Successfully registered", "Created version", "CloudPickle"):
        assert noise not in out.stderr and noise not in out.stdout, (noise, out.stderr[-2000:])
    assert out.stderr.strip() == ""
    assert os.environ.get("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR") is None  # restored after the command


def test_importing_the_router_models_warns_nothing(tmp_path):
    """An untyped pyfunc predict made MLflow warn 'Add type hints to the `predict` method' on
    every import of the router models and every load of a promoted one (ask, serve), under a
    filter of MLflow's own that no ignore filter could override."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    p = subprocess.run([sys.executable, "-W", "default", "-c",
                        "import ragrouter.answering.promotion, ragrouter.routers.mlflow_model"],
                       capture_output=True, text=True, cwd=repo, timeout=120,
                       env={**__import__("os").environ, "MLFLOW_DISABLE_TELEMETRY": "true"})
    assert p.returncode == 0, p.stderr
    assert "type hints" not in p.stderr.lower(), p.stderr


def test_review_start_says_its_lines_without_mlflows_info_lines(tmp_path, monkeypatch):
    """`review start` on a new MLflow folder printed MLflow's 'Creating initial MLflow database
    tables...' and 'Updating database tables' and, at exit, 'Flushing the async trace logging
    queue before program exit'; now only its own lines."""
    from ragrouter.db import engine as eng
    from tests.support.router_store import make_store
    from tests.test_store_cli import run_fast

    monkeypatch.setenv("RAGROUTER_HOME", str(tmp_path / "home"))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    url, _engine = make_store(tmp_path / "s.duckdb", seed=4, queries_per_corpus=10)
    eng.dispose_all()
    env = {"RAGROUTER_DB": url, "RAGROUTER__routers__mlflow_uri": uri, "MLFLOW_DISABLE_TELEMETRY": "true"}
    out = run_fast("review", "start", "--n", "4", env=env)
    assert out.returncode == 0, out.stderr
    assert "logged as traces, 0 already there" in out.stdout, out.stdout
    for said in (out.stdout, out.stderr):
        assert " INFO mlflow" not in said and "Flushing" not in said, said
