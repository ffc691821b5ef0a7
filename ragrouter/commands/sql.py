"""`cli.py sql`: ad-hoc SQL against the store (DuckDB or PostgreSQL alike)."""

from __future__ import annotations

from pathlib import Path

import click
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from ragrouter.commands.common import Ctx, fail, pass_ctx, render_rows


@click.command("sql")
@click.argument("query", required=False)
@click.option("-f", "--file", "file_", type=click.Path(dir_okay=False, path_type=Path),
              help="Read the SQL from this file (e.g. queries/examples/*.sql).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True, help="json = a JSON array of row objects.")
@pass_ctx
def sql_command(ctx: Ctx, query: str | None, file_: Path | None, fmt: str) -> None:
    """Run one SQL statement and print its rows.

    \b
    Examples:
      python cli.py sql "select count(*) as n from chunks" --format json
      python cli.py sql -f queries/examples/tokens_per_correct_answer.sql
    """
    if bool(query) == bool(file_):
        fail("give either a SQL string or -f FILE (not both)")
    if file_:
        try:
            query = file_.read_text(encoding="utf-8")
        except OSError as exc:
            fail(f"{file_}: {exc.strerror}")
    statement = query.strip().rstrip(";")
    engine = ctx.engine()
    try:
        with engine.begin() as conn:
            result = conn.execute(text(statement))
            if result.returns_rows:
                columns = list(result.keys())
                rows = [tuple(r) for r in result.all()]
            else:
                columns, rows = [], []
    except DBAPIError as exc:
        where = f"{file_}: " if file_ else ""
        fail(f"{where}SQL error: {str(exc.orig).splitlines()[0]}")
    if columns:
        click.echo(render_rows(columns, rows, fmt))
