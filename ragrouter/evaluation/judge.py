"""LLM-as-a-judge (paper §3.4, App. C.1, Figure 17): a ternary label and its reason.

correct — the answer reaches the gold answer's conclusion; incorrect — it contradicts the
gold answer; incomplete — partly right but missing critical detail, or a refusal such as
"I cannot answer". Only the conclusion is judged, not the style.

A refusal (:func:`is_refusal`) is labelled incomplete by the judge stage without a model call:
it is the prompt's own rule, and no local judge applied it (benchmarks/README.md, judge
calibration).
"""

from __future__ import annotations

import re

PROMPT_VERSION = "judge-v2"  # v2: reason capped at one short sentence (a cut reply is unusable)
LABELS = ("correct", "incorrect", "incomplete")

SYSTEM = (
    "You grade an answer against a gold answer. Judge only whether the answer's conclusion "
    "matches the gold answer, not its style or length. Labels: "
    "'correct' = it states the gold answer's key information without contradicting it; "
    "'incorrect' = it contradicts the gold answer or states a different answer; "
    "'incomplete' = it is partly right but misses critical information, or it refuses or says "
    "it cannot answer. Return JSON {\"label\": \"correct|incorrect|incomplete\", \"reason\": \"one short sentence\"}."
)

SCHEMA = {
    "type": "object",
    # the label first; the reason capped (llama.cpp enforces maxLength in its grammar): the 0.5B
    # judge otherwise rambled past max_tokens in 1 reply of 6, and a cut reply is unusable
    "properties": {"label": {"type": "string", "enum": list(LABELS)}, "reason": {"type": "string", "maxLength": 200}},
    "required": ["label", "reason"],
}

_REFUSAL = re.compile(r"^\s*(i\s+cannot\s+answer|i\s+can'?t\s+answer|i\s+don'?t\s+know|unknown)\b", re.I)


def messages(question: str, gold: str, answer: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Question: {question}\n\nGold answer: {gold}\n\n"
                                        f"Answer to grade: {answer}\n\nReturn the JSON now."}]


def is_refusal(answer: str) -> bool:
    """An empty answer or one that opens with a refusal ("I cannot answer", …)."""
    return not answer.strip() or bool(_REFUSAL.match(answer))


def parse_label(data) -> tuple[str, str]:
    """(label, reason) from the judge's JSON; raises ValueError when there is no valid label."""
    if not isinstance(data, dict):
        raise ValueError("judge reply is not a JSON object")
    label = str(data.get("label", "")).strip().lower()
    if label not in LABELS:
        raise ValueError(f"judge label {label!r} is not one of {', '.join(LABELS)}")
    return label, str(data.get("reason", ""))[:2000]


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
