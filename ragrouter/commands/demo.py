"""`cli.py demo`: the main job end to end on the embedded offline default (`make run`)."""

from __future__ import annotations

import time
from pathlib import Path

import click
from sqlalchemy import text

from ragrouter.commands.common import Ctx, pass_ctx
from ragrouter.commands.interrupt import Steps, stoppable
from ragrouter.console import library_warnings
from ragrouter.corpus import demo as demo_data
from ragrouter.db import migrate, progress
from ragrouter.db.engine import write_lock
from ragrouter.decisions import speedprobe
from ragrouter.evaluation import calibration as cal
from ragrouter.ingest import store as ingest_store
from ragrouter.llm import weights
from ragrouter.stages import expect
from ragrouter.stages import registry
from ragrouter.stages.base import Scope
from ragrouter.stages.runner import dry_run, run_stage
from ragrouter.stages.services import Services
from ragrouter.stages.timing import wall_estimates

PIPELINE = ["chunk", "extract", "embed", "metrics", "answer", "judge", "score"]


def _local_models(config) -> list[str]:
    names = set()
    for role in ("generators", "extractor", "judge", "query_generator"):
        value = config.role(role)
        for backend in ([value] if isinstance(value, str) else value):
            spec = config.backend(backend)
            if spec.get("kind") == "local":
                names.add(spec["model"])
    return sorted(names)


def _calibrate_judge(engine, services, config, corpus: str, n: int, quiet: bool) -> None:
    """Judge a small calibration set (``demo.calibration_sources`` source questions × up to 8 cases
    whose labels are known by construction) with the demo's judge, so that the report names
    how far its labels can be trusted. A set that cannot be built is reported, not fatal."""
    if n < 1:
        return

    judge = str(config.role("judge"))
    try:
        cset = cal.ensure_set(engine, n=n, corpus=corpus)
        (rep, fig), = cal.judge_set(services, [judge], cset, samples=int(config.get("judge.samples", 1)),
                                    progress=not quiet).values()
    except cal.CalibrationError as exc:
        click.echo(f"calibrate: skipped — {exc}", err=True)
        return
    b = fig.binary
    kappa = "undefined" if b["kappa"] != b["kappa"] else f"{b['kappa']:.2f}"
    fc = "-" if b["false_correct"] is None else f"{100 * b['false_correct']:.0f}%"
    click.echo(f"calibrate {rep.done} done, {rep.failed} failed of {rep.pending} pending ({rep.seconds:.1f}s): "
               f"judge {fig.judge} on {fig.n_cases} cases: kappa (correct vs. not) {kappa}, false-correct {fc}")


