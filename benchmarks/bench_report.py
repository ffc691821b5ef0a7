"""Views, report and export at paper scale on a DuckDB file.

Fills a fresh store with synthetic rows shaped like the paper's benchmark (4 corpora, N
accepted-or-not queries per corpus, 6 paradigms, G generators, 1–2 judges, some superseded
configs), then times a full SELECT of every view, ``build_report`` and ``export_parquet``.

    python benchmarks/bench_report.py --queries-per-corpus 1300 --generators 2
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from sqlalchemy import text  # noqa: E402

from ragrouter.db import engine as eng  # noqa: E402
from ragrouter.db import migrate  # noqa: E402
from ragrouter.report import synthetic  # noqa: E402
from ragrouter.report.build import build_report  # noqa: E402
from ragrouter.report.export import export_parquet  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries-per-corpus", type=int, default=1300)
    ap.add_argument("--generators", type=int, default=2)
    ap.add_argument("--judges", type=int, default=1)
    ap.add_argument("--samples", type=int, default=1, help="max judge samples per run")
    ap.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="bench_report_"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / "store.duckdb"
    if db.exists():
        db.unlink()
    engine = eng.make_engine(f"duckdb:///{db}")
    migrate.upgrade(engine)

    t = time.perf_counter()
    rows = synthetic.random_rows(1, n_corpora=4, queries_per_corpus=args.queries_per_corpus,
                                 generators=[f"gen-{i}" for i in range(args.generators)],
                                 judges=[f"judge-{i}" for i in range(args.judges)], max_samples=args.samples,
                                 p_missing_run=0.0)
    print(f"generate: {time.perf_counter() - t:.1f} s  " + ", ".join(f"{k}={len(v)}" for k, v in rows.items() if v))
    t = time.perf_counter()
    synthetic.insert_rows(engine, rows, batch=1000)
    print(f"insert: {time.perf_counter() - t:.1f} s")

    with engine.connect() as conn:
        for path in migrate.view_files():
            name = migrate.view_name(path.read_text(), path)
            t = time.perf_counter()
            n = len(conn.execute(text(f"SELECT * FROM {name}")).all())
            print(f"view {name:24s} {n:8d} rows {time.perf_counter() - t:7.2f} s")
    t = time.perf_counter()
    report = build_report(engine, work / "report")
    print(f"build_report: {time.perf_counter() - t:.1f} s ({len(report.figures)} figures)")
    t = time.perf_counter()
    counts = export_parquet(engine, work / "export")
    print(f"export_parquet: {time.perf_counter() - t:.1f} s {counts}")
    eng.dispose_all()


if __name__ == "__main__":
    main()
