"""Score-stage throughput (issue 17): BERTScore, soft coverage and faithfulness, runs/s.

A temporary DuckDB store holds the whole medical corpus, ingested and chunked in process (538
chunks, 1,896 questions; no model call), and synthetic but realistic paradigm runs: the five
paradigms (llm_only, naive, graph, hybrid, iterative) of every k-th question (``--queries``).
Contexts are lexical top chunks of the question (NaiveRAG: 15 ≈ the 8,000-token budget;
GraphRAG: 8 of a shifted ranking plus neighbours), answers 1–7 sentences drawn from the gold
answer, the retrieved chunks, the question and hedges (5 % refusals, some empty), run ids in a
shuffled order as the answer stage writes them. Everything is seeded.

Measured, each with the models loaded beforehand and a cold sentence memo:

* **before** — the score stage as it was before issue 17 (units of 32 runs in id order;
  bert-score's ``BERTScorer.score``; coverage and faithfulness each encoding their sentences,
  nothing kept between units), on the first ``--legacy-queries`` questions' runs;
* **after** — the stage as it is, on the same runs (and the values compared: max |Δ|, also
  against ``--alone`` of those runs scored one at a time), then on all runs (``--queries``,
  default all 1,896 questions = 9,480 runs, the paper-scale rehearsal's score stage).

    nice .venv/bin/python benchmarks/bench_score.py --queries 1896 --legacy-queries 32
    nice .venv/bin/python benchmarks/bench_score.py --queries 200 --legacy-queries 0 --profile 25
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import math
import os
import pstats
import random
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PARADIGMS = ("llm_only", "naive", "graph", "hybrid", "iterative")
HEDGES = (
    "Please consult a healthcare provider for advice about your own situation.",
    "The context does not say more about this.",
    "More research may be needed to confirm this.",
    "In summary, early diagnosis and treatment lead to better outcomes.",
    "This depends on the patient's overall health and other factors.",
)
REFUSAL = "I cannot answer this question based on the given context."
_WORD = re.compile(r"[a-z][a-z0-9-]{3,}")


# --------------------------------------------------------------------------- the store


def build_store(tmp: Path):
    """A migrated DuckDB store with the medical corpus ingested and chunked."""
    from ragrouter.config import Config
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate
    from ragrouter.db.engine import write_lock
    from ragrouter.corpus.demo import default_data_dir
    from ragrouter.ingest import loaders
    from ragrouter.ingest import store as ingest_store
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    data = default_data_dir()
    engine = eng.make_engine(f"duckdb:///{tmp / 'score.duckdb'}")
    migrate.upgrade(engine)
    ds = loaders.load("graphrag-bench", [data / "medical.json", data / "medical_questions.json"])
    with write_lock(engine), engine.begin() as conn:
        ingest_store.write_dataset(conn, "medical", "graphrag-bench", ds, [])
    config = Config.load()
    run_stage(registry.all_stages()["chunk"], Services(config, engine), Scope(corpus="medical", config=config),
              progress=False)
    return engine


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def make_runs(engine, n_queries: int, seed: int) -> list[dict]:
    """paradigm_runs rows (without ids) for every k-th accepted question, five paradigms each."""
    from sqlalchemy import text

    from ragrouter.common.sentences import split_sentences

    with engine.connect() as conn:
        chunks = conn.execute(text("SELECT id, text FROM chunks ORDER BY id")).all()
        queries = conn.execute(text("SELECT id, question, answer FROM queries WHERE status = 'accepted' "
                                    "ORDER BY id")).all()
    if n_queries < len(queries):
        step = len(queries) / n_queries
        queries = [queries[int(i * step)] for i in range(n_queries)]
    ids = [int(c[0]) for c in chunks]
    words = [_words(c[1]) for c in chunks]
    df = Counter(w for ws in words for w in ws)
    idf = {w: math.log(len(chunks) / c) for w, c in df.items()}
    sents = {int(c[0]): split_sentences(c[1]) for c in chunks}
    rows = []
    for qid, question, gold in queries:
        rng = random.Random(seed * 1_000_003 + int(qid))
        qw = _words(question) | _words(gold)
        scores = [sum(idf.get(w, 0.0) for w in qw & ws) + 1e-6 * rng.random() for ws in words]
        ranked = [ids[i] for i in sorted(range(len(ids)), key=lambda i: -scores[i])]
        naive = ranked[:15]
        graph = list(dict.fromkeys(c for r in ranked[2:8] for c in (r, r + 1) if c in sents))[:8]
        contexts = {"llm_only": [], "naive": naive, "graph": graph,
                    "hybrid": list(dict.fromkeys(naive[:8] + graph))[:15],
                    "iterative": list(dict.fromkeys(graph + ranked[8:14]))[:15]}
        gold_s = split_sentences(gold)
        for paradigm in PARADIGMS:
            ctx = contexts[paradigm] or ranked[:3]  # an LLM's "parametric" answer still knows the topic
            roll = rng.random()
            if roll < 0.05:
                answer = REFUSAL
            elif roll < 0.06:
                answer = ""
            else:
                parts = []
                if gold_s and rng.random() < 0.6:
                    parts.append(rng.choice(gold_s))
                pool = [s for c in ctx[:5] for s in sents[c]]
                parts += rng.sample(pool, min(len(pool), rng.randint(1, 4)))
                if rng.random() < 0.5:
                    parts.append(rng.choice(HEDGES))
                if rng.random() < 0.3:
                    parts.insert(0, f"Regarding the question \"{question.strip()}\":")
                answer = ("\n- " if rng.random() < 0.2 else " ").join(parts)
            rows.append(dict(query_id=int(qid), paradigm=paradigm, answer=answer,
                             retrieved_chunk_ids=contexts[paradigm]))
    random.Random(seed).shuffle(rows)  # the answer stage writes runs as they finish, not by query
    return rows


def insert_runs(engine, rows: list[dict], first_id: int) -> None:
    import datetime as dt

    from ragrouter.report.synthetic import insert_rows

    t0 = dt.datetime(2026, 1, 1, 12, 0, 0)
    full = [dict(id=first_id + i, generator="bench-gen", config_hash="bench", config={}, context_tokens=0,
                 iterations=0, trace={}, ret_in_tokens=0, ret_out_tokens=0, gen_in_tokens=0, gen_out_tokens=0,
                 latency_s=0.1, created_at=t0, **r) for i, r in enumerate(rows)]
    insert_rows(engine, {"paradigm_runs": full})


# --------------------------------------------------------------------------- the old code path (bench only)


def legacy_pending(self, conn, scope):
    """ScoreStage.pending before issue 17: units of BATCH runs in run-id order."""
    from sqlalchemy import text

    from ragrouter.evaluation.stages import _json_list
    from ragrouter.stages.base import Unit

    where, params = self._sql(conn, scope)
    rows = conn.execute(text(f"SELECT r.id, r.paradigm, r.answer, q.answer, r.retrieved_chunk_ids {where} "
                             "ORDER BY r.id" + (f" LIMIT {int(scope.limit)}" if scope.limit else "")), params).all()
    scorer = self._scorer_name(scope.config)
    return [Unit(f"runs:{part[0][0]}-{part[-1][0]}:{scorer}",
                 {"scorer": scorer, "runs": [{"run_id": int(r[0]), "paradigm": r[1], "answer": r[2], "gold": r[3],
                                              "chunk_ids": _json_list(r[4])} for r in part]})
            for part in (rows[i:i + self.BATCH] for i in range(0, len(rows), self.BATCH))]


def legacy_f1(sem, cands, refs) -> list[float]:
    """SemanticF1.score before issue 17: bert-score's BERTScorer.score on the non-empty pairs."""
    out = [0.0] * len(cands)
    keep = [i for i, (c, r) in enumerate(zip(cands, refs)) if c.strip() and r.strip()]
    if keep:
        scorer = sem.scorer
        with sem._lock:
            _, _, f = scorer.score([cands[i] for i in keep], [refs[i] for i in keep], batch_size=sem.batch_size)
        for j, i in enumerate(keep):
            out[i] = float(f[j])
    return out


