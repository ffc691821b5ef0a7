"""``plan``: how many queries the rule of ``run --until-decided`` needs, and what they cost.

Per cell (corpus × query type × generator, under the configured judge) a **seeded simulation
of the rule itself** (:func:`ragrouter.decisions.simulate.size_rule`) finds N: the queries the
cell must have for the rule to make a correct claim ("X is the best" or "X is within ε of the
best") with probability ``decisions.plan_power``. The truth it simulates: the best paradigm's
rate, the runner-up ``gap`` behind it, the other paradigms at their pilot rates (never closer
than the gap), and the discordance ψ between the best and the runner-up — from the cell's pilot
(its judged runs) when the store has at least ``MIN_PILOT`` paired queries, else stated
(``decisions.plan_rate`` for the best, every other paradigm at the gap, ψ =
``decisions.plan_discordance``). Beside it the fixed-N design the report uses: the N at which
the exact McNemar test (two-sided, α) of the best against the runner-up has that power, computed
exactly (binomial sums), every paradigm run on all N queries.

Cost: what one query × one paradigm costs (answer + judge calls, tokens, US $, seconds) and the
fixed costs (model loads, stage starts) are split from the dry run of the cell's pending queries
(the wall time of n and of 2n queries: fixed = 2·W(n) − W(2n)), so fixed costs are counted once.
The rule's expected cost is its mean paradigm runs at horizon N × the per-run cost + the fixed
costs. A cell that costs more than ``decisions.plan_max_hours`` (or needs more queries than it
has) gets options, each with its N and time: a larger ε, fewer paradigms (the pilot's best
ones), a remote backend of the config at its stated price, a cheaper (faster) local judge.
"""

from __future__ import annotations

import dataclasses

from sqlalchemy import text

from ragrouter.decisions.driver import cells_of
from ragrouter.decisions.sequential import Settings
from ragrouter.decisions.simulate import mcnemar_exact_n, rho_for_discordance, rule_at, size_rule
from ragrouter.evaluation import judge as jd
from ragrouter.llm.pricing import estimate_usd
from ragrouter.stages import registry
from ragrouter.stages.base import Estimate, Scope
from ragrouter.stages.runner import dry_run
from ragrouter.stages.timing import LOCAL_KINDS, Timing, wall_estimates

MIN_PILOT = 10
GAPS = tuple(round(0.05 * k, 2) for k in range(1, 11))
"""The gaps :func:`detectable_gap` tries: 5 to 50 points."""


def mcnemar_n(delta: float, psi: float, alpha: float = 0.05, power: float = 0.8) -> int:
    """Paired queries for the two-sided exact McNemar test to detect ``delta`` with discordance
    ``psi`` (exact power, not the normal approximation)."""
    n = mcnemar_exact_n(delta, psi, alpha, power)
    if n is None:
        raise ValueError(f"plan: the gap {delta} needs more than 20,000 queries at discordance {psi}")
    return n


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


def cost_profile(services, scope, cell_queries: list[int], paradigms: list[str]) -> dict:
    """Per paradigm run (one query × one paradigm): calls, tokens, US $ and seconds, the
    fixed seconds counted once, and per stage (answer, judge) its model, calls and tokens."""
    stages = registry.all_stages()
    sub = Scope(corpus=scope.corpus, paradigms=paradigms, models=scope.models, config=scope.config,
                query_ids=cell_queries)
    with services.db_lock, services.engine.connect() as conn:
        pending = {u.payload["query_id"] for u in stages["answer"].pending(conn, sub)}
    if pending:
        sub.query_ids = sorted(pending)
        ests = [e for e in dry_run([stages["answer"], stages["judge"]], services, sub) if e.model != "-"]
        runs = len(pending) * len(paradigms)
        basis = f"dry run of {len(pending)} pending queries"
    else:
        ests, runs, basis = _history_estimates(services, len(paradigms))
        if not ests:
            return {"basis": "unknown: no pending query and no billed answer or judge call in this store",
                    "calls": 0.0, "tokens": 0.0, "usd": None, "wall_s": 0.0, "fixed_s": 0.0, "stages": []}
    one = wall_estimates(scope.config, ests, services)
    two = wall_estimates(scope.config, [_scaled(e, 2) for e in ests], services)
    per_s = max(0.0, (two["expected_wall_s"] - one["expected_wall_s"]) / runs)
    fixed_s = max(0.0, 2 * one["expected_wall_s"] - two["expected_wall_s"])
    usd = None if one["usd"] is None else one["usd"] / runs
    return {"basis": basis, "calls": sum(e.calls - e.cached_calls for e in ests) / runs,
            "tokens": sum(e.prompt_tokens + e.completion_tokens for e in ests) / runs, "usd": usd, "wall_s": per_s,
            "fixed_s": fixed_s,
            "stages": [{"stage": e.stage, "model": e.model, "calls": (e.calls - e.cached_calls) / runs,
                        "prompt": e.prompt_tokens / runs, "completion": e.completion_tokens / runs} for e in ests]}


