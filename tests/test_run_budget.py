"""One budget for every stage of ``run``, the stages the user names, and no questions nobody asked for.

* ``run --until-decided --budget-hours 0.5 --stage score`` ran no score stage (a user saw
  it); every named stage runs: the build stages first, the decision, then score on its runs.
* A budget bounds the whole run, graph construction included: when the build alone is
  expected to exceed it, the run says so before starting (one line, exit 2, no request
  made, nothing written) and names ``corpus slice --for-budget``.
* A plain ``run`` generates no questions for a corpus whose questions were imported; ``--stage
  querygen`` still does.
* When extraction runs slower than estimated (a user's run took 199 s a call where 38.6 s was
  expected, and spent its whole budget extracting), it stops at the build's share of the
  budget, and the decision goes on with the paradigms that do not need the graph, saying so.
"""

from __future__ import annotations

import time

import yaml
from click.testing import CliRunner
from sqlalchemy import text

from ragrouter.commands import status
from ragrouter.config import Config
from ragrouter.stages.base import Scope
from tests.fake_openai import FakeOpenAI
from tests.test_decisions import _store_with_questions, planted
from tests.test_stages_answer import ex, fake_config, ingest
from tests.test_stages_answer import responder as triples_responder
from tests.test_trust import judging_responder


def _invoke(duck_url, tmp_path, cfg, args):
    from ragrouter.commands.common import Ctx
    from ragrouter.commands.run import run_command
    from ragrouter.db import engine as eng

    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg.data))
    eng.dispose_all()
    ctx = Ctx(db_url=duck_url, config_path=str(tmp_path / "cfg.yaml"))
    ctx._config = Config.load(path=tmp_path / "cfg.yaml", env={})
    try:
        return CliRunner().invoke(run_command, args, obj=ctx, catch_exceptions=False)
    finally:
        eng.dispose_all()


def _count(engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar() or 0)


def test_until_decided_with_a_budget_runs_the_score_stage_it_was_given(store, duck_url, tmp_path):
    _store_with_questions(store, 10)
    with FakeOpenAI(responder=planted(0.8, 0.5, correlated=True), embedding_dim=16) as srv:
        cfg = fake_config(srv)
        cfg.data["paradigms"]["enabled"] = ["llm_only", "naive"]
        res = _invoke(duck_url, tmp_path, cfg, ["--corpus", "toy", "--stage", "chunk", "--stage", "embed",
                                                "--stage", "score", "--until-decided", "--budget-hours", "0.5",
                                                "--quiet"])
    assert res.exit_code == 0, res.output
    from ragrouter.db import engine as eng

    engine = eng.make_engine(duck_url)
    runs = _count(engine, "SELECT COUNT(*) FROM paradigm_runs")
    scored = _count(engine, "SELECT COUNT(DISTINCT run_id) FROM answer_scores")
    assert runs == 20 and scored == runs, res.output  # every question of the one cell, both paradigms
    assert "score: 1 done, 0 failed of 1 pending" in res.output, res.output  # one batch of runs
    lines = res.output.splitlines()
    assert [ln.split(":")[0] for ln in lines if ln.split(":")[0] in ("chunk", "embed", "score")] == \
        ["chunk", "embed", "score"]
    assert lines.index(next(ln for ln in lines if ln.startswith("score:"))) > \
        lines.index(next(ln for ln in lines if ln.startswith("corpus")))  # after the decision table


def test_a_build_over_the_budget_is_refused_before_anything_runs(store, duck_url, tmp_path):
    ingest(store)
    with FakeOpenAI(responder=judging_responder, embedding_dim=16) as srv:
        cfg = fake_config(srv)
        # a stated endpoint of a minute a call: the extraction of the toy corpus takes minutes
        cfg.data.setdefault("dry_run", {}).setdefault("timing", {})["priors"] = {
            "openai": {"overhead_s": 60.0, "prompt_tps": 1000, "gen_tps": 50, "parallel": 1}}
        for flag, value, what, cut in (
                ("--budget-hours", "0.01", "expected to take 0:",
                 "python cli.py corpus slice toy NEW --for-budget 0.01 proposes a slice that fits, then run on NEW"),
                ("--budget-tokens", "10000", "expected to bill 2",
                 "a slice of at most 2 of its 8 chunks fits the build (python cli.py corpus slice toy NEW --chunks 2)")):
            res = _invoke(duck_url, tmp_path, cfg, ["--corpus", "toy", "--until-decided", flag, value, "--quiet"])
            assert res.exit_code == 2, res.output
            lines = [ln for ln in res.output.splitlines() if ln.strip()]
            assert len(lines) == 1, res.output
            assert f"the corpus build alone (chunk, extract, embed) is {what}" in lines[0], lines[0]
            assert f"over {flag} {value}: nothing was run; {cut}" in lines[0], lines[0]
        assert srv.stats()["total"] == 0  # no request
    from ragrouter.db import engine as eng

    engine = eng.make_engine(duck_url)
    assert _count(engine, "SELECT COUNT(*) FROM chunks") == 0
    assert _count(engine, "SELECT COUNT(*) FROM worker_runs") == 0


