"""Random but internally consistent store rows, for testing the views, the report and the export.

:func:`random_rows` builds, from one seed, every table the views read — corpora, documents,
chunks, extraction ledger calls, corpus metrics, imported and generated queries with their
checks, paradigm runs (with superseded configs), multi-sample judgments from several judges,
answer scores from several scorers and router predictions — as ``{table: [row dict, …]}`` with
explicit ids. :func:`insert_rows` writes them into a migrated (empty) store in foreign-key
order. The knobs make the hard cases likely: ``p_correct`` = 0 gives all-wrong queries, and
semantic F1 is drawn from a few values so ties are common.

Rows carry explicit ids, so insert them into an empty store only (the id sequences are not
advanced).
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Sequence

from sqlalchemy import JSON, Connection, Engine

from ragrouter.db import models

CORPUS_NAMES = ("musique", "quality", "legal", "medical")
PARADIGMS = ("llm_only", "naive", "graph", "hybrid", "iterative", "iterative_naive")
QTYPES = ("factual", "reasoning", "summary")
LABELS = ("correct", "incorrect", "incomplete")
CHECKS = ("grounding", "shortcut", "lexical_leak", "parametric_leak")
STRUCTURAL = ("nodes", "edges", "density", "relation_types", "avg_degree", "components", "lcc_ratio", "clustering")
SEMANTIC = ("intrinsic_dim", "hubness", "dist_mean", "dist_std", "dist_min", "dist_max")
METRICS = STRUCTURAL + SEMANTIC

# Insert order: parents before children (PostgreSQL has the foreign keys).
TABLE_ORDER = (
    "corpora", "documents", "chunks", "worker_runs", "llm_calls", "chunk_extractions",
    "corpus_metrics", "queries", "query_checks", "paradigm_runs", "run_calls", "judgments",
    "answer_scores", "router_predictions", "human_labels",
)

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)


def _metric_value(rng: random.Random, metric: str) -> float:
    ranges = {
        "nodes": (100, 5000), "edges": (100, 9000), "density": (1e-5, 1e-3),
        "relation_types": (10, 900), "avg_degree": (1.5, 4.0), "components": (5, 500),
        "lcc_ratio": (0.5, 0.95), "clustering": (0.01, 0.08), "intrinsic_dim": (6.0, 12.0),
        "hubness": (0.5, 1.6), "dist_mean": (0.25, 0.75), "dist_std": (0.03, 0.12),
        "dist_min": (0.1, 0.25), "dist_max": (0.7, 0.95),
    }
    lo, hi = ranges[metric]
    value = rng.uniform(lo, hi)
    return float(round(value)) if metric in ("nodes", "edges", "relation_types", "components") else value


def random_rows(
    seed: int = 0,
    *,
    n_corpora: int = 2,
    queries_per_corpus: int = 6,
    paradigms: Sequence[str] = PARADIGMS,
    generators: Sequence[str] = ("gen-a", "gen-b"),
    judges: Sequence[str] = ("judge-x", "judge-y"),
    p_correct: float = 0.4,
    f1_values: Sequence[float] = (0.2, 0.5, 0.8),
    p_missing_run: float = 0.1,
    p_old_config: float = 0.3,
    max_samples: int = 3,
    with_router: bool = True,
    token_values: Sequence[int] | None = None,
) -> dict[str, list[dict]]:
    """Rows for every table the views read, generated from ``seed`` (see the module docstring).

    ``token_values``: draw each run's generation-input tokens from these few values (retrieval and
    output tokens 0), so runs tie on tokens and the oracle's last tie-break (paradigm order) is
    exercised."""
    rng = random.Random(seed)
    rows: dict[str, list[dict]] = {name: [] for name in TABLE_ORDER}
    ids = {name: 0 for name in TABLE_ORDER}

    def add(table: str, **values) -> dict:
        ids[table] += 1
        values.setdefault("id", ids[table])
        rows[table].append(values)
        return values

    def ts(minutes: float) -> dt.datetime:
        return T0 + dt.timedelta(minutes=minutes)

    worker = add("worker_runs", host="test-host", pid=4242, command="cli.py run", started_at=T0)

    def call(stage: str, phase: str | None, model: str, pt: int, ct: int) -> dict:
        n = ids["llm_calls"] + 1
        return add("llm_calls", request_hash=f"{seed % 2**32:08x}{n:056x}", kind="chat", backend=model, model=model,
                   stage=stage, phase=phase, prompt_tokens=pt, completion_tokens=ct, token_source="tiktoken",
                   latency_s=0.5, attempts=1, worker_run_id=worker["id"], created_at=ts(n))

    names = list(CORPUS_NAMES[:n_corpora]) + [f"corpus{i}" for i in range(len(CORPUS_NAMES), n_corpora)]
    for name in names:
        corpus = add("corpora", name=name, source_format="synthetic", created_at=T0)
        for d in range(rng.randint(1, 3)):
            doc = add("documents", corpus_id=corpus["id"], external_id=f"{name}-doc{d}", title=f"Doc {d}",
                      text="lorem ipsum " * 20, n_tokens=rng.randint(50, 5000), created_at=T0)
            shared_call = None
            for k in range(rng.randint(1, 3)):
                chunk = add("chunks", document_id=doc["id"], corpus_id=corpus["id"], chunker="cl100k:512:100",
                            chunk_index=k, text=f"chunk {k}", n_tokens=rng.randint(20, 512), token_start=0,
                            token_end=10, char_start=0, char_end=10, created_at=T0)
                # Identical chunk texts hit the cache: two extractions may share one ledger row.
                if shared_call is not None and rng.random() < 0.3:
                    ledger = shared_call
                else:
                    ledger = call("extract", None, "extractor", rng.randint(300, 700), rng.randint(20, 200))
                    shared_call = ledger
                add("chunk_extractions", chunk_id=chunk["id"], extractor="extractor:v1",
                    n_triples=rng.randint(0, 9), llm_call_id=ledger["id"], created_at=T0)
        for v, variant in enumerate(("embedder-a", "embedder-b")[: rng.randint(1, 2)]):
            for metric in METRICS:
                if rng.random() < 0.05:
                    continue  # a metric not measured yet
                add("corpus_metrics", corpus_id=corpus["id"], metric=metric, variant=variant,
                    value=_metric_value(rng, metric), created_at=ts(v + rng.random()))

        for qi in range(queries_per_corpus):
            qtype = rng.choice(QTYPES)
            origin = rng.choice(("imported", "generated"))
            status = "accepted" if origin == "imported" else rng.choice(("accepted", "accepted", "rejected", "pending"))
            query = add("queries", corpus_id=corpus["id"], external_id=f"{name}-q{qi}", origin=origin,
                        qtype=qtype, hops=rng.choice((2, 3, None)) if qtype == "reasoning" else None,
                        question=f"What about {name} item {qi}?", answer=f"Answer {qi}.", status=status,
                        created_at=T0)
            if origin == "generated" and status != "pending":
                failing = set(rng.sample(CHECKS, rng.randint(1, 2))) if status == "rejected" else set()
                for check in CHECKS:
                    add("query_checks", query_id=query["id"], check_name=check, model="judge-x",
                        passed=check not in failing, created_at=T0)
            for generator in generators:
                for paradigm in paradigms:
                    if rng.random() < p_missing_run:
                        continue
                    n_configs = 2 if rng.random() < p_old_config else 1
                    start = rng.uniform(0, 1000)
                    for c in range(n_configs):
                        # The newer config is written later, or in the same instant (id breaks the tie).
                        created = ts(start + (0 if rng.random() < 0.3 else c * 10))
                        ctx = 0 if paradigm == "llm_only" else rng.randint(100, 8000)
                        run = add("paradigm_runs", query_id=query["id"], paradigm=paradigm, generator=generator,
                                  config_hash=f"cfg{c}", config={"paradigm": paradigm, "v": c,
                                          **({"base_retriever": "naive" if paradigm == "iterative_naive" else "graph"}
                                             if paradigm.startswith("iterative") else {})},
                                  answer=f"{paradigm} says {qi}", retrieved_chunk_ids=[1, 2][: rng.randint(0, 2)],
                                  context_tokens=ctx, iterations=rng.randint(0, 3) if "iterative" in paradigm else 0,
                                  trace={"steps": [rng.random()]},
                                  ret_in_tokens=0 if paradigm in ("llm_only", "naive") or token_values
                                  else rng.randint(50, 3000),
                                  ret_out_tokens=0 if paradigm in ("llm_only", "naive") or token_values
                                  else rng.randint(5, 300),
                                  gen_in_tokens=rng.choice(list(token_values)) if token_values
                                  else ctx + rng.randint(50, 200),
                                  gen_out_tokens=0 if token_values else rng.randint(5, 300),
                                  latency_s=rng.uniform(0.1, 5.0), created_at=created)
                        gen_call = call("answer", "generation", generator, run["gen_in_tokens"], run["gen_out_tokens"])
                        add("run_calls", run_id=run["id"], seq=0, llm_call_id=gen_call["id"], phase="generation")
                        for judge in judges:
                            if rng.random() < 0.1:
                                continue  # not judged by this judge yet
                            for s in range(rng.randint(1, max_samples)):
                                label = "correct" if rng.random() < p_correct else rng.choice(LABELS[1:])
                                add("judgments", run_id=run["id"], judge=judge, sample_index=s, label=label,
                                    reason="synthetic", is_calibration=False, created_at=created)
                            if rng.random() < 0.1:  # calibration verdicts never count
                                add("judgments", run_id=run["id"], judge=judge, sample_index=99, label="correct",
                                    reason="calibration", is_calibration=True, created_at=created)
                        scorers = ("enc-a", "enc-b")[: rng.choice((1, 1, 2))]
                        for scorer in scorers:
                            for metric in ("semantic_f1", "coverage", "faith_hard", "faith_soft"):
                                if metric == "semantic_f1":
                                    if rng.random() < 0.1:
                                        continue  # not scored yet
                                    value = rng.choice(list(f1_values))
                                elif metric.startswith("faith") and paradigm == "llm_only":
                                    value = None  # not applicable without retrieval
                                else:
                                    value = round(rng.random(), 3)
                                add("answer_scores", run_id=run["id"], metric=metric, scorer=scorer,
                                    value=value, created_at=created)
                        side = random.Random(f"{seed}:qa:{run['id']}")  # own stream: the draws above stay as they were
                        if side.random() < 0.9:
                            em = float(side.random() < 0.3)
                            for metric, value in (("exact_match", em), ("token_f1", 1.0 if em else round(side.random(), 3))):
                                add("answer_scores", run_id=run["id"], metric=metric, scorer="squad-v1.1",
                                    value=value, created_at=created)

    # a reviewer's labels on about a sixth of the judged runs (review pull; own stream, so the
    # draws above stay as they were); the judge label is the run's first sample's
    review = random.Random(f"{seed}:review")
    first = {}
    for j in rows["judgments"]:
        if not j["is_calibration"] and j["judge"] == judges[0]:
            first.setdefault(j["run_id"], j["label"])
    for run in rows["paradigm_runs"]:
        if run["id"] in first and review.random() < 0.17:
            add("human_labels", kind="run", run_id=run["id"], query_id=run["query_id"], trace_id=f"tr-{run['id']:08x}",
                assessment_id=f"a-{run['id']:08x}", experiment="review-synthetic", reviewer="ann",
                label=first[run["id"]] if review.random() < 0.7 else review.choice(LABELS), comment="synthetic",
                judge=judges[0], judge_label=first[run["id"]], labelled_at=T0, created_at=T0)

    if with_router:
        accepted = [q for q in rows["queries"] if q["status"] == "accepted"]
        classes = list(paradigms) + ["cannot_answer"]
        for router in ("lr", "mlp"):
            for generator in generators[:1]:
                for q in accepted:
                    add("router_predictions", router=router, features="qc", encoder="onehot", generator=generator,
                        dataset="store", fold=q["id"] % 5, query_key=str(q["id"]), query_id=q["id"],
                        predicted=rng.choice(classes), true_label=rng.choice(classes), created_at=T0)
        for k in range(5):  # an imported dataset: no outcomes in the store
            add("router_predictions", router="lr", features="q", encoder="onehot", generator=generators[0],
                dataset="imported-demo", fold=k % 5, query_key=f"ext-{k}", query_id=None,
                predicted=rng.choice(classes), true_label=rng.choice(classes), created_at=T0)
    return rows


def insert_rows(target: Engine | Connection, rows: dict[str, list[dict]], batch: int = 400) -> None:
    """Insert ``rows`` (from :func:`random_rows`) in foreign-key order.

    ``target`` is an engine (one committed transaction) or a connection (the caller's
    transaction: tests insert, query and roll back, which is much faster on DuckDB). On DuckDB
    the rows go through a registered DataFrame; elsewhere as multi-row VALUES batches."""
    if isinstance(target, Engine):
        with target.begin() as conn:
            insert_rows(conn, rows, batch)
        return
    conn = target
    tables = models.Base.metadata.tables
    duck = conn.dialect.name.startswith("duckdb")
    for name in TABLE_ORDER:
        data = rows.get(name) or []
        if not data:
            continue
        table = tables[name]
        cols = [c.name for c in table.columns if any(c.name in r for r in data)]
        if duck:
            # Plain multi-row VALUES on the driver connection: SQLAlchemy's compilation of a
            # many-row insert costs ~0.5 ms a row on duckdb-engine, this ~0.1 ms.
            json_cols = {c.name for c in table.columns if isinstance(c.type, JSON)}
            raw = conn.connection.driver_connection
            placeholder = "(" + ", ".join("?" for _ in cols) + ")"
            for i in range(0, len(data), batch):
                part = data[i:i + batch]
                params = [json.dumps(r[k]) if k in json_cols and r.get(k) is not None else r.get(k)
                          for r in part for k in cols]
                raw.execute(f"INSERT INTO {name} ({', '.join(cols)}) VALUES "
                            + ", ".join(placeholder for _ in part), params)
            continue
        for i in range(0, len(data), batch):
            conn.execute(table.insert().values([{k: r.get(k) for k in cols} for r in data[i:i + batch]]))


def clear_rows(engine: Engine) -> None:
    """Delete every row of the tables :func:`random_rows` fills (children first)."""
    from sqlalchemy import text

    with engine.begin() as conn:
        for name in reversed(TABLE_ORDER):
            conn.execute(text(f"DELETE FROM {name}"))
