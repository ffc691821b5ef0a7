"""is_refusal: whole-answer refusals are labelled incomplete without a judge call (App. C.1,
Figure 17: "incomplete" = the answer says it cannot answer / lacks the information); an
answer that states something besides a refusal clause goes to the judge model."""

import pytest

from ragrouter.evaluation import judge as jd

# real: the demo stores' (/work/prev, /work/main) only refusal, written by the local Qwen
# models in paradigm_runs, and the calibration case set's refusals (calibration_cases.REFUSALS)
REFUSALS = [
    "I cannot answer this question based on the given information.",  # real, paradigm_runs
    "I cannot answer",
    "I don't know.",
    "",
    "   ",
    "Unknown.",
    "The provided context does not contain enough information to answer the question.",
    "There is no information about the Treaty of Ghent in the context.",
    "Based on the given context, I cannot determine when the treaty was signed.",
    "The context does not mention the side effects of imiquimod.",
    "I'm sorry, but the provided documents do not specify the dosage.",
    "Unfortunately, the context is insufficient to answer this question.",
    "The given information doesn't say who founded the company. Please provide more context.",
    "It is not possible to determine the answer from the provided context.",
    "According to the context, there is not enough information to answer.",
    "I do not have enough information to answer this question.",
    "The question cannot be answered from the retrieved passages.",
    "Sorry. I can't find the answer in the context.",
]

ANSWERS = [
    "Based on the context, surgery is the most common treatment for basal cell skin cancer lesions "
    "on sun-exposed areas.",  # real, paradigm_runs (a lead-in, then a fact)
    "The hierarchical classification of CSCC within the broader context of skin cancers is: "
    "1. Squamous cell skin cancer 2. Cutaneous squamous cell carcinoma (CSCC)",  # real
    "Paris. The context does not say more.",
    "Paris.",
    "The liver.",
    "The context does not give the year, but the treaty was signed in Paris.",
    "I don't know, but I think it is Paris.",
    "The context mentions that the treaty was signed in Ghent.",
    "Unknown causes account for 10% of cases.",
    "Surgery is the standard treatment. There is no information about radiation in the context.",
    "I cannot determine the exact year. However, the context says it was in the 1810s.",
    "No. The drug is not approved for children.",
    "There is evidence that UV exposure is the main risk factor.",
    "The provided context describes surgery as the first-line treatment.",
]


@pytest.mark.parametrize("answer", REFUSALS)
def test_refusals_are_caught(answer):
    assert jd.is_refusal(answer)


@pytest.mark.parametrize("answer", ANSWERS)
def test_answers_with_content_are_not_refusals(answer):
    assert not jd.is_refusal(answer)


def test_calibration_refusals_are_all_caught():
    from ragrouter.evaluation.calibration_cases import REFUSALS as CASES

    assert all(jd.is_refusal(a) for a in CASES)


def test_the_changed_rule_is_a_new_judge_key():
    # the rule decides which runs get "incomplete" without a call: a new prompt version
    assert jd.PROMPT_VERSION == "judge-v4"
    assert jd.judge_key("b", gate=jd.Gate(figures=False)) == "b/judge-v4"
    assert jd.judge_key("b", gate=jd.Gate(True, 0.5, figures=False)) == "b/judge-v4/gate-f1-0.5"
