"""`cli.py routers train|compare` and `cli.py mlflow-ui`: the router zoo, tracked in MLflow."""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np

from ragrouter.commands.common import Ctx, fail, pass_ctx, render_rows
from ragrouter.db import migrate


def _router_names() -> list[str]:
    from ragrouter.routers.registry import ROUTERS

    return sorted(ROUTERS)


@click.group("routers")
def routers_group() -> None:
    """Train routers with 5-fold stratified CV and compare them (paper §3.5, Table 3).

    \b
    Examples:
      python cli.py routers train --router lr --router xgboost --features qc
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
@click.option("--cost-sweep/--no-cost-sweep", default=False,
              help="Also sweep λ of the utility quality − λ·tokens (cost-aware labels, AIQ).")
@pass_ctx
def train_command(ctx: Ctx, routers: tuple[str, ...], feature_sets: tuple[str, ...], dataset_path: Path | None,
                  cost_sweep: bool) -> None:
    """Cross-validate routers; log each to MLflow and store every prediction."""
    from ragrouter import routing
    from ragrouter.routers.dataset import load_router_dataset

    names = list(routers) or _router_names()
    unknown = [r for r in names if r not in _router_names()]
    if unknown:
        fail(f"unknown router(s) {', '.join(unknown)} (known: {', '.join(_router_names())})")
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
        from ragrouter.routers.evaluate import DEFAULT_LAMBDAS

        lambdas = DEFAULT_LAMBDAS
    results = routing.train(engine, ctx.config, df, names, list(feature_sets) or ["q", "c", "qc"], label,
                            log=click.echo, lambdas=lambdas)
    if results is not None and len(results):
        _print_results(results)


def _print_results(results) -> None:
    cols = [c for c in ("router", "features", "encoder", "generator", "routing_accuracy", "macro_f1", "mrr",
                        "correct_rate", "avg_tokens", "aiq") if c in results.columns]
    rows = [tuple((f"{v:.3f}" if isinstance(v, float) else v) for v in r) for r in results[cols].itertuples(index=False)]
    click.echo(render_rows(cols, rows, "table"))


@routers_group.command("compare")
@click.option("--dataset", default="store", show_default=True, help="'store' or an imported dataset's name.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@pass_ctx
def compare_command(ctx: Ctx, dataset: str, fmt: str) -> None:
    """Routing accuracy, macro-F1, MRR, correct rate and tokens per router (like Table 3),
    computed from the stored CV predictions."""
    from sqlalchemy import text

    from ragrouter.routers.evaluate import macro_f1, mrr, routing_accuracy

    engine = ctx.engine(read_only=True)  # readers share a DuckDB file
    migrate.ensure_current(engine)
    with engine.connect() as conn:
        preds = conn.execute(text(
            "SELECT router, features, encoder, generator, predicted, true_label, probabilities "
            "FROM router_predictions WHERE dataset = :d"), {"d": dataset}).all()
        scores = {tuple(r[:4]): r[4:] for r in conn.execute(text(
            "SELECT router, features, encoder, generator, correct_rate, avg_tokens FROM v_router_scores "
            "WHERE dataset = :d"), {"d": dataset}).all()}
    if not preds:
        fail(f"no router predictions for dataset '{dataset}': run 'python cli.py routers train' first")
    groups: dict[tuple, list] = {}
    for r in preds:
        groups.setdefault(tuple(r[:4]), []).append(r)
    rows = []
    for key in sorted(groups):
        g = groups[key]
        y_true = [r[5] for r in g]
        y_pred = [r[4] for r in g]
        probs = [json.loads(r[6]) if isinstance(r[6], str) else (r[6] or {}) for r in g]
        classes = sorted({c for p in probs for c in p} | set(y_true))
        proba = np.array([[p.get(c, 0.0) for c in classes] for p in probs])
        cr, tok = scores.get(key, (None, None))
        rows.append((*key, len(g), 100 * routing_accuracy(y_true, y_pred), 100 * macro_f1(y_true, y_pred),
                     mrr(y_true, proba, classes), cr, tok))
    cols = ["router", "features", "encoder", "generator", "n", "R.A", "F1", "MRR", "C.R", "tokens"]
    if fmt == "table":
        rows = [tuple(f"{v:.2f}" if isinstance(v, float) else ("" if v is None else v) for v in r) for r in rows]
    click.echo(render_rows(cols, rows, fmt))


@click.command("mlflow-ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", default=5000, show_default=True, type=int)
@pass_ctx
def mlflow_ui_command(ctx: Ctx, host: str, port: int) -> None:
    """Start the MLflow UI over the router runs (Ctrl-C to stop).

    \b
    Example:
      python cli.py mlflow-ui --port 5000    # then open http://127.0.0.1:5000
    """
    from ragrouter import routing
    from ragrouter.routers import tracking

    proc, url = tracking.start_ui(routing.tracking_uri(ctx.config), host=host, port=port)
    click.echo(f"MLflow UI at {url} (experiment '{ctx.config.get('routers.experiment')}'); Ctrl-C to stop")
    try:
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        tracking.stop_ui(proc)
