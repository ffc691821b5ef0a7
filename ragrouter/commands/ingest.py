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
@click.option("--update", is_flag=True, help="Replace the stored title/text of documents and the text/"
              "answer/type of questions whose id is known but whose content changed (without it such an "
              "ingest stops and names the records that differ).")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@pass_ctx
def ingest_command(ctx: Ctx, corpus: str, fmt: str, update: bool, paths: tuple[Path, ...]) -> None:
    """Load a corpus and its questions from PATHS; running it twice changes nothing.

    Files are validated first: any malformed record stops the ingest with one error naming
    the file and the record, and the store is left unchanged. Questions alone may be added
    to a corpus already in the store (their supporting document ids are checked against it).

    \b
    Examples:
      python cli.py ingest --corpus medical --format graphrag-bench \\
        ../shared/data/medical/medical.json ../shared/data/medical/medical_questions.json
      python cli.py ingest --corpus medical --format ragrouter more_questions.jsonl
    """
    dataset = loaders.load(fmt, list(paths))
    names = ", ".join(map(str, paths))
    engine = ctx.engine()
    migrate.ensure_current(engine)
    with write_lock(engine), engine.begin() as conn:
        if not dataset.documents:
            cid = store.corpus_id(conn, corpus)
            if cid is None or not dataset.questions:
                fail(f"{names}: no documents found for format {fmt}" + (
                    f" (questions alone need corpus {corpus!r} in the store; it is not there)"
                    if dataset.questions else ""))
            known = store.document_ids(conn, cid)
            for q in dataset.questions:
                missing = [d for d in q.supporting_doc_ids if d not in known]
                if missing:
                    fail(f"{names}: question {q.external_id!r}: supporting document id {missing[0]!r} is not in "
                         f"corpus {corpus!r}")
        rep = store.write_dataset(conn, corpus, fmt, dataset, [str(p) for p in paths], update=update)
    changed = (f", updated {rep.documents_updated} documents and {rep.questions_updated} questions"
               if rep.documents_updated or rep.questions_updated else "")
    click.echo(f"corpus {rep.corpus}: {rep.documents_new} new documents ({rep.documents_total} in files), "
               f"{rep.questions_new} new questions ({rep.questions_total} in files)" + changed
               + (f", dropped {rep.dropped}" if rep.dropped else ""))
