"""`cli.py corpus slice`: a named corpus made from part of a stored one.

A slice keeps the first ``--docs N`` documents, or the documents that the first ``--chunks N``
chunks come from (the last one cut to its first chunks, as the chunk stage would cut it),
and the questions that the slice can answer: every supporting document kept, and — where a
question has evidence text — every evidence sentence found in one chunk of the slice (at
least ``evidence_overlap`` of its content words; the same test the demo uses). With
``--queries-per-type K`` at most K questions per query type are kept. Order is the stored
order; ``--seed S`` samples documents (for ``--docs``) and questions at random instead,
reproducibly. The new corpus is an ordinary one: its stages run as for any ingested corpus.

:func:`slice_dataset` works on a :class:`~ragrouter.ingest.records.Dataset`; the demo slices
the medical files with it (``ragrouter.demo``).
"""

from __future__ import annotations

import random
import re
from dataclasses import replace

import click
from sqlalchemy import text

from ragrouter.commands.common import Ctx, fail, pass_ctx
from ragrouter.db.values import json_value
from ragrouter.ingest.records import QTYPES, Dataset, Document, Question

_WORD = re.compile(r"[a-z][a-z0-9-]{3,}")


def _words(t: str) -> set[str]:
    return set(_WORD.findall(t.lower()))


def evidence_in(evidence, chunk_words: list[set[str]], overlap: float) -> bool:
    """Every evidence sentence has ≥ ``overlap`` of its content words (4+ letters) inside
    one chunk."""
    if isinstance(evidence, str):
        evidence = [evidence]
    sentences = [s for e in evidence for s in re.split(r";\s+", e) if s.strip()]
    if not sentences:
        return False
    for sent in sentences:
        words = _words(sent)
        if not words:
            continue
        if not any(len(words & cw) / len(words) >= overlap for cw in chunk_words):
            return False
    return True


def slice_dataset(ds: Dataset, *, docs: int | None = None, chunks: int | None = None, per_type: int | None = None,
                  seed: int | None = None, window: int = 512, overlap_tokens: int = 100,
                  evidence_overlap: float = 0.75) -> Dataset:
    """The slice of ``ds`` (see the module doc). Exactly one of ``docs`` / ``chunks``."""
    from ragrouter.corpus.chunking import chunk_text
    from ragrouter.llm import tokens

    if (docs is None) == (chunks is None):
        raise ValueError("give exactly one of --docs N or --chunks N")
    n = docs if docs is not None else chunks
    if n is None or n < 1:
        raise ValueError(f"--{'docs' if docs is not None else 'chunks'} must be at least 1 (got {n})")
    if per_type is not None and per_type < 0:  # 0: the documents without their questions
        raise ValueError(f"--queries-per-type must be at least 0 (got {per_type})")
    rng = random.Random(seed) if seed is not None else None
    kept: list[Document] = []
    renamed: dict[str, str] = {}
    if docs is not None:
        pool = list(ds.documents)
        if rng is not None:
            pool = rng.sample(pool, min(docs, len(pool)))
            order = {d.external_id: i for i, d in enumerate(ds.documents)}
            pool.sort(key=lambda d: order[d.external_id])
        kept = pool[:docs]
        renamed = {d.external_id: d.external_id for d in kept}
    else:
        enc = tokens.encoding()
        stride = window - overlap_tokens
        left = chunks
        for d in ds.documents:
            if left <= 0:
                break
            have = len(chunk_text(d.title, d.text, window, overlap_tokens))
            if have <= left:
                kept.append(d)
                renamed[d.external_id] = d.external_id
                left -= have
                continue
            ids = enc.encode(d.text, disallowed_special=())
            end = min(len(ids), stride * (left - 1) + window)
            cut = Document(external_id=f"{d.external_id}[:{left}chunks]", title=d.title, text=enc.decode(ids[:end]),
                           meta={**d.meta, "slice_tokens": end, "source_tokens": len(ids)})
            kept.append(cut)
            renamed[d.external_id] = cut.external_id
            left = 0
    cut_ids = {renamed[k] for k in renamed if renamed[k] != k}
    chunk_words = {d.external_id: [_words(c.text) for c in chunk_text(d.title, d.text, window, overlap_tokens)]
                   for d in kept}
    all_words = [w for ws in chunk_words.values() for w in ws]
    questions = list(ds.questions)
    if rng is not None:
        rng.shuffle(questions)
    picked: list[Question] = []
    counts = dict.fromkeys(QTYPES, 0)
    dropped = 0
    for q in questions:
        if per_type is not None and counts.get(q.qtype, 0) >= per_type:
            dropped += 1
            continue
        sup = list(q.supporting_doc_ids)
        if sup and not all(s in renamed for s in sup):
            dropped += 1
            continue
        if q.evidence:
            words = [w for s in sup for w in chunk_words[renamed[s]]] if sup else all_words
            ok = evidence_in(q.evidence, words, evidence_overlap)
        else:  # no evidence text: answerable when its documents are kept whole
            ok = bool(sup) and not any(renamed[s] in cut_ids for s in sup)
        if not ok:
            dropped += 1
            continue
        picked.append(replace(q, supporting_doc_ids=[renamed[s] for s in sup]))
        counts[q.qtype] = counts.get(q.qtype, 0) + 1
    return Dataset(documents=kept, questions=picked, dropped={"outside_slice_or_over_quota": dropped})


