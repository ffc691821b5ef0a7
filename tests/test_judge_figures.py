"""The figures rule over a judge's verdict (ragrouter/evaluation/precision.py and figures_read.py):
a "correct" verdict whose answer lacks a figure of the gold at the gold's precision becomes
"incomplete"; nothing else changes."""

import pytest

from ragrouter.evaluation import judge as jd
from ragrouter.evaluation.precision import Outcome, apply_figures, figures, judge_figures, missing_figures


@pytest.mark.parametrize("text, expected", [
    ("5:30 PM", {"t05:30pm"}), ("at 5 PM", {"t05:00pm"}), ("17:30", {"t05:30pm"}), ("five thirty pm", {"t05:30pm"}),
    ("5.30 pm", {"t05:30pm"}),  # was read as "30 pm" = 6:00
    ("half past five", {"t05:30"}), ("a quarter to ten in the evening", {"t09:45pm"}), ("noon", {"t00:00pm"}),
    ("the 1990s", {"y1990-1999"}), ("1994-03-05", {"d1994-03-05"}), ("March 5, 1994", {"d1994-03-05"}),
    ("3 May 1994", {"d1994-05-03"}), ("the 5th of March", {"d?-03-05"}), ("March 2020", {"d2020-03-00"}),
    ("03/05/1994", {"d1994-03-05|1994-05-03"}),  # day/month ambiguous: both readings kept
    ("14/03/2024.", {"d2024-03-14"}),
    ("2.5 million", {"2500000"}), ("2,500,000", {"2500000"}), ("two million people", {"2000000"}),
    ("$82,959 million", {"8.2959e+10 money usd"}), ("25%", {"0.25 ratio"}), ("a third", {"0.333333 ratio"}),
    ("3.14", {"3.14"}), ("twenty-five", {"25"}), ("No figures here.", set()),
    ("It may rain.", set()),  # "may" the verb is not a month
    ("1. Surgery\n2. Radiation", set()), ("1) surgery; 2) radiation", set()),  # list numbering is no figure
    ("The answer is 5. It is small.", {"5"}),
    ("Windows 11", {"n:windows 11"}), ("2019–2021", {"2019", "2021"}), ("1914-18", {"1914", "1918"}),
    ("500 mg", {"0.0005 [mass]"}), ("the fourth floor", {"4"}), ("Q3 2021", {"Q3 2021"}),
])
def test_figures_are_read_as_values(text, expected):
    assert figures(text) == expected


@pytest.mark.parametrize("text", ["5 March 1994", "March 14th, 2024", "the 11th of November, 1918", "2018-06-12",
                                  "14/03/2024", "04/15/2025", "Dec 31, 2025"])
def test_unambiguous_dates_read_as_dateutil_does(text):
    from dateutil import parser

    ref = parser.parse(text.replace("the ", "").replace(" of ", " "), dayfirst=text.startswith("14/"))  # ISO: dateutil would swap it under dayfirst
    assert figures(text) == {f"d{ref.year}-{ref.month:02d}-{ref.day:02d}"}


@pytest.mark.parametrize("gold, answer, label", [
    ("5:30 PM", "At 5 PM.", "incomplete"),                        # a coarser time (the case a reader flagged)
    ("1994", "In the 1990s.", "incomplete"),                       # a coarser year
    ("3.14", "About 3.1.", "incomplete"),                          # fewer decimals
    ("March 2020", "In 2020.", "incomplete"),                      # the month left out
    ("5:30 PM", "At 17:30, right after the meeting ended.", "correct"),  # the same time, extra true detail
    ("2.5 million", "About 2,500,000 people.", "correct"),        # the same figure written otherwise
    ("twelve", "12 of them.", "correct"),
    ("Paris", "The treaty was signed in Paris in 1783.", "correct"),  # no figure in the gold: the model decides
    # the cases the earlier rule misread
    ("6 PM", "At 5.30 pm.", "incomplete"),                         # 5:30 pm is not 6 pm
    ("1994-03-05", "On 3 May 1994.", "incomplete"),                 # day and month swapped
    ("07/04/1976", "4 July 1976", "correct"),                      # an ambiguous gold: either reading states it
    ("$82,959 million", "$82.96 billion", "correct"),              # within rounding
    ("1,204", "About 1,200 patients.", "incomplete"),              # a hedged rounding is coarser
    ("8:15 AM", "8:15 PM", "incomplete"),                          # am/pm both said and different
    ("2 weeks", "14 days", "correct"), ("500 mg", "0.5 g", "correct"), ("12 km", "12 miles", "incomplete"),
    ("40%", "Two fifths.", "correct"), ("Python 3.10", "Python 3.1", "incomplete"),
    ("2019–2021", "It started in 2019.", "incomplete"), ("the 1990s", "In 1994.", "correct"),
])
def test_a_correct_verdict_needs_the_golds_figures(gold, answer, label):
    assert apply_figures("correct", "When was it?", gold, answer) == label