def _scaled(e, k: int):
    return dataclasses.replace(e, calls=e.calls * k, cached_calls=e.cached_calls * k, prompt_tokens=e.prompt_tokens * k,
                               completion_tokens=e.completion_tokens * k, completion_cap=e.completion_cap * k,
                               units=e.units * k)


def _history_estimates(services, n_paradigms: int):
    """Estimates of one query × every paradigm from this store's billed answer and judge calls."""
    with services.db_lock, services.engine.connect() as conn:
        runs = conn.execute(text("SELECT COUNT(*) FROM paradigm_runs")).scalar() or 0
        judged = conn.execute(text("SELECT COUNT(DISTINCT run_id) FROM judgments WHERE NOT is_calibration")).scalar() or 0
        per_stage = conn.execute(text("SELECT stage, model, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens) "
                                      "FROM llm_calls WHERE stage IN ('answer', 'judge') GROUP BY stage, model")).all()
    out = []
    for stage, model, calls, pt, ct in per_stage:
        per = runs if stage == "answer" else judged
        if not per:
            continue
        scale = n_paradigms / per
        out.append(Estimate(stage=str(stage), model=str(model), calls=max(1, int(round(calls * scale))),
                            prompt_tokens=int(round((pt or 0) * scale)), completion_tokens=int(round((ct or 0) * scale)),
                            completion_cap=int(round((ct or 0) * scale))))
    return out, n_paradigms, "this store's billed answer and judge calls per run"


def truth(pilot_rates: dict, paradigms: list[str], gap: float, rate: float, use_pilot: bool) -> list[float]:
    """The rates the plan simulates: the best, the runner-up ``gap`` behind, the rest at their
    pilot rates but never closer than the gap (stated: every other paradigm at the gap)."""
    if use_pilot and pilot_rates:
        lead = max(pilot_rates, key=pilot_rates.get)
        best = pilot_rates[lead]
        others = sorted((min(pilot_rates.get(p, best - gap), best - gap) for p in paradigms if p != lead),
                        reverse=True) or [best - gap]
        others[0] = best - gap  # the runner-up at the gap
        return [best] + [max(0.0, r) for r in others]
    return [rate] + [max(0.0, rate - gap)] * (len(paradigms) - 1)


def detectable_gap(cfg, n: int, n_paradigms: int) -> float | None:
    """The smallest gap (of :data:`GAPS`) between the best paradigm and the others that the rule
    of ``run --until-decided`` finds with ``decisions.plan_power`` on ``n`` questions of one
    type, at plan's stated truth (the best at ``decisions.plan_rate``, every other paradigm at
    the gap, ``decisions.plan_discordance``); None: not even 50 points — a smoke test, not a
    decision."""
    if n <= 0 or n_paradigms < 2:
        return None
    settings = Settings.from_config(cfg)
    sec = dict(cfg.section("decisions"))
    power, psi = float(sec.get("plan_power", 0.8)), float(sec.get("plan_discordance", 0.3))
    rate, reps = float(sec.get("plan_rate", 0.5)), int(sec.get("plan_reps", 400))
    for gap in GAPS:
        if gap > rate:
            break
        rates = truth({}, ["p"] * n_paradigms, gap, rate, False)
        rho = rho_for_discordance(rates[0], rates[1], psi)
        if rule_at(rates, rho, n, settings, reps, settings.seed)["power"] >= power:
            return gap
    return None


