"""`cli.py ingest`: load dataset files into the store (documents and questions)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ragrouter.commands.common import Ctx, fail, pass_ctx, render_rows
from ragrouter.db import migrate
from ragrouter.db.engine import duckdb_path, resolve_url, write_lock
from ragrouter.ingest import files, loaders, questions, store



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
@click.option("--map", "column_map", multiple=True, metavar="FIELD=COLUMN",
              help="Format files: the questions file's column for FIELD (question, answer, id, type, sources, "
                   "evidence, hops, unanswerable), e.g. --map question=Q --map sources='Source Docs'; "
                   "--map ignore=COLUMN keeps a column in meta without asking.")
@click.option("--type-map", multiple=True, metavar="LABEL=TYPE",
              help="Format files: a question type label of your own as factual, reasoning or summary, "
                   "e.g. --type-map multi-document=reasoning.")
@click.option("--dry-run", is_flag=True, help="Read and check everything, print the questions per type with and "
              "without sources, and write nothing.")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@pass_ctx
def ingest_command(ctx: Ctx, corpus: str, fmt: str, update: bool, verbatim_questions: bool,
                   column_map: tuple[str, ...], type_map: tuple[str, ...], dry_run: bool,
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
    Format files: documents as you have them, and a questions file.
      PATHS: .txt .md .html .pdf .docx files, folders (read recursively) and quoted glob
      patterns; a .csv/.tsv/.jsonl/.json file named among them holds the questions.
      Document id: the path from the current folder (e.g. filings/AAPL-Q1.pdf); title: the
      file's metadata title or first heading, else its name. A file that cannot be read (a
      damaged or encrypted PDF, a scan without text) is named in one warning line and skipped;
      the rest load (exit 0). If no document could be read, nothing is stored (exit 2).
      Questions: columns question, answer, and optionally id, type, sources (document ids or
      globs like *AAPL*, ';'-separated), evidence, hops, unanswerable, recognised without
      regard to case or spaces (Question, Source Docs, Question Type, Category, Prompt, …);
      --map names others. It prints the columns it used and those it kept in meta only, and
      refuses a file whose left-over column looks like sources or types (name it with --map),
      or whose type labels are another taxonomy's (each listed: map them with --type-map).
      No type: two or more source documents make it reasoning, else factual.
      --dry-run: the questions per type, with and without sources, before anything is written.

    \b
    Examples:
      python cli.py ingest --corpus medical --format graphrag-bench \\
        ../shared/data/medical/medical.json ../shared/data/medical/medical_questions.json
      python cli.py ingest --corpus mine --format jsonl docs.jsonl questions.jsonl
      python cli.py ingest --corpus filings --format files filings/ questions.csv
    """
    problem = corpus_name_problem(corpus)
    if problem:
        fail(f"--corpus {corpus!r}: {problem}" if len(corpus) <= 200 else f"--corpus: {problem}")
    notes: list[str] = []  # said once the store took the rest, so a refused ingest says one line
    if fmt == "files":
        dataset, notes = _read_files(ctx, corpus, list(paths), column_map, type_map, dry_run)
    else:
        if column_map or type_map:
            fail(f"--{'map' if column_map else 'type-map'} applies to --format files only")
        for path in paths:
            _check_dataset_path(path, fmt)
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
    if dry_run:
        for note in notes:
            click.echo(note, err=True)
        click.echo(dry_run_table(dataset))
        click.echo(f"dry run: corpus {corpus}: nothing was written")
        return
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
    for note in notes:
        click.echo(note, err=True)
    marked = sum(bool(q.unanswerable) for q in dataset.questions)
    changed = (f", updated {rep.documents_updated} documents and {rep.questions_updated} questions"
               if rep.documents_updated or rep.questions_updated else "")
    click.echo(f"corpus {rep.corpus}: {rep.documents_new} new documents ({rep.documents_total} in files), "
               f"{rep.questions_new} new questions ({rep.questions_total} in files)" + changed
               + (f", {marked} of them marked unanswerable" if marked else "")
               + (f", dropped {rep.dropped}" if rep.dropped else ""))


