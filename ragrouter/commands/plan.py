"""`cli.py plan`: how many queries a decision needs per cell, and what they cost."""

from __future__ import annotations

import json

import click

from ragrouter.commands.common import Ctx, pass_ctx, render_rows
from ragrouter.db import migrate
from ragrouter.stages.base import Scope
from ragrouter.stages.services import Services


@click.command("plan")
@click.option("--corpus", help="Only this corpus.")
@click.option("--gap", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
              help="The gap in correct rates to tell apart (default decisions.plan_gap: 0.10, 10 points).")
@click.option("--paradigm", "paradigms", multiple=True, help="Only these paradigms (repeatable; default: enabled).")
@click.option("--model", "models", multiple=True, help="Only these generator backends.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per cell, as a list.")
@pass_ctx
def plan_command(ctx: Ctx, corpus, gap, paradigms, models, as_json) -> None:
    """Queries needed per cell (corpus × query type × generator) to tell the best paradigm
    from the runner-up at decisions.alpha (two-sided, exact-design McNemar) with
    decisions.plan_power, for a stated gap; the discordance rate comes from the store's
    pilot runs of the cell when it has ≥ 10 paired queries, else from
    decisions.plan_discordance (said in the basis column). The cost is N queries × every
    paradigm (answer + judge) as the dry run expects it. `run --until-decided` usually needs
    fewer: it stops each cell as soon as it is decided.

    \b
    Examples:
      python cli.py plan --corpus medical
      python cli.py plan --corpus medical --gap 0.05 --json
    """
    from ragrouter.decisions.plan import plan

    engine = ctx.engine(read_only=True)
    migrate.ensure_current(engine)
    services = Services(ctx.config, engine)
    try:
        rows = plan(services, Scope(corpus=corpus, paradigms=list(paradigms), models=list(models),
                                    config=ctx.config), gap)
    finally:
        services.finish()
    if as_json:
        click.echo(json.dumps(rows, default=str))
        return
    cols = ["corpus", "qtype", "generator", "queries", "gap", "discordance", "N needed", "calls", "tokens", "US $",
            "wall", "basis"]
    from ragrouter.commands.common import hms as _hms

    out = [(r["corpus"], r["qtype"], r["generator"], r["queries_in_cell"], f"{r['gap']:.2f}",
            f"{r['discordance']:.2f}", f"{r['n_needed']}" + ("" if r["enough"] else " (more than the cell has)"),
            f"{r['calls']:.0f}", f"{r['tokens']:.0f}", "-" if r["usd"] is None else f"{r['usd']:.2f}",
            _hms(r["wall_s"]), f"ψ {r['discordance_basis']}; cost {r['cost_basis']}") for r in rows]
    click.echo(render_rows(cols, out, "table"))
