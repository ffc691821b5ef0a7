"""`cli.py corpus slice`: a named corpus made from part of a stored one.

A slice keeps the first ``--docs N`` documents, the documents named by ``--doc``, the documents
of the first ``--chunks N`` chunks, or the first ``--tokens N`` tokens of the documents (the
last document cut, as the chunk stage would cut it), and exactly the questions whose evidence —
documents, chunks or sentences, as the question records it — lies inside the slice
(:mod:`ragrouter.corpus.slicing`). It says how many questions it kept per type and why it left
the others out, and refuses a slice that keeps none (one line, exit 2, nothing made), and a
name that holds another corpus or slice. ``--for-budget HOURS`` proposes the slice the
configured backends finish within HOURS that decides the most (:mod:`ragrouter.decisions.budget`),
says what it can decide and prints the command that makes it; ``--make`` makes it.

:func:`~ragrouter.corpus.slicing.slice_dataset` works on a
:class:`~ragrouter.ingest.records.Dataset`; the demo slices the medical files with it
(``ragrouter.corpus.demo``).
"""

from __future__ import annotations

import math

import click
from sqlalchemy import text

from ragrouter.answering import lookup
from ragrouter.commands.common import Ctx, fail, pass_ctx
from ragrouter.commands.ingest import corpus_name_problem
from ragrouter.config import Config, ConfigError, DEFAULT_CONFIG
from ragrouter.corpus.slicing import CHUNK_EVIDENCE, describe_drops, requirements, slice_dataset
from ragrouter.db import migrate
from ragrouter.db.engine import DEFAULT_URL, write_lock
from ragrouter.db.redact import redact_secrets
from ragrouter.db.values import json_value
from ragrouter.decisions.budget import BudgetError, hms as clock, propose
from ragrouter.ingest import store as ingest_store
from ragrouter.ingest.records import Dataset, Document, Question
from ragrouter.stages import storeio
from ragrouter.stages.timing import load_line


def stored_dataset(conn, corpus: str) -> tuple[Dataset, str]:
    """The documents and accepted benchmark questions of a stored corpus, in stored order:
    imported questions, and generated or reviewed ones with their source chunks as evidence
    (:data:`~ragrouter.corpus.slicing.CHUNK_EVIDENCE`; they join the slice as its own questions)."""
    cid = storeio.corpus_ids(conn, corpus)[0][0]
    fmt = conn.execute(text("SELECT source_format FROM corpora WHERE id = :c"), {"c": cid}).scalar() or "slice"

    documents = [Document(r[0], r[1] or "", r[2], json_value(r[3], {})) for r in conn.execute(text(
        "SELECT external_id, title, text, meta FROM documents WHERE corpus_id = :c ORDER BY id"), {"c": cid})]
    spans = {int(r[0]): [r[1], int(r[2]), int(r[3])] for r in conn.execute(text(
        "SELECT c.id, d.external_id, c.token_start, c.token_end FROM chunks c JOIN documents d "
        "ON d.id = c.document_id WHERE c.corpus_id = :c"), {"c": cid})}
    questions = []
    for r in conn.execute(text(
            "SELECT external_id, question, answer, qtype, hops, supporting_doc_ids, evidence, meta, unanswerable, "
            "origin, supporting_chunk_ids FROM queries WHERE corpus_id = :c AND status = 'accepted' "
            "AND origin IN ('imported', 'generated', 'human-reviewed') ORDER BY id"), {"c": cid}):
        meta = json_value(r[7], {}) or {}
        if r[9] != "imported":
            chunk_ids = json_value(r[10], []) or []
            meta = {**meta, "sliced_origin": r[9], CHUNK_EVIDENCE: [spans[int(c)] for c in chunk_ids if int(c) in spans]}
            if len(meta[CHUNK_EVIDENCE]) < len(chunk_ids):
                meta[CHUNK_EVIDENCE] = []  # a source chunk is gone: its evidence cannot be placed
        questions.append(Question(r[0], r[1], r[2], r[3], r[4], json_value(r[5], []) or [], json_value(r[6], []) or [],
                                  meta, bool(r[8])))
    return Dataset(documents=documents, questions=questions), fmt


@click.group("corpus")
def corpus_group() -> None:
    """Make corpora from stored ones; turn asked questions into benchmark questions."""


def _kept_line(part: Dataset, total: int) -> str:
    counts = ", ".join(f"{t} {n}" for t, n in part.qtype_counts().items())
    line = f"kept {len(part.questions)} of {total} questions ({counts})"
    if part.dropped:
        line += f"; left out {sum(part.dropped.values())}: {describe_drops(part.dropped)}"
    return line


