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

from dataclasses import dataclass

from sqlalchemy import text


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens."""

    input: float
    output: float
    cached_input: float

    def cost(self, prompt: float, completion: float, cached_prompt: float = 0.0) -> float:
        cached = min(max(0.0, float(cached_prompt or 0)), float(prompt or 0))
        return ((float(prompt or 0) - cached) * self.input + cached * self.cached_input
                + float(completion or 0) * self.output) / 1e6


class PriceError(ValueError):
    """A price setting is malformed (the message names the backend)."""


def parse_prices(name: str, spec: dict, source: str = "config") -> Prices | None:
    raw = spec.get("price_per_million")
    if raw is None:
        return None
    where = f"{source}: backends.{name}.price_per_million"
    if not isinstance(raw, dict):
        raise PriceError(f"{where} must be a mapping {{input, output, cached_input}}")
    unknown = sorted(set(raw) - {"input", "output", "cached_input"})
    if unknown:
        raise PriceError(f"{where}: unknown key(s) {', '.join(unknown)} (known: input, output, cached_input)")
    vals = {}
    for key in ("input", "output", "cached_input"):
        v = raw.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise PriceError(f"{where}.{key} must be a number >= 0 (got {v!r})")
        vals[key] = float(v)
    if not vals:
        return None
    if "input" not in vals or "output" not in vals:
        raise PriceError(f"{where} needs both input and output")
    return Prices(vals["input"], vals["output"], vals.get("cached_input", vals["input"]))


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


def markdown_section(engine, config) -> str:
    """The report's money section: prices used, billed per stage, consumed per paradigm."""
    from ragrouter.report.tables import fmt_int, md_table

    prices = price_rows(config)
    if not prices:
        return ("## Cost in money\n\n_No backend of the config has `price_per_million`: tokens are not priced "
                "(local models cost no money per token)._\n")
    with engine.connect() as conn:
        billed = billed_by_stage(conn, config)
        consumed = consumed_by_paradigm(conn, config)
    md = ["## Cost in money\n",
          "Prices used (US $ per million tokens, from the config's `backends.*.price_per_million`; "
          "check them against the provider's current price list):\n",
          md_table(["Backend", "Model", "Input", "Output", "Cached input"],
                   [[b, m, f"{i:g}", f"{o:g}", f"{c:g}"] for b, m, i, o, c in prices], ["l", "l", "r", "r", "r"]),
          "", "### Billed (what the endpoints were paid; each ledger row once)\n"]
    if billed:
        total = sum(r["usd"] or 0 for r in billed)
        md.append(md_table(["Stage", "Backend", "Calls", "Prompt", "Cached prompt", "Completion",
                            "of which reasoning", "US $"],
                           [[r["stage"], r["backend"], fmt_int(r["calls"]), fmt_int(r["prompt_tokens"]),
                             fmt_int(r["cached_prompt_tokens"]), fmt_int(r["completion_tokens"]),
                             fmt_int(r["reasoning_tokens"]), usd(r["usd"])]
                            for r in billed], ["l", "l"] + ["r"] * 6))
        md.append(f"\nTotal billed: **{usd(total)}** (unpriced backends count $0).")
    else:
        md.append("_No model calls yet._")
    md.append("\n### Consumed by the runs (what a cold run would pay, cache hits included)\n")
    if consumed:
        md.append(md_table(["Corpus", "Paradigm", "Generator", "N", "Prompt", "Completion", "US $", "US $ / query"],
                           [[r["corpus"], r["paradigm"], r["generator"], fmt_int(r["n"]), fmt_int(r["prompt_tokens"]),
                             fmt_int(r["completion_tokens"]), usd(r["usd"]), usd(r["usd_per_query"])]
                            for r in consumed], ["l", "l", "l"] + ["r"] * 5))
    else:
        md.append("_No paradigm runs yet._")
    md.append("")
    return "\n".join(md)


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
