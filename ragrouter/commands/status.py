"""`cli.py status`: units done / pending / failed / skipped per stage, tokens per stage and model."""

from __future__ import annotations

import json

import click
from sqlalchemy import text

from ragrouter.commands.common import Ctx, pass_ctx, render_rows
from ragrouter.db import migrate, progress
from ragrouter.db.engine import StoreLockedError
from ragrouter.stages import registry
from ragrouter.stages.base import Scope


def format_skipped(skipped: dict[str, int]) -> str:
    """``"no_chain 2, invalid_reply 1"`` (most frequent first; empty when none)."""
    return ", ".join(f"{k} {v}" for k, v in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))


def collect(engine, scope: Scope) -> dict:
    """Status as a dict (the --json output)."""
    migrate.ensure_current(engine)
    stages = []
    with engine.connect() as conn:
        failures = dict(conn.execute(text(
            "SELECT stage, COUNT(*) FROM unit_failures GROUP BY stage")).all())
        for stage in registry.all_stages().values():
            expected, done = stage.counts(conn, scope)
            failed = int(failures.get(stage.name, 0))
            stages.append({"stage": stage.name, "expected": int(expected), "done": int(done),
                           "pending": int(expected - done), "failed": failed,
                           "skipped": {k: int(v) for k, v in stage.skipped(conn, scope).items()}})
        tokens = [dict(r._mapping) for r in conn.execute(text(
            "SELECT stage, model, calls, prompt_tokens, completion_tokens, total_tokens "
            "FROM v_tokens_by_stage ORDER BY stage, model"))]
    for row in tokens:
        for key in ("calls", "prompt_tokens", "completion_tokens", "total_tokens"):
            row[key] = int(row[key] or 0)
    out = {"stages": stages, "tokens": tokens}
    money = _money(engine, scope.config)
    if money is not None:
        out["money"] = money
    return out


def _money(engine, config) -> dict | None:
    """Billed dollars per stage and backend, when some backend of the config has prices."""
    from ragrouter.llm import pricing

    if config is None or not pricing.backend_prices(config):
        return None
    with engine.connect() as conn:
        billed = pricing.billed_by_stage(conn, config)
    return {"billed": billed, "total_usd": sum(r["usd"] or 0 for r in billed),
            "prices": [dict(zip(("backend", "model", "input", "output", "cached_input"), r))
                       for r in pricing.price_rows(config)]}


def _echo_money(money: dict) -> None:
    from ragrouter.llm.pricing import usd

    click.echo()
    cols = ["stage", "backend", "calls", "prompt_tokens", "cached_prompt_tokens", "completion_tokens", "usd"]
    click.echo(render_rows(cols, [tuple(usd(r[c]) if c == "usd" else r[c] for c in cols) for r in money["billed"]],
                           "table"))
    used = ", ".join(f"{p['backend']} in {p['input']:g} / out {p['output']:g} / cached {p['cached_input']:g}"
                     for p in money["prices"])
    click.echo(f"billed in total: {usd(money['total_usd'])} ($ per million tokens: {used})")


@click.command("status")
@click.option("--corpus", help="Only this corpus.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@pass_ctx
def status_command(ctx: Ctx, corpus: str | None, as_json: bool) -> None:
    """Show units done / pending / failed / skipped (by reason) per stage, and billed tokens per stage and model
    (with their dollars when backends carry price_per_million).

    \b
    Example:
      python cli.py status --json
    """
    scope = Scope(corpus=corpus, config=ctx.config)
    try:
        engine = ctx.engine(read_only=True)
    except StoreLockedError as exc:
        # A worker holds the DuckDB file (no reader may open it meanwhile): its progress file.
        run = progress.read(exc.path) if exc.path else None
        if run is None:
            raise
        show_progress(run, exc.path, as_json)
        return
    data = collect(engine, scope)
    if as_json:
        click.echo(json.dumps(data))
        return
    cols = ["stage", "expected", "done", "pending", "failed"]
    click.echo(render_rows(cols + ["skipped"], [tuple(s[c] for c in cols) + (format_skipped(s["skipped"]),)
                                                for s in data["stages"]], "table"))
    click.echo()
    cols = ["stage", "model", "calls", "prompt_tokens", "completion_tokens", "total_tokens"]
    click.echo(render_rows(cols, [tuple(t[c] for c in cols) for t in data["tokens"]], "table"))
    if "money" in data:
        _echo_money(data["money"])


def show_progress(run: dict, path: str, as_json: bool) -> None:
    """A running worker's progress, from the file it keeps beside the DuckDB store."""
    if as_json:
        click.echo(json.dumps({"running": run}))
        return
    click.echo(f"a run is in progress on {path}: process {run.get('pid')}, since {run.get('started_at')} "
               f"(updated {run.get('updated_at')}): {run.get('command', '')}")
    rows = [(name, s.get("pending", 0), s.get("done", 0), s.get("failed", 0))
            for name, s in (run.get("stages") or {}).items()]
    click.echo(render_rows(["stage", "pending", "done", "failed"], rows, "table"))
    click.echo("(the full status, with tokens, once the run has finished; on PostgreSQL at any time)")