@pytest.mark.parametrize("question, gold, answer, label", [
    # units converted by pint: a conversion is the same figure, another dimension or value is not
    ("By how much was the rate raised?", "25 basis points", "By a quarter of a percentage point.", "correct"),
    ("By how much was the rate raised?", "0.5 percentage points", "50 bps", "correct"),
    ("By how much was the rate raised?", "25 basis points", "By 25 percentage points.", "incomplete"),
    ("What was the yield?", "4.1%", "410 basis points", "correct"),
    ("What dose?", "1 mg", "1000 mcg", "correct"), ("What dose?", "1 mg", "1000 mg", "incomplete"),
    ("What dose?", "200 µg", "0.2 milligrams", "correct"), ("What dose?", "10 mg/kg", "10 mg", "incomplete"),
    ("What dose?", "10 mg/kg", "ten milligrams per kilogram", "correct"),
    ("What dose?", "4 g", "4,000 mg per day", "correct"),          # a daily dose, the frequency in words
    ("How fast?", "120 knots", "120 mph", "incomplete"), ("How fast?", "120 knots", "about 222 km/h", "correct"),
    ("How high?", "FL240", "24,000 feet", "correct"), ("How high?", "10,000 ft", "10,000 m", "incomplete"),
    ("How far?", "3 NM", "3 nautical miles", "correct"), ("How far?", "3 NM", "3 km", "incomplete"),
    ("What was the fever?", "38.5 °C", "38 °C", "incomplete"), ("What was the fever?", "38.5 °C", "101.3 °F", "correct"),
    ("What was the rate?", "5.8 mmol/L", "5.8 mg/dL", "incomplete"),
    # money: scales, ranges, accounting negatives, a table's scale
    ("What range?", "$2.1–2.3 billion", "$2,100 to $2,300 million", "correct"),
    ("What range?", "$2.1–2.3 billion", "About $2.1 billion.", "incomplete"),
    ("What was the result (in thousands)?", "(3,140)", "A loss of $3.14 million.", "correct"),
    ("What was the result (in thousands)?", "(3,140)", "A profit of $3.14 million.", "incomplete"),
    ("What was the result?", "$(725)", "-$725", "correct"),
    # times and quarters
    ("When?", "0915Z", "09:15 UTC", "correct"), ("When?", "21:40 UTC", "9:40 pm UTC", "correct"),
    ("When?", "14:30 UTC", "9:30 am EST", "correct"), ("When?", "14:30 UTC", "10:30 am EST", "incomplete"),
    ("When?", "1605Z", "16:50 UTC", "incomplete"),
    ("Which quarter?", "Q2 FY2023", "the second quarter of fiscal 2023", "correct"),
    ("Which quarter?", "Q2 FY23", "the 2nd quarter of fiscal year 2023", "correct"),
    ("Which quarter?", "Q2 FY2023", "Q2 FY2022", "incomplete"), ("Which quarter?", "Q2 FY2023", "Q3 FY2023", "incomplete"),
    ("Which quarter?", "Q4 FY2021", "the fourth fiscal quarter of 2021", "correct"),
    ("When?", "20:35", "twenty-five to nine in the evening", "correct"), ("When?", "20:35", "8:25 pm", "incomplete"),
    ("When?", "0230Z", "2:30 pm UTC", "incomplete"),                     # a 24-hour time with its zero is a morning one
    ("How often?", "every 8 hours", "three times daily", "correct"), ("How often?", "every 8 hours", "b.i.d.", "incomplete"),
    ("What dose?", "250 mg twice a day", "250 mg every 12 hours", "correct"),
    ("When?", "30 June 2026", "by the end of June 2026", "correct"), ("When?", "29 June 2026", "the end of June 2026", "incomplete"),
    ("What price?", "$3.40", "three dollars and forty cents", "correct"),
    ("How long?", "90 minutes", "an hour and a half", "correct"),
    # a conversion to another scale rounds: two significant digits and a rounding of the gold
    ("What was the result (in thousands)?", "(27,180)", "A loss of about $27.2 million.", "correct"),
    ("What was the result (in thousands)?", "(27,180)", "A loss of about $27 million.", "correct"),
    ("What was the result (in thousands)?", "(27,180)", "A loss of about $30 million.", "incomplete"),
    ("What was the result (in thousands)?", "(27,180)", "A loss of $28.1 million.", "incomplete"),
    ("How much did the margin change?", "-40 bp", "It narrowed by 0.4 percentage points.", "correct"),
    ("How much did the margin change?", "-40 bp", "It widened by 0.4 percentage points.", "incomplete"),
    ("When?", "07:00", "at seven in the morning", "correct"), ("When?", "19:00", "at seven in the morning", "incomplete"),
    ("When?", "April 2019", "2019-04", "correct"), ("Which years?", "2009 to 2010", "2009-10", "correct"),
    ("Which quarter?", "Q1 FY2025", "1Q FY25", "correct"), ("Which quarter?", "Q1 FY2025", "fiscal 2025 first quarter", "correct"),
    ("When?", "16:45", "16h45", "correct"), ("When?", "2025-01-09", "2025/01/09", "correct"),
    ("What dose?", "10 mg/kg/day", "10 mg/kg daily", "correct"), ("What dose?", "10 mg/kg/day", "10 mg/day", "incomplete"),
    ("What burn?", "900 kg per hour", "0.9 tonnes an hour", "correct"), ("What burn?", "900 kg per hour", "900 kg", "incomplete"),
    ("How high?", "31,000 ft", "about 9,450 m", "correct"),       # trailing zeros of a conversion are its rounding
    ("How high?", "31,000 ft", "about 9,000 m", "incomplete"),    # one significant digit is too coarse
    ("What range?", "5–10 mg", "5 to 10 milligrams", "correct"),  # a range, not "five to ten" o'clock
    ("What loss?", "$(0.35) million", "A net loss of $350 thousand.", "correct"),
    ("What dose?", "2 mcg/kg/min", "2 micrograms per kilogram per minute", "correct"),
])
def test_conversions_and_forms_of_analysts_clinicians_and_investigators(question, gold, answer, label):
    assert apply_figures("correct", question, gold, answer) == label


