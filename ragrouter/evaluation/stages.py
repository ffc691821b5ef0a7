"""Evaluation stages: judge (LLM-as-a-judge, k samples) and score (semantic F1, coverage,
faithfulness, exact match and token F1) over paradigm runs of accepted queries (paper §3.4, App. C)."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert

from ragrouter.common.sentences import split_sentences
from ragrouter.db import models
from ragrouter.db.values import json_value
from ragrouter.evaluation import judge as jd, metrics
from ragrouter.evaluation.metrics import QA_SCORER, SemanticF1, SentenceEmbeddingCache
from ragrouter.llm.encoder import get_encoder
from ragrouter.paradigms.prompts import shown_context
from ragrouter.stages import storeio
from ragrouter.stages.base import Estimate, Scope, Stage, Unit, register
from ragrouter.stages.expect import expectations
from ragrouter.stages.registry import all_stages

# Faithfulness is computed for NaiveRAG and GraphRAG only (paper App. C.1): hybrid and
# iterative contexts mix sources and rounds, which biases the direct calculation.
FAITHFULNESS_PARADIGMS = ("naive", "graph")
# GraphRAG's generator sees triples and their source sentences, not whole chunks: its
# faithfulness is measured against that context (the generation request's, from the ledger).
# NaiveRAG's context is its whole chunks, so its chunk texts are the context shown.
SHOWN_CONTEXT_PARADIGMS = ("graph",)


def _run_filter(conn, scope: Scope) -> tuple[str, dict]:
    cond, params = "", {}
    if scope.corpus:
        cid = storeio.corpus_ids(conn, scope.corpus)[0][0]
        cond += " AND q.corpus_id = :cid"
        params["cid"] = cid
    if scope.paradigms:
        cond += " AND r.paradigm IN (" + ",".join(f"'{p}'" for p in scope.paradigms if p.isidentifier()) + ")"
    if scope.query_ids is not None:
        cond += " AND q.id IN (" + (",".join(str(int(i)) for i in scope.query_ids) or "NULL") + ")"
    return cond, params


REFUSAL_REASON = jd.REFUSAL_REASON


class JudgeStage(Stage):
    name = "judge"
    description = ("LLM-as-a-judge: correct / incorrect / incomplete per run (k samples, majority in SQL); refusals "
                   "and questions marked unanswerable by rule, without a call")
    uses_llm = True

    def backend_name(self, services):
        return services.config.role("judge")

    def _judge(self, config) -> str:
        """The judgment key: backend, prompt version and gate (judge.judge_key)."""
        return jd.judge_key(str(config.role("judge")), config)

    def _judge_model(self, config) -> str:
        """The model the judge backend serves (the backend is the judge role, not the judgment
        key: that key adds the prompt version and gate to the backend's name)."""
        return str(config.backend(str(config.role("judge")))["model"])

    def _samples(self, config) -> int:
        return max(1, int(config.get("judge.samples", 1)))

    def _pending_rows(self, conn, scope):
        cond, params = _run_filter(conn, scope)
        k = self._samples(scope.config)
        return conn.execute(text(
            "SELECT r.id, q.question, q.answer, r.answer, COALESCE(q.unanswerable, FALSE) FROM paradigm_runs r "
            f"JOIN queries q ON q.id = r.query_id WHERE q.status = 'accepted'{cond} AND (SELECT COUNT(*) "
            f"FROM judgments j WHERE j.run_id = r.id AND j.judge = :judge AND j.sample_index < {k}) < {k} ORDER BY r.id"
            + (f" LIMIT {int(scope.limit)}" if scope.limit else "")),
            {"judge": self._judge(scope.config), **params}).all()

    def counts(self, conn, scope):
        cond, params = _run_filter(conn, scope)
        k = self._samples(scope.config)
        expected = conn.execute(text("SELECT COUNT(*) FROM paradigm_runs r JOIN queries q ON q.id = r.query_id "
                                     f"WHERE q.status = 'accepted'{cond}"), params).scalar()
        done = conn.execute(text(
            "SELECT COUNT(*) FROM paradigm_runs r JOIN queries q ON q.id = r.query_id "
            f"WHERE q.status = 'accepted'{cond} AND (SELECT COUNT(*) FROM judgments j WHERE j.run_id = r.id "
            f"AND j.judge = :judge AND j.sample_index < {k}) >= {k}"),
            {"judge": self._judge(scope.config), **params}).scalar()
        return int(expected), int(done)

    def pending(self, conn, scope):
        judge = self._judge(scope.config)
        return [Unit(f"run:{r[0]}:{judge}", {"run_id": int(r[0]), "question": r[1], "gold": r[2], "answer": r[3],
                                             "unanswerable": bool(r[4]), "judge": judge,
                                             "k": self._samples(scope.config)})
                for r in self._pending_rows(conn, scope)]

    def _kwargs(self, config, sample: int) -> dict:
        return dict(temperature=float(config.get("judge.temperature")), max_tokens=int(config.get("judge.max_tokens", 300)),
                    json_schema=jd.SCHEMA, stage="judge", phase="judge", sample=sample)

    def compute(self, unit, services):
        p = unit.payload
        rule = jd.rule_verdict(p["answer"], bool(p.get("unanswerable")))
        if rule is not None:  # a refusal, or any answer to a question marked unanswerable: no call
            return [(i, rule.label, rule.reason, None, None, rule.refusal, None) for i in range(p["k"])]
        gate = jd.gate_from_config(services.config)
        out = []
        for i in range(p["k"]):
            res = services.gateway.chat("judge", jd.messages(p["question"], p["gold"], p["answer"]),
                                        **self._kwargs(services.config, i))
            raw, reason = jd.parse_label(res.data)
            gated = jd.gate_outcome(gate, raw, p["question"], p["gold"], p["answer"],
                                    lambda: gate_f1(services, p["answer"], p["gold"]))
            out.append((i, gated.label, reason, res.call_id, raw, False, gated.review))  # review: the rule abstained
        return out

    def write(self, conn, unit, result):
        p = unit.payload
        rows = [{"run_id": p["run_id"], "judge": p["judge"], "sample_index": i, "label": label, "reason": reason,
                 "is_calibration": False, "llm_call_id": call_id, "raw_label": raw, "refusal": refusal,
                 "review": review}
                for i, label, reason, call_id, raw, refusal, review in result]
        conn.execute(insert(models.Judgment).values(rows).on_conflict_do_nothing(
            index_elements=["run_id", "judge", "sample_index"]))

    def estimate(self, conn, units, services):
        gw = services.gateway
        est = Estimate(stage=self.name, model=self._judge_model(services.config))
        for unit in units:
            p = unit.payload
            if jd.rule_verdict(p["answer"], bool(p.get("unanswerable"))) is not None:
                continue
            for i in range(p["k"]):
                est.add_chat(gw, "judge", jd.messages(p["question"], p["gold"], p["answer"]),
                             **self._kwargs(services.config, i))
        return [est]

    def estimate_fresh(self, services, scope):
        """Judging of the runs the answer stage has not made yet: k calls per future run,
        the prompt with the question, the gold answer and an answer of the length the
        generator is expected to write (stages.expect: this store's answers of that model,
        else the prior share of its max_tokens). Refusals, judged without a call, and answers
        another run already had judged (a cache hit) are not known yet: the share of this
        store's judgments that cost a call scales the count, else every run is a call (the bound)."""
        answer = all_stages().get("answer")
        if answer is None:
            return []
        with services.db_lock, services.engine.connect() as conn:
            future = answer.pending(conn, scope)
            golds = dict(conn.execute(text("SELECT id, answer FROM queries WHERE status = 'accepted'")).all())
        if not future:
            return []
        cfg = services.config
        gw = services.gateway
        k = self._samples(cfg)
        exp = expectations(services)
        share, _basis = exp.judge_call_share()  # refusals and repeated answers cost no call
        est = Estimate(stage=self.name, model=self._judge_model(cfg))
        for unit in future:
            p = unit.payload
            cap = int(cfg.get("paradigms.llm_only.max_tokens", cfg.get("generation.max_tokens"))) \
                if p["paradigm"] == "llm_only" else int(cfg.get("generation.max_tokens"))
            cap = exp.reply_tokens("answer", str(cfg.backend(p["generator"])["model"]), cap)
            msgs = jd.messages(p["question"], str(golds.get(p["query_id"], "")), "")
            for i in range(k):
                pt, jcap = gw.estimate_tokens(msgs, self._kwargs(cfg, i)["max_tokens"])
                est.calls += share
                est.add_tokens(pt + cap, jcap, times=share)
        est.calls = round(est.calls)
        return [est]


class ScoreStage(Stage):
    name = "score"
    description = "semantic F1 (BERTScore), soft coverage, faithfulness hard/soft, exact match and token F1 per run"
    BATCH = 32

    def _scorer_name(self, config) -> str:
        return f"bertscore:{config.get('scoring.encoder')}:L{int(config.get('scoring.bertscore_layers'))}"

    def _sql(self, conn, scope):
        """A run is pending until it has its semantic F1 (this scorer) and its token F1 (SQuAD)."""
        cond, params = _run_filter(conn, scope)
        return ("FROM paradigm_runs r JOIN queries q ON q.id = r.query_id WHERE q.status = 'accepted'"
                f"{cond} AND (NOT EXISTS (SELECT 1 FROM answer_scores s WHERE s.run_id = r.id "
                "AND s.metric = 'semantic_f1' AND s.scorer = :scorer) OR NOT EXISTS (SELECT 1 FROM answer_scores s "
                "WHERE s.run_id = r.id AND s.metric = 'token_f1' AND s.scorer = :qa_scorer))",
                {"scorer": self._scorer_name(scope.config), "qa_scorer": QA_SCORER, **params})

    def counts(self, conn, scope):
        cond, params = _run_filter(conn, scope)
        expected = conn.execute(text("SELECT COUNT(*) FROM paradigm_runs r JOIN queries q ON q.id = r.query_id "
                                     f"WHERE q.status = 'accepted'{cond}"), params).scalar()
        where, params = self._sql(conn, scope)
        missing = conn.execute(text(f"SELECT COUNT(*) {where}"), params).scalar()
        return int(expected), int(expected - missing)

    def work_units(self, unit) -> int:
        """A unit is a batch of runs; its time scales with the runs (dry runs, stage_timings)."""
        return len(unit.payload["runs"])

    def pending(self, conn, scope):
        # Runs of one query together (its gold answer and its paradigms' overlapping contexts
        # are then encoded once per unit), in a stable order every worker computes alike.
        where, params = self._sql(conn, scope)
        rows = conn.execute(text(f"SELECT r.id, r.paradigm, r.answer, q.answer, r.retrieved_chunk_ids, "
                                 f"COALESCE(q.unanswerable, FALSE) {where} "
                                 "ORDER BY r.query_id, r.id" + (f" LIMIT {int(scope.limit)}" if scope.limit else "")),
                            params).all()
        scorer = self._scorer_name(scope.config)
        units = []
        for i in range(0, len(rows), self.BATCH):
            part = rows[i:i + self.BATCH]
            units.append(Unit(f"runs:{part[0][0]}-{part[-1][0]}:{scorer}",
                              {"scorer": scorer, "runs": [
                                  {"run_id": int(r[0]), "paradigm": r[1], "answer": r[2], "gold": r[3],
                                   "chunk_ids": _json_list(r[4]), "unanswerable": bool(r[5])} for r in part]}))
        return units

    def prepare(self, services, scope):
        _sentence_cache_items(services.config)  # a bad setting fails before any unit runs
        services.memo("score-models", lambda: _score_models(services.config))

    def _memo(self, services, enc) -> _SentenceMemo:
        return services.memo(("score-sentences", enc.name), lambda: _SentenceMemo(
            SentenceEmbeddingCache(enc, max_items=_sentence_cache_items(services.config))))

    def compute(self, unit, services):
        """One batch of runs: BERTScore of every (answer, gold) pair with each distinct text
        through the model once; coverage and faithfulness from one sentence-encoder call over
        the batch's distinct sentences, context sentences memoised for the whole stage (a chunk
        retrieved by many runs is split and encoded once per process)."""
        sem, enc = services.memo("score-models", lambda: _score_models(services.config))
        memo = self._memo(services, enc)
        runs = unit.payload["runs"]
        tau = float(services.config.get("scoring.faithfulness_tau"))
        answers = [r["answer"] for r in runs]
        golds = [r["gold"] for r in runs]
        f1 = sem.score(answers, golds)
        faith_idx = [i for i, r in enumerate(runs) if r["paradigm"] in FAITHFULNESS_PARADIGMS]
        shown = _shown_contexts(services, [runs[i]["run_id"] for i in faith_idx
                                           if runs[i]["paradigm"] in SHOWN_CONTEXT_PARADIGMS and runs[i]["chunk_ids"]])
        texts = memo.chunk_texts(services, {c for i in faith_idx if runs[i]["run_id"] not in shown
                                            for c in runs[i]["chunk_ids"]})
        contexts = [None] * len(runs)
        for i in faith_idx:
            rid = runs[i]["run_id"]
            contexts[i] = [shown[rid]] if rid in shown else [texts[c] for c in runs[i]["chunk_ids"] if c in texts]
        cov, faith = metrics.coverage_faithfulness_batch(answers, golds, contexts, enc, tau=tau, cache=memo.vectors,
                                                         split=memo.split)
        out = []
        for i, r in enumerate(runs):
            hard, soft = faith[i] if faith[i] is not None else (None, None)
            qa = metrics.qa_scores(r["answer"], r["gold"], unanswerable=bool(r.get("unanswerable")))
            out.append((r["run_id"], {"semantic_f1": f1[i], "coverage": cov[i],
                                      "faith_hard": hard, "faith_soft": soft}, qa))
        return out

    def write(self, conn, unit, result):
        scorer = unit.payload["scorer"]
        rows = [{"run_id": rid, "metric": m, "scorer": scorer, "value": (None if v is None else float(v))}
                for rid, scores, _ in result for m, v in scores.items()]
        rows += [{"run_id": rid, "metric": m, "scorer": QA_SCORER, "value": float(v)}
                 for rid, _, qa in result for m, v in qa.items()]
        stmt = insert(models.AnswerScore).values(rows)
        conn.execute(stmt.on_conflict_do_update(index_elements=["run_id", "metric", "scorer"],
                                                set_={"value": stmt.excluded.value}))


def _shown_contexts(services, run_ids) -> dict[int, str]:
    """run id → the context its (last) generation request showed the model, for the runs whose
    request is in the ledger (run_calls, phase 'generation')."""
    if not run_ids:
        return {}
    with services.db_lock, services.engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT rc.run_id, lc.messages FROM run_calls rc JOIN llm_calls lc ON lc.id = rc.llm_call_id "
            f"WHERE rc.phase = 'generation' AND rc.run_id IN ({','.join(str(int(r)) for r in run_ids)}) "
            "ORDER BY rc.run_id, rc.seq")).all()
    out: dict[int, str] = {}
    for rid, messages in rows:
        ctx = shown_context(json_value(messages))
        if ctx is not None:
            out[int(rid)] = ctx
    return out


