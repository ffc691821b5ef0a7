"""`cli.py sql`: ad-hoc SQL against the store (DuckDB or PostgreSQL alike).

The statement goes to the database driver verbatim (no SQLAlchemy ``text()`` parsing, so
``':x'`` and DuckDB struct literals ``{'k': 1}`` work). Without ``--write`` it runs read-only:
a DuckDB file is opened read-only (other readers and notebooks keep it open meanwhile) and a
PostgreSQL transaction is ``READ ONLY`` and rolled back.
"""

from __future__ import annotations

from pathlib import Path

import click

from ragrouter.commands.common import Ctx, fail, pass_ctx, render_rows
from ragrouter.db.engine import StoreError


def _db_message(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip()
    first = text.splitlines()[0] if text else orig.__class__.__name__
    return first


def execute(engine, statement: str, write: bool) -> tuple[list[str], list[tuple]]:
    """Run one statement verbatim on the driver's own cursor; (columns, rows).

    Read-only unless ``write``: a DuckDB engine of a reader is read-only already; on
    PostgreSQL the transaction is READ ONLY and rolled back."""
    raw = engine.raw_connection()
    pg = engine.dialect.name == "postgresql"  # DuckDB's driver cursor autocommits each statement
    try:
        cursor = raw.cursor()
        if not write and pg:
            cursor.execute("SET TRANSACTION READ ONLY")
        cursor.execute(statement)
        if cursor.description:
            columns = [d[0] for d in cursor.description]
            rows = [tuple(r) for r in cursor.fetchall()]
        else:
            columns, rows = [], []
        if pg and write:
            raw.commit()
        elif pg:
            raw.rollback()
    except BaseException:
        try:
            if pg:
                raw.rollback()
        except Exception:  # noqa: BLE001 - the original error matters
            pass
        raise
    finally:
        raw.close()
    return columns, rows


@click.command("sql")
@click.argument("query", required=False)
@click.option("-f", "--file", "file_", type=click.Path(dir_okay=False, path_type=Path),
              help="Read the SQL from this file (e.g. queries/examples/*.sql).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="json = a JSON array of row objects.")
@click.option("--write", is_flag=True, help="Allow statements that change the store (INSERT, DELETE, "
              "DROP, ...) and commit them. Without it the store is opened read-only.")
@pass_ctx
def sql_command(ctx: Ctx, query: str | None, file_: Path | None, fmt: str, write: bool) -> None:
    """Run one SQL statement and print its rows (read-only unless --write).

    The SQL is passed to the database unchanged (DuckDB or PostgreSQL syntax).

    \b
    Examples:
      python cli.py sql "select count(*) as n from chunks" --format json
      python cli.py sql -f queries/examples/tokens_per_correct_answer.sql
      python cli.py sql --write "delete from unit_failures where stage = 'judge'"
    """
    if bool(query) == bool(file_):
        fail("give either a SQL string or -f FILE (not both)")
    if file_:
        try:
            query = file_.read_text(encoding="utf-8")
        except OSError as exc:
            fail(f"{file_}: {exc.strerror}")
        except UnicodeDecodeError as exc:
            fail(f"{file_}: not UTF-8 text (byte offset {exc.start})")
    statement = query.strip().rstrip(";").strip()
    if not statement:
        fail(f"{file_ or 'the SQL string'}: no SQL statement")
    engine = ctx.engine(read_only=not write)
    where = f"{file_}: " if file_ else ""
    try:
        columns, rows = execute(engine, statement, write)
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - every database error becomes one line
        msg = _db_message(exc)
        hint = ""
        low = msg.lower()
        if not write and ("read-only" in low or "read only" in low):
            hint = " (sql is read-only; add --write to change the store)"
        fail(f"{where}SQL error: {msg}{hint}")
    if columns:
        click.echo(render_rows(columns, rows, fmt))
