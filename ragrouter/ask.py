"""Adaptive answering: a trained router picks the paradigm for a new question, within a
token budget, runs it and records the run in the store like any other.

The question's type (factual / reasoning / summary), which the routers' Q features need, is
inferred without a model call: the nearest type centroid of the store's labelled questions
in the sentence-encoder space.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert

from ragrouter import routing
from ragrouter.corpus import storeio
from ragrouter.db import models
from ragrouter.db.engine import write_lock
from ragrouter.stages.base import ScopeError

INDICATOR_COLUMNS = {"lcc_ratio": "lcc_ratio", "density": "density", "clustering": "clustering",
                     "intrinsic_dim": "intrinsic_dim", "hubness": "hubness", "avg_distance": "dist_mean"}
BASELINES = {"random", "oracle", "best_fixed", "by_query_type"}


class AskError(ScopeError):
    """What ask needs is missing (no trained router, no corpus indicators, …)."""


@dataclass
class Answer:
    question: str
    query_type: str
    router: str
    features: str
    probabilities: dict[str, float]
    paradigm: str
    why: str
    answer: str = ""
    tokens: dict[str, int] = field(default_factory=dict)
    run_id: int | None = None


def infer_query_type(engine, question: str, encoder) -> str:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT qtype, question FROM queries WHERE status = 'accepted'")).all()
    if not rows:
        raise AskError("the store has no accepted questions to infer the query type from; pass --type")
    types = sorted({r[0] for r in rows})
    vecs = encoder.encode([r[1] for r in rows] + [question])
    q = vecs[-1]
    best, best_sim = types[0], -2.0
    for t in types:
        centroid = vecs[:-1][[r[0] == t for r in rows]].mean(axis=0)
        sim = float(centroid @ q / (np.linalg.norm(centroid) + 1e-12))
        if sim > best_sim:
            best, best_sim = t, sim
    return best


def pick_router(engine, requested: str | None, generator: str) -> tuple[str, str]:
    """(router, features): the requested router on Q+C, else the best non-baseline by correct rate."""
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT router, features, correct_rate, routing_accuracy FROM v_router_scores "
            "WHERE dataset = 'store' AND generator = :g ORDER BY correct_rate DESC, routing_accuracy DESC"),
            {"g": generator}).all()
    if requested:
        feats = [r[1] for r in rows if r[0] == requested]
        return requested, ("qc" if "qc" in feats or not feats else feats[0])
    for router, features, *_ in rows:
        if router not in BASELINES:
            return router, features
    raise AskError("no trained router in the store: run 'python cli.py routers train' (or make run) first")


def load_router(config, router: str, features: str, generator: str):
    """The router refitted on all labelled queries, as logged to MLflow by `routers train`."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=routing.tracking_uri(config))
    exp = client.get_experiment_by_name(str(config.get("routers.experiment")))
    if exp is None:
        raise AskError("no MLflow experiment with routers: run 'python cli.py routers train' first")
    runs = client.search_runs([exp.experiment_id],
                              filter_string=(f"tags.router = '{router}' and tags.features = '{features}' "
                                             f"and tags.generator = '{generator}' and attributes.status = 'FINISHED'"),
                              order_by=["attributes.start_time DESC"], max_results=20)
    runs = [r for r in runs if r.data.tags.get("ragrouter.kind") == "router-cv"]
    if not runs:
        raise AskError(f"router '{router}' ({features}) was not trained for generator '{generator}': "
                       "run 'python cli.py routers train'")
    from ragrouter.routers.tracking import load_model

    with tempfile.TemporaryDirectory() as tmp:
        path = client.download_artifacts(runs[0].info.run_id, "model/model.pkl", tmp)
        return load_model(path), runs[0].data.tags.get("encoder", "onehot")


def expected_tokens(engine, corpus_id: int, generator: str) -> dict[str, float]:
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT r.paradigm, AVG(r.ret_in_tokens + r.ret_out_tokens + r.gen_in_tokens + r.gen_out_tokens) "
            "FROM paradigm_runs r JOIN queries q ON q.id = r.query_id WHERE q.corpus_id = :c AND r.generator = :g "
            "GROUP BY r.paradigm"), {"c": corpus_id, "g": generator}).all()
    return {r[0]: float(r[1]) for r in rows}


def choose(probabilities: dict[str, float], costs: dict[str, float], budget: int | None,
           fallback: str) -> tuple[str, str]:
    """The most probable paradigm whose expected tokens fit the budget (and why)."""
    ranked = sorted(probabilities.items(), key=lambda kv: -kv[1])
    for label, p in ranked:
        paradigm = fallback if label == "cannot_answer" else label
        cost = costs.get(paradigm)
        if budget is None or cost is None or cost <= budget:
            note = f" ('cannot_answer' falls back to {fallback})" if label == "cannot_answer" else ""
            fits = "" if budget is None else f", expected {cost:.0f} tokens ≤ budget {budget}" if cost is not None else ""
            return paradigm, f"highest router probability {p:.2f}{fits}{note}"
    cheapest = min(costs, key=costs.get) if costs else "llm_only"
    return cheapest, f"no routed paradigm fits the budget {budget}; cheapest on this corpus: {cheapest}"


