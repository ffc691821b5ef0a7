"""Write a loaded :class:`Dataset` into the store, idempotently, in one transaction.

Documents and questions are keyed by (corpus, external id): ingesting the same files twice
inserts nothing the second time. Imported questions are ``accepted`` (they come with gold
answers from the dataset).

A record whose id is known but whose content changed (a document's title or text, a
question's text, answer or type) stops the ingest with :class:`IngestConflict` naming the
records, unless ``update=True``: then the stored rows take the new content — refused for a
document that is chunked already or a question that has paradigm runs, whose results would
no longer match it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy import update as sa_update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Connection

from ragrouter.db import models
from ragrouter.ingest.records import Dataset, LoaderError
from ragrouter.llm import tokens

BATCH = 500


class IngestConflict(LoaderError):
    """Known ids whose content differs from the store (a user error: one line, store unchanged)."""

    def __init__(self, sources: list[str], problem: str):
        super().__init__(", ".join(sources) or "<input>", None, problem)


@dataclass
class IngestReport:
    corpus: str
    corpus_id: int
    documents_new: int
    documents_total: int
    questions_new: int
    questions_total: int
    dropped: dict
    documents_updated: int = 0
    questions_updated: int = 0


def ensure_corpus(conn: Connection, name: str, source_format: str | None = None, meta: dict | None = None) -> int:
    stmt = insert(models.Corpus).values(name=name, source_format=source_format, meta=meta or {})
    conn.execute(stmt.on_conflict_do_nothing(index_elements=["name"]))
    return conn.execute(select(models.Corpus.id).where(models.Corpus.name == name)).scalar_one()


def corpus_id(conn: Connection, name: str) -> int | None:
    return conn.execute(select(models.Corpus.id).where(models.Corpus.name == name)).scalar_one_or_none()


def _insert_new(conn: Connection, model, rows: list[dict], keys: list[str]) -> int:
    new = 0
    for i in range(0, len(rows), BATCH):
        stmt = insert(model).values(rows[i:i + BATCH]).on_conflict_do_nothing(index_elements=keys)
        new += len(conn.execute(stmt.returning(model.id)).scalars().all())
    return new


def _changed(conn: Connection, model, cid: int, rows: list[dict], fields: tuple[str, ...]) -> list[tuple[str, list[str]]]:
    """(external id, changed fields) of the rows whose stored content differs."""
    if not rows:
        return []
    cols = [model.external_id] + [getattr(model, f) for f in fields]
    stored = {}
    ids = [r["external_id"] for r in rows]
    for i in range(0, len(ids), BATCH):
        for rec in conn.execute(select(*cols).where(model.corpus_id == cid, model.external_id.in_(ids[i:i + BATCH]))):
            stored[rec[0]] = rec[1:]
    out = []
    for r in rows:
        old = stored.get(r["external_id"])
        if old is None:
            continue
        diff = [f for f, v in zip(fields, old) if (v or "") != (r[f] or "")]
        if diff:
            out.append((r["external_id"], diff))
    return out


def _describe(kind: str, changed: list[tuple[str, list[str]]]) -> str:
    shown = ", ".join(f"{eid!r} ({'/'.join(f)})" for eid, f in changed[:5])
    more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
    return f"{len(changed)} {kind} ({shown}{more})"


def write_dataset(conn: Connection, corpus: str, fmt: str, dataset: Dataset, sources: list[str],
                  update: bool = False) -> IngestReport:
    """Insert what is new of ``dataset`` under corpus ``corpus`` (caller commits).

    Known ids with changed content raise :class:`IngestConflict` unless ``update``."""
    cid = ensure_corpus(conn, corpus, fmt, {"sources": sources})
    docs = [{"corpus_id": cid, "external_id": d.external_id, "title": d.title, "text": d.text,
             "n_tokens": None, "meta": d.meta or None, "_doc": d} for d in dataset.documents]
    qs = [{"corpus_id": cid, "external_id": q.external_id, "origin": "imported", "qtype": q.qtype,
           "hops": q.hops, "question": q.question, "answer": q.answer,
           "supporting_doc_ids": q.supporting_doc_ids or None, "evidence": q.evidence or None,
           "status": "accepted", "meta": q.meta or None, "unanswerable": bool(q.unanswerable)}
          for q in dataset.questions]
    doc_changes = _changed(conn, models.Document, cid, docs, ("title", "text"))
    q_changes = _changed(conn, models.Query, cid, qs, ("question", "answer", "qtype", "unanswerable"))
    if (doc_changes or q_changes) and not update:
        parts = [_describe("documents", doc_changes)] if doc_changes else []
        parts += [_describe("questions", q_changes)] if q_changes else []
        raise IngestConflict(sources, f"{' and '.join(parts)} differ from corpus {corpus!r} in the store; "
                                      "nothing was changed; pass --update to replace them")
    docs_updated = _update_docs(conn, cid, corpus, docs, doc_changes, sources) if doc_changes else 0
    qs_updated = _update_questions(conn, cid, corpus, qs, q_changes, sources) if q_changes else 0
    known = {eid for eid, _ in doc_changes}
    for d in docs:
        doc = d.pop("_doc")
        if d["external_id"] not in known:
            d["n_tokens"] = tokens.count(doc.text)
    docs = [d for d in docs if d["external_id"] not in known]
    docs_new = _insert_new(conn, models.Document, docs, ["corpus_id", "external_id"]) if docs else 0
    qs_new = _insert_new(conn, models.Query, [q for q in qs if q["external_id"] not in {e for e, _ in q_changes}],
                         ["corpus_id", "external_id"]) if qs else 0
    return IngestReport(corpus, cid, docs_new, len(dataset.documents), qs_new, len(qs), dict(dataset.dropped),
                        docs_updated, qs_updated)


def _update_docs(conn, cid, corpus, docs, changes, sources) -> int:
    by_id = {d["external_id"]: d for d in docs}
    ids = [e for e, _ in changes]
    chunked = [r[0] for r in conn.execute(
        select(models.Document.external_id).join(models.Chunk, models.Chunk.document_id == models.Document.id)
        .where(models.Document.corpus_id == cid, models.Document.external_id.in_(ids)).distinct())]
    if chunked:
        raise IngestConflict(sources, f"documents {', '.join(map(repr, sorted(chunked)[:5]))} of corpus {corpus!r} "
                                      "changed but are chunked already (their chunks, triples and answers rest on "
                                      "the old text): ingest the new version as another corpus; nothing was changed")
    for eid in ids:
        d = by_id[eid]
        conn.execute(sa_update(models.Document).where(models.Document.corpus_id == cid,
                                                      models.Document.external_id == eid)
                     .values(title=d["title"], text=d["text"], n_tokens=tokens.count(d["text"]), meta=d["meta"]))
    return len(ids)


def _update_questions(conn, cid, corpus, qs, changes, sources) -> int:
    by_id = {q["external_id"]: q for q in qs}
    ids = [e for e, _ in changes]
    answered = [r[0] for r in conn.execute(
        select(models.Query.external_id).join(models.ParadigmRun, models.ParadigmRun.query_id == models.Query.id)
        .where(models.Query.corpus_id == cid, models.Query.external_id.in_(ids)).distinct())]
    if answered:
        raise IngestConflict(sources, f"questions {', '.join(map(repr, sorted(answered)[:5]))} of corpus {corpus!r} "
                                      "changed but have paradigm runs (judged against the old answer): ingest them "
                                      "under new ids; nothing was changed")
    for eid in ids:
        q = by_id[eid]
        conn.execute(sa_update(models.Query).where(models.Query.corpus_id == cid, models.Query.external_id == eid)
                     .values(question=q["question"], answer=q["answer"], qtype=q["qtype"], hops=q["hops"],
                             supporting_doc_ids=q["supporting_doc_ids"], evidence=q["evidence"], meta=q["meta"],
                             unanswerable=q["unanswerable"]))
    return len(ids)


def document_ids(conn: Connection, cid: int) -> set[str]:
    return set(conn.execute(select(models.Document.external_id).where(models.Document.corpus_id == cid)).scalars())
