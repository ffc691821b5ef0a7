"""Does stopping a cell when its answer is known keep its error rate, and what does it save?

A seeded simulation of paired correct/incorrect outcomes for the five paradigms of a cell,
run through the rule ``run --until-decided`` uses (``ragrouter.decisions.sequential.step``,
one look after every batch):

* ``type1_error`` — all paradigms equally good (each Table 2 cell's mean rate for all five):
  the share of sequences that ever call a winner. Must be ≤ α (0.05) within Monte-Carlo error.
* ``naive_type1_error`` — the same sequences judged after every batch by the report's
  fixed-N rule (the leader against the runner-up, exact McNemar p < 0.05): what peeking does
  to a test that was not built for it; ``naive_pair_type1_error`` the same for two equal
  paradigms compared alone (the leader-vs-runner-up rule among five is itself conservative,
  the runner-up being the closest rival).
* ``power`` and ``runs_saved`` on realistic truths: the correct rates of the paper's Table 2
  (each corpus × query type × backbone cell, 24 in all). ``power`` = the share of sequences
  that end *decided* on a paradigm within 2 points of the best. ``runs_saved`` = 1 − (mean
  paradigm runs of the sequential rule) / (5 × N_fixed), where N_fixed is the smallest number
  of queries at which running all five paradigms and naming the highest observed rate names a
  paradigm within 2 points of the best as often as the sequential rule does (the rule names its
  winner when decided, else its leader when the queries run out). The fixed design is simulated
  past the cell's 600 queries (up to ``N_FIXED_MAX``, from the same truth) because a rule that
  names the best more often within 600 queries than the fixed design does at 600 is matched by a
  fixed N above 600; when no N up to ``N_FIXED_MAX`` reaches that probability, N_fixed is
  ``N_FIXED_MAX`` (a lower bound: the saving shown is then an underestimate) and the row says so.

Stated assumptions: Table 2 reports four paradigms; LLM-only, not in it, is set to half the
cell's lowest rate. Outcomes of one query are correlated across paradigms through a Gaussian
copula with latent correlation ρ = 0.5 (a hard question tends to fail everywhere). A cell has at
most 600 queries (the paper's 7,727 queries over 12 corpus × type cells: ~644 each).

    .venv/bin/python benchmarks/bench_sequential.py --quick --json   # ≤ 2 min on 2 cores
    .venv/bin/python benchmarks/bench_sequential.py                  # 1,000 sequences a cell, every null
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from scipy.stats import binom, norm  # noqa: E402

from ragrouter.decisions.sequential import Settings, step  # noqa: E402

PARADIGMS = ["llm_only", "naive", "graph", "hybrid", "iterative"]
TYPES = ["factual", "reasoning", "summary"]
# Table 2 of the paper: NaiveRAG, GraphRAG, HybridRAG, IterativeRAG per corpus and type (%).
TABLE2 = {
    "DeepSeek-V3": {
        "MuSiQue": [(11.1, 28.3, 29.4), (90.2, 22.5, 20.6), (83.7, 32.8, 30.2), (10.3, 21.8, 21.2)],
        "QuALITY": [(83.7, 33.8, 17.0), (70.7, 20.4, 19.8), (80.0, 20.4, 14.8), (67.0, 17.1, 16.2)],
        "Legal": [(54.9, 11.2, 39.1), (61.6, 6.7, 29.1), (72.2, 11.8, 34.6), (49.5, 12.4, 30.4)],
        "Medical": [(63.1, 63.5, 49.1), (55.0, 56.0, 43.6), (67.8, 64.0, 54.0), (62.1, 67.8, 56.1)],
    },
    "LLaMA-3.1-8B": {
        "MuSiQue": [(10.3, 7.9, 12.0), (84.4, 9.7, 11.4), (79.9, 12.1, 13.9), (12.3, 6.0, 6.8)],
        "QuALITY": [(69.2, 10.9, 1.4), (44.7, 9.5, 2.5), (70.3, 15.6, 2.5), (62.3, 11.5, 1.4)],
        "Legal": [(50.3, 10.7, 22.8), (55.4, 7.4, 19.7), (63.8, 13.1, 24.2), (48.7, 10.1, 12.6)],
        "Medical": [(52.1, 37.9, 30.1), (48.1, 33.6, 31.8), (55.7, 39.9, 33.9), (47.5, 44.6, 27.3)],
    },
}
RHO = 0.5
N_MAX = 600
N_FIXED_MAX = 2400  # the fixed design's queries: more than a cell has (see the module docstring)
GOOD = 0.02  # a named paradigm within 2 points of the best counts as the best


def cells() -> list[dict]:
    out = []
    for model, corpora in TABLE2.items():
        for corpus, rows in corpora.items():
            for t, qtype in enumerate(TYPES):
                four = [rows[i][t] / 100 for i in range(4)]
                out.append({"model": model, "corpus": corpus, "qtype": qtype,
                            "rates": [min(four) / 2] + four})
    return out


def outcomes(rates, reps: int, n: int, rho: float, rng) -> np.ndarray:
    """(reps, n, K) booleans: query i's latent difficulty is shared by the paradigms."""
    k = len(rates)
    z = rng.standard_normal((reps, n, 1))
    e = rng.standard_normal((reps, n, k))
    latent = np.sqrt(rho) * z + np.sqrt(1 - rho) * e
    return latent < norm.ppf(np.asarray(rates))[None, None, :]


