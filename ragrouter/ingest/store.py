"""Write a loaded :class:`Dataset` into the store, idempotently, in one transaction.

Documents and questions are keyed by (corpus, external id): ingesting the same files twice
inserts nothing the second time. Imported questions are ``accepted`` (they come with gold
answers from the dataset).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Connection

from ragrouter.db import models
from ragrouter.ingest.records import Dataset
from ragrouter.llm import tokens

BATCH = 500


@dataclass
class IngestReport:
    corpus: str
    corpus_id: int
    documents_new: int
    documents_total: int
    questions_new: int
    questions_total: int
    dropped: dict


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


def write_dataset(conn: Connection, corpus: str, fmt: str, dataset: Dataset, sources: list[str]) -> IngestReport:
    """Insert what is new of ``dataset`` under corpus ``corpus`` (caller commits)."""
    cid = ensure_corpus(conn, corpus, fmt, {"sources": sources})
    docs = [{"corpus_id": cid, "external_id": d.external_id, "title": d.title, "text": d.text,
             "n_tokens": tokens.count(d.text), "meta": d.meta or None} for d in dataset.documents]
    qs = [{"corpus_id": cid, "external_id": q.external_id, "origin": "imported", "qtype": q.qtype,
           "hops": q.hops, "question": q.question, "answer": q.answer,
           "supporting_doc_ids": q.supporting_doc_ids or None, "evidence": q.evidence or None,
           "status": "accepted", "meta": q.meta or None} for q in dataset.questions]
    docs_new = _insert_new(conn, models.Document, docs, ["corpus_id", "external_id"]) if docs else 0
    qs_new = _insert_new(conn, models.Query, qs, ["corpus_id", "external_id"]) if qs else 0
    return IngestReport(corpus, cid, docs_new, len(docs), qs_new, len(qs), dict(dataset.dropped))
