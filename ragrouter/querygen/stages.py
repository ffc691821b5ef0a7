"""The ``querygen`` and ``validate`` stages (paper §3.2, App. A.2, Algorithm 2, Table 6).

querygen
    Unit = (corpus, type, index) for the generator model, key
    ``<corpus>:<type>#<index>:<seed>:<model>``; types ``factual``, ``<k>-hop`` (the
    ``querygen.counts.reasoning`` units split by ``querygen.reasoning_hops``) and ``summary``;
    the seed is :func:`~ragrouter.querygen.generate.unit_seed`. Done when the ``queries`` row
    with external id ``gen:<type>:<seed>:<model>`` exists in the corpus — a generated query
    (status ``pending``, or ``rejected`` with a failed ``bridge_leak`` check) or a note
    (origin ``querygen-note``, status ``skipped``; see :mod:`ragrouter.querygen.generate`).
    With ``querygen.strategy: stepwise`` a reasoning unit runs reverse substitution one step
    per request (:mod:`~ragrouter.querygen.stepwise`), its external id ends in ``:stepwise``
    (the same seeds, so the same chains as the one-prompt units), and its step checks
    (``step_question``, ``step_description``, ``bridge_leak``) are stored with the query. A
    unit that produced no query is a note whose reason :meth:`QueryGenStage.skipped` counts
    for ``run`` and ``status`` (and ``v_query_validation`` shows).
    Bridges come from entity linking (:mod:`~ragrouter.querygen.linking`; embeddings of the
    corpus's names through the gateway, phase ``linking``).
    Reasoning and summary units need the knowledge graph: while some chunk of the corpus is
    not extracted yet they fail (retried next run) rather than note "no chain". The graph
    (and its PageRank) is built once per corpus on first use and memoised in ``services``.

validate
    Unit = (query, check, evaluator model), key ``q<id>:<check>:<model>`` (model ``-`` for the
    lexical check), over generated queries with status ``pending``; done when its
    ``query_checks`` row exists. The write of a check also settles the query: once every
    check that applies to it is in, it becomes ``accepted`` (all passed) or ``rejected``
    (any failed) — Algorithm 2 runs every check, so Table 6's rejection reasons are complete.
    ``finish`` settles any pending query whose checks are all in (idempotent, no model call).
"""

from __future__ import annotations

from collections import Counter

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert

from ragrouter.db import models
from ragrouter.db.values import json_value
from ragrouter.llm.backends import GatewayError
from ragrouter.querygen import generate as gen
from ragrouter.querygen import checks, prompts, stepwise
from ragrouter.querygen.linking import Linking, link_names
from ragrouter.querygen.sampling import ChunkInfo, CorpusGraph, choose_walk_unit
from ragrouter.querygen.summaries import pagerank
from ragrouter.stages import storeio
from ragrouter.stages.base import Estimate, Scope, Stage, Unit, register


def _corpora(conn, scope: Scope) -> list[tuple[int, str]]:
    """Corpora in scope that have chunks of the configured chunker."""
    key = storeio.chunker_key(scope.config)
    out = []
    for cid, name in storeio.corpus_ids(conn, scope.corpus):
        if conn.execute(text("SELECT 1 FROM chunks WHERE corpus_id = :c AND chunker = :k LIMIT 1"),
                        {"c": cid, "k": key}).first():
            out.append((cid, name))
    return out


def _texts(services, chunk_ids: list[int]) -> dict[int, str]:
    ids = sorted({int(c) for c in chunk_ids})
    if not ids:
        return {}
    with services.db_lock, services.engine.connect() as conn:
        rows = conn.execute(text(f"SELECT id, text FROM chunks WHERE id IN ({','.join(map(str, ids))})")).all()
    found = {int(r[0]): r[1] for r in rows}
    missing = [c for c in ids if c not in found]
    if missing:
        raise RuntimeError(f"chunks {missing[:5]} are no longer in the store")
    return found


# ---------------------------------------------------------------------- querygen


def _step_chain(plan: gen.Plan) -> stepwise.StepChain:
    return stepwise.StepChain(plan.hop_texts, plan.bridges, plan.bridge_forms, plan.hop_facts)


