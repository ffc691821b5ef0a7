"""Gateway throughput against a fake OpenAI-compatible endpoint with a fixed latency.

N distinct chat requests (cold cache, ledger writes on, a fresh DuckDB file) from C threads to
a fake endpoint that answers after L seconds. The ideal is C / L calls per second (320/s for
C = 16, L = 50 ms); the figure of merit is achieved / ideal (target >= 0.95).

The fake server runs in a child process, so its CPU time does not compete with the gateway for
this process's GIL; by default it is the lean asyncio server of ``benchmarks/lean_endpoint.py``
whose latency is calibrated against the event loop's lateness. For context the same load is also sent through the
bare ``openai`` client, bare ``httpx2`` posts and the stdlib ``http.client`` (no gateway, no
ledger): the last is the ceiling of Python threads on this machine, and the gap between the
bare ``openai`` client and it is the SDK's own CPU per call, not the gateway's.

    python benchmarks/bench_gateway.py                      # N=800, C=16, L=0.05, both ledger modes
    python benchmarks/bench_gateway.py --n 1600 --modes async --no-baselines
    python benchmarks/bench_gateway.py --postgres           # also a throwaway PostgreSQL store
    python benchmarks/bench_gateway.py --server full        # the tests' FakeOpenAI as the endpoint
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def serve(latency: float) -> None:
    """Child process for ``--server full``: the tests' FakeOpenAI until stdin closes."""
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI(latency_s=latency) as srv:
        print(srv.base_url, flush=True)
        sys.stdin.read()


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def run_pool(fn, n: int, concurrency: int) -> float:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for _ in pool.map(fn, range(n)):
            pass
    return time.perf_counter() - t0


def bench_gateway(base_url: str, mode: str, n: int, concurrency: int, tag: str, pg=None) -> dict:
    from sqlalchemy import func, select

    from ragrouter.config import Config
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate
    from ragrouter.db.models import LLMCall
    from ragrouter.llm.gateway import Gateway

    if pg is not None:
        url = pg.create_database(f"bench_{tag}_{os.getpid()}")
        store = "postgresql"
    else:
        url = f"duckdb:///{tempfile.mkdtemp(prefix='bench-gateway-')}/bench.duckdb"
        store = "duckdb"
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    cfg = Config({"backends": {"fake": {"kind": "openai", "base_url": base_url, "model": "fake-model",
                                        "concurrency": concurrency, "timeout_s": 30, "retries": 3}},
                  "roles": {"generators": ["fake"]}}, source="bench")
    gw = Gateway(cfg, engine, worker_run_id=1, ledger_commit=mode)

    def call(i: int, prefix: str = tag):
        r = gw.chat("fake", [{"role": "system", "content": "Answer briefly."},
                             {"role": "user", "content": f"{prefix} question {i}: what is {i} + {i}?"}],
                    temperature=0.0, max_tokens=64, stage="bench", phase="generation")
        assert not r.cached
        return r

    run_pool(lambda i: call(i, f"warm-{tag}"), 2 * concurrency, concurrency)  # imports, connections, ids
    gw.flush()
    cpu0 = cpu_seconds()
    wall = run_pool(call, n, concurrency)
    t_flush = time.perf_counter()
    gw.flush()
    flush_s = time.perf_counter() - t_flush
    cpu = cpu_seconds() - cpu0
    stats = gw.stats()
    gw.close()
    with engine.connect() as conn:
        rows = conn.execute(select(func.count()).select_from(LLMCall)).scalar_one()
    eng.dispose_all()
    assert rows == n + 2 * concurrency, (rows, n)
    return {"what": f"gateway ({store}, {mode})", "n": n, "wall_s": wall, "flush_s": flush_s,
            "cpu_ms_per_call": 1000 * cpu / n, "http_requests": stats["http_requests"], "rows": rows}


