"""``plan``: how many queries a decision needs, and what they cost, before spending.

Per cell (corpus × query type × generator, under the configured judge) the number of paired
queries at which an exact-design McNemar test tells the best paradigm from the runner-up at
level α (two-sided) with the stated power, for a gap δ in correct rates (default 10 points)
and a discordance rate ψ (the share of queries on which the two disagree):

    n = (z_{1−α/2} √ψ + z_{power} √(ψ − δ²))² / δ²        (Connor 1987, Biometrics 43:207)

ψ comes from the cell's pilot (its judged runs: the leader and runner-up on their common
queries) when the store has at least ``MIN_PILOT`` of them, else from the stated assumption
``decisions.plan_discordance``; ψ is never taken below δ (every discordant query would then
favour the better paradigm). The cost of n queries × every enabled paradigm (answer + judge
calls, tokens, US $, wall time) is the dry run's, per query: the cell's pending queries when it
has any, else this store's billed answer and judge calls per run.
"""

from __future__ import annotations

import math

from scipy.stats import norm
from sqlalchemy import text

MIN_PILOT = 10


def mcnemar_n(delta: float, psi: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Paired queries for a two-sided McNemar test to detect ``delta`` with discordance ``psi``."""
    if not 0 < delta < 1:
        raise ValueError(f"plan: the gap must lie in (0, 1), got {delta}")
    psi = min(1.0, max(psi, delta))
    za, zb = norm.ppf(1 - alpha / 2), norm.ppf(power)
    return int(math.ceil((za * math.sqrt(psi) + zb * math.sqrt(max(psi - delta * delta, 0.0))) ** 2 / delta ** 2))


def pilot(conn, corpus_id: int, qtype: str, generator: str, judge: str) -> dict:
    """The cell's judged outcomes: per-paradigm rates, leader, runner-up, their discordance."""
    rows = conn.execute(text("SELECT query_id, paradigm, correct FROM v_run_judged WHERE corpus_id = :c AND qtype = :t "
                             "AND generator = :g AND judge = :j"),
                        {"c": corpus_id, "t": qtype, "g": generator, "j": judge}).all()
    by: dict[str, dict[int, int]] = {}
    for q, p, c in rows:
        by.setdefault(str(p), {})[int(q)] = int(c)
    rates = {p: sum(v.values()) / len(v) for p, v in by.items() if v}
    out = {"rates": rates, "n_pairs": 0, "discordance": None, "leader": None, "runner_up": None}
    if len(rates) >= 2:
        lead, second = sorted(rates, key=lambda p: -rates[p])[:2]
        common = set(by[lead]) & set(by[second])
        disc = sum(by[lead][q] != by[second][q] for q in common)
        out.update(leader=lead, runner_up=second, n_pairs=len(common),
                   discordance=(disc / len(common)) if common else None)
    return out


def per_query_cost(services, scope, cell_queries: list[int], paradigms: list[str]) -> dict:
    """Calls, tokens, US $ and wall seconds of one query × every paradigm (answer + judge)."""
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import dry_run
    from ragrouter.stages.timing import wall_estimates

    stages = registry.all_stages()
    sub = Scope(corpus=scope.corpus, paradigms=paradigms, models=scope.models, config=scope.config,
                query_ids=cell_queries)
    with services.db_lock, services.engine.connect() as conn:
        pending = {u.payload["query_id"] for u in stages["answer"].pending(conn, sub)}
    if pending:
        sub.query_ids = sorted(pending)
        timed = wall_estimates(scope.config, dry_run([stages["answer"], stages["judge"]], services, sub), services)
        n = len(pending)
        rows = [r for r in timed["stages"] if r["model"] != "-"]
        return {"basis": f"dry run of {n} pending queries",
                "calls": sum(r["calls"] - r["cached_calls"] for r in rows) / n,
                "tokens": sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows) / n,
                "usd": (timed["usd"] / n) if timed["usd"] is not None else None,
                "wall_s": timed["expected_wall_s"] / n}
    return _history_cost(services, scope.config, len(paradigms))


