"""Alembic environment: the same migrations run on DuckDB and PostgreSQL.

The engine comes from ``config.attributes["connection"]`` when ragrouter calls Alembic
(``ragrouter.db.migrate``), else from the store URL (``RAGROUTER_DB`` or the default).
"""

from alembic import context

from ragrouter.db import migrate  # noqa: F401  (registers the DuckDB impl)
from ragrouter.db.engine import make_engine
from ragrouter.db.models import Base


config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        engine = make_engine(config.get_main_option("sqlalchemy.url") or None)
        with engine.connect() as connection:
            _run(connection)
            connection.commit()
    else:
        _run(connection)


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      transaction_per_migration=False)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():  # pragma: no cover - not supported
    raise SystemExit("offline (SQL script) migrations are not supported; run against a store")
run_migrations_online()