def _refusal(source: str, ds: Dataset, part: Dataset, docs, chunks, tokens_, window: int, overlap: int,
             evidence_overlap: float) -> str:
    """One line: why the slice keeps no question, and the smallest slice that keeps one."""
    why = describe_drops(part.dropped) or "none qualifies"
    line = f"the slice keeps no question of '{source}' ({len(ds.questions)} questions; {why}); nothing was made"
    req = requirements(ds, window, overlap, evidence_overlap)
    if docs is not None:
        need = [n for n in req.need_docs if n is not None]
        if need:
            line += f": --docs {min(need)} keeps at least one (in stored order)"
    else:
        need = [n for n in req.need_chunks if n is not None]
        if need:
            line += f": --chunks {min(need)} keeps at least one"
    if not need:
        line += ": no slice of it keeps a question"
    if part.dropped.get("document_cut"):
        line += "; a question whose only evidence is its document needs that document whole (--docs, or evidence text)"
    if part.dropped.get("no_evidence") == len(ds.questions):
        line += "; ingest the questions with their sources or evidence"
    return line


def _existing_differs(conn, new: str, source: str, part: Dataset) -> str | None:
    """Why corpus ``new`` in the store is not this very slice (None: absent, or the same slice,
    which a second run leaves as it is)."""
    cid = ingest_store.corpus_id(conn, new)
    if cid is None:
        return None
    meta = json_value(conn.execute(text("SELECT meta FROM corpora WHERE id = :c"), {"c": cid}).scalar(), {}) or {}
    if (meta.get("sources") if isinstance(meta, dict) else None) != [f"slice of {source}"]:
        return "is a corpus of its own (not a slice of '" + source + "')"
    docs = set(conn.execute(text("SELECT external_id FROM documents WHERE corpus_id = :c"), {"c": cid}).scalars())
    qs = set(conn.execute(text("SELECT external_id FROM queries WHERE corpus_id = :c AND origin = 'imported'"),
                          {"c": cid}).scalars())
    if docs != {d.external_id for d in part.documents} or qs != {q.external_id for q in part.questions}:
        return (f"holds another slice of '{source}' ({len(docs)} documents, {len(qs)} questions; this one: "
                f"{len(part.documents)} and {len(part.questions)})")
    return None


def make_slice(ctx: Ctx, source: str, new: str, ds: Dataset, fmt: str, *, docs=None, chunks=None, tokens=None,
               per_type=None, seed=None, evidence_overlap: float = 0.75, doc_ids=None) -> Dataset:
    """Slice ``ds`` (stored corpus ``source``) and write it as corpus ``new``; refuses (exit 2,
    nothing written) a slice that keeps none of the source's questions unless asked for none,
    and a name the store holds for another corpus or another slice (never merged into it)."""
    window, overlap = int(ctx.config.get("chunking.window")), int(ctx.config.get("chunking.overlap"))
    try:
        part = slice_dataset(ds, docs=docs, chunks=chunks, tokens=tokens, per_type=per_type, seed=seed,
                             window=window, overlap_tokens=overlap, evidence_overlap=evidence_overlap,
                             doc_ids=doc_ids)
    except ValueError as exc:
        fail(str(exc))
    if not part.questions and ds.questions and per_type != 0:
        fail(_refusal(source, ds, part, docs, chunks, tokens, window, overlap, evidence_overlap))
    engine = ctx.engine()
    with write_lock(engine), engine.begin() as conn:
        why = _existing_differs(conn, new, source, part)
        if why is not None:
            fail(f"corpus '{new}' {why}: a slice is never merged into it; choose another name")
        rep = ingest_store.write_dataset(conn, new, fmt, part, [f"slice of {source}"])
    click.echo(f"corpus {new}: {rep.documents_total} documents ({rep.documents_new} new), "
               f"{rep.questions_total} questions ({rep.questions_new} new) from '{source}'")
    if ds.questions:
        click.echo(_kept_line(part, len(ds.questions)))
    else:
        click.echo(f"'{source}' has no accepted questions: the slice has documents only")
    return part


@corpus_group.command("slice")
@click.argument("source")
@click.argument("new")
@click.option("--docs", type=int, help="Keep the first N documents (a random N with --seed).")
@click.option("--doc", "doc_ids", multiple=True, metavar="ID", help="Keep this document, whole (repeatable; what "
              "--for-budget proposes).")
