"""Reading corpus artefacts back out of the store (vectors, triples, chunks) as arrays."""

from __future__ import annotations

import numpy as np
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from ragrouter.db.values import json_value
from ragrouter.graph.extract import PROMPT_VERSION
from ragrouter.stages.base import ScopeError


def chunker_key(config) -> str:
    return f"cl100k:{int(config.get('chunking.window'))}:{int(config.get('chunking.overlap'))}"


def model_key(config, role: str) -> str:
    """The store key of the model behind a role (embedder / extractor): its model name."""
    return str(config.backend(config.role(role))["model"])


def extractor_key(config) -> str:
    """The store key of an extraction: model, prompt version and output limit (a reply cut at
    another ``extraction.max_tokens`` holds other triples, so it is another graph)."""
    key = f"{model_key(config, 'extractor')}|{PROMPT_VERSION}|mt{int(config.get('extraction.max_tokens'))}"
    cap = config.get("extraction.max_triples", None)
    return f"{key}|t{int(cap)}" if cap else key  # a capped reply holds other triples: another graph


def load_vectors(conn: Connection, owner_kind: str, ids: list[int] | None, embedder: str,
                 corpus_id: int | None = None) -> tuple[list[int], np.ndarray]:
    """(owner ids, float32 matrix) for the given owners (or every owner of the corpus)."""
    if ids is None:
        table = {"chunk": "chunks", "entity": "entities"}[owner_kind]
        rows = conn.execute(text(
            f"SELECT v.owner_id, v.dim, v.data FROM vectors v JOIN {table} o ON o.id = v.owner_id "
            "WHERE v.owner_kind = :k AND v.embedder = :e AND o.corpus_id = :c ORDER BY v.owner_id"),
            {"k": owner_kind, "e": embedder, "c": corpus_id}).all()
    else:
        rows = []
        for i in range(0, len(ids), 1000):
            part = ids[i:i + 1000]
            rows += conn.execute(text(
                "SELECT owner_id, dim, data FROM vectors WHERE owner_kind = :k AND embedder = :e "
                f"AND owner_id IN ({','.join(str(int(x)) for x in part)})"),
                {"k": owner_kind, "e": embedder}).all()
        rows.sort(key=lambda r: r[0])
    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    dim = int(rows[0][1])
    mat = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype=np.float32).reshape(len(rows), dim)
    return [int(r[0]) for r in rows], mat.copy()


def load_triples(conn: Connection, corpus_id: int, extractor: str) -> list[tuple[str, str, str, int]]:
    """(subject name, relation, object name, chunk id) of a corpus, in id order."""
    rows = conn.execute(text(
        "SELECT s.name, t.relation, o.name, t.chunk_id FROM triples t "
        "JOIN entities s ON s.id = t.subject_id JOIN entities o ON o.id = t.object_id "
        "WHERE t.corpus_id = :c AND t.extractor = :x ORDER BY t.id"), {"c": corpus_id, "x": extractor}).all()
    return [(r[0], r[1], r[2], int(r[3])) for r in rows]


def corpus_fingerprint(conn: Connection, corpus_id: int, extractor: str, embedder: str) -> str:
    """12 hex digits that change whenever the corpus' chunks, its triples (of ``extractor``) or its
    chunk vectors (of ``embedder``) change: sha256 over count, id sum, id max and token/dim sums
    of each. Rows are only ever added (or deleted with their corpus), so a grown corpus always
    gets a new fingerprint. Cheap: three aggregate queries, no row is read."""
    import hashlib

    parts = [
        conn.execute(text("SELECT COUNT(*), COALESCE(SUM(id), 0), COALESCE(MAX(id), 0), COALESCE(SUM(n_tokens), 0) "
                          "FROM chunks WHERE corpus_id = :c"), {"c": corpus_id}).one(),
        conn.execute(text("SELECT COUNT(*), COALESCE(SUM(id), 0), COALESCE(MAX(id), 0) FROM triples "
                          "WHERE corpus_id = :c AND extractor = :x"), {"c": corpus_id, "x": extractor}).one(),
        conn.execute(text("SELECT COUNT(*), COALESCE(SUM(v.owner_id), 0), COALESCE(MAX(v.owner_id), 0), "
                          "COALESCE(SUM(v.dim), 0) FROM vectors v JOIN chunks o ON o.id = v.owner_id "
                          "WHERE v.owner_kind = 'chunk' AND v.embedder = :e AND o.corpus_id = :c"),
                     {"c": corpus_id, "e": embedder}).one(),
    ]
    blob = "|".join(",".join(str(int(x)) for x in row) for row in parts)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def corpus_ids(conn: Connection, name: str | None) -> list[tuple[int, str]]:
    if name:
        rows = conn.execute(text("SELECT id, name FROM corpora WHERE name = :n"), {"n": name}).all()
        if not rows:
            raise ScopeError(f"corpus '{name}' is not in the store (ingest it first: python cli.py ingest --corpus {name} …)")
    else:
        rows = conn.execute(text("SELECT id, name FROM corpora ORDER BY id")).all()
    return [(int(r[0]), r[1]) for r in rows]


def graph_queries(engine: Engine, corpus: str) -> list[dict]:
    """The corpus' accepted queries with what a graph-retrieval measurement needs: the question,
    its evidence, the chunks it was built from, whether it is unanswerable, and the query
    entities its latest graph-reading run (graph, hybrid, iterative) recorded in its trace
    (``entities`` of the retrieval details; None when no such run exists)."""
    def _entities(trace) -> list[str] | None:
        stack = [trace]
        while stack:  # the first retrieval details holding graph query entities
            node = stack.pop(0)
            if isinstance(node, dict):
                if node.get("kind") == "graph" and isinstance(node.get("entities"), list):
                    return [str(e) for e in node["entities"]]
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        return None

    with engine.connect() as conn:
        cid = corpus_ids(conn, corpus)[0][0]
        queries = conn.execute(text(
            "SELECT id, question, evidence, supporting_chunk_ids, unanswerable FROM queries "
            "WHERE corpus_id = :c AND status = 'accepted' ORDER BY id"), {"c": cid}).all()
        traces = conn.execute(text(
            "SELECT r.query_id, r.paradigm, r.trace FROM paradigm_runs r JOIN queries q ON q.id = r.query_id "
            "WHERE q.corpus_id = :c AND (r.paradigm IN ('graph', 'hybrid') OR r.paradigm LIKE 'iterative%') "
            "ORDER BY r.query_id, r.paradigm = 'graph' DESC, r.id DESC"),
            {"c": cid}).all()
    entities: dict[int, list[str]] = {}
    for qid, _paradigm, trace in traces:
        if qid not in entities:
            found = _entities(json_value(trace))
            if found is not None:
                entities[qid] = found
    return [{"id": int(q[0]), "question": q[1], "evidence": json_value(q[2]), "chunk_ids": json_value(q[3]) or [],
             "unanswerable": bool(q[4]), "entities": entities.get(int(q[0]))} for q in queries]
