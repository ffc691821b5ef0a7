"""Schema migrations (Alembic) and the SQL views of ``queries/views/*.sql``.

Views are dropped before any migration and re-created after it from the ``.sql`` files, in
file-name order, so a view may build on views with smaller names. Each file holds one
``CREATE VIEW name AS …`` statement that runs unchanged on DuckDB and PostgreSQL.

The store remembers the sha256 of each view's SQL in the bookkeeping table
``ragrouter_views`` (beside Alembic's ``alembic_version``, outside the ORM); whenever the
files differ from what the store holds — a store made by an earlier commit at the same
revision — :func:`ensure_current` re-creates the views, without a revision change.

After the views, every table, column and view gets its comment (:mod:`ragrouter.db.comments`,
generated from the ORM's docstrings and the views' header comments); their digest is kept in
``ragrouter_views`` too, so a changed docstring re-applies them.
"""

from __future__ import annotations

from pathlib import Path

import hashlib

from alembic import command
from alembic.config import Config
from alembic.util.exc import CommandError
from alembic.ddl.impl import DefaultImpl
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from ragrouter.db import comments
from ragrouter.db.comments import view_name
from ragrouter.db.engine import StoreError
from ragrouter.db.models import Base
from ragrouter.paths import DATA_ROOT

VIEWS_TABLE = "ragrouter_views"


class DuckDBImpl(DefaultImpl):
    """Alembic knows no DuckDB dialect; the PostgreSQL-like DDL it emits is what DuckDB takes."""

    __dialect__ = "duckdb"


VIEWS_DIR = DATA_ROOT / "queries" / "views"