@click.option("--chunks", type=int, help="Keep the documents of the first N chunks (the last one cut).")
@click.option("--tokens", type=int, help="Keep the first N tokens of the documents (the last one cut).")
@click.option("--queries-per-type", "per_type", type=int, help="At most K questions per query type (0: none, "
              "the documents alone).")
@click.option("--seed", type=int, help="Sample documents (--docs) and questions at random, reproducibly.")
@click.option("--evidence-overlap", type=float, default=0.75, show_default=True,
              help="Share of an evidence sentence's content words that must lie in one chunk of the slice.")
@click.option("--for-budget", "for_budget", type=str, metavar="HOURS",
              help="Propose the slice that the configured backends finish within HOURS (every stage, as `run "
                   "--dry-run` times them) and that decides the most: whole documents chosen by the questions "
                   "they carry per hour of build, the types balanced; it says what the slice can decide and "
                   "prints the command that makes it; nothing is made without --make.")
@click.option("--make", "make_it", is_flag=True, help="With --for-budget: make the proposed slice.")
@pass_ctx
def slice_command(ctx: Ctx, source: str, new: str, docs: int | None, doc_ids: tuple[str, ...], chunks: int | None,
                  tokens: int | None, per_type: int | None, seed: int | None, evidence_overlap: float,
                  for_budget: str | None, make_it: bool) -> None:
    """Make corpus NEW from part of stored corpus SOURCE: documents, and exactly the questions
    whose evidence (documents, chunks or sentences) lies inside the slice.

    It prints how many questions it kept per type and why it left the others out (evidence
    outside the slice, only a document that the slice cuts, no evidence recorded, over
    --queries-per-type), and refuses a slice that keeps no question (exit 2, nothing made),
    naming the smallest slice that keeps one. Running it again with the same arguments changes
    nothing; a NEW that names another corpus or another slice is refused, never merged into.
    --for-budget says what the slice can decide: per type, the smallest gap between the best
    paradigm and the rest that `run --until-decided` finds with plan's power, or "a smoke
    test, not a decision"; when nothing fits, the budget that would, and whether profile:
    local or configs/demo.yaml fits. The slice's stages (chunk, extract, embed, …) run on NEW like on any ingested
    corpus; `run --limit N` by contrast only caps the pending units one command processes.

    \b
    Examples:
      python cli.py corpus slice medical medical-12 --chunks 12 --queries-per-type 3
      python cli.py corpus slice cuad cuad-10 --docs 10 --seed 1
      python cli.py corpus slice cuad cuad-2h --for-budget 2          # propose
      python cli.py corpus slice cuad cuad-2h --for-budget 2 --make   # and make it
    """
    problem = corpus_name_problem(new)
    if problem:
        fail(f"NEW {new!r}: {problem}")
    if source == new:
        fail(f"the slice needs a new name (got '{new}' for both)")
    if make_it and for_budget is None:
        fail("--make goes with --for-budget")
    hours = None
    if for_budget is not None:
        try:
            hours = float(for_budget)
        except ValueError:
            hours = math.nan
        if not math.isfinite(hours) or hours <= 0:
            fail(f"--for-budget {for_budget}: the hours must be a positive number, e.g. --for-budget 0.5")
    if for_budget is not None and ((docs, chunks, tokens, per_type, seed) != (None,) * 5 or doc_ids):
        fail("--for-budget chooses the documents (or chunks) and --queries-per-type itself: leave out --docs, "
             "--doc, --chunks, --tokens, --queries-per-type and --seed")
    engine = ctx.engine()
    migrate.ensure_current(engine)
    with engine.connect() as conn:
        ds, fmt = stored_dataset(conn, source)
    if hours is None:
        make_slice(ctx, source, new, ds, fmt, docs=docs, chunks=chunks, tokens=tokens, per_type=per_type, seed=seed,
                   evidence_overlap=evidence_overlap, doc_ids=list(doc_ids) or None)
        return

    try:
        prop = propose(ctx.config, engine, source, ds, hours, evidence_overlap=evidence_overlap,
                       echo=lambda line: click.echo(line, err=True))
    except BudgetError as exc:
        fail(str(exc) + _other_configs(ctx, engine, source, ds, hours, evidence_overlap, exc))
    for line in prop.lines(source, new, _global_options(ctx), evidence_overlap):
        click.echo(line)
    if load_line():  # the proposal's times allow for the other work on the machine now
        click.echo(load_line())
    if make_it:
        make_slice(ctx, source, new, ds, fmt, **prop.slice_args(), evidence_overlap=evidence_overlap)