def bench_openai(base_url: str, n: int, concurrency: int) -> dict:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)

    def call(i: int):
        client.chat.completions.create(model="fake-model", temperature=0.0, max_tokens=64, messages=[
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": f"openai question {i}: what is {i} + {i}?"}])

    run_pool(call, 2 * concurrency, concurrency)
    cpu0 = cpu_seconds()
    wall = run_pool(call, n, concurrency)
    return {"what": "bare openai client", "n": n, "wall_s": wall, "cpu_ms_per_call": 1000 * (cpu_seconds() - cpu0) / n}


def bench_httpx(base_url: str, n: int, concurrency: int) -> dict:
    import httpx2

    client = httpx2.Client(limits=httpx2.Limits(max_connections=4 * concurrency,
                                                max_keepalive_connections=4 * concurrency))

    def call(i: int):
        r = client.post(base_url + "/chat/completions", json={
            "model": "fake-model", "temperature": 0.0, "max_tokens": 64, "messages": [
                {"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": f"httpx question {i}: what is {i} + {i}?"}]})
        r.json()

    run_pool(call, 2 * concurrency, concurrency)
    cpu0 = cpu_seconds()
    wall = run_pool(call, n, concurrency)
    return {"what": "bare httpx2 posts", "n": n, "wall_s": wall, "cpu_ms_per_call": 1000 * (cpu_seconds() - cpu0) / n}


def bench_stdlib(base_url: str, n: int, concurrency: int) -> dict:
    """The machine's ceiling: stdlib ``http.client``, one keep-alive connection per thread."""
    import http.client
    import threading
    from urllib.parse import urlsplit

    url = urlsplit(base_url)
    local = threading.local()

    def call(i: int):
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(url.hostname, url.port)
        conn.request("POST", url.path + "/chat/completions", json.dumps({
            "model": "fake-model", "temperature": 0.0, "max_tokens": 64, "messages": [
                {"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": f"stdlib question {i}: what is {i} + {i}?"}]}),
            {"content-type": "application/json"})
        json.loads(conn.getresponse().read())

    run_pool(call, 2 * concurrency, concurrency)
    cpu0 = cpu_seconds()
    wall = run_pool(call, n, concurrency)
    return {"what": "bare stdlib http.client", "n": n, "wall_s": wall,
            "cpu_ms_per_call": 1000 * (cpu_seconds() - cpu0) / n}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=800, help="calls per measurement (default 800)")
    parser.add_argument("--concurrency", type=int, default=16, help="threads and backend concurrency (16)")
    parser.add_argument("--latency", type=float, default=0.05, help="fake endpoint latency in seconds (0.05)")
    parser.add_argument("--modes", default="async,sync", help="ledger modes to measure (async,sync)")
    parser.add_argument("--no-baselines", action="store_true", help="skip the bare openai/httpx2/http.client runs")
    parser.add_argument("--postgres", action="store_true",
                        help="also measure on a throwaway PostgreSQL store (Debian binaries, fsync off)")
    parser.add_argument("--repeat", type=int, default=1, help="measure each configuration this many times")
    parser.add_argument("--json", action="store_true", help="print one JSON object per result")
    parser.add_argument("--server", choices=("lean", "full"), default="lean",
                        help="fake endpoint: lean asyncio server (default) or the tests' FakeOpenAI")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)
        return 0

    child = lean = None
    if args.server == "lean":
        from benchmarks.lean_endpoint import start_in_process

        lean = start_in_process(args.latency)
        base_url = lean.base_url
    else:
        child = subprocess.Popen([sys.executable, __file__, "--serve", "--latency", str(args.latency)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
        base_url = child.stdout.readline().strip()
    try:
        if not base_url.startswith("http"):
            raise SystemExit("the fake endpoint did not start")
        ideal = args.concurrency / args.latency
        print(f"# {args.n} calls, concurrency {args.concurrency}, latency {args.latency * 1000:.0f} ms, "
              f"ideal {ideal:.0f} calls/s; {args.server} fake endpoint; cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
        results = []
        pg = None
        if args.postgres:
            from ragrouter.db.pgtemp import TempPostgres

            pg = TempPostgres().start()
        for rep in range(args.repeat):
            for mode in [m for m in args.modes.split(",") if m]:
                results.append(bench_gateway(base_url, mode, args.n, args.concurrency, f"{mode}{rep}"))
                if pg is not None:
                    results.append(bench_gateway(base_url, mode, args.n, args.concurrency, f"{mode}{rep}pg", pg))
            if not args.no_baselines:
                results.append(bench_openai(base_url, args.n, args.concurrency))
                results.append(bench_httpx(base_url, args.n, args.concurrency))
                results.append(bench_stdlib(base_url, args.n, args.concurrency))
        for r in results:
            r["calls_per_s"] = r["n"] / r["wall_s"]
            r["ratio_to_ideal"] = r["calls_per_s"] / ideal
            if args.json:
                print(json.dumps(r))
            else:
                extra = f"  flush {r['flush_s'] * 1000:.0f} ms" if "flush_s" in r else ""
                print(f"{r['what']:<28} {r['calls_per_s']:7.1f} calls/s  ratio {r['ratio_to_ideal']:.3f}  "
                      f"cpu {r['cpu_ms_per_call']:.2f} ms/call{extra}")
        if pg is not None:
            pg.stop()
    finally:
        if lean is not None:
            lean.stop()
        if child is not None:
            child.stdin.close()
            child.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
