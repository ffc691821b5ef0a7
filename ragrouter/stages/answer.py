"""The answer stage: accepted queries × paradigms × generator backbones → paradigm_runs.

The unit key is (query, paradigm, generator, config hash); the hash covers the paradigm's
hyperparameters, its prompt versions and the generator's model, so a changed setting makes
new runs beside the old ones. Units of one query share one :class:`QueryContext` (query
embedding, dense top-k, graph retrieval done once), kept in memory for the whole stage.

Scheduling: pending units are ordered **longest expected first** (IterativeRAG's up to
2 + 3·max_rounds sequential calls, then GraphRAG/HybridRAG's two, then one-call paradigms),
queries in store order inside each class, and scheduled **at the level of calls**: the
runner keeps ``worker.threads_per_slot`` units in flight per backend slot, and each request
waits for a slot with the priority of its unit's expected calls left (:meth:`unit_weight`,
``ragrouter/llm/slots.py``). A slot frees between the calls of an iterative unit, the long
units all progress, the short ones fill the gaps, and the endpoint's slots stay full until
the end (``benchmarks/README.md``, issue 17).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert

from ragrouter.db import models
from ragrouter.paradigms import paradigms, prompts
from ragrouter.paradigms.index import CorpusIndex
from ragrouter.paradigms.paradigms import PARADIGMS, get as get_paradigm
from ragrouter.paradigms.query_context import QueryContext
from ragrouter.paradigms.settings import Settings
from ragrouter.stages import storeio
from ragrouter.stages.base import Estimate, Scope, ScopeError, Stage, Unit, register
from ragrouter.stages.expect import expectations


def run_hash(paradigm: str, generator: str, config) -> str:
    model = str(config.backend(generator)["model"])
    base = get_paradigm(paradigm).config_hash(config)
    return hashlib.sha256(f"{base}|{model}".encode()).hexdigest()[:16]


def load_index(conn, corpus_id: int, name: str, config):
    """The retrieval state of one corpus, read from the store."""
    emb = storeio.model_key(config, "embedder")
    rows = conn.execute(text("SELECT id, text, n_tokens FROM chunks WHERE corpus_id = :c ORDER BY id"),
                        {"c": corpus_id}).all()
    vec_ids, vecs = storeio.load_vectors(conn, "chunk", None, emb, corpus_id)
    have = set(vec_ids)
    missing = [r[0] for r in rows if r[0] not in have]
    if missing:
        raise ScopeError(f"corpus '{name}': {len(missing)} chunks have no '{emb}' vector — run the embed stage first")
    ext = storeio.extractor_key(config)
    # entities by name and triples by (chunk, insertion order within the chunk): the graph's
    # positions, which break retrieval ties, do not depend on the order in which workers wrote
    # the extractions (ids differ between one DuckDB worker and four PostgreSQL ones)
    # (sorted here, by code point: the stores' collations differ)
    ents = sorted(conn.execute(text("SELECT id, name FROM entities WHERE corpus_id = :c AND extractor = :x"),
                               {"c": corpus_id, "x": ext}).all(), key=lambda r: (r[1], r[0]))
    ent_vec_ids, ent_vecs = storeio.load_vectors(conn, "entity", None, emb, corpus_id)
    ent_have = dict(zip(ent_vec_ids, range(len(ent_vec_ids))))
    ents = [e for e in ents if e[0] in ent_have]
    ent_matrix = ent_vecs[[ent_have[e[0]] for e in ents]] if ents else None
    triples = conn.execute(text("SELECT subject_id, relation, object_id, chunk_id FROM triples "
                                "WHERE corpus_id = :c AND extractor = :x ORDER BY chunk_id, id"),
                           {"c": corpus_id, "x": ext}).all()
    kept = {e[0] for e in ents}
    triples = [(int(s), r, int(o), int(c)) for s, r, o, c in triples if s in kept and o in kept]
    return CorpusIndex([r[0] for r in rows], [r[1] for r in rows], [int(r[2]) for r in rows], vecs,
                       [e[0] for e in ents], [e[1] for e in ents], ent_matrix, triples, name=name)


def expected_calls(paradigm: str, config) -> int:
    """Upper bound of a paradigm's sequential LLM calls per run (for scheduling and estimates)."""
    if paradigm.startswith("iterative"):
        return 2 + 3 * int(config.get("paradigms.iterative.max_rounds", 3))
    if paradigm in ("graph", "hybrid"):
        return 2
    return 1


