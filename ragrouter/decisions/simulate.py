"""Seeded simulation of a cell's paired outcomes and of the designs that decide on them: the
rule of :mod:`ragrouter.decisions.sequential` (exactly its code, many sequences at once), and
two fixed-N designs to compare it with. ``plan`` sizes the rule with it; the benchmark
(``benchmarks/bench_sequential.py``) measures it.

Outcome model: query i has a latent difficulty z_i shared by the paradigms; paradigm k answers
it correctly when √ρ z_i + √(1−ρ) e_ik < Φ⁻¹(p_k) (a Gaussian copula with latent correlation
ρ: a hard question tends to fail everywhere). ρ is chosen to give a stated discordance (the
share of queries on which two paradigms disagree) with :func:`rho_for_discordance`.

Fixed designs (all K paradigms on the first N queries, one look):

* **leader** — the report's test: the leader against the runner-up by observed rate, exact
  McNemar (two-sided) at α; its claim "the leader is the best" counts as correct when the test
  rejects and the leader is within ε of the best (credited with the weaker ε claim);
* **same claim** — the rule's own claim at N: the leader is claimed within ε of the best when
  every other paradigm's one-sided paired z-test of "leader − k ≤ −ε" rejects at α/K.
"""

from __future__ import annotations

import math

import numpy as np

from ragrouter.decisions.sequential import Race, Settings


def outcomes(rates, reps: int, n: int, rho: float, rng) -> np.ndarray:
    """(reps, n, K) booleans from the copula above."""
    from scipy.stats import norm  # deferred: scipy.stats is ~0.6 s of start-up

    k = len(rates)
    z = rng.standard_normal((reps, n, 1))
    e = rng.standard_normal((reps, n, k))
    latent = math.sqrt(rho) * z + math.sqrt(1 - rho) * e
    return latent < norm.ppf(np.clip(np.asarray(rates, dtype=float), 1e-9, 1 - 1e-9))[None, None, :]


def discordance(p1: float, p2: float, rho: float) -> float:
    """P(one of two paradigms with rates p1, p2 right and the other wrong) under the copula."""
    from scipy.stats import multivariate_normal, norm  # deferred: scipy.stats is ~0.6 s of start-up

    a, b = norm.ppf(np.clip([p1, p2], 1e-9, 1 - 1e-9))
    both = float(multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]]).cdf([a, b])) if rho < 1 else min(p1, p2)
    return p1 + p2 - 2 * both


def rho_for_discordance(p1: float, p2: float, psi: float) -> float:
    """The copula's ρ ∈ [0, 0.99] giving discordance ``psi`` between rates p1 and p2 (the
    nearest attainable one when psi lies outside what the rates allow)."""
    lo, hi = 0.0, 0.99
    if discordance(p1, p2, lo) <= psi:
        return lo
    if discordance(p1, p2, hi) >= psi:
        return hi
    for _ in range(30):  # discordance falls as ρ grows
        mid = (lo + hi) / 2
        if discordance(p1, p2, mid) > psi:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def run_rule(x: np.ndarray, settings: Settings) -> dict:
    """The rule over outcome arrays ``x`` (reps, n, K), a look after every batch. Per sequence:
    ``state`` (0 undecided at the end, 1 decided, 2 ε-best), ``named`` (the paradigm the claim
    names; the leader when undecided), ``stop`` (queries used), ``runs`` (paradigm runs used),
    ``wrong_elim`` is filled by the caller; and ``runs_by`` [reps, looks]: runs after each look
    (for the same rule cut at a smaller horizon)."""
    reps, n, K = x.shape
    b = settings.batch
    race = Race(K, reps)
    xi = x.astype(np.int8)
    state = np.zeros(reps, dtype=np.int64)
    named = np.zeros(reps, dtype=np.int64)
    stop = np.full(reps, n, dtype=np.int64)
    correct = np.zeros((reps, K), dtype=np.int64)
    looks = list(range(0, n, b))
    runs_by = np.zeros((reps, len(looks)), dtype=np.int64)
    eliminated = np.zeros((reps, K), dtype=bool)
    runs = np.zeros(reps, dtype=np.int64)
    for t, start in enumerate(looks):
        going = np.flatnonzero(state == 0)
        if going.size:
            xb = xi[going, start:start + b, :]
            nb = xb.shape[1]
            act = race.active[going]
            n10 = np.einsum("rij,rik->rjk", xb, 1 - xb, dtype=np.int64)
            runs[going] += nb * act.sum(axis=1)
            correct[going] += xb.sum(axis=1) * act
            sub = Race(K, going.size)
            for name in ("s", "q", "n", "log_w0", "log_we", "active"):
                setattr(sub, name, getattr(race, name)[going])
            sub.add(n10, nb, settings)
            st, lead, by = sub.look(settings, correct[going], left=np.full(going.size, n - start - nb),
                                    done=np.full(going.size, start + nb))
            for name in ("s", "q", "n", "log_w0", "log_we", "active"):
                getattr(race, name)[going] = getattr(sub, name)
            eliminated[going] |= by >= 0
            state[going] = st
            named[going] = lead
            stop[going] = np.where(st > 0, start + nb, n)
        runs_by[:, t] = runs
    return {"state": state, "named": named, "stop": stop, "runs": runs, "runs_by": runs_by,
            "eliminated": eliminated, "looks": np.array([min(s + b, n) for s in looks])}


