"""`cli.py ingest`: load dataset files into the store (documents and questions)."""

from __future__ import annotations

from pathlib import Path

import click

from ragrouter.commands.common import Ctx, fail, pass_ctx, register_user_error
from ragrouter.db import migrate
from ragrouter.db.engine import write_lock
from ragrouter.ingest import loaders, store
from ragrouter.ingest.records import LoaderError

register_user_error(LoaderError)


@click.command("ingest")
@click.option("--corpus", required=True, help="Name of the corpus in the store (e.g. medical).")
@click.option("--format", "fmt", required=True, type=click.Choice(sorted(loaders.LOADERS)),
              help="Dataset layout of the files.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@pass_ctx
def ingest_command(ctx: Ctx, corpus: str, fmt: str, paths: tuple[Path, ...]) -> None:
    """Load a corpus and its questions from PATHS; running it twice changes nothing.

    Files are validated first: any malformed record stops the ingest with one error naming
    the file and the record, and the store is left unchanged.

    \b
    Example:
      python cli.py ingest --corpus medical --format graphrag-bench \\
        ../shared/data/medical/medical.json ../shared/data/medical/medical_questions.json
    """
    dataset = loaders.load(fmt, list(paths))
    if not dataset.documents:
        fail(f"{', '.join(map(str, paths))}: no documents found for format {fmt}")
    engine = ctx.engine()
    migrate.ensure_current(engine)
    with write_lock(engine), engine.begin() as conn:
        rep = store.write_dataset(conn, corpus, fmt, dataset, [str(p) for p in paths])
    click.echo(f"corpus {rep.corpus}: {rep.documents_new} new documents ({rep.documents_total} in files), "
               f"{rep.questions_new} new questions ({rep.questions_total} in files)"
               + (f", dropped {rep.dropped}" if rep.dropped else ""))
