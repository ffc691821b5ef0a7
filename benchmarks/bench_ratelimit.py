"""Rate limits: the gateway against a fake endpoint that enforces requests/min and tokens/min.

The fake server (tests/fake_openai.py, ``requests_per_minute`` / ``tokens_per_minute`` over a
sliding 60 s window) answers 429 beyond its limits. The backend is configured with the same
limits; threads keep asking distinct requests (prompts of 80-480 tokens, ``max_tokens`` 120,
so both limits bind at times) for ``--seconds``. Reported: the 429s the server sent (goal 0),
and the share of the allowed rate used over the run, for requests and for tokens (the binding
one should be >= 90 %).

    .venv/bin/python benchmarks/bench_ratelimit.py --seconds 120 --rpm 60 --tpm 20000
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--rpm", type=int, default=60)
    ap.add_argument("--tpm", type=int, default=20000)
    ap.add_argument("--latency", type=float, default=0.8)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--no-limits", action="store_true", help="do not configure the limits on the backend")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import numpy as np

    from ragrouter.config import Config
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate
    from ragrouter.llm.backends import GatewayError
    from ragrouter.llm.gateway import Gateway
    from tests.fake_openai import FakeOpenAI

    rng = np.random.default_rng(0)
    words = "alpha beta gamma delta river mountain treaty court patient dose protein city".split()
    os.environ.setdefault("RAGROUTER_BENCH_KEY", "bench")
    with FakeOpenAI(latency_s=args.latency, requests_per_minute=args.rpm, tokens_per_minute=args.tpm) as srv, \
            tempfile.TemporaryDirectory() as tmp:
        data = copy.deepcopy(Config.load().data)
        spec = {"kind": "openai", "base_url": srv.base_url, "model": "bench-rl", "api_key_env": "RAGROUTER_BENCH_KEY",
                "concurrency": args.concurrency, "timeout_s": 60, "retries": 5}
        if not args.no_limits:
            spec.update(requests_per_minute=args.rpm, tokens_per_minute=args.tpm)
        data["backends"] = {"rl": spec}
        data["roles"] = {"generators": ["rl"], "extractor": "rl", "judge": "rl", "query_generator": "rl",
                         "embedder": "rl"}
        cfg = Config(data, source="<bench>")
        engine = eng.make_engine(f"duckdb:///{tmp}/rl.duckdb")
        migrate.upgrade(engine)
        stop = time.monotonic() + args.seconds
        counter = iter(range(10**9))
        lock = threading.Lock()
        errors: list[str] = []
        with Gateway(cfg, engine) as gw:
            gw.backend("rl")

            def worker(_):
                while time.monotonic() < stop:
                    with lock:
                        i = next(counter)
                        n = int(rng.integers(80, 480))
                    text = f"request {i}: " + " ".join(rng.choice(words, size=n))
                    try:
                        gw.chat("rl", [{"role": "user", "content": text}], temperature=0.1, max_tokens=120,
                                stage="bench", phase="rl")
                    except GatewayError as exc:
                        errors.append(exc.reason)

            t0 = time.monotonic()
            with ThreadPoolExecutor(args.concurrency) as pool:
                list(pool.map(worker, range(args.concurrency)))
            wall = time.monotonic() - t0
            stats = gw.stats()
        eng.dispose_all()
        log = list(srv.admitted_log)
        server = srv.stats()
    start = log[0][0] if log else 0.0
    in_run = [(t, k) for t, k in log if t < start + args.seconds]
    minutes = args.seconds / 60.0
    out = {"seconds": args.seconds, "rpm": args.rpm, "tpm": args.tpm, "latency_s": args.latency,
           "concurrency": args.concurrency, "limits_configured": not args.no_limits,
           "server_429s": server["rate_limited"], "client_errors": len(errors),
           "admitted_requests": len(in_run), "admitted_tokens": sum(k for _, k in in_run),
           "request_rate_share": round(len(in_run) / (args.rpm * minutes), 4),
           "token_rate_share": round(sum(k for _, k in in_run) / (args.tpm * minutes), 4),
           "wall_s": round(wall, 1), "gateway_retries": stats.get("retries", 0)}
    out["binding_share"] = max(out["request_rate_share"], out["token_rate_share"])
    print(json.dumps(out, indent=None if not args.json else 2))


if __name__ == "__main__":
    main()
