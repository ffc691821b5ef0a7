"""Money next to tokens: per-backend prices and what the store's tokens cost.

A backend's ``price_per_million: {input, output, cached_input}`` (US dollars per million
tokens; ``cached_input`` defaults to ``input``) prices its tokens:

* **billed** — what the endpoint was paid: every ``llm_calls`` row (and every billed failure)
  once, by the backend that made it; prompt tokens the provider served from its own prompt
  cache (``usage.prompt_tokens_details.cached_tokens`` / DeepSeek's
  ``prompt_cache_hit_tokens``, kept as ``params.cached_prompt_tokens``) at ``cached_input``;
  a reasoning model's hidden ``reasoning_tokens`` are shown beside the completion tokens but
  priced *within* them: OpenAI's ``completion_tokens`` already includes them (billed as
  output), so adding them would count them twice;
* **consumed** — what the runs used, cached or not (``paradigm_runs`` token columns, i.e. what
  a cold run would pay), at ``input``/``output`` of the run's generator backend;
* **dry run** — the upper bound of pending work: prompt tokens × ``input`` + the completion
  budget × ``output``.

Backends without prices (local models) show no money. Prices change: the values shipped in
``configs/default.yaml`` are list prices noted when they were written; check the provider's
price page and override them in your config.
"""

from __future__ import annotations

from sqlalchemy import text

from ragrouter.config import Prices, parse_prices


def backend_prices(config) -> dict[str, Prices]:
    """backend name -> Prices, for every backend that has them."""
    out = {}
    for name, spec in (config.section("backends") or {}).items():
        if isinstance(spec, dict):
            p = parse_prices(name, spec, getattr(config, "source", "config"))
            if p is not None:
                out[name] = p
    return out


def model_prices(config) -> dict[str, Prices]:
    """model name -> Prices (the first priced backend serving that model)."""
    out: dict[str, Prices] = {}
    backends = config.section("backends") or {}
    for name, p in backend_prices(config).items():
        out.setdefault(str(backends[name].get("model")), p)
    return out


def usd(value: float | None) -> str:
    """Dollars for a table: '-' when unpriced, cents below $100, whole dollars above."""
    if value is None:
        return "-"
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 0.01 or value == 0:
        return f"${value:,.2f}"
    return f"${value:.4f}"


def price_rows(config) -> list[tuple]:
    """(backend, model, input, output, cached_input) of every priced backend."""
    backends = config.section("backends") or {}
    return [(n, str(backends[n].get("model")), p.input, p.output, p.cached_input)
            for n, p in sorted(backend_prices(config).items())]


def billed_by_stage(conn, config) -> list[dict]:
    """Per stage and backend: billed calls, prompt / provider-cached / completion tokens (of
    which reasoning) and their dollars (``usd`` None for unpriced backends)."""
    prices = backend_prices(config)
    rows = conn.execute(text(
        "SELECT stage, backend, model, SUM(calls) AS calls, SUM(p) AS p, SUM(c) AS c, SUM(k) AS k,"
        " SUM(r) AS r FROM ("
        " SELECT COALESCE(stage, '') AS stage, backend, model, 1 AS calls, prompt_tokens AS p,"
        "        completion_tokens AS c, COALESCE(CAST(params->>'cached_prompt_tokens' AS BIGINT), 0) AS k,"
        "        COALESCE(reasoning_tokens, 0) AS r"
        " FROM llm_calls"
        " UNION ALL"
        " SELECT COALESCE(stage, ''), backend, model, 1, COALESCE(prompt_tokens, 0), COALESCE(completion_tokens, 0), 0,"
        "        COALESCE(reasoning_tokens, 0)"
        " FROM llm_failures) t GROUP BY stage, backend, model ORDER BY stage, backend, model")).all()
    out = []
    for stage, backend, model, calls, p, c, k, r in rows:
        price = prices.get(backend)
        out.append({"stage": stage, "backend": backend, "model": model, "calls": int(calls or 0),
                    "prompt_tokens": int(p or 0), "cached_prompt_tokens": int(k or 0),
                    "completion_tokens": int(c or 0), "reasoning_tokens": int(r or 0),
                    "usd": None if price is None else price.cost(p or 0, c or 0, k or 0)})
    return out


def consumed_by_paradigm(conn, config) -> list[dict]:
    """Per corpus, paradigm and generator backend: tokens the current runs consumed (cached or
    not, from ``v_token_breakdown``) and their dollars at the generator's prices."""
    prices = backend_prices(config)
    rows = conn.execute(text(
        "SELECT corpus, paradigm, generator, n, ret_in, ret_out, gen_in, gen_out, total "
        "FROM v_token_breakdown ORDER BY corpus, paradigm, generator")).all()
    out = []
    for corpus, paradigm, generator, n, ri, ro, gi, go, total in rows:
        price = prices.get(generator)
        prompt, completion = int(ri or 0) + int(gi or 0), int(ro or 0) + int(go or 0)
        cost = None if price is None else price.cost(prompt, completion)
        out.append({"corpus": corpus, "paradigm": paradigm, "generator": generator, "n": int(n or 0),
                    "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": int(total or 0),
                    "usd": cost,
                    "usd_per_query": None if cost is None or not n else cost / int(n)})
    return out


def estimate_usd(config, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Dollars of a dry-run estimate for ``model`` (None: unpriced)."""
    price = model_prices(config).get(str(model))
    return None if price is None else price.cost(prompt_tokens, completion_tokens)


def dry_run_usd_rows(config, rows: list[tuple]) -> tuple[list[str], list[tuple], str]:
    """The dry-run table with dollar columns when any backend has prices: (columns, rows,
    note). ``rows`` are (stage, model, calls, cached, to_call, prompt_tokens,
    completion_tokens (expected), max_completion_tokens (the caps), basis); ``usd`` prices the
    expectation, ``usd_max`` the caps (an upper bound)."""
    cols = ["stage", "model", "calls", "cached", "to_call", "prompt_tokens", "completion_tokens",
            "max_completion_tokens", "basis"]
    prices = model_prices(config)
    if not prices:
        return cols, rows, ""
    out, total, total_max = [], 0.0, 0.0
    for row in rows:
        cost = estimate_usd(config, row[1], row[5], row[6])
        cost_max = estimate_usd(config, row[1], row[5], row[7])
        total += cost or 0.0
        total_max += cost_max or 0.0
        out.append((*row, usd(cost), usd(cost_max)))
    used = ", ".join(f"{b} ({m}): in {i:g} / out {o:g} / cached {c:g}" for b, m, i, o, c in price_rows(config))
    note = (f"expected {usd(total)}, at most {usd(total_max)} for the calls to make (prompt x input + "
            f"completion x output; '-' = unpriced); prices used, $ per million tokens: {used}")
    return cols + ["usd", "usd_max"], out, note
