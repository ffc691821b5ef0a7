#!/usr/bin/env python
"""ragrouter command line. Run `python cli.py --help` for the commands."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import click  # noqa: E402

from ragrouter.commands import common  # noqa: E402
from ragrouter.commands.ask import ask_command  # noqa: E402
from ragrouter.commands.corpus import corpus_group  # noqa: E402
from ragrouter.commands.db import db_group  # noqa: E402
from ragrouter.commands.demo import demo_command  # noqa: E402
from ragrouter.commands.export import export_command  # noqa: E402
from ragrouter.commands.ingest import ingest_command  # noqa: E402
from ragrouter.commands.judge import judge_group  # noqa: E402
from ragrouter.commands.models import models_group  # noqa: E402
from ragrouter.commands.report import report_command  # noqa: E402
from ragrouter.commands.routers import mlflow_ui_command, routers_group  # noqa: E402
from ragrouter.commands.run import run_command  # noqa: E402
from ragrouter.commands.sql import sql_command  # noqa: E402
from ragrouter.commands.status import status_command  # noqa: E402
from ragrouter.db.engine import DEFAULT_URL  # noqa: E402


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", "db_url", envvar="RAGROUTER_DB", default=DEFAULT_URL, show_default=True,
              help="Store URL: duckdb:///FILE or postgresql://USER@HOST/DB (env RAGROUTER_DB).")
@click.option("--config", "config_path", envvar="RAGROUTER_CONFIG", default=None,
              help="YAML config merged over configs/default.yaml (env RAGROUTER_CONFIG); "
                   "RAGROUTER__a__b=value overrides any setting.")
@click.pass_context
def cli(click_ctx: click.Context, db_url: str, config_path: str | None) -> None:
    """ragrouter: which RAG paradigm answers best, for your corpus and queries, at what cost.

    Every artefact of the benchmark is a row in one store (DuckDB file by default); stages
    are resumable and never spend a token twice.
    """
    click_ctx.obj = common.Ctx(db_url=db_url, config_path=config_path)


cli.add_command(db_group)
cli.add_command(ingest_command)
cli.add_command(corpus_group)
cli.add_command(run_command)
cli.add_command(demo_command)
cli.add_command(ask_command)
cli.add_command(judge_group)
cli.add_command(models_group)
cli.add_command(report_command)
cli.add_command(routers_group)
cli.add_command(mlflow_ui_command)
cli.add_command(export_command)
cli.add_command(sql_command)
cli.add_command(status_command)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user errors become one line on stderr and exit status 2."""
    try:
        cli.main(args=argv, prog_name="cli.py", standalone_mode=False)
    except click.exceptions.Abort:
        common.echo_err("aborted")
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except common.USER_ERRORS as exc:
        common.echo_err(f"error: {exc}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
