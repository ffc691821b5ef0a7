"""Questions marked unanswerable (issue 30 item 1), end to end on constructed stores.

* Ingest: the ``unanswerable`` key of the jsonl and ragrouter formats (the answer may be left
  out), MuSiQue's ``answerable: false``; stored as ``queries.unanswerable``.
* The judge stage's rules: on an unanswerable question a refusal is correct and any other
  answer incorrect, recorded as a hallucination, with no model call; refusals on answerable
  questions stay incomplete; ``judgments.refusal`` records what the rule found.
* The views on DuckDB and PostgreSQL: ``v_run_judged`` (unanswerable / refused / hallucination),
  ``v_oracle_label`` ('unanswerable', apart from 'cannot_answer'), ``v_abstention`` (refusal rate
  on unanswerable vs. answerable questions with N and Wilson intervals), the router dataset.
* Routers: the label is learnt like any other; an 'unanswerable' prediction abstains.
* The report's abstention table.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import insert, text

from ragrouter.db import models
from ragrouter.evaluation import judge as jd
from ragrouter.common.stats import wilson_interval
from ragrouter.ingest import store as ingest_store
from ragrouter.ingest.loaders import load
from ragrouter.ingest.records import UNANSWERABLE_GOLD, LoaderError

try:
    from tests.fake_openai import FakeOpenAI
    from tests.test_calibration import KEY_ENV, ScriptedJudges, cfg, fake, judge_stage
except ModuleNotFoundError:  # rootdir-less import mode
    from fake_openai import FakeOpenAI
    from test_calibration import KEY_ENV, ScriptedJudges, cfg, fake, judge_stage


@pytest.fixture(autouse=True)
def fake_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test-key")


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


DOCS = [{"id": "d1", "title": "Log", "text": "Maria's shift ends at 5:30 PM on Fridays."}]
QUESTIONS = [
    {"id": "q-time", "question": "When does Maria's shift end on Fridays?", "answer": "5:30 PM", "type": "single_hop"},
    {"id": "q-colour", "question": "What colour is Maria's car?", "type": "single_hop", "unanswerable": True},
    {"id": "q-pet", "question": "What is Maria's dog called?", "answer": "Insufficient information",
     "type": "single_hop", "unanswerable": True},
]


@pytest.mark.parametrize("fmt", ["jsonl", "ragrouter"])
def test_the_unanswerable_key_of_the_jsonl_and_ragrouter_formats(tmp_path, fmt):
    ds = load(fmt, [jsonl(tmp_path / "docs.jsonl", DOCS), jsonl(tmp_path / "questions.jsonl", QUESTIONS)])
    got = {q.external_id: q for q in ds.questions}
    assert [got[k].unanswerable for k in ("q-time", "q-colour", "q-pet")] == [False, True, True]
    assert got["q-colour"].answer == UNANSWERABLE_GOLD == "Insufficient information"  # no answer given
    assert got["q-pet"].answer == "Insufficient information"
    assert "unanswerable" not in got["q-pet"].meta
    bad = [dict(QUESTIONS[0], unanswerable="yes")]
    with pytest.raises(LoaderError, match="key 'unanswerable' must be"):
        load(fmt, [jsonl(tmp_path / "docs.jsonl", DOCS), jsonl(tmp_path / "bad.jsonl", bad)])
    missing = [{k: v for k, v in QUESTIONS[0].items() if k != "answer"}]  # answerable: the answer is required
    with pytest.raises(LoaderError, match="missing key 'answer'"):
        load(fmt, [jsonl(tmp_path / "docs.jsonl", DOCS), jsonl(tmp_path / "missing.jsonl", missing)])


def test_musique_answerable_false_is_a_question_marked_unanswerable(tmp_path):
    from pathlib import Path

    raw = json.loads((Path(__file__).resolve().parent / "data" / "musique_slice.json").read_text())[:2]
    raw[1]["answerable"] = False
    ds = load("musique", [jsonl(tmp_path / "m.jsonl", raw)])
    q = {x.external_id: x for x in ds.questions}
    assert [q[r["id"]].unanswerable for r in raw] == [False, True]
    assert q[raw[1]["id"]].answer == UNANSWERABLE_GOLD
    assert q[raw[1]["id"]].meta["dataset_answer"] == raw[1]["answer"]  # the answerable twin's answer
    assert ds.dropped == {} or "unanswerable" not in ds.dropped


def test_ingest_stores_the_flag_and_a_changed_flag_is_a_conflict(store, tmp_path):
    ds = load("jsonl", [jsonl(tmp_path / "docs.jsonl", DOCS), jsonl(tmp_path / "questions.jsonl", QUESTIONS)])
    with store.begin() as conn:
        ingest_store.write_dataset(conn, "logs", "jsonl", ds, [])
    with store.connect() as conn:
        flags = dict(conn.execute(text("SELECT external_id, unanswerable FROM queries")).all())
    assert flags == {"q-time": False, "q-colour": True, "q-pet": True}
    ds.questions[0].unanswerable = True
    with pytest.raises(ingest_store.IngestConflict, match="q-time"):
        with store.begin() as conn:
            ingest_store.write_dataset(conn, "logs", "jsonl", ds, [])
    with store.begin() as conn:
        ingest_store.write_dataset(conn, "logs", "jsonl", ds, [], update=True)
    with store.connect() as conn:
        assert conn.execute(text("SELECT unanswerable FROM queries WHERE external_id = 'q-time'")).scalar() is True


# ---------------------------------------------------------------------------------------------
# The judge's rules, the views (DuckDB and PostgreSQL)

# (query, unanswerable): naive refuses u1, u2 and a1, hallucinates on u3, answers a2;
# graph answers everything (three hallucinations, two answers).
ANSWERS = {
    ("u1", True): {"naive": "I cannot answer", "graph": "Blue."},
    ("u2", True): {"naive": "The provided context does not contain enough information.", "graph": "Red."},
    ("u3", True): {"naive": "Green.", "graph": "Maria drives a green car."},
    ("a1", False): {"naive": "I cannot answer", "graph": "5:30 PM"},
    ("a2", False): {"naive": "At 5:30 PM.", "graph": "5:30 PM on Fridays."},
}


def fill(engine) -> dict[tuple[str, str], int]:
    """The runs of :data:`ANSWERS` on accepted queries, each with a semantic F1; run ids by (query, paradigm)."""
    ids = {}
    with engine.begin() as conn:
        cid = conn.execute(insert(models.Corpus).values(name="logs").returning(models.Corpus.id)).scalar_one()
        for (ext, unanswerable), by_paradigm in ANSWERS.items():
            qid = conn.execute(insert(models.Query).values(
                corpus_id=cid, external_id=ext, origin="imported", qtype="factual", question=f"Question {ext}?",
                answer=UNANSWERABLE_GOLD if unanswerable else "5:30 PM", status="accepted",
                unanswerable=unanswerable).returning(models.Query.id)).scalar_one()
            for paradigm, answer in by_paradigm.items():
                rid = conn.execute(insert(models.ParadigmRun).values(
                    query_id=qid, paradigm=paradigm, generator="gen", config_hash="h", answer=answer,
                    context_tokens=10, iterations=0, ret_in_tokens=1, ret_out_tokens=0, gen_in_tokens=5,
                    gen_out_tokens=2).returning(models.ParadigmRun.id)).scalar_one()
                conn.execute(insert(models.AnswerScore).values(run_id=rid, metric="semantic_f1", scorer="s",
                                                               value=0.9 if paradigm == "graph" else 0.8))
                ids[(ext, paradigm)] = rid
    return ids


@pytest.fixture(params=["duckdb", "postgresql"])
def any_store(request):
    return request.getfixturevalue("store" if request.param == "duckdb" else "pg_store")


def test_rule_verdicts():
    assert jd.rule_verdict("I cannot answer", unanswerable=True) == jd.RuleVerdict(
        "correct", jd.UNANSWERABLE_REFUSAL_REASON, True)
    assert jd.rule_verdict("Blue.", unanswerable=True) == jd.RuleVerdict("incorrect", jd.HALLUCINATION_REASON, False)
    assert jd.rule_verdict("I cannot answer") == jd.RuleVerdict("incomplete", jd.REFUSAL_REASON, True)
    assert jd.rule_verdict("Blue.") is None  # the judge model decides
    assert jd.rule_verdict("The chat logs do not mention the colour of her car.", unanswerable=True).label == "correct"


def test_judge_rules_views_and_abstention(any_store):
    engine = any_store
    ids = fill(engine)
    scripts = {a: ["correct"] for q in ANSWERS.values() for a in q.values()}
    with FakeOpenAI(responder=ScriptedJudges(scripts={"voter": scripts})) as srv:
        judge_stage(engine, cfg({"voter": fake(srv, "voter")}))
        sent = [r["body"]["messages"][1]["content"] for r in srv.requests]
    # only the three non-refusals on answerable questions went to the judge model
    assert sorted(s.split("Answer to grade: ")[1].split("\n")[0] for s in sent) == \
        ["5:30 PM", "5:30 PM on Fridays.", "At 5:30 PM."]
    with engine.connect() as conn:
        rows = {int(r[0]): (r[1], r[2], r[3], r[4]) for r in conn.execute(text(
            "SELECT run_id, label, refusal, reason, llm_call_id FROM judgments"))}
        judged = {int(r[0]): tuple(int(v) for v in r[1:]) for r in conn.execute(text(
            "SELECT run_id, unanswerable, refused, hallucination, correct FROM v_run_judged"))}
        oracle = {r[0]: (r[1], r[2]) for r in conn.execute(text(
            "SELECT q.external_id, o.label, o.label_f1 FROM v_oracle_label o JOIN queries q ON q.id = o.query_id"))}
        abst = {r["paradigm"]: dict(r) for r in conn.execute(text("SELECT * FROM v_abstention")).mappings()}
        dataset = {r[0]: (r[1], int(r[2])) for r in conn.execute(text(
            "SELECT q.external_id, d.label, d.unanswerable FROM v_router_dataset d JOIN queries q ON q.id = d.query_id"))}
    assert rows[ids[("u1", "naive")]] == ("correct", True, jd.UNANSWERABLE_REFUSAL_REASON, None)
    assert rows[ids[("u1", "graph")]] == ("incorrect", False, jd.HALLUCINATION_REASON, None)
    assert rows[ids[("a1", "naive")]] == ("incomplete", True, jd.REFUSAL_REASON, None)
    assert rows[ids[("a1", "graph")]][:3] == ("correct", False, "scripted voter") and rows[ids[("a1", "graph")]][3]
    assert judged[ids[("u3", "naive")]] == (1, 0, 1, 0)   # a hallucination
    assert judged[ids[("u2", "naive")]] == (1, 1, 0, 1)   # a right refusal
    assert judged[ids[("a1", "naive")]] == (0, 1, 0, 0)   # a missed answer
    assert judged[ids[("a2", "graph")]] == (0, 0, 0, 1)
    # the oracle: its own label for unanswerable questions, apart from cannot_answer
    assert oracle == {"u1": ("unanswerable", None), "u2": ("unanswerable", None), "u3": ("unanswerable", None),
                      "a1": ("graph", pytest.approx(0.9)), "a2": ("graph", pytest.approx(0.9))}
    assert dataset == {"u1": ("unanswerable", 1), "u2": ("unanswerable", 1), "u3": ("unanswerable", 1),
                       "a1": ("graph", 0), "a2": ("graph", 0)}
    naive, graph = abst["naive"], abst["graph"]
    assert (naive["n_unanswerable"], naive["n_refused_unanswerable"], naive["n_hallucinated"]) == (3, 2, 1)
    assert (naive["n_answerable"], naive["n_refused_answerable"]) == (2, 1)
    assert (graph["n_unanswerable"], graph["n_refused_unanswerable"], graph["n_hallucinated"]) == (3, 0, 3)
    assert naive["refusal_unanswerable_pct"] == pytest.approx(200 / 3)
    lo, hi = wilson_interval(2, 3)
    assert (naive["refusal_unanswerable_ci_low"], naive["refusal_unanswerable_ci_high"]) == \
        (pytest.approx(100 * lo), pytest.approx(100 * hi))
    lo, hi = wilson_interval(1, 2)
    assert naive["refusal_answerable_pct"] == pytest.approx(50.0)
    assert (naive["refusal_answerable_ci_low"], naive["refusal_answerable_ci_high"]) == \
        (pytest.approx(100 * lo), pytest.approx(100 * hi))
    assert graph["refusal_unanswerable_pct"] == 0.0 and graph["refusal_answerable_pct"] == 0.0


def test_report_has_the_abstention_table(store, tmp_path):
    from ragrouter.report.build import build_report
    from ragrouter.report.tables import fmt_ci

    fill(store)
    scripts = {a: ["correct"] for q in ANSWERS.values() for a in q.values()}
    with FakeOpenAI(responder=ScriptedJudges(scripts={"voter": scripts})) as srv:
        judge_stage(store, cfg({"voter": fake(srv, "voter")}))
    md = build_report(store, tmp_path / "rep", with_figures=False).markdown.read_text()
    assert "### Abstention (questions marked unanswerable)" in md
    lo, hi = wilson_interval(2, 3)
    part = md.split("### Abstention (questions marked unanswerable)")[1].split("\n## ")[0]
    row = [ln for ln in part.splitlines() if ln.startswith("| logs | naive |")]
    assert row == [f"| logs | naive | {fmt_ci(200 / 3, 100 * lo, 100 * hi, 3)} | 1 | "
                   f"{fmt_ci(50.0, *(100 * v for v in wilson_interval(1, 2)), 2)} |"]
    assert "unanswerable" in md.split("### Oracle labels")[1].split("###")[0]  # the oracle table's column


# ---------------------------------------------------------------------------------------------
# Routers


def router_frame() -> pd.DataFrame:
    rows = []
    for i in range(12):
        marked = i % 4 == 0
        rows.append({"query_id": str(i), "corpus": "c", "generator": "g", "qtype": "factual",
                     "query_text": f"q{i}", "lcc_ratio": 1.0, "density": 0.1, "clustering": 0.0,
                     "intrinsic_dim": 3.0, "hubness": 0.0, "avg_distance": 0.5, "unanswerable": int(marked),
                     "correct__naive": int(marked or i % 3 == 0), "tokens__naive": 100, "f1__naive": 0.5,
                     "correct__graph": int(not marked and i % 2 == 0), "tokens__graph": 300, "f1__graph": 0.7})
    df = pd.DataFrame(rows)
    from ragrouter.routers.dataset import oracle_labels

    df["label"] = oracle_labels(df)
    return df


def test_router_label_space_and_abstention():
    from ragrouter.routers.dataset import class_order, oracle_labels, validate_router_dataset
    from ragrouter.routers.evaluate import cost_aware_labels, route_outcomes

    df = validate_router_dataset(router_frame())
    labels = list(oracle_labels(df))
    assert labels[0] == labels[4] == labels[8] == "unanswerable"  # whatever paradigm refused
    assert labels[2] == "graph" and labels[3] == "naive" and labels[1] == "cannot_answer"
    assert list(cost_aware_labels(df, 0.0)) == labels  # λ = 0 is the oracle's rule, this label too
    assert class_order(df) == ["naive", "graph", "cannot_answer", "unanswerable"]
    assert class_order(df[df["label"] != "unanswerable"]) == ["naive", "graph", "cannot_answer"]
    # an 'unanswerable' prediction runs nothing: right on a marked question, 0 tokens
    routed, correct, tokens = route_outcomes(np.array(["unanswerable", "unanswerable", "graph"]),
                                             df.iloc[[0, 2, 2]], fallback="naive")
    assert list(routed) == ["unanswerable", "unanswerable", "graph"]
    assert list(correct) == [1.0, 0.0, 1.0] and list(tokens) == [0.0, 0.0, 300.0]


def test_routers_learn_the_label():
    from ragrouter.routers.evaluate import cross_validate

    df = pd.concat([router_frame().assign(query_id=lambda d, k=k: d["query_id"] + f"-{k}") for k in range(5)],
                   ignore_index=True)
    res = cross_validate(df, "oracle", "qc", n_splits=5, seed=0)
    assert res.metrics["routing_accuracy"] == pytest.approx(1.0)
    assert res.metrics["correct_rate"] == pytest.approx(float((df["label"] != "cannot_answer").mean()))
    preds = res.predictions
    assert set(preds.loc[preds["true_label"] == "unanswerable", "routed_paradigm"]) == {"unanswerable"}
