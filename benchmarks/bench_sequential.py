"""The ε-best rule of ``run --until-decided``: does it keep its level, how often does it make a
correct claim, what does it save, and does ``plan`` size it truthfully?

Seeded simulations of paired correct/incorrect outcomes (``ragrouter.decisions.simulate``: a
Gaussian copula with latent correlation ρ between the paradigms of a query) run through the
rule's own code (``ragrouter.decisions.sequential``), a look after every batch, at most
``N_MAX`` queries a cell. Truths: the paper's Table 2 (24 corpus × type × backbone cells; Table
2 has four paradigms, LLM-only is set to half the cell's lowest rate) and planted gaps (best
0.60, runner-up 5, 10 or 20 points behind, the rest 5, 10, 15 points further down), each at
ρ = 0 and 0.5. Figures per truth:

* ``type1_error`` — all paradigms equal (each Table 2 cell's mean rate for all five): the share
  of sequences that end *decided* (a claim that one paradigm is strictly best). Must be ≤ α.
  ``wrong_elimination`` — the share with at least one paradigm eliminated there (each
  elimination is a claim at α on its own; this is all of them together).
* ``power`` — P(correct claim): the sequence ends decided on the best paradigm, or ε-best on a
  paradigm within ε of the best, within ``N_MAX`` queries. An undecided leader is never a
  success. ``false_claim`` — the sequence made a claim that is wrong.
* runs saved at **equal probability of a correct claim** against two fixed designs (all K
  paradigms on the first N queries, one look; simulated up to ``N_FIXED_MAX`` queries from the
  same truth): (A) the report's test, leader against runner-up by exact McNemar at α, a
  correct claim when it rejects and the leader is within ε of the best; (B) the rule's own
  claim at N (every other paradigm's one-sided paired z-test of "leader − k ≤ −ε" at α/K).
  The definition: a user does not know a cell's gaps before running it, so a fixed design runs
  the same N in every cell of the table; N_A (N_B) is the smallest N at which design A (B)
  makes a correct claim, averaged over the table's cells, at least as often as the rule does
  averaged over the same cells; runs saved = 1 − (the rule's paradigm runs summed over the
  cells) / (cells × K × N). Per cell the same matching is shown too (N where the fixed design
  alone reaches the rule's probability in that cell; ≥ when it never does by N_FIXED_MAX).
* ``plan_coverage`` — on each planted-gap truth, ``plan``'s sizing
  (``simulate.size_rule``, its own seed, given the truth's rates and the best/runner-up
  discordance as a pilot would measure them) names N for power 0.8; a fresh simulation of the
  rule with horizon N must make a correct claim 0.75–0.85 of the time.

    .venv/bin/python benchmarks/bench_sequential.py --quick --json   # ≤ 3 min on one core
    .venv/bin/python benchmarks/bench_sequential.py                  # 1,000 sequences a truth
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from ragrouter.decisions import simulate as sm  # noqa: E402
from ragrouter.decisions.sequential import Settings  # noqa: E402

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
N_MAX = 600           # queries a cell has (the paper's 7,727 queries over 12 corpus × type cells: ~644 each)
N_FIXED_MAX = 2400    # the fixed designs' queries: more than a cell has (see the docstring)
RHOS = (0.5, 0.0)
GAPS = (0.05, 0.10, 0.20)
PLAN_POWER = 0.8


def cells() -> list[dict]:
    out = []
    for model, corpora in TABLE2.items():
        for corpus, rows in corpora.items():
            for t, qtype in enumerate(TYPES):
                four = [rows[i][t] / 100 for i in range(4)]
                out.append({"model": model, "corpus": corpus, "qtype": qtype, "rates": [min(four) / 2] + four})
    return out


def planted(gap: float) -> list[float]:
    return [0.60, 0.60 - gap, 0.55 - gap, 0.50 - gap, 0.45 - gap]


def outcomes(rates, reps, n, rho, rng):
    return sm.outcomes(rates, reps, n, rho, rng)


def run_truth(rates, rho: float, reps: int, settings: Settings, seed: int, fixed: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    x = sm.outcomes(rates, reps, N_FIXED_MAX if fixed else N_MAX, rho, rng)
    res = sm.run_rule(x[:, :N_MAX], settings)
    ok = sm.correct_claim(res, rates, settings.epsilon)
    claimed = (res["state"] == 1) | (res["state"] == 2)
    r = np.asarray(rates)
    best = r >= r.max() - 1e-12
    out = {"rates": [round(v, 3) for v in rates], "rho": rho, "power": float(ok.mean()),
           "false_claim": float((claimed & ~ok).mean()), "decided": float((res["state"] == 1).mean()),
           "eps_best": float((res["state"] == 2).mean()), "futile": float((res["state"] == 3).mean()),
           "best_eliminated": float((res["eliminated"] & best[None]).any(axis=1).mean()),
           "mean_queries": float(res["stop"].mean()), "mean_runs": float(res["runs"].mean())}
    if fixed:
        grid = np.arange(settings.batch, N_FIXED_MAX + 1, settings.batch)
        f = sm.fixed_designs(x, rates, grid, settings, rng)
        out["_fixed"] = f
        for key, name in (("leader", "a"), ("same_claim", "b")):
            n, bound = sm.matching_n(grid, f[key], out["power"])
            out[f"n_fixed_{name}"] = n
            out[f"n_fixed_{name}_is_bound"] = bound
            out[f"runs_saved_{name}"] = 1 - out["mean_runs"] / (len(rates) * n)
    return out


def table_saving(rows: list[dict], key: str, grid) -> tuple[int, bool, float]:
    """N and runs saved of a fixed design matched to the rule's mean P(correct claim) over rows."""
    target = float(np.mean([r["power"] for r in rows]))
    mean_curve = np.mean([r["_fixed"][key] for r in rows], axis=0)
    n, bound = sm.matching_n(grid, mean_curve, target)
    runs = sum(r["mean_runs"] for r in rows)
    return n, bound, 1 - runs / (len(rows) * len(PARADIGMS) * n)