def _linking(services, s: gen.Settings, triples) -> Linking:
    """The entity linking of a corpus's names (:mod:`ragrouter.querygen.linking`): normalised
    names and alias triples always; embedding links when ``querygen.linking.embedding`` is on
    and the embedder's model has a measured threshold (embeddings through the gateway, stage
    ``querygen``, phase ``linking``: cached in the ledger)."""
    counts = Counter()
    for sub, _r, obj, _c in triples:
        counts[sub] += 1
        counts[obj] += 1
    embed, threshold, embedder = None, None, None
    if s.link_embedding:
        try:
            backend = services.config.role("embedder")
            embedder = services.config.backend(backend).get("model", backend)
        except Exception:  # noqa: BLE001 - no embedder configured: names and aliases only
            backend = None
        threshold = s.link_thresholds.get(str(embedder)) if backend else None
        if threshold is not None:
            def embed(names: list[str]):
                return services.gateway.embed("embedder", names, stage="querygen", phase="linking")
    return link_names(counts, [(a, r, b) for a, r, b, _c in triples], embed=embed, threshold=threshold,
                      embedder=embedder, max_embedded=s.link_max_embedded, counts=counts)


class QueryGenStage(Stage):
    name = "querygen"
    description = "generate factual, 2/3-hop reasoning and summary queries from chunks and the knowledge graph"
    uses_llm = True

    def backend_name(self, services):
        return services.config.role("query_generator")

    def _expected(self, conn, scope: Scope) -> list[Unit]:
        cfg = scope.config
        s = gen.Settings.from_config(cfg)
        model = storeio.model_key(cfg, "query_generator")
        counts = s.unit_counts()
        units = []
        for cid, corpus in _corpora(conn, scope):
            for i in range(max(counts.values(), default=0)):
                for utype, n in counts.items():
                    if i >= n:
                        continue
                    seed = gen.unit_seed(s.seed, corpus, utype, i)
                    ext = gen.external_id(utype, seed, model, s.strategy)
                    units.append(Unit(f"{corpus}:{utype}#{i}:{seed}:{ext.split(':', 3)[3]}",
                                      {"corpus_id": cid, "corpus": corpus, "utype": utype, "index": i,
                                       "seed": seed, "querygen_seed": s.seed,
                                       "type_seed": gen.order_seed(s.seed, corpus, utype),
                                       "model": model, "external_id": ext}))
        return units

    @staticmethod
    def _done(conn, corpus_ids: set[int]) -> set[tuple[int, str]]:
        if not corpus_ids:
            return set()
        rows = conn.execute(text(
            "SELECT corpus_id, external_id FROM queries WHERE origin IN (:g, :n, :h) AND corpus_id IN "
            f"({','.join(str(int(c)) for c in corpus_ids)})"),
            {"g": gen.QUERY_ORIGIN, "n": gen.NOTE_ORIGIN, "h": gen.REVIEWED_ORIGIN}).all()
        return {(int(r[0]), r[1]) for r in rows}

    def counts(self, conn, scope):
        units = self._expected(conn, scope)
        done = self._done(conn, {u.payload["corpus_id"] for u in units})
        return len(units), sum((u.payload["corpus_id"], u.payload["external_id"]) in done for u in units)

    def skipped(self, conn, scope):
        """Notes (units without a query) among the expected units, by reason (``no_chain``,
        ``no_entity``, ``invalid_reply``, ``inconsistent``, …)."""
        units = self._expected(conn, scope)
        wanted = {(u.payload["corpus_id"], u.payload["external_id"]) for u in units}
        if not wanted:
            return {}
        ids = ",".join(str(int(c)) for c in {c for c, _ in wanted})
        out: Counter = Counter()
        for cid, ext, meta in conn.execute(text(
                f"SELECT corpus_id, external_id, meta FROM queries WHERE origin = :n AND corpus_id IN ({ids})"),
                {"n": gen.NOTE_ORIGIN}).all():
            if (int(cid), ext) in wanted:
                out[(json_value(meta) or {}).get("note") or "unknown"] += 1
        return dict(out)

    def pending(self, conn, scope):
        units = self._expected(conn, scope)
        done = self._done(conn, {u.payload["corpus_id"] for u in units})
        out = [u for u in units if (u.payload["corpus_id"], u.payload["external_id"]) not in done]
        return out[:scope.limit] if scope.limit else out

    # -------------------------------------------------------------- shared state
    def _graph(self, services, corpus_id: int, corpus: str, needs_triples: bool) -> CorpusGraph:
        cfg = services.config
        s = gen.Settings.from_config(cfg)
        chunker, extractor = storeio.chunker_key(cfg), storeio.extractor_key(cfg)
        if needs_triples:
            with services.db_lock, services.engine.connect() as conn:
                missing = conn.execute(text(
                    "SELECT COUNT(*) FROM chunks c WHERE c.corpus_id = :c AND c.chunker = :k AND NOT EXISTS "
                    "(SELECT 1 FROM chunk_extractions e WHERE e.chunk_id = c.id AND e.extractor = :x)"),
                    {"c": corpus_id, "k": chunker, "x": extractor}).scalar()
            if missing:
                raise RuntimeError(f"corpus '{corpus}': {missing} chunks have no '{extractor}' extraction yet — "
                                   "run the extract stage first")
        key = ("querygen-graph", corpus_id, chunker, extractor, s.walk_unit, s.bridge_max_share, s.max_hops,
               s.long_document_chunks, s.link_embedding, tuple(sorted(s.link_thresholds.items())),
               needs_triples)  # factual units need no linking: their graph is built without it

        def build() -> CorpusGraph:
            with services.db_lock, services.engine.connect() as conn:
                rows = conn.execute(text(
                    "SELECT c.id, c.document_id, d.external_id, c.token_start, c.token_end, c.text FROM chunks c "
                    "JOIN documents d ON d.id = c.document_id WHERE c.corpus_id = :c AND c.chunker = :k "
                    "ORDER BY c.id"), {"c": corpus_id, "k": chunker}).all()
                triples = storeio.load_triples(conn, corpus_id, extractor)
            chunks = [ChunkInfo(int(r[0]), int(r[1]), str(r[2]), int(r[3]), int(r[4])) for r in rows]
            # the texts give each entity's spread (sampling.py); only reasoning chains use it
            texts = {int(r[0]): str(r[5] or "") for r in rows} if needs_triples else None
            per_doc = Counter(c.document_id for c in chunks)
            unit = choose_walk_unit(s.walk_unit, len(per_doc), s.max_hops,
                                    sum(n > s.long_document_chunks for n in per_doc.values()))
            linking = _linking(services, s, triples) if needs_triples else None
            return CorpusGraph.build(chunks, triples, unit, s.bridge_max_share, linking, s.long_document_chunks,
                                     texts=texts)

        return services.memo(key, build)

    def _plan(self, unit: Unit, services) -> gen.Plan:
        p = unit.payload
        qtype, _ = gen.parse_type(p["utype"])
        graph = self._graph(services, p["corpus_id"], p["corpus"], needs_triples=qtype != "factual")

        def scores() -> dict[str, float]:
            return services.memo(("querygen-pagerank", id(graph)), lambda: pagerank(graph))

        return gen.plan_unit(p["utype"], p["seed"], graph, lambda ids: _texts(services, ids), scores,
                             gen.Settings.from_config(services.config), index=p["index"], type_seed=p["type_seed"])

    def _kwargs(self, s: gen.Settings, plan: gen.Plan, unit: Unit, attempt: int) -> dict:
        # One sample index per (unit, attempt): coinciding prompts of two units are two samples.
        return dict(temperature=s.temperature, max_tokens=s.max_tokens, json_schema=plan.schema,
                    stage="querygen", phase=plan.qtype, sample=unit.payload["index"] * s.attempts + attempt)

    def _stepwise(self, s: gen.Settings, plan: gen.Plan, unit: Unit, services) -> gen.Outcome:
        """Stepwise reverse substitution (:mod:`ragrouter.querygen.stepwise`); every step is a
        gateway call (cached), its sample index ``index × attempts + attempt``."""
        def chat(phase, messages, schema, attempt):
            return services.gateway.chat("query_generator", messages, temperature=s.temperature,
                                         max_tokens=s.max_tokens, json_schema=schema, stage="querygen",
                                         phase=phase, sample=unit.payload["index"] * s.attempts + attempt)

        res = stepwise.run(_step_chain(plan), chat,
                           attempts=s.attempts, min_drawn=s.step_min_drawn, min_kept=s.step_min_kept)
        meta = {**plan.meta, **res.meta, "call_ids": res.call_ids}
        if res.note is not None:
            return gen.note(plan, *res.note, **{k: v for k, v in res.meta.items() if k != "prompt_version"},
                            call_ids=res.call_ids)
        status = "rejected" if res.status == "rejected" else "pending"
        first, *rest = res.checks
        return gen.Outcome(gen.QUERY_ORIGIN, status, res.question, res.answer, meta, first, rest)

    def compute(self, unit, services):
        s = gen.Settings.from_config(services.config)
        plan = self._plan(unit, services)
        if plan.note is not None:
            return plan, gen.note(plan, *plan.note)
        if plan.qtype == "reasoning" and s.strategy == "stepwise":
            return plan, self._stepwise(s, plan, unit, services)
        calls, problems = [], []
        outcome = None
        for sample in range(s.attempts):
            try:
                res = services.gateway.chat("query_generator", plan.messages, **self._kwargs(s, plan, unit, sample))
            except GatewayError as exc:
                if exc.reason not in checks.PARSE_ERRORS:
                    raise  # transient (timeout, HTTP): the unit fails and is retried next run
                problems.append(exc.reason)
                continue
            calls.append(res.call_id)
            outcome = gen.interpret(plan, res.data)
            if outcome is not None:
                outcome.meta["attempt"] = sample
                break
            problems.append("no usable question and answer")
        if outcome is None:
            outcome = gen.note(plan, "invalid_reply", f"{s.attempts} unusable replies: {'; '.join(problems)}")
        outcome.meta["call_ids"] = calls
        return plan, outcome

    def write(self, conn, unit, result):
        plan, out = result
        p = unit.payload
        row = {"corpus_id": p["corpus_id"], "external_id": p["external_id"], "origin": out.origin,
               "qtype": plan.qtype, "hops": plan.hops, "question": out.question, "answer": out.answer,
               "supporting_doc_ids": plan.doc_ids or None, "supporting_chunk_ids": plan.chunk_ids or None,
               "status": out.status, "generator_model": p["model"], "seed": p["seed"],
               "meta": {**out.meta, "unit_type": p["utype"], "unit_index": p["index"],
                        "querygen_seed": p["querygen_seed"]}}
        qid = conn.execute(insert(models.Query).values(row).on_conflict_do_nothing(
            index_elements=["corpus_id", "external_id"]).returning(models.Query.id)).scalar()
        if qid is not None:
            for name, passed, evidence in ([out.check] if out.check is not None else []) + out.more_checks:
                conn.execute(insert(models.QueryCheck).values(
                    query_id=qid, check_name=name, model="", passed=passed, evidence=evidence,
                ).on_conflict_do_nothing(index_elements=["query_id", "check_name", "model"]))

    def estimate(self, conn, units, services):
        s = gen.Settings.from_config(services.config)
        gw = services.gateway
        est = Estimate(stage=self.name, model=storeio.model_key(services.config, "query_generator"))
        for unit in units:
            try:
                plan = self._plan(unit, services)
            except Exception:  # noqa: BLE001 - e.g. not extracted yet: count the call, tokens unknown
                est.calls += 1
                est.add_tokens(0, s.max_tokens)
                continue
            if plan.note is not None:
                continue
            if plan.qtype == "reasoning" and s.strategy == "stepwise":
                # (a) one question, (b) one description per bridge, (d) one rewrite (first attempts)
                for msgs in stepwise.first_requests(_step_chain(plan)):
                    est.calls += 1
                    est.add_tokens(*gw.estimate_tokens(msgs, s.max_tokens))
                continue
            kw = self._kwargs(s, plan, unit, 0)
            est.calls += 1
            if gw.is_cached("query_generator", plan.messages, **kw):
                est.cached_calls += 1
                continue
            est.add_tokens(*gw.estimate_tokens(plan.messages, s.max_tokens))
        return [est]


