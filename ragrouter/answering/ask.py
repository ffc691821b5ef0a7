"""Adaptive answering: a trained router picks the paradigm for a new question, within a
token budget, runs it and records the run in the store like any other.

The question's type (factual / reasoning / summary), which the routers' Q features need, is
given (``--type``) or guessed without a model call (:mod:`ragrouter.answering.question_type`): the cues of
its wording, else the nearest type centroid of the store's labelled questions blended with the
shared corpora's in the sentence-encoder space. The guess is weak on an unseen corpus (about
two in three right, ``benchmarks/bench_query_type.py``), so ``ask`` says it guessed, and how
often such a guess was right. Everything read from the store goes through
:mod:`ragrouter.answering.lookup`; the router is this store's (see :func:`pick_router`), loaded as
the MLflow pyfunc model its run logged.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert

from ragrouter.answering import lookup, question_type, routing
from ragrouter.db import models
from ragrouter.db.engine import write_lock
from ragrouter.llm.encoder import get_encoder
from ragrouter.paradigms import paradigms
from ragrouter.routers import tracking
from ragrouter.routers.features import GatewayEncoder
from ragrouter.stages import storeio
from ragrouter.stages.answer import AnswerStage, run_hash
from ragrouter.stages.base import ScopeError, Unit
from ragrouter.stages.services import Services

INDICATOR_COLUMNS = lookup.INDICATOR_COLUMNS
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
    encoder: str = ""
    router_run_id: str = ""
    query_type_source: str = "given"
    """'given' (--type), or how it was guessed: 'cue' (its wording) or 'centroids'."""
    query_type_measured: dict | None = None
    """Where guessed: the share of such guesses that were right in benchmarks/bench_query_type.py
    ({"unseen": on an unseen corpus' questions of the type, "heldout": on held-out ones})."""


def query_type_centroids(engine, encoder, memo: bool = False) -> dict[str, np.ndarray]:
    """The type centroids the guess uses in ``encoder``'s space: the store's labelled questions
    blended with the shared corpora's (:func:`ragrouter.answering.question_type.blend`); ``memo`` (serve):
    read and encoded once per process."""
    def centroids():
        with write_lock(engine):
            rows = lookup.labelled_questions(engine)
        if not rows:
            raise AskError("the store has no accepted questions to infer the query type from; pass --type")
        return question_type.blend(question_type.store_centroids(rows, encoder),
                                 question_type.reference_centroids(getattr(encoder, "name", "")))

    return _memo(memo, ("centroids", id(engine), getattr(encoder, "name", id(encoder))), centroids)


def guess_query_type(engine, question: str, encoder, memo: bool = False) -> tuple[str, str]:
    """(type, how) of ``question`` (:func:`ragrouter.answering.question_type.guess`): 'cue' or 'centroids'."""
    cents = query_type_centroids(engine, encoder, memo)
    return question_type.guess(question, np.asarray(encoder.encode([question])[0], dtype=np.float64), cents)


def infer_query_type(engine, question: str, encoder, memo: bool = False) -> str:
    """The guessed type of ``question`` (:func:`guess_query_type`)."""
    return guess_query_type(engine, question, encoder, memo)[0]


@dataclass
class TrainedRouter:
    """A router of this store's ``v_router_scores`` and its MLflow run."""

    router: str
    features: str
    encoder: str
    run_id: str


def pick_router(engine, requested: str | None, generator: str, run_id: str | None = None) -> TrainedRouter:
    """The router ``ask`` uses, among this store's trained routers (``v_router_scores`` with
    fold metrics, so only runs `routers train` wrote into this store): ``run_id`` if given, else
    the requested router (its Q+C run first), else the best non-baseline. Ties are broken by
    a fixed order — correct rate, routing accuracy, macro-F1 (fold means, higher first), then
    router, features and encoder names — so the same store always gives the same router."""
    rows = [(r["router"], r["features"], r["encoder"], r["mlflow_run_id"], r["correct_rate"], r["routing_accuracy"],
             r["macro_f1"]) for r in lookup.trained_routers(engine, generator)]

    def key(r):
        neg = [-(v if v is not None else -1.0) for v in (r[4], r[5], r[6])]
        return (*neg, r[0], 0 if r[1] == "qc" else 1, r[1], r[2])

    rows = sorted({tuple(r) for r in rows}, key=key)
    if run_id:
        for r in rows:
            if r[3] == run_id:
                return TrainedRouter(r[0], r[1], r[2], r[3])
        raise AskError(f"MLflow run '{run_id}' is not a router trained on this store (see 'python cli.py routers compare')")
    if requested:
        mine = [r for r in rows if r[0] == requested]
        if not mine:
            raise AskError(f"router '{requested}' was not trained on this store for generator '{generator}': "
                           "run 'python cli.py routers train'")
        r = mine[0]
        return TrainedRouter(r[0], r[1], r[2], r[3])
    for r in rows:
        if r[0] not in BASELINES:
            return TrainedRouter(r[0], r[1], r[2], r[3])
    raise AskError("no trained router in this store: run 'python cli.py routers train' (or make run) first")


def choose_router(engine, config, generator: str, router: str | None = None,
                  run_id: str | None = None) -> TrainedRouter:
    """The router ask and serve use: ``run_id`` or ``router`` when given, else this store's
    promoted champion for ``generator`` (``routers promote``) while it is still one of the
    store's trained routers, else :func:`pick_router`'s best."""
    if router is None and run_id is None:
        # deferred (start-up): pulls in mlflow
        from ragrouter.answering.promotion import champion_run

        champion = champion_run(engine, config, generator)
        if champion:
            try:
                return pick_router(engine, None, generator, champion)
            except AskError:  # retrained since: that run is no longer this store's router
                pass
    return pick_router(engine, router, generator, run_id)


_LOADED: dict[tuple[str, str, str], object] = {}  # (tracking URI, run id, store id) -> model: serve loads once


def load_router(config, chosen: TrainedRouter, store: str):
    """The router refitted on all labelled queries, as `routers train` logged it to MLflow:
    the pyfunc model of run ``chosen.run_id``, which must carry this store's id (loaded once
    per process)."""
    key = (routing.tracking_uri(config), chosen.run_id, store)
    if key not in _LOADED:
        _LOADED[key] = _load_router(config, chosen, store)
    return _LOADED[key]


def router_created(config, chosen: TrainedRouter) -> int:
    """Unix seconds at which the router's MLflow run started (when the model was made)."""
    run = tracking.client(routing.tracking_uri(config)).get_run(chosen.run_id)
    return int((run.info.start_time or 0) // 1000)


def _load_router(config, chosen: TrainedRouter, store: str):
    client = tracking.client(routing.tracking_uri(config))
    try:
        run = client.get_run(chosen.run_id)
    except Exception as exc:  # noqa: BLE001 - MLflow raises its own types
        raise AskError(f"MLflow run '{chosen.run_id}' of router '{chosen.router}' is not in "
                       f"{routing.tracking_uri(config)} ({exc.__class__.__name__}): retrain with "
                       "'python cli.py routers train'") from None
    if run.data.tags.get("ragrouter.store_id") != store:
        raise AskError(f"MLflow run '{chosen.run_id}' was trained on store "
                       f"{run.data.tags.get('ragrouter.store_id') or '(unknown)'}, not this store ({store})")
    try:
        return tracking.load_model(f"runs:/{chosen.run_id}/model", routing.tracking_uri(config))
    except Exception as exc:  # noqa: BLE001
        where = f"{run.info.artifact_uri.rstrip('/')}/model"
        raise AskError(f"router '{chosen.router}' (run {chosen.run_id}) has no loadable model at {where} "
                       f"({exc.__class__.__name__}): restore that folder or retrain with "
                       "'python cli.py routers train'") from None


def expected_tokens(engine, corpus_id: int, generator: str) -> dict[str, float]:
    return lookup.expected_tokens(engine, corpus_id, generator)


def choose(probabilities: dict[str, float], costs: dict[str, float], budget: int | None,
           fallback: str) -> tuple[str, str]:
    """The most probable paradigm whose expected tokens fit the budget (and why)."""
    ranked = sorted(probabilities.items(), key=lambda kv: -kv[1])
    for label, p in ranked:
        paradigm = fallback if label in ("cannot_answer", "unanswerable") else label
        cost = costs.get(paradigm)
        if budget is None or cost is None or cost <= budget:
            note = f" ('{label}' falls back to {fallback})" if label in ("cannot_answer", "unanswerable") else ""
            fits = "" if budget is None else f", expected {cost:.0f} tokens ≤ budget {budget}" if cost is not None else ""
            return paradigm, f"highest router probability {p:.2f}{fits}{note}"
    cheapest = min(costs, key=costs.get) if costs else "llm_only"
    return cheapest, f"no routed paradigm fits the budget {budget}; cheapest on this corpus: {cheapest}"


@dataclass
class Routed:
    """What the router says about a question (before any paradigm runs)."""

    corpus_id: int
    generator: str
    query_type: str
    chosen: TrainedRouter
    probabilities: dict[str, float]
    question: str = ""
    query_type_source: str = "given"
    encoder_name: str = ""


_MEMO: dict[tuple, object] = {}  # serve: what does not change between its requests, read once


def _memo(memo: bool, key: tuple, fn):
    if not memo:
        return fn()
    if key not in _MEMO:
        _MEMO[key] = fn()
    return _MEMO[key]


def _router_for(engine, config, corpus: str, router: str | None, run_id: str | None, memo: bool):
    """(generator, corpus id, indicators, chosen router, its loaded model) for ``corpus``."""
    generator = config.generators()[0]

    def constants():
        with write_lock(engine):  # one DuckDB connection per process: readers in threads (serve) take turns
            return lookup.corpus_id(engine, corpus), lookup.corpus_indicators(engine, corpus)

    cid, values = _memo(memo, ("corpus", id(engine), corpus), constants)
    if values is None:
        raise AskError(f"corpus '{corpus}' has no indicators yet: run 'python cli.py run --stage metrics --corpus {corpus}'")

    def picked():
        with write_lock(engine):
            return choose_router(engine, config, generator, router, run_id), routing.store_id(engine)

    chosen, sid = _memo(memo, ("router", id(engine), generator, router, run_id), picked)
    model = load_router(config, chosen, sid)
    meta = model.metadata.metadata or {}
    if meta.get("store_id") and meta["store_id"] != sid:
        raise AskError(f"the model of run {chosen.run_id} belongs to another store ({meta['store_id']})")
    return generator, cid, values, chosen, model


def route(engine, config, corpus: str, question: str, router: str | None = None, query_type: str | None = None,
          services=None, run_id: str | None = None, memo: bool = False) -> Routed:
    """Route ``question`` on ``corpus``: pick this store's router (:func:`pick_router`), load its
    MLflow pyfunc model (:func:`load_router`), encode the question with the router's own
    encoder (through the gateway: a ledger row) and return the class probabilities. ``memo``
    (serve): the corpus' id and indicators and the chosen router are read once per process."""
    generator, cid, values, chosen, model = _router_for(engine, config, corpus, router, run_id, memo)
    source, type_encoder = "given", ""
    if query_type is None:
        type_encoder = str(config.get("scoring.encoder"))
        query_type, source = guess_query_type(engine, question, get_encoder(type_encoder), memo)
    # deferred (start-up): pulls in mlflow
    from ragrouter.routers.mlflow_model import class_probabilities, model_input

    indicators = np.array([values])
    q_emb = None
    if chosen.encoder not in ("onehot", "none"):
        own = services is None
        if own:
            services = Services(config, engine, command="ask")
        try:
            q_emb = GatewayEncoder(services.gateway, chosen.encoder)([question])
            services.gateway.flush()
        finally:
            if own:
                services.finish()
    out = class_probabilities(model, model_input([query_type], indicators, q_emb))  # sklearn or pyfunc flavour
    probs = {str(c): float(out[c].iloc[0]) for c in out.columns}
    return Routed(cid, generator, query_type, chosen, probs, question, source, type_encoder)


def _sklearn_pipeline(model):
    """The scikit-learn estimator behind a pyfunc model of the sklearn flavour (else None)."""
    if "sklearn" not in (getattr(model.metadata, "flavors", None) or {}):
        return None
    try:
        raw = model.get_raw_model()
    except (NotImplementedError, AttributeError):
        return None
    return raw if hasattr(raw, "predict_proba") else None


def route_many(engine, config, corpus: str, questions: list[str], query_types: list[str], router: str | None = None,
               services=None, run_id: str | None = None, memo: bool = False) -> list[Routed]:
    """:func:`route` for several questions of one corpus whose types are known: one model call
    for all of them (serve's micro-batches), as many as :func:`route` makes one by one for a
    router with a text encoder (each question's embedding is its own ledger row)."""
    generator, cid, values, chosen, model = _router_for(engine, config, corpus, router, run_id, memo)
    if chosen.encoder not in ("onehot", "none"):
        return [route(engine, config, corpus, q, router, t, services, run_id, memo) for q, t in zip(questions, query_types)]
    # deferred (start-up): pulls in mlflow
    from ragrouter.routers.mlflow_model import class_probabilities, model_input

    frame = model_input(list(query_types), np.repeat(np.array([values]), len(questions), axis=0), None)
    raw = _sklearn_pipeline(model)
    if raw is not None:  # the scikit-learn flavour's own predict_proba: the pyfunc's, without its per-call schema check
        cols = str((model.metadata.metadata or {}).get("classes", "")).split(",")
        values_ = np.asarray(raw.predict_proba(frame), dtype=float)
        if values_.shape[1] != len(cols):
            raise AskError(f"router model returned {values_.shape[1]} probability columns for {len(cols)} classes")
    else:
        out = class_probabilities(model, frame)
        cols = [str(c) for c in out.columns]
        values_ = out.to_numpy(dtype=float)
    return [Routed(cid, generator, t, chosen, dict(zip(cols, map(float, values_[i]))), q)
            for i, (q, t) in enumerate(zip(questions, query_types))]


def plan(engine, r: Routed, budget: int | None = None, allowed: set[str] | None = None, why_not: str = "",
         memo: bool = False) -> Answer:
    """The paradigm for a routed question: the most probable one within ``budget`` (expected
    tokens on the corpus) among ``allowed`` (serve's cost share, the reason being ``why_not``).
    ``memo`` (serve): the costs and the router's fallback are read once per process."""
    chosen = r.chosen

    def costs_and_fallback():
        with write_lock(engine):  # one DuckDB connection per process: readers in threads (serve) take turns
            # 'cannot_answer' runs the router's own fallback: its training labels' most frequent paradigm
            return (expected_tokens(engine, r.corpus_id, r.generator),
                    lookup.router_fallback(engine, chosen.run_id) or "naive")

    costs, fallback = _memo(memo, ("costs", id(engine), r.corpus_id, r.generator, chosen.run_id), costs_and_fallback)
    candidates = r.probabilities
    if allowed is not None:
        candidates = {k: v for k, v in r.probabilities.items() if k in allowed or k in ("cannot_answer", "unanswerable")}
        if fallback not in allowed:
            fallback = min(allowed, key=lambda p: costs.get(p, float("inf")))
    paradigm, why = choose(candidates, costs, budget, fallback)
    if why_not:
        why += f"; {why_not}"
    measured = None
    if r.query_type_source != "given":
        measured = question_type.measured(r.query_type, question_type.reference_centroids(r.encoder_name) is not None)
    return Answer(r.question, r.query_type, chosen.router, chosen.features, r.probabilities, paradigm, why,
                  encoder=chosen.encoder, router_run_id=chosen.run_id, query_type_source=r.query_type_source,
                  query_type_measured=measured)


def run_paradigm(config, out: Answer, index, gateway, generator: str, settings=None):
    """Run ``out.paradigm`` on ``out.question`` through ``gateway``; fills ``out.answer`` and
    ``out.tokens`` and returns the paradigm's result (for :func:`store`). ``settings``: the
    paradigms' settings with a client's generation parameters (serve,
    :meth:`ragrouter.paradigms.settings.Settings.for_answer`); None: the config's."""
    result = paradigms.run(out.paradigm, out.question, None, index, gateway, generator,
                           config if settings is None else settings)
    # the graph (extraction variant) the run could read, as the answer stage records it: v_run_latest charges it
    result.trace.setdefault("extractor", storeio.extractor_key(config))
    out.answer = result.answer
    out.tokens = {"retrieval_in": result.ret_in, "retrieval_out": result.ret_out, "generation_in": result.gen_in,
                  "generation_out": result.gen_out,
                  "total": result.ret_in + result.ret_out + result.gen_in + result.gen_out}
    return result


def _stage(config, paradigm: str, generator: str):
    def make():
        stage = AnswerStage()
        stage._combos(type("S", (), {"config": config, "paradigms": [paradigm], "models": [generator]})())
        return stage, run_hash(paradigm, generator, config)

    return _memo(True, ("stage", id(config), paradigm, generator), make)


def run_key(config, paradigm: str, generator: str, settings=None) -> tuple[dict, str]:
    """(stored config, config hash) of a run of ``paradigm`` by ``generator``: the answer
    stage's (:func:`ragrouter.stages.answer.run_hash`), or with ``settings`` (a client's
    generation parameters, serve) the same rule over those settings, so a run whose answer a
    client's max_tokens, temperature, stop or seed changed has a hash of its own."""
    stage, h = _stage(config, paradigm, generator)
    if settings is None:
        return stage._configs.get((paradigm, generator)), h

    model = str(config.backend(generator)["model"])  # not memoised: a client's values are unbounded
    base = paradigms.get(paradigm).config_hash(settings)
    return ({**paradigms.get(paradigm).config(settings), "generator_model": model},
            hashlib.sha256(f"{base}|{model}".encode()).hexdigest()[:16])


def asked_external_id(origin: str, question: str) -> str:
    """The id an asked question is stored under: ``<origin>:<16 hex of its sha256>`` (the same
    question asked again is the same row; ``corpus asked`` turns it into ``asked-<hash>``)."""
    return f"{origin}:" + hashlib.sha256(question.encode()).hexdigest()[:16]


def store(conn, config, corpus_id: int, generator: str, out: Answer, result=None, *, origin: str = "ask") -> int:
    """Store the question (``origin``: 'ask' or 'serve'; status 'asked') and, with ``result``,
    its run, in the caller's transaction; sets ``out.run_id`` and returns the query's id."""
    ext = asked_external_id(origin, out.question)
    qid = conn.execute(insert(models.Query).values(
        corpus_id=corpus_id, external_id=ext, origin=origin, qtype=out.query_type, question=out.question, answer="",
        status="asked", meta={"router": out.router, "features": out.features, "probabilities": out.probabilities}
    ).on_conflict_do_nothing(index_elements=["corpus_id", "external_id"]).returning(models.Query.id)).scalar()
    if qid is None:  # asked before
        qid = conn.execute(text("SELECT id FROM queries WHERE corpus_id = :c AND external_id = :e"),
                           {"c": corpus_id, "e": ext}).scalar_one()
    if result is None:
        return qid

    stage, h = _stage(config, out.paradigm, generator)
    unit = Unit(f"q{qid}:{out.paradigm}:{generator}:{h}", {"query_id": qid, "corpus_id": corpus_id,
                                                           "question": out.question, "paradigm": out.paradigm,
                                                           "generator": generator, "config_hash": h,
                                                           "config": stage._configs.get((out.paradigm, generator))})
    stage.write(conn, unit, result)
    out.run_id = conn.execute(text(
        "SELECT id FROM paradigm_runs WHERE query_id = :q AND paradigm = :p AND generator = :g "
        "AND config_hash = :h"), {"q": qid, "p": out.paradigm, "g": generator, "h": h}).scalar()
    return qid


def ask(engine, config, corpus: str, question: str, router: str | None = None, budget: int | None = None,
        query_type: str | None = None, services=None, run_id: str | None = None, *, origin: str = "ask") -> Answer:
    """Route ``question``, run the chosen paradigm through the gateway and store the query
    (``origin``) and its run (the question alone when the paradigm fails)."""
    r = route(engine, config, corpus, question, router, query_type, services, run_id)
    out = plan(engine, r, budget)
    with write_lock(engine), engine.connect() as conn:
        index = lookup.corpus_index(conn, r.corpus_id, corpus, config)
    own = services is None
    if own:
        services = Services(config, engine, command="ask")
    try:
        try:
            result = run_paradigm(config, out, index, services.gateway, r.generator)
            services.gateway.flush()
        except BaseException:
            with write_lock(engine), engine.begin() as conn:
                store(conn, config, r.corpus_id, r.generator, out, origin=origin)
            raise
        with write_lock(engine), engine.begin() as conn:
            store(conn, config, r.corpus_id, r.generator, out, result, origin=origin)
    finally:
        if own:
            services.finish()
    return out


def type_line(a: Answer) -> str:
    """How the query type was set, for people: given, or guessed and how often such a guess was
    right (benchmarks/bench_query_type.py), with the way to set it."""
    if a.query_type_source == "given":
        return f"{a.query_type} (given)"
    how = "from its wording" if a.query_type_source == "cue" else "from the nearest type centroid"
    line = f"{a.query_type}, guessed {how}"
    m = a.query_type_measured or {}
    if m:
        parts = []
        if m.get("unseen") is not None:
            parts.append(f"{m['unseen'] * 100:.0f} % of an unseen corpus' {a.query_type} questions")
        if m.get("heldout") is not None:
            parts.append(f"{m['heldout'] * 100:.0f} % of held-out ones")
        line += (f" (such guesses were right on {' and '.join(parts)}, as benchmarks/bench_query_type.py "
                 "measured them with 3 labelled questions per type)")
    return line + f"; not {a.query_type}? pass --type factual|reasoning|summary"


def to_json(a: Answer) -> str:
    return json.dumps(a.__dict__, default=str)


def default_path() -> Path:
    return Path.cwd()
