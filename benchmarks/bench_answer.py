"""Answer throughput: N queries × all paradigms through the real Gateway against the fake
OpenAI-compatible endpoint with a fixed per-request latency (by default the lean, calibrated
server of benchmarks/lean_endpoint.py; ``--server full`` for tests/fake_openai.py).

What runs: a synthetic corpus (chunks of real-sized text, 384-d vectors, an entity graph),
one :class:`QueryContext` per query shared by that query's paradigms, every (query, paradigm)
unit submitted, in the answer stage's order (longest expected first), to a thread pool of
concurrency × ``--threads-per-slot`` threads whose requests share one pool of ``concurrency``
slots, each waiting with its unit's expected calls left as priority (call-level scheduling, as
the stage runner does: ``ragrouter/llm/slots.py``; ``--threads-per-slot 1`` is unit-level
scheduling), a fresh DuckDB store (so every request is a cache miss on the ledger; identical
requests inside the run are served from the cache, as in production). The fake endpoint runs
in its own process, so its work does not compete with the client for the GIL, and serves at
most ``concurrency`` requests at once (the rest queue there).

Ideal time = HTTP requests actually made (chat + embeddings) × latency / concurrency: the
wall time if the endpoint were the only cost and every slot were always busy — a true lower
bound, since the endpoint never serves more than ``concurrency`` requests at once. Efficiency
= ideal / measured wall time; goal ≥ 95 %.

    .venv/bin/python benchmarks/bench_answer.py --queries 40 --concurrency 15 --latency 0.05
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

DIM = 384
N_ENTITIES = 3000
N_TRIPLES = 8000
WORDS = ("alpha beta gamma delta river mountain treaty court patient dose protein city novel ship "
         "captain harbour contract clause liability surgery tumour symptom election king queen war "
         "peace trade merchant village forest winter summer engine signal orbit planet crew").split()


def _h(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def entity_names_for(text: str, k: int = 3) -> list[str]:
    """The entities the fake extractor "finds" in a question (deterministic)."""
    rng = np.random.default_rng(_h(text))
    return [f"entity {int(i)}" for i in rng.choice(N_ENTITIES, size=k, replace=False)]


def responder(req: dict):
    """Scripted replies of the fake endpoint, by our prompts' system messages."""
    system = req["messages"][0]["content"]
    user = req["messages"][-1]["content"]
    if "named entities" in system:
        question = user.split("Question: ", 1)[-1]
        return {"entities": entity_names_for(question)}
    if "fully and correctly answers" in system:
        if "Context:" not in user:
            return {"sufficient": False, "reason": "no evidence", "sub_question": ""}
        tag = hashlib.sha256(user.encode()).hexdigest()[:8]
        return {"sufficient": False, "reason": "partial", "sub_question": f"What else about item {tag}?"}
    return "The answer, according to the passages, is the river treaty signed in winter."


def _serve(conn, latency: float) -> None:  # runs in the server process
    from tests.fake_openai import FakeOpenAI  # sets TCP_NODELAY (see its _Handler)

    with FakeOpenAI(responder=responder, latency_s=latency, embedding_dim=DIM, models=("bench-gen", "bench-embed")) as srv:
        conn.send(srv.base_url)
        while True:
            cmd = conn.recv()
            if cmd == "stats":
                conn.send(srv.stats())
            elif cmd == "reset":
                srv.reset()
                conn.send("ok")
            else:
                break


