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


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_a_json_column_read_by_raw_sql_is_the_value_written_on_both_backends(backend, duck_url, pg_url):
    """``db.values.json_value``: a ``text()`` query gets a JSON column parsed (psycopg,
    duckdb_engine 0.17) or as JSON text (any expression typed text); either way the reader gets
    what the ORM wrote, and SQL NULL gives the default."""
    from ragrouter.db.values import json_value

    engine = create_engine(duck_url if backend == "duckdb" else pg_url)
    migrate.upgrade(engine)
    meta = {"note": "ünïcode", "ids": [3, 1, 2], "nested": {"x": 1.5, "ok": True, "none": None}}
    with engine.begin() as conn:
        conn.execute(models.Corpus.__table__.insert().values(name="c1", meta=meta))
        conn.execute(text("INSERT INTO corpora (id, name, meta) VALUES (99, 'c2', NULL)"))
        rows = conn.execute(text("SELECT name, meta, CAST(meta AS VARCHAR) FROM corpora ORDER BY name")).all()
    engine.dispose()
    (_, parsed, as_text), (_, null, null_text) = rows
    assert isinstance(parsed, dict) and isinstance(as_text, str)  # the two forms the readers meet
    assert json_value(parsed) == json_value(as_text) == meta
    assert json_value(null, {}) == {} and json_value(null_text) is None


# ---------------------------------------------------------------------------------------------
# the schema explains itself (issue 32 item 3): COMMENT ON from the ORM docs and view headers


def _missing_comments(engine) -> dict[str, list]:
    """Base-table columns, base tables and views without a comment, per the database's own
    catalogue (duckdb_columns/duckdb_tables/duckdb_views; pg_description on PostgreSQL)."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            cols = conn.execute(text(
                "SELECT c.relname, a.attname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
                "LEFT JOIN pg_description d ON d.objoid = c.oid AND d.objsubid = a.attnum "
                "WHERE n.nspname = 'public' AND c.relkind = 'r' AND coalesce(d.description, '') = ''")).all()
            rels = conn.execute(text(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "LEFT JOIN pg_description d ON d.objoid = c.oid AND d.objsubid = 0 "
                "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'v') AND coalesce(d.description, '') = ''")).all()
            n_views = conn.execute(text("SELECT count(*) FROM pg_views WHERE schemaname = 'public'")).scalar()
        else:
            cols = conn.execute(text(
                "SELECT c.table_name, c.column_name FROM duckdb_columns() c JOIN duckdb_tables() t "
                "ON t.table_name = c.table_name AND t.schema_name = c.schema_name "
                "WHERE coalesce(c.comment, '') = ''")).all()
            rels = conn.execute(text(
                "SELECT table_name FROM duckdb_tables() WHERE coalesce(comment, '') = '' UNION ALL "
                "SELECT view_name FROM duckdb_views() WHERE NOT internal AND coalesce(comment, '') = ''")).all()
            n_views = conn.execute(text("SELECT count(*) FROM duckdb_views() WHERE NOT internal")).scalar()
    return {"columns": [tuple(r) for r in cols], "relations": [r[0] for r in rels], "views": n_views}


@pytest.mark.parametrize("backend", ["duckdb", "postgresql"])
def test_every_table_column_and_view_carries_its_comment(backend, duck_url, pg_url):
    from ragrouter.db import comments
    from ragrouter.db import engine as eng

    engine = eng.make_engine(duck_url if backend == "duckdb" else pg_url)
    try:
        migrate.upgrade(engine)
        missing = _missing_comments(engine)
        assert missing["columns"] == [], "give these ORM columns a doc= (ragrouter/db/models.py)"
        assert missing["relations"] == [], "a table without a class docstring or a view file without a header"
        assert missing["views"] == len(migrate.view_files())
        with engine.connect() as conn:  # the catalogue says what the ORM's doc says
            if backend == "duckdb":
                got = conn.execute(text("SELECT comment FROM duckdb_columns() WHERE table_name = 'corpora' "
                                        "AND column_name = 'name'")).scalar()
                view = conn.execute(text("SELECT comment FROM duckdb_views() WHERE view_name = 'v_judgment'")).scalar()
            else:
                got = conn.execute(text("SELECT col_description('corpora'::regclass, "
                                        "(SELECT attnum FROM pg_attribute WHERE attrelid = 'corpora'::regclass "
                                        "AND attname = 'name'))")).scalar()
                view = conn.execute(text("SELECT obj_description('v_judgment'::regclass)")).scalar()
        assert got == models.Corpus.__table__.c.name.doc
        assert view.startswith("One LLM-as-a-judge label per (paradigm run, judge model)")
        # a changed docstring re-applies the comments the way a changed view file re-creates it
        col = models.Corpus.__table__.c.name
        old = col.doc
        try:
            col.doc = "The corpus's name, as users type it."
            assert migrate.needs_work(engine) == "views"
            migrate.ensure_current(engine)
            with engine.connect() as conn:
                q = ("SELECT comment FROM duckdb_columns() WHERE table_name = 'corpora' AND column_name = 'name'"
                     if backend == "duckdb" else
                     "SELECT d.description FROM pg_description d JOIN pg_attribute a ON a.attrelid = d.objoid "
                     "AND a.attnum = d.objsubid WHERE d.objoid = 'corpora'::regclass AND a.attname = 'name'")
                assert conn.execute(text(q)).scalar() == "The corpus's name, as users type it."
        finally:
            col.doc = old
        assert comments.view_comment("-- a view\n--  of two lines\nCREATE VIEW v AS SELECT 1") == "a view of two lines"
    finally:
        eng.dispose_all()