@pytest.mark.parametrize("gold, answer", [
    ("5 March 1994", "03/05/1994"),        # a date that reads day-first and month-first
    ("Q2 FY2023", "Q2 2023"),              # fiscal against a quarter that does not say
    ("14:30 UTC", "9:30 am Eastern"),      # a zone without a fixed offset
    ("145 KXYZ", "150 KXYZ"),              # a unit no library reads
])
def test_the_rule_abstains_when_unsure_and_says_why(gold, answer):
    out = judge_figures("correct", "When or how much?", gold, answer)
    assert out.label == "correct" and out.review and out.review.startswith("figures rule unsure")
    assert apply_figures("correct", "When or how much?", gold, answer) == "correct"
    assert judge_figures("incorrect", "q", gold, answer) == Outcome("incorrect")  # only a "correct" is examined


def test_a_name_with_a_number_is_not_read_as_a_date():
    assert apply_figures("correct", "When was Windows 11 released?", "5 October 2021",
                         "Microsoft released Windows 11 October 5, 2021.") == "correct"


def test_the_rule_meets_its_targets_on_its_test_set():
    """benchmarks/bench_figures.py prints the figures; the targets are ≤ 5 % each (asserted loosely
    here, per split, so that one new hard case does not fail the suite)."""
    from benchmarks.bench_figures import groups, load, measure

    rows = load()
    assert len(rows) >= 100 and {r["split"] for r in rows} == {"dev", "test"}
    assert len({r["domain"] for r in rows}) >= 4
    for name in ("dev", "test", "all"):
        m = measure(groups(rows)[name])
        assert m["false_incomplete"] <= 0.08, (name, m["fi_cases"])
        assert m["false_correct"] <= 0.08, (name, m["fc_cases"])
    overall = measure(rows)
    assert overall["false_incomplete"] <= 0.05 and overall["false_correct"] <= 0.05


