"""Schema migrations (Alembic) and the SQL views of ``queries/views/*.sql``.

Views are dropped before any migration and re-created after it from the ``.sql`` files, in
file-name order, so a view may build on views with smaller names. Each file holds one
``CREATE VIEW name AS …`` statement that runs unchanged on DuckDB and PostgreSQL.
"""

from __future__ import annotations

import re
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.ddl.impl import DefaultImpl
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from ragrouter.paths import REPO_ROOT



class DuckDBImpl(DefaultImpl):
    """Alembic knows no DuckDB dialect; the PostgreSQL-like DDL it emits is what DuckDB takes."""

    __dialect__ = "duckdb"


VIEWS_DIR = REPO_ROOT / "queries" / "views"
_VIEW_NAME = re.compile(r"create\s+(?:or\s+replace\s+)?view\s+([a-z_][a-z0-9_]*)", re.I)


def alembic_config() -> Config:
    cfg = Config(str(REPO_ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(REPO_ROOT / "migrations"))
    return cfg


def view_files() -> list[Path]:
    return sorted(VIEWS_DIR.glob("*.sql"))


def view_name(sql: str, path: Path) -> str:
    match = _VIEW_NAME.search(sql)
    if not match:
        raise ValueError(f"{path}: expected one 'CREATE VIEW name AS …' statement")
    return match.group(1)


def drop_views(conn: Connection) -> None:
    for path in reversed(view_files()):
        name = view_name(path.read_text(), path)
        conn.execute(text(f"DROP VIEW IF EXISTS {name}"))


def create_views(conn: Connection) -> list[str]:
    created = []
    for path in view_files():
        sql = path.read_text()
        name = view_name(sql, path)
        conn.execute(text(f"DROP VIEW IF EXISTS {name}"))
        conn.execute(text(sql))
        created.append(name)
    return created


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _migrate(engine: Engine, fn, revision: str) -> None:
    cfg = alembic_config()
    with engine.begin() as conn:
        drop_views(conn)
        cfg.attributes["connection"] = conn
        fn(cfg, revision)
        rev = MigrationContext.configure(conn).get_current_revision()
        if rev is not None:
            create_views(conn)


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade the store to ``revision`` and (re)create every view."""
    _migrate(engine, command.upgrade, revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Downgrade the store to ``revision`` ('base' removes everything)."""
    _migrate(engine, command.downgrade, revision)


def ensure_current(engine: Engine) -> None:
    """Upgrade a store that is behind head (workers call this before they start)."""
    if current_revision(engine) != head_revision():
        upgrade(engine)
