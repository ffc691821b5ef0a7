"""The reading layer of `ask`: what answering one new question reads from the store, in one
place (instead of borrowing SQL from ``report/`` and loading code from ``stages/``).

Every function takes an engine (or, for the index, a connection) and returns plain Python
values; none writes. The SQL reads the same views the benchmark tables read
(``v_corpus_profile``, ``v_router_scores``), so `ask` and the report agree.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from ragrouter.db.values import json_value

# router-dataset indicator → v_corpus_profile column
INDICATOR_COLUMNS = {"lcc_ratio": "lcc_ratio", "density": "density", "clustering": "clustering",
                     "intrinsic_dim": "intrinsic_dim", "hubness": "hubness", "avg_distance": "dist_mean"}


class ReadError(LookupError):
    """What a reader needs is not in the store."""


def corpus_id(engine: Engine, corpus: str) -> int:
    """``corpora.id`` of ``corpus`` (a ScopeError naming the ingest command when unknown)."""
    from ragrouter.stages import storeio

    with engine.connect() as conn:
        return storeio.corpus_ids(conn, corpus)[0][0]


def corpus_indicators(engine: Engine, corpus: str) -> list[float] | None:
    """The six router indicators of ``corpus`` in ``routers.dataset.INDICATORS`` order (an
    undefined one is 0, as in training: a corpus whose graph is empty has no LCC ratio, density
    or clustering), or None when the metrics stage has not run (no metric of the corpus at all)."""
    from ragrouter.routers.dataset import INDICATORS

    with engine.connect() as conn:
        prof = conn.execute(text("SELECT * FROM v_corpus_profile WHERE corpus = :n"), {"n": corpus}).mappings().first()
    if prof is None or all(prof.get(c) is None for c in ("nodes", "hubness")):
        return None
    return [float(prof[INDICATOR_COLUMNS[k]]) if prof[INDICATOR_COLUMNS[k]] is not None else 0.0 for k in INDICATORS]


def labelled_questions(engine: Engine) -> list[tuple[str, str]]:
    """(query type, question) of every accepted question."""
    with engine.connect() as conn:
        return [(r[0], r[1]) for r in conn.execute(text("SELECT qtype, question FROM queries WHERE status = 'accepted'"))]


def trained_routers(engine: Engine, generator: str) -> list[dict]:
    """This store's trained routers for ``generator`` (rows of ``v_router_scores`` with fold
    metrics and an MLflow run)."""
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(text(
            "SELECT router, features, encoder, mlflow_run_id, correct_rate, routing_accuracy, macro_f1 "
            "FROM v_router_scores WHERE dataset = 'store' AND generator = :g AND routing_accuracy IS NOT NULL "
            "AND mlflow_run_id IS NOT NULL"), {"g": generator}).mappings()]


def router_fallback(engine: Engine, run_id: str) -> str | None:
    """The paradigm a ``cannot_answer`` prediction of the router of ``run_id`` runs: the most
    frequent optimal paradigm of its training labels (every CV prediction's true label is a
    training label of the refitted router; ties alphabetical) — the rule of
    ``routers.evaluate.fallback_paradigm``."""
    with engine.connect() as conn:
        row = conn.execute(text(
            "SELECT true_label FROM router_predictions WHERE mlflow_run_id = :r AND true_label NOT IN ('cannot_answer', 'unanswerable') "
            "GROUP BY true_label ORDER BY COUNT(*) DESC, true_label LIMIT 1"), {"r": run_id}).first()
    return None if row is None else str(row[0])


def expected_tokens(engine: Engine, corpus_id: int, generator: str) -> dict[str, float]:
    """Mean tokens per run of each paradigm on the corpus (its recorded runs)."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT r.paradigm, AVG(r.ret_in_tokens + r.ret_out_tokens + r.gen_in_tokens + r.gen_out_tokens) "
            "FROM paradigm_runs r JOIN queries q ON q.id = r.query_id WHERE q.corpus_id = :c AND r.generator = :g "
            "GROUP BY r.paradigm"), {"c": corpus_id, "g": generator}).all()
    return {r[0]: float(r[1]) for r in rows}


