"""A reviewer's label is the label the oracle uses (issue 34 item 3): v_run_judged takes the
reviewers' label where a person reviewed the run (label_source 'human'), v_oracle_label and the
router data follow, the Python twins (oracle_labels, cost_aware_labels at λ = 0) equal the view,
and `review start --prefer-changing` draws first the runs whose flip changes the oracle label —
each proven by flipping it in the store and reading the view. DuckDB and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import text

from cli import main
from ragrouter.db import engine as eng
from ragrouter.db import migrate
from ragrouter.report import synthetic
from ragrouter.report.data import router_dataset
from ragrouter.review.changing import oracle_changing_runs
from ragrouter.review.sample import sample_runs
from ragrouter.routers.dataset import oracle_labels, paradigms_of
from ragrouter.routers.evaluate import cost_aware_labels

T = dt.datetime(2026, 2, 1)


def _engine(kind: str, tmp_path, request):
    url = f"duckdb:///{tmp_path / 's.duckdb'}" if kind == "duckdb" else request.getfixturevalue("pg_url")
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    rows = synthetic.random_rows(7, n_corpora=1, queries_per_corpus=14, generators=("gen-a",), judges=("judge-x",),
                                 p_missing_run=0.0, p_old_config=0.0, p_correct=0.45, with_router=False)
    rows["human_labels"] = []
    synthetic.insert_rows(engine, rows)
    return url, engine


def _oracle(conn) -> dict[int, tuple]:
    return {int(r[0]): (r[1], r[2], int(r[3])) for r in conn.execute(text(
        "SELECT query_id, label, label_source, n_human FROM v_oracle_label WHERE judge = 'judge-x'"))}


def _label(conn, run_id: int, label: str, reviewer: str, at: dt.datetime, n: int) -> None:
    qid = conn.execute(text("SELECT query_id FROM paradigm_runs WHERE id = :r"), {"r": run_id}).scalar()
    conn.execute(text(
        "INSERT INTO human_labels (id, kind, run_id, query_id, trace_id, assessment_id, experiment, reviewer, label, "
        "judge, judge_label, labelled_at, created_at) VALUES (:id, 'run', :r, :q, :t, :a, 'review-t', :who, :l, "
        "'judge-x', NULL, :at, :at)"),
        {"id": 10_000 + n, "r": run_id, "q": qid, "t": f"tr-{n}", "a": f"a-{n}", "who": reviewer, "l": label, "at": at})


def _twins_equal_view(engine) -> dict:
    """The view's oracle labels, after checking that the Python twins give the same ones."""
    with engine.connect() as conn:
        view = {q: lab for q, (lab, _, _) in _oracle(conn).items()}
    df = router_dataset(engine, judge="judge-x")
    py = dict(zip(df["query_id"].astype(int), oracle_labels(df, paradigms_of(df))))
    cost = dict(zip(df["query_id"].astype(int), cost_aware_labels(df, 0.0)))
    assert py == {q: lab for q, lab in view.items() if lab is not None} == cost
    return view


