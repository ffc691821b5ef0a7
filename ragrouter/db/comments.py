"""The schema explains itself: every table, column and view carries a comment in the database.

The comments are generated, never written by hand twice: a table's is its ORM class's
docstring (first paragraph), a column's is its ``doc=`` in :mod:`ragrouter.db.models`, a
view's is the header comment of its ``queries/views/*.sql`` file, and the two bookkeeping
tables outside the ORM (Alembic's ``alembic_version``, ``ragrouter_views``) are described
here. :func:`apply` runs ``COMMENT ON`` for each (DuckDB and PostgreSQL take the same
statement) after every migration and view refresh (:mod:`ragrouter.db.migrate`), only for the
tables and columns the store's revision has; :func:`digest` is kept with the views' hashes, so
a changed docstring re-applies the comments the way a changed view file re-creates the view.
DBeaver, the duckdb CLI (``duckdb_columns()``, ``duckdb_tables()``, ``duckdb_views()``),
psql's ``\\d+`` and notebooks then show them.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ragrouter.db.models import Base

# Tables outside the ORM: (table comment, {column: comment}).
BOOKKEEPING = {
    "alembic_version": ("Alembic's record of the schema revision this store is at (`cli.py db current`).",
                        {"version_num": "The Alembic revision id the schema is at (migrations/versions)."}),
    "ragrouter_views": ("Which SQL each view of the store was made from: a view whose file changed is "
                        "re-created by the next command (ragrouter/db/migrate.py).",
                        {"name": "View name (queries/views/*.sql), or _comments for the schema comments.",
                         "sql_sha256": "sha256 of the view's SQL file (of the comments, for _comments)."}),
}
COMMENTS_KEY = "_comments"  # its row in ragrouter_views: the digest of every comment applied


def _clean(doc: str | None) -> str:
    return re.sub(r"\s+", " ", doc or "").strip()


def _first_paragraph(doc: str | None) -> str:
    return _clean(inspect.cleandoc(doc or "").split("\n\n", 1)[0])


def table_comments() -> dict[str, tuple[str, dict[str, str]]]:
    """{table: (comment, {column: comment})} for every ORM table and the bookkeeping tables."""
    out: dict[str, tuple[str, dict[str, str]]] = {}
    classes = {m.local_table.name: m.class_ for m in Base.registry.mappers}
    for table in Base.metadata.sorted_tables:
        cls = classes.get(table.name)
        comment = table.comment or _first_paragraph(cls.__doc__ if cls is not None else None)
        out[table.name] = (comment, {c.name: _clean(c.comment or c.doc) for c in table.columns})
    out.update(BOOKKEEPING)
    return out


def view_comment(sql: str) -> str:
    """The header comment of a view file (its leading ``--`` lines), as one paragraph."""
    lines = []
    for line in sql.splitlines():
        stripped = line.strip()
        if stripped.startswith("--"):
            lines.append(stripped[2:].strip())
        elif stripped:
            break
    return _clean(" ".join(lines))


_VIEW_NAME = re.compile(r"create\s+(?:or\s+replace\s+)?view\s+([a-z_][a-z0-9_]*)", re.I)


def view_name(sql: str, path: Path) -> str:
    """The name a view file's ``CREATE VIEW`` statement gives."""
    match = _VIEW_NAME.search(sql)
    if not match:
        raise ValueError(f"{path}: expected one 'CREATE VIEW name AS …' statement")
    return match.group(1)


def view_comments(files: list[Path]) -> dict[str, str]:
    out = {}
    for path in files:
        sql = path.read_text()
        out[view_name(sql, path)] = view_comment(sql)
    return out


def digest(files: list[Path]) -> str:
    """sha256 over every comment (tables, columns, views): changes when a docstring does."""
    h = hashlib.sha256()
    for table, (comment, cols) in sorted(table_comments().items()):
        h.update(f"{table}\0{comment}\0".encode())
        for col, c in sorted(cols.items()):
            h.update(f"{col}\0{c}\0".encode())
    for view, c in sorted(view_comments(files).items()):
        h.update(f"v:{view}\0{c}\0".encode())
    return h.hexdigest()


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def apply(conn: Connection, views: list[str], files: list[Path]) -> int:
    """COMMENT ON every table and column the store has, and on ``views``; the statements run."""
    schema = "public" if conn.dialect.name == "postgresql" else "main"
    have_cols: dict[str, set[str]] = {}
    for table, col in conn.execute(text(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c JOIN information_schema.tables t "
            "ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
            "WHERE c.table_schema = :s AND t.table_type = 'BASE TABLE'"), {"s": schema}):
        have_cols.setdefault(str(table), set()).add(str(col))
    present = set(have_cols)
    n = 0
    for table, (comment, cols) in table_comments().items():
        if table not in present:
            continue
        conn.execute(text(f"COMMENT ON TABLE {table} IS {_literal(comment)}"))
        n += 1
        have = have_cols[table]
        for col, c in cols.items():
            if col in have:
                conn.execute(text(f'COMMENT ON COLUMN {table}."{col}" IS {_literal(c)}'))
                n += 1
    wanted = set(views)
    for view, c in view_comments(files).items():
        if view in wanted:
            conn.execute(text(f"COMMENT ON VIEW {view} IS {_literal(c)}"))
            n += 1
    return n