# ---------------------------------------------------------------------- validate


def evaluator(services) -> checks.Evaluator:
    """The checks' judge as ``validate`` configures it (``querygen.*`` check settings, ``judge.temperature``)."""
    s = gen.Settings.from_config(services.config)
    return checks.Evaluator(services.gateway, temperature=s.check_temperature, max_tokens=s.check_max_tokens,
                            judge_temperature=float(services.config.get("judge.temperature", 0.1)),
                            attempts=s.attempts, overlap_gate=s.overlap_gate)


def _model_for(check: str, judge_model: str) -> str:
    return judge_model if checks.CHECKS[check][1] else ""


def settle(conn, query_ids: list[int], judge_model: str) -> dict[int, str]:
    """Set the status of pending generated queries whose checks are all in; returns {id: new status}."""
    if not query_ids:
        return {}
    ids = ",".join(str(int(q)) for q in query_ids)
    qtypes = dict(conn.execute(text(f"SELECT id, qtype FROM queries WHERE id IN ({ids}) AND status = 'pending' "
                                    f"AND origin = :g"), {"g": gen.QUERY_ORIGIN}).all())
    results: dict[int, dict[str, bool]] = {int(q): {} for q in qtypes}
    for qid, name, model, passed in conn.execute(text(
            f"SELECT query_id, check_name, model, passed FROM query_checks WHERE query_id IN ({ids})")).all():
        if name in checks.CHECKS and int(qid) in results and model == _model_for(name, judge_model):
            results[int(qid)][name] = bool(passed)
    changed = {}
    for qid, qtype in qtypes.items():
        status = checks.decide(checks.applicable(qtype), results[int(qid)])
        if status != "pending":
            conn.execute(text("UPDATE queries SET status = :s WHERE id = :q AND status = 'pending'"),
                         {"s": status, "q": int(qid)})
            changed[int(qid)] = status
    return changed


