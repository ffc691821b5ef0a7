"""`cli.py review start|pull`: a person checks the judge (or the query checks) on a sample, in
MLflow's trace UI, and the store learns how far the judge agrees with them
(``ragrouter.review``)."""

from __future__ import annotations

from contextlib import contextmanager

import click

from ragrouter.commands.common import Ctx, echo_err, fail, pass_ctx, render_rows
from ragrouter.console import library_warnings
from ragrouter.db import migrate
from ragrouter.review import figures, labels, queries as reviewed, reach, sample, traces


@click.group("review")
def review_group() -> None:
    """Review a sample of judged runs or generated queries in the MLflow UI and measure the
    judge against the reviewer's labels.

    \b
    1. python cli.py review start --n 50           # traces into the review experiment
    2. python cli.py mlflow-ui                     # open it, label each trace (docs/how-to/review.md)
    3. python cli.py review pull                   # labels into the store; kappa, confusion, false-correct
    """


TIMEOUT_HELP = ("Seconds to wait for an MLflow tracking server, per request (default: MLFLOW_HTTP_REQUEST_TIMEOUT "
                "when set, else 10); one that does not answer in time is an error naming it.")


def _tracking_uri(ctx: Ctx, timeout: float, must_exist: bool) -> str:
    """The configured tracking URI, refused in one line when its store is not there (a local
    store only when ``must_exist``: ``review start`` may make one) or its server does not answer
    within ``timeout`` seconds; checked before MLflow opens it (which would create it)."""
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import routing

    uri = routing.tracking_uri(ctx.config)
    try:
        reach.check(uri, timeout, local=must_exist)
    except reach.TrackingUnavailable as exc:
        fail(str(exc))
    return uri


@contextmanager
def _mlflow_errors(uri: str, timeout: float):
    """MLflow's HTTP requests bounded by ``timeout`` inside; a failed request is one line
    naming the URI (not MLflow's retries for minutes, then a traceback)."""
    import requests
    from mlflow.exceptions import MlflowException

    try:
        with reach.bounded(timeout):
            yield
    except (MlflowException, requests.RequestException) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if "ReadTimeout" in first or "timed out" in first:
            fail(f"MLflow tracking store {uri} did not answer within {timeout:g} s (a request and its retry; "
                 f"--timeout or {reach.TIMEOUT_ENV} sets the limit)")
        fail(f"MLflow tracking store {uri}: {first[:300]}")


@review_group.command("start")
@click.option("--corpus", help="Only this corpus (default: every corpus).")
@click.option("--n", "n", type=click.IntRange(min=1), default=50, show_default=True, help="Items to sample.")
@click.option("--what", type=click.Choice(["judgments", "queries"]), default="judgments", show_default=True,
              help="judgments: judged runs (the judge's verdict to check); queries: generated queries "
                   "(the checks' verdict to check).")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed (the same seed draws the same items).")
