"""The report's money section: the prices used, what the endpoints were billed per stage and
what the runs consumed per paradigm, in US dollars (the figures are :mod:`ragrouter.llm.pricing`'s)."""

from __future__ import annotations

from ragrouter.llm.pricing import billed_by_stage, consumed_by_paradigm, price_rows, usd
from ragrouter.report.tables import fmt_int, md_table


def markdown_section(engine, config) -> str:
    """The report's money section: prices used, billed per stage, consumed per paradigm."""
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