def _other_configs(ctx: Ctx, engine, source: str, ds: Dataset, hours: float, evidence_overlap: float,
                   exc) -> str:
    """When this config fits no slice: what ``profile: local`` and the demo's config would
    propose (or their smallest slice's time), as the rest of the one refusal line."""
    import os

    if getattr(exc, "smallest_s", None) is None:
        return ""
    others = []
    if ctx.config.get("profile", None) != "local":
        others.append(("profile: local in your config", "--config of your own with profile: local",
                       lambda: Config.load(ctx.config_path, env={**os.environ, "RAGROUTER__profile": "local"})))
    demo = DEFAULT_CONFIG.parent / "demo.yaml"
    if demo.is_file() and (not ctx.config_path or os.path.abspath(ctx.config_path) != os.path.abspath(demo)):
        shown = os.path.relpath(demo) if not os.path.relpath(demo).startswith("..") else str(demo)
        others.append((f"--config {shown}", "", lambda: Config.load(demo)))
    said = []
    for name, _hint, load in others:
        try:
            cfg = load()
            prop = propose(cfg, engine, source, ds, hours, evidence_overlap=evidence_overlap)
        except BudgetError as other:
            if getattr(other, "smallest_s", None) is not None:
                said.append(f"with {name} the smallest takes {clock(other.smallest_s)}")
            continue
        except (ConfigError, ValueError):
            continue
        said.append(f"with {name} it fits: {prop.lines(source, 'NEW')[0].split(': ', 1)[1]}")
    return "; " + "; ".join(said) if said else ""


def _global_options(ctx: Ctx) -> str:
    """The --db / --config a printed command needs to reach the same store and config."""
    out = ""
    if ctx.db_url and ctx.db_url != DEFAULT_URL:
        out += f" --db {redact_secrets(ctx.db_url)}"
    if ctx.config_path:
        out += f" --config {ctx.config_path}"
    return out


@corpus_group.command("asked")
@click.argument("corpus")
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--all", "include_ingested", is_flag=True,
              help="Include the questions already answered and ingested from an earlier file.")
@click.option("--force", is_flag=True, help="Overwrite OUT if it exists.")
@pass_ctx
def asked_command(ctx: Ctx, corpus: str, out: str, include_ingested: bool, force: bool) -> None:
    """Write the questions asked of CORPUS through `serve` and `ask` to OUT, a questions file
    for a person to answer; ingested back, they become benchmark questions and training data.

    Asked questions have no gold answer, so they stay out of the benchmark. OUT (JSONL, the
    `ragrouter` format) has one record per question: its id (asked-<hash>, stable), the
    question, the inferred type, an empty "answer", and what was served (served_paradigm,
    served_generator, served_answer, router, probabilities, asked_via: ["ask", "serve"] as it
    came, asked_at; kept in the ingested question's meta). A question asked both ways is one
    record with its latest answer. Fill in each answer (or set "unanswerable": true, or correct
    the type), delete the records you leave, then ingest the file and run the stages: every
    paradigm answers the questions (the served paradigm's call comes from the ledger's cache),
    the judge labels them, and the next `routers train` learns from them. Questions whose
    asked-<hash> id is in the corpus already are left out (--all keeps them). Naming the three
    stages runs only them (a plain `run` runs every stage, but generates no questions for a
    corpus whose questions were imported).

    \b
    Example:
      python cli.py corpus asked medical-demo asked.jsonl
      # edit asked.jsonl: an "answer" for each question you keep
      python cli.py ingest --corpus medical-demo --format ragrouter asked.jsonl
      python cli.py run --corpus medical-demo --stage answer --stage judge --stage score
    """
    import json
    import os
    from pathlib import Path

    path = Path(out)
    if path.exists() and not force:
        fail(f"{path} exists (a file a person may be answering): choose another name or pass --force")
    rows = lookup.asked_questions(ctx.engine(), corpus, include_ingested)
    records = [{"id": r["id"], "question": r["question"], "answer": "", "type": r["type"],
                "served_paradigm": r["paradigm"], "served_generator": r["generator"], "served_answer": r["answer"],
                "router": r["router"], "probabilities": r["probabilities"], "asked_via": r["origins"],
                "asked_at": r["asked_at"]} for r in rows]
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for rec in records:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        fail(f"cannot write {path}: {exc.strerror or exc}")
    click.echo(f"wrote {len(records)} asked question(s) of '{corpus}' to {path}")
    if records:
        click.echo(f"next: fill in each \"answer\" (delete the records you leave), then\n"
                   f"  python cli.py ingest --corpus {corpus} --format ragrouter {path}\n"
                   f"  python cli.py run --corpus {corpus} --stage answer --stage judge --stage score")