def corpus_index(conn: Connection, corpus_id: int, corpus: str, config):
    """The corpus' retrieval state (chunks, vectors, graph) as the answer stage reads it."""
    from ragrouter.stages.answer import load_index

    return load_index(conn, corpus_id, corpus, config)


def decision_cells(engine: Engine) -> list[dict]:
    """Every cell's sequential decision (``run --until-decided``): corpus, query type,
    generator, judge, state, leader, N, runs, bound, stop reason, and the claim the state
    makes (``claim``; empty for rows written before claims were kept)."""
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(text(
            "SELECT c.name AS corpus, d.qtype, d.generator, d.judge, d.state, d.winner, d.n_queries, d.n_runs, "
            "d.bound, d.alpha, d.margin, d.stop_reason, d.detail FROM decision_cells d "
            "JOIN corpora c ON c.id = d.corpus_id ORDER BY c.name, d.qtype, d.generator, d.judge")).mappings()]
    for row in rows:
        detail = json_value(row.pop("detail")) or {}
        row["claim"] = str(detail.get("claim") or "") if isinstance(detail, dict) else ""
    return rows


def router_cv_probabilities(engine: Engine, run_id: str) -> list[dict[str, float]]:
    """The class probabilities of every cross-validated prediction of the router of ``run_id``
    on this store's labelled queries (``router_predictions``): what ``serve --cost-share``
    calibrates its threshold on."""
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT probabilities FROM router_predictions WHERE mlflow_run_id = :r "
                                 "AND probabilities IS NOT NULL ORDER BY query_key"), {"r": run_id}).all()
    out = []
    for (p,) in rows:
        p = json_value(p)
        out.append({str(k): float(v) for k, v in dict(p).items()})
    return out


def human_labels(engine: Engine, corpus: str | None = None) -> list[dict]:
    """Every reviewed run's human label beside the judge's verdict (``v_human_label``: corpus,
    paradigm, generator, qtype, judge, judge_label, human_label, reviewer, …); the judge's
    agreement with them is ``ragrouter.review.figures.by_stratum`` of these rows."""
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(text(
            "SELECT * FROM v_human_label" + (" WHERE corpus = :c" if corpus else "") +
            " ORDER BY run_id, reviewer"), {"c": corpus}).mappings()]


def human_agreement(engine: Engine, corpus: str | None = None) -> list[tuple]:
    """(dimension, value, ``review.figures.Agreement``) of the judge against the reviewers'
    labels: all, then per paradigm and query type; empty when nothing was reviewed."""
    from ragrouter.review.figures import by_stratum

    rows = human_labels(engine, corpus)
    return by_stratum(rows) if rows else []


LICENCE_KEYS = ("license", "licence")


def export_provenance(engine: Engine) -> dict:
    """What an export rests on, from the store: its id (``store_info``), the judge keys of the
    benchmark's judgments (calibration cases left out) with their counts, the paradigm config
    hashes of the runs with theirs, and each corpus' licence — ``corpora.meta.license`` when
    the ingest recorded one, else the distinct ``license`` of its documents' metadata (QuALITY,
    SQuALITY carry one per article), else ``unknown``."""
    with engine.connect() as conn:
        sid = conn.execute(text("SELECT store_id FROM store_info ORDER BY created_at LIMIT 1")).scalar()
        judges = [{"judge": r[0], "n_judgments": int(r[1])} for r in conn.execute(text(
            "SELECT judge, COUNT(*) FROM judgments WHERE NOT is_calibration GROUP BY judge ORDER BY judge"))]
        configs = [{"paradigm": r[0], "config_hash": r[1], "n_runs": int(r[2])} for r in conn.execute(text(
            "SELECT paradigm, config_hash, COUNT(*) FROM paradigm_runs WHERE paradigm <> 'calibration' "
            "GROUP BY paradigm, config_hash ORDER BY paradigm, config_hash"))]
        corpora = []
        stored = conn.execute(text("SELECT id, name, source_format, meta FROM corpora ORDER BY name")).all()
        for cid, name, fmt, meta in stored:  # fetched first: DuckDB drops a result its connection moves past
            meta = json_value(meta) or {}
            found = [str(meta[k]) for k in LICENCE_KEYS if isinstance(meta, dict) and meta.get(k)]
            if not found:
                found = sorted({str(r[0]) for key in LICENCE_KEYS for r in conn.execute(text(
                    f"SELECT DISTINCT meta ->> '{key}' FROM documents WHERE corpus_id = :c"), {"c": cid})
                    if r[0]})
            corpora.append({"corpus": name, "source_format": fmt, "licence": ", ".join(found) or "unknown"})
    return {"store_id": str(sid) if sid else "unknown", "judges": judges, "config_hashes": configs,
            "corpora": corpora}


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

    cid = corpus_id(engine, corpus)
    with engine.connect() as conn:
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


