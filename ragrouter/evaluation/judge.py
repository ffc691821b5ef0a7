"""LLM-as-a-judge (paper §3.4, App. C.1, Figure 17): a ternary label and its reason.

correct — the answer reaches the gold answer's conclusion at least as precisely as the gold
(extra true detail is fine); incorrect — it contradicts the gold answer or states a different
one; incomplete — partly right but less precise than the gold or missing part of it, or a
refusal such as "I cannot answer". Only the conclusion is judged, not the style.

Rules applied without a model call (:func:`rule_verdict`), by the judge stage and the
calibration stage alike:

* a refusal (:func:`is_refusal`) on an answerable question is incomplete — the prompt's own
  rule, which no local judge applied (benchmarks/README.md, judge calibration);
* on a question marked unanswerable (``queries.unanswerable``) a refusal is correct and any
  other answer incorrect, recorded as a hallucination (:data:`HALLUCINATION_REASON`,
  ``judgments.refusal`` false; ``v_run_judged.hallucination``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

from ragrouter.config import ConfigError
from ragrouter.evaluation.precision import judge_figures
from ragrouter.evaluation.restatement import restates
from ragrouter.evaluation.words import content_words

PROMPT_VERSION = "judge-v4"  # v2: reason capped at one short sentence (a cut reply is unusable);
#   v3: is_refusal catches whole-answer refusals, not only answers opening with "I cannot answer"
#   (it decides which runs are labelled incomplete without a call, so stored labels can differ);
#   v4: precision — a less precise answer ("5 PM" for "5:30 PM") is not correct, extra true detail
#   does not make a right answer wrong; questions marked unanswerable judged by rule (issue 30)
LABELS = ("correct", "incorrect", "incomplete")

SYSTEM = (
    "You grade an answer against a gold answer. Judge only whether the answer's conclusion "
    "matches the gold answer, not its style or length. Labels: "
    "'correct' = it states the gold answer's key information at least as precisely as the gold "
    "does and contradicts nothing in it; extra true detail beyond the gold does not make it wrong; "
    "'incomplete' = it is partly right but less precise than the gold (for example '5 PM' for a "
    "gold of '5:30 PM', 'the 1990s' for '1994', 'a dog' for 'a beagle') or leaves out part of what "
    "the gold requires, or it refuses or says it cannot answer; "
    "'incorrect' = it contradicts the gold answer or states a different answer. "
    "Return JSON {\"label\": \"correct|incorrect|incomplete\", \"reason\": \"one short sentence\"}."
)

REFUSAL_REASON = "the answer is a refusal (labelled without a judge call)"
"""The reason of a refusal on an answerable question (incomplete; the text is also what
``v_judgment`` reads on rows written before ``judgments.refusal`` existed)."""
UNANSWERABLE_REFUSAL_REASON = "a refusal on a question marked unanswerable (labelled without a judge call)"
HALLUCINATION_REASON = ("hallucination: an answer other than a refusal to a question marked unanswerable "
                        "(labelled without a judge call)")

SCHEMA = {
    "type": "object",
    # the label first; the reason capped (llama.cpp enforces maxLength in its grammar): the 0.5B
    # judge otherwise rambled past max_tokens in 1 reply of 6, and a cut reply is unusable
    "properties": {"label": {"type": "string", "enum": list(LABELS)}, "reason": {"type": "string", "maxLength": 200}},
    "required": ["label", "reason"],
}

# A refusal is an answer whose every sentence is a refusal clause (it says the context or the
# information is insufficient, or that it cannot answer) or filler (an apology, a request for
# more context), with at least one refusal clause. An answer that states anything else
# ("Paris. The context does not say more.", "The context does not give the year, but the
# treaty was signed in Paris.") is not a refusal: the judge model grades it.
_LEAD_IN = re.compile(
    r"^(?:(?:unfortunately|sorry|i'?m\s+sorry|i\s+am\s+sorry|i\s+apologi[sz]e|apologies)\s*(?:,\s*but\b|,|but\b)?\s*"
    r"|(?:based\s+on|according\s+to|from|given|in)\s+(?:the\s+)?(?:provided\s+|given\s+|available\s+|retrieved\s+)?"
    r"(?:context|information|text|passages?|documents?|sources?)(?:\s+(?:provided|given))?\s*,?\s*)+", re.I)
_SOURCE = (r"(?:the\s+|this\s+|these\s+)?(?:provided\s+|given\s+|available\s+|retrieved\s+|supplied\s+)?"
           r"(?:context|information|text|passages?|documents?|sources?|excerpts?|data"
           r"|(?:chat\s+)?logs?|records?|messages?|conversations?|notes)")
_REFUSAL = re.compile(
    r"^(?:i\s+(?:cannot|can\s*not|can'?t|am\s+unable\s+to|am\s+not\s+able\s+to|do\s+not|don'?t|could\s+not|couldn'?t)\s+"
    r"(?:answer|determine|find|tell|say|know|provide|identify|infer|confirm|give|locate|be\s+sure)"
    r"|i\s+(?:do\s+not|don'?t)\s+have\s+(?:enough\s+|sufficient\s+|any\s+)?(?:information|data|details|context)"
    r"|not\s+enough\s+information|insufficient\s+(?:information|context|data)|no\s+(?:relevant\s+)?information"
    r"|(?:there\s+is|there'?s)\s+(?:no|not\s+enough|insufficient)\s+(?:relevant\s+)?(?:information|mention|data|details|evidence|context)"
    rf"|{_SOURCE}\s+(?:does\s+not|doesn'?t|do\s+not|don'?t|did\s+not|didn'?t)\s+"
    r"(?:contain|provide|mention|include|specify|say|state|give|offer|have|discuss|address|describe|explain|indicate|tell|cover|answer|allow)"
    rf"|{_SOURCE}\s+(?:is|are)\s+(?:insufficient|not\s+sufficient|not\s+enough|silent)"
    rf"|{_SOURCE}\s+(?:lacks?|makes\s+no\s+mention)"
    r"|(?:it\s+is|it'?s)\s+(?:not\s+possible|impossible|unclear|not\s+clear)\s+(?:to\s+(?:determine|answer|tell|say|know)|from)"
    r"|(?:the|this)\s+question\s+cannot\s+be\s+answered|(?:this|that|it)\s+cannot\s+be\s+(?:determined|answered)"
    r"|cannot\s+(?:be\s+)?(?:determined|answered|answer))\b|^(?:unknown|n/?a)\W*$", re.I)
_CONTRAST = re.compile(r"(?:,|;|\s)\s*(?:but|however|although|though|yet|nevertheless|instead)\b", re.I)
_FILLER = re.compile(
    r"^(?:(?:i'?m\s+|i\s+am\s+)?sorry|i\s+apologi[sz]e|apologies|unfortunately"
    r"|(?:please|could\s+you|can\s+you|if\s+you)\b.*\b(?:provide|share|give|clarify)\b.*"
    r"|i\s+(?:would|'d)\s+be\s+happy\s+to\s+help.*)\W*$", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def messages(question: str, gold: str, answer: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: {question}\n\nGold answer: {gold}\n\n"
                                        f"Answer to grade: {answer}\n\nReturn the JSON now."}]


def _is_refusal_clause(sentence: str) -> bool:
    rest = _LEAD_IN.sub("", sentence.strip())
    m = _REFUSAL.match(rest)
    return bool(m) and not _CONTRAST.search(rest[m.end():])


def is_refusal(answer: str) -> bool:
    """An empty answer, or one whose content is only a refusal: every sentence says the
    context/information is insufficient or that it cannot answer ("The provided context does
    not contain enough information to answer …", "Based on the given context, I cannot
    determine …"), possibly with a short lead-in or an apology. An answer that states anything
    else beside such a clause is not a refusal (App. C.1: "incomplete" = it says it cannot
    answer / lacks the information)."""
    text = answer.strip()
    if not text:
        return True
    sentences = [s for s in _SENTENCE.split(text) if s.strip(" \t.!?-*\"'")]
    if not sentences:
        return True
    refusal = [_is_refusal_clause(s) for s in sentences]
    return any(refusal) and all(r or _FILLER.match(s.strip()) for r, s in zip(refusal, sentences))


def parse_label(data) -> tuple[str, str]:
    """(label, reason) from the judge's JSON; raises ValueError when there is no valid label."""
    if not isinstance(data, dict):
        raise ValueError("judge reply is not a JSON object")
    label = str(data.get("label", "")).strip().lower()
    if label not in LABELS:
        raise ValueError(f"judge label {label!r} is not one of {', '.join(LABELS)}")
    return label, str(data.get("reason", ""))[:2000]


@dataclasses.dataclass(frozen=True)
class RuleVerdict:
    """A label decided without a model call (:func:`rule_verdict`)."""

    label: str
    reason: str
    refusal: bool


def rule_verdict(answer: str, unanswerable: bool = False) -> RuleVerdict | None:
    """The label the rules give without a model call, or None when the judge model decides.

    * question marked unanswerable: a refusal is correct; anything else is incorrect and
      recorded as a hallucination (the gold is "no answer": nothing else can match it);
    * answerable question: a refusal is incomplete (App. C.1); otherwise None.
    """
    refusal = is_refusal(answer)
    if unanswerable:
        if refusal:
            return RuleVerdict("correct", UNANSWERABLE_REFUSAL_REASON, True)
        return RuleVerdict("incorrect", HALLUCINATION_REASON, False)
    if refusal:
        return RuleVerdict("incomplete", REFUSAL_REASON, True)
    return None


# --------------------------------------------------------------------------- the evidence gate

@dataclasses.dataclass(frozen=True)
class Gate:
    """The rules over the model's verdict. The figures rule (``judge.figures``, on by default;
    :mod:`ragrouter.evaluation.precision`): a "correct" verdict becomes "incomplete" when the
    answer lacks a figure of the gold at the gold's precision ("5 PM" for "5:30 PM"); where it
    cannot compare a figure with confidence it leaves the verdict and marks the judgment for a
    person's review. With it (the same setting) the restatement check
    (:mod:`ragrouter.evaluation.restatement`): an answer that only restates the question and
    shares nothing with the gold cannot be "correct" (it becomes "incomplete").

    The evidence gate (``judge.gate``): a "correct" verdict stands only when the answer
    shares a content word with the gold answer that the question does not already give, or
    when its semantic F1 against the gold is at least ``min_semantic_f1``; otherwise it
    becomes "incorrect". "incorrect" and "incomplete" verdicts pass unchanged.

    It is a rule over the model's verdict, not part of the request: the model call (and its
    cache entry) is the same with and without it, so changing the gate re-derives labels
    without asking the model again. Its setting is part of the judgment key
    (:func:`judge_key`), and the model's own verdict is kept as ``judgments.raw_label``."""

    enabled: bool = False
    min_semantic_f1: float = 0.5
    figures: bool = True

    @property
    def tag(self) -> str:
        parts = (["figures"] if self.figures else []) + ([f"gate-f1-{self.min_semantic_f1:g}"] if self.enabled else [])
        return "/".join(parts)


def gate_from_config(config) -> Gate:
    sec = config.get("judge.gate", {}) or {}
    if not isinstance(sec, dict):
        raise ConfigError(f"{config.source}: setting 'judge.gate' must be a mapping (enabled, min_semantic_f1)")
    thr = float(sec.get("min_semantic_f1", 0.5))
    if not 0.0 <= thr <= 1.0:
        raise ConfigError(f"{config.source}: setting 'judge.gate.min_semantic_f1' must lie in [0, 1] (got {thr})")
    return Gate(enabled=bool(sec.get("enabled", False)), min_semantic_f1=thr,
                figures=bool(config.get("judge.figures", True)))  # a bool: the config schema checks it


def judge_key(backend: str, config=None, gate: Gate | None = None) -> str:
    """The ``judgments.judge`` value of a judge: backend, prompt version and gate, e.g.
    ``local-qwen-1.5b/judge-v4/figures`` or ``local-qwen-1.5b/judge-v4/figures/gate-f1-0.5``. A new prompt
    or gate setting is a new judge (its labels are made beside the old ones; the model calls
    they need are cache hits when the prompt is unchanged)."""
    if gate is None:
        gate = gate_from_config(config) if config is not None else Gate()
    return "/".join(p for p in (backend, PROMPT_VERSION, gate.tag) if p)


def key_backend(key: str) -> str:
    """The backend name of a judgment key (a key without '/' is a bare backend name)."""
    return key.split("/", 1)[0]


def evidence_words(question: str, gold: str) -> set[str]:
    """Content words of the gold answer that the question does not contain (all of the
    gold's content words when the question contains every one)."""
    g = content_words(gold)
    return (g - content_words(question)) or g


def shares_evidence(question: str, gold: str, answer: str) -> bool:
    return bool(content_words(answer) & evidence_words(question, gold))


@dataclasses.dataclass(frozen=True)
class Gated:
    """A verdict after the rules: its label, and why a person should review it (the figures rule
    abstained), else None."""

    label: str
    review: str | None = None


def gate_outcome(gate: Gate, label: str, question: str, gold: str, answer: str,
                 semantic_f1: Callable[[], float] | float | None = None) -> Gated:
    """The verdict after the rules of ``gate`` (see :class:`Gate`), with the figures rule's
    reason for a review when it abstained."""
    review = None
    if gate.figures:
        if label == "correct" and restates(question, gold, answer):
            return Gated("incomplete")
        out = judge_figures(label, question, gold, answer)
        label, review = out.label, out.review
    if not gate.enabled or label != "correct" or shares_evidence(question, gold, answer):
        return Gated(label, review)
    f1 = semantic_f1() if callable(semantic_f1) else semantic_f1
    if f1 is not None and float(f1) >= gate.min_semantic_f1:
        return Gated(label, review)
    return Gated("incorrect")


def apply_gate(gate: Gate, label: str, question: str, gold: str, answer: str,
               semantic_f1: Callable[[], float] | float | None = None) -> str:
    """The gated label of a verdict. ``semantic_f1`` (a value or a zero-argument function,
    called only when needed) is the answer's semantic F1 against the gold."""
    return gate_outcome(gate, label, question, gold, answer, semantic_f1).label


def majority(labels: list[str]) -> tuple[str, float]:
    """The majority label of repeated judgments and its agreement share.

    Ties go to the worse label (incorrect < incomplete < correct): a judge that cannot make
    up its mind does not get to call an answer correct."""
    if not labels:
        raise ValueError("no labels")
    order = {"incorrect": 0, "incomplete": 1, "correct": 2}
    counts = {lab: labels.count(lab) for lab in set(labels)}
    best = max(counts.values())
    winner = min((lab for lab, c in counts.items() if c == best), key=lambda lab: order[lab])
    return winner, best / len(labels)
