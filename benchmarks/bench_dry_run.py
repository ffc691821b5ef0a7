"""How honest is `run --dry-run`? Estimate on a freshly ingested store, run, compare.

The demo's pipeline (chunk → extract → embed → metrics → answer → judge → score) on the
answer-stage test's toy corpus (4 documents, 6 questions, 5 paradigms) against the scripted
fake OpenAI-compatible endpoint (tests/fake_openai.py; deterministic replies), so it runs in
seconds anywhere. Per stage: the dry run's calls to make and prompt tokens, against the
calls and prompt tokens the run then billed (the ledger, llm_calls). Completion tokens are
printed too: the dry run gives the max_tokens caps (an upper bound), the fake model's replies
are short, so that column is not expected to match.

    .venv/bin/python benchmarks/bench_dry_run.py [--json]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import create_engine, text  # noqa: E402

PIPELINE = ["chunk", "extract", "embed", "metrics", "answer", "judge", "score"]


def measure(engine, srv) -> list[dict]:
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import dry_run
    from ragrouter.stages.services import Services
    from tests.test_stages_answer import fake_config, ingest, run

    ingest(engine)
    cfg = fake_config(srv)
    services = Services(cfg, engine)
    try:
        stages = registry.all_stages()
        est = dry_run([stages[n] for n in PIPELINE], services, Scope(corpus="toy", config=cfg))
    finally:
        services.finish()
    run(engine, cfg, *PIPELINE)
    with engine.connect() as conn:
        billed = {r[0]: (int(r[1]), int(r[2] or 0), int(r[3] or 0)) for r in conn.execute(text(
            "SELECT stage, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens) FROM llm_calls GROUP BY stage"))}
    out = []
    for e in est:
        if e.model == "-" and e.stage not in billed:
            continue
        calls, pt, ct = billed.get(e.stage, (0, 0, 0))
        out.append({"stage": e.stage, "model": e.model, "estimated_calls": e.calls - e.cached_calls,
                    "billed_calls": calls, "estimated_prompt_tokens": e.prompt_tokens, "billed_prompt_tokens": pt,
                    "max_completion_tokens": e.completion_tokens, "billed_completion_tokens": ct})
    return out


def main() -> None:
    from tests.fake_openai import FakeOpenAI
    from tests.test_trust import judging_responder
    from ragrouter.db import migrate

    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine(f"duckdb:///{tmp}/s.duckdb")
        migrate.upgrade(engine)
        with FakeOpenAI(responder=judging_responder, embedding_dim=32) as srv:
            rows = measure(engine, srv)
        engine.dispose()
    if "--json" in sys.argv:
        print(json.dumps(rows))
        return
    print("| stage | est. calls | billed calls | ratio | est. prompt tokens | billed prompt tokens | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        rc = r["estimated_calls"] / r["billed_calls"] if r["billed_calls"] else float("nan")
        rp = r["estimated_prompt_tokens"] / r["billed_prompt_tokens"] if r["billed_prompt_tokens"] else float("nan")
        print(f"| {r['stage']} | {r['estimated_calls']} | {r['billed_calls']} | {rc:.2f} | "
              f"{r['estimated_prompt_tokens']} | {r['billed_prompt_tokens']} | {rp:.2f} |")


if __name__ == "__main__":
    main()