def legacy_compute(self, unit, services):
    """ScoreStage.compute before issue 17 (verbatim but for legacy_f1)."""
    from sqlalchemy import text

    from ragrouter.evaluation import metrics
    from ragrouter.evaluation.stages import FAITHFULNESS_PARADIGMS, _score_models

    sem, enc = services.memo("score-models", lambda: _score_models(services.config))
    runs = unit.payload["runs"]
    tau = float(services.config.get("scoring.faithfulness_tau"))
    answers = [r["answer"] for r in runs]
    golds = [r["gold"] for r in runs]
    f1 = legacy_f1(sem, answers, golds)
    cov = metrics.soft_coverage_batch(answers, golds, enc)
    faith_idx = [i for i, r in enumerate(runs) if r["paradigm"] in FAITHFULNESS_PARADIGMS]
    faith: dict[int, tuple[float, float]] = {}
    if faith_idx:
        ids = sorted({c for i in faith_idx for c in runs[i]["chunk_ids"]})
        with services.db_lock, services.engine.connect() as conn:
            texts = dict(conn.execute(text(
                f"SELECT id, text FROM chunks WHERE id IN ({','.join(str(int(c)) for c in ids) or 'NULL'})")).all())
        ctx = [[texts[c] for c in runs[i]["chunk_ids"] if c in texts] for i in faith_idx]
        for i, hs in zip(faith_idx, metrics.faithfulness_batch([answers[i] for i in faith_idx], ctx, enc, tau=tau)):
            faith[i] = hs
    out = []
    for i, r in enumerate(runs):
        hard, soft = faith.get(i, (None, None))
        out.append((r["run_id"], {"semantic_f1": f1[i], "coverage": cov[i], "faith_hard": hard, "faith_soft": soft}))
    return out