def stored_dataset(conn, corpus: str) -> tuple[Dataset, str]:
    """The imported documents and accepted questions of a stored corpus, in stored order."""
    from ragrouter.corpus import storeio

    cid = storeio.corpus_ids(conn, corpus)[0][0]
    fmt = conn.execute(text("SELECT source_format FROM corpora WHERE id = :c"), {"c": cid}).scalar() or "slice"

    documents = [Document(r[0], r[1] or "", r[2], json_value(r[3], {})) for r in conn.execute(text(
        "SELECT external_id, title, text, meta FROM documents WHERE corpus_id = :c ORDER BY id"), {"c": cid})]
    questions = [Question(r[0], r[1], r[2], r[3], r[4], json_value(r[5], []), json_value(r[6], []), json_value(r[7], {}))
                 for r in conn.execute(text(
                     "SELECT external_id, question, answer, qtype, hops, supporting_doc_ids, evidence, meta "
                     "FROM queries WHERE corpus_id = :c AND origin = 'imported' AND status = 'accepted' "
                     "ORDER BY id"), {"c": cid})]
    return Dataset(documents=documents, questions=questions), fmt


@click.group("corpus")
def corpus_group() -> None:
    """Make corpora from stored ones; turn asked questions into benchmark questions."""


@corpus_group.command("slice")
@click.argument("source")
@click.argument("new")
@click.option("--docs", type=int, help="Keep the first N documents (a random N with --seed).")
@click.option("--chunks", type=int, help="Keep the documents of the first N chunks (the last one cut).")
@click.option("--queries-per-type", "per_type", type=int, help="At most K questions per query type.")
@click.option("--seed", type=int, help="Sample documents (--docs) and questions at random, reproducibly.")
@click.option("--evidence-overlap", type=float, default=0.75, show_default=True,
              help="Share of an evidence sentence's content words that must lie in one chunk of the slice.")
@pass_ctx
def slice_command(ctx: Ctx, source: str, new: str, docs: int | None, chunks: int | None, per_type: int | None,
                  seed: int | None, evidence_overlap: float) -> None:
    """Make corpus NEW from part of stored corpus SOURCE (documents and the questions it can answer).

    Running it again with the same arguments changes nothing. The slice's stages (chunk,
    extract, embed, …) run on NEW like on any ingested corpus; `run --limit N` by contrast
    only caps the pending units one command processes.

    \b
    Examples:
      python cli.py corpus slice medical medical-12 --chunks 12 --queries-per-type 3
      python cli.py corpus slice cuad cuad-10 --docs 10 --seed 1
    """
    from ragrouter.db import migrate
    from ragrouter.db.engine import write_lock
    from ragrouter.ingest import store as ingest_store

    if source == new:
        fail(f"the slice needs a new name (got '{new}' for both)")
    engine = ctx.engine()
    migrate.ensure_current(engine)
    config = ctx.config
    with engine.connect() as conn:
        ds, fmt = stored_dataset(conn, source)
    try:
        part = slice_dataset(ds, docs=docs, chunks=chunks, per_type=per_type, seed=seed,
                             window=int(config.get("chunking.window")), overlap_tokens=int(config.get("chunking.overlap")),
                             evidence_overlap=evidence_overlap)
    except ValueError as exc:
        fail(str(exc))
    if not part.questions:
        click.echo(f"warning: the slice keeps no question of '{source}'", err=True)
    with write_lock(engine), engine.begin() as conn:
        rep = ingest_store.write_dataset(conn, new, fmt, part, [f"slice of {source}"])
    click.echo(f"corpus {new}: {rep.documents_total} documents ({rep.documents_new} new), "
               f"{rep.questions_total} questions {part.qtype_counts()} ({rep.questions_new} new) from '{source}'")


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
    asked-<hash> id is in the corpus already are left out (--all keeps them). Name the three
    stages: a plain `run` also generates questions (querygen) where none were generated yet.

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

    from ragrouter import reading

    path = Path(out)
    if path.exists() and not force:
        fail(f"{path} exists (a file a person may be answering): choose another name or pass --force")
    rows = reading.asked_questions(ctx.engine(), corpus, include_ingested)
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
