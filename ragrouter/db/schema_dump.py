"""A deterministic text dump of a store's schema (tables, columns, keys, indexes, views).

A committed dump per database (``tests/schema/<dialect>.txt``) is compared with the dump of
a freshly migrated store, as MLflow does; together with
:func:`diff_models_vs_migrations` this makes a model change without a migration fail CI.
"""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.engine import Engine

from ragrouter.db.models import Base


def _schema(engine: Engine) -> str:
    return "main" if engine.dialect.name.startswith("duckdb") else "public"


def dump(engine: Engine) -> str:
    """Tables, columns, constraints, indexes and views, read from information_schema.

    (SQLAlchemy's reflection does not work against duckdb-engine, so plain SQL is used.)"""
    schema = _schema(engine)
    lines: list[str] = []
    with engine.connect() as conn:
        def rows(sql: str, **params):
            return conn.execute(text(sql), {"s": schema, **params}).all()

        tables = [r[0] for r in rows(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = :s "
            "AND table_type = 'BASE TABLE' AND table_name NOT IN ('alembic_version', 'ragrouter_views') "
            "ORDER BY table_name")]
        for table in tables:
            lines.append(f"TABLE {table}")
            for name, dtype, nullable, default in rows(
                "SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns "
                "WHERE table_schema = :s AND table_name = :t ORDER BY ordinal_position", t=table):
                null = "NULL" if nullable == "YES" else "NOT NULL"
                seq = " SEQUENCE" if default and "nextval" in str(default) else ""
                lines.append(f"  {name} {dtype.upper()} {null}{seq}")
            cons: dict[tuple[str, str], list[str]] = {}
            for cname, ctype, col in rows(
                "SELECT tc.constraint_name, tc.constraint_type, kcu.column_name "
                "FROM information_schema.table_constraints tc JOIN information_schema.key_column_usage kcu "
                "ON tc.constraint_name = kcu.constraint_name AND tc.table_name = kcu.table_name "
                "AND tc.table_schema = kcu.table_schema "
                "WHERE tc.table_schema = :s AND tc.table_name = :t "
                "AND tc.constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY') "
                "ORDER BY tc.constraint_name, kcu.ordinal_position", t=table):
                cons.setdefault((ctype, cname), []).append(col)
            for (ctype, _cname), cols in sorted(cons.items(), key=lambda kv: (kv[0][0], kv[1])):
                lines.append(f"  {ctype} ({', '.join(cols)})")
            for (idx,) in rows(_INDEX_SQL[engine.dialect.name.startswith("duckdb")], t=table):
                lines.append(f"  INDEX {idx}")
        for (view,) in rows("SELECT table_name FROM information_schema.views WHERE table_schema = :s "
                            "ORDER BY table_name"):
            lines.append(f"VIEW {view}")
    return "\n".join(lines) + "\n"


_INDEX_SQL = {
    True: "SELECT index_name FROM duckdb_indexes() WHERE schema_name = :s AND table_name = :t "
          "AND NOT is_unique AND NOT is_primary ORDER BY index_name",
    False: "SELECT i.indexname FROM pg_indexes i WHERE i.schemaname = :s AND i.tablename = :t "
           "AND i.indexname LIKE 'ix\\_%' ORDER BY i.indexname",
}


def diff_models_vs_migrations(engine: Engine, metadata=Base.metadata) -> list:
    """Differences between the ORM models and a migrated PostgreSQL store (empty = in sync)."""
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diffs = compare_metadata(ctx, metadata)
    # Foreign keys are added by hand on PostgreSQL only; autogenerate does not render
    # ddl_if constraints, so it reports them as extra on the database side.
    # ragrouter_views is bookkeeping beside alembic_version (ragrouter.db.migrate), not a model.
    # Comments are applied from the ORM docs after every migration (db/comments.py), not by the
    # migrations: autogenerate's comment diffs (one per column, nested in modify lists) say nothing.
    def is_comment(d) -> bool:
        if isinstance(d, list):
            return all(is_comment(x) for x in d)
        return isinstance(d, tuple) and d[0] in ("modify_comment", "add_table_comment", "remove_table_comment")

    return [d for d in diffs if not (isinstance(d, tuple) and d[0] == "remove_fk") and not is_comment(d)
            and not (isinstance(d, tuple) and d[0] == "remove_table" and d[1].name == "ragrouter_views")]
