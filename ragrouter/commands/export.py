"""`cli.py export`: the benchmark's data as Parquet files (pandas / Hugging Face datasets)."""

from __future__ import annotations

from pathlib import Path

import click

from ragrouter.commands.common import Ctx, fail, file_system_error, pass_ctx
from ragrouter.db import migrate


@click.command("export")
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["parquet"]), default="parquet", show_default=True,
              help="File format.")
@click.option("--trace/--no-trace", "with_trace", default=True, show_default=True,
              help="Keep the paradigm runs' trace column (a typed struct; the largest column).")
@click.option("--only", multiple=True,
              help="Export only this file (repeatable): corpora, queries, paradigm_runs, judgments, "
                   "answer_scores, oracle_labels, router_dataset, judge_calibration.")
@pass_ctx
def export_command(ctx: Ctx, out_dir: Path, fmt: str, with_trace: bool, only: tuple[str, ...]) -> None:
    """Export queries, paradigm runs, judgments, answer scores, oracle labels, the router
    dataset and the corpus profile as one Parquet file each (written by DuckDB's COPY), plus a
    dataset card README.md (one config per file, field descriptions) and manifest.json.

    JSON columns keep their types: id lists become list<int64>, config / trace / meta become
    structs (a value whose type varies between rows stays JSON text). Load a table with
    datasets.load_dataset(OUT_DIR, NAME) or pandas.read_parquet.

    \b
    Examples:
      python cli.py export --format parquet exports/run1
      python -c "import pandas as pd; print(pd.read_parquet('exports/run1/router_dataset.parquet'))"
      python -c "import datasets; print(datasets.load_dataset('exports/run1', 'paradigm_runs'))"
    """
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.report.export import ExportError, export_parquet

    engine = ctx.engine(read_only=True)  # readers share a DuckDB file
    migrate.ensure_current(engine)
    try:
        counts = export_parquet(engine, out_dir, with_trace=with_trace, only=list(only) or None, config=ctx.config)
    except ExportError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(file_system_error(exc, where=f"export {out_dir}") or f"{out_dir}: {exc.strerror or exc}")
    except Exception as exc:  # noqa: BLE001 - DuckDB's COPY words a full disk as its own IOException
        line = file_system_error(exc, where=f"export {out_dir}")
        if line is None:
            raise
        fail(line)
    for name, n in counts.items():
        click.echo(f"{out_dir / (name + '.parquet')}: {n} rows")