def _dry_run_report(rows: list[dict], out: Path) -> None:
    """Print, and write to ``out/dry_run_vs_billed.csv``, the dry run's estimate per stage beside
    what the run then billed (a re-run bills nothing and estimates nothing)."""
    import csv

    out.mkdir(parents=True, exist_ok=True)
    cols = ["stage", "model", "est_calls", "billed_calls", "ratio_calls", "est_prompt", "billed_prompt", "ratio_prompt",
            "est_completion", "max_completion", "billed_completion", "ratio_completion", "ratio_tokens", "basis"]
    with (out / "dry_run_vs_billed.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)

    def r(v):
        return "-" if v is None else f"{v:.2f}"

    for row in rows:
        click.echo(f"dry run vs billed  {row['stage']:8s} {row['model']}: calls {row['est_calls']}/{row['billed_calls']} "
                   f"({r(row['ratio_calls'])}), prompt tokens {row['est_prompt']}/{row['billed_prompt']} "
                   f"({r(row['ratio_prompt'])}), completion {row['est_completion']}/{row['billed_completion']} "
                   f"({r(row['ratio_completion'])}; cap {row['max_completion']}, {row['basis']}), "
                   f"tokens ({r(row['ratio_tokens'])})")


def _time_report(timed: dict, took: dict[str, float], out: Path) -> None:
    """Print, and write to ``out/dry_run_time.csv``, the dry run's expected wall time per stage
    beside the stage's measured wall time (a re-run expects and takes ~0 s)."""
    import csv

    expected: dict[str, float] = {}
    basis: dict[str, set] = {}
    for row in timed["stages"]:
        expected[row["stage"]] = expected.get(row["stage"], 0.0) + float(row["expected_wall_s"])
        basis.setdefault(row["stage"], set()).add(row["time_basis"])
    rows = [{"stage": n, "expected_wall_s": round(expected.get(n, 0.0), 1), "wall_s": round(s, 1),
             "ratio": (expected.get(n, 0.0) / s) if s >= 1 else None,
             "time_basis": ";".join(sorted(basis.get(n, {"-"})))} for n, s in took.items()]
    out.mkdir(parents=True, exist_ok=True)
    with (out / "dry_run_time.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["stage"])
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        click.echo(f"dry run vs took    {r['stage']:8s} expected {r['expected_wall_s']} s, took {r['wall_s']} s "
                   f"({ratio}; {r['time_basis']})")


@click.command("demo")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder with medical.json and medical_questions.json (default: ../shared/data/medical).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("reports/latest"),
              show_default=True, help="Where the report is written.")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@pass_ctx
def demo_command(ctx: Ctx, data_dir: Path | None, out: Path, quiet: bool) -> None:
    """Run the whole benchmark on a slice of the medical corpus, then train routers and report.

    chunk → extract → embed → metrics → import questions (balanced over the three types) →
    answer (all paradigms) → judge → score → judge calibration on a few cases whose label is
    known by construction (demo.calibration_sources × up to 8) → labels (views) → routers → report. Everything
    is resumable: a second run finds every unit done and makes no model call. Ctrl-C or SIGTERM
    stops it with one line: what is done, what is pending, the command that resumes.

    \b
    Example:
      python cli.py --config configs/demo.yaml demo
    """
    steps = Steps(["ingest", "estimate", *PIPELINE, "calibrate", "routers", "report"])
    with stoppable(steps):
        _demo(ctx, data_dir, out, quiet, steps)


def _demo(ctx: Ctx, data_dir: Path | None, out: Path, quiet: bool, steps: Steps) -> None:
    started = time.monotonic()
    config = ctx.config
    d = config.section("demo")
    corpus = str(d.get("corpus", "medical-demo"))
    engine = ctx.engine(create=True)  # the main job makes its store
    migrate.ensure_current(engine)

    for model in _local_models(config):
        weights.install(model)

    steps.start("ingest")
    dataset = demo_data.medical_slice(data_dir or demo_data.default_data_dir(), int(d.get("chunks", 20)),
                                      int(d.get("per_type", 3)), float(d.get("evidence_overlap", 0.8)),
                                      int(config.get("chunking.window")), int(config.get("chunking.overlap")))
    with write_lock(engine), engine.begin() as conn:
        rep = ingest_store.write_dataset(conn, corpus, "graphrag-bench", dataset, ["medical slice"])
    click.echo(f"corpus {corpus}: {rep.documents_total} document ({rep.documents_new} new), "
               f"{rep.questions_total} questions {dataset.qtype_counts()} ({rep.questions_new} new)")
    steps.finish("ingest")

    services = Services(config, engine)
    scope = Scope(corpus=corpus, config=config)
    stages = registry.all_stages()
    try:
        # What `run --dry-run` says the pipeline will cost, kept to be set beside what it billed,
        # timed with this machine's measured speed of the local models (once per machine).

        steps.start("estimate")
        speedprobe.probe(config, echo=click.echo, missing_only=True,  # status shows the probe's model
                         on_model=lambda model, k, n: progress.update(engine, f"speed probe ({model})", done=k,
                                                                      pending=n, force=True))
        estimates = dry_run([stages[n] for n in PIPELINE], services, scope)
        timed = wall_estimates(config, estimates, services)
        steps.finish("estimate")
        if timed["busy"]["line"]:
            click.echo(timed["busy"]["line"])
        with engine.connect() as conn:
            mark = expect.ledger_mark(conn)
        took = {}
        for name in PIPELINE:
            steps.start(name)
            r = run_stage(stages[name], services, scope, progress=not quiet)
            took[name] = r.seconds
            click.echo(f"{name:8s} {r.done} done, {r.failed} failed of {r.pending} pending ({r.seconds:.1f}s)")
            steps.finish(name)
        with engine.connect() as conn:
            _dry_run_report(expect.compare(conn, estimates, mark), out)
        _time_report(timed, took, out)
        steps.start("calibrate")
        _calibrate_judge(engine, services, config, corpus, int(d.get("calibration_sources", 0)), quiet)
        steps.finish("calibrate")
        calls = services.gateway.stats() if "gateway" in services.__dict__ else {}
    finally:
        services.finish()

    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import routing

    steps.start("routers")
    # MLflow's and scikit-learn's own log lines and warnings go to the log file, one line here
    with library_warnings("demo", echo=lambda line: click.echo(line, err=True)):
        try:
            results = routing.train_from_store(engine, config, routers=list(d.get("routers", [])),
                                            feature_sets=list(d.get("features", ["qc"])), log=click.echo)
        except ValueError as exc:  # e.g. a router dataset too small or degenerate to cross-validate
            click.echo(f"routers: skipped — {exc}", err=True)
            results = None
        if results is not None and len(results):
            cols = [c for c in ("router", "features", "routing_accuracy", "macro_f1", "correct_rate", "avg_tokens")
                    if c in results.columns]
            click.echo(results[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        steps.finish("routers")

        # deferred (start-up): pulls in matplotlib, pandas, sklearn, torch
        from ragrouter.report.build import build_report

        steps.start("report")
        report = build_report(engine, out)
        steps.finish("report")
    with engine.connect() as conn:
        n_runs = conn.execute(text("SELECT COUNT(*) FROM paradigm_runs")).scalar()
    db = ctx.db_url.split("///", 1)[-1] if ctx.db_url.startswith("duckdb") else ctx.db_url
    click.echo("")
    click.echo(f"done in {time.monotonic() - started:.0f}s: {n_runs} paradigm runs; model calls this run: "
               f"{calls.get('http_requests', 0)} (cache hits {calls.get('cache_hits', 0)})")
    click.echo(f"report:     {report.markdown.resolve()}")
    click.echo(f"store:      {db}  (python cli.py sql \"select * from v_accuracy_by_type\")")
    click.echo("mlflow UI:  python cli.py mlflow-ui")