@contextlib.contextmanager
def legacy_path():
    from ragrouter.evaluation.stages import ScoreStage

    saved = ScoreStage.pending, ScoreStage.compute
    ScoreStage.pending, ScoreStage.compute = legacy_pending, legacy_compute
    try:
        yield
    finally:
        ScoreStage.pending, ScoreStage.compute = saved


# --------------------------------------------------------------------------- measuring


class CountingEncoder:
    """The process' MiniLM encoder, counting the sentences it encodes."""

    def __init__(self, inner):
        self.inner, self.name, self.model_path, self.dim = inner, inner.name, inner.model_path, inner.dim
        self.sentences = 0
        self.tokens = 0
        self.calls = 0

    def encode(self, texts, batch_size=32):
        self.sentences += len(texts)
        self.tokens += sum(min(n + 2, self.inner.max_seq_length) for n in self.inner.count_tokens(texts))
        self.calls += 1
        return self.inner.encode(texts, batch_size=batch_size)


def score_once(engine, label: str, profile: int = 0) -> dict:
    """Run the score stage over every unscored run of the store with fresh services (models
    loaded before the clock starts); return its figures and the stored values."""
    from sqlalchemy import text

    from ragrouter.config import Config
    from ragrouter.evaluation.stages import ScoreStage, _score_models
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    config = Config.load()
    services = Services(config, engine)
    t0 = time.perf_counter()
    sem, enc = services.memo("score-models", lambda: _score_models(config))
    counting = CountingEncoder(enc)
    services.cache["score-models"] = (sem, counting)
    sem.scorer  # noqa: B018 - load bert-score's model before the clock starts
    counting.inner.encode(["warm up"])
    load_s = time.perf_counter() - t0
    texts0, tokens0 = getattr(sem, "encoded_texts", 0), getattr(sem, "encoded_tokens", 0)
    prof = cProfile.Profile() if profile else None
    load0 = os.getloadavg()[0]
    cpu0 = time.process_time()
    stage = ScoreStage()
    if prof:  # the units run in the runner's worker thread: profile compute there
        inner = stage.compute

        def compute(unit, services_):
            prof.enable()
            try:
                return inner(unit, services_)
            finally:
                prof.disable()

        stage.compute = compute
    t0 = time.perf_counter()
    report = run_stage(stage, services, Scope(corpus="medical", config=config), progress=False)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    if report.failed:
        raise SystemExit(f"{label}: {report.failed} units failed: {report.errors[:3]}")
    with engine.connect() as conn:
        values: dict[int, dict] = {}
        for rid, metric, value in conn.execute(text("SELECT run_id, metric, value FROM answer_scores")).all():
            values.setdefault(int(rid), {})[metric] = value
    runs = len(values)
    out = {"label": label, "runs": runs, "units": report.done, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
           "runs_per_s": round(runs / wall, 3) if wall else None, "model_load_s": round(load_s, 2),
           "sentences_encoded": counting.sentences, "sentence_tokens": counting.tokens,
           "sentence_encoder_calls": counting.calls,
           "load_average": [round(load0, 1), round(os.getloadavg()[0], 1)]}
    if hasattr(sem, "encoded_texts"):
        out["bertscore_texts_encoded"] = sem.encoded_texts - texts0
        out["bertscore_tokens"] = sem.encoded_tokens - tokens0
        out["tokens_per_s"] = round((out["bertscore_tokens"] + counting.tokens) / wall) if wall else None
    if prof:
        buf = io.StringIO()
        st = pstats.Stats(prof, stream=buf)
        st.sort_stats("tottime").print_stats(profile)
        st.sort_stats("cumulative").print_stats(profile)
        out["profile"] = buf.getvalue()
    return out | {"values": values}