def sequential(x: np.ndarray, settings: Settings, rng) -> dict:
    """Run the rule over outcome arrays ``x`` (reps, n, K): per sequence its state, the
    paradigm it names, the queries and paradigm runs it used."""
    reps, n, K = x.shape
    b = settings.batch
    n10 = np.zeros((reps, K, K), dtype=np.int64)
    both = np.zeros((reps, K, K), dtype=np.int64)
    correct = np.zeros((reps, K), dtype=np.int64)
    asked = np.zeros((reps, K), dtype=np.int64)
    active = np.ones((reps, K), dtype=bool)
    state = np.zeros(reps, dtype=np.int64)
    runs = np.zeros(reps, dtype=np.int64)
    queries = np.zeros(reps, dtype=np.int64)
    for start in range(0, n, b):
        going = state == 0
        if not going.any():
            break
        xb = x[going, start:start + b, :]
        act = active[going]
        xa = xb & act[:, None, :]
        nb = xb.shape[1]
        pair = act[:, :, None] & act[:, None, :]
        n10[going] += np.einsum("rij,rik->rjk", xa.astype(np.int64), (~xb & act[:, None, :]).astype(np.int64)) * pair
        both[going] += nb * pair
        correct[going] += xa.sum(axis=1)
        asked[going] += nb * act
        runs[going] += nb * act.sum(axis=1)
        queries[going] += nb
        rem, st, _, _ = step(n10[going], both[going], act, settings,
                             horizon=np.full(int(going.sum()), n), n_done=queries[going])
        active[going] = rem
        state[going] = st
    rate = np.where(active, correct / np.maximum(asked, 1), -1.0) + rng.random((reps, K)) * 1e-9  # ties at random
    named = rate.argmax(axis=1)
    return {"state": state, "named": named, "runs": runs, "queries": queries}


def fixed_good(x: np.ndarray, rates, grid, rng) -> dict[int, float]:
    """P(the highest observed rate over the first N queries, all K paradigms, is a good one)."""
    good = np.asarray(rates) >= max(rates) - GOOD
    cum = x.cumsum(axis=1)
    out = {}
    for n in grid:
        c = cum[:, n - 1, :] + rng.random((x.shape[0], x.shape[2])) * 1e-3  # ties at random
        out[n] = float(good[c.argmax(axis=1)].mean())
    return out


def naive_peeking(x: np.ndarray, batch: int, alpha: float = 0.05) -> np.ndarray:
    """Per sequence: did the report's rule (leader vs runner-up, exact McNemar p < α) call a
    winner at any look after a batch?"""
    reps, n, K = x.shape
    called = np.zeros(reps, dtype=bool)
    xi = x.astype(np.int64)
    for end in range(batch, n + 1, batch):
        part = xi[:, :end, :]
        corr = part.sum(axis=1)
        order = np.argsort(-corr, axis=1, kind="stable")
        lead, second = order[:, 0], order[:, 1]
        r = np.arange(reps)
        a, c = part[r, :, lead], part[r, :, second]
        bb = (a & (1 - c)).sum(axis=1)
        cc = ((1 - a) & c).sum(axis=1)
        m = bb + cc
        p = np.where(m > 0, np.minimum(1.0, 2 * binom.cdf(np.minimum(bb, cc), m, 0.5)), 1.0)
        tie = corr[r, lead] == corr[r, second]
        called |= (p < alpha) & ~tie
    return called


