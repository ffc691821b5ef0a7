"""The non-answer family of calibration cases (ragrouter/evaluation/calibration_nonanswer.py):
answers that add nothing to the question, of true label incomplete, none a refusal; the judge's
rules (the restatement check, the figures rule) keep every one of them from "correct"."""

import pytest

from ragrouter.evaluation import calibration_nonanswer as na
from ragrouter.evaluation import judge as jd
from ragrouter.evaluation.calibration_cases import Source

SOURCES = [
    Source(1, "fin-1", 1, "reasoning", "How does the information on legal contingencies correlate with the reserves set "
           "aside for these liabilities?", "The company reserved $45 million for pending lawsuits, recorded under "
           "accrued liabilities."),
    Source(2, "acc-1", 1, "factual", "What caused the loss of separation during the approach?",
           "The controller cleared both aircraft to the same altitude after a frequency change."),
    Source(3, "med-1", 1, "factual", "Which symptoms are commonly associated with pheochromocytoma?",
           "Symptoms include high blood pressure, headache, rapid heartbeat, and sweating."),
    Source(4, "log-1", 1, "factual", "When does Maria's shift end on Fridays?", "5:30 PM"),
]


@pytest.mark.parametrize("src", SOURCES, ids=lambda s: s.external_id)
def test_every_kind_is_made_with_its_label_and_none_is_a_refusal(src):
    cases = na.build_cases(src)
    assert [c.kind for c in cases] == list(na.KINDS) and {c.true_label for c in cases} == {"incomplete"}
    for c in cases:
        assert c.answer.strip() and not jd.is_refusal(c.answer), c.answer
        # a lenient judge's "correct" does not survive the rules
        assert jd.apply_gate(jd.Gate(), "correct", src.question, src.answer, c.answer) == "incomplete", c.answer
        assert jd.apply_gate(jd.Gate(figures=False), "correct", src.question, src.answer, c.answer) == "correct"


def test_the_question_is_restated_echoed_and_quoted():
    src = SOURCES[3]
    got = {c.kind: c.answer for c in na.build_cases(src)}
    assert got["restated_question"] == "When does Maria's shift end on Fridays."
    assert got["echoed_question"].startswith("Regarding Maria's shift end on Fridays,")
    assert "'When does Maria's shift end on Fridays?'" in got["echoed_gold_question"]
    assert got["generic_nonanswer"] in na.GENERIC


def test_a_question_marked_unanswerable_yields_none():
    src = Source(5, "u1", 1, "factual", "What colour is Maria's car?", "", unanswerable=True)
    assert na.build_cases(src) == []
