"""`cli.py routers train|promote|compare|relocate` and `cli.py mlflow-ui`: the router zoo, tracked in MLflow."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import click

from ragrouter.commands.common import Ctx, fail, pass_ctx, render_rows
from ragrouter.console import library_warnings
from ragrouter.db import migrate


def _router_names() -> list[str]:
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.routers.registry import ROUTERS

    return sorted(ROUTERS)


@click.group("routers")
def routers_group() -> None:
    """Train routers with stratified CV (up to 5 folds, fewer on small data) and compare them (paper §3.5, Table 3).

    \b
    Examples:
      python cli.py routers train --router lr --router xgboost --features qc
      python cli.py routers train --router dnn --encoder minilm --encoder onehot
      python cli.py routers train --dataset my_labels.parquet
      python cli.py routers compare
    """


@routers_group.command("train")
@click.option("--router", "routers", multiple=True, help="Router to train (repeatable; default: the whole zoo).")
@click.option("--features", "feature_sets", multiple=True, type=click.Choice(["q", "c", "qc"]),
              help="Feature set (repeatable; default: q, c and qc).")
@click.option("--dataset", "dataset_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Train on an imported labelled dataset (CSV or Parquet of the router-dataset shape) "
                   "instead of the store's labels.")
@click.option("--encoder", "encoders", multiple=True,
              help="Query encoder of the neural routers (repeatable; default: routers.encoders of the "
                   "config): 'onehot' or an embedder backend name (e.g. minilm, openai-embed).")
@click.option("--cost-sweep/--no-cost-sweep", default=False,
              help="Also sweep λ of the utility quality − λ·tokens (cost-aware labels, AIQ).")
@click.option("--promote", "promote_by", type=click.Choice(["correct_rate", "routing_accuracy", "macro_f1"]),
              help="Then promote the best trained router (not a baseline) by this fold-mean metric to the "
                   "registry alias 'champion' (as 'routers promote' does).")
@click.option("--max-avg-tokens", type=click.FloatRange(min=0), help="With --promote: only routers whose mean "
              "tokens per query are at most this (C.R under a token budget).")
@pass_ctx
def train_command(ctx: Ctx, routers: tuple[str, ...], feature_sets: tuple[str, ...], dataset_path: Path | None,
                  encoders: tuple[str, ...], cost_sweep: bool, promote_by: str | None = None,
                  max_avg_tokens: float | None = None) -> None:
    """Cross-validate routers; log each to MLflow (one run per router, features and encoder,
    tagged with this store's id) and store every prediction and fold metric.

    \b
    Examples:
      python cli.py routers train --router dnn --router lr --features qc
      python cli.py routers train --router dnn --encoder minilm --encoder openai-embed
    """
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import routing
    from ragrouter.routers.dataset import load_router_dataset

    names = list(routers) or _router_names()
    if not routers:  # the whole zoo: leave out (with one note) the routers whose extra is not installed
        # deferred (start-up): pulls in pandas, sklearn, torch
        from ragrouter.routers.registry import ROUTERS

        lacking: dict[str, list[str]] = {}
        for r in names:
            if getattr(ROUTERS[r], "missing_extra", None):
                lacking.setdefault(ROUTERS[r].missing_extra, []).append(r)
        for extra, left in lacking.items():
            names = [r for r in names if r not in left]
            click.echo(f"note: left out {', '.join(left)}: they need the [{extra}] extra "
                       f"(pip install 'ragrouter[{extra}]')")
    unknown = [r for r in names if r not in _router_names()]
    if unknown:
        fail(f"unknown router(s) {', '.join(unknown)} (known: {', '.join(_router_names())})")
    try:
        routing.encoder_names(ctx.config, encoders)
    except routing.EncoderConfigError as exc:
        fail(str(exc))
    engine = ctx.engine()
    migrate.ensure_current(engine)
    if dataset_path:
        df = load_router_dataset(dataset_path)
        label = dataset_path.stem
    else:
        df = routing.store_dataset(engine, ctx.config)
        label = "store"
    lambdas = None
    if cost_sweep:
        # deferred (start-up): pulls in pandas, sklearn, torch
        from ragrouter.routers.evaluate import DEFAULT_LAMBDAS

        lambdas = DEFAULT_LAMBDAS

    with library_warnings("routers train", echo=click.echo):  # sklearn/MLflow warnings to the log file
        results = routing.train(engine, ctx.config, df, names, list(feature_sets) or ["q", "c", "qc"], label,
                                log=click.echo, lambdas=lambdas, encoders=list(encoders) or None,
                                dataset_source=str(dataset_path) if dataset_path else None, show_progress=True)
    if results is not None and len(results):
        _print_results(results)
    if promote_by and results is not None and len(results):
        # deferred (start-up): pulls in pandas, sklearn, torch
        from ragrouter.answering import ask as ask_mod
        # deferred (start-up): pulls in mlflow, pandas
        from ragrouter.answering import promotion

        eligible = results[~results["router"].isin(sorted(ask_mod.BASELINES))]
        if max_avg_tokens is not None and "avg_tokens" in eligible:
            eligible = eligible[eligible["avg_tokens"] <= max_avg_tokens]
        eligible = eligible[eligible["encoder"].isin(["onehot", "none", *promotion.LOCAL_ENCODERS])]
        if eligible.empty:
            fail("--promote: no trained router (baselines aside) qualifies"
                 + (f" within {max_avg_tokens:g} tokens per query" if max_avg_tokens is not None else ""))
        best = eligible.sort_values([promote_by, "router", "features", "encoder"],
                                    ascending=[False, True, True, True]).iloc[0]
        chosen = ask_mod.TrainedRouter(str(best["router"]), str(best["features"]), str(best["encoder"]),
                                       str(best["run_id"]))
        n_rows = int(best["n_rows"]) if "n_rows" in best and best["n_rows"] == best["n_rows"] else None
        click.echo(f"best by {promote_by}: {chosen.router}/{chosen.features}/{chosen.encoder} "
                   f"({promote_by} {float(best[promote_by]):.3f}, fold mean over {n_rows} labelled queries; "
                   f"'routers compare' gives its interval and the runners-up)")
        try:
            promotion.promote(engine, ctx.config, chosen, echo=click.echo)
        except promotion.PromoteError as exc:
            fail(str(exc))


@routers_group.command("promote")
@click.argument("router_or_run")
@click.option("--alias", default="champion", show_default=True, help="Registry alias to set on the new version.")
@click.option("--name", help="Registered model name (default: ragrouter-<corpora>-<generator>).")
@pass_ctx
def promote_command(ctx: Ctx, router_or_run: str, alias: str, name: str | None) -> None:
    """Register a trained router of this store as a self-contained MLflow model and set an alias.

    ROUTER_OR_RUN is a router name (its best run on this store, as ask picks it) or an MLflow
    run id. The model takes rows {"question", "corpus"} (query_type optional) and returns the
    paradigm probabilities and the choice; it carries the router, the corpora's indicators,
    the query-type centroids and ragrouter's code, so
    mlflow.pyfunc.load_model("models:/<name>@<alias>") works without the store. ask and serve
    use this store's 'champion' by default.

    \b
    Examples:
      python cli.py routers promote lr
      python cli.py routers promote 1f2e3d... --alias staging
    """
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import ask as ask_mod
    # deferred (start-up): pulls in mlflow, pandas
    from ragrouter.answering import promotion

    engine = ctx.engine()
    migrate.ensure_current(engine)
    generator = ctx.config.generators()[0]
    try:
        is_run = bool(re.fullmatch(r"[0-9a-f]{32}", router_or_run))
        chosen = ask_mod.pick_router(engine, None if is_run else router_or_run, generator,
                                     router_or_run if is_run else None)
        # MLflow's warnings to the log file; its prints and download bars off: one line says what happened
        with library_warnings("routers promote", echo=click.echo):
            promotion.promote(engine, ctx.config, chosen, alias=alias, name=name, echo=click.echo)
    except (ask_mod.AskError, promotion.PromoteError) as exc:
        fail(str(exc))


def _print_results(results) -> None:
    cols = [c for c in ("router", "features", "encoder", "generator", "routing_accuracy", "macro_f1", "mrr",
                        "correct_rate", "avg_tokens", "aiq") if c in results.columns]
    rows = [tuple((f"{v:.3f}" if isinstance(v, float) else v) for v in r) for r in results[cols].itertuples(index=False)]
    click.echo(render_rows(cols, rows, "table"))
    click.echo("(fold means; 'routers compare' adds ± std over folds and 95 % Wilson intervals)")


COMPARE_COLUMNS = ("router", "features", "encoder", "generator", "judge", "n", "n_folds",
                   "routing_accuracy", "routing_accuracy_std", "routing_accuracy_ci_low", "routing_accuracy_ci_high",
                   "macro_f1", "macro_f1_std", "mrr", "mrr_std",
                   "correct_rate", "correct_rate_std", "correct_rate_ci_low", "correct_rate_ci_high",
                   "avg_tokens", "avg_tokens_std", "aiq", "mlflow_run_id")


def compare_rows(engine, dataset: str = "store", run_ids=()) -> list[dict]:
    """The rows ``routers compare`` shows: ``v_router_scores`` of this store (the fold means the
    MLflow runs show), only rows with fold metrics, optionally only ``run_ids``."""
    from sqlalchemy import text

    sql = (f"SELECT {', '.join(COMPARE_COLUMNS)} FROM v_router_scores WHERE dataset = :d "
           "AND routing_accuracy IS NOT NULL")
    params: dict = {"d": dataset}
    if run_ids:
        sql += " AND mlflow_run_id IN (" + ", ".join(f":r{i}" for i in range(len(run_ids))) + ")"
        params.update({f"r{i}": r for i, r in enumerate(run_ids)})
    sql += " ORDER BY generator, features, router, encoder"
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(text(sql), params).mappings()]


@routers_group.command("compare")
@click.option("--dataset", default="store", show_default=True, help="'store' or an imported dataset's name.")
@click.option("--run-id", "run_ids", multiple=True, help="Only this MLflow run (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@pass_ctx
def compare_command(ctx: Ctx, dataset: str, run_ids: tuple[str, ...], fmt: str) -> None:
    """Routing accuracy, macro-F1, MRR, correct rate and tokens per router (like Table 3):
    fold mean ± std over the CV folds, with 95 % Wilson intervals of the per-query rates
    pooled over the CV predictions — the numbers of v_router_scores and of the MLflow runs.
    Only this store's routers (its router_fold_metrics), or --run-id.

    \b
    Example:
      python cli.py routers compare --format csv
    """
    engine = ctx.engine(read_only=True)  # readers share a DuckDB file
    migrate.ensure_current(engine)
    rows = compare_rows(engine, dataset, run_ids)
    if not rows:
        what = f"run(s) {', '.join(run_ids)}" if run_ids else f"dataset '{dataset}'"
        fail(f"no router scores for {what} in this store: run 'python cli.py routers train' first")
    if fmt == "table":
        def pm(r, m, scale=100.0, digits=1):
            v, sd = r[m], r[f"{m}_std"]
            if v is None:
                return ""
            return f"{scale * v:.{digits}f} ± {scale * (sd or 0.0):.{digits}f}"

        def ci(r, m):
            lo, hi = r.get(f"{m}_ci_low"), r.get(f"{m}_ci_high")
            return "" if lo is None else f"[{100 * lo:.1f}, {100 * hi:.1f}]"

        cols = ["router", "features", "encoder", "generator", "n", "R.A %", "R.A 95% CI", "F1 %", "MRR",
                "C.R %", "C.R 95% CI", "tokens", "run"]
        out = [(r["router"], r["features"], r["encoder"], r["generator"], r["n"],
                pm(r, "routing_accuracy"), ci(r, "routing_accuracy"), pm(r, "macro_f1"),
                pm(r, "mrr", 1.0, 3), pm(r, "correct_rate"), ci(r, "correct_rate"),
                pm(r, "avg_tokens", 1.0, 0), (r["mlflow_run_id"] or "")[:8]) for r in rows]
        click.echo(render_rows(cols, out, "table"))
        click.echo("(fold mean ± std over folds; CI: 95 % Wilson interval over the n pooled CV predictions)")
        return
    cols = list(COMPARE_COLUMNS)
    click.echo(render_rows(cols, [tuple(r[c] for c in cols) for r in rows], fmt))


@routers_group.command("relocate")
@click.argument("folder", required=False, type=click.Path(path_type=Path, file_okay=False))
@pass_ctx
def relocate_command(ctx: Ctx, folder: Path | None) -> None:
    """Make a copied or moved MLflow folder its own: rebase every artefact path its mlflow.db
    holds (runs, registered models, logged models, traces) onto FOLDER/artifacts, so that plain
    MLflow lists and loads everything there with the original folder gone. Every ragrouter
    command that opens the folder does this too; FOLDER defaults to the configured store.

    \b
    Example:
      cp -r mlflow /mnt/share/mlflow && python cli.py routers relocate /mnt/share/mlflow
      mlflow ui --backend-store-uri sqlite:////mnt/share/mlflow/mlflow.db
    """
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import routing
    from ragrouter.routers import tracking

    uri = f"sqlite:///{folder.resolve() / 'mlflow.db'}" if folder is not None else routing.tracking_uri(ctx.config)
    db = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else None
    if db is None or not Path(db).is_file():
        fail(f"{db or uri}: no MLflow SQLite store to relocate (expected FOLDER/mlflow.db)")
    moved = tracking.relocate_store(uri)
    click.echo(f"{db}: {moved} experiment(s) rebased onto {Path(db).parent / 'artifacts'}"
               if moved else f"{db}: already at home (artefacts under {Path(db).parent / 'artifacts'})")


@routers_group.command("copy")
@click.argument("dest", type=click.Path(path_type=Path, file_okay=False))
@click.option("--from", "source", type=click.Path(path_type=Path, file_okay=False),
              help="Folder of the store to copy (default: the configured store's folder).")
@pass_ctx
def copy_command(ctx: Ctx, dest: Path, source: Path | None) -> None:
    """Copy the router zoo's MLflow store (mlflow.db + artifacts/) to DEST, a new folder, in a
    form plain MLflow opens at once: a consistent snapshot of the database (safe while a
    trainer writes) with every artefact path already pointing inside DEST. A bare `cp -r`
    keeps MLflow's absolute paths to the original (mlflow/mlflow#3144) until `routers
    relocate` has run on it.

    \b
    Example:
      python cli.py routers copy /mnt/share/mlflow
      mlflow ui --backend-store-uri sqlite:////mnt/share/mlflow/mlflow.db
    """
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import routing
    from ragrouter.routers import mlflow_store

    if source is None:
        db = mlflow_store.sqlite_path(routing.tracking_uri(ctx.config))
        if db is None:
            fail(f"{routing.tracking_uri(ctx.config)}: not a SQLite MLflow store; copy it with MLflow's own tools")
        source = db.parent
    try:
        moved = mlflow_store.copy_store(source, dest)
    except (mlflow_store.StoreCopyError, OSError, sqlite3.Error) as exc:
        fail(str(exc))
    click.echo(f"{dest.resolve()}: copied from {source.resolve()}, {moved} experiment(s) rebased onto "
               f"{dest.resolve() / 'artifacts'}; open it with: mlflow ui --backend-store-uri "
               f"{mlflow_store.sqlite_uri(dest)}")


@click.command("mlflow-ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", default=5000, show_default=True, type=int)
@pass_ctx
def mlflow_ui_command(ctx: Ctx, host: str, port: int) -> None:
    """Start the MLflow UI over the router runs (Ctrl-C or SIGTERM stops the server and every
    process it started). Prints the URL, the server's process group and where its log is.

    \b
    Example:
      python cli.py mlflow-ui --port 5000    # then open http://127.0.0.1:5000
    """
    import signal

    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import routing
    from ragrouter.routers import tracking

    stopping: list[int] = []

    def _stop(signum, frame):
        if stopping:  # already stopping: a second SIGTERM must not cut the clean-up short
            return
        stopping.append(signum)
        raise KeyboardInterrupt

    old = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    proc = None
    try:
        uri = routing.tracking_uri(ctx.config)
        proc, url = tracking.start_ui(uri, host=host, port=port)
        exp = tracking.client(uri).get_experiment_by_name(str(ctx.config.get("routers.experiment")))
        if exp is not None:
            click.echo(f"routers view (R.A, F1, MRR, C.R, tokens, intervals): {tracking.view_url(url, exp.experiment_id)}")
        click.echo(f"MLflow UI at {url} (experiment '{ctx.config.get('routers.experiment')}'); "
                   f"server pid {proc.pid} (process group {proc.pid}); log {proc.log_path}; Ctrl-C to stop",
                   )
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if proc is not None:
            tracking.stop_ui(proc)
        for s, h in old.items():
            signal.signal(s, h)
