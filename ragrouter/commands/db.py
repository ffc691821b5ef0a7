"""`cli.py db upgrade|downgrade|current`: schema migrations of the store."""

from __future__ import annotations

import click

from ragrouter.commands.common import Ctx, pass_ctx
from ragrouter.db import migrate
from ragrouter.db.engine import duckdb_path, make_engine, resolve_url


@click.group("db")
def db_group() -> None:
    """Create, migrate or inspect the store's schema.

    \b
    Example:
      python cli.py db upgrade
      python cli.py --db postgresql://me@127.0.0.1/ragrouter db current
    """


@db_group.command("upgrade")
@click.argument("revision", default="head")
@pass_ctx
def upgrade(ctx: Ctx, revision: str) -> None:
    """Upgrade the store to REVISION (default: head) and re-create the SQL views.

    This is the command that creates a DuckDB file that does not exist yet."""
    engine = ctx.engine(create=True)
    migrate.upgrade(engine, revision)
    click.echo(f"store at revision {migrate.current_revision(engine)} ({ctx.db_url})")


@db_group.command("downgrade")
@click.argument("revision")
@click.option("--yes", is_flag=True, help="Drop tables that hold rows and columns that hold values "
              "(without it such a downgrade is refused, naming them and their row / value counts).")
@pass_ctx
def downgrade(ctx: Ctx, revision: str, yes: bool) -> None:
    """Downgrade the store to REVISION ('base' drops every table).

    A downgrade that would drop tables holding rows, or columns holding values, changes nothing
    unless --yes is given. Below head, only the views whose tables and columns the revision
    has are created.

    \b
    Example:
      python cli.py db downgrade 0003 --yes"""
    engine = ctx.engine()
    lost = migrate.downgrade(engine, revision, allow_loss=yes)
    gone = "; dropped " + ", ".join(f"{t} ({n} {'values' if '.' in t else 'rows'})"
                                    for t, n in sorted(lost.items())) if lost else ""
    click.echo(f"store at revision {migrate.current_revision(engine) or 'base'} ({ctx.db_url}){gone}")


@db_group.command("current")
@pass_ctx
def current(ctx: Ctx) -> None:
    """Print the store's revision and the newest one available (opens the store read-only)."""
    url = resolve_url(ctx.db_url)
    # Read-only without the up-to-date step of Ctx.engine: this command reports, never migrates.
    engine = make_engine(url, read_only=duckdb_path(url) is not None, create=False)
    rev = migrate.check_revision(engine)
    views = "current" if migrate.views_current(engine) else "outdated (re-created by the next command that writes)"
    click.echo(f"current: {rev or 'base'}  head: {migrate.head_revision()}  views: {views}")
