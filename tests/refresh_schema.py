"""Refresh the committed schema dumps after writing a migration:
`.venv/bin/python -m tests.refresh_schema`."""

from __future__ import annotations

import tempfile
from pathlib import Path

from sqlalchemy import create_engine

from ragrouter.db import migrate, schema_dump
from ragrouter.db.pgtemp import TempPostgres

OUT = Path(__file__).parent / "schema"

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine(f"duckdb:///{tmp}/s.duckdb")
        migrate.upgrade(engine)
        (OUT / "duckdb.txt").write_text(schema_dump.dump(engine))
        engine.dispose()
    with TempPostgres() as pg:
        engine = create_engine(pg.create_database("dump"))
        migrate.upgrade(engine)
        (OUT / "postgresql.txt").write_text(schema_dump.dump(engine))
        engine.dispose()
    print(f"wrote {OUT}/duckdb.txt and {OUT}/postgresql.txt")