def correct_claim(result: dict, rates, epsilon: float) -> np.ndarray:
    """Per sequence: a claim was made (decided or ε-best) and it is true."""
    rates = np.asarray(rates, dtype=float)
    good = rates >= rates.max() - epsilon - 1e-12
    best_ok = rates >= rates.max() - 1e-12
    named = result["named"]
    return ((result["state"] == 2) & good[named]) | ((result["state"] == 1) & best_ok[named])


def pair_counts(x: np.ndarray, grid) -> np.ndarray:
    """n10[r, g, j, k] over the first grid[g] queries."""
    reps, n, K = x.shape
    out = np.zeros((reps, len(grid), K, K), dtype=np.int32)
    idx = np.asarray(grid) - 1
    for j in range(K):
        for k in range(K):
            if j != k:
                out[:, :, j, k] = np.cumsum(x[:, :, j] & ~x[:, :, k], axis=1, dtype=np.int32)[:, idx]
    return out


def fixed_designs(x: np.ndarray, rates, grid, settings: Settings, rng) -> dict:
    """P(correct claim) of the two fixed designs at every N of ``grid`` (see the docstring)."""
    from scipy.stats import binom, norm  # deferred: scipy.stats is ~0.6 s of start-up

    reps, n, K = x.shape
    rates = np.asarray(rates, dtype=float)
    good = rates >= rates.max() - settings.epsilon - 1e-12
    n10 = pair_counts(x, grid)
    cum = x.cumsum(axis=1, dtype=np.int32)[:, np.asarray(grid) - 1, :]           # (reps, G, K)
    lead_order = np.argsort(-(cum + rng.random(cum.shape) * 1e-3), axis=2)        # ties at random
    lead, second = lead_order[..., 0], lead_order[..., 1]
    r = np.arange(reps)[:, None]
    g = np.arange(len(grid))[None, :]
    bb = n10[r, g, lead, second]
    cc = n10[r, g, second, lead]
    m = bb + cc
    pval = np.where(m > 0, np.minimum(1.0, 2 * binom.cdf(np.minimum(bb, cc), m, 0.5)), 1.0)
    leader_ok = (pval < settings.alpha) & (bb > cc) & good[lead]
    nn = np.asarray(grid, dtype=float)[None, :, None]
    up = n10[r, g, lead, :].astype(float)                                        # (reps, G, K)
    down = n10[r, g, :, lead].astype(float)
    mean = (up - down) / nn
    var = np.maximum((up + down) / nn - mean ** 2, 1.0 / nn ** 2)
    z = (mean + settings.epsilon) / np.sqrt(var / nn)
    crit = norm.ppf(1 - settings.alpha / K)
    others = np.arange(K)[None, None, :] != lead[..., None]
    claim = np.where(others, z > crit, True).all(axis=2)
    same_ok = claim & good[lead]
    return {"grid": np.asarray(grid), "leader": leader_ok.mean(axis=0), "same_claim": same_ok.mean(axis=0)}


def matching_n(grid, prob, target: float) -> tuple[int, bool]:
    """The smallest N of ``grid`` whose probability reaches ``target``; (largest N, True) when
    none does (a lower bound)."""
    hit = np.flatnonzero(np.asarray(prob) >= target - 1e-12)
    return (int(grid[hit[0]]), False) if hit.size else (int(grid[-1]), True)