def questions_for_gap(cfg, gap: float, n_paradigms: int, n_max: int = 300) -> int | None:
    """The fewest questions of one type (in steps of ``decisions.batch``) on which the rule finds
    ``gap`` with ``decisions.plan_power`` at plan's stated truth (None: more than ``n_max``)."""
    settings = Settings.from_config(cfg)
    sec = dict(cfg.section("decisions"))
    power, psi = float(sec.get("plan_power", 0.8)), float(sec.get("plan_discordance", 0.3))
    rate, reps = float(sec.get("plan_rate", 0.5)), int(sec.get("plan_reps", 400))
    if gap > rate or n_paradigms < 2:
        return None
    rates = truth({}, ["p"] * n_paradigms, gap, rate, False)
    rho = rho_for_discordance(rates[0], rates[1], psi)
    for n in range(settings.batch, n_max + 1, settings.batch):
        if rule_at(rates, rho, n, settings, reps, settings.seed)["power"] >= power:
            return n
    return None


def _cost(size: dict, per: dict, k: int) -> dict:
    runs = size["mean_runs"] if size.get("n") else None
    usd = None if per["usd"] is None or runs is None else per["usd"] * runs
    return {"mean_runs": runs, "usd": usd,
            "wall_s": None if runs is None else per["fixed_s"] + per["wall_s"] * runs,
            "worst_wall_s": None if not size.get("n") else per["fixed_s"] + per["wall_s"] * size["n"] * k}


def _swap_seconds(services, config, per: dict, stages: tuple, model: str) -> tuple[float, float]:
    """(seconds per run, fixed seconds) with the ``stages`` served by ``model``."""
    timing = Timing(services.engine, config, services.db_lock)
    per_s, fixed = 0.0, 0.0
    for row in per["stages"]:
        m = model if row["stage"] in stages else row["model"]
        busy, _ = timing.call_seconds(m, 1000 * row["calls"], 1000 * row["prompt"], 1000 * row["completion"])
        par, _ = timing.parallel(row["stage"], m)
        per_s += busy / 1000 / par
        backend = timing.backend_of(m)
        if backend.get("kind") == "local":
            fixed += float(timing._prior(backend)[0].get("load_s") or 0.0)
    return per_s, fixed


def chat_backend(cfg, name: str, backend: dict) -> bool:
    """Whether a backend can answer and judge: not the embedder role's, not a local encoder, and
    neither named nor modelled as an embedding model (``text-embedding-3-small``)."""
    if backend.get("kind") == "local-encoder" or name == str(cfg.role("embedder")):
        return False
    return "embed" not in f"{name} {backend.get('model', '')}".lower()


def needs_graph(cfg, paradigm: str) -> bool:
    """Whether ``paradigm`` reads the knowledge graph (so its corpus needs extraction)."""
    if paradigm in ("graph", "hybrid"):
        return True
    return paradigm.startswith("iterative") and str(cfg.get("paradigms.iterative.base_retriever", "graph")) in (
        "graph", "hybrid")


def build_cost(services, cfg, corpus: str, paradigms: list[str]) -> dict:
    """The corpus's pending build before its questions are answered — chunk, embed, metrics,
    and extraction when a planned paradigm reads the graph — as the dry run estimates and times
    it: seconds, US $, and which stages have work."""
    stages = registry.all_stages()
    names = ["chunk"] + (["extract"] if any(needs_graph(cfg, p) for p in paradigms) else []) + ["embed", "metrics"]
    ests = dry_run([stages[n] for n in names if n in stages], services, Scope(corpus=corpus, config=cfg))
    timed = wall_estimates(cfg, ests, services)
    busy = [r["stage"] for r in timed["stages"] if r["expected_wall_s"] > 0 and (r["calls"] or r["units"])]
    return {"wall_s": float(timed["expected_wall_s"]), "usd": timed["usd"], "stages": list(dict.fromkeys(busy))}


