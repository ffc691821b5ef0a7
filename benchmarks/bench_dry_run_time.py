"""How close is `run --dry-run`'s expected wall time to the run it describes?

A slice of a shared corpus is ingested into a store (a fresh one, or one with history such
as a finished demo's, whose own calls and stage timings then replace the priors), dry-run with
`ragrouter.stages.timing.wall_estimates`, then run stage by stage; per stage the expected
wall seconds beside the measured ones, the ratio and what the estimate rests on. The demo
writes the same figures for its own slice to `reports/latest/dry_run_time.csv`.

    .venv/bin/python benchmarks/bench_dry_run_time.py --db duckdb:///ragrouter.duckdb --config configs/demo.yaml \\
        --format musique --files ../shared/data/musique/musique_train100.json ../shared/data/musique/musique_train100_corpus.json \\
        --corpus musique-t --chunks 8 --per-type 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

PIPELINE = ["chunk", "extract", "embed", "metrics", "answer", "judge", "score"]


def measure(db: str, config_path: str, fmt: str, files: list[str], corpus: str, chunks: int, per_type: int,
            probe: bool = False) -> list[dict]:
    from ragrouter.corpus.slicing import slice_dataset
    from ragrouter.config import Config
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate
    from ragrouter.db.engine import write_lock
    from ragrouter.ingest import loaders
    from ragrouter.ingest import store as ingest_store
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import dry_run, run_stage
    from ragrouter.stages.services import Services
    from ragrouter.stages.timing import wall_estimates

    cfg = Config.load(config_path)
    if probe:
        # in a process of its own: the probe loads the encoder, and a process that keeps it
        # loaded would run the embed and score stages warm, faster than any real first run
        import subprocess

        subprocess.run([sys.executable, "-c", "import sys; from ragrouter.config import Config; "
                        "from ragrouter.decisions import speedprobe; "
                        "speedprobe.probe(Config.load(sys.argv[1]), echo=lambda l: print(l, file=sys.stderr))",
                        config_path], check=True)
    engine = eng.make_engine(db)
    migrate.upgrade(engine)
    ds = slice_dataset(loaders.load(fmt, [Path(f) for f in files]), chunks=chunks, per_type=per_type,
                       window=int(cfg.get("chunking.window")), overlap_tokens=int(cfg.get("chunking.overlap")))
    with write_lock(engine), engine.begin() as conn:
        ingest_store.write_dataset(conn, corpus, fmt, ds, [str(f) for f in files])
    services = Services(cfg, engine)
    try:
        stages = registry.all_stages()
        scope = Scope(corpus=corpus, config=cfg)
        timed = wall_estimates(cfg, dry_run([stages[n] for n in PIPELINE], services, scope), services)
        took = {n: run_stage(stages[n], services, scope, progress=False).seconds for n in PIPELINE}
    finally:
        services.finish()
    expected: dict[str, float] = {}
    basis: dict[str, set] = {}
    for row in timed["stages"]:
        expected[row["stage"]] = expected.get(row["stage"], 0.0) + float(row["expected_wall_s"])
        basis.setdefault(row["stage"], set()).add(row["time_basis"])
    return [{"stage": n, "expected_wall_s": round(expected.get(n, 0.0), 1), "wall_s": round(s, 1),
             "ratio": round(expected.get(n, 0.0) / s, 2) if s >= 1 else None,
             "time_basis": ";".join(sorted(basis.get(n, {"-"})))} for n, s in took.items()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--config", default="configs/demo.yaml")
    ap.add_argument("--format", required=True)
    ap.add_argument("--files", nargs="+", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--per-type", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--probe", action="store_true", help="measure this machine's speed of the local models first "
                    "(run --dry-run --probe); without it, earlier figures of this machine or the priors")
    a = ap.parse_args()
    rows = measure(a.db, a.config, a.format, a.files, a.corpus, a.chunks, a.per_type, a.probe)
    if a.json:
        print(json.dumps(rows))
        return
    print("| stage | expected s | took s | expected / took | basis |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['stage']} | {r['expected_wall_s']} | {r['wall_s']} | {r['ratio'] if r['ratio'] is not None else '-'} "
              f"| {r['time_basis']} |")


if __name__ == "__main__":
    main()
