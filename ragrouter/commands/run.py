"""`cli.py run`: run pipeline stages resumably (or estimate their cost with --dry-run)."""

from __future__ import annotations

import time

import click

from ragrouter.commands.common import Ctx, FailedUnits, fail, hms as _hms, pass_ctx, render_rows
from ragrouter.commands.interrupt import Steps, stoppable
from ragrouter.commands.status import NOT_REQUESTED, format_skipped
from ragrouter.db import migrate, outage
from ragrouter.decisions import speedprobe
from ragrouter.decisions.budget import build_over_budget, estimating_services, hms as clock, spent_since
from ragrouter.decisions.driver import Budget, until_decided
from ragrouter.llm.pricing import dry_run_usd_rows
from ragrouter.paradigms.paradigms import PARADIGMS
from ragrouter.stages import registry
from ragrouter.stages.base import Scope
from ragrouter.stages.expect import ledger_mark
from ragrouter.stages.runner import dry_run, run_stage
from ragrouter.stages.services import Services
from ragrouter.stages.timing import load_line, wall_estimates



def _paradigm_names() -> list[str]:
    return list(PARADIGMS)


@click.command("run")
@click.option("--stage", "stages", multiple=True, type=click.Choice(list(registry.all_stages())),
              help="Stage to run (repeatable; default: every stage in pipeline order).")
@click.option("--corpus", help="Only this corpus.")
@click.option("--paradigm", "paradigms", multiple=True, type=click.Choice(list(_paradigm_names())),
              help="Only these paradigms (answer stage; repeatable).")
@click.option("--model", "models", multiple=True, help="Only these generator backends (answer stage).")
@click.option("--limit", type=click.IntRange(min=1), help="Process at most N of the pending units of each stage in this "
              "command (answer stage: the pending runs of at most N queries); the rest stays pending and "
              "status counts it. Not a corpus slice: reports still describe the whole corpus — make a "
              "smaller corpus with `corpus slice` instead.")
@click.option("--dry-run", is_flag=True, help="Print the calls and tokens pending work would spend, "
              "minus what the cache holds: prompt tokens as counted, completion tokens as expected "
              "(this store's history of the model in the stage, else the dry_run.completion_share "
              "prior; the basis column says which) beside their max_tokens caps, and US $ (expected "
              "and at most) where backends have price_per_million; spend nothing.")
@click.option("--workers", type=click.IntRange(min=1), help="Threads per stage (default: the backend's concurrency × worker.threads_per_slot for "
              "model stages).")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: print the whole estimate as one JSON object "
              "({stages: [{stage, model, calls, prompt_tokens, completion_tokens, usd, expected_wall_s, basis, …}], "
              "expected_wall_s, usd}).")
@click.option("--probe", is_flag=True, help="With --dry-run: first measure this machine's speed of the config's local "
              "models (about 15 s per chat model, a few s per encoder; nothing goes to the ledger) and keep it in "
              "$RAGROUTER_HOME/timing, so this and every later estimate on this machine uses it (time_basis probe:) "
              "until the store has its own history of the model.")
@click.option("--until-decided", is_flag=True, help="Answer and judge each cell's queries (corpus × query type × "
              "generator) in a seeded random order, batch by batch across the paradigms still in the race, and "
              "stop each cell once a paradigm is claimed the best, or within --epsilon of the best, at decisions.alpha "
              "(anytime-valid: looking after every batch keeps the error level), once a claim is unlikely to be reached "
              "before its queries run out, or the budget is spent; clearly worse paradigms stop being run; "
              "the stages of --stage before answer (default: all of them) run first, and those after judge "
              "(score) run last, on the runs it made. The state of every cell is kept in decision_cells; a later "
              "run continues the same sequence.")
@click.option("--epsilon", type=click.FloatRange(min=0, max=1, max_open=True), help="With --until-decided: the "
              "ε of the claim 'X, or any paradigm within ε of it' (default decisions.epsilon: 0.02, 2 points; 0 asks "
              "for the best itself).")
@click.option("--budget-usd", type=click.FloatRange(min=0), help="With --until-decided: what this command may spend "
              "in US $ (backends with price_per_million), the corpus build (extract, embed, …) included: refused "
              "before anything runs when the build alone is expected to cost more; batches stop once it is spent.")
