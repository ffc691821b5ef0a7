"""review start / pull (issue 34): a sample of judged runs logged as MLflow traces to a
throwaway MLflow store, human labels written through MLflow's API as a reviewer would, pulled
back into the store (DuckDB and PostgreSQL), and the judge's agreement checked against
scikit-learn and a bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix
from sqlalchemy import text

from cli import main
from ragrouter.db import engine as eng
from ragrouter.db import migrate
from ragrouter.report import synthetic
from ragrouter.review import traces
from ragrouter.review.figures import LABELS, human_agreement


def _store(kind: str, tmp_path, pg_url_factory, queries: int = 8):
    rows = synthetic.random_rows(3, n_corpora=1, queries_per_corpus=queries, generators=("gen-a",), judges=("judge-x",),
                                 p_missing_run=0.0, p_old_config=0.0, p_correct=0.45, with_router=False)
    rows["human_labels"] = []  # only the labels written through MLflow below
    url = f"duckdb:///{tmp_path / 's.duckdb'}" if kind == "duckdb" else pg_url_factory()
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    synthetic.insert_rows(engine, rows)
    return url, engine


@pytest.fixture
def review_env(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow' / 'mlflow.db'}"
    monkeypatch.setenv("RAGROUTER__routers__mlflow_uri", uri)
    return uri


def _human(trace_id: str, value, reviewer: str, comment: str | None = None) -> None:
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    mlflow.log_feedback(trace_id=trace_id, name="label", value=value, rationale=comment,
                        source=AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id=reviewer))


@pytest.mark.parametrize("kind", ["duckdb", "postgresql"])
def test_review_start_pull_round_trip(kind, tmp_path, review_env, capsys, request):
    import mlflow

    url, engine = _store(kind, tmp_path, lambda: request.getfixturevalue("pg_url"))
    try:
        assert main(["--db", url, "review", "start", "--n", "8", "--seed", "1"]) == 0
        out = capsys.readouterr().out
        assert "8 judged runs (judge judge-x) logged as traces, 0 already there" in out
        sid = engine.connect().execute(text("SELECT store_id FROM store_info")).scalar()
        exp = mlflow.get_experiment_by_name(traces.experiment_name(sid))
        assert exp.tags["mlflow.experimentKind"] == "genai_development"
        found = mlflow.search_traces(locations=[exp.experiment_id], return_type="list")
        assert len(found) == 8
        with engine.connect() as conn:
            verdict = {int(r[0]): (r[1], r[2], r[3], r[4], r[5]) for r in conn.execute(text(
                "SELECT j.run_id, j.label, r.paradigm, r.answer, r.gen_in_tokens, r.gen_out_tokens "
                "FROM v_judgment j JOIN paradigm_runs r ON r.id = j.run_id WHERE j.judge = 'judge-x'"))}
            strata = {(r[1], r[2], r[0]) for r in conn.execute(text(
                "SELECT j.label, r.paradigm, q.qtype FROM v_judgment j JOIN paradigm_runs r ON r.id = j.run_id "
                "JOIN queries q ON q.id = r.query_id WHERE q.status = 'accepted'"))}
        seen = set()
        for t in found:
            run_id = int(t.info.tags[traces.TAG_RUN])
            label, paradigm, answer, gin, gout = verdict[run_id]
            seen.add((label, paradigm, t.info.tags["query_type"]))
            spans = {s.span_type: s for s in t.data.spans}
            assert spans["LLM"].outputs == answer
            assert spans["LLM"].get_attribute("mlflow.chat.tokenUsage") == {
                "input_tokens": gin, "output_tokens": gout, "total_tokens": gin + gout}
            assert ("RETRIEVER" in spans) == (paradigm != "llm_only")
            judged = [a for a in t.info.assessments if a.name == "label"]
            assert [(a.value, a.source.source_type, a.source.source_id) for a in judged] == [
                (label, "LLM_JUDGE", "judge-x")]
            assert judged[0].rationale == "synthetic"
        # strata take turns: 8 items from 8 different (verdict, paradigm, type) strata
        assert len(seen) == min(8, len(strata))

        # the same sample again: nothing new
        assert main(["--db", url, "review", "start", "--n", "8", "--seed", "1"]) == 0
        assert "0 judged runs (judge judge-x) logged as traces, 8 already there" in capsys.readouterr().out

        # a reviewer labels every trace: agrees on the first five, disagrees on the rest; a
        # second reviewer gives a boolean on one and a value that is not a label on another
        found.sort(key=lambda t: int(t.info.tags[traces.TAG_RUN]))
        truth = {}
        for i, t in enumerate(found):
            judge_label = t.info.tags[traces.TAG_JUDGE_LABEL]
            human = judge_label if i < 5 else ("incorrect" if judge_label == "correct" else "correct")
            _human(t.info.trace_id, human, "ann", comment=f"case {i}")
            truth[(t.info.trace_id, "ann")] = (judge_label, human)
        _human(found[0].info.trace_id, True, "bob")
        truth[(found[0].info.trace_id, "bob")] = (found[0].info.tags[traces.TAG_JUDGE_LABEL], "correct")
        _human(found[1].info.trace_id, "maybe", "bob")

        assert main(["--db", url, "review", "pull"]) == 0
        out = capsys.readouterr().out
        assert "review pull: 9 human labels from experiment" in out and "by ann, bob" in out
        assert "1 feedbacks skipped (value not a label)" in out
        with engine.connect() as conn:
            stored = {(r[0], r[1]): (r[2], r[3], r[4]) for r in conn.execute(text(
                "SELECT trace_id, reviewer, judge_label, label, comment FROM human_labels"))}
        assert {k: v[:2] for k, v in stored.items()} == truth
        assert stored[(found[6].info.trace_id, "ann")][2] == "case 6"

        strata_fig = human_agreement(engine)
        overall = strata_fig[0][2]
        judge = [v[0] for v in truth.values()]
        human = [v[1] for v in truth.values()]
        assert overall.n == 9
        assert overall.accuracy == pytest.approx(np.mean([a == b for a, b in zip(judge, human)]))
        assert overall.confusion == confusion_matrix(human, judge, labels=list(LABELS)).tolist()
        if not np.isnan(overall.kappa):
            assert overall.kappa == pytest.approx(cohen_kappa_score(human, judge, labels=list(LABELS)))
        not_correct = [j for j, h in zip(judge, human) if h != "correct"]
        assert overall.false_correct == pytest.approx(sum(j == "correct" for j in not_correct) / len(not_correct))
        by_paradigm = {v: a.n for d, v, a in strata_fig if d == "paradigm"}
        assert sum(by_paradigm.values()) == 9

        # pulling twice changes nothing; a changed label replaces the reviewer's old one
        assert main(["--db", url, "review", "pull"]) == 0
        capsys.readouterr()
        _human(found[7].info.trace_id, truth[(found[7].info.trace_id, "ann")][0], "ann", comment="on second thought")
        assert main(["--db", url, "review", "pull"]) == 0
        with engine.connect() as conn:
            assert conn.execute(text("SELECT COUNT(*) FROM human_labels")).scalar() == 9
            row = conn.execute(text("SELECT agree, comment FROM v_human_label WHERE run_id = :r AND reviewer = 'ann'"),
                               {"r": int(found[7].info.tags[traces.TAG_RUN])}).one()
        assert tuple(row) == (1, "on second thought")
    finally:
        eng.dispose_all()


def test_review_start_queries_and_bad_input(tmp_path, review_env, capsys):
    import mlflow

    url, engine = _store("duckdb", tmp_path, None, queries=30)
    try:
        assert main(["--db", url, "review", "start", "--what", "queries", "--n", "3"]) == 0
        assert "3 generated queries logged as traces" in capsys.readouterr().out
        traces_ = mlflow.search_traces(locations=[mlflow.get_experiment_by_name(
            traces.experiment_name(engine.connect().execute(text("SELECT store_id FROM store_info")).scalar())
        ).experiment_id], return_type="list")
        t = traces_[0]
        qid = int(t.info.tags[traces.TAG_QUERY])
        with engine.connect() as conn:
            status, n_checks = conn.execute(text(
                "SELECT q.status, (SELECT COUNT(*) FROM query_checks c WHERE c.query_id = q.id) FROM queries q "
                "WHERE q.id = :q"), {"q": qid}).one()
        names = {a.name: a.value for a in t.info.assessments}
        assert names["accepted"] == (status == "accepted")
        assert len([n for n in names if n.startswith("check:")]) == n_checks
        assert sum(s.span_type == "EVALUATOR" for s in t.data.spans) == n_checks
        # a reviewer rejects it: pulled as a query label, no run figures
        from mlflow.entities import AssessmentSource, AssessmentSourceType

        mlflow.log_feedback(trace_id=t.info.trace_id, name="accepted", value=False,
                            source=AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="ann"))
        assert main(["--db", url, "review", "pull"]) == 0
        out = capsys.readouterr().out
        assert "generated queries reviewed: 1" in out and "by the reviewer (ann) 0" in out
        with engine.connect() as conn:  # the reviewer's verdict decides: a query the checks accepted leaves
            origin, now = conn.execute(text("SELECT origin, status FROM queries WHERE id = :q"), {"q": qid}).one()
        assert (origin, now) == (("human-reviewed", "rejected") if status == "accepted" else ("generated", status))
        # bad input: one line, exit 2
        assert main(["--db", url, "review", "start", "--judge", "nobody"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: judge 'nobody' has no verdicts in the store") and err.count("\n") == 1
        assert main(["--db", url, "review", "start", "--corpus", "nowhere"]) == 2
    finally:
        eng.dispose_all()


def test_report_judge_line_cites_the_reviewers(store, tmp_path):
    from ragrouter.common.stats import wilson_interval
    from ragrouter.report.build import build_report

    rows = synthetic.random_rows(5, n_corpora=1, queries_per_corpus=12, generators=("gen-a",), judges=("judge-x",),
                                 p_missing_run=0.0, p_old_config=0.0, with_router=False)
    labels = rows["human_labels"]
    assert len(labels) >= 5
    synthetic.insert_rows(store, rows)
    md = build_report(store, tmp_path / "rep", with_figures=False).markdown.read_text()
    agree = sum((h["label"] == "correct") == (h["judge_label"] == "correct") for h in labels)
    lo, hi = wilson_interval(agree, len(labels))
    head = (f"> Judge `judge-x` against a person (ann, N = {len(labels)} reviewed runs, newest 2026-01-01; these labels "
            f"outrank the constructed cases): agreement correct vs. not {agree}/{len(labels)} = "
            f"{100 * agree / len(labels):.0f} % [{100 * lo:.0f}, {100 * hi:.0f}], Cohen's κ = ")
    lines = [ln for ln in md.splitlines() if ln.startswith("> Judge `judge-x` against")]
    assert lines and all(ln.startswith(head) for ln in lines), lines
    kappa = cohen_kappa_score([h["label"] == "correct" for h in labels], [h["judge_label"] == "correct" for h in labels])
    assert f"Cohen's κ = {kappa:.2f}" in lines[0]
    # without reviewed runs the line says so
    with store.begin() as conn:
        conn.execute(text("DELETE FROM human_labels"))
    md = build_report(store, tmp_path / "rep2", with_figures=False).markdown.read_text()
    assert "> Judge `judge-x` against a person: **not reviewed**" in md