def options(services, cfg, settings, rates, psi, power, per: dict, paradigms: list[str], pilot_rates: dict,
            reps: int) -> list[dict]:
    """What would make an unaffordable cell affordable, each with its N and time."""
    out = []
    for eps in (0.05, 0.10):
        if eps > settings.epsilon:
            s = size_rule(rates, psi, dataclasses.replace(settings, epsilon=eps), power, reps=reps, seed=settings.seed)
            out.append({"option": f"epsilon {eps:g} (run --until-decided --epsilon {eps:g})", "n": s["n"],
                        **_cost(s, per, len(rates))})
    ranked = sorted(paradigms, key=lambda p: -pilot_rates.get(p, 0.0))
    for keep in (3, 2):
        if keep < len(rates):
            sub = [rates[0]] + sorted(rates[1:], reverse=True)[:keep - 1]
            s = size_rule(sub, psi, settings, power, reps=reps, seed=settings.seed)
            names = ranked[:keep] if pilot_rates else [f"{keep} paradigms"]
            out.append({"option": f"fewer paradigms: {', '.join(names)}"
                        + (f" (--paradigm {' --paradigm '.join(names)})" if pilot_rates else ""),
                        "n": s["n"], **_cost(s, per, keep)})
    base = size_rule(rates, psi, settings, power, reps=reps, seed=settings.seed)
    backends = cfg.section("backends")
    judge_backend = str(cfg.role("judge"))
    for name, b in backends.items():
        if not isinstance(b, dict) or b.get("kind") in LOCAL_KINDS or not b.get("price_per_million"):
            continue
        if not chat_backend(cfg, name, b):
            continue
        model = str(b.get("model"))
        per_s, _ = _swap_seconds(services, cfg, per, ("answer", "judge"), model)
        usd = 0.0
        for row in per["stages"]:
            usd += estimate_usd(cfg, model, row["prompt"], row["completion"]) or 0.0
        runs = base["mean_runs"] if base.get("n") else None
        out.append({"option": f"remote backend {name} ({model}) for answer and judge, at its stated price",
                    "n": base["n"], "mean_runs": runs, "usd": None if runs is None else usd * runs,
                    "wall_s": None if runs is None else per.get("build_s", 0.0) + per_s * runs,
                    "worst_wall_s": None})
    for name, b in backends.items():
        if not isinstance(b, dict) or b.get("kind") != "local" or name == judge_backend or not chat_backend(cfg, name, b):
            continue
        model = str(b.get("model"))
        per_s, fixed = _swap_seconds(services, cfg, per, ("judge",), model)
        if per_s >= per["wall_s"]:
            continue
        runs = base["mean_runs"] if base.get("n") else None
        out.append({"option": f"cheaper judge {name} ({model}; calibrate it first: judge calibrate)",
                    "n": base["n"], "mean_runs": runs, "usd": None,
                    "wall_s": None if runs is None else fixed + per_s * runs, "worst_wall_s": None})
    return out


