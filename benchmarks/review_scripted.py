"""A script that plays the reviewer on a store's review traces (issue 34, the demo's must-show).

It reads every judged-run trace of the store in the review experiment (``review start``) and
writes a HUMAN feedback ``label`` through MLflow's API, as a person would in the UI, with the
label the calibration cases' construction rules give (``ragrouter.evaluation.calibration_cases``:
the gold itself or the gold with extra true detail is correct, a refusal or a gold cut short is
incomplete, another answer is incorrect), applied to the run's answer against the gold answer
with the SQuAD normalisation (``ragrouter.evaluation.metrics``):

* a refusal (the judge stage's own rule, ``judge.is_refusal``): ``incomplete`` on an answerable
  question (the calibration ``refusal`` case), ``correct`` on one marked unanswerable;
* the normalised gold contained in the normalised answer, or token F1 ≥ 0.5: ``correct``;
* token F1 ≥ 0.2 (part of the gold said): ``incomplete``;
* else ``incorrect``.

It is a stand-in for a person (it reads no meaning), so the agreement it measures is the judge's
agreement with this rule; the reviewer is named ``--reviewer`` (default ``scripted-reviewer``).

    python benchmarks/review_scripted.py --db duckdb:////tmp/demo34/demo.duckdb
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def truth(answer: str, gold: str, unanswerable: bool) -> tuple[str, str]:
    """(label, why) by the rules in the module docstring."""
    from ragrouter.evaluation.judge import is_refusal
    from ragrouter.evaluation.metrics import normalize_answer, token_f1

    if is_refusal(answer or ""):
        return ("correct", "a refusal to a question marked unanswerable") if unanswerable else \
            ("incomplete", "a refusal to an answerable question")
    if unanswerable:
        return "incorrect", "an answer to a question marked unanswerable"
    a, g = normalize_answer(answer or ""), normalize_answer(gold or "")
    f1 = token_f1(answer or "", gold or "")
    if g and g in a:
        return "correct", "the answer contains the gold answer"
    if f1 >= 0.5:
        return "correct", f"token F1 {f1:.2f} >= 0.5"
    if f1 >= 0.2:
        return "incomplete", f"token F1 {f1:.2f}: part of the gold"
    return "incorrect", f"token F1 {f1:.2f} < 0.2"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--config", default=None)
    ap.add_argument("--reviewer", default="scripted-reviewer")
    args = ap.parse_args()

    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType
    from sqlalchemy import text

    from ragrouter.answering import routing
    from ragrouter.config import Config
    from ragrouter.db import engine as eng
    from ragrouter.review import traces

    config = Config.load(args.config)
    engine = eng.make_engine(args.db, read_only=True)
    uri = routing.tracking_uri(config)
    sid = routing.store_id(engine)
    exp_id = traces.open_experiment(uri, traces.experiment_name(sid))
    counts: dict[tuple[str, str], int] = {}
    with engine.connect() as conn:
        for t in traces._traces(uri, exp_id):
            tags = t.info.tags
            if tags.get(traces.TAG_STORE) != sid or tags.get(traces.TAG_KIND) != "run":
                continue
            row = conn.execute(text(
                "SELECT r.answer, q.answer, COALESCE(q.unanswerable, FALSE) FROM paradigm_runs r "
                "JOIN queries q ON q.id = r.query_id WHERE r.id = :r"), {"r": int(tags[traces.TAG_RUN])}).one()
            label, why = truth(row[0], row[1], bool(row[2]))
            mlflow.log_feedback(trace_id=t.info.trace_id, name=traces.RUN_LABEL, value=label, rationale=why,
                                source=AssessmentSource(source_type=AssessmentSourceType.HUMAN,
                                                        source_id=args.reviewer))
            key = (tags.get(traces.TAG_JUDGE_LABEL, "?"), label)
            counts[key] = counts.get(key, 0) + 1
    n = sum(counts.values())
    print(f"{args.reviewer}: {n} labels written to experiment {traces.experiment_name(sid)} at {uri}")
    for (judge_label, label), k in sorted(counts.items()):
        print(f"  judge {judge_label:10s} -> reviewer {label:10s} {k}")


if __name__ == "__main__":
    main()
