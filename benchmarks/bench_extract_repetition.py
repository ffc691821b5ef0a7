"""Extraction replies that repeat themselves: what each way of stopping them saves.

The extract stage on the first ``--chunks`` chunks of the medical textbook with the local
Qwen2.5-Coder-0.5B, every variant at the same ``extraction.max_tokens`` cap, each in its own
fresh store (no cache hit between variants):

* ``none`` — the paper's setting: no cap on triples; a reply that starts repeating a triple
  runs on to the cap;
* ``max_triples=N`` — the reply's JSON schema caps the triples array (``maxItems``):
  llama.cpp's grammar then closes the array after N triples;
* ``dry`` — llama.cpp's DRY repetition sampler (``dry_multiplier`` in the request body,
  llama.cpp's own extension), no cap.

Per variant: completion tokens per chunk (mean, max), replies that reached the cap, distinct
triples per chunk (after the stage's normalisation and de-duplication) and wall seconds.

    .venv/bin/python benchmarks/bench_extract_repetition.py --chunks 20 --max-tokens 1024 [--json]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from sqlalchemy import create_engine, text  # noqa: E402


def run_variant(name: str, chunks: int, max_tokens: int, max_triples: int | None, extra: dict) -> dict:
    from ragrouter.corpus import demo as demo_data
    from ragrouter.config import Config
    from ragrouter.db import migrate
    from ragrouter.db.engine import write_lock
    from ragrouter.ingest import store as ingest_store
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    base = Config.load("configs/demo.yaml")
    data = copy.deepcopy(base.data)
    data["extraction"]["max_tokens"] = max_tokens
    data["extraction"]["max_triples"] = max_triples
    data["roles"]["extractor"] = "local-qwen-0.5b"
    if extra:
        data["backends"]["local-qwen-0.5b"]["extra_body"] = extra
    cfg = Config(data, source=f"<bench {name}>")
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine(f"duckdb:///{tmp}/s.duckdb")
        migrate.upgrade(engine)
        ds = demo_data.medical_slice(demo_data.default_data_dir(), chunks, 0, 0.8)
        with write_lock(engine), engine.begin() as conn:
            ingest_store.write_dataset(conn, "medical-slice", "graphrag-bench", ds, ["medical slice"])
        services = Services(cfg, engine)
        try:
            scope = Scope(corpus="medical-slice", config=cfg, limit=chunks)
            run_stage(registry.all_stages()["chunk"], services, scope, progress=False)
            t0 = time.monotonic()
            rep = run_stage(registry.all_stages()["extract"], services, scope, progress=False)
            wall = time.monotonic() - t0
        finally:
            services.finish()
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT c.completion_tokens, x.n_triples FROM chunk_extractions x JOIN llm_calls c "
                "ON c.id = x.llm_call_id ORDER BY x.chunk_id")).all()
        engine.dispose()
    comp = [int(r[0]) for r in rows]
    trip = [int(r[1]) for r in rows]
    return {"variant": name, "chunks": len(rows), "failed": rep.failed, "max_tokens": max_tokens,
            "completion_mean": sum(comp) / max(1, len(comp)), "completion_max": max(comp, default=0),
            "at_cap": sum(c >= max_tokens for c in comp), "triples_mean": sum(trip) / max(1, len(trip)),
            "wall_s": round(wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--max-triples", type=int, default=40)
    ap.add_argument("--variants", default="none,max_triples,dry")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    specs = {"none": (None, {}), "max_triples": (args.max_triples, {}),
             "dry": (None, {"dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 2})}
    out = []
    for name in args.variants.split(","):
        cap, extra = specs[name]
        label = f"max_triples={cap}" if name == "max_triples" else name
        out.append(run_variant(label, args.chunks, args.max_tokens, cap, extra))
        if not args.json:
            r = out[-1]
            print(f"{r['variant']:>16}: completion {r['completion_mean']:.0f} mean / {r['completion_max']} max, "
                  f"{r['at_cap']}/{r['chunks']} at the cap, {r['triples_mean']:.1f} distinct triples per chunk, "
                  f"{r['wall_s']} s", flush=True)
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