@click.option("--budget-tokens", type=click.IntRange(min=0), help="With --until-decided: the tokens this command may "
              "be billed, the corpus build included (refused before anything runs when the build alone is "
              "expected to bill more); batches stop once they are billed.")
@click.option("--budget-hours", type=click.FloatRange(min=0), help="With --until-decided: the hours this command may "
              "take, the corpus build included: refused before anything runs when the build alone is expected "
              "(as --dry-run times it) to take longer, naming `corpus slice --for-budget`. Extraction stops once "
              "the build's share is spent (decisions.build_share of the budget, or 1.5× the build's estimate if "
              "more; the rest stays pending for a later run), and the decision then goes on without the paradigms "
              "that need the whole graph, saying which; no unit starts after the budget is spent, so the command "
              "ends at most one unit's time late.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@pass_ctx
def run_command(ctx: Ctx, stages: tuple[str, ...], corpus: str | None, paradigms: tuple[str, ...],
                models: tuple[str, ...], limit: int | None, dry_run_: bool = False, workers: int | None = None,
                quiet: bool = False, **kw) -> None:  # the body is _callback (below)
    """Run stages; stop any time and run again: finished units are never redone.

    Without --stage every stage runs, except querygen on a corpus whose questions were
    imported (and none generated): name --stage querygen to generate questions there too.
    Ctrl-C or SIGTERM stops it with one line: what is done, what is pending, the command that
    resumes.

    \b
    Examples:
      python cli.py run --stage chunk --stage embed --corpus medical
      python cli.py run --stage extract --corpus medical --limit 20 --dry-run
      python cli.py run --dry-run --json --corpus medical
      python cli.py run --until-decided --corpus medical --budget-hours 2
    """


def _run(ctx: Ctx, stages, corpus, paradigms, models, limit, dry, workers, quiet, as_json=False,
         until_decided=False, budget=None, probe=False) -> None:
    started = time.monotonic()
    available = registry.all_stages()
    names = list(stages) or list(available)
    unknown = [s for s in names if s not in available]
    if unknown:
        fail(f"unknown stage(s) {', '.join(unknown)} (stages: {', '.join(available)})")
    config = ctx.config
    missing = registry.missing_extra(config, [n for n in available if n in names])
    if missing:  # refused before the store is opened: nothing recorded, nothing estimated
        fail(missing)

    def open_store():  # a worker started while PostgreSQL is away waits for it (db/outage.py)
        engine = ctx.engine(read_only=dry)  # --dry-run only reads: other readers share the file
        migrate.ensure_current(engine)
        return engine

    engine = outage.opening(open_store, outage.limit_of(config))
    scope = Scope(corpus=corpus, limit=limit, paradigms=list(paradigms), models=list(models), config=config)
    services = Services(config, engine)
    selected = [available[n] for n in available if n in names]
    order = list(available)
    unasked = outage.retry(lambda: _unasked(engine, stages, scope), "reading which corpora came with their "
                           "questions", outage.limit_of(config))
    if dry:
        try:
            if probe:
                speedprobe.probe(config, echo=lambda line: click.echo(line, err=True))
            _print_dry_run(config, _dry_run(selected, services, scope, unasked, engine), services, as_json)
        finally:
            services.finish()
        return
    after = []
    if until_decided:
        # the stages before answer run first, then the decision (answer and judge), then the
        # named stages after judge (score) on the runs it made
        # (without --stage: score too, as the help says — a router needs the runs' semantic F1)
        after = [s for s in selected if order.index(s.name) > order.index("judge")]
        selected = [s for s in selected if order.index(s.name) < order.index("answer")]
    steps = Steps([s.name for s in selected] + (["decision (answer, judge)"] if until_decided else [])
                  + [s.name for s in after])
    failed = 0
    with stoppable(steps):
        try:
            end = build_end = None
            if until_decided and _limited(budget):
                expected = _check_build(config, engine, selected, scope, unasked, budget)
                if budget.hours is not None:
                    end = started + budget.hours * 3600
                    build_end = started + _build_share(config, budget.hours, expected) * budget.hours * 3600
            mark = outage.retry(lambda: _ledger_mark(engine), "reading the ledger", outage.limit_of(config))
            stopped = None
            for stage in selected:
                steps.start(stage.name)
                reports = _run_one(stage, services, scope, unasked, engine, workers, quiet,
                                   deadline=build_end if stage.name == "extract" else end)
                failed += sum(r.failed for r in reports)
                if stage.name == "extract" and any(r.stopped for r in reports):
                    stopped = reports
                steps.finish(stage.name)
            if until_decided:
                steps.start("decision (answer, judge)")
                decide = scope
                if stopped is not None:
                    decide = _without_graph(config, scope, stopped, build_end - started, budget)
                left = _budget_left(services, budget, mark, time.monotonic() - started)
                if decide is not None:
                    _decide(services, decide, left, quiet)
                steps.finish("decision (answer, judge)")
                for stage in after:
                    steps.start(stage.name)
                    if end is None or _fits(stage, services, scope, unasked, engine, end):
                        failed += sum(r.failed for r in _run_one(stage, services, scope, unasked, engine, workers,
                                                                 quiet, deadline=end))
                    steps.finish(stage.name)
            if "gateway" in services.__dict__:  # a stage used a model: what this run spent
                st = services.gateway.stats()
                click.echo(f"model calls: {st.get('http_requests', 0)} HTTP requests, {st.get('cache_hits', 0)} "
                           f"cache hits, {st.get('billed_tokens', 0)} tokens billed")
        finally:
            services.finish()
    if failed:
        raise FailedUnits(f"{failed} unit(s) failed and were recorded with their reason (see them with: "
                          "sql \"select stage, unit_key, error from unit_failures\"); run again to retry them")


BUILD_SLACK = 1.5  # the build may take this many times its estimate before extraction stops ...


def _build_share(config, hours: float, expected_s: float | None) -> float:
    """The share of ``--budget-hours`` the corpus build may take before extraction stops:
    ``decisions.build_share``, or :data:`BUILD_SLACK` × the build's estimate if that is more,
    never more than the whole budget."""
    share = float(config.get("decisions.build_share", 0.5) or 0.5)
    if expected_s and hours > 0:
        share = max(share, BUILD_SLACK * expected_s / (hours * 3600))
    return min(1.0, share)


def _fits(stage, services, scope, unasked, engine, end: float) -> bool:
    """Whether ``stage`` is expected (as --dry-run times it) to end before ``end``; one line
    when it is not: it is not started (a stage's start alone, the score stage's scorer, can take
    longer than the budget has left)."""
    expected = float(wall_estimates(services.config, _dry_run([stage], services, scope, unasked, engine),
                                    services)["expected_wall_s"])
    left = end - time.monotonic()
    if expected <= left:
        return True
    click.echo(f"{stage.name}: not started: expected to take {_hms(expected)}, {_hms(max(0.0, left))} of the budget "
               f"left (the same command runs it later)")
    return False


def graph_paradigms(config, names) -> list[str]:
    """The paradigms of ``names`` that read the knowledge graph (GraphRAG, HybridRAG and an
    IterativeRAG over the graph retriever)."""
    out = []
    for name in names:
        params = PARADIGMS[name].config(config).get("params", {}) if name in PARADIGMS else {}
        if name in ("graph", "hybrid") or params.get("base_retriever") == "graph":
            out.append(name)
    return out


def _without_graph(config, scope, reports, share_s: float, budget):
    """Extraction stopped at the build's share of the budget: the decision's scope without the
    paradigms that need the whole graph (one line says which and why); None when none is left."""
    from dataclasses import replace

    names = list(scope.paradigms) or list(config.get("paradigms.enabled"))
    dropped = graph_paradigms(config, names)
    kept = [p for p in names if p not in dropped]
    done = sum(r.done for r in reports)
    left = sum(max(0, r.pending - r.done - r.failed) for r in reports)
    why = (f"extract stopped at the build's share of the budget ({_hms(share_s)} of {_hms(budget.hours * 3600)}): "
           f"{done} chunk(s) extracted this run, {left} left for a later run (the same command resumes)")
    if not dropped:
        click.echo(f"{why}; no paradigm of this run needs the graph")
        return scope
    if not kept:
        click.echo(f"{why}; every paradigm of this run needs the whole graph ({', '.join(dropped)}): "
                   "nothing is decided now")
        return None
    click.echo(f"{why}; decided without {', '.join(dropped)} (they need the whole graph), on {', '.join(kept)}")
    return replace(scope, paradigms=kept)


def _unasked(engine, named, scope) -> dict[str, list[str]]:
    """Per stage nobody asked for, the corpora of the scope it leaves alone: querygen (unless
    named) on corpora whose questions were imported and none generated (``status`` leaves
    them out of its pending units alike)."""
    from sqlalchemy import text

    out = {}
    with engine.connect() as conn:
        for stage, sql in NOT_REQUESTED.items():
            if stage in named:
                continue
            got = [r[0] for r in conn.execute(text(sql)).all() if scope.corpus in (None, r[0])]
            if got:
                out[stage] = got
    return out


def _scopes(stage, scope, unasked, engine) -> list:
    """The scopes ``stage`` runs on: ``scope``, or each of its corpora that asked for the stage."""
    from dataclasses import replace

    from sqlalchemy import text

    skip = unasked.get(stage.name)
    if not skip:
        return [scope]
    if scope.corpus is not None:
        return []
    with engine.connect() as conn:
        names = [r[0] for r in conn.execute(text("SELECT name FROM corpora ORDER BY id")).all()]
    return [replace(scope, corpus=n) for n in names if n not in skip]


def _run_one(stage, services, scope, unasked, engine, workers, quiet, deadline=None) -> list:
    """Run ``stage`` on the corpora that asked for it (none started after ``deadline``); its reports."""
    config = services.config
    scopes = _scopes(stage, scope, unasked, engine)
    skip = unasked.get(stage.name, [])
    if skip:
        click.echo(f"{stage.name}: not run on {', '.join(repr(c) for c in skip)} (its questions were imported; "
                   f"--stage {stage.name} generates more)")
    reports = []
    for sub in scopes:
        rep = run_stage(stage, services, sub, workers=workers, progress=not quiet, deadline=deadline)
        reports.append(rep)
        where = f" ({sub.corpus})" if sub is not scope else ""
        click.echo(f"{stage.name}{where}: {rep.done} done, {rep.failed} failed of {rep.pending} pending "
                   f"({rep.seconds:.1f}s)" + ("; stopped at the budget's deadline, the rest stays pending"
                                               if rep.stopped else ""))
        for err in rep.errors[:5]:
            click.echo(f"  failed {err}", err=True)
        skipped = outage.retry(lambda sub=sub: _skipped(engine, stage, sub), f"counting the skipped units of stage "
                               f"{stage.name}", outage.limit_of(config))
        if skipped:
            click.echo(f"  skipped {sum(skipped.values())} unit(s) without a result: {format_skipped(skipped)}")
    return reports


def _dry_run(selected, services, scope, unasked, engine) -> list:
    """The dry run of ``selected`` on the corpora that asked for each stage (see :func:`_unasked`)."""
    out, group = [], []
    for stage in selected:
        scopes = _scopes(stage, scope, unasked, engine)
        if scopes == [scope]:
            group.append(stage)
            continue
        if group:
            out += dry_run(group, services, scope)
            group = []
        for sub in scopes:
            out += dry_run([stage], services, sub)
    return out + (dry_run(group, services, scope) if group else [])


def _check_build(config, engine, build, scope, unasked, budget) -> float | None:
    """Refuse (one line, exit 2) before anything runs when the build stages alone are expected
    to exceed the budget; else their expected seconds. Estimated without a worker run of its
    own: the store is unchanged. Says first when other work slows the estimate down."""
    if not build:
        return None
    est = estimating_services(config, engine, "run --budget-* (estimate)")
    try:
        rows = _dry_run(build, est, scope, unasked, engine)
        line = build_over_budget(config, est, rows, budget, scope.corpus)
        expected = None if line else float(wall_estimates(config, rows, est)["expected_wall_s"])
    finally:
        est.finish()
    if line:
        fail(line)
    busy = load_line()
    if busy:
        click.echo(busy)
    return expected


def _limited(budget) -> bool:
    return budget is not None and any(v is not None for v in (budget.usd, budget.tokens, budget.hours))


def _ledger_mark(engine) -> int:
    with engine.connect() as conn:
        return ledger_mark(conn)


def _budget_left(services, budget, mark: int, elapsed_s: float):
    """What the decision may still spend of ``budget`` after the build stages of this command."""
    if not _limited(budget):
        return budget or Budget()
    tokens, usd = spent_since(services, mark)
    left = Budget(None if budget.usd is None else max(0.0, budget.usd - usd),
                  None if budget.tokens is None else max(0, budget.tokens - tokens),
                  None if budget.hours is None else max(0.0, budget.hours - elapsed_s / 3600))
    parts = []
    if budget.hours is not None:
        parts.append(f"{clock(left.hours * 3600)} of {clock(budget.hours * 3600)}")
    if budget.tokens is not None:
        parts.append(f"{left.tokens:,} of {budget.tokens:,} tokens")
    if budget.usd is not None:
        parts.append(f"US $ {left.usd:.4f} of {budget.usd:g}")
    click.echo(f"budget left for answering and judging: {', '.join(parts)} (the stages before used "
               f"{clock(elapsed_s)}, {tokens:,} tokens)")
    return left


def _skipped(engine, stage, scope) -> dict[str, int]:
    with engine.connect() as conn:
        return stage.skipped(conn, scope)


def _print_dry_run(config, estimates, services, as_json: bool) -> None:
    import json

    timed = wall_estimates(config, estimates, services)
    if as_json:
        click.echo(json.dumps(timed, default=str))
        return
    rows = [(e.stage, e.model, e.calls, e.cached_calls, e.calls - e.cached_calls, e.prompt_tokens,
             e.completion_tokens, e.completion_cap, e.basis or "-") for e in estimates]
    cols, rows, note = dry_run_usd_rows(config, rows)
    walls = {(r["stage"], r["model"]): r for r in timed["stages"]}
    cols = list(cols) + ["expected_wall", "time_basis"]
    rows = [tuple(r) + (_hms(walls.get((r[0], r[1]), {}).get("expected_wall_s")),
                        walls.get((r[0], r[1]), {}).get("time_basis", "-")) for r in rows]
    click.echo(render_rows(cols, rows, "table"))
    if timed["busy"]["line"]:
        click.echo(timed["busy"]["line"])
    click.echo(f"expected wall time: {_hms(timed['expected_wall_s'])} in all"
               + (f"; US $ {timed['usd']:.4f}" if timed.get("usd") is not None else ""))
    for line in timed.get("advice", []):
        click.echo(line)
    if note:
        click.echo(note)
    click.echo("(stages whose inputs do not exist yet are estimated once their inputs exist)")


def _decide(services, scope, budget, quiet: bool) -> None:
    cells = until_decided(services, scope, budget, progress=not quiet, echo=click.echo)
    cols = ["corpus", "qtype", "generator", "state", "leader", "N", "runs", "bound", "stop"]
    rows = [(c.corpus, c.qtype, c.generator, c.state.state, c.state.leader or "-", c.state.n_queries, c.runs,
             "-" if c.state.bound is None else f"{c.state.bound:+.3f}", c.stop_reason or "-") for c in cells]
    click.echo(render_rows(cols, rows, "table"))
    failed = [c for c in cells if (c.stop_reason or "").startswith("failed")]
    if failed:  # a cell stopped because its units failed is not a finished run
        raise FailedUnits(f"{len(failed)} cell(s) stopped because their units failed (see them with: "
                          "sql \"select stage, unit_key, error from unit_failures\"); run again to retry them")


# click passes --dry-run as dry_run; keep the body out of the decorated function for clarity.
def _callback(ctx, stages, corpus, paradigms, models, limit, dry_run, workers, quiet, as_json=False,  # noqa: PLR0913
              until_decided=False, budget_usd=None, budget_tokens=None, budget_hours=None, probe=False, epsilon=None):
    if epsilon is not None:
        if not until_decided:
            fail("--epsilon goes with --until-decided")
        ctx.config.data.setdefault("decisions", {})["epsilon"] = float(epsilon)
    if (budget_usd is not None or budget_tokens is not None or budget_hours is not None) and not until_decided:
        fail("--budget-usd, --budget-tokens and --budget-hours go with --until-decided")
    if as_json and not dry_run:
        fail("--json goes with --dry-run")
    if probe and not dry_run:
        fail("--probe goes with --dry-run")
    if until_decided and dry_run:
        fail("--until-decided and --dry-run do not go together (a dry run of the whole cells: run --dry-run "
             "--stage answer --stage judge; how many queries a decision needs: plan)")
    _run(ctx, stages, corpus, paradigms, models, limit, dry_run, workers, quiet, as_json, until_decided,
         Budget(budget_usd, budget_tokens, budget_hours), probe)


run_command.callback = pass_ctx(_callback)
