"""Personalized PageRank per query on a MuSiQue-sized graph: ours vs networkx.pagerank.

The graph has MuSiQue's size (paper Table 8: 206,738 nodes, 276,898 edges) and a knowledge-
graph-like shape: a configuration model with power-law degrees (every node has degree >= 1,
mean 2.68, exponent fitted to that mean) topped up with degree-biased random edges to exactly
276,898 distinct edges. It is fed through ``KnowledgeGraph.from_triples`` like real triples.

Each query personalises on 20 random seeds with random weights (paper: top-20 seed entities,
p proportional to similarity). We time ``PPR.run`` (default solver ``cg``, and ``power``) at the
default ``tol=1e-10`` (L1 error bound), the one-off builds, and a few ``networkx.pagerank``
calls (they rebuild a matrix from the graph every call): at networkx's default ``tol=1e-6``
(stops when one step changes < 0.2 in L1 here: inaccurate) and at ``tol=1e-15`` (comparable
accuracy). The agreement with networkx is checked on the same queries. Figures are wall-clock
and process CPU seconds; on a shared machine the CPU figures are the steadier ones.

    python benchmarks/bench_ppr.py                            # 50 queries, 3 networkx calls
    python benchmarks/bench_ppr.py --queries 200 --nx-calls 5 --indicators --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragrouter.graph.kg import KnowledgeGraph  # noqa: E402
from ragrouter.graph.ppr import PPR, top_nodes  # noqa: E402

N_NODES, N_EDGES = 206_738, 276_898   # MuSiQue, paper Table 8
N_RELATIONS, N_CHUNKS, DIM = 44_766, 21_153, 384


class Timer:
    """Wall and process-CPU seconds of a block."""

    def __enter__(self):
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0


def kg_like_edges(n: int, m: int, seed: int, max_degree: int = 5000):
    """Exactly m distinct undirected edges, power-law degrees, no isolated node."""
    rng = np.random.default_rng(seed)
    d = np.arange(1, max_degree + 1, dtype=float)
    lo, hi = 1.5, 4.0
    for _ in range(60):  # exponent whose mean degree is 2m/n
        gamma = (lo + hi) / 2
        pmf = d ** -gamma
        pmf /= pmf.sum()
        lo, hi = (gamma, hi) if (pmf * d).sum() > 2 * m / n else (lo, gamma)
    degree = rng.choice(d.astype(np.int64), size=n, p=pmf)
    stubs = rng.permutation(np.repeat(np.arange(n), degree))
    stubs = stubs[: stubs.size - stubs.size % 2]

    def keys(a, b):
        ok = a != b
        return np.unique(np.minimum(a[ok], b[ok]).astype(np.int64) * n + np.maximum(a[ok], b[ok]))

    key = keys(stubs[0::2], stubs[1::2])
    w = degree / degree.sum()
    while key.size < m:
        need = 2 * (m - key.size)
        key = np.union1d(key, keys(rng.choice(n, need, p=w), rng.choice(n, need, p=w)))
    key = rng.permutation(key)[:m]
    return key // n, key % n, gamma


def summary(seconds: list[float]) -> dict:
    return {"median_ms": 1e3 * statistics.median(seconds),
            "mean_ms": 1e3 * statistics.fmean(seconds), "n": len(seconds)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=50, help="PPR queries per solver")
    ap.add_argument("--nx-calls", type=int, default=3, help="networkx calls at default tol")
    ap.add_argument("--seeds", type=int, default=20, help="seed nodes per query")
    ap.add_argument("--seed", type=int, default=0, help="random seed")
    ap.add_argument("--indicators", action="store_true",
                    help="also time structural + semantic indicators at paper sizes")
    ap.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = ap.parse_args()
    import networkx as nx
    import scipy.sparse as sp

    out: dict = {"load_average_at_start": os.getloadavg(), "cpus": os.cpu_count()}
    rng = np.random.default_rng(args.seed)
    a, b, gamma = kg_like_edges(N_NODES, N_EDGES, args.seed)
    names = [f"entity {i}" for i in range(N_NODES)]
    rel = rng.integers(0, N_RELATIONS, N_EDGES)
    triples = [(names[x], f"relation {r}", names[y], int(c)) for x, y, r, c in
               zip(a.tolist(), b.tolist(), rel.tolist(), rng.integers(0, N_CHUNKS, N_EDGES))]
    with Timer() as t:
        kg = KnowledgeGraph.from_triples(triples, nodes=names)
    out["kg_build_s"] = t.wall
    with Timer() as t:
        ppr = PPR(kg)
    out["ppr_build_s"] = {"wall": t.wall, "cpu": t.cpu}
    deg = kg.degree
    n_comp, labels = sp.csgraph.connected_components(kg.adjacency, directed=False)
    out["graph"] = {"nodes": kg.n_nodes, "edges": kg.n_edges, "degree_exponent": gamma,
                    "max_degree": int(deg.max()), "leaves": int((deg == 1).sum()),
                    "components": int(n_comp),
                    "lcc_ratio": float(np.bincount(labels).max() / kg.n_nodes),
                    "elimination": ppr.elimination_stats(0.85)}
    print(json.dumps(out, indent=1), flush=True)

    queries = []
    for _ in range(args.queries):
        seeds = rng.choice(kg.n_nodes, args.seeds, replace=False)
        queries.append({int(s): float(w) for s, w in zip(seeds, rng.uniform(0.4, 1.0, args.seeds))})
    results = {}
    for method in ("cg", "power"):
        wall, cpu, scores = [], [], []
        for q in queries:
            with Timer() as t:
                s = ppr.run(q, alpha=0.85, tol=1e-10, method=method)
            wall.append(t.wall)
            cpu.append(t.cpu)
            scores.append(s)
        results[method] = scores
        out[f"ours_{method}"] = {"wall": summary(wall), "cpu": summary(cpu)}
        print(method, json.dumps(out[f"ours_{method}"]), flush=True)
    out["cg_vs_power_max_abs_diff"] = float(max(np.abs(x - y).max() for x, y in
                                                zip(results["cg"], results["power"])))

    with Timer() as t:
        g = kg.to_networkx()
    out["to_networkx_s"] = t.wall
    nx_wall, nx_cpu, diffs = [], [], []
    for i in range(args.nx_calls + 1):
        tol = 1e-15 if i == args.nx_calls else 1e-6
        with Timer() as t:
            ref = nx.pagerank(g, 0.85, personalization=queries[i], tol=tol, max_iter=10000)
        ref = np.fromiter((ref[v] for v in range(kg.n_nodes)), float, kg.n_nodes)
        ours = results["cg"][i]
        entry = {"tol": tol, "wall_s": t.wall, "cpu_s": t.cpu,
                 "max_abs_diff": float(np.abs(ours - ref).max()),
                 "l1_diff": float(np.abs(ours - ref).sum()),
                 "same_top100": bool(np.array_equal(top_nodes(ours, always=queries[i]),
                                                    top_nodes(ref, always=queries[i])))}
        print("networkx", json.dumps(entry), flush=True)
        if tol == 1e-6:
            nx_wall.append(t.wall)
            nx_cpu.append(t.cpu)
        diffs.append(entry)
    out["networkx_calls"] = diffs
    out["networkx_default_tol"] = {"wall": summary(nx_wall), "cpu": summary(nx_cpu)}
    for method in ("cg", "power"):
        for clock in ("wall", "cpu"):
            out[f"speedup_{method}_{clock}"] = (
                out["networkx_default_tol"][clock]["median_ms"]
                / out[f"ours_{method}"][clock]["median_ms"])
    tight = diffs[-1]
    out["speedup_cg_cpu_vs_nx_tight_tol"] = 1e3 * tight["cpu_s"] / out["ours_cg"]["cpu"][
        "median_ms"]

    if args.indicators:
        from ragrouter.corpus import indicators

        with Timer() as t:
            out["structural_indicators"] = indicators.structural_indicators(kg)
        out["structural_indicators_s"] = {"wall": t.wall, "cpu": t.cpu}
        x = rng.normal(size=(N_CHUNKS, DIM)).astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        with Timer() as t:
            out["semantic_indicators"] = indicators.semantic_indicators(x)
        out["semantic_indicators_s"] = {"wall": t.wall, "cpu": t.cpu}
    out["load_average_at_end"] = os.getloadavg()
    print(json.dumps({k: v for k, v in out.items() if k not in ("networkx_calls",)}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
