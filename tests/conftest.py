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


# A migrated store is made once per test process and copied for each test that asks for one
# (a migration takes about 1.3 s; a copy a few ms): the copy is the migrated store byte for
# byte, given its own store id as each migrated store has. tests/test_db*.py and
# tests/test_migrations_walk.py migrate for real.
_TEMPLATES: dict[str, str] = {}


def _new_store_id(engine) -> None:
    from sqlalchemy import text

    with engine.begin() as conn:
        conn.execute(text("UPDATE store_info SET store_id = :sid"), {"sid": str(uuid.uuid4())})


def _migrate_and_release(url: str) -> None:
    """Migrate the store at ``url`` and close its engine (no other engine is touched)."""
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate

    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    eng.forget(engine)


def _duck_template() -> str:
    if "duckdb" not in _TEMPLATES:
        import tempfile

        path = Path(tempfile.mkdtemp(prefix="ragrouter-template-")) / "store.duckdb"
        _migrate_and_release(f"duckdb:///{path}")
        assert not path.with_name(path.name + ".wal").exists()  # the file alone holds the store
        _TEMPLATES["duckdb"] = str(path)
    return _TEMPLATES["duckdb"]


@pytest.fixture
def pg_store(pg_cluster):
    """A migrated PostgreSQL store (a fresh database made from a migrated template); yields its
    engine, disposed afterwards."""
    from ragrouter.db import engine as eng

    if "postgresql" not in _TEMPLATES:
        name = "tmpl_" + uuid.uuid4().hex[:12]
        _migrate_and_release(pg_cluster.create_database(name))
        _TEMPLATES["postgresql"] = name
    url = pg_cluster.create_database("t_" + uuid.uuid4().hex[:12], template=_TEMPLATES["postgresql"])
    engine = eng.make_engine(url)
    _new_store_id(engine)
    yield engine
    eng.dispose_all()


@pytest.fixture
def duck_url(tmp_path) -> str:
    """A fresh DuckDB file URL."""
    return f"duckdb:///{tmp_path / 'store.duckdb'}"


@pytest.fixture
def store(duck_url):
    """A migrated DuckDB store (a copy of a migrated template) at ``duck_url``; yields its engine
    and releases the file afterwards."""
    import shutil

    from ragrouter.db import engine as eng

    shutil.copyfile(_duck_template(), eng.duckdb_path(duck_url))
    engine = eng.make_engine(duck_url)
    _new_store_id(engine)
    yield engine
    eng.dispose_all()


# The test files that run the local models take minutes; collected first, they start at once on
# the two pytest workers (make test: -n 2 --dist loadfile) instead of running alone at the end.
SLOW_FILES_FIRST = ("test_demo_local.py", "test_corpus_extract_local.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
