"""`cli.py run`: run pipeline stages resumably (or estimate their cost with --dry-run)."""

from __future__ import annotations

import click

from ragrouter.commands.common import Ctx, FailedUnits, fail, pass_ctx, register_user_error, render_rows
from ragrouter.commands.status import format_skipped
from ragrouter.db import migrate
from ragrouter.llm.pricing import PriceError, dry_run_usd_rows
from ragrouter.stages import registry
from ragrouter.stages.base import Scope, ScopeError
from ragrouter.stages.runner import dry_run, run_stage
from ragrouter.stages.services import Services

register_user_error(ScopeError)
register_user_error(PriceError)


def _paradigm_names() -> list[str]:
    from ragrouter.paradigms.paradigms import PARADIGMS

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
@click.option("--quiet", is_flag=True, help="No progress bars.")
@pass_ctx
def run_command(ctx: Ctx, stages: tuple[str, ...], corpus: str | None, paradigms: tuple[str, ...],
                models: tuple[str, ...], limit: int | None, dry_run_: bool = False, workers: int | None = None,
                quiet: bool = False, **kw) -> None:
    """Run stages; stop any time and run again: finished units are never redone.

    \b
    Examples:
      python cli.py run --stage chunk --stage embed --corpus medical
      python cli.py run --stage extract --corpus medical --limit 20 --dry-run
    """


def _run(ctx: Ctx, stages, corpus, paradigms, models, limit, dry, workers, quiet) -> None:
    available = registry.all_stages()
    names = list(stages) or list(available)
    unknown = [s for s in names if s not in available]
    if unknown:
        fail(f"unknown stage(s) {', '.join(unknown)} (stages: {', '.join(available)})")
    config = ctx.config
    engine = ctx.engine(read_only=dry)  # --dry-run only reads: other readers share the file
    migrate.ensure_current(engine)
    scope = Scope(corpus=corpus, limit=limit, paradigms=list(paradigms), models=list(models), config=config)
    services = Services(config, engine)
    selected = [available[n] for n in available if n in names]
    try:
        if dry:
            rows = [(e.stage, e.model, e.calls, e.cached_calls, e.calls - e.cached_calls, e.prompt_tokens,
                     e.completion_tokens, e.completion_cap, e.basis or "-") for e in dry_run(selected, services, scope)]
            cols, rows, note = dry_run_usd_rows(config, rows)
            click.echo(render_rows(cols, rows, "table"))
            if note:
                click.echo(note)
            click.echo("(stages whose inputs do not exist yet are estimated once their inputs exist)")
            return
        failed = 0
        for stage in selected:
            rep = run_stage(stage, services, scope, workers=workers, progress=not quiet)
            failed += rep.failed
            click.echo(f"{stage.name}: {rep.done} done, {rep.failed} failed of {rep.pending} pending "
                       f"({rep.seconds:.1f}s)")
            for err in rep.errors[:5]:
                click.echo(f"  failed {err}", err=True)
            with engine.connect() as conn:
                skipped = stage.skipped(conn, scope)
            if skipped:
                click.echo(f"  skipped {sum(skipped.values())} unit(s) without a result: {format_skipped(skipped)}")
        if "gateway" in services.__dict__:  # a stage used a model: what this run spent
            st = services.gateway.stats()
            click.echo(f"model calls: {st.get('http_requests', 0)} HTTP requests, {st.get('cache_hits', 0)} cache "
                       f"hits, {st.get('billed_tokens', 0)} tokens billed")
    finally:
        services.finish()
    if failed:
        raise FailedUnits(f"{failed} unit(s) failed and were recorded with their reason (see them with: "
                          "sql \"select stage, unit_key, error from unit_failures\"); run again to retry them")


# click passes --dry-run as dry_run; keep the body out of the decorated function for clarity.
def _callback(ctx, stages, corpus, paradigms, models, limit, dry_run, workers, quiet):  # noqa: PLR0913
    _run(ctx, stages, corpus, paradigms, models, limit, dry_run, workers, quiet)


run_command.callback = pass_ctx(_callback)