def ask(engine, config, corpus: str, question: str, router: str | None = None, budget: int | None = None,
        query_type: str | None = None, services=None) -> Answer:
    from ragrouter.llm.encoder import get_encoder
    from ragrouter.paradigms import paradigms
    from ragrouter.routers.features import build_features
    from ragrouter.stages.answer import AnswerStage, load_index, run_hash

    generator = config.generators()[0]
    with engine.connect() as conn:
        cid = storeio.corpus_ids(conn, corpus)[0][0]
        prof = conn.execute(text("SELECT * FROM v_corpus_profile WHERE corpus = :n"), {"n": corpus}).mappings().first()
    if prof is None or prof.get("lcc_ratio") is None:
        raise AskError(f"corpus '{corpus}' has no indicators yet: run 'python cli.py run --stage metrics --corpus {corpus}'")
    enc = get_encoder(str(config.get("scoring.encoder")))
    qtype = query_type or infer_query_type(engine, question, enc)
    router, features = pick_router(engine, router, generator)
    model, encoder_name = load_router(config, router, features, generator)
    row = pd.DataFrame([{"query_type": qtype, "query_text": question,
                         # an undefined indicator is 0, as in training (ragrouter.routing)
                         **{k: float(prof[v]) if prof[v] is not None else 0.0
                            for k, v in INDICATOR_COLUMNS.items()}}])
    q_encoder = None
    if encoder_name != "onehot":
        from ragrouter.routers.features import minilm_encoder

        q_encoder = minilm_encoder()
    feats = build_features(row, "qc", q_encoder).with_feature_set(features)
    if getattr(model, "needs_labels", False):
        raise AskError(f"router '{router}' needs the true label (a baseline); pick a trained router")
    proba = model.predict_proba(feats)[0]
    probs = {str(c): float(p) for c, p in zip(model.classes_, proba)}
    costs = expected_tokens(engine, cid, generator)
    from ragrouter.report import data

    labels = data.read_sql(engine, "SELECT label, COUNT(*) AS n FROM v_oracle_label WHERE label <> 'cannot_answer' "
                                   "GROUP BY label ORDER BY n DESC", {})
    fallback = str(labels["label"].iloc[0]) if len(labels) else "naive"
    paradigm, why = choose(probs, costs, budget, fallback)
    out = Answer(question, qtype, router, features, probs, paradigm, why)

    ext = "ask:" + hashlib.sha256(question.encode()).hexdigest()[:16]
    with write_lock(engine), engine.begin() as conn:
        conn.execute(insert(models.Query).values(
            corpus_id=cid, external_id=ext, origin="ask", qtype=qtype, question=question, answer="",
            status="asked", meta={"router": router, "features": features, "probabilities": probs}
        ).on_conflict_do_nothing(index_elements=["corpus_id", "external_id"]))
        qid = conn.execute(text("SELECT id FROM queries WHERE corpus_id = :c AND external_id = :e"),
                           {"c": cid, "e": ext}).scalar_one()
        index = load_index(conn, cid, corpus, config)
    own = services is None
    if own:
        from ragrouter.stages.services import Services

        services = Services(config, engine, command="ask")
    try:
        result = paradigms.run(paradigm, question, None, index, services.gateway, generator, config)
        services.gateway.flush()
        stage = AnswerStage()
        stage._combos(type("S", (), {"config": config, "paradigms": [paradigm], "models": [generator]})())
        h = run_hash(paradigm, generator, config)
        from ragrouter.stages.base import Unit

        unit = Unit(f"q{qid}:{paradigm}:{generator}:{h}", {"query_id": qid, "corpus_id": cid, "question": question,
                                                          "paradigm": paradigm, "generator": generator,
                                                          "config_hash": h,
                                                          "config": stage._configs.get((paradigm, generator))})
        with write_lock(engine), engine.begin() as conn:
            stage.write(conn, unit, result)
            out.run_id = conn.execute(text(
                "SELECT id FROM paradigm_runs WHERE query_id = :q AND paradigm = :p AND generator = :g "
                "AND config_hash = :h"), {"q": qid, "p": paradigm, "g": generator, "h": h}).scalar()
    finally:
        if own:
            services.finish()
    out.answer = result.answer
    out.tokens = {"retrieval_in": result.ret_in, "retrieval_out": result.ret_out, "generation_in": result.gen_in,
                  "generation_out": result.gen_out,
                  "total": result.ret_in + result.ret_out + result.gen_in + result.gen_out}
    return out


def to_json(a: Answer) -> str:
    return json.dumps(a.__dict__, default=str)


def default_path() -> Path:
    return Path.cwd()
