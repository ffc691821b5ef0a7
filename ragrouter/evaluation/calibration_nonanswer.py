"""Non-answers as calibration cases: answers that add nothing to the question (label known by construction).

A small judge called answers "correct" that only restate the question ("The information on legal
contingencies … correlates with the financial reserves set aside for these liabilities.", with
the reason "matches the gold answer exactly"). This family measures that: from an answerable
source (:class:`~ragrouter.evaluation.calibration_cases.Source`) it makes, by fixed rules and no
LLM, answers that give none of the gold's content, each of true label ``incomplete`` — a
non-answer, as a refusal is (the judge prompt's label for an answer that does not give the
answer):

    ``restated_question``     the question itself, as a statement ("When does Maria's shift end
                              on Fridays.").
    ``echoed_question``       the question's subject with a generic claim ("Regarding Maria's
                              shift end on Fridays, the information matches what the records
                              describe.").
    ``echoed_gold_question``  the question quoted as answered by the sources ("The answer to
                              'When does …?' is the one the provided documents give.").
    ``topic_only``            what the question is about, and nothing else ("The answer relates
                              to Maria's shift end on Fridays.").
    ``generic_nonanswer``     a generic sentence that fits any question (:data:`GENERIC`,
                              picked by a stable hash).

Limits: the answers come from templates, so they are easier to recognise than a model's own
non-answers; the restatement check (:mod:`ragrouter.evaluation.restatement`) was written
knowing these templates, so its score on this family is an upper bound. None of them is a
refusal by :func:`ragrouter.evaluation.judge.is_refusal` (the refusal rule would decide it
without the model). The family is not part of ``judge calibrate``'s default case set (its
figures would move); ``benchmarks/bench_judge_nonanswer.py`` judges it.
"""

from __future__ import annotations

import re

from ragrouter.evaluation.calibration_cases import Case, CaseKind, Pool, Source, _pick

VERSION = "nonanswer-v1"
"""Construction version of the family (a case set of its own)."""

GENERIC = (
    "It depends on several factors described in the documents.",
    "This is an important aspect that the provided information discusses in detail.",
    "The relevant details are covered in the corresponding section of the records.",
    "The information given addresses this point directly and clearly.",
)

_LEAD = re.compile(r"^(?:what|when|where|which|who|whom|whose|why|how(?:\s+(?:much|many|long|often|far))?)"
                   r"(?:\s+(?:is|are|was|were|does|do|did|has|have|had|can|could|will|would|should))?\s+", re.I)


def _statement(question: str) -> str:
    return question.strip().rstrip("?").strip()


def _subject(question: str) -> str:
    """The question without its wh-word and auxiliary ("Maria's shift end on Fridays")."""
    statement = _statement(question)
    rest = _LEAD.sub("", statement)
    if rest != statement:  # a word after the wh-word keeps its capital: it is a name ("Maria's")
        return rest
    return rest[:1].lower() + rest[1:] if rest[:1].isupper() and rest[1:2].islower() else rest


def make_restated_question(src: Source, pool: Pool) -> tuple[str, str]:
    return _statement(src.question) + ".", "the question as a statement"


def make_echoed_question(src: Source, pool: Pool) -> tuple[str, str]:
    return (f"Regarding {_subject(src.question)}, the information matches what the records describe.",
            "the question's subject with a generic claim")


def make_echoed_gold_question(src: Source, pool: Pool) -> tuple[str, str]:
    return (f"The answer to '{src.question.strip()}' is the one the provided documents give.",
            "the question quoted as answered by the sources")


def make_topic_only(src: Source, pool: Pool) -> tuple[str, str]:
    return f"The answer relates to {_subject(src.question)}.", "what the question is about, nothing else"


def make_generic(src: Source, pool: Pool) -> tuple[str, str]:
    out = _pick(GENERIC, "generic:" + src.external_id)
    return out, f"generic sentence '{out}'"


KINDS: dict[str, CaseKind] = {
    "restated_question": CaseKind("restated_question", "incomplete", make_restated_question,
                                  "the question itself as a statement"),
    "echoed_question": CaseKind("echoed_question", "incomplete", make_echoed_question,
                                "the question's subject with a generic claim"),
    "echoed_gold_question": CaseKind("echoed_gold_question", "incomplete", make_echoed_gold_question,
                                     "the question quoted as answered by the sources"),
    "topic_only": CaseKind("topic_only", "incomplete", make_topic_only, "what the question is about, nothing else"),
    "generic_nonanswer": CaseKind("generic_nonanswer", "incomplete", make_generic,
                                  "a generic sentence that fits any question"),
}


def build_cases(src: Source, pool: Pool | None = None) -> list[Case]:
    """The family's cases of an answerable source (none for a question marked unanswerable, whose
    right answer is a refusal)."""
    if src.unanswerable or not src.answer.strip():
        return []
    out = []
    for kind in KINDS.values():
        answer, rule = kind.make(src, pool)
        out.append(Case(src.id, kind.kind, kind.true_label, answer, rule))
    return out
