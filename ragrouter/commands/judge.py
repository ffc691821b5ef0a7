"""`cli.py judge calibrate|cases`: measure how far to trust a judge model.

The calibration set (``ragrouter.evaluation.calibration``) is made from imported queries with
gold answers; each case's label is known by construction. ``calibrate`` builds it (once), has
every named judge backend judge it, and prints agreement per true label, the confusion matrix
and Cohen's kappa. The verdicts are ``judgments`` rows flagged ``is_calibration`` (cached per
sample index like every judge call), so a re-run costs nothing and ``report`` shows them.
"""

from __future__ import annotations

import json
import time

import click

from ragrouter.commands.common import Ctx, echo_err, pass_ctx, render_rows
from ragrouter.db import migrate
from ragrouter.db.values import json_value
from ragrouter.evaluation import calibration as cal
from ragrouter.evaluation import judge as jd
from ragrouter.evaluation.stages import gate_f1
from ragrouter.stages.services import Services



@click.group("judge")
def judge_group() -> None:
    """Check the LLM-as-a-judge against answers whose label is known by construction."""


@judge_group.command("calibrate")
@click.option("--judge", "judges", multiple=True, metavar="BACKEND",
              help="Judge backend to calibrate (repeatable; a backend name from the config, or 'judge' "
                   "for the configured judge role, the default).")
@click.option("--n", "n", type=int, default=10, show_default=True,
              help="Source queries; each gives the cases whose rule applies to it: up to 3 correct (gold, "
                   "paraphrase, gold + a true evidence sentence), 3 incomplete (refusal, first clause, a less "
                   "precise gold) and 2 incorrect; a question marked unanswerable gives a right refusal and a "
                   "hallucination.")
@click.option("--corpus", help="Take the source queries from this corpus only.")
@click.option("--samples", type=int, help="Verdicts per case, majority kept (default: judge.samples).")
@click.option("--workers", type=int, help="Threads (default: the backend's concurrency).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--cached-only", is_flag=True,
              help="Judge only the cases whose verdicts the cache already holds (no model call); the "
                   "figures then cover those cases.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@pass_ctx
def calibrate_command(ctx: Ctx, judges: tuple[str, ...], n: int, corpus: str | None, samples: int | None,
                      workers: int | None, fmt: str, quiet: bool, cached_only: bool = False) -> None:
    """Judge the calibration set with each judge; print agreement, confusion matrix and kappa.

    The verdicts are stored under the judge's key (backend/prompt version[/gate], as the
    judge stage writes them). Beside the stored labels it prints, from the same model
    replies, three label variants: the model's verdicts, the judge stage's labels without
    the evidence gate (refusals labelled incomplete) and with the gate (judge.gate).

    \b
    Examples:
      python cli.py judge calibrate --n 10
      python cli.py judge calibrate --judge local-qwen-0.5b --judge local-qwen-1.5b --corpus medical
    """
    config = ctx.config
    backends = cal.resolve_judges(config, judges)
    k = int(samples if samples is not None else config.get("judge.samples", 1))
    if k < 1:
        raise cal.CalibrationError(f"--samples must be at least 1 (got {k})")
    if k > 1 and float(config.get("judge.temperature", 0.0)) == 0.0:
        echo_err("warning: judge.temperature is 0, so repeated samples of a deterministic judge agree trivially")
    engine = ctx.engine()
    migrate.ensure_current(engine)
    cset = cal.ensure_set(engine, n=n, corpus=corpus)
    if fmt == "table":
        click.echo(f"calibration set {cal.VERSION}: {len(cset.sources)} source queries, {len(cset.run_ids)} cases "
                   f"({', '.join(f'{v} {k_}' for k_, v in cset.cases_by_label.items())}); "
                   f"{cset.new_cases} new")
    services = Services(config, engine)
    gate = jd.gate_from_config(config)

    def semantic_f1(answer: str, gold: str) -> float:
        return gate_f1(services, answer, gold)

    results = {}
    variants = {}
    try:
        for backend in backends:
            started = time.monotonic()
            part = cal.cached_subset(services, backend, cset, k) if cached_only else cset
            if cached_only and fmt == "table":
                click.echo(f"{backend}: {len(part.run_ids)} of {len(cset.run_ids)} cases have cached verdicts")
            (rep, fig), = cal.judge_set(services, [backend], part, samples=k, workers=workers,
                                        progress=not quiet).values()
            results[backend] = (rep, fig, time.monotonic() - started)
            variants[backend] = cal.variant_figures(engine, fig.judge, part, k, gate, semantic_f1)
            if fmt == "table":
                click.echo("")
                click.echo(cal.render(fig, str(config.backend(backend).get("model"))))
                click.echo(cal.render_variants(variants[backend], gate))
                click.echo(f"this run: {rep.done} case(s) judged, {rep.failed} failed, {rep.pending - rep.done - rep.failed} "
                           f"left; wall {results[backend][2]:.1f} s")
                for err in rep.errors[:5]:
                    echo_err(f"  failed {err}")
    finally:
        services.finish()
    if fmt == "json":
        click.echo(json.dumps({"case_set": cal.VERSION, "sources": cset.sources, "cases": len(cset.run_ids),
                               "judges": [{**fig.as_dict(), "backend": b, "model": config.backend(b).get("model"),
                                           "wall_s": wall, "failed": rep.failed,
                                           "variants": {v: f.as_dict() for v, f in variants[b].items()}}
                                          for b, (rep, fig, wall) in results.items()]}))
    failed = sum(rep.failed for rep, _, _ in results.values())
    if failed:
        echo_err(f"{failed} case(s) could not be judged (reasons recorded); run the command again to retry them")


@judge_group.command("cases")
@click.option("--n", "n", type=int, default=10, show_default=True, help="Source queries (as for calibrate).")
@click.option("--corpus", help="Take the source queries from this corpus only.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@pass_ctx
def cases_command(ctx: Ctx, n: int, corpus: str | None, fmt: str) -> None:
    """Build (if needed) and list the calibration cases: kind, true label, answer, rule.

    \b
    Example:
      python cli.py judge cases --n 2 --format json
    """
    from sqlalchemy import text

    engine = ctx.engine()
    migrate.ensure_current(engine)
    cset = cal.ensure_set(engine, n=n, corpus=corpus)
    ids = ",".join(str(i) for i in cset.run_ids)
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT r.id, q.question, r.config_hash, r.answer, r.config FROM paradigm_runs r "
            f"JOIN queries q ON q.id = r.query_id WHERE r.id IN ({ids}) ORDER BY r.id")).all()
    out = []
    for rid, question, kind, answer, config in rows:
        config = json_value(config)
        out.append((rid, question, kind, cal.KINDS[kind].true_label, answer, (config or {}).get("rule", "")))
    click.echo(render_rows(["run_id", "question", "kind", "true_label", "answer", "rule"], out, fmt))
