"""`cli.py plan`: how many queries a decision needs per cell, and what they cost."""

from __future__ import annotations

import json

import click

from ragrouter.commands.common import Ctx, hms as _hms, pass_ctx, render_rows
from ragrouter.db import migrate
from ragrouter.decisions.plan import plan
from ragrouter.stages.base import Scope
from ragrouter.stages.services import Services
from ragrouter.stages.timing import load_line


@click.command("plan")
@click.option("--corpus", help="Only this corpus.")
@click.option("--gap", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
              help="The gap between the best paradigm and the runner-up to size for (default decisions.plan_gap: "
                   "0.10, 10 points).")
@click.option("--epsilon", type=click.FloatRange(min=0, max=1, max_open=True),
              help="The ε of the claim 'X, or any within ε of it' (default decisions.epsilon: 0.02).")
@click.option("--paradigm", "paradigms", multiple=True, help="Only these paradigms (repeatable; default: enabled).")
@click.option("--model", "models", multiple=True, help="Only these generator backends.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per cell, as a list.")
@pass_ctx
def plan_command(ctx: Ctx, corpus, gap, epsilon, paradigms, models, as_json) -> None:
    """Queries needed per cell (corpus × query type × generator) for `run --until-decided`
    to claim "X is the best, or within ε of it" at decisions.alpha with probability
    decisions.plan_power, found by a seeded simulation of that rule at the stated gap, with
    the rates and discordance of the store's pilot runs of the cell (≥ 10 paired queries) or
    the stated decisions.plan_rate and plan_discordance (said in the basis column). Beside it:
    the exact McNemar test's N (the report's fixed-N test, every paradigm on all N queries).
    Costs: the rule's mean paradigm runs × one run's cost, plus fixed costs (model loads,
    stage starts, and the corpus's pending build — extraction when a planned paradigm reads
    the graph) once. When the fixed-N test needs fewer runs than the rule, it says so. A cell
    over decisions.plan_max_hours gets options (larger ε, fewer paradigms, a remote chat
    backend, a faster judge) with their N and time.

    \b
    Examples:
      python cli.py plan --corpus medical
      python cli.py plan --corpus medical --gap 0.05 --epsilon 0.05 --json
    """
    engine = ctx.engine(read_only=True)
    migrate.ensure_current(engine)
    services = Services(ctx.config, engine)
    try:
        rows = plan(services, Scope(corpus=corpus, paradigms=list(paradigms), models=list(models),
                                    config=ctx.config), gap, epsilon)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        services.finish()
    if as_json:
        click.echo(json.dumps(rows, default=str))
        return

    def money(v):
        return "-" if v is None else f"{v:.2f}"

    cols = ["corpus", "qtype", "generator", "queries", "gap", "ε", "N (rule)", "mean runs", "US $", "wall",
            "fixed-N McNemar N", "its wall", "basis"]
    out = []
    for r in rows:
        n = "-" if r["n_needed"] is None else str(r["n_needed"])
        if r["n_needed"] is not None and not r["enough"]:
            n += " (more than the cell has)"
        fx = r["fixed_design"]
        out.append((r["corpus"], r["qtype"], r["generator"], r["queries_in_cell"], f"{r['gap']:.2f}",
                    f"{r['epsilon']:.2f}", n, "-" if r["mean_runs"] is None else f"{r['mean_runs']:.0f}",
                    money(r["usd"]), "-" if r["wall_s"] is None else _hms(r["wall_s"]),
                    "-" if fx["n"] is None else str(fx["n"]), "-" if fx["wall_s"] is None else _hms(fx["wall_s"]),
                    f"rates {r['rates']}, ψ {r['discordance']:.2f} {r['discordance_basis']}; cost {r['cost_basis']} "
                    f"(fixed {_hms(r['fixed_s'])} once"
                    + (f", of it the corpus build {_hms(r['build_s'])}: {', '.join(r['build_stages'])}"
                       if r["build_stages"] else "") + ")"))
    click.echo(render_rows(cols, out, "table"))
    if load_line():  # the walls allow for the other work on the machine now
        click.echo(load_line())
    for r in rows:
        fx = r["fixed_design"]
        if r["fixed_cheaper"]:
            rule = ("the rule reaches no N" if r["n_needed"] is None
                    else f"the rule's N {r['n_needed']}, {r['mean_runs']:.0f} runs expected")
            click.echo(f"{r['corpus']}/{r['qtype']}/{r['generator']}: at a {r['gap'] * 100:g}-point gap the fixed-N "
                       f"test is cheaper: N {fx['n']}, every paradigm on each ({fx['runs']} runs, wall "
                       f"{_hms(fx['wall_s'])}) against {rule}; run every paradigm on {fx['n']} questions of this "
                       f"type (a plain run on a slice with --queries-per-type {fx['n']}) and read the report's exact "
                       "McNemar test" + (f"; the cell has {r['queries_in_cell']}" if fx["n"] > r["queries_in_cell"]
                                         else ""))
        if r["n_needed"] is None:
            click.echo(f"{r['corpus']}/{r['qtype']}/{r['generator']}: even {r['power_at_max'] * 100:.0f} % "
                       f"by 3,000 queries: no N reaches the power")
        if r["options"]:
            click.echo(f"{r['corpus']}/{r['qtype']}/{r['generator']} is over decisions.plan_max_hours or the cell's "
                       "queries; what would help:")
            for o in r["options"]:
                click.echo(f"  {o['option']}: N {o['n'] if o['n'] is not None else '> 3000'}, "
                           f"mean runs {'-' if o['mean_runs'] is None else round(o['mean_runs'])}, "
                           f"wall {'-' if o['wall_s'] is None else _hms(o['wall_s'])}, US $ {money(o['usd'])}")
    click.echo("(N: the queries a cell needs for the rule to make a correct claim with decisions.plan_power; it stops "
               "earlier when it can: mean runs. The fixed-N test runs every paradigm on all its N queries. Both "
               "walls include the corpus's pending build once — chunk, embed, metrics, and extraction when a "
               "planned paradigm reads the graph — in every cell of that corpus.)")