@click.option("--judge", help="Judge key whose verdicts to review (default: the one with the most verdicts).")
@click.option("--experiment", help="MLflow experiment name (default: review-<store id prefix>).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help=TIMEOUT_HELP)
@click.option("--prefer-changing", is_flag=True,
              help="Draw first the judged runs whose label decides their query's oracle label (flipping "
                   "the run between correct and not correct would change it): the disagreements that matter.")
@pass_ctx
def review_start(ctx: Ctx, corpus, n, what, seed, judge, experiment, timeout, prefer_changing) -> None:
    """Log a seeded stratified sample to the MLflow review experiment, one trace per item:
    for judged runs (stratified by paradigm, query type — unanswerable questions apart — and
    verdict) the question, gold answer, retrieved chunks (a retriever span), the answer with
    its tokens (an LLM span) and the judge's verdict and reason (an LLM-judge assessment
    'label'); for generated queries (stratified by type and outcome) the chain they were built
    from and every check's verdict. Items already in the experiment are skipped, so running
    it twice logs nothing new.

    \b
    Examples:
      python cli.py review start --n 20
      python cli.py review start --n 20 --prefer-changing
      python cli.py review start --corpus 2wiki --what queries --n 16
    """
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import routing

    if prefer_changing and what != "judgments":
        fail("--prefer-changing draws judged runs (the oracle label rests on them); it does not apply to --what queries")
    engine = ctx.engine(read_only=True)
    migrate.ensure_current(engine)
    try:
        if what == "judgments":
            judge, items = sample.sample_runs(engine, corpus, n, seed, judge, prefer_changing)
        else:
            items = sample.sample_queries(engine, corpus, n, seed)
    except sample.SampleError as exc:
        fail(str(exc))
    limit = reach.timeout_s(timeout)
    uri = _tracking_uri(ctx, limit, must_exist=False)
    sid = routing.store_id(engine)
    name = experiment or traces.experiment_name(sid)
    kind = "run" if what == "judgments" else "query"
    # MLflow's own lines ("Creating initial MLflow database tables...") go to the log file
    with library_warnings("review start", echo=echo_err), _mlflow_errors(uri, limit):
        exp_id = traces.open_experiment(uri, name)
        done = traces.logged_keys(uri, exp_id, sid)
        new = [it for it in items if (kind, int(it["run_id" if kind == "run" else "query_id"])) not in done]
        for it in new:
            traces.log_run(it, judge, sid) if kind == "run" else traces.log_query(it, sid)
        traces.finish()
    what_txt = f"judged runs (judge {judge})" if kind == "run" else "generated queries"
    short = f" (the store has only {len(items)} to sample)" if len(items) < n else ""
    click.echo(f"review: {len(new)} {what_txt} logged as traces, {len(items) - len(new)} already there{short}, "
               f"to experiment {name} (id {exp_id}) at {uri}")
    if prefer_changing:
        n_chg = sum(bool(it.get("changes_oracle")) for it in items)
        click.echo(f"{n_chg} of the {len(items)} would change their query's oracle label if their verdict flipped "
                   f"(drawn first; tagged {traces.TAG_CHANGES})")
    click.echo("next: python cli.py mlflow-ui, open the experiment's Traces tab, and on each trace "
               f"record your label as feedback '{traces.RUN_LABEL if kind == 'run' else traces.QUERY_LABEL}' "
               "(docs/how-to/review.md); then python cli.py review pull")


@review_group.command("pull")
@click.option("--corpus", help="Figures for this corpus only (every label is pulled).")
@click.option("--experiment", help="MLflow experiment name (default: review-<store id prefix>).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), help=TIMEOUT_HELP)
@pass_ctx
def review_pull(ctx: Ctx, corpus, experiment, timeout) -> None:
    """Read the reviewers' labels (HUMAN feedback on this store's review traces) into the store
    (human_labels, one row per trace and reviewer; pulling twice changes nothing) and print the
    judge's agreement with them: accuracy, Cohen's kappa with its 95 % interval (3 labels, and
    correct vs. not), false-correct and missed-correct rates, overall and per paradigm and query
    type, and the confusion matrix (rows = reviewer). Reviewed generated queries: accepted by
    the checks vs. by the reviewer; where they differ the reviewer's verdict decides whether the
    query is in the benchmark (origin human-reviewed; Table 6 shows both).

    A tracking store that is not there (routers.mlflow_uri moved) or a server that does not
    answer within --timeout is an error naming it; nothing is created or stored. A label of a
    run the store does not hold, and a trace whose run/query tag is not an integer, are skipped
    with one warning line each and counted.

    \b
    Example:
      python cli.py review pull
    """
    # deferred (start-up): pulls in pandas, sklearn, torch
    from ragrouter.answering import routing

    limit = reach.timeout_s(timeout)
    uri = _tracking_uri(ctx, limit, must_exist=True)
    engine = ctx.engine()
    migrate.ensure_current(engine)
    sid = routing.store_id(engine)
    name = experiment or traces.experiment_name(sid)
    with library_warnings("review pull", echo=echo_err), _mlflow_errors(uri, limit):
        exp_id = traces.find_experiment(uri, name)
        pulled = traces.human_assessments(uri, exp_id, sid) if exp_id else traces.Pulled([], 0, [])
    found, unknown = labels.known(engine, pulled.labels)
    for line in pulled.bad_traces + unknown:
        echo_err(line)
    written = labels.save(engine, name, found)
    applied = reviewed.apply(engine)
    reviewers = sorted({h.reviewer or "(unnamed)" for h in found})
    click.echo(f"review pull: {written} human labels from experiment {name}"
               + (f" by {', '.join(reviewers)}" if reviewers else "")
               + ("" if exp_id else f" (no such experiment at {uri}: 'review start' logs it)")
               + (f"; {pulled.not_labels} feedbacks skipped (value not a label)" if pulled.not_labels else "")
               + (f"; {len(unknown)} labels skipped (run or query not in this store)" if unknown else "")
               + (f"; {len(pulled.bad_traces)} traces skipped (run/query tag missing or not a store id)"
                  if pulled.bad_traces else ""))
    strata = figures.human_agreement(engine, corpus)
    if strata:
        click.echo(render_rows(figures.TABLE_COLUMNS, figures.table_rows(strata), "table"))
        click.echo("\n".join(figures.confusion_lines(strata[0][2])))
    elif not any(h.kind == "query" for h in found):
        click.echo("no reviewed runs yet" + (f" in corpus {corpus}" if corpus else "")
                   + ": record labels in the MLflow UI first (docs/how-to/review.md)")
    queries = [h for h in found if h.kind == "query"]
    if queries:
        both = sum(h.label == "accepted" and h.judge_label == "accepted" for h in queries)
        by = ", ".join(sorted({h.reviewer or "(unnamed)" for h in queries}))
        click.echo(f"generated queries reviewed: {len(queries)}; accepted by the checks "
                   f"{sum(h.judge_label == 'accepted' for h in queries)}, by the reviewer ({by}) "
                   f"{sum(h.label == 'accepted' for h in queries)}, by both {both}")
    if applied.entered or applied.left or applied.restored:
        click.echo(f"benchmark: {len(applied.entered)} queries the checks rejected enter it as the reviewer accepted "
                   f"them, {len(applied.left)} the checks accepted leave it as the reviewer rejected them "
                   f"(origin {reviewed.REVIEWED_ORIGIN}), {len(applied.restored)} back to the checks' verdict"
                   + ("; python cli.py run answers the new ones" if applied.entered else ""))