def _history_cost(services, config, n_paradigms: int) -> dict:
    """Per query from this store's billed answer and judge calls, per run × paradigms."""
    from ragrouter.stages.base import Estimate
    from ragrouter.stages.timing import Timing

    timing = Timing(services.engine, config, services.db_lock)
    out = {"basis": "this store's billed answer and judge calls per run", "calls": 0.0, "tokens": 0.0, "usd": None,
           "wall_s": 0.0}
    from ragrouter.llm.pricing import estimate_usd

    with services.db_lock, services.engine.connect() as conn:
        runs = conn.execute(text("SELECT COUNT(*) FROM paradigm_runs")).scalar() or 0
        judged = conn.execute(text("SELECT COUNT(DISTINCT run_id) FROM judgments WHERE NOT is_calibration")).scalar() or 0
        per_stage = conn.execute(text("SELECT stage, model, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens) "
                                      "FROM llm_calls WHERE stage IN ('answer', 'judge') GROUP BY stage, model")).all()
    for stage, model, calls, pt, ct in per_stage:
        per = runs if stage == "answer" else judged
        if not per:
            continue
        scale = n_paradigms / per
        e = Estimate(stage=str(stage), model=str(model), calls=int(round(calls * scale)) or 1,
                     prompt_tokens=int(round((pt or 0) * scale)), completion_tokens=int(round((ct or 0) * scale)),
                     completion_cap=int(round((ct or 0) * scale)))
        out["calls"] += calls * scale
        out["tokens"] += ((pt or 0) + (ct or 0)) * scale
        out["wall_s"] += timing.stage_seconds(e)[0]
        usd = estimate_usd(config, str(model), e.prompt_tokens, e.completion_tokens)
        if usd is not None:
            out["usd"] = (out["usd"] or 0.0) + usd
    if not per_stage:
        out["basis"] = "unknown: no pending query and no billed answer or judge call in this store"
    return out


def plan(services, scope, gap: float | None = None) -> list[dict]:
    """One row per cell: pilot figures, the ψ used and its basis, N, and N's cost."""
    from ragrouter.decisions.driver import cells_of
    from ragrouter.decisions.sequential import Settings
    from ragrouter.evaluation import judge as jd

    cfg = scope.config
    settings = Settings.from_config(cfg)
    sec = dict(cfg.section("decisions"))
    delta = float(gap if gap is not None else sec.get("plan_gap", 0.10))
    power = float(sec.get("plan_power", 0.8))
    assumed = float(sec.get("plan_discordance", 0.3))
    judge = jd.judge_key(str(cfg.role("judge")), cfg)
    paradigms = list(scope.paradigms) or list(cfg.get("paradigms.enabled"))
    with services.db_lock, services.engine.connect() as conn:
        cells = cells_of(conn, scope, settings)
        pilots = [pilot(conn, c.corpus_id, c.qtype, c.generator, judge) for c in cells]
    out = []
    for cell, p in zip(cells, pilots):
        if p["discordance"] is not None and p["n_pairs"] >= MIN_PILOT:
            psi, basis = p["discordance"], f"pilot: {p['leader']} vs {p['runner_up']} on {p['n_pairs']} queries"
        else:
            psi, basis = assumed, f"assumed (decisions.plan_discordance; pilot has {p['n_pairs']} paired queries)"
        n = mcnemar_n(delta, psi, settings.alpha, power)
        cost = per_query_cost(services, scope, cell.queries, paradigms)
        out.append({"corpus": cell.corpus, "qtype": cell.qtype, "generator": cell.generator,
                    "queries_in_cell": len(cell.queries), "gap": delta, "alpha": settings.alpha, "power": power,
                    "discordance": psi, "discordance_basis": basis, "pilot_rates": p["rates"],
                    "n_needed": n, "enough": n <= len(cell.queries), "paradigms": len(paradigms),
                    "calls": cost["calls"] * n, "tokens": cost["tokens"] * n,
                    "usd": None if cost["usd"] is None else cost["usd"] * n, "wall_s": cost["wall_s"] * n,
                    "cost_basis": cost["basis"]})
    return out