def run_null(rate: float, rho: float, reps: int, settings: Settings, seed: int) -> dict:
    x = sm.outcomes([rate] * len(PARADIGMS), reps, N_MAX, rho, np.random.default_rng(seed))
    res = sm.run_rule(x, settings)
    return {"rate": rate, "rho": rho, "reps": reps, "decided": int((res["state"] == 1).sum()),
            "wrong_elimination": int(res["eliminated"].any(axis=1).sum())}


def coverage(gap: float, rho: float, settings: Settings, reps: int, plan_reps: int, seed: int) -> dict:
    rates = planted(gap)
    psi = sm.discordance(rates[0], rates[1], rho)
    size = sm.size_rule(rates, psi, settings, PLAN_POWER, reps=plan_reps, seed=seed)
    got = sm.rule_at(rates, rho, size["n"], settings, reps, seed + 7919) if size["n"] else None
    return {"gap": gap, "rho": rho, "discordance": round(psi, 3), "plan_n": size["n"],
            "plan_mean_runs": size["mean_runs"], "fixed_exact_n": size["fixed_exact_n"],
            "power_at_plan_n": None if got is None else got["power"],
            "within_5_points": got is not None and abs(got["power"] - PLAN_POWER) <= 0.05}


def main() -> None:
    quick = "--quick" in sys.argv
    settings = Settings()
    t0 = time.monotonic()
    reps = 300 if quick else 1000
    null_reps = 500 if quick else 2000
    grid = np.arange(settings.batch, N_FIXED_MAX + 1, settings.batch)
    table = {rho: [] for rho in RHOS}
    for j, rho in enumerate(RHOS):
        for i, c in enumerate(cells()):
            row = run_truth(c["rates"], rho, reps, settings, seed=100 * j + i)
            table[rho].append({**{k: c[k] for k in ("model", "corpus", "qtype")}, **row})
    planted_rows = [{"gap": g, **run_truth(planted(g), rho, reps, settings, seed=5000 + 10 * j + i)}
                    for j, rho in enumerate(RHOS) for i, g in enumerate(GAPS)]
    null_cells = cells()[::4] if quick else cells()
    nulls = [run_null(float(np.mean(c["rates"])), rho, null_reps, settings, seed=9000 + 100 * j + i)
             for j, rho in enumerate(RHOS) for i, c in enumerate(null_cells)]
    cov = [coverage(g, rho, settings, 600 if quick else 2000, 300 if quick else 1000, seed=700 + i)
           for i, (g, rho) in enumerate((g, rho) for rho in RHOS for g in GAPS)]
    total = sum(r["reps"] for r in nulls)
    summary = {}
    for rho in RHOS:
        na, na_bound, saved_a = table_saving(table[rho], "leader", grid)
        nb, nb_bound, saved_b = table_saving(table[rho], "same_claim", grid)
        summary[str(rho)] = {"power": float(np.mean([r["power"] for r in table[rho]])),
                             "false_claim": float(np.mean([r["false_claim"] for r in table[rho]])),
                             "mean_runs": float(np.mean([r["mean_runs"] for r in table[rho]])),
                             "n_fixed_leader": na, "n_fixed_leader_is_bound": na_bound,
                             "runs_saved_vs_fixed_leader": saved_a,
                             "n_fixed_same_claim": nb, "n_fixed_same_claim_is_bound": nb_bound,
                             "runs_saved_vs_fixed_same_claim": saved_b,
                             "per_cell_runs_saved_vs_fixed_leader_median":
                                 float(np.median([r["runs_saved_a"] for r in table[rho]]))}
    main_rho = str(RHOS[0])
    for rows in list(table.values()) + [planted_rows]:
        for r in rows:
            r.pop("_fixed", None)
    out = {
        "settings": {"alpha": settings.alpha, "epsilon": settings.epsilon, "batch": settings.batch,
                     "futility_z": settings.futility_z, "n_max": N_MAX, "n_fixed_max": N_FIXED_MAX, "reps": reps,
                     "null_reps": null_reps, "quick": quick},
        "type1_error": sum(r["decided"] for r in nulls) / total,
        "wrong_elimination_all_equal": sum(r["wrong_elimination"] for r in nulls) / total,
        "null_sequences": total,
        "power": summary[main_rho]["power"],
        "runs_saved_vs_fixed_leader": summary[main_rho]["runs_saved_vs_fixed_leader"],
        "runs_saved_vs_fixed_same_claim": summary[main_rho]["runs_saved_vs_fixed_same_claim"],
        "by_rho": summary,
        "plan_coverage": all(c["within_5_points"] for c in cov),
        "coverage": cov,
        "planted": planted_rows,
        "cells": table,
        "seconds": round(time.monotonic() - t0, 1),
    }
    if "--json" in sys.argv:
        print(json.dumps(out))
        return
    print(f"type I {out['type1_error']:.4f} ({total} null sequences; some elimination "
          f"{out['wrong_elimination_all_equal']:.4f}); {out['seconds']} s")
    print("| truth | ρ | P(correct claim) | false claim | mean runs | N_A (fixed leader) | saved vs A | "
          "N_B (same claim) | saved vs B |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rho in RHOS:
        s = summary[str(rho)]
        print(f"| Table 2, 24 cells (mean) | {rho} | {s['power']:.3f} | {s['false_claim']:.3f} | {s['mean_runs']:.0f} | "
              f"{'≥' if s['n_fixed_leader_is_bound'] else ''}{s['n_fixed_leader']} | "
              f"{s['runs_saved_vs_fixed_leader']:.1%} | {'≥' if s['n_fixed_same_claim_is_bound'] else ''}"
              f"{s['n_fixed_same_claim']} | {s['runs_saved_vs_fixed_same_claim']:.1%} |")
    for r in planted_rows:
        print(f"| planted gap {r['gap'] * 100:.0f} pts | {r['rho']} | {r['power']:.3f} | {r['false_claim']:.3f} | "
              f"{r['mean_runs']:.0f} | {'≥' if r['n_fixed_a_is_bound'] else ''}{r['n_fixed_a']} | "
              f"{r['runs_saved_a']:.1%} | {'≥' if r['n_fixed_b_is_bound'] else ''}{r['n_fixed_b']} | "
              f"{r['runs_saved_b']:.1%} |")
    print()
    print("| gap | ρ | discordance | plan's N | plan's mean runs | exact McNemar N | P(correct claim) at plan's N |")
    print("|---|---|---|---|---|---|---|")
    for c in cov:
        print(f"| {c['gap'] * 100:.0f} pts | {c['rho']} | {c['discordance']} | {c['plan_n']} | "
              f"{c['plan_mean_runs']:.0f} | {c['fixed_exact_n']} | {c['power_at_plan_n']} |")
    print()
    print("| backbone | corpus | type | rates | ρ | P(correct claim) | mean runs | N_A | N_B |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rho in RHOS:
        for r in table[rho]:
            print(f"| {r['model']} | {r['corpus']} | {r['qtype']} | {', '.join(f'{v * 100:.1f}' for v in r['rates'])} | "
                  f"{rho} | {r['power']:.2f} | {r['mean_runs']:.0f} | {'≥' if r['n_fixed_a_is_bound'] else ''}"
                  f"{r['n_fixed_a']} | {'≥' if r['n_fixed_b_is_bound'] else ''}{r['n_fixed_b']} |")


if __name__ == "__main__":
    main()
