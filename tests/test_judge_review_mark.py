"""The judge stage stores why a rule left a verdict to a person (``judgments.review``: the figures
rule abstained), the report's judge line counts those runs, and an answer that only restates the
question is not "correct" (ragrouter/evaluation/restatement.py)."""

import pytest
from sqlalchemy import insert, text

from ragrouter.config import Config
from ragrouter.db import models
from ragrouter.evaluation import judge as jd
from ragrouter.evaluation.restatement import apply_restatement, restates
from ragrouter.evaluation.stages import JudgeStage
from ragrouter.report import calibration as rc
from ragrouter.review import sample
from ragrouter.stages.base import Scope
from ragrouter.stages.runner import run_stage
from ragrouter.stages.services import Services
from tests.fake_openai import FakeOpenAI

KEY_ENV = "RAGROUTER_TEST_REVIEW_KEY"
QUESTION = "How does the information on legal contingencies correlate with the reserves set aside for them?"
GOLD = "The company reserved $45 million for pending lawsuits under accrued liabilities."


@pytest.mark.parametrize("answer", [
    "The information on legal contingencies correlates with the reserves set aside for them.",  # the reported case
    "Legal contingencies correlate with the reserves set aside for them, as the report describes.",
    "It depends on several factors described in the relevant section of the report.",
])
def test_an_answer_that_only_restates_the_question_is_not_correct(answer):
    assert restates(QUESTION, GOLD, answer)
    assert apply_restatement("correct", QUESTION, GOLD, answer) == "incomplete"
    assert jd.apply_gate(jd.Gate(), "correct", QUESTION, GOLD, answer) == "incomplete"
    assert jd.apply_gate(jd.Gate(figures=False), "correct", QUESTION, GOLD, answer) == "correct"  # the rules off


@pytest.mark.parametrize("answer", [
    "The company set aside $45 million for lawsuits.",                  # shares the gold's content
    "Reserves for legal contingencies rose because new lawsuits were filed.",  # says something of its own
    "Legal contingencies are covered by insurance rather than by reserves held for them.",  # a claim of its own
])
def test_an_answer_with_content_of_its_own_is_left_to_the_judge(answer):
    assert not restates(QUESTION, GOLD, answer)
    assert apply_restatement("correct", QUESTION, GOLD, answer) == "correct"


def test_a_gold_with_nothing_beyond_the_question_is_left_to_the_judge():
    assert not restates("Is aspirin an antiplatelet drug?", "Aspirin is an antiplatelet drug.",
                        "Aspirin is an antiplatelet drug.")
    assert not restates("Which is preferred for early tumours, surgery or radiation?", "Surgery.",
                        "Surgery is preferred for early tumours.")


def test_a_yes_no_question_stated_as_a_fact_is_an_answer():
    assert not restates("Is aspirin an antiplatelet drug?", "Yes, it inhibits platelet aggregation.",
                        "Aspirin is an antiplatelet drug.")
    assert not restates("Does the policy cover flood damage?", "No.", "The policy does not cover flood damage.")


def _store_with_runs(engine) -> dict[str, int]:
    answers = {"ambiguous date": "03/05/1994", "restated": "When was the treaty signed.", "right": "5 March 1994."}
    with engine.begin() as conn:
        cid = conn.execute(insert(models.Corpus).values(name="toy").returning(models.Corpus.id)).scalar_one()
        qid = conn.execute(insert(models.Query).values(
            corpus_id=cid, external_id="q1", origin="imported", qtype="factual", question="When was the treaty signed?",
            answer="5 March 1994", status="accepted").returning(models.Query.id)).scalar_one()
        return {name: conn.execute(insert(models.ParadigmRun).values(
            query_id=qid, paradigm=p, generator="gen", config_hash="h", answer=a, context_tokens=1, iterations=0,
            ret_in_tokens=0, ret_out_tokens=0, gen_in_tokens=1, gen_out_tokens=1).returning(models.ParadigmRun.id))
            .scalar_one() for (name, a), p in zip(answers.items(), ("naive", "graph", "hybrid"))}


def test_the_judge_stage_stores_an_abstention_and_the_judge_line_counts_it(store, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    runs = _store_with_runs(store)
    with FakeOpenAI(responder=lambda req: {"label": "correct", "reason": "matches the gold answer exactly"}) as srv:
        backend = {"kind": "openai", "base_url": srv.base_url, "model": "lenient", "api_key_env": KEY_ENV,
                   "concurrency": 1, "timeout_s": 5, "retries": 0}
        config = Config({"backends": {"lenient": backend},
                         "roles": {"generators": ["lenient"], "extractor": "lenient", "judge": "lenient",
                                   "query_generator": "lenient", "embedder": "lenient"},
                         "judge": {"temperature": 0.1, "samples": 1}, "worker": {"batch_size": 50}},
                        source="test-config")
        services = Services(config, store)
        try:
            run_stage(JudgeStage(), services, Scope(config=config), progress=False)
        finally:
            services.finish()
    with store.connect() as conn:
        got = {int(r[0]): (r[1], r[2], r[3]) for r in conn.execute(text(
            "SELECT run_id, label, raw_label, review FROM judgments"))}
    assert got[runs["ambiguous date"]][:2] == ("correct", "correct")
    assert got[runs["ambiguous date"]][2].startswith("figures rule unsure: d1994-03-05")
    assert got[runs["restated"]] == ("incomplete", "correct", None)
    assert got[runs["right"]] == ("correct", "correct", None)
    judge = jd.judge_key("lenient")
    assert rc.review_counts(store, judge) == (1, 3)
    line = rc.trust_line(rc.judge_trust(store, judge))
    assert "the figures rule abstained on 1 of 3 judged runs (33.3 %)" in line
    assert rc.review_line(judge, (0, 3)) == f"> Judge `{judge}`: the figures rule abstained on none of its 3 judged runs."
    assert rc.review_line(judge, None) == ""  # a store before judgments.review
    for seed in range(3):  # review start draws the marked run first, whatever the seed
        _, items = sample.sample_runs(store, None, 1, seed, judge)
        assert [(it["run_id"], it["needs_review"]) for it in items] == [(runs["ambiguous date"], True)]


def test_the_rules_give_the_same_labels_on_several_threads():
    """The judge stage applies the rules on several threads: the readers they share (snowball's
    stemmer, dateparser, pint) must not mix one answer's state into another's."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    from benchmarks.bench_figures import CASES

    rows = [json.loads(line) for line in CASES.read_text().splitlines() if line.strip()]
    args = [("correct", r["question"], r["gold"], r["answer"]) for r in rows]
    serial = [jd.apply_gate(jd.Gate(), *a) for a in args]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(2):
            assert list(pool.map(lambda a: jd.apply_gate(jd.Gate(), *a), args)) == serial
