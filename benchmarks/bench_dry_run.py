"""How honest is `run --dry-run`? Estimate on a freshly ingested corpus, run, compare.

The demo's pipeline (chunk → extract → embed → metrics → answer → judge → score) on the
answer-stage test's toy corpus (4 documents, 6 questions, 5 paradigms) against the scripted
fake OpenAI-compatible endpoint (tests/fake_openai.py; deterministic replies), so it runs in
seconds anywhere. Twice, in one store:

* ``fresh`` — a fresh store: what the dry run expects of the replies rests on the priors
  (``dry_run.completion_share``, ``dry_run.iterative_rounds``): they were measured on the local
  Qwen models, and the fake model answers in a few tokens, so completions are over-estimated
  here by design — this row shows what a prior costs;
* ``history`` — a second corpus (the same documents and questions reworded, so no request is a
  cache hit) in the same store: the store's own history of the model in each stage replaces
  the priors.

Per stage: the dry run's calls and prompt / completion tokens beside what the ledger billed
(ragrouter.stages.expect.compare). The real model's figure is the demo's own
``dry_run_vs_billed.csv`` (every `make run` writes it; benchmarks/README.md, "Dry runs").

    .venv/bin/python benchmarks/bench_dry_run.py [--json]
    .venv/bin/python benchmarks/bench_dry_run.py --demo-store ragrouter.duckdb   # a cold demo's store
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine  # noqa: E402

PIPELINE = ["chunk", "extract", "embed", "metrics", "answer", "judge", "score"]


def _ingest(engine, corpus: str, reword: str) -> None:
    from ragrouter.db.engine import write_lock
    from ragrouter.ingest import store as ingest_store
    from ragrouter.ingest.records import Dataset, Document, Question
    from tests.test_stages_answer import DOCS, QUESTIONS

    ds = Dataset(documents=[Document(k, "", reword + v) for k, v in DOCS.items()],
                 questions=[Question(i, reword + q, a, t) for i, q, a, t in QUESTIONS])
    with write_lock(engine), engine.begin() as conn:
        ingest_store.write_dataset(conn, corpus, "test", ds, [])


def measure(engine, srv, corpus: str = "toy", reword: str = "") -> list[dict]:
    """Ingest the toy corpus as ``corpus`` (texts prefixed with ``reword``), dry-run the
    pipeline on it, run it, and return :func:`ragrouter.stages.expect.compare`'s rows."""
    from ragrouter.stages import expect, registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import dry_run, run_stage
    from ragrouter.stages.services import Services
    from tests.test_stages_answer import fake_config

    _ingest(engine, corpus, reword)
    cfg = fake_config(srv)
    services = Services(cfg, engine)
    try:
        stages = registry.all_stages()
        scope = Scope(corpus=corpus, config=cfg)
        est = dry_run([stages[n] for n in PIPELINE], services, scope)
        with engine.connect() as conn:
            mark = expect.ledger_mark(conn)
        for n in PIPELINE:
            run_stage(stages[n], services, scope, progress=False)
    finally:
        services.finish()
    with engine.connect() as conn:
        return expect.compare(conn, est, mark)


def demo_against(store_path: str, config_path: str = "configs/demo.yaml") -> list[dict]:
    """The demo's dry run on a fresh store (its slice ingested, nothing run) beside what a
    finished cold demo store ``store_path`` billed per stage (its whole ledger): the same
    requests, so the same figure ``make run`` writes to ``dry_run_vs_billed.csv``."""
    from ragrouter.corpus import demo as demo_data
    from ragrouter.config import Config
    from ragrouter.db import migrate
    from ragrouter.db.engine import write_lock
    from ragrouter.ingest import store as ingest_store
    from ragrouter.stages import expect, registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import dry_run
    from ragrouter.stages.services import Services

    cfg = Config.load(config_path)
    d = cfg.section("demo")
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine(f"duckdb:///{tmp}/fresh.duckdb")
        migrate.upgrade(engine)
        ds = demo_data.medical_slice(demo_data.default_data_dir(), int(d.get("chunks", 20)), int(d.get("per_type", 3)),
                                     float(d.get("evidence_overlap", 0.8)), int(cfg.get("chunking.window")),
                                     int(cfg.get("chunking.overlap")))
        corpus = str(d.get("corpus", "medical-demo"))
        with write_lock(engine), engine.begin() as conn:
            ingest_store.write_dataset(conn, corpus, "graphrag-bench", ds, ["medical slice"])
        services = Services(cfg, engine)
        try:
            stages = registry.all_stages()
            est = dry_run([stages[n] for n in PIPELINE], services, Scope(corpus=corpus, config=cfg))
        finally:
            services.finish()
        engine.dispose()
    done = create_engine(f"duckdb:///{store_path}", connect_args={"read_only": True})
    with done.connect() as conn:
        return expect.compare(conn, est, 0)


def _fake_cases(migrate, fake, responder) -> list[dict]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine(f"duckdb:///{tmp}/s.duckdb")
        migrate.upgrade(engine)
        with fake(responder=responder, embedding_dim=32) as srv:
            for case, corpus, reword in (("fresh", "toy", ""), ("history", "toy-b", "In other words: ")):
                out += [{"case": case, **r} for r in measure(engine, srv, corpus, reword)]
        engine.dispose()
    return out


def main() -> None:
    from ragrouter.db import migrate
    from tests.fake_openai import FakeOpenAI
    from tests.test_trust import judging_responder

    out = []
    if "--demo-store" in sys.argv:
        store = sys.argv[sys.argv.index("--demo-store") + 1]
        out = [{"case": "demo", **r} for r in demo_against(store)]
    else:
        out = _fake_cases(migrate, FakeOpenAI, judging_responder)
    if "--json" in sys.argv:
        print(json.dumps(out))
        return

    def r(v):
        return "-" if v is None else f"{v:.2f}"

    print("| case | stage | calls est/billed | ratio | prompt est/billed | ratio | completion est/billed (cap) | ratio | basis |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for x in out:
        print(f"| {x['case']} | {x['stage']} | {x['est_calls']}/{x['billed_calls']} | {r(x['ratio_calls'])} | "
              f"{x['est_prompt']}/{x['billed_prompt']} | {r(x['ratio_prompt'])} | "
              f"{x['est_completion']}/{x['billed_completion']} ({x['max_completion']}) | {r(x['ratio_completion'])} | "
              f"{x['basis']} |")


if __name__ == "__main__":
    main()