def plan(services, scope, gap: float | None = None, epsilon: float | None = None) -> list[dict]:
    """One row per cell: the truth it sizes for and its basis, the rule's N and expected cost,
    the fixed-N exact McNemar N and its cost, and the options when unaffordable."""
    cfg = scope.config
    settings = Settings.from_config(cfg)
    if epsilon is not None:
        settings = dataclasses.replace(settings, epsilon=float(epsilon))
    sec = dict(cfg.section("decisions"))
    delta = float(gap if gap is not None else sec.get("plan_gap", 0.10))
    power = float(sec.get("plan_power", 0.8))
    assumed = float(sec.get("plan_discordance", 0.3))
    rate = float(sec.get("plan_rate", 0.5))
    max_h = float(sec.get("plan_max_hours", 8))
    reps = int(sec.get("plan_reps", 400))
    if not 0 < delta < 1 or not 0 < power < 1 or not 0 < assumed <= 1 or not delta < rate <= 1:
        raise ValueError(f"decisions: plan_gap, plan_power, plan_discordance and plan_rate must lie in (0, 1) with "
                         f"plan_gap < plan_rate (got gap={delta}, power={power}, discordance={assumed}, rate={rate})")
    judge = jd.judge_key(str(cfg.role("judge")), cfg)
    paradigms = list(scope.paradigms) or list(cfg.get("paradigms.enabled"))
    with services.db_lock, services.engine.connect() as conn:
        cells = cells_of(conn, scope, settings)
        pilots = [pilot(conn, c.corpus_id, c.qtype, c.generator, judge) for c in cells]
    out = []
    builds: dict[str, dict] = {}
    for cell, p in zip(cells, pilots):
        if cell.corpus not in builds:
            builds[cell.corpus] = build_cost(services, cfg, cell.corpus, paradigms)
        build = builds[cell.corpus]
        use_pilot = p["discordance"] is not None and p["n_pairs"] >= MIN_PILOT
        if use_pilot:
            psi, basis = p["discordance"], f"pilot: {p['leader']} vs {p['runner_up']} on {p['n_pairs']} queries"
        else:
            psi, basis = assumed, (f"assumed (decisions.plan_rate {rate:g}, every other paradigm at the gap, "
                                   f"plan_discordance; pilot has {p['n_pairs']} paired queries)")
        rates = truth(p["rates"], paradigms, delta, rate, use_pilot)
        size = size_rule(rates, psi, settings, power, reps=reps, seed=settings.seed)
        per = cost_profile(services, scope, cell.queries, paradigms)
        k = len(paradigms)
        per = {**per, "fixed_s": per["fixed_s"] + build["wall_s"], "build_s": build["wall_s"]}  # the build first, once
        rule = _cost(size, per, k)
        if rule["usd"] is not None and build["usd"]:
            rule["usd"] += build["usd"]
        fixed_n = size["fixed_exact_n"]
        fixed = {"n": fixed_n, "runs": None if fixed_n is None else fixed_n * k,
                 "usd": None if fixed_n is None or per["usd"] is None else per["usd"] * fixed_n * k
                 + (build["usd"] or 0.0),
                 "wall_s": None if fixed_n is None else per["fixed_s"] + per["wall_s"] * fixed_n * k}
        cheaper = fixed_n is not None and (size["n"] is None or (rule["mean_runs"] is not None
                                                                 and fixed_n * k < rule["mean_runs"]))
        affordable = size["n"] is not None and size["n"] <= len(cell.queries) and \
            (rule["wall_s"] or 0.0) <= max_h * 3600
        row = {"corpus": cell.corpus, "qtype": cell.qtype, "generator": cell.generator,
               "queries_in_cell": len(cell.queries), "gap": delta, "epsilon": settings.epsilon,
               "alpha": settings.alpha, "power": power, "rates": [round(r, 3) for r in rates],
               "discordance": psi, "discordance_basis": basis, "pilot_rates": p["rates"],
               "n_needed": size["n"], "power_at_n": size["power_at_n"], "power_at_max": size["power_at_max"],
               "mean_queries": size["mean_queries"], "mean_runs": rule["mean_runs"],
               "enough": size["n"] is not None and size["n"] <= len(cell.queries), "paradigms": k,
               "calls": None if rule["mean_runs"] is None else per["calls"] * rule["mean_runs"],
               "tokens": None if rule["mean_runs"] is None else per["tokens"] * rule["mean_runs"],
               "usd": rule["usd"], "wall_s": rule["wall_s"], "worst_wall_s": rule["worst_wall_s"],
               "fixed_s": per["fixed_s"], "per_run_s": per["wall_s"], "fixed_design": fixed,
               "cost_basis": per["basis"], "affordable": affordable, "options": [],
               "build_s": build["wall_s"], "build_usd": build["usd"], "build_stages": build["stages"],
               "fixed_cheaper": cheaper}
        if not affordable:
            row["options"] = options(services, cfg, settings, rates, psi, power, per, paradigms, p["rates"], reps)
        out.append(row)
    return out