def alone_values(engine, n: int) -> dict[int, dict]:
    """The first ``n`` runs scored one at a time: BERTScore = bert-score's ``BERTScorer.score``
    on that pair alone, coverage and faithfulness = the single-run functions (sentence vectors
    shared through a cache, which changes no vector)."""
    from sqlalchemy import text

    from ragrouter.config import Config
    from ragrouter.evaluation import metrics
    from ragrouter.evaluation.stages import FAITHFULNESS_PARADIGMS, _json_list, _score_models

    sem, enc = _score_models(Config.load())
    cache = metrics.SentenceEmbeddingCache(enc)
    with engine.connect() as conn:
        runs = conn.execute(text("SELECT r.id, r.paradigm, r.answer, q.answer, r.retrieved_chunk_ids "
                                 "FROM paradigm_runs r "
                                 f"JOIN queries q ON q.id = r.query_id ORDER BY r.id LIMIT {int(n)}")).all()
        chunks = dict(conn.execute(text("SELECT id, text FROM chunks")).all())
    out = {}
    for rid, paradigm, answer, gold, ids in runs:
        f1 = float(sem.scorer.score([answer], [gold])[2][0]) if answer.strip() and gold.strip() else 0.0
        row = {"semantic_f1": f1, "coverage": metrics.soft_coverage_batch([answer], [gold], enc, cache=cache)[0],
               "faith_hard": None, "faith_soft": None}
        if paradigm in FAITHFULNESS_PARADIGMS:
            ctx = [chunks[c] for c in _json_list(ids) if c in chunks]
            row["faith_hard"], row["faith_soft"] = metrics.faithfulness_batch([answer], [ctx], enc, cache=cache)[0]
        out[int(rid)] = row
    return out


def compare(a: dict, b: dict) -> dict:
    """max |Δ| per metric between two {run: {metric: value}} maps (None must match None)."""
    out: dict = {"runs": len(a), "same_runs": set(a) == set(b)}
    for metric in ("semantic_f1", "coverage", "faith_hard", "faith_soft"):
        diffs, none_mismatch = [], 0
        for rid, va in a.items():
            x, y = va.get(metric), b.get(rid, {}).get(metric)
            if (x is None) != (y is None):
                none_mismatch += 1
            elif x is not None:
                diffs.append(abs(x - y))
        out[metric] = {"max_abs_diff": max(diffs) if diffs else 0.0, "none_mismatch": none_mismatch,
                       "values": len(diffs)}
    return out


def clear_scores(engine) -> None:
    from sqlalchemy import text

    with engine.begin() as conn:
        conn.execute(text("DELETE FROM answer_scores"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=1896, help="questions (every k-th of 1,896), 5 runs each")
    ap.add_argument("--legacy-queries", type=int, default=32,
                    help="questions (the first of the sample) for the before/after comparison; 0 skips it")
    ap.add_argument("--alone", type=int, default=100,
                    help="also score this many of those runs one at a time, and compare (0 skips it)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--threads", type=int, default=None, help="RAGROUTER_TORCH_THREADS (default: as set, else 2)")
    ap.add_argument("--profile", type=int, default=0,
                    help="print the top N functions of the full run's unit computations (cProfile)")
    ap.add_argument("--json", dest="json_out", help="also write the figures to this file")
    args = ap.parse_args()
    if args.threads:
        os.environ["RAGROUTER_TORCH_THREADS"] = str(args.threads)

    result: dict = {"queries": args.queries, "legacy_queries": args.legacy_queries, "seed": args.seed,
                    "torch_threads": os.environ.get("RAGROUTER_TORCH_THREADS", "2"), "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp_s:
        t0 = time.perf_counter()
        engine = build_store(Path(tmp_s))
        rows = make_runs(engine, args.queries, args.seed)
        result["setup_s"] = round(time.perf_counter() - t0, 1)
        result["runs"] = len(rows)
        nlegacy = min(args.legacy_queries, args.queries)
        if nlegacy:
            qids = sorted({r["query_id"] for r in rows})[:nlegacy]
            part = [r for r in rows if r["query_id"] in set(qids)]
            rest = [r for r in rows if r["query_id"] not in set(qids)]
            insert_runs(engine, part, 1)
            with legacy_path():
                before = score_once(engine, "before")
            clear_scores(engine)
            after = score_once(engine, "after")
            alone = alone_values(engine, args.alone) if args.alone else {}
            result["same_runs"] = {"before": {k: v for k, v in before.items() if k != "values"},
                                   "after": {k: v for k, v in after.items() if k != "values"},
                                   "speedup": round(after["runs_per_s"] / before["runs_per_s"], 2),
                                   "after_vs_before": compare(after["values"], before["values"])}
            if alone:
                pick = lambda vals: {r: vals[r] for r in alone}  # noqa: E731
                result["same_runs"]["after_vs_alone"] = compare(alone, pick(after["values"]))
                result["same_runs"]["before_vs_alone"] = compare(alone, pick(before["values"]))
            print(json.dumps(result["same_runs"], indent=2), flush=True)
            clear_scores(engine)
            insert_runs(engine, rest, len(part) + 1)
        else:
            insert_runs(engine, rows, 1)
        full = score_once(engine, "after, all runs", profile=args.profile)
        profile = full.pop("profile", None)
        full.pop("values")
        result["all_runs"] = full
        from ragrouter.db import engine as eng

        engine.dispose()
        eng.dispose_all()
    if profile:
        print(profile)
    text_out = json.dumps(result, indent=2)
    print(text_out)
    if args.json_out:
        Path(args.json_out).write_text(text_out)


if __name__ == "__main__":
    main()