ASKED_PREFIX = "asked-"  # the id a questions file gives an asked question (``corpus asked``)


def asked_questions(engine: Engine, corpus: str, include_ingested: bool = False) -> list[dict]:
    """The questions asked of ``corpus`` through ``ask`` and ``serve`` (status 'asked': no gold
    answer, out of the benchmark), oldest first, one per question text (a question asked through
    both is one record, ``origins`` in the order first asked), each with its latest stored answer
    (paradigm, generator, answer; None when no run was stored, e.g. its paradigm failed) and the
    router's probabilities of that answer. A question whose ``asked-<hash>`` id was ingested
    since (``corpus asked`` wrote it, a person answered it) is left out unless
    ``include_ingested``."""
    cid = corpus_id(engine, corpus)
    with engine.connect() as conn:
        asked = conn.execute(text(
            "SELECT id, origin, external_id, question, qtype, meta, created_at FROM queries "
            "WHERE corpus_id = :c AND status = 'asked' ORDER BY created_at, id"), {"c": cid}).all()
        runs = conn.execute(text(
            "SELECT r.query_id, r.paradigm, r.generator, r.answer FROM paradigm_runs r "
            "JOIN queries q ON q.id = r.query_id WHERE q.corpus_id = :c AND q.status = 'asked' "
            "ORDER BY r.created_at, r.id"), {"c": cid}).all()
        ingested = {r[0] for r in conn.execute(text(
            "SELECT external_id FROM queries WHERE corpus_id = :c AND status <> 'asked' "
            "AND substr(external_id, 1, :n) = :p"), {"c": cid, "n": len(ASKED_PREFIX), "p": ASKED_PREFIX})}
    by_query: dict[int, dict] = {}
    out: dict[str, dict] = {}
    for qid, origin, ext, question, qtype, meta, at in asked:
        new_id = ASKED_PREFIX + ext.split(":", 1)[-1]  # <origin>:<hash> (ask.asked_external_id)
        if new_id in ingested and not include_ingested:
            continue
        rec = out.setdefault(new_id, {"id": new_id, "question": question, "type": qtype, "asked_at": str(at),
                                      "origins": [], "query_ids": [], "router": None, "probabilities": None,
                                      "paradigm": None, "generator": None, "answer": None})
        rec["origins"].append(origin)
        rec["query_ids"].append(int(qid))
        by_query[int(qid)] = (rec, json_value(meta) or {})
    for qid, paradigm, generator, answer in runs:  # oldest first: the latest run wins
        if int(qid) in by_query:
            rec, meta = by_query[int(qid)]
            rec.update(paradigm=paradigm, generator=generator, answer=answer, router=meta.get("router"),
                       probabilities=meta.get("probabilities"))
    for qid, (rec, meta) in by_query.items():  # a question with no run: the router's view of its first ask
        if rec["router"] is None and rec["query_ids"][0] == qid:
            rec.update(router=meta.get("router"), probabilities=meta.get("probabilities"))
    return list(out.values())