def run_cell(cell: dict, reps: int, settings: Settings, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    rates = cell["rates"]
    x = outcomes(rates, reps, N_FIXED_MAX, RHO, rng)
    seq = sequential(x[:, :N_MAX], settings, rng)
    good = np.asarray(rates) >= max(rates) - GOOD
    named_good = good[seq["named"]]
    p_seq = float(named_good.mean())
    grid = list(range(settings.batch, N_FIXED_MAX + 1, settings.batch))
    fixed = fixed_good(x, rates, grid, rng)
    reached = [n for n in grid if fixed[n] >= p_seq]
    n_fixed = reached[0] if reached else N_FIXED_MAX
    mean_runs = float(seq["runs"].mean())
    return {**{k: cell[k] for k in ("model", "corpus", "qtype")},
            "rates": [round(r, 3) for r in rates],
            "power": float(((seq["state"] == 1) & named_good).mean()),
            "decided": float((seq["state"] == 1).mean()),
            "futile": float((seq["state"] == 3).mean()),
            "equivalent": float((seq["state"] == 2).mean()),
            "names_good": p_seq,
            "mean_queries": float(seq["queries"].mean()),
            "mean_runs": mean_runs,
            "n_fixed": n_fixed,
            "n_fixed_is_bound": not reached,
            "runs_saved": 1 - mean_runs / (len(rates) * n_fixed)}


def run_null(cell: dict, reps: int, settings: Settings, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    p = float(np.mean(cell["rates"]))
    x = outcomes([p] * len(cell["rates"]), reps, N_MAX, RHO, rng)
    seq = sequential(x, settings, rng)
    return {"rate": p, "called": int((seq["state"] == 1).sum()), "reps": reps,
            "naive_called": int(naive_peeking(x, settings.batch).sum()),
            "naive_pair_called": int(naive_peeking(x[:, :, :2], settings.batch).sum())}


def main() -> None:
    quick = "--quick" in sys.argv
    settings = Settings()
    t0 = time.monotonic()
    all_cells = cells()
    reps = 300 if quick else 1000
    null_reps = 400 if quick else 1000
    null_cells = all_cells[::4] if quick else all_cells  # quick: 6 of the 24 rates
    rows = [run_cell(c, reps, settings, seed=i) for i, c in enumerate(all_cells)]
    nulls = [run_null(c, null_reps, settings, seed=1000 + i) for i, c in enumerate(null_cells)]
    called = sum(r["called"] for r in nulls)
    total = sum(r["reps"] for r in nulls)
    naive = sum(r["naive_called"] for r in nulls)
    naive_pair = sum(r["naive_pair_called"] for r in nulls)
    type1 = called / total
    out = {
        "settings": {"alpha": settings.alpha, "margin": settings.margin, "prior": settings.prior,
                     "batch": settings.batch, "rho": RHO, "n_max": N_MAX, "n_fixed_max": N_FIXED_MAX, "reps": reps, "null_reps": null_reps,
                     "good_within": GOOD, "quick": quick},
        "type1_error": type1,
        "type1_mc_se": float(np.sqrt(max(type1, 1e-9) * (1 - type1) / total)),
        "naive_type1_error": naive / total,
        "naive_pair_type1_error": naive_pair / total,
        "null_sequences": total,
        "runs_saved": float(np.mean([r["runs_saved"] for r in rows])),
        "runs_saved_median": float(np.median([r["runs_saved"] for r in rows])),
        "runs_saved_total": 1 - sum(r["mean_runs"] for r in rows) / sum(5 * r["n_fixed"] for r in rows),
        "power": float(np.mean([r["power"] for r in rows])),
        "cells": rows,
        "seconds": round(time.monotonic() - t0, 1),
    }
    if "--json" in sys.argv:
        print(json.dumps(out))
        return
    print(f"type I {out['type1_error']:.4f} (MC se {out['type1_mc_se']:.4f}, {total} null sequences); "
          f"naive peeking {out['naive_type1_error']:.4f} (two equal paradigms alone: "
          f"{out['naive_pair_type1_error']:.4f})")
    print(f"runs saved: mean over cells {out['runs_saved']:.1%}, median {out['runs_saved_median']:.1%}, "
          f"of all runs {out['runs_saved_total']:.1%}; "
          f"mean power {out['power']:.1%}  ({out['seconds']} s)")
    print("| backbone | corpus | type | rates (llm_only, naive, graph, hybrid, iterative) | power | names good | "
          "mean queries | mean runs | N fixed | runs saved |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        nf = f"≥{r['n_fixed']}" if r["n_fixed_is_bound"] else str(r["n_fixed"])
        print(f"| {r['model']} | {r['corpus']} | {r['qtype']} | {', '.join(f'{x * 100:.1f}' for x in r['rates'])} | "
              f"{r['power']:.2f} | {r['names_good']:.2f} | {r['mean_queries']:.0f} | {r['mean_runs']:.0f} | {nf} | "
              f"{r['runs_saved']:.0%} |")


if __name__ == "__main__":
    main()
