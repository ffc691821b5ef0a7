"""Full-scale rehearsal: the medical corpus through every stage against a fake endpoint.

The whole GraphRAG-Bench medical corpus (538 chunks) and its questions (1,896; ``--fraction``
takes every k-th, keeping the type mix) go through chunk → extract → embed → answer (the five
paradigms) → judge → score, through the real CLI (``cli.py ingest`` / ``cli.py run``), against
the lean fake endpoint (benchmarks/lean_endpoint.py) with a **log-normal latency** (median
``--median`` s, ``--sigma``) at ``--concurrency`` requests in flight. Chat and embeddings go to
the fake endpoint; the score stage runs the real MiniLM encoder (BERTScore, coverage,
faithfulness) in process.

Measured per store (DuckDB, one worker; PostgreSQL, ``--pg-workers`` processes sharing the
LLM stages through leases, each with concurrency / workers threads):

* wall time per stage (the ``cli.py run`` processes, start-up included), the runner's own
  time (``stage_s``, as the CLI prints it: from reading the pending units to the last commit)
  and the endpoint's busy span (first request in to last reply out); for the LLM stages the
  ideal = the endpoint's summed latency / concurrency (what the stage would take if every
  slot were busy all the time). The endpoint serves at most ``--concurrency`` requests at
  once, and each of the ``--pg-workers`` processes gets ``concurrency / workers`` slots;
* peak RSS of the largest worker process (per store), store size, time of every view (``SELECT COUNT(*)``)
  and of ``cli.py report``;
* the score stage's runs/s;
* totals (runs, judgments, scores, ledger rows, run tokens) — identical on both stores.

    nice .venv/bin/python benchmarks/bench_scale.py --fraction 0.05 --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _h(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def _long_words(text: str, k: int, skip: int = 0) -> list[str]:
    seen, out = set(), []
    for w in text.replace("\n", " ").split():
        w = "".join(c for c in w.lower() if c.isalnum() or c == "-")
        if len(w) >= 6 and w not in seen:
            seen.add(w)
            out.append(w)
    return out[skip:skip + k]


def responder(req: dict):
    """Deterministic replies by prompt (the same request always gets the same reply)."""
    system = str(req["messages"][0].get("content", ""))
    user = str(req["messages"][-1].get("content", ""))
    if "knowledge graph" in system:
        words = _long_words(user, 16)
        return {"triples": [[words[i], "relates to", words[i + 1]] for i in range(0, len(words) - 1, 2)]}
    if "named entities" in system:
        return {"entities": _long_words(user.split("Question:", 1)[-1], 3)}
    if "fully and correctly answers" in system:
        rounds = user.count("Sub-question") + user.count("sub-question")
        if _h(user) % 3 == 0 or rounds > 2:
            return {"sufficient": True, "sub_question": "", "reason": "enough"}
        return {"sufficient": False, "sub_question": "What about " + " ".join(_long_words(user, 2, skip=_h(user) % 7)) + "?",
                "reason": "partial"}
    if "grade an answer" in system:
        return {"label": ("correct", "incorrect", "incomplete")[_h(user) % 3], "reason": "fake verdict"}
    context = user.split("Context:", 1)[-1]
    return "The answer is that " + " ".join(_long_words(context, 25, skip=_h(user) % 5)) + "."


def slice_questions(src: Path, fraction: float, out: Path) -> int:
    questions = json.loads(src.read_text())
    if fraction < 1.0:
        step = 1.0 / fraction
        questions = [questions[int(i * step)] for i in range(int(len(questions) * fraction))]
    out.write_text(json.dumps(questions))
    return len(questions)


def config_yaml(base_url: str, concurrency: int) -> str:
    import yaml

    common = {"kind": "openai", "base_url": base_url, "concurrency": concurrency, "timeout_s": 120, "retries": 3}
    return yaml.safe_dump({
        "backends": {"scale-gen": {**common, "model": "scale-gen"},
                     "scale-embed": {**common, "model": "scale-embed", "batch_size": 64}},
        "roles": {"generators": ["scale-gen"], "extractor": "scale-gen", "judge": "scale-gen",
                  "query_generator": "scale-gen", "embedder": "scale-embed"},
    })


class Cli:
    def __init__(self, db_url: str, config: Path, log: Path):
        self.env = {**os.environ, "RAGROUTER_DB": db_url}
        self.config = str(config)
        self.log = log
        self.peak_rss_mb = 0.0  # the largest worker process this store's runs had (os.wait4, per child)

    def run(self, *args: str, workers: int = 1, extra: tuple[str, ...] = ()) -> float:
        return self.run_timed(*args, workers=workers, extra=extra)[0]

    def run_timed(self, *args: str, workers: int = 1, extra: tuple[str, ...] = ()) -> tuple[float, float | None]:
        """(wall seconds of the processes, the longest in-process stage time they printed — the
        runner's own seconds, without the interpreter start, imports and config)."""
        t0 = time.perf_counter()
        outs = [self.log.with_suffix(f".{i}.out") for i in range(workers)]
        procs = []
        for out in outs:
            fh = out.open("w")
            procs.append(subprocess.Popen([sys.executable, str(REPO / "cli.py"), "--config", self.config, *args,
                                           *extra], cwd=REPO, env=self.env, stdout=fh, stderr=subprocess.STDOUT,
                                          text=True))
        codes = []
        for p in procs:
            # wait4 gives this child's own peak RSS; RUSAGE_CHILDREN is the maximum over every child the
            # benchmark ever had, so the second store inherited the first one's figure
            _, status, usage = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            codes.append(p.returncode)
            self.peak_rss_mb = max(self.peak_rss_mb, usage.ru_maxrss / 1024.0)
        wall = time.perf_counter() - t0
        texts = [out.read_text() for out in outs]
        with self.log.open("a") as fh:
            fh.write("".join(texts))
        if any(codes):
            raise SystemExit(f"cli {' '.join(args)} failed ({codes}); see {self.log}")
        import re

        secs = [float(m) for t in texts for m in re.findall(r"pending \(([0-9.]+)s\)", t)]
        return wall, (max(secs) if secs else None)


def totals(engine) -> dict:
    from sqlalchemy import text

    q = {
        "documents": "SELECT COUNT(*) FROM documents", "chunks": "SELECT COUNT(*) FROM chunks",
        "triples": "SELECT COUNT(*) FROM triples", "queries": "SELECT COUNT(*) FROM queries",
        "paradigm_runs": "SELECT COUNT(*) FROM paradigm_runs", "judgments": "SELECT COUNT(*) FROM judgments",
        "answer_scores": "SELECT COUNT(*) FROM answer_scores", "llm_calls": "SELECT COUNT(*) FROM llm_calls",
        "llm_calls_chat": "SELECT COUNT(*) FROM llm_calls WHERE kind = 'chat'",
        "llm_calls_embedding": "SELECT COUNT(*) FROM llm_calls WHERE kind = 'embedding'",
        "distinct_request_hashes": "SELECT COUNT(DISTINCT request_hash) FROM llm_calls",
        "run_tokens": "SELECT COALESCE(SUM(ret_in_tokens + ret_out_tokens + gen_in_tokens + gen_out_tokens), 0) "
                      "FROM paradigm_runs",
        "billed_tokens": "SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM llm_calls",
    }
    with engine.connect() as conn:
        return {k: int(conn.execute(text(v)).scalar() or 0) for k, v in q.items()}


def time_views(engine) -> dict:
    from sqlalchemy import text

    out = {}
    for path in sorted((REPO / "queries" / "views").glob("*.sql")):
        name = path.stem.split("_", 1)[1]
        t0 = time.perf_counter()
        with engine.connect() as conn:
            conn.execute(text(f"SELECT COUNT(*) FROM {name}")).scalar()
        out[name] = round(time.perf_counter() - t0, 3)
    return out


def rehearse(kind: str, db_url: str, cfg: Path, endpoint, args, data: Path, qfile: Path, tmp: Path) -> dict:
    from sqlalchemy import create_engine, text

    from ragrouter.db import engine as eng

    log = tmp / f"{kind}.log"
    cli = Cli(db_url, cfg, log)
    workers = 1 if kind == "duckdb" else args.pg_workers
    res: dict = {"store": kind, "workers": workers, "stages": {}}
    cli.run("db", "upgrade")
    res["stages"]["ingest"] = {"wall_s": round(cli.run("ingest", "--corpus", "medical", "--format", "graphrag-bench",
                                                       str(data / "medical.json"), str(qfile)), 2)}
    for stage in ("chunk", "extract", "embed", "answer", "judge", "score"):
        if stage == "score" and (args.score_units == 0 or kind not in args.score_stores.split(",")):
            continue
        llm = stage in ("extract", "embed", "answer", "judge")
        n = workers if stage in ("extract", "answer", "judge") else 1
        extra: tuple[str, ...] = ()
        if stage == "score" and args.score_units:
            extra = ("--limit", str(args.score_units))
        endpoint.reset()
        wall, stage_s = cli.run_timed("run", "--stage", stage, "--corpus", "medical", "--quiet", workers=n,
                                      extra=extra)
        row = {"wall_s": round(wall, 2), "stage_s": stage_s, "processes": n}
        if llm:
            st = endpoint.stats()
            ideal = st["latency_sum_s"] / args.concurrency
            ratio = (lambda x: round(x / ideal, 3) if ideal and x else None)
            row.update(requests=st["total"], ideal_s=round(ideal, 2), span_s=st["span_s"],
                       wall_over_ideal=ratio(wall), stage_over_ideal=ratio(stage_s), span_over_ideal=ratio(st["span_s"]),
                       peak_in_flight=st["peak_in_flight"])
        res["stages"][stage] = row
    res["peak_rss_mb"] = round(cli.peak_rss_mb, 1)
    engine = create_engine(db_url) if kind == "postgres" else eng.make_engine(db_url)
    try:
        res["totals"] = totals(engine)
        res["views_s"] = time_views(engine)
        if kind == "postgres":
            with engine.connect() as conn:
                res["store_mb"] = round(conn.execute(text("SELECT pg_database_size(current_database())")).scalar()
                                        / 2**20, 1)
    finally:
        engine.dispose()
        eng.dispose_all()
    if kind == "duckdb":
        res["store_mb"] = round(Path(db_url.split("///", 1)[1]).stat().st_size / 2**20, 1)
    t0 = time.perf_counter()
    cli.run("report", "--out", str(tmp / f"report-{kind}"))
    res["report_s"] = round(time.perf_counter() - t0, 2)
    llm = [r for s, r in res["stages"].items() if s in ("extract", "embed", "answer", "judge")]
    llm_ideal = sum(r.get("ideal_s", 0) for r in llm)
    for what in ("wall", "stage", "span"):
        total = sum(r.get(f"{what}_s") or 0 for r in llm)
        res[f"llm_stages_{what}_over_ideal"] = round(total / llm_ideal, 3) if llm_ideal else None
    sc = res["stages"].get("score")
    if sc:
        scored = res["totals"]["answer_scores"] // 4 or res["totals"]["paradigm_runs"]
        sc["runs_scored"] = scored
        sc["runs_per_s"] = round(scored / sc["wall_s"], 3) if sc["wall_s"] else None
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fraction", type=float, default=1.0, help="share of the 1,896 questions (every k-th)")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--median", type=float, default=1.5, help="median latency per request (s)")
    ap.add_argument("--sigma", type=float, default=0.5, help="log-normal sigma of the latency")
    ap.add_argument("--stores", default="duckdb,postgres")
    ap.add_argument("--pg-workers", type=int, default=4)
    ap.add_argument("--score-units", type=int, default=None,
                    help="score at most N units (batches of runs; 0 = skip the score stage; default: all)")
    ap.add_argument("--score-stores", default="duckdb,postgres",
                    help="the stores whose rehearsal includes the score stage (the others stop after judge)")
    ap.add_argument("--json", dest="json_out", help="also write the result to this file")
    ap.add_argument("--keep", type=Path, help="copy the DuckDB store and its config into this folder (e.g. for "
                    "`cli.py plan` on the rehearsal's outcomes)")
    args = ap.parse_args()

    from benchmarks.lean_endpoint import start_in_process
    from ragrouter.corpus.demo import default_data_dir

    data = default_data_dir()
    out = {"fraction": args.fraction, "concurrency": args.concurrency, "median_latency_s": args.median,
           "sigma": args.sigma, "load_average_start": os.getloadavg()[0], "runs": []}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        out["questions"] = slice_questions(data / "medical_questions.json", args.fraction, tmp / "questions.json")
        endpoint = start_in_process(args.median, responder, 384, sigma=args.sigma, max_in_flight=args.concurrency)
        try:
            for kind in args.stores.split(","):
                # each worker process gets its share of the endpoint's slots (its backends'
                # concurrency); the endpoint never serves more than --concurrency at once
                cfg = tmp / f"scale-{kind}.yaml"
                n = 1 if kind == "duckdb" else args.pg_workers
                cfg.write_text(config_yaml(endpoint.base_url, max(1, args.concurrency // n)))
                if kind == "duckdb":
                    url = f"duckdb:///{tmp / 'scale.duckdb'}"
                    out["runs"].append(rehearse(kind, url, cfg, endpoint, args, data, tmp / "questions.json", tmp))
                    if args.keep:
                        import shutil

                        args.keep.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(tmp / "scale.duckdb", args.keep / "scale.duckdb")
                        shutil.copy2(cfg, args.keep / cfg.name)
                elif kind == "postgres":
                    from ragrouter.db.pgtemp import TempPostgres

                    pg = TempPostgres().start()
                    try:
                        url = pg.create_database("scale")
                        out["runs"].append(rehearse(kind, url, cfg, endpoint, args, data, tmp / "questions.json",
                                                    tmp))
                    finally:
                        pg.stop()
                print(json.dumps(out["runs"][-1]), flush=True)
        finally:
            endpoint.stop()
    if len(out["runs"]) == 2:
        a, b = (dict(r["totals"]) for r in out["runs"])
        if {r["store"] for r in out["runs"]} - set(args.score_stores.split(",")):
            a.pop("answer_scores"), b.pop("answer_scores")  # only one store ran the score stage
        out["same_totals"] = a == b
    out["load_average_end"] = os.getloadavg()[0]
    text_out = json.dumps(out, indent=2)
    print(text_out)
    if args.json_out:
        Path(args.json_out).write_text(text_out)


if __name__ == "__main__":
    main()