def test_the_held_out_batches_stay_within_the_targets():
    """benchmarks/data/figures_heldout.jsonl: three batches written before the rule was changed after
    them (their first measurements are in benchmarks/docs/figures-rule.md); measured here so that a
    change that breaks them is seen."""
    from benchmarks.bench_figures import HELDOUT, load, measure

    rows = load(HELDOUT)
    assert len(rows) >= 140 and {r["domain"] for r in rows} == {"finance", "medicine", "aviation", "dates"}
    m = measure(rows)
    assert m["false_incomplete"] <= 0.05 and m["false_correct"] <= 0.05, (m["fi_cases"], m["fc_cases"])


def test_a_bad_case_file_names_the_line(tmp_path):
    from benchmarks.bench_figures import load

    path = tmp_path / "cases.jsonl"
    path.write_text('{"id": "a", "split": "dev", "domain": "x", "question": "q", "gold": "1", "answer": "1", '
                    '"verdict": "correct"}\n{"id": "b", "verdict": "right"}\n')
    with pytest.raises(ValueError, match=r"cases\.jsonl line 2: needs"):
        load(path)


def test_other_verdicts_pass_and_figures_the_question_gives_are_not_required():
    assert apply_figures("incorrect", "q", "5:30 PM", "5 PM") == "incorrect"
    assert apply_figures("incomplete", "q", "5:30 PM", "5:30 PM") == "incomplete"
    # the question already names 1990: an answer need not repeat it
    assert missing_figures("What happened in 1990?", "In 1990 the wall fell.", "The wall fell.") == set()
    assert apply_figures("correct", "What happened in 1990?", "In 1990 the wall fell.", "The wall fell.") == "correct"


def test_long_golds_are_left_to_the_judge():
    summary = ("Treatment depends on the stage: early disease is treated with surgery alone and follow-up "
               "visits occur every 3 months for 2 years.")
    assert missing_figures("How is it treated?", summary, "Surgery alone for early disease.") == {"7889400 [time]", "63115200 [time]"}  # 3 months, 2 years in seconds (pint's Julian year)
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


@pytest.mark.parametrize("question,gold,answer,label", [
    # a fixed offset written after a time is that offset, not the zone's name alone
    ("At what time did the tower lose contact?", "2147 UTC", "Contact was lost at 9:47 pm local time (UTC+2).",
     "incomplete"),
    ("At what time did the tower lose contact?", "1947 UTC", "Contact was lost at 21:47 (UTC+2).", "correct"),
    ("When did the call start?", "19:30 UTC", "It started at 2:30 pm (GMT-05:00).", "correct"),
    # a spoken hour that text2num keeps as a word
    ("At what time did the meeting start?", "14:30", "It started at half past two in the afternoon.", "correct"),
    ("At what time did the meeting start?", "half past two in the afternoon", "It started at 2:45 pm.", "incomplete"),
    ("When does the pharmacy close?", "12:45", "At a quarter to one.", "correct"),
    # a conversion against a gold rounded by its trailing zeros, and an answer's own trailing zero
    ("How much fuel remained?", "1,200 lb", "About 545 kg of fuel remained.", "correct"),
    ("How much fuel remained?", "1,290 lb", "About 545 kg of fuel remained.", "incomplete"),
    ("How much weight did she lose?", "4.5 kg", "She lost about ten pounds.", "correct"),
    ("How much weight did she lose?", "4.5 kg", "She lost about eleven pounds.", "incomplete"),
    ("What was the cruise altitude?", "30,000 ft", "About 9,500 m.", "incomplete"),
])
def test_offsets_spoken_hours_and_rounded_conversions(question, gold, answer, label):
    assert apply_figures("correct", question, gold, answer) == label