class ValidateStage(Stage):
    name = "validate"
    description = "verify-then-filter generated queries: grounding, shortcut, lexical and parametric leakage"
    uses_llm = True

    def backend_name(self, services):
        return services.config.role("judge")

    @staticmethod
    def _filter(conn, scope: Scope) -> tuple[str, dict]:
        if not scope.corpus:
            return "", {}
        return " AND q.corpus_id = :c", {"c": storeio.corpus_ids(conn, scope.corpus)[0][0]}

    def _checks_in(self, conn, ids: list[int]) -> set[tuple[int, str, str]]:
        out = set()
        for i in range(0, len(ids), 1000):
            part = ",".join(str(int(q)) for q in ids[i:i + 1000])
            out |= {(int(r[0]), r[1], r[2]) for r in conn.execute(text(
                f"SELECT query_id, check_name, model FROM query_checks WHERE query_id IN ({part})")).all()}
        return out

    def counts(self, conn, scope):
        cond, params = self._filter(conn, scope)
        judge_model = storeio.model_key(scope.config, "judge")
        names = ",".join(f"'{c}'" for c in checks.CHECKS)
        rows = conn.execute(text(
            f"SELECT q.id, q.qtype FROM queries q WHERE q.origin IN (:g, :h){cond} AND (q.status = 'pending' OR EXISTS "
            f"(SELECT 1 FROM query_checks c WHERE c.query_id = q.id AND c.check_name IN ({names})))"),
            {"g": gen.QUERY_ORIGIN, "h": gen.REVIEWED_ORIGIN, **params}).all()
        have = self._checks_in(conn, [int(r[0]) for r in rows])
        expected = done = 0
        for qid, qtype in rows:
            for name in checks.applicable(qtype):
                expected += 1
                done += (int(qid), name, _model_for(name, judge_model)) in have
        return expected, done

    def pending(self, conn, scope):
        """The checks the current judge has not run: on pending queries and, with another judge
        (``roles.judge``), again on queries an earlier judge validated. Check rows are keyed by
        the judge model, so a second judge makes its own rows and its own Table 6 rows
        (v_generated_query / v_query_validation give each judge's status from its checks);
        ``queries.status`` stays the first decision (re-validation does not change which
        queries the later stages answer). The same queries as :meth:`counts`."""
        cond, params = self._filter(conn, scope)
        judge_model = storeio.model_key(scope.config, "judge")
        names = ",".join(f"'{c}'" for c in checks.CHECKS)
        rows = conn.execute(text(
            "SELECT q.id, q.qtype, q.question, q.answer, q.supporting_chunk_ids, q.meta FROM queries q "
            f"WHERE q.origin IN (:g, :h){cond} AND (q.status = 'pending' OR EXISTS "
            f"(SELECT 1 FROM query_checks c WHERE c.query_id = q.id AND c.check_name IN ({names}))) ORDER BY q.id"),
            {"g": gen.QUERY_ORIGIN, "h": gen.REVIEWED_ORIGIN, **params}).all()
        have = self._checks_in(conn, [int(r[0]) for r in rows])
        units, n_queries = [], 0
        for qid, qtype, question, answer, chunk_ids, meta in rows:
            todo = [c for c in checks.applicable(qtype) if (int(qid), c, _model_for(c, judge_model)) not in have]
            if not todo:
                continue
            if scope.limit and n_queries >= scope.limit:
                break
            n_queries += 1
            meta = json_value(meta) or {}
            payload = {"query_id": int(qid), "qtype": qtype, "question": question, "answer": answer,
                       "chunk_ids": [int(c) for c in (json_value(chunk_ids) or [])],
                       "hop_chunk_ids": [[int(c) for c in g] for g in meta.get("hop_chunk_ids") or []],
                       "judge_model": judge_model}
            for c in todo:
                model = _model_for(c, judge_model)
                units.append(Unit(f"q{qid}:{c}:{model or '-'}", {**payload, "check": c, "model": model}))
        return units

    def _query(self, unit, services) -> checks.CheckQuery:
        p = unit.payload
        texts = _texts(services, p["chunk_ids"] + [c for g in p["hop_chunk_ids"] for c in g])
        return checks.CheckQuery(p["query_id"], p["qtype"], p["question"], p["answer"],
                                 [texts[c] for c in p["chunk_ids"]],
                                 ["\n".join(texts[c] for c in g) for g in p["hop_chunk_ids"]])

    def compute(self, unit, services):
        name = unit.payload["check"]
        ev = evaluator(services) if checks.CHECKS[name][1] else None
        return checks.run_check(name, ev, self._query(unit, services))

    def write(self, conn, unit, result):
        p = unit.payload
        conn.execute(insert(models.QueryCheck).values(
            query_id=p["query_id"], check_name=p["check"], model=p["model"], passed=bool(result.passed),
            evidence=result.evidence,
        ).on_conflict_do_nothing(index_elements=["query_id", "check_name", "model"]))
        settle(conn, [p["query_id"]], p["judge_model"])

    def finish(self, conn, services, scope):
        cond, params = self._filter(conn, scope)
        ids = [int(r[0]) for r in conn.execute(text(
            f"SELECT q.id FROM queries q WHERE q.origin = :g AND q.status = 'pending'{cond}"),
            {"g": gen.QUERY_ORIGIN, **params}).all()]
        settle(conn, ids, storeio.model_key(services.config, "judge"))

    def estimate(self, conn, units, services):
        ev = evaluator(services)
        gw = services.gateway
        est = Estimate(stage=self.name, model=storeio.model_key(services.config, "judge"))
        for unit in units:
            name = unit.payload["check"]
            if not checks.CHECKS[name][1]:
                continue
            q = self._query(unit, services)
            if name == "parametric_leak":
                asks = [(prompts.closed_book_messages(q.question), {})]
            elif name == "grounding":
                asks = [ev.reading(q, q.texts)]
            else:
                asks = [ev.reading(q, [t]) for t in q.hop_texts]
            for msgs, extra in asks:
                est.calls += 2  # the answer, then (unless it is a refusal) the verdict
                if gw.is_cached(ev.role, msgs, **ev.answer_kwargs(""), **extra):
                    est.cached_calls += 1
                else:
                    est.add_tokens(*gw.estimate_tokens(msgs, ev.max_tokens))
                pt, ct = gw.estimate_tokens(prompts.verdict_messages(q.question, q.answer, ""), ev.max_tokens)
                est.add_tokens(pt + ev.max_tokens, ct)  # the answer being judged: at most max_tokens
        return [est]


for _stage in (QueryGenStage(), ValidateStage()):
    register(_stage)
