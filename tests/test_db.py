"""The store: migrations on DuckDB and PostgreSQL, schema dumps, model/migration drift."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, create_engine, text

from ragrouter.db import migrate, models, schema_dump

SCHEMA_DIR = Path(__file__).parent / "schema"


def _roundtrip(url: str) -> str:
    engine = create_engine(url)
    migrate.upgrade(engine)
    first = schema_dump.dump(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
    migrate.downgrade(engine, "base")
    assert migrate.current_revision(engine) is None
    with engine.connect() as conn:
        left = conn.execute(text(
            "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('chunks', 'llm_calls')"
        )).scalar()
    assert left == 0
    migrate.upgrade(engine)
    assert schema_dump.dump(engine) == first
    engine.dispose()
    return first


def test_duckdb_upgrade_downgrade_upgrade_matches_committed_dump(duck_url):
    dump = _roundtrip(duck_url)
    assert dump == (SCHEMA_DIR / "duckdb.txt").read_text(), (
        "schema changed: write a migration, then refresh tests/schema/duckdb.txt "
        "(python -m tests.refresh_schema)")


def test_postgres_upgrade_downgrade_upgrade_matches_committed_dump(pg_url):
    dump = _roundtrip(pg_url)
    assert dump == (SCHEMA_DIR / "postgresql.txt").read_text()


def test_every_model_table_is_in_the_dump():
    dump = (SCHEMA_DIR / "duckdb.txt").read_text()
    for table in models.Base.metadata.tables:
        assert f"TABLE {table}\n" in dump
    for name in ("corpora", "documents", "chunks", "vectors", "entities", "triples", "corpus_metrics",
                 "queries", "query_checks", "llm_calls", "paradigm_runs", "run_calls", "judgments",
                 "answer_scores", "router_predictions", "work_leases"):
        assert name in models.Base.metadata.tables


def test_models_match_migrations_on_postgres(pg_url):
    engine = create_engine(pg_url)
    migrate.upgrade(engine)
    assert schema_dump.diff_models_vs_migrations(engine) == []
    engine.dispose()


def test_model_change_without_migration_is_detected(pg_url):
    """What CI catches: a column added to a model but not to a migration."""
    engine = create_engine(pg_url)
    migrate.upgrade(engine)
    changed = MetaData(naming_convention=models.NAMING_CONVENTION)
    for table in models.Base.metadata.sorted_tables:
        table.to_metadata(changed)
    changed.tables["chunks"].append_column(Column("language", Integer))
    diffs = schema_dump.diff_models_vs_migrations(engine, changed)
    assert any(d[0] == "add_column" and d[3].name == "language" for d in diffs if isinstance(d, tuple))
    engine.dispose()


def test_model_change_changes_the_dump(tmp_path):
    """The dump comparison itself fails when the schema differs."""
    engine = create_engine(f"duckdb:///{tmp_path / 'x.duckdb'}")
    migrate.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE chunks ADD COLUMN language INTEGER"))
    assert schema_dump.dump(engine) != (SCHEMA_DIR / "duckdb.txt").read_text()
    engine.dispose()


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_sequences_and_upserts_work(backend, duck_url, pg_url):
    from sqlalchemy.dialects.postgresql import insert

    url = duck_url if backend == "duckdb" else pg_url
    engine = create_engine(url)
    migrate.upgrade(engine)
    with engine.begin() as conn:
        stmt = insert(models.Corpus).values(name="c1").on_conflict_do_nothing(index_elements=["name"])
        new = conn.execute(stmt.returning(models.Corpus.id)).scalars().all()
        again = conn.execute(stmt.returning(models.Corpus.id)).scalars().all()
        assert len(new) == 1 and again == []
        conn.execute(insert(models.Corpus).values(name="c2"))
        ids = conn.execute(text("SELECT id FROM corpora ORDER BY id")).scalars().all()
    assert len(ids) == 2 and ids[0] < ids[1]
    engine.dispose()
