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
@click.option("--verbatim-questions", is_flag=True,
              help="Keep the questions of cuad / squality / quality files as written instead of "
                   "prefixing each with its document's title.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@pass_ctx
def ingest_command(ctx: Ctx, corpus: str, fmt: str, update: bool, verbatim_questions: bool,
                   paths: tuple[Path, ...]) -> None:
    """Load a corpus and its questions from PATHS; running it twice changes nothing.

    Files are validated first: any malformed record stops the ingest with one error naming
    the file and the record, and the store is left unchanged. Questions alone may be added
    to a corpus already in the store (their supporting document ids are checked against it).
    A known id whose content changed stops the ingest naming the records, unless --update.

    Questions asked of one document (formats cuad, squality, quality) are qualified with the
    document's title, e.g. 'In the contract "<title>": The name of the contract' (the
    verbatim text stays in the question's meta); --verbatim-questions keeps them as written.
    A warning names question texts that repeat with different answers in a corpus of several
    documents: no retriever can tell which document such a question means.

    \b
    Format jsonl: one JSONL file of documents and optionally one of questions.
      documents: {"id": str|int, "title": str (optional), "text": str}
      questions: {"id": str|int, "question": str, "answer": str,
                  "type": "factual"|"reasoning"|"summary" (or single_hop|multi_hop),
                  "hops": int (optional), "supporting_doc_ids": [str] (optional),
                  "evidence": [str] (optional)}; any other key is kept in meta.
      e.g. docs.jsonl:      {"id": "d1", "title": "Curie", "text": "Marie Curie was born in Warsaw."}
           questions.jsonl: {"id": "q1", "question": "Where was Marie Curie born?",
                             "answer": "Warsaw", "type": "factual", "supporting_doc_ids": ["d1"]}

    \b
    Examples:
      python cli.py ingest --corpus medical --format graphrag-bench \\
        ../shared/data/medical/medical.json ../shared/data/medical/medical_questions.json
      python cli.py ingest --corpus mine --format jsonl docs.jsonl questions.jsonl
    """
    if not corpus.strip():
        fail(f"--corpus {corpus!r}: a corpus name cannot be blank")
    if corpus != corpus.strip() or any(not ch.isprintable() for ch in corpus):
        fail(f"--corpus {corpus!r}: a corpus name has no leading or trailing spaces and no control characters")
    if len(corpus) > 200:
        fail(f"--corpus: the name is {len(corpus)} characters long; the store holds at most 200")
    try:
        corpus.encode("utf-8")
    except UnicodeEncodeError as exc:
        fail(f"--corpus: the name holds an unpaired surrogate at character {exc.start} (not valid Unicode)")
    dataset = loaders.load(fmt, list(paths), qualify_questions=not verbatim_questions)
    names = ", ".join(map(str, paths))
    repeats = loaders.repeated_questions(dataset)
    if repeats:
        text, times, answers = repeats[0]
        click.echo(f"warning: {len(repeats)} question text(s) repeat with different answers across the "
                   f"{len(dataset.documents)} documents (e.g. {text[:80]!r} x {times} with {answers} answers): "
                   "such a question does not say which document it means"
                   + ("; ingest without --verbatim-questions to qualify them with their document's title"
                      if fmt in loaders.QUALIFIED and verbatim_questions
                      else "; name the document in the question text"), err=True)
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
    marked = sum(bool(q.unanswerable) for q in dataset.questions)
    changed = (f", updated {rep.documents_updated} documents and {rep.questions_updated} questions"
               if rep.documents_updated or rep.questions_updated else "")
    click.echo(f"corpus {rep.corpus}: {rep.documents_new} new documents ({rep.documents_total} in files), "
               f"{rep.questions_new} new questions ({rep.questions_total} in files)" + changed
               + (f", {marked} of them marked unanswerable" if marked else "")
               + (f", dropped {rep.dropped}" if rep.dropped else ""))
