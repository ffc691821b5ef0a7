"""The figures rule over a judge's verdict (ragrouter/evaluation/precision.py, issue 30 item 3):
a "correct" verdict whose answer lacks a figure of the gold at the gold's precision becomes
"incomplete"; nothing else changes."""

import pytest

from ragrouter.evaluation import judge as jd
from ragrouter.evaluation.precision import apply_figures, figures, missing_figures


@pytest.mark.parametrize("text, expected", [
    ("5:30 PM", {"t05:30"}), ("at 5 PM", {"t05:00"}), ("17:30", {"t05:30"}), ("five thirty pm", {"t05:30"}),
    ("the 1990s", {"1990"}), ("1994-03-05", {"1994", "3", "5"}), ("March 5, 1994", {"1994", "3", "5"}),
    ("2.5 million", {"2500000"}), ("2,500,000", {"2500000"}), ("two million people", {"2000000"}),
    ("25%", {"25"}), ("3.14", {"3.14"}), ("twenty-five", {"25"}), ("No figures here.", set()),
    ("It may rain.", set()),  # "may" the verb is not a month
    ("1. Surgery\n2. Radiation", set()), ("1) surgery; 2) radiation", set()),  # list numbering is no figure
    ("The answer is 5. It is small.", {"5"}),
])
def test_figures_are_read_as_values(text, expected):
    assert figures(text) == expected


@pytest.mark.parametrize("gold, answer, label", [
    ("5:30 PM", "At 5 PM.", "incomplete"),                        # a coarser time (the case a reader flagged)
    ("1994", "In the 1990s.", "incomplete"),                       # a coarser year
    ("3.14", "About 3.1.", "incomplete"),                          # fewer decimals
    ("March 2020", "In 2020.", "incomplete"),                      # the month left out
    ("5:30 PM", "At 17:30, right after the meeting ended.", "correct"),  # the same time, extra true detail
    ("2.5 million", "About 2,500,000 people.", "correct"),        # the same figure written otherwise
    ("twelve", "12 of them.", "correct"),
    ("Paris", "The treaty was signed in Paris in 1783.", "correct"),  # no figure in the gold: the model decides
])
def test_a_correct_verdict_needs_the_golds_figures(gold, answer, label):
    assert apply_figures("correct", "When was it?", gold, answer) == label


def test_other_verdicts_pass_and_figures_the_question_gives_are_not_required():
    assert apply_figures("incorrect", "q", "5:30 PM", "5 PM") == "incorrect"
    assert apply_figures("incomplete", "q", "5:30 PM", "5:30 PM") == "incomplete"
    # the question already names 1990: an answer need not repeat it
    assert missing_figures("What happened in 1990?", "In 1990 the wall fell.", "The wall fell.") == set()
    assert apply_figures("correct", "What happened in 1990?", "In 1990 the wall fell.", "The wall fell.") == "correct"


def test_long_golds_are_left_to_the_judge():
    summary = ("Treatment depends on the stage: early disease is treated with surgery alone and follow-up "
               "visits occur every 3 months for 2 years.")
    assert missing_figures("How is it treated?", summary, "Surgery alone for early disease.") == {"3", "2"}
    assert apply_figures("correct", "How is it treated?", summary, "Surgery alone for early disease.") == "correct"


def test_the_rule_is_part_of_the_judgment_key_and_can_be_turned_off():
    assert jd.judge_key("b") == "b/judge-v4/figures"
    assert jd.judge_key("b", gate=jd.Gate(figures=False)) == "b/judge-v4"
    assert jd.judge_key("b", gate=jd.Gate(True, 0.5)) == "b/judge-v4/figures/gate-f1-0.5"
    assert jd.apply_gate(jd.Gate(), "correct", "When?", "5:30 PM", "5 PM") == "incomplete"
    assert jd.apply_gate(jd.Gate(figures=False), "correct", "When?", "5:30 PM", "5 PM") == "correct"


def test_a_bad_setting_names_it(tmp_path):
    from ragrouter.config import Config, ConfigError

    path = tmp_path / "c.yaml"
    path.write_text("judge:\n  figures: maybe\n")
    with pytest.raises(ConfigError, match=r"c\.yaml line 2: setting 'judge\.figures' has the wrong type"):
        jd.gate_from_config(Config.load(path))