def test_a_plain_run_generates_no_questions_for_imported_ones(store, duck_url, tmp_path):
    ingest(store)
    with FakeOpenAI(responder=judging_responder, embedding_dim=16) as srv:
        cfg = fake_config(srv)
        cfg.data["paradigms"]["enabled"] = ["llm_only"]
        res = _invoke(duck_url, tmp_path, cfg, ["--corpus", "toy", "--quiet", "--stage", "chunk", "--stage",
                                                "extract", "--stage", "embed"])
        assert res.exit_code == 0, res.output
        plain = _invoke(duck_url, tmp_path, cfg, ["--quiet"])  # every stage, every corpus
        assert plain.exit_code == 0, plain.output
        assert "querygen: not run on 'toy' (its questions were imported; --stage querygen generates more)" \
            in plain.output, plain.output
        from ragrouter.db import engine as eng

        engine = eng.make_engine(duck_url)
        assert _count(engine, "SELECT COUNT(*) FROM queries WHERE origin <> 'imported'") == 0
        assert _count(engine, "SELECT COUNT(*) FROM paradigm_runs") == 6  # the rest of the pipeline ran
        got = {s["stage"]: s for s in status.collect(engine, Scope(config=cfg))["stages"]}
        assert got["querygen"]["pending"] == 0 and got["querygen"]["not_requested"]["corpora"] == ["toy"]
        dry = _invoke(duck_url, tmp_path, cfg, ["--dry-run", "--json"])
        assert dry.exit_code == 0 and '"stage": "querygen"' not in dry.output, dry.output
        eng.dispose_all()
        asked = _invoke(duck_url, tmp_path, cfg, ["--corpus", "toy", "--quiet", "--stage", "querygen"])
        assert asked.exit_code == 0, asked.output
        done = int(asked.output.split("querygen: ")[1].split(" done")[0])
        assert done > 0, asked.output


def test_until_decided_without_stages_scores_the_runs_it_made(store, duck_url, tmp_path):
    """No --stage: every stage runs, score included (after the decision), as the help says;
    it ran none, and routers then had no semantic F1 to learn from."""
    _store_with_questions(store, 10)
    with FakeOpenAI(responder=planted(0.8, 0.5, correlated=True), embedding_dim=16) as srv:
        cfg = fake_config(srv)
        cfg.data["paradigms"]["enabled"] = ["llm_only", "naive"]
        res = _invoke(duck_url, tmp_path, cfg, ["--corpus", "toy", "--until-decided", "--quiet"])
    from ragrouter.db import engine as eng

    engine = eng.make_engine(duck_url)
    runs = _count(engine, "SELECT COUNT(*) FROM paradigm_runs")
    scored = _count(engine, "SELECT COUNT(DISTINCT run_id) FROM answer_scores")
    assert runs > 0 and scored == runs, res.output
    assert res.output.index("score:") > res.output.index("corpus"), res.output  # after the decision table


def test_a_budget_stops_slow_extraction_and_decides_without_the_graph(store, duck_url, tmp_path):
    _store_with_questions(store, 10)  # 6 one-chunk documents, 10 factual questions
    answer = planted(0.8, 0.5, correlated=True)
    extraction_s = 1.0

    def respond(req):
        if req["messages"][0]["content"].startswith(ex.SYSTEM):  # extraction: slow, as on a busy CPU
            time.sleep(extraction_s)
            return triples_responder(req)
        return answer(req)

    hours = 0.004  # 14.4 s
    with FakeOpenAI(responder=respond, embedding_dim=16) as srv:
        cfg = fake_config(srv)
        cfg.data["paradigms"]["enabled"] = ["llm_only", "naive", "graph", "hybrid", "iterative"]
        cfg.data["backends"]["fake-gen"]["concurrency"] = 1  # one extraction at a time
        # the estimate expects ~10 ms a call, so the build's share is decisions.build_share's
        cfg.data.setdefault("dry_run", {}).setdefault("timing", {})["priors"] = {
            "openai": {"overhead_s": 0.01, "prompt_tps": 1000000, "gen_tps": 1000000, "parallel": None}}
        cfg.data["decisions"]["build_share"] = 0.15  # 2.2 s for the build
        started = time.monotonic()
        res = _invoke(duck_url, tmp_path, cfg, ["--corpus", "toy", "--until-decided", "--budget-hours", str(hours),
                                                "--quiet"])
        took = time.monotonic() - started
    assert res.exit_code == 0, res.output
    from ragrouter.db import engine as eng

    engine = eng.make_engine(duck_url)
    extracted = _count(engine, "SELECT COUNT(*) FROM chunk_extractions")
    assert extracted < 6, res.output  # stopped, the rest pending (a later run resumes)
    line = next(ln for ln in res.output.splitlines() if ln.startswith("extract stopped"))
    assert line.startswith("extract stopped at the build's share of the budget (2s of 14s): "), line
    assert f"{extracted} chunk(s) extracted this run, {6 - extracted} left for a later run" in line, line
    assert line.endswith("decided without graph, hybrid, iterative (they need the whole graph), on llm_only, naive")
    with engine.connect() as conn:
        made = {r[0] for r in conn.execute(text("SELECT DISTINCT paradigm FROM paradigm_runs")).all()}
    assert made == {"llm_only", "naive"}, res.output  # decided on the paradigms that do not need the graph
    assert _count(engine, "SELECT COUNT(*) FROM decision_cells") == 1
    assert took <= hours * 3600 + extraction_s + 5.0  # never more than a unit's time over (+ start-up)