class TimedGateway:
    """Proxy that adds up the CPU time (``time.thread_time``) threads spend inside the gateway,
    so the library's own CPU per unit can be told apart from the gateway's and the HTTP client's."""

    def __init__(self, gateway):
        self.gateway = gateway
        self.local = threading.local()

    def _timed(self, fn, *args, **kwargs):
        t0, w0 = time.thread_time(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.local.cpu = getattr(self.local, "cpu", 0.0) + time.thread_time() - t0
            self.local.wall = getattr(self.local, "wall", 0.0) + time.perf_counter() - w0

    def chat(self, *args, **kwargs):
        return self._timed(self.gateway.chat, *args, **kwargs)

    def embed(self, *args, **kwargs):
        return self._timed(self.gateway.embed, *args, **kwargs)

    def take(self) -> tuple[float, float]:
        """(CPU, wall) seconds this thread spent in gateway calls since the last take()."""
        cpu, wall = getattr(self.local, "cpu", 0.0), getattr(self.local, "wall", 0.0)
        self.local.cpu = self.local.wall = 0.0
        return cpu, wall


def build_index(queries: list[str], chunks: int, chunk_words: int, seed: int):
    from tests.fake_openai import fake_embedding

    from ragrouter.llm import tokens
    from ragrouter.paradigms import CorpusIndex

    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=chunk_words)) + "." for _ in range(chunks)]
    vecs = rng.standard_normal((chunks, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    # each query gets ~25 chunks with cosine 0.45-0.95 (NaiveRetriever keeps them)
    for q in queries:
        qv = fake_embedding(q, DIM)
        for c in rng.choice(chunks, size=25, replace=False):
            a = rng.uniform(0.45, 0.95)
            noise = vecs[c] - (vecs[c] @ qv) * qv
            noise /= np.linalg.norm(noise)
            vecs[c] = a * qv + np.sqrt(1 - a * a) * noise
    names = [f"entity {i}" for i in range(N_ENTITIES)]
    evecs = np.vstack([fake_embedding(n, DIM) for n in names])
    subj = rng.integers(0, N_ENTITIES, N_TRIPLES)
    obj = (subj + rng.integers(1, 40, N_TRIPLES)) % N_ENTITIES  # local structure: PPR spreads nearby
    src = rng.integers(0, chunks, N_TRIPLES)
    triples = [(int(s), "related to", int(o), int(c) + 1) for s, o, c in zip(subj, obj, src)]
    return CorpusIndex(list(range(1, chunks + 1)), texts, [tokens.count(t) for t in texts], vecs,
                       list(range(N_ENTITIES)), names, evecs, triples, name="bench")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--concurrency", type=int, default=15, help="backend concurrency = thread pool size")
    ap.add_argument("--latency", type=float, default=0.05, help="fake endpoint latency per request (s)")
    ap.add_argument("--chunks", type=int, default=2000)
    ap.add_argument("--chunk-words", type=int, default=400, help="words per chunk (~ tokens)")
    ap.add_argument("--budget", type=int, default=None, help="retrieval.token_budget (default: config, 8000)")
    ap.add_argument("--paradigms", default="llm_only,naive,graph,hybrid,iterative,iterative_naive")
    ap.add_argument("--order", choices=("longest", "paradigm", "query"), default="longest",
                    help="unit order: longest expected first (the answer stage's order: iterative, then "
                         "graph/hybrid, then one-call paradigms), paradigm-major in the listed order, or "
                         "query-major")
    ap.add_argument("--threads-per-slot", type=int, default=None,
                    help="unit threads per backend slot (default: worker.threads_per_slot, as the answer stage; "
                         "1 = unit-level scheduling, one thread per slot)")
    ap.add_argument("--http-client", choices=("lean", "sdk"), default=None,
                    help="gateway.http_client (default: the config's, lean)")
    ap.add_argument("--server", choices=("lean", "full"), default="lean",
                    help="fake endpoint: the lean calibrated asyncio server (benchmarks/lean_endpoint.py, "
                         "default) or the tests' FakeOpenAI")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()

    from ragrouter.config import Config
    from ragrouter.db import engine as eng
    from ragrouter.db import migrate
    from ragrouter.llm.gateway import Gateway
    from ragrouter.paradigms import PARADIGMS, QueryContext

    names = args.paradigms.split(",")
    queries = [f"Question {i}: what did the {WORDS[i % len(WORDS)]} treaty say about item {i}?"
               for i in range(args.queries)]
    t0 = time.perf_counter()
    index = build_index(queries, args.chunks, args.chunk_words, seed=0)
    setup_s = time.perf_counter() - t0

    from benchmarks.lean_endpoint import Handle, start_in_process

    if args.server == "lean":
        endpoint = start_in_process(args.latency, responder, DIM, max_in_flight=args.concurrency)
    else:  # the tests' FakeOpenAI, behind the same pipe protocol
        endpoint = Handle(_serve, (args.latency,))
    base_url = endpoint.base_url

    data = copy.deepcopy(Config.load().data)
    common = {"kind": "openai", "base_url": base_url, "concurrency": args.concurrency, "retries": 0,
              "timeout_s": 60}
    data["backends"] = {"bench-gen": {**common, "model": "bench-gen"},
                        "bench-embed": {**common, "model": "bench-embed", "batch_size": 64}}
    data["roles"] = {"generators": ["bench-gen"], "extractor": "bench-gen", "judge": "bench-gen",
                     "query_generator": "bench-gen", "embedder": "bench-embed"}
    if args.http_client:
        data["gateway"]["http_client"] = args.http_client
    if args.budget is not None:
        data["retrieval"]["token_budget"] = args.budget
    cfg = Config(data, source="<bench>")

    with tempfile.TemporaryDirectory() as tmp:
        engine = eng.make_engine(f"duckdb:///{tmp}/bench.duckdb")
        migrate.upgrade(engine)
        with Gateway(cfg, engine) as real_gw:
            gw = TimedGateway(real_gw)
            contexts = {q: QueryContext(q, index, gw, cfg) for q in queries}
            if args.order == "longest":
                from ragrouter.stages.answer import expected_calls

                units = sorted([(q, p) for p in names for q in queries], key=lambda u: -expected_calls(u[1], cfg))
            elif args.order == "paradigm":
                units = [(q, p) for p in names for q in queries]
            else:
                units = [(q, p) for q in queries for p in names]
            per_paradigm: dict[str, Counter] = {p: Counter() for p in names}

            from ragrouter.llm.slots import unit_priority
            from ragrouter.stages.answer import expected_calls

            tps = args.threads_per_slot or int(cfg.get("worker.threads_per_slot", 1) or 1)
            threads = args.concurrency * max(1, tps)
            weight = {p: expected_calls(p, cfg) for p in names}
            seq = {u: i for i, u in enumerate(units)}

            def work(unit):
                q, p = unit
                gw.take()
                t0 = time.thread_time()
                with unit_priority(weight[p], seq[unit]):  # as the stage runner does
                    res = PARADIGMS[p].run(q, contexts[q], index, gw, "bench-gen", cfg)
                total = time.thread_time() - t0
                inside, in_call = gw.take()
                return p, res, total - inside, inside, in_call

            # warm up (imports, HTTP clients, the ledger writer) outside the timed section
            real_gw.chat("bench-gen", [{"role": "user", "content": "warm up"}], temperature=0.0, max_tokens=5,
                         stage="bench", phase="warmup")
            real_gw.embed("bench-embed", ["warm up"], stage="bench", phase="warmup")
            real_gw.flush()
            endpoint.reset()
            # one endpoint, one pool of `concurrency` request slots for chat and embeddings alike
            # (the two backends would otherwise allow 2 × concurrency in flight together)
            real_gw.backend("bench-gen"), real_gw.backend("bench-embed")
            sem = real_gw._sems["bench-embed"] = real_gw._sems["bench-gen"]
            busy0 = sem.busy_seconds()
            t1 = time.perf_counter()
            lib_cpu = gw_cpu = in_calls = 0.0
            cpu0 = time.process_time()
            with ThreadPoolExecutor(threads) as pool:
                for p, res, lib, inside, in_call in pool.map(work, units):
                    lib_cpu += lib
                    gw_cpu += inside
                    in_calls += in_call
                    c = per_paradigm[p]
                    c["runs"] += 1
                    c["calls"] += len(res.calls)
                    c["context_tokens"] += res.context_tokens
                    c["iterations"] += res.iterations
                    c["tokens"] += res.ret_in + res.ret_out + res.gen_in + res.gen_out
                    c["lib_us"] += int(1e6 * lib)
                    c["gw_us"] += int(1e6 * inside)
            wall = time.perf_counter() - t1
            slot_busy = sem.busy_seconds() - busy0
            process_cpu = time.process_time() - cpu0
            real_gw.flush()
            gstats = real_gw.stats()
        eng.dispose_all()
    sstats = endpoint.stats()
    endpoint.stop()

    requests = sstats["by_path"].get("/v1/chat/completions", 0) + sstats["by_path"].get("/v1/embeddings", 0)
    ideal = requests * args.latency / args.concurrency
    out = {
        "queries": args.queries, "paradigms": names, "units": len(units), "order": args.order,
        "concurrency": args.concurrency, "threads": threads, "http_client": cfg.get("gateway.http_client"),
        "latency_s": args.latency, "server": args.server, "token_budget": cfg.get("retrieval.token_budget"),
        "chunks": args.chunks, "entities": N_ENTITIES, "triples": N_TRIPLES, "index_build_s": round(setup_s, 2),
        "http_requests": sstats["by_path"], "peak_in_flight": sstats["peak_in_flight"],
        "gateway_cache_hits": gstats.get("cache_hits", 0),
        "wall_s": round(wall, 3), "ideal_s": round(ideal, 3), "efficiency": round(ideal / wall, 4),
        "units_per_s": round(len(units) / wall, 1),
        # slot-seconds the backend's request slots were held (llm/slots.py) over concurrency × wall;
        # with more threads than slots the threads' time in gateway calls includes slot waits
        "slot_utilisation": round(slot_busy / (args.concurrency * wall), 4),
        "thread_time_in_calls": round(in_calls / (threads * wall), 4),
        "mean_call_s": round(in_calls / max(requests, 1), 4),
        "client_cpu_s": round(process_cpu, 3),
        "library_cpu_ms_per_unit": round(1000 * lib_cpu / len(units), 2),
        "gateway_cpu_ms_per_request": round(1000 * gw_cpu / max(requests, 1), 2),
        "load_average": os.getloadavg()[0],
        "per_paradigm": {p: {"runs": c["runs"], "avg_calls": round(c["calls"] / max(c["runs"], 1), 2),
                             "avg_context_tokens": round(c["context_tokens"] / max(c["runs"], 1)),
                             "avg_iterations": round(c["iterations"] / max(c["runs"], 1), 2),
                             "avg_tokens": round(c["tokens"] / max(c["runs"], 1)),
                             "library_cpu_ms": round(c["lib_us"] / 1000 / max(c["runs"], 1), 2),
                             "gateway_cpu_ms": round(c["gw_us"] / 1000 / max(c["runs"], 1), 2)}
                         for p, c in per_paradigm.items()},
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{len(units)} units ({args.queries} queries × {len(names)} paradigms, {args.order}-major), "
          f"concurrency {args.concurrency}, "
          f"latency {args.latency * 1000:.0f} ms, budget {out['token_budget']}")
    print(f"HTTP requests: {out['http_requests']} (peak in flight {out['peak_in_flight']}, "
          f"gateway cache hits {out['gateway_cache_hits']})")
    print(f"wall {wall:.2f} s, ideal {ideal:.2f} s -> efficiency {100 * ideal / wall:.1f} % "
          f"({out['units_per_s']} units/s)")
    print(f"slot utilisation {100 * out['slot_utilisation']:.1f} % (slot-seconds the {args.concurrency} request slots "
          f"were held / ({args.concurrency} × wall)); {threads} unit threads, "
          f"{100 * out['thread_time_in_calls']:.1f} % of their time inside gateway calls (incl. slot waits)")
    print(f"client CPU {process_cpu:.2f} s: library {out['library_cpu_ms_per_unit']} ms/unit (paradigms, "
          f"retrieval, packing), gateway+HTTP client {out['gateway_cpu_ms_per_request']} ms/request; "
          f"load average {out['load_average']:.1f}")
    for p, c in out["per_paradigm"].items():
        print(f"  {p:16s} calls/run {c['avg_calls']:5.2f}  ctx {c['avg_context_tokens']:6d}  "
              f"rounds {c['avg_iterations']:.2f}  tokens/run {c['avg_tokens']}  CPU ms/run: library "
              f"{c['library_cpu_ms']}, gateway {c['gateway_cpu_ms']}")


if __name__ == "__main__":
    main()
