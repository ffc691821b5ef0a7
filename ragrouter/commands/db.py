"""`cli.py db upgrade|downgrade|current`: schema migrations of the store."""

from __future__ import annotations

import click

from ragrouter.commands.common import Ctx, pass_ctx
from ragrouter.db import migrate


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
    """Upgrade the store to REVISION (default: head) and re-create the SQL views."""
    engine = ctx.engine()
    migrate.upgrade(engine, revision)
    click.echo(f"store at revision {migrate.current_revision(engine)} ({ctx.db_url})")


@db_group.command("downgrade")
@click.argument("revision")
@pass_ctx
def downgrade(ctx: Ctx, revision: str) -> None:
    """Downgrade the store to REVISION ('base' drops every table)."""
    engine = ctx.engine()
    migrate.downgrade(engine, revision)
    click.echo(f"store at revision {migrate.current_revision(engine) or 'base'} ({ctx.db_url})")


@db_group.command("current")
@pass_ctx
def current(ctx: Ctx) -> None:
    """Print the store's revision and the newest one available."""
    engine = ctx.engine()
    click.echo(f"current: {migrate.current_revision(engine) or 'base'}  head: {migrate.head_revision()}")
