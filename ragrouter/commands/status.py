"""`cli.py status`: units done / pending / failed / skipped per stage, tokens per stage and model.

Without ``--config`` the expectations come from the store: every worker process records the
merged config it ran stages with and the stages it ran (``worker_runs.config`` /
``.stages``), and each stage is counted under the stored config of its own runs (the one
under which most of its units are done, the newest on a tie). A finished run therefore
looks finished without repeating its ``--config``; a stage that no run of this store ran
shows as ``not run``. With ``--config`` (or ``RAGROUTER_CONFIG``) the expectations are what
that config would run.

Stages nobody asked for are not pending: querygen on a corpus whose questions came with the
dataset (imported, none generated) is left out of querygen's expected units and named in a note
(``not_requested`` in ``--json``); ``run --stage querygen --corpus C`` still generates them.

``status`` only reads: a store behind this code's head revision (``db downgrade`` on purpose,
or made by an older version) is never migrated by it — it says the revision the store is at
and that ``db upgrade`` brings it to head (one line, exit 2), and changes nothing.
"""

from __future__ import annotations

import json

import click
from sqlalchemy import text

from ragrouter.commands.common import Ctx, check_at_head, hms as _hms, pass_ctx, render_rows
from ragrouter.config import Config, ConfigError
from ragrouter.db import migrate, progress
from ragrouter.db.engine import StoreError, StoreLockedError
from ragrouter.db.values import json_value
from ragrouter.decisions.driver import decision_cells
from ragrouter.llm import pricing
from ragrouter.llm.pricing import usd
from ragrouter.stages import registry
from ragrouter.stages.base import Scope, ScopeError


def format_skipped(skipped: dict[str, int]) -> str:
    """``"no_chain 2, invalid_reply 1"`` (most frequent first; empty when none)."""
    return ", ".join(f"{k} {v}" for k, v in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))


def stored_configs(conn) -> list[tuple[Config, set[str]]]:
    """Distinct configs the store's worker runs used (newest first), each with the stages
    run under it. Runs from before migration 0003 recorded none."""
    rows = conn.execute(text("SELECT id, config, stages FROM worker_runs WHERE config IS NOT NULL "
                             "ORDER BY id DESC")).all()
    seen: dict[str, tuple[Config, set[str]]] = {}
    for run_id, data, stages in rows:
        data = json_value(data)
        stages = json_value(stages) or []
        key = json.dumps(data, sort_keys=True)
        if key not in seen:
            try:
                seen[key] = (Config(data, source=f"config of worker run {run_id}"), set())
            except ConfigError:
                continue  # a config this version no longer accepts: it cannot say what it expects
        seen[key][1].update(stages)
    return list(seen.values())


def _counts(stage, conn, scope) -> tuple[int, int] | None:
    try:
        return stage.counts(conn, scope)
    except (ConfigError, ScopeError, KeyError, ValueError):
        return None  # the stored config lacks something this stage needs


NOT_REQUESTED = {"querygen": (
    "SELECT c.name FROM corpora c WHERE EXISTS (SELECT 1 FROM queries q WHERE q.corpus_id = c.id "
    "AND q.origin = 'imported') AND NOT EXISTS (SELECT 1 FROM queries q WHERE q.corpus_id = c.id "
    "AND q.origin IN ('generated', 'querygen-note', 'human-reviewed')) ORDER BY c.name")}
"""Per stage: the corpora on which nobody asked for it (querygen where the questions were imported)."""


def not_requested(stage, conn, scope: Scope) -> tuple[int, int, list[str]]:
    """(expected, done, corpora) of ``stage`` on the corpora of :data:`NOT_REQUESTED` in scope."""
    sql = NOT_REQUESTED.get(stage.name)
    if sql is None:
        return 0, 0, []
    names = [r[0] for r in conn.execute(text(sql)).all() if scope.corpus in (None, r[0])]
    expected = done = 0
    kept = []
    for name in names:
        got = _counts(stage, conn, Scope(corpus=name, limit=scope.limit, paradigms=scope.paradigms,
                                         models=scope.models, config=scope.config))
        if got and got[0]:
            expected, done = expected + int(got[0]), done + int(got[1])
            kept.append(name)
    return expected, done, kept


