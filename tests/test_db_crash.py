"""A DuckDB store survives a crash at any point (ragrouter/db/migrate.py, ragrouter/db/engine.py).

DuckDB 1.5.5 cannot replay, on open, a WAL that holds ``COMMENT ON COLUMN`` of a column whose
default is ``nextval`` (docs/duckdb-wal-comment-bug.md): a store killed after a migration and
before DuckDB's own checkpoint could never be opened again. Every migration and view refresh
now checkpoints before it hands the store on, and a store left with such a WAL by an earlier
version is replayed through ATTACH when it is opened. Each case here kills a process with
SIGKILL and opens the store again, read-write and read-only, with DuckDB alone and through
``make_engine``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
import yaml

from ragrouter.db import engine as eng
from ragrouter.db import migrate, progress

REPO = Path(__file__).resolve().parent.parent

_KILL_AFTER = """
import os, signal, sys
sys.path.insert(0, {repo!r})
from ragrouter.db import engine as eng, migrate
e = eng.make_engine("duckdb:///" + sys.argv[1])
{step}
os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed_after(path: Path, step: str) -> None:
    code = _KILL_AFTER.format(repo=str(REPO), step=step)
    p = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]


def _reopens(path: Path) -> int:
    """Open the file with DuckDB alone (read-write, then read-only) and through make_engine
    (both modes); the number of tables it holds."""
    con = duckdb.connect(str(path))
    tables = con.execute("SELECT COUNT(*) FROM duckdb_tables()").fetchone()[0]
    con.close()
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT COUNT(*) FROM duckdb_tables()").fetchone()[0] == tables
    con.close()
    url = f"duckdb:///{path}"
    for read_only in (False, True):
        engine = eng.make_engine(url, read_only=read_only)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT COUNT(*) FROM duckdb_tables()").scalar() == tables
        eng.dispose_all()
    return tables


@pytest.mark.parametrize("step, revision", [
    ("migrate.upgrade(e, '0001')", "0001"),  # the first revision: tables, sequences and their comments
    ("migrate.upgrade(e)", "head"),
])
def test_a_store_killed_right_after_db_upgrade_opens_again(tmp_path, step, revision):
    path = tmp_path / "s.duckdb"
    _killed_after(path, step)
    assert _reopens(path) > 10
    engine = eng.make_engine(f"duckdb:///{path}")
    want = migrate.head_revision() if revision == "head" else revision
    assert migrate.current_revision(engine) == want
    eng.dispose_all()


def test_a_store_killed_right_after_its_views_and_comments_were_refreshed_opens_again(tmp_path):
    path = tmp_path / "s.duckdb"
    engine = eng.make_engine(f"duckdb:///{path}")
    migrate.upgrade(engine)
    eng.dispose_all()
    _killed_after(path, "migrate.refresh_views(e)")
    _reopens(path)
    con = duckdb.connect(str(path), read_only=True)
    n = con.execute("SELECT COUNT(*) FROM duckdb_columns() WHERE comment IS NOT NULL AND comment <> ''").fetchone()[0]
    con.close()
    assert n > 50  # the comments are there


def test_a_stranded_wal_left_by_an_earlier_version_is_replayed_on_open(tmp_path):
    """The bug itself, without ragrouter's checkpoint: DuckDB alone cannot open the file; the
    store's engine replays the WAL through ATTACH and the data is whole, in either mode."""
    path = tmp_path / "old.duckdb"
    code = ("import duckdb, os, sys\ncon = duckdb.connect(sys.argv[1])\n"
            "con.execute(\"CREATE SEQUENCE s\")\n"
            "con.execute(\"CREATE TABLE t (id INTEGER DEFAULT nextval('s'), name VARCHAR)\")\n"
            "con.execute(\"INSERT INTO t (name) VALUES ('kept')\")\n"
            "con.execute(\"COMMENT ON COLUMN t.id IS 'the key'\")\nos._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=60)
    assert Path(str(path) + ".wal").exists()
    probe = subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1])", str(path)],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode == 0:
        pytest.skip(f"duckdb {duckdb.__version__} replays this WAL itself: the workaround can go")
    assert eng.WAL_REPLAY_BUG in probe.stderr
    for read_only in (True, False):
        engine = eng.make_engine(f"duckdb:///{path}", read_only=read_only)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT id, name FROM t").all() == [(1, "kept")]
            assert conn.exec_driver_sql("SELECT comment FROM duckdb_columns() WHERE table_name = 't' "
                                        "AND column_name = 'id'").scalar() == "the key"
        eng.dispose_all()
    assert not Path(str(path) + ".wal").exists()


def _demo(url: str, cfg: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "cli.py", "--db", url, "--config", str(cfg), "demo", "--quiet",
                             "--out", str(cfg.parent / "report")], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_a_demo_killed_early_and_mid_stage_leaves_a_store_that_opens(tmp_path):
    """``demo`` killed 1.5 s in (the store being made and the corpus ingested) and again once its
    first model stage runs: each time the store opens read-write and read-only, and what was
    committed is there."""
    from tests.test_demo_local import CONFIG

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    timing = tmp_path / "timing"  # figures for every model: no probe, the stages start at once
    timing.mkdir()
    from ragrouter.llm import speed

    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1",
           "RAGROUTER_TIMING_DIR": str(timing),
           "RAGROUTER__routers__mlflow_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    old = os.environ.get("RAGROUTER_TIMING_DIR")
    os.environ["RAGROUTER_TIMING_DIR"] = str(timing)
    try:
        fig = {"overhead_s": 0.1, "prompt_tps": 100.0, "gen_tps": 27.0, "parallel": 2, "load_s": 0.5}
        speed.save({"smollm2-135m": fig, "all-MiniLM-L6-v2": {**fig, "prompt_tps": 5600.0, "gen_tps": None}})
    finally:
        if old is None:
            os.environ.pop("RAGROUTER_TIMING_DIR")
        else:
            os.environ["RAGROUTER_TIMING_DIR"] = old
    path = tmp_path / "demo.duckdb"
    url = f"duckdb:///{path}"

    p = _demo(url, cfg, env)
    time.sleep(1.5)
    assert p.poll() is None, p.stderr.read()[-2000:]
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    p.stderr.close()
    if path.exists():
        _reopens(path)

    p = _demo(url, cfg, env)
    deadline = time.monotonic() + 240
    stage = None
    while p.poll() is None and time.monotonic() < deadline:
        data = progress.read(path)
        stage = (data or {}).get("stage")
        if stage in ("extract", "embed", "answer"):
            break
        time.sleep(0.05)
    assert p.poll() is None and stage in ("extract", "embed", "answer"), (stage, p.stderr.read()[-2000:] if
                                                                            p.poll() is not None else "")
    time.sleep(0.5)  # inside the stage: requests in flight, rows being written
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    p.stderr.close()
    assert _reopens(path) > 10
    engine = eng.make_engine(url, read_only=True)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM queries").scalar() == 3
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM chunks").scalar() > 0
    eng.dispose_all()