def gate_f1(services, answer: str, gold: str) -> float:
    """Semantic F1 of one answer against its gold, for the evidence gate (the score stage's
    scorer, loaded once per process and only when a verdict needs it)."""
    sem, _ = services.memo("score-models", lambda: _score_models(services.config))
    return float(sem.score([answer], [gold])[0])


class _SentenceMemo:
    """The score stage's per-process memo of contexts: chunk id → text, chunk text → its
    sentences (least recently used dropped beyond ``max_chunks``), and the vectors of context
    sentences (:class:`~ragrouter.evaluation.metrics.SentenceEmbeddingCache`)."""

    def __init__(self, vectors, max_chunks: int = 50_000):
        import threading
        from collections import OrderedDict

        self.vectors = vectors
        self.max_chunks = max_chunks
        self._texts: OrderedDict[int, str] = OrderedDict()
        self._sentences: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def chunk_texts(self, services, ids) -> dict[int, str]:
        """Texts of the chunks ``ids`` (those the store has), fetched once per process."""
        ids = {int(c) for c in ids}
        with self._lock:
            missing = sorted(c for c in ids if c not in self._texts)
        if missing:
            with services.db_lock, services.engine.connect() as conn:
                rows = conn.execute(text(
                    f"SELECT id, text FROM chunks WHERE id IN ({','.join(str(c) for c in missing)})")).all()
            fresh = {int(cid): (t, tuple(split_sentences(t))) for cid, t in rows}
            with self._lock:
                for cid, (t, sents) in fresh.items():
                    self._texts[cid] = t
                    self._sentences[t] = sents
        with self._lock:
            out = {}
            for c in ids:
                if c in self._texts:
                    self._texts.move_to_end(c)
                    out[c] = self._texts[c]
            while len(self._texts) > self.max_chunks:  # split() falls back to splitting again
                _, old = self._texts.popitem(last=False)
                self._sentences.pop(old, None)
            return out

    def split(self, text_: str):
        """split_sentences, answered from the memo for chunk texts."""
        sents = self._sentences.get(text_)
        return sents if sents is not None else split_sentences(text_)


def _sentence_cache_items(config) -> int:
    raw = config.get("scoring.sentence_cache")
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = 0
    if isinstance(raw, bool) or value < 1:
        where = config.where("scoring.sentence_cache") if hasattr(config, "where") else "config"
        raise ValueError(f"{where}: setting 'scoring.sentence_cache' must be an integer >= 1 (got {raw!r})")
    return value


def _json_list(value) -> list[int]:
    return [int(v) for v in json_value(value, [])]


def _score_models(config):
    enc = get_encoder(str(config.get("scoring.encoder")))
    return SemanticF1(model_path=enc.model_path, num_layers=int(config.get("scoring.bertscore_layers"))), enc


for _stage in (JudgeStage(), ScoreStage()):
    register(_stage)