def alembic_config() -> Config:
    cfg = Config(str(DATA_ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(DATA_ROOT / "migrations"))
    return cfg


def view_files() -> list[Path]:
    return sorted(VIEWS_DIR.glob("*.sql"))


def drop_views(conn: Connection) -> None:
    """Drop the views of queries/views and any the store recorded (older files), newest first."""
    names = [view_name(path.read_text(), path) for path in view_files()]
    stored = stored_view_hashes(conn) or {}
    stored.pop(comments.COMMENTS_KEY, None)
    for name in sorted(set(stored) - set(names), reverse=True) + list(reversed(names)):
        conn.execute(text(f"DROP VIEW IF EXISTS {name}"))


def view_hashes() -> dict[str, str]:
    """{view name: sha256 of its SQL file}, for every file of queries/views, and the digest of
    the schema's comments (key ``comments.COMMENTS_KEY``)."""
    out = {}
    for path in view_files():
        sql = path.read_text()
        out[view_name(sql, path)] = hashlib.sha256(sql.encode("utf-8")).hexdigest()
    out[comments.COMMENTS_KEY] = comments.digest(view_files())
    return out


def stored_view_hashes(conn: Connection) -> dict[str, str] | None:
    """What the store says its views were made from (None: no bookkeeping table yet)."""
    if not _has_table(conn, VIEWS_TABLE):
        return None
    return {name: digest for name, digest in conn.execute(text(f"SELECT name, sql_sha256 FROM {VIEWS_TABLE}"))}


def store_relations() -> tuple[set[str], set[str]]:
    """(relations, sequences) the migrations make: the ORM's tables, the views of queries/views,
    Alembic's version table and the views' bookkeeping table; the ORM's sequences. Read-only
    ``sql`` on PostgreSQL may read these and nothing else of the schema."""
    relations = set(Base.metadata.tables) | {view_name(p.read_text(), p) for p in view_files()}
    relations |= {VIEWS_TABLE, "alembic_version"}
    return relations, set(Base.metadata._sequences)


def _has_table(conn: Connection, name: str) -> bool:
    schema = "main" if conn.dialect.name.startswith("duckdb") else "public"
    return conn.execute(text("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = :s "
                             "AND table_name = :t"), {"s": schema, "t": name}).scalar_one() > 0


def _record_views(conn: Connection, names: list[str] | None = None) -> None:
    conn.execute(text(f"CREATE TABLE IF NOT EXISTS {VIEWS_TABLE} (name VARCHAR(200) PRIMARY KEY, "
                      "sql_sha256 VARCHAR(64) NOT NULL)"))
    conn.execute(text(f"DELETE FROM {VIEWS_TABLE}"))
    for name, digest in view_hashes().items():
        if names is not None and name not in names and name != comments.COMMENTS_KEY:
            continue
        conn.execute(text(f"INSERT INTO {VIEWS_TABLE} (name, sql_sha256) VALUES (:n, :h)"),
                     {"n": name, "h": digest})


def create_views(conn: Connection, *, only_where_tables_exist: bool = False) -> list[str]:
    """Create every view of queries/views (in file order); the names created.

    ``only_where_tables_exist`` (a store below head, after a downgrade): a view whose tables or
    columns the store's revision lacks — or that builds on such a view — is skipped instead of
    failing the migration; only the views created are recorded, so the store reads as
    'views outdated' until it is back at head. On PostgreSQL each attempt runs in a savepoint;
    DuckDB's binder refuses such a view before it changes anything (the transaction stays
    usable)."""
    created = []
    pg = conn.dialect.name == "postgresql"
    for path in view_files():
        sql = path.read_text()
        name = view_name(sql, path)
        conn.execute(text(f"DROP VIEW IF EXISTS {name}"))
        if not only_where_tables_exist:
            conn.execute(text(sql))
            created.append(name)
            continue
        try:
            if pg:
                with conn.begin_nested():
                    conn.execute(text(sql))
            else:
                conn.execute(text(sql))
        except Exception:  # noqa: BLE001 - a table or column this revision does not have
            continue
        created.append(name)
    _record_views(conn, created)
    comments.apply(conn, created, view_files())  # tables, columns and views explain themselves
    return created


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def known_revisions() -> list[str]:
    return [r.revision for r in ScriptDirectory.from_config(alembic_config()).walk_revisions()]


def check_revision(engine: Engine) -> str | None:
    """The store's revision; one line (StoreError) when this code does not know it."""
    try:
        rev = current_revision(engine)
    except Exception as exc:  # noqa: BLE001 - a broken alembic_version table
        raise StoreError(f"cannot read the store's revision: {str(exc).splitlines()[0]}") from None
    if rev is not None and rev not in known_revisions():
        raise StoreError(f"store is at revision {rev!r}, which this version of ragrouter does not know "
                         f"(its newest is {head_revision()}): it was made by a newer or different version; "
                         "use that version, or a store made by this one")
    return rev


def _table_rows(conn: Connection) -> dict[str, int]:
    schema = "main" if conn.dialect.name.startswith("duckdb") else "public"
    names = [r[0] for r in conn.execute(text(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = :s "
        "AND table_type = 'BASE TABLE' AND table_name NOT IN ('alembic_version', 'store_info', :v)"),
        {"s": schema, "v": VIEWS_TABLE})]  # bookkeeping (the store id) is no user data
    return {n: int(conn.execute(text(f'SELECT COUNT(*) FROM "{n}"')).scalar_one()) for n in names}


def _columns(conn: Connection) -> dict[str, list[str]]:
    """{table: its columns} of the store's base tables."""
    schema = "main" if conn.dialect.name.startswith("duckdb") else "public"
    out: dict[str, list[str]] = {}
    for table, column in conn.execute(text(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
            "WHERE c.table_schema = :s AND t.table_type = 'BASE TABLE' ORDER BY c.table_name, c.ordinal_position"),
            {"s": schema}):
        out.setdefault(table, []).append(column)
    return out


def _column_values(conn: Connection, rows: dict[str, int]) -> dict[str, int]:
    """{'table.column': values that are not NULL}, for every column of the tables with rows
    (one scan per table)."""
    out: dict[str, int] = {}
    for table, columns in _columns(conn).items():
        if not rows.get(table):
            continue
        counts = conn.execute(text("SELECT " + ", ".join(f'COUNT("{c}")' for c in columns)
                                   + f' FROM "{table}"')).one()
        out.update({f"{table}.{c}": int(n) for c, n in zip(columns, counts)})
    return out


class DataLossError(StoreError):
    """A downgrade would drop tables that hold rows, or columns that hold values."""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _migrate(engine: Engine, fn, revision: str, *, allow_loss: bool = True) -> dict[str, int]:
    """Run an Alembic command in one transaction; what it dropped that held data:
    {table: rows} for dropped tables, {'table.column': values} for dropped columns of tables
    that remain.

    With ``allow_loss=False`` a migration that drops tables holding rows or columns holding
    values (not NULL) is rolled back (DDL is transactional on DuckDB and PostgreSQL) and
    DataLossError names what would go. Below head, views are created only where the
    revision's tables and columns allow (:func:`create_views`)."""
    cfg = alembic_config()
    check_revision(engine)
    downgrading = fn is command.downgrade
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            before = _table_rows(conn)
            values = _column_values(conn, before) if downgrading else {}
            drop_views(conn)
            cfg.attributes["connection"] = conn
            try:
                fn(cfg, revision)
            except CommandError as exc:
                raise StoreError(f"cannot migrate to revision {revision!r}: {str(exc).splitlines()[0]} "
                                 f"(known: {', '.join(reversed(known_revisions()))}, head, base)") from None
            after = _columns(conn)
            lost = {t: n for t, n in before.items() if t not in after and n > 0}
            lost_columns = {tc: n for tc, n in values.items() if n > 0 and tc.split(".", 1)[0] in after
                            and tc.split(".", 1)[1] not in after[tc.split(".", 1)[0]]}
            if (lost or lost_columns) and not allow_loss:
                parts = []
                if lost:
                    parts.append(f"{len(lost)} table(s) holding rows: " + ", ".join(
                        f"{t} ({_plural(n, 'row')})" for t, n in sorted(lost.items())))
                if lost_columns:
                    parts.append(f"{len(lost_columns)} column(s) holding values: " + ", ".join(
                        f"{c} ({_plural(n, 'value')})" for c, n in sorted(lost_columns.items())))
                raise DataLossError(f"downgrade to {revision} would drop {' and '.join(parts)}; "
                                    "nothing was changed; pass --yes to drop them")
            lost.update(lost_columns)
            rev = MigrationContext.configure(conn).get_current_revision()
            if rev is not None:
                create_views(conn, only_where_tables_exist=rev != head_revision())
            else:
                conn.execute(text(f"DROP TABLE IF EXISTS {VIEWS_TABLE}"))
        except BaseException:
            trans.rollback()
            raise
        trans.commit()
        checkpoint(conn)
    return lost


def checkpoint(conn: Connection) -> None:
    """Write a DuckDB store's WAL into the file now, so a process killed next leaves no WAL.

    DuckDB 1.5.5 cannot replay a WAL that holds ``COMMENT ON COLUMN`` of a column whose default
    is ``nextval(...)`` ("Calling DatabaseManager::GetDefaultDatabase with no default database
    set"): a store killed after a migration and before DuckDB's own checkpoint could never be
    opened again (docs/duckdb-wal-comment-bug.md has the reproducer). Every migration and view
    refresh ends here, so the DDL and comments are in the file before the store is handed on.
    PostgreSQL needs nothing."""
    if conn.dialect.name.startswith("duckdb"):
        conn.execute(text("CHECKPOINT"))


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade the store to ``revision`` and (re)create every view."""
    _migrate(engine, command.upgrade, revision)


def downgrade(engine: Engine, revision: str, *, allow_loss: bool = True) -> dict[str, int]:
    """Downgrade the store to ``revision`` ('base' removes everything); the tables with rows dropped.

    ``allow_loss=False`` refuses (DataLossError, store unchanged) when tables holding rows would go."""
    return _migrate(engine, command.downgrade, revision, allow_loss=allow_loss)


def views_current(engine: Engine) -> bool:
    with engine.connect() as conn:
        return stored_view_hashes(conn) == view_hashes()


def refresh_views(engine: Engine) -> None:
    """Re-create every view from queries/views (the schema is not touched)."""
    with engine.connect() as conn:
        with conn.begin():
            drop_views(conn)
            create_views(conn)
        checkpoint(conn)


def needs_work(engine: Engine) -> str | None:
    """What ensure_current would do: 'upgrade', 'views' or None (the store is current)."""
    rev = check_revision(engine)
    if rev != head_revision():
        return "upgrade"
    return None if views_current(engine) else "views"


def ensure_current(engine: Engine) -> None:
    """Upgrade a store that is behind head, and re-create views whose SQL changed (workers and
    commands call this before they start). A read-only engine is never written: the caller
    (``Ctx.engine``) brings the store up to date before it opens it read-only."""
    work = needs_work(engine)
    if work is None or getattr(engine, "ragrouter_read_only", False):
        return
    if work == "upgrade":
        upgrade(engine)
    else:
        refresh_views(engine)