def corpus_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a corpus (None: it can)."""
    if not name.strip():
        return "a corpus name cannot be blank"
    if name != name.strip() or any(not ch.isprintable() for ch in name):
        return "a corpus name has no leading or trailing spaces and no control characters"
    if len(name) > 200:
        return f"the name is {len(name)} characters long; the store holds at most 200"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"the name holds an unpaired surrogate at character {exc.start} (not valid Unicode)"
    return None


def _check_dataset_path(path: Path, fmt: str) -> None:
    """A dataset format reads JSON(L) files: a folder or a plain document says what reads it."""
    hint = "; a folder of documents (.txt .md .html .pdf .docx) loads with --format files"
    if not path.exists():
        fail(f"{path}: no such file")
    if path.is_dir():
        fail(f"{path}: is a folder; --format {fmt} reads dataset files (JSON or JSONL){hint}")
    if path.suffix.lower() in files.DOCUMENT_SUFFIXES:
        fail(f"{path}: a {path.suffix} document, not a {fmt} dataset file (JSON or JSONL){hint}")


def dry_run_table(dataset) -> str:
    """The documents read and the questions per type, with and without sources."""
    rows = []
    for qtype in dataset.qtype_counts():
        qs = [q for q in dataset.questions if q.qtype == qtype]
        with_sources = sum(bool(q.supporting_doc_ids) for q in qs)
        rows.append((qtype, len(qs), with_sources, len(qs) - with_sources))
    total = len(dataset.questions)
    with_sources = sum(bool(q.supporting_doc_ids) for q in dataset.questions)
    rows.append(("all", total, with_sources, total - with_sources))
    n = len(dataset.documents)
    head = f"{n} document{'s' if n != 1 else ''}" + (
        f" (left out: {', '.join(f'{k} {v}' for k, v in dataset.dropped.items())})" if dataset.dropped else "")
    return head + "\n" + render_rows(["type", "questions", "with sources", "without sources"], rows, "table")


def _stored_ids(ctx: Ctx, corpus: str, dry_run: bool) -> list[str]:
    """The corpus's stored document ids (a questions file's sources may name them); a dry run
    opens the store read-only and makes none."""
    if dry_run:
        path = duckdb_path(resolve_url(ctx.db_url))
        if path is not None and not os.path.exists(path):
            return []
        engine = ctx.engine(read_only=True)
    else:
        engine = ctx.engine()
        migrate.ensure_current(engine)
    with engine.connect() as conn:
        cid = store.corpus_id(conn, corpus)
        return sorted(store.document_ids(conn, cid)) if cid is not None else []


def _read_files(ctx: Ctx, corpus: str, paths: list[Path], column_map, type_map, dry_run: bool = False):
    """``--format files``: the documents and questions of PATHS; a skipped file is one warning line."""
    try:
        mapping, types = questions.parse_map(column_map), questions.parse_type_map(type_map)
    except ValueError as exc:
        fail(str(exc))
    inputs = files.expand(paths)
    notes = []
    if inputs.other:
        kinds = ", ".join(f"{suffix} x {n}" for suffix, n in sorted(inputs.other.items()))
        notes.append(f"note: {sum(inputs.other.values())} files in the folders are not documents and were not "
                     f"read ({kinds}); a questions file is read when named")
    got = files.load_files(inputs, mapping, types, _stored_ids(ctx, corpus, dry_run))
    notes += [f"note: {c.describe()}" for c in got.columns]
    for did, why in got.skipped:
        lost = got.dropped_questions.get(did, [])
        notes.append(f"warning: {did}: {why}; skipped" + (
            f", and {len(lost)} question(s) whose sources name it ({', '.join(lost[:3])}"
            f"{', …' if len(lost) > 3 else ''})" if lost else ""))
    return got.dataset, notes