def collect(engine, scope: Scope, from_store: bool = False) -> dict:
    """Status as a dict (the --json output). ``from_store``: expectations from the configs
    the store's runs used (see the module doc) instead of ``scope.config``. A store behind head
    is refused (:func:`check_at_head`), never upgraded; outdated views of a store at head are
    re-created (their SQL, not the schema)."""
    check_at_head(engine)
    if migrate.needs_work(engine) == "views" and not getattr(engine, "ragrouter_read_only", False):
        migrate.refresh_views(engine)
    stages = []
    with engine.connect() as conn:
        failures = dict(conn.execute(text(
            "SELECT stage, COUNT(*) FROM unit_failures GROUP BY stage")).all())
        stored = stored_configs(conn) if from_store else []
        from_store = bool(stored)  # a store whose runs recorded no config: the given config's view
        for stage in registry.all_stages().values():
            failed = int(failures.get(stage.name, 0))
            row = {"stage": stage.name, "failed": failed, "ran": True,
                   "skipped": {k: int(v) for k, v in stage.skipped(conn, scope).items()}, "config": scope.config.source
                   if scope.config is not None else None}
            if from_store:
                best = None
                for config, ran in stored:
                    if stage.name not in ran:
                        continue
                    got = _counts(stage, conn, Scope(corpus=scope.corpus, limit=scope.limit,
                                                     paradigms=scope.paradigms, models=scope.models, config=config))
                    if got is not None and (best is None or got[1] > best[0][1]):
                        best = (got, config.source)
                if best is None:
                    row.update(expected=0, done=0, pending=0, ran=False, config=None)
                    stages.append(row)
                    continue
                (expected, done), row["config"] = best
                unasked = not_requested(stage, conn, Scope(corpus=scope.corpus, limit=scope.limit,
                                                           paradigms=scope.paradigms, models=scope.models,
                                                           config=next(c for c, _ in stored if c.source == best[1])))
            else:
                expected, done = stage.counts(conn, scope)
                unasked = not_requested(stage, conn, scope)
            if unasked[2]:
                expected, done = expected - unasked[0], done - unasked[1]
                row["not_requested"] = {"expected": unasked[0], "corpora": unasked[2]}
            row.update(expected=int(expected), done=int(done), pending=int(expected - done))
            stages.append(row)
        tokens = [dict(r._mapping) for r in conn.execute(text(
            "SELECT stage, model, calls, prompt_tokens, completion_tokens, total_tokens "
            "FROM v_tokens_by_stage ORDER BY stage, model"))]
    for row in tokens:
        for key in ("calls", "prompt_tokens", "completion_tokens", "total_tokens"):
            row[key] = int(row[key] or 0)

    out = {"stages": stages, "tokens": tokens, "expectations": "store" if from_store else "config",
           "decisions": decision_cells(engine)}
    money = _money(engine, scope.config)
    if money is not None:
        out["money"] = money
    return out


def _money(engine, config) -> dict | None:
    """Billed dollars per stage and backend, when some backend of the config has prices."""
    if config is None or not pricing.backend_prices(config):
        return None
    with engine.connect() as conn:
        billed = pricing.billed_by_stage(conn, config)
    return {"billed": billed, "total_usd": sum(r["usd"] or 0 for r in billed),
            "prices": [dict(zip(("backend", "model", "input", "output", "cached_input"), r))
                       for r in pricing.price_rows(config)]}


def _echo_money(money: dict) -> None:
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

    Without --config, what each stage expects comes from the configs its runs in this store
    used (a finished run looks finished); with --config, from that config.

    \b
    Example:
      python cli.py status --json
    """
    scope = Scope(corpus=corpus, config=ctx.config)
    try:
        engine = ctx.engine_at_head()
    except StoreLockedError as exc:
        # A worker holds the DuckDB file (no reader may open it meanwhile): its progress file.
        run = progress.read(exc.path) if exc.path else None
        if run is None:
            raise
        show_progress(run, exc.path, as_json)
        return
    data = collect(engine, scope, from_store=ctx.config_path is None)
    if as_json:
        click.echo(json.dumps(data))
        return
    cols = ["stage", "expected", "done", "pending", "failed"]
    rows = [tuple(s[c] for c in cols) + (format_skipped(s["skipped"]),) if s["ran"]
            else (s["stage"], "-", "-", "not run", s["failed"], format_skipped(s["skipped"]))
            for s in data["stages"]]
    click.echo(render_rows(cols + ["skipped"], rows, "table"))
    for s in data["stages"]:
        if s.get("not_requested"):
            nr = s["not_requested"]
            click.echo(f"({s['stage']}: {nr['expected']} units on {', '.join(nr['corpora'])} not counted — their "
                       f"questions were imported; run --stage {s['stage']} --corpus NAME to make them)")
    if data.get("expectations") == "store":
        click.echo("(expectations: the configs this store's runs used; pass --config to see what another "
                   "config would run)")
    click.echo()
    cols = ["stage", "model", "calls", "prompt_tokens", "completion_tokens", "total_tokens"]
    click.echo(render_rows(cols, [tuple(t[c] for c in cols) for t in data["tokens"]], "table"))
    if "money" in data:
        _echo_money(data["money"])
    if data.get("decisions"):
        click.echo()
        cols = ["corpus", "qtype", "generator", "state", "leader", "N", "runs", "bound", "stop", "claim"]
        click.echo(render_rows(cols, [(d["corpus"], d["qtype"], d["generator"], d["state"], d["winner"] or "-",
                                       d["n_queries"], d["n_runs"], "-" if d["bound"] is None else f"{d['bound']:+.3f}",
                                       d["stop_reason"] or "going on", d.get("claim") or "-")
                                      for d in data["decisions"]], "table"))
        click.echo("(run --until-decided: the claim column says exactly what holds, each part at the cell's alpha; "
                   "bound = the leader's smallest lower confidence bound on its lead over another paradigm still run "
                   "(decided: over every other paradigm, through the paradigm that dropped it); "
                   "the leader of an undecided cell is no decision)")


def show_progress(run: dict, path: str, as_json: bool) -> None:
    """A running worker's progress, from the file it keeps beside the DuckDB store."""
    stages = run.get("stages") or {}
    etas = {name: progress.eta_seconds(s) for name, s in stages.items()}
    if as_json:
        click.echo(json.dumps({"running": run, "eta_s": etas}))
        return

    click.echo(f"a run is in progress on {path}: process {run.get('pid')}, since {run.get('started_at')} "
               f"(updated {run.get('updated_at')}): {run.get('command', '')}")
    rows = [(name, s.get("pending", 0), s.get("done", 0), s.get("failed", 0),
             _hms(etas[name]) if etas[name] is not None else "-") for name, s in stages.items()]
    click.echo(render_rows(["stage", "pending", "done", "failed", "eta (at its pace so far)"], rows, "table"))
    click.echo("(the full status, with tokens, once the run has finished; on PostgreSQL at any time)")