def mcnemar_exact_power(n: int, p10: float, p01: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided exact McNemar test at ``n`` paired queries with P(10) = p10
    and P(01) = p01: Σ_m P(m discordant) · P(reject | m)."""
    from scipy.stats import binom  # deferred: scipy.stats is ~0.6 s of start-up

    psi = p10 + p01
    if psi <= 0:
        return 0.0
    pi = p10 / psi
    ms = np.arange(n + 1)
    pm = binom.pmf(ms, n, psi)
    power = 0.0
    for m, w in zip(ms, pm):
        if w < 1e-12 or m == 0:
            continue
        s = np.arange(m + 1)
        pv = np.minimum(1.0, 2 * binom.cdf(np.minimum(s, m - s), m, 0.5))
        power += w * float(binom.pmf(s[pv < alpha], m, pi).sum())
    return power


def mcnemar_exact_n(delta: float, psi: float, alpha: float = 0.05, power: float = 0.8, n_max: int = 20000) -> int | None:
    """The smallest n at which the exact McNemar test (two-sided, α) has ``power`` against a
    gap ``delta`` with discordance ``psi`` (ψ never below δ); None beyond ``n_max``."""
    from scipy.stats import norm  # deferred: scipy.stats is ~0.6 s of start-up

    if not 0 < delta < 1:
        raise ValueError(f"plan: the gap must lie in (0, 1), got {delta}")
    psi = min(1.0, max(psi, delta))
    p10, p01 = (psi + delta) / 2, (psi - delta) / 2
    za, zb = norm.ppf(1 - alpha / 2), norm.ppf(power)
    guess = int((za * math.sqrt(psi) + zb * math.sqrt(max(psi - delta * delta, 0.0))) ** 2 / delta ** 2)
    lo = max(1, guess // 2)
    if mcnemar_exact_power(lo, p10, p01, alpha) >= power:
        lo = 1
    hi = max(lo + 1, guess)
    while mcnemar_exact_power(hi, p10, p01, alpha) < power:  # exact power saw-tooths: scan up, then settle
        hi = int(hi * 1.25) + 1
        if hi > n_max:
            return None
    n = lo
    step = max(1, (hi - lo) // 40)
    while n < hi and mcnemar_exact_power(n, p10, p01, alpha) < power:
        n += step
    n = max(lo, n - step)
    while mcnemar_exact_power(n, p10, p01, alpha) < power:
        n += 1
    return n


def rule_at(rates, rho: float, n: int, settings: Settings, reps: int, seed: int) -> dict:
    """The rule with horizon ``n`` on ``reps`` seeded sequences: P(correct claim), mean
    queries and mean paradigm runs."""
    x = outcomes(rates, reps, n, rho, np.random.default_rng(seed))
    res = run_rule(x, settings)
    return {"n": n, "power": float(correct_claim(res, rates, settings.epsilon).mean()),
            "mean_queries": float(res["stop"].mean()), "mean_runs": float(res["runs"].mean())}


def size_rule(rates, psi: float, settings: Settings, power: float = 0.8, *, reps: int = 400, n_max: int = 3000,
              seed: int = 0) -> dict:
    """Size the rule for a truth: the paradigms' rates and the discordance ``psi`` between the
    best and the runner-up. N is the smallest horizon (a multiple of the batch, ≤ ``n_max``) at
    which the rule, simulated on ``reps`` seeded sequences with that horizon (its futility stop
    looks at it), makes a correct claim with probability ≥ ``power``; with it the mean queries
    and paradigm runs the rule takes (it stops earlier when it can), the fixed-N exact McNemar N
    for the best against the runner-up, and the copula's ρ. ``n`` is None when even ``n_max``
    falls short (``power_at_max`` says by how much)."""
    rates = [float(r) for r in rates]
    order = sorted(rates, reverse=True)
    rho = rho_for_discordance(order[0], order[1], psi)
    b = settings.batch
    cache: dict[int, dict] = {}

    def at(n):
        if n not in cache:
            cache[n] = rule_at(rates, rho, n, settings, reps, seed)
        return cache[n]

    top = max(b, n_max // b * b)
    out = {"n": None, "n_max": top, "rho": rho, "fixed_exact_n": None}
    delta = order[0] - order[1]
    if delta > 0:
        out["fixed_exact_n"] = mcnemar_exact_n(delta, psi, settings.alpha, power)
    hi = max(b, min(top, ((out["fixed_exact_n"] or top) + b - 1) // b * b))
    while at(hi)["power"] < power and hi < top:
        hi = min(top, hi * 2)
    if at(hi)["power"] < power:
        return {**out, "power_at_max": at(top)["power"], "mean_runs": at(top)["mean_runs"],
                "mean_queries": at(top)["mean_queries"], "power_at_n": None}
    lo = 0  # at(lo) falls short (0 queries make no claim)
    while hi - lo > b:
        mid = (lo + hi) // 2 // b * b
        if mid <= lo:
            break
        if at(mid)["power"] >= power:
            hi = mid
        else:
            lo = mid
    return {**out, "n": hi, "power_at_n": at(hi)["power"], "mean_runs": at(hi)["mean_runs"],
            "mean_queries": at(hi)["mean_queries"], "power_at_max": None}
