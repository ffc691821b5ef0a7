"""`cli.py report`: the paper's tables (Markdown + CSV) and figures (PNG) from the store."""

from __future__ import annotations

from pathlib import Path

import click

from ragrouter.commands.common import Ctx, fail, file_system_error, pass_ctx
from ragrouter.config import ConfigError
from ragrouter.console import library_warnings
from ragrouter.db import migrate
from ragrouter.evaluation.judge import judge_key


@click.command("report")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("reports/latest"),
              show_default=True, help="Folder for report.md, report.html, the CSV tables and the PNG/SVG figures.")
@click.option("--judge", default=None,
              help="Judge model whose labels the figures use (default: the configured judge if it judged "
                   "anything, else the judge with the most judged runs). Tables list every judge.")
@click.option("--quiet", is_flag=True, help="No progress bar (none either when stderr is not a terminal).")
@pass_ctx
def report_command(ctx: Ctx, out_dir: Path, judge: str | None, quiet: bool) -> None:
    """Write the benchmark report: Tables 2, 6, 8, 9, 13, 15, 16, oracle labels, router
    scores and paired router tests as Markdown (report.md) and CSV; Figs. 4, 5, 6, 7, the judge
    calibration heat map and Table 13 as stacked bars as PNG and SVG; and report.html with every
    figure inline (opens offline). Rates carry N and a 95 % Wilson interval; a paradigm is marked
    best only where exact McNemar says so (n.s. otherwise); every judged table names its judge's
    calibration (or says it is not calibrated).

    Stages without data are named in the report instead of failing.

    \b
    Example:
      python cli.py report --out reports/latest
    """
    # deferred (start-up): pulls in matplotlib, pandas, sklearn, torch
    from ragrouter.report.build import build_report

    engine = ctx.engine(read_only=True)  # readers share a DuckDB file
    migrate.ensure_current(engine)
    if judge is None:
        try:
            configured = ctx.config.role("judge")
            judge = judge_key(configured, ctx.config) if isinstance(configured, str) else None
        except ConfigError:
            judge = None  # the report does not need a config; fall back to the data
        preferred_only = True
    else:
        preferred_only = False

    try:
        with library_warnings("report", echo=lambda line: click.echo(line, err=True)):
            report = build_report(engine, out_dir, judge=judge, store_label=_safe_url(ctx.db_url),
                                  config=_config_or_none(ctx), show_progress=_progress(quiet))
    except OSError as exc:  # --out missing, read-only, a file, or the disk full: one line
        line = file_system_error(exc, where=f"report --out {out_dir}")
        if line is None:
            raise
        fail(line)
    if not preferred_only and report.judge != judge:
        click.echo(f"note: judge {judge!r} has judged nothing; figures use {report.judge!r}", err=True)
    click.echo(f"report: {report.markdown}")
    click.echo(f"tables: {len(report.csv)} CSV files, figures: {len(report.figures)} PNG + SVG files in {report.out_dir}")
    if report.html is not None:
        click.echo(f"html: {report.html}")
    if report.empty_stages:
        click.echo("stages with no data: " + ", ".join(report.empty_stages))


def _progress(quiet: bool) -> bool:
    """A bar on stderr only for a person watching: not with --quiet, not into a pipe or a log."""
    import sys

    return not quiet and sys.stderr.isatty()


def _safe_url(url: str) -> str:
    """The store URL without a password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - only for display
        return url.split("@")[-1]


def _config_or_none(ctx):
    """The config for the report's money section (None when it cannot be loaded)."""
    try:
        return ctx.config
    except ConfigError:
        return None