def longest_first(units: list[Unit], config) -> list[Unit]:
    """Units by expected calls, most first, then by key: one canonical order that every worker
    computes alike for any scope (PostgreSQL leases are claimed in it)."""
    weight = {p: expected_calls(p, config) for p in {u.payload["paradigm"] for u in units}}
    return sorted(units, key=lambda u: (-weight[u.payload["paradigm"]], u.key))


class AnswerStage(Stage):
    name = "answer"
    description = "run every enabled paradigm for every accepted query and generator backbone"
    uses_llm = True
    ordered_units = True  # pending() returns the canonical longest-first order (leases keep it)
    CONTEXTS = 4096  # query contexts kept in memory (a query's units are spread over the stage)

    def __init__(self) -> None:
        self._ctx_lock = threading.Lock()
        self._contexts: OrderedDict = OrderedDict()

    def backend_name(self, services):
        return services.config.generators()[0]

    def _combos(self, scope: Scope) -> list[tuple[str, str, str]]:
        cfg = scope.config
        paradigms = list(scope.paradigms) or list(cfg.get("paradigms.enabled"))
        unknown = [p for p in paradigms if p not in PARADIGMS]
        if unknown:
            raise ScopeError(f"unknown paradigm(s) {', '.join(unknown)} (known: {', '.join(PARADIGMS)})")
        gens = list(scope.models) or cfg.generators()
        for g in gens:
            cfg.backend(g)
        self._configs = {(p, g): {**get_paradigm(p).config(cfg), "generator_model": str(cfg.backend(g)["model"])}
                         for g in gens for p in paradigms}
        self._weights = {p: expected_calls(p, cfg) for p in paradigms}
        return [(p, g, run_hash(p, g, cfg)) for g in gens for p in paradigms]

    def _queries(self, conn, scope):
        cond, params = "", {}
        if scope.corpus:
            cond, params = " AND q.corpus_id = :c", {"c": storeio.corpus_ids(conn, scope.corpus)[0][0]}
        if scope.query_ids is not None:
            cond += " AND q.id IN (" + (",".join(str(int(i)) for i in scope.query_ids) or "NULL") + ")"
        return conn.execute(text(f"SELECT q.id, q.corpus_id, q.question FROM queries q WHERE q.status = 'accepted'"
                                 f"{cond} ORDER BY q.corpus_id, q.id"), params).all()

    def _done(self, conn) -> set[tuple]:
        return set(conn.execute(text("SELECT query_id, paradigm, generator, config_hash FROM paradigm_runs")).all())

    def counts(self, conn, scope):
        combos = self._combos(scope)
        queries = self._queries(conn, scope)
        done = self._done(conn)
        n_done = sum((q[0], p, g, h) in done for q in queries for p, g, h in combos)
        return len(queries) * len(combos), n_done

    def pending(self, conn, scope):
        combos = self._combos(scope)
        done = self._done(conn)
        units, queries_seen = [], set()
        for qid, cid, question in self._queries(conn, scope):
            for p, g, h in combos:
                if (qid, p, g, h) in done:
                    continue
                if scope.limit and qid not in queries_seen and len(queries_seen) >= scope.limit:
                    break
                queries_seen.add(qid)
                units.append(Unit(f"q{qid}:{p}:{g}:{h}", {"query_id": int(qid), "corpus_id": int(cid),
                                                          "question": question, "paradigm": p,
                                                          "generator": g, "config_hash": h,
                                                          "config": self._configs.get((p, g))}))
        return longest_first(units, scope.config)

    def unit_weight(self, unit) -> int:
        """Expected sequential calls of a unit: its requests' priority for a backend slot
        (call-level scheduling, ``ragrouter/llm/slots.py``)."""
        return self._weights.get(unit.payload["paradigm"], 1)

    def prepare(self, services, scope):
        with services.db_lock, services.engine.connect() as conn:
            for cid, name in storeio.corpus_ids(conn, scope.corpus):
                services.memo(("index", cid), lambda cid=cid, name=name: load_index(conn, cid, name, services.config))

    def _context(self, unit, services):
        p = unit.payload
        index = services.memo(("index", p["corpus_id"]), lambda: None)
        with self._ctx_lock:
            ctx = self._contexts.get(p["query_id"])
            if ctx is None or ctx.index is not index:
                ctx = QueryContext(p["question"], index, services.gateway, services.config)
                self._contexts[p["query_id"]] = ctx
                while len(self._contexts) > self.CONTEXTS:
                    self._contexts.popitem(last=False)
            self._contexts.move_to_end(p["query_id"])
        return ctx, index

    def compute(self, unit, services):
        ctx, index = self._context(unit, services)
        p = unit.payload
        result = paradigms.run(p["paradigm"], p["question"], ctx, index, services.gateway, p["generator"],
                               services.config)
        # the graph (extraction variant) the run could read: v_run_latest charges its construction
        result.trace.setdefault("extractor", storeio.extractor_key(services.config))
        return result

    def write(self, conn, unit, result):
        p = unit.payload
        run_id = conn.execute(insert(models.ParadigmRun).values(
            query_id=p["query_id"], paradigm=p["paradigm"], generator=p["generator"], config_hash=p["config_hash"],
            config=p["config"],
            answer=result.answer, retrieved_chunk_ids=result.retrieved_chunk_ids,
            context_tokens=result.context_tokens, iterations=result.iterations, trace=result.trace,
            ret_in_tokens=result.ret_in, ret_out_tokens=result.ret_out, gen_in_tokens=result.gen_in,
            gen_out_tokens=result.gen_out, latency_s=float(result.trace.get("wall_s", 0.0)),
        ).on_conflict_do_nothing(index_elements=["query_id", "paradigm", "generator", "config_hash"])
            .returning(models.ParadigmRun.id)).scalar_one_or_none()
        if run_id is not None and result.calls:
            conn.execute(insert(models.RunCall).values(
                [{"run_id": run_id, "seq": i, "llm_call_id": call_id, "phase": phase}
                 for i, (call_id, phase) in enumerate(result.calls)]))

    def estimate(self, conn, units, services):
        """Calls and tokens of the pending units, per generator.

        Calls the paradigms of one query share are counted once (the query's entity
        extraction: graph, hybrid and iterative over graph; see QueryContext), and calls
        whose request is known before retrieval (the direct answers of llm_only and of
        iterative round 0, the entity extraction) are looked up in the cache and counted once
        when two paradigms make the same one (llm_only's and round 0's direct answer). A generation
        prompt counts its template, the question and the context it is expected to carry
        (:meth:`Expectations.context_tokens`: this store's runs of the paradigm, else whole
        chunks packed into the budget, else the budget or the corpus when smaller); a prompt
        that carries an answer (self-evaluation) counts the expected answer, not its cap.
        IterativeRAG's rounds are this store's mean, else ``dry_run.iterative_rounds``, else
        the maximum. Completion tokens are the max_tokens caps here; the dry run turns them into
        expectations (``stages.runner.dry_run``)."""
        s = Settings.from_config(services.config)
        gw = services.gateway
        exp = expectations(services)
        window = int(services.config.get("chunking.window"))
        with services.db_lock, services.engine.connect() as c:
            corpus_tokens = {int(r[0]): int(r[1] or 0) for r in c.execute(text(
                "SELECT corpus_id, SUM(n_tokens) FROM documents GROUP BY corpus_id")).all()}
        gen_kw = dict(temperature=s.gen_temperature, max_tokens=s.gen_max_tokens)
        ent_kw = dict(temperature=s.extract_temperature, max_tokens=s.extract_max_tokens,
                      json_schema=prompts.ENTITIES_SCHEMA)
        per: dict[str, Estimate] = {}
        by_query: dict[tuple[int, str], list] = {}
        for unit in units:
            by_query.setdefault((unit.payload["query_id"], unit.payload["generator"]), []).append(unit)

        seen: set[str] = set()  # known requests counted once: a repeat is a cache hit when it is sent

        def add(est, messages, max_tokens, extra_prompt=0, known=False, role=None, **kw):
            est.calls += 1
            if known:
                key = gw.request_key(role, messages, max_tokens=max_tokens, **kw)
                if key in seen or gw.is_cached(role, messages, max_tokens=max_tokens, **kw):
                    est.cached_calls += 1
                    return
                seen.add(key)
            pt, cap = gw.estimate_tokens(messages, max_tokens)
            est.add_tokens(pt + extra_prompt, cap)

        for (qid, g), group in by_query.items():
            model = str(services.config.backend(g)["model"])
            est = per.setdefault(g, Estimate(stage=self.name, model=model))
            answer_tokens = exp.reply_tokens(self.name, model, s.gen_max_tokens)
            q = group[0].payload["question"]
            cid = group[0].payload["corpus_id"]

            def ctx_tokens(paradigm, _cid=cid):
                return exp.context_tokens(paradigm, g, _cid, s.token_budget, corpus_tokens.get(_cid, 0),
                                          s.top_k, window)

            names = [u.payload["paradigm"] for u in group]
            base = s.iter_base_retriever
            needs_entities = any(p in ("graph", "hybrid") or (p == "iterative" and base == "graph")
                                 or (p.startswith("iterative") and p != "iterative_naive" and base == "graph")
                                 for p in names)
            if needs_entities:  # shared by the query's paradigms: one call
                add(est, prompts.ENTITIES.messages(question=q), known=True, role=g, **ent_kw)
            gen_msgs = prompts.GENERATION.messages(context="", question=q)
            for p in names:
                if p == "llm_only":
                    add(est, prompts.DIRECT.messages(question=q), s.llm_only_max_tokens, known=True, role=g,
                        temperature=s.llm_only_temperature)
                elif p in ("naive", "graph", "hybrid"):
                    add(est, gen_msgs, s.gen_max_tokens, extra_prompt=ctx_tokens(p))
                elif p.startswith("iterative"):
                    add(est, prompts.DIRECT.messages(question=q), known=True, role=g, **gen_kw)
                    add(est, prompts.self_eval_messages(q, "", None), s.gen_max_tokens, extra_prompt=answer_tokens)
                    rounds, _basis = exp.rounds(g, s.iter_max_rounds)
                    round_base = base if p == "iterative" else "naive"
                    ctx = ctx_tokens(round_base)  # a round retrieves as its base retriever does
                    round_calls = [(prompts.ENTITIES.messages(question=q), s.extract_max_tokens, 0)] \
                        if round_base == "graph" else []
                    round_calls += [(gen_msgs, s.gen_max_tokens, ctx),
                                    (prompts.self_eval_messages(q, "", "x"), s.gen_max_tokens, ctx + answer_tokens)]
                    est.calls += round(rounds * len(round_calls))
                    for msgs, cap, extra in round_calls:
                        pt, cap = gw.estimate_tokens(msgs, cap)
                        est.add_tokens(pt + extra, cap, times=rounds)
        return list(per.values())


register(AnswerStage())
