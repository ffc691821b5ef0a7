"""`serve` under load: throughput against the ideal and the routing overhead (issue 33).

A toy corpus is answered, judged and scored on the scripted fake endpoint, an `lr` router is
trained on it (one-hot features: routing needs no upstream call), then ``cli.py serve`` is
started in its own process against an endpoint answering in ``--latency`` seconds per request:
by default the lean one of ``benchmarks/lean_endpoint.py`` in a child process (its replies leave
on time, and its CPU does not share the clients' GIL), with ``--server full`` the tests'
``FakeOpenAI`` in the benchmark's own process (a thread per connection beside the 32 clients:
its replies leave late when the clients keep the GIL, and that delay is counted as the server's
tail).
``--concurrency`` clients (the real ``openai`` client) each send ``--per-client`` distinct
questions one after another. Measured:

* throughput = completed requests / wall seconds, and the ideal = concurrency / (upstream
  calls per request × latency): what the server would do if routing, the store and the
  thread pool cost nothing;
* routing overhead per request = the time from the client sending it to the fake endpoint
  receiving the first upstream call for that question (p50 and p99, ms): the paradigm's, or
  with ``--prefetch-embedding`` (serve's default) the question's embedding sent while the
  router decides, which the paradigm's dense retrieval then joins;
* the routing decision (the reply's ``ragrouter.routing_ms``: query type, router, budget,
  measured in the server) and the time to the generation call (client send → the endpoint
  receiving the question's first chat request; p50 and p99, ms);
* tail per request = from the last upstream reply (its arrival + the latency) to the client
  having the answer: the store write and the reply (p50 and p99, ms);
* the server process' CPU ms per request, errors, and the load average at the end (the
  figures mean little on a loaded machine without it).

    .venv/bin/python benchmarks/bench_serve.py --concurrency 32 --latency 1.0 --per-client 8 [--json] [--py-spy FILE]
        [--no-prefetch-embedding] [--server lean|full]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def build(tmp: Path, srv, concurrency: int) -> dict:
    import yaml

    from ragrouter.answering import routing
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate
    from tests.test_stages_answer import fake_config, ingest, run

    url = f"duckdb:///{tmp / 'store.duckdb'}"
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    ingest(engine)
    cfg = fake_config(srv)
    cfg.data.setdefault("routers", {})["mlflow_uri"] = f"sqlite:///{tmp / 'mlflow.db'}"
    cfg.data["routers"]["encoders"] = ["onehot"]
    run(engine, cfg, "chunk", "extract", "embed", "metrics", "answer", "judge", "score")
    routing.train(engine, cfg, routing.store_dataset(engine, cfg), ["lr"], ["qc"], log=lambda m: None)
    for b in cfg.data["backends"].values():  # the gateway's slots must not be the bottleneck
        b["concurrency"] = max(int(b.get("concurrency") or 1), 2 * concurrency)
        b["timeout_s"] = 120
    (tmp / "cfg.yaml").write_text(yaml.safe_dump(cfg.data))
    eng.dispose_all()
    return {**os.environ, "RAGROUTER_DB": url, "RAGROUTER_CONFIG": str(tmp / "cfg.yaml")}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--per-client", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--py-spy", metavar="FILE", help="record the server's stacks (GIL holder) with py-spy, collapsed format, into FILE "
                    "(py-spy is not in the requirements: .venv/bin/pip install py-spy)")
    ap.add_argument("--server", choices=("lean", "full"), default="lean",
                    help="the endpoint serve calls: benchmarks/lean_endpoint.py in a child process (default) or "
                    "the tests' FakeOpenAI in this process")
    ap.add_argument("--no-prefetch-embedding", action="store_true",
                    help="serve without --prefetch-embedding (the question is embedded after routing)")
    a = ap.parse_args()

    import numpy as np
    import openai
    import yaml

    from benchmarks.lean_endpoint import start_in_process
    from tests.fake_openai import FakeOpenAI
    from tests.test_trust import judging_responder

    with contextlib.ExitStack() as stack:
        tmp_s = stack.enter_context(tempfile.TemporaryDirectory())
        srv = stack.enter_context(FakeOpenAI(responder=judging_responder, embedding_dim=32))
        tmp = Path(tmp_s)
        env = build(tmp, srv, a.concurrency)
        lean = None
        if a.server == "lean":  # the same replies and vectors (tests.fake_openai.fake_embedding), on time
            lean = stack.enter_context(start_in_process(a.latency, judging_responder, 32, log_requests=True))
            cfg = yaml.safe_load((tmp / "cfg.yaml").read_text())
            for b in cfg["backends"].values():
                b["base_url"] = lean.base_url
            (tmp / "cfg.yaml").write_text(yaml.safe_dump(cfg))
        flags = ["--no-prefetch-embedding"] if a.no_prefetch_embedding else []
        proc = subprocess.Popen([sys.executable, str(REPO / "cli.py"), "serve", "--corpus", "toy", "--port", "0", *flags],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        base = None
        while base is None:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise SystemExit(f"serve exited: {proc.stderr.read()}")
            m = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", line)
            base = m.group(1) if m else None
        spy = None
        if a.py_spy:
            spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--gil", "--format", "raw", "-r", "100",
                                    "-o", a.py_spy, "--pid", str(proc.pid)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        if lean is None:
            srv.latency_s = a.latency
        sent: dict[str, float] = {}
        done: list[float] = []
        finished: dict[str, float] = {}
        decision_ms: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()

        # clients built, and one warm-up round sent (one question per client, not counted), before
        # the clock starts: 32 clients' TLS/httpx set-up and the server's first batch (its lazy
        # loads) are start-up, not the steady throughput this measures
        clients = [openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=300)
                   for _ in range(a.concurrency)]

        def warm(i: int) -> None:
            clients[i].chat.completions.create(model="ragrouter/toy", messages=[
                {"role": "user", "content": f"Warm-up {i}: where did Marie Curie work?"}])

        warmers = [threading.Thread(target=warm, args=(i,)) for i in range(a.concurrency)]
        for t in warmers:
            t.start()
        for t in warmers:
            t.join()

        def client(i: int) -> None:
            c = clients[i]
            for j in range(a.per_client):
                q = f"Question {i}-{j}: what did Marie Curie study in Paris?"
                t0 = time.monotonic()
                with lock:
                    sent[q] = t0
                try:
                    r = c.chat.completions.create(model="ragrouter/toy", messages=[{"role": "user", "content": q}])
                    assert r.choices[0].message.content
                    with lock:
                        done.append(time.monotonic() - t0)
                        finished[q] = time.monotonic()
                        decision_ms.append(float(r.model_extra["ragrouter"]["routing_ms"]))
                except Exception as exc:  # noqa: BLE001 - counted and reported
                    with lock:
                        errors.append(f"{exc.__class__.__name__}: {exc}")

        start_log = len(srv.requests)
        if lean is not None:
            lean.reset()
        cpu0 = cpu_seconds(proc.pid)
        t_start = time.monotonic()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(a.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t_start
        cpu = cpu_seconds(proc.pid) - cpu0
        load = os.getloadavg()
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(timeout=60)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        upstream = lean.requests() if lean is not None else srv.requests[start_log:]
        first: dict[str, float] = {}
        first_chat: dict[str, float] = {}
        last: dict[str, float] = {}
        for r in upstream:
            text = json.dumps(r.get("body") or {})
            for q in sent:
                if q in text:
                    first.setdefault(q, r["t"])
                    if r["path"].endswith("/chat/completions"):
                        first_chat.setdefault(q, r["t"])
                    last[q] = r["t"]
        overhead = np.array([1000 * (first[q] - sent[q]) for q in sent if q in first])
        to_chat = np.array([1000 * (first_chat[q] - sent[q]) for q in sent if q in first_chat])

        def pct(xs, p):
            return round(float(np.percentile(xs, p)), 1) if len(xs) else None

        # after the last upstream reply (its arrival + the latency) until the client has the answer
        tail = np.array([1000 * (finished[q] - last[q] - a.latency) for q in finished if q in last])
        n = len(done)
        calls_per_request = len(upstream) / max(1, n)
        ideal = a.concurrency / (calls_per_request * a.latency)
        out = {"server": a.server, "concurrency": a.concurrency, "latency_s": a.latency, "requests": n, "errors": len(errors),
               "wall_s": round(wall, 2), "throughput_rps": round(n / wall, 2),
               "upstream_calls_per_request": round(calls_per_request, 2), "ideal_rps": round(ideal, 2),
               "throughput_over_ideal": round(n / wall / ideal, 3),
               "prefetch_embedding": not a.no_prefetch_embedding,
               "routing_overhead_ms_p50": pct(overhead, 50), "routing_overhead_ms_p99": pct(overhead, 99),
               "routing_decision_ms_p50": pct(decision_ms, 50), "routing_decision_ms_p99": pct(decision_ms, 99),
               "to_generation_call_ms_p50": pct(to_chat, 50), "to_generation_call_ms_p99": pct(to_chat, 99),
               "tail_ms_p50": pct(tail, 50), "tail_ms_p99": pct(tail, 99),
               "server_cpu_ms_per_request": round(1000 * cpu / max(1, n), 1),
               "load_average_1_5_15": [round(x, 2) for x in load], "cpu_count": os.cpu_count(),
               "first_errors": errors[:3]}
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
