"""Shared fixtures: fresh DuckDB stores and a throwaway PostgreSQL cluster on 127.0.0.1."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from ragrouter.corpus import demo


def _shared_data() -> Path:
    """The shared data sets: $RAGROUTER_SHARED_DATA, else ../shared/data beside the clone."""
    env = os.environ.get("RAGROUTER_SHARED_DATA")
    return Path(env) if env else demo.default_data_dir().parent


SHARED_DATA = _shared_data()

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# This machine's speed-probe figures (run --dry-run --probe, the demo) must not change what a
# test's dry run expects: the tests keep their own, empty to start with.
if "RAGROUTER_TIMING_DIR" not in os.environ:
    import tempfile

    os.environ["RAGROUTER_TIMING_DIR"] = tempfile.mkdtemp(prefix="ragrouter-timing-")
# ... nor the other work on the machine (the time model scales local work by it): idle cores
os.environ.setdefault("RAGROUTER_OTHER_CORES", "0")


@pytest.fixture(scope="session")
def pg_cluster():
    """One PostgreSQL server for the whole session (Debian binaries, fsync off)."""
    from ragrouter.db.pgtemp import TempPostgres

    pg = TempPostgres().start()
    yield pg
    pg.stop()


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """A fresh, empty database on the session's PostgreSQL server."""
    return pg_cluster.create_database("t_" + uuid.uuid4().hex[:12])


def _migrated(url: str):
    """Yield a migrated store's engine at ``url``; dispose every engine afterwards."""
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate

    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    yield engine
    eng.dispose_all()


@pytest.fixture
def pg_store(pg_url):
    """A migrated PostgreSQL store (a fresh database); yields its engine, disposed afterwards."""
    yield from _migrated(pg_url)


@pytest.fixture
def duck_url(tmp_path) -> str:
    """A fresh DuckDB file URL."""
    return f"duckdb:///{tmp_path / 'store.duckdb'}"


@pytest.fixture
def store(duck_url):
    """A migrated DuckDB store; yields its engine and releases the file afterwards."""
    yield from _migrated(duck_url)


# The test files that run the local models take minutes; collected first, they start at once on
# the two pytest workers (make test: -n 2 --dist loadfile) instead of running alone at the end.
SLOW_FILES_FIRST = ("test_demo_local.py", "test_corpus_extract_local.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
