"""Reviewed generated queries (issue 34 item 2): a reviewer's verdict on a generated query outranks
the checks' — a query the checks rejected and the reviewer accepted enters the benchmark with
origin 'human-reviewed', one the checks accepted and the reviewer rejected leaves it — and Table 6
shows the checks' and the reviewer's counts side by side with the reviewer named. Labels written
through MLflow's API as a reviewer would; DuckDB and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from cli import main
from ragrouter.db import engine as eng
from ragrouter.db import migrate
from ragrouter.querygen.stages import QueryGenStage
from ragrouter.report import synthetic
from ragrouter.db.frames import read_sql
from ragrouter.report.tables import table_validation
from ragrouter.review import traces


def _feedback(trace_id: str, value, reviewer: str) -> None:
    import mlflow
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    mlflow.log_feedback(trace_id=trace_id, name="accepted", value=value,
                        source=AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id=reviewer))


def _queries(conn) -> dict[int, tuple]:
    return {int(r[0]): (r[1], r[2], json.loads(r[3]) if isinstance(r[3], str) else (r[3] or {}))
            for r in conn.execute(text("SELECT id, origin, status, meta FROM queries WHERE origin <> 'imported'"))}


def _all_row(engine) -> dict:
    v = read_sql(engine, "SELECT * FROM v_query_validation WHERE qtype = 'all' AND judge = 'judge-x'")
    assert len(v) == 1
    return v.iloc[0].to_dict()


@pytest.mark.parametrize("kind", ["duckdb", "postgresql"])
def test_reviewer_verdict_on_generated_queries(kind, tmp_path, monkeypatch, capsys, request):
    import mlflow

    monkeypatch.setenv("RAGROUTER__routers__mlflow_uri", f"sqlite:///{tmp_path / 'mlflow.db'}")
    url = f"duckdb:///{tmp_path / 's.duckdb'}" if kind == "duckdb" else request.getfixturevalue("pg_url")
    engine = eng.make_engine(url)
    migrate.upgrade(engine)
    rows = synthetic.random_rows(4, n_corpora=1, queries_per_corpus=24, generators=("gen-a",), judges=("judge-x",),
                                 with_router=False)
    rows["human_labels"] = []
    synthetic.insert_rows(engine, rows)
    try:
        with engine.connect() as conn:
            before = _queries(conn)
        settled = {q: s for q, (o, s, _) in before.items() if o == "generated" and s in ("accepted", "rejected")}
        assert sum(s == "accepted" for s in settled.values()) >= 3 and sum(s == "rejected" for s in settled.values()) >= 2
        row0 = _all_row(engine)
        assert (row0["reviewed"], row0["reviewer_accepted"], row0["benchmark"], row0["reviewers"]) == (
            0, 0, row0["passed"], None)
        assert "Accepted by reviewer" not in table_validation(read_sql(engine, "SELECT * FROM v_query_validation"))

        assert main(["--db", url, "review", "start", "--what", "queries", "--n", "8"]) == 0
        capsys.readouterr()
        with engine.connect() as conn:
            sid = conn.execute(text("SELECT store_id FROM store_info")).scalar()
        exp = mlflow.get_experiment_by_name(traces.experiment_name(sid))
        found = sorted(mlflow.search_traces(locations=[exp.experiment_id], return_type="list"),
                       key=lambda t: int(t.info.tags[traces.TAG_QUERY]))
        assert len(found) == 8
        # the reviewer overrides the checks on one rejected and one accepted query, agrees elsewhere
        qid = {t.info.trace_id: int(t.info.tags[traces.TAG_QUERY]) for t in found}
        flip_in = next(t for t in found if settled[qid[t.info.trace_id]] == "rejected")
        flip_out = next(t for t in found if settled[qid[t.info.trace_id]] == "accepted")
        for t in found:
            checks = settled[qid[t.info.trace_id]] == "accepted"
            _feedback(t.info.trace_id, (not checks) if t in (flip_in, flip_out) else checks, "ann")

        assert main(["--db", url, "review", "pull"]) == 0
        out = capsys.readouterr().out
        n_acc = sum(settled[q] == "accepted" for q in qid.values())
        assert (f"generated queries reviewed: 8; accepted by the checks {n_acc}, by the reviewer (ann) {n_acc}, "
                f"by both {n_acc - 1}") in out
        assert ("benchmark: 1 queries the checks rejected enter it as the reviewer accepted them, 1 the checks "
                "accepted leave it as the reviewer rejected them (origin human-reviewed), 0 back to the checks' "
                "verdict; python cli.py run answers the new ones") in out
        q_in, q_out = qid[flip_in.info.trace_id], qid[flip_out.info.trace_id]
        with engine.connect() as conn:
            after = _queries(conn)
        assert after[q_in] == ("human-reviewed", "accepted", {"checks_status": "rejected", "reviewed_by": ["ann"]})
        assert after[q_out] == ("human-reviewed", "rejected", {"checks_status": "accepted", "reviewed_by": ["ann"]})
        assert {q: v for q, v in after.items() if q not in (q_in, q_out)} == {
            q: v for q, v in before.items() if q not in (q_in, q_out)}

        # Table 6: the checks' counts are unchanged, the reviewer's beside them, the reviewer named
        row = _all_row(engine)
        assert (row["generated"], row["passed"]) == (row0["generated"], row0["passed"])
        assert (row["reviewed"], row["reviewed_passed"], row["reviewer_accepted"], row["benchmark"], row["reviewers"]) \
            == (8, n_acc, n_acc, row0["passed"], "ann")
        md = table_validation(read_sql(engine, "SELECT * FROM v_query_validation"))
        assert "| Reviewed | Pass (checks) of reviewed | Accepted by reviewer | In benchmark | Reviewer |" in md
        assert f"| {row0['generated']} | {row0['passed']} |" in md and f"| 8 | {n_acc} | {n_acc} | {row0['passed']} | ann |" in md
        # the accepted one is in the benchmark's tables now, the rejected one is not
        with engine.connect() as conn:
            judged = {int(r[0]) for r in conn.execute(text("SELECT DISTINCT query_id FROM v_run_judged"))}
        assert q_in in judged and q_out not in judged
        # querygen counts the reviewed query's unit as done (it is not generated again)
        with engine.connect() as conn:
            ext = conn.execute(text("SELECT corpus_id, external_id FROM queries WHERE id = :q"), {"q": q_in}).one()
            assert (int(ext[0]), ext[1]) in QueryGenStage._done(conn, {int(ext[0])})

        # pulling twice changes nothing
        assert main(["--db", url, "review", "pull"]) == 0
        assert "benchmark:" not in capsys.readouterr().out
        with engine.connect() as conn:
            assert _queries(conn) == after

        # the reviewer changes their mind on one: it is back to the checks' verdict and origin
        _feedback(flip_in.info.trace_id, False, "ann")
        assert main(["--db", url, "review", "pull"]) == 0
        assert "0 queries the checks rejected enter it" in capsys.readouterr().out
        with engine.connect() as conn:
            again = _queries(conn)
        assert again[q_in] == before[q_in] and again[q_out] == after[q_out]
        assert _all_row(engine)["benchmark"] == row0["passed"] - 1
    finally:
        eng.dispose_all()