@pytest.mark.parametrize("kind", ["duckdb", "postgresql"])
def test_human_label_is_the_oracle_label(kind, tmp_path, request):
    _, engine = _engine(kind, tmp_path, request)
    try:
        before = _twins_equal_view(engine)
        changing = oracle_changing_runs(engine, "judge-x")
        assert len(changing) >= 5
        with engine.connect() as conn:
            judged = {int(r[0]): (int(r[1]), r[2], int(r[3])) for r in conn.execute(text(
                "SELECT run_id, query_id, label, correct FROM v_run_judged WHERE judge = 'judge-x'"))}
            assert {r[0] for r in conn.execute(text("SELECT DISTINCT label_source FROM v_run_judged"))} == {"judge"}
        # every predicted change is real: flip that one run (a reviewer's label) and read the view
        for run_id, (old, new) in changing.items():
            qid, _, correct = judged[run_id]
            with engine.connect() as conn:
                trans = conn.begin()
                _label(conn, run_id, "incorrect" if correct else "correct", "ann", T, 0)
                got = _oracle(conn)[qid]
                trans.rollback()
            assert (before[qid], got[0]) == (old, new) and old != new
            assert got[1] in ("mixed", "human") and got[2] == 1
        # ... and no other run changes its query's label when flipped
        for run_id, (qid, _, correct) in judged.items():
            if run_id in changing:
                continue
            with engine.connect() as conn:
                trans = conn.begin()
                _label(conn, run_id, "incorrect" if correct else "correct", "ann", T, 0)
                assert _oracle(conn)[qid][0] == before[qid]
                trans.rollback()

        # the reviewed subset as gold: two reviewers, a changed mind, a tie
        flips = sorted(changing)[:3]
        with engine.begin() as conn:
            for n, run_id in enumerate(flips):
                qid, label, correct = judged[run_id]
                other = "incorrect" if correct else "correct"
                _label(conn, run_id, label, "ann", T, 10 * n + 1)  # first agrees with the judge ...
                _label(conn, run_id, other, "ann", T + dt.timedelta(hours=1), 10 * n + 2)  # ... then not
                _label(conn, run_id, other, "bob", T, 10 * n + 3)
            tie = sorted(set(judged) - set(changing))[0]  # two reviewers disagree: the worse label wins
            _label(conn, tie, "correct", "ann", T, 901)
            _label(conn, tie, "incomplete", "bob", T, 902)
        after = _twins_equal_view(engine)
        with engine.connect() as conn:
            rows = {int(r[0]): r[1:] for r in conn.execute(text(
                "SELECT run_id, label, judge_label, label_source, n_reviewers, correct FROM v_run_judged "
                "WHERE judge = 'judge-x'"))}
            outcomes = {int(r[0]): r[1:] for r in conn.execute(text(
                "SELECT run_id, correct, judge_label, label_source FROM v_router_outcomes WHERE judge = 'judge-x'"))}
            oracle = _oracle(conn)
        for n, run_id in enumerate(flips):
            qid, label, correct = judged[run_id]
            other = "incorrect" if correct else "correct"
            assert rows[run_id] == (other, label, "human", 2, 1 - correct)
            assert outcomes[run_id] == (1 - correct, label, "human")
            assert oracle[qid][2] >= 1 and oracle[qid][1] in ("mixed", "human")
        assert rows[tie][0] == "incomplete" and rows[tie][2:4] == ("human", 2) and rows[tie][4] == 0
        assert sum(r[2] == "human" for r in rows.values()) == 4
        moved = {judged[r][0] for r in flips}
        assert all(after[q] != before[q] for q in moved if sum(judged[r][0] == q for r in flips) == 1)
        assert {q for q in after if after[q] != before[q]} <= moved | {judged[tie][0]}
        assert all(oracle[q][1] == "judge" and oracle[q][2] == 0 for q in oracle
                   if q not in moved and q != judged[tie][0])
    finally:
        eng.dispose_all()


def test_prefer_changing_draws_the_runs_that_matter_first(store, tmp_path, monkeypatch, capsys):
    rows = synthetic.random_rows(7, n_corpora=1, queries_per_corpus=14, generators=("gen-a",), judges=("judge-x",),
                                 p_missing_run=0.0, p_old_config=0.0, p_correct=0.45, with_router=False)
    rows["human_labels"] = []
    synthetic.insert_rows(store, rows)
    changing = oracle_changing_runs(store, "judge-x")
    k = len(changing)
    assert 5 <= k < 60
    _, first = sample_runs(store, None, k, 3, prefer_changing=True)
    assert {it["run_id"] for it in first} == set(changing) and all(it["changes_oracle"] for it in first)
    _, more = sample_runs(store, None, k + 4, 3, prefer_changing=True)
    assert [it["run_id"] for it in more[:k]] == [it["run_id"] for it in first]
    assert sum(it["changes_oracle"] for it in more) == k
    # without the flag: the stratified sample as before (not the changing runs first)
    _, plain = sample_runs(store, None, k, 3)
    assert {it["run_id"] for it in plain} != set(changing)

    url = str(store.url)
    monkeypatch.setenv("RAGROUTER__routers__mlflow_uri", f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert main(["--db", url, "review", "start", "--n", "6", "--prefer-changing"]) == 0
    out = capsys.readouterr().out
    assert "6 judged runs (judge judge-x) logged as traces" in out
    assert "6 of the 6 would change their query's oracle label if their verdict flipped" in out
    with store.connect() as conn:
        n_before = conn.execute(text("SELECT COUNT(*) FROM human_labels")).scalar()
    assert main(["--db", url, "review", "start", "--what", "queries", "--prefer-changing"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["error: --prefer-changing draws judged runs (the oracle label rests on them); "
                                          "it does not apply to --what queries"]
    with store.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM human_labels")).scalar() == n_before == 0
