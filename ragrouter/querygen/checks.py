"""Verify-then-filter checks of generated queries (paper App. A.2, Algorithm 2 phase 2).

Each check returns a :class:`CheckResult` (``passed`` plus the ``evidence`` stored in
``query_checks``). Registry :data:`CHECKS`: name → ``(function, uses_llm, applies_to)``.

* ``lexical_leak`` (no LLM): the answer, normalised (NFKC, case-folded, punctuation → space,
  a leading article dropped), occurs as a whole-word phrase in the normalised question →
  fail. An empty answer fails too.
* ``grounding``: the judge role answers from the supporting texts alone
  (:data:`~ragrouter.querygen.prompts.GROUNDED`; a reasoning query with
  :data:`~ragrouter.querygen.prompts.GROUNDED_CHAIN`, which writes who or what each
  description is before the answer — :meth:`Evaluator.reading` — and is asked once more when
  its answer is only one of those entities, :meth:`Evaluator.read`); a verdict
  (:data:`~ragrouter.querygen.prompts.VERDICT`, the evaluation judge's labels) then compares
  that answer with the expected one. Pass only on ``correct`` (Algorithm 2's strict threshold):
  ``incomplete`` or ``incorrect`` — or a refusal, which is ``incomplete`` without a judge
  call — fails.
* ``shortcut`` (reasoning only): the same reader, once per hop with that hop's text alone, in chain
  order; the first hop whose answer is judged ``correct`` is a shortcut → fail.
* ``parametric_leak``: a closed-book answer (:data:`~ragrouter.querygen.prompts.CLOSED_BOOK`)
  judged ``correct`` → fail (the model knows it without retrieval). A refusal passes without
  a judge call.

Verdicts have a similarity precondition (Algorithm 2 compares answers with ``Sim(â, a)``
against a threshold): an answer that shares no content word with the expected answer
(:func:`content_words`: normalised words of 3+ characters or digits, minus stop words, a
plural ``s`` dropped) cannot match it, so it is ``incorrect`` without a judge call. A weak
judge (the 0.5B default) otherwise calls unrelated answers correct — "melanocytes" for
"squamous cells" — which rejects sound queries as parametric leaks. A paraphrase with no
word in common is the price; ``querygen.overlap_gate: false`` turns the gate off.

A verdict whose reply cannot be parsed is asked again with the next sample index (up to
``attempts`` times) before the unit fails: parse failures are not cached, so a unit that
failed on them would pay for the same doomed request on every run.

The lexical post-checks of generation — :func:`names_entities` (a reasoning question names
a bridge entity) and :func:`echoes` (a "question" copied from the prompt's instructions) —
live here too (same normalisation); see :mod:`ragrouter.querygen.generate`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

from ragrouter.evaluation import judge as jd
from ragrouter.llm.backends import GatewayError
from ragrouter.querygen import prompts

PARSE_ERRORS = frozenset({"unparseable_json", "schema_mismatch", "empty_content"})
"""GatewayError reasons of a reply that arrived but was unusable (worth another sample)."""

CHECK_ORDER = ("lexical_leak", "grounding", "shortcut", "parametric_leak")
BRIDGE_LEAK = "bridge_leak"
"""Check name of a reasoning question rejected at generation for naming a bridge entity."""

_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)
_ARTICLE = re.compile(r"^(the|a|an) ")


def normalise(text: str) -> str:
    """NFKC, case-folded, every run of non-word characters → one space, stripped."""
    text = unicodedata.normalize("NFKC", str(text or "")).casefold().replace("_", " ")
    return _NON_WORD.sub(" ", text).strip()


def contains_phrase(haystack: str, phrase: str) -> bool:
    """Whether normalised ``phrase`` occurs in normalised ``haystack`` on word boundaries."""
    h, p = normalise(haystack), normalise(phrase)
    return bool(p) and f" {p} " in f" {h} "


STOP_WORDS = frozenset("""
a an and are as at be been being but by can could did do does for from had has have how if in into is it its
may might must no not of on or our shall should so such than that the their them then there these they this
those to was were what when where which while who whom whose why will with would you your yes also more most
other some any all each only very one two about after before over under between through during both same
""".split())


def content_words(text: str) -> set[str]:
    """Normalised content words of a text (see the module docstring)."""
    out = set()
    for w in normalise(text).split():
        if w in STOP_WORDS or not (w.isdigit() or len(w) >= 3):
            continue
        out.add(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")) else w)
    return out


def names_entities(question: str, names: list[str]) -> list[str]:
    """The entity names (e.g. bridge entities) that ``question`` names, in the given order."""
    return [n for n in names if contains_phrase(question, n)]


def echoes(question: str, instructions: str, n: int = 6) -> bool:
    """Whether ``question`` repeats ``n`` consecutive words of ``instructions`` (a small model
    sometimes returns a rule of the prompt as its "question")."""
    words = normalise(question).split()
    hay = f" {normalise(instructions)} "
    return any(f" {' '.join(words[i:i + n])} " in hay for i in range(len(words) - n + 1))


@dataclass
class CheckResult:
    """A check's decision and its evidence (stored as ``query_checks.evidence``)."""

    passed: bool
    evidence: dict = field(default_factory=dict)


@dataclass
class CheckQuery:
    """What the checks read of a generated query."""

    id: int
    qtype: str
    question: str
    answer: str
    texts: list[str]
    """All supporting texts, in order (one per supporting chunk)."""
    hop_texts: list[str] = field(default_factory=list)
    """Reasoning: one text per hop of the chain (its chunks joined), in chain order."""


class Evaluator:
    """The LLM side of the checks: answers and verdicts from the ``judge`` role.

    ``gateway`` is a :class:`~ragrouter.llm.gateway.Gateway` (or anything with its ``chat``);
    every call goes through its cache and ledger with stage ``validate`` and phase
    ``<check>:answer`` / ``<check>:verdict``."""

    def __init__(self, gateway, *, role: str = "judge", temperature: float = 0.1, max_tokens: int = 300,
                 judge_temperature: float | None = None, attempts: int = 2, overlap_gate: bool = True):
        self.gateway = gateway
        self.role = role
        self.overlap_gate = bool(overlap_gate)
        self.attempts = max(1, int(attempts))
        self.temperature = float(temperature)
        self.judge_temperature = float(temperature if judge_temperature is None else judge_temperature)
        self.max_tokens = int(max_tokens)

    def answer_kwargs(self, phase: str) -> dict:
        return dict(temperature=self.temperature, max_tokens=self.max_tokens, stage="validate", phase=phase)

    def verdict_kwargs(self, phase: str, sample: int = 0) -> dict:
        return dict(temperature=self.judge_temperature, max_tokens=self.max_tokens,
                    json_schema=prompts.VERDICT_SCHEMA, stage="validate", phase=phase, sample=sample)

    def answer(self, messages: list[dict], check: str) -> tuple[str, int]:
        res = self.gateway.chat(self.role, messages, **self.answer_kwargs(f"{check}:answer"))
        return res.text.strip(), res.call_id

    @staticmethod
    def reading(q: CheckQuery, texts: list[str]) -> tuple[list[dict], dict]:
        """The messages that ask the judge to answer ``q`` from ``texts``, and the extra chat
        arguments: a reasoning query is read with :data:`~ragrouter.querygen.prompts.GROUNDED_CHAIN`
        (its hops written before the answer, a JSON reply), any other with ``GROUNDED``."""
        if q.qtype == "reasoning":
            return (prompts.grounded_chain_messages(q.question, texts),
                    {"json_schema": prompts.GROUNDED_CHAIN_SCHEMA})
        return prompts.grounded_messages(q.question, texts), {}

    def read(self, q: CheckQuery, texts: list[str], check: str) -> tuple[str, list[int], dict | None]:
        """The judge's answer to ``q`` from ``texts``: (answer, call ids, what a reasoning reading
        wrote or None). An unparseable JSON reply is asked again (``attempts`` in all), like a verdict.

        A reasoning reading writes its steps, each a description and who or what it is, before
        the answer. When the answer is only one of those entities (:func:`step_entity`), the
        judge has resolved a description and stopped there; it is asked once more
        (:data:`~ragrouter.querygen.prompts.GROUNDED_CHAIN_FOLLOW_UP`, phase ``<check>:follow_up``)
        whether the question asks for something about that entity, and that answer is the
        reading's. Only the judge's own reply decides this, never the expected answer."""
        messages, extra = self.reading(q, texts)
        if not extra:
            answer, call_id = self.answer(messages, check)
            return answer, [call_id], None
        res = self._json_chat(messages, lambda sample: {**self.answer_kwargs(f"{check}:answer"), **extra,
                                                       "sample": sample})
        answer, steps = _reading(res.data)
        out = {"steps": steps}
        call_ids = [res.call_id]
        hit = step_entity(answer, steps)
        if hit is not None:
            follow = prompts.grounded_chain_follow_up(messages, res.text, answer, hit["description"] or q.question)
            again = self._json_chat(follow, lambda sample: {**self.answer_kwargs(f"{check}:follow_up"), **extra,
                                                            "sample": sample})
            call_ids.append(again.call_id)
            out["first_answer"] = answer
            answer, _steps = _reading(again.data)
        return answer, call_ids, out

    def _json_chat(self, messages: list[dict], kwargs_for: Callable[[int], dict]):
        """One JSON reply: a reply that cannot be parsed is asked again with the next sample
        index, ``attempts`` times in all (parse failures are not cached); the last error is raised."""
        for sample in range(self.attempts):
            try:
                return self.gateway.chat(self.role, messages, **kwargs_for(sample))
            except GatewayError as exc:
                if exc.reason not in PARSE_ERRORS or sample + 1 == self.attempts:
                    raise
        raise AssertionError("unreachable")

    def verdict(self, question: str, gold: str, answer: str, check: str) -> tuple[str, str, int | None]:
        """(label, reason, call id); a refusal is 'incomplete' and an answer without a content
        word of the gold answer 'incorrect' (with the gate on), both without a judge call."""
        if jd.is_refusal(answer):
            return "incomplete", "the answer is a refusal", None
        if self.overlap_gate and not content_words(answer) & content_words(gold):
            return "incorrect", "no content word in common with the expected answer", None
        res = self._json_chat(prompts.verdict_messages(question, gold, answer),
                              lambda sample: self.verdict_kwargs(f"{check}:verdict", sample))
        label, reason = jd.parse_label(res.data)
        return label, reason, res.call_id


_VERSIONS = {name: f"{prompts.PROMPTS[name].version}+{prompts.VERDICT.version}+refusal:{jd.PROMPT_VERSION}"
             for name in ("grounded", "grounded_chain", "closed_book")}
"""Each check's evidence names its prompts and the refusal rule (:func:`ragrouter.evaluation.judge.is_refusal`,
versioned with the judge's prompt) that labelled a refusal ``incomplete`` without a call."""


def _calls(*ids) -> list[int]:
    return [int(i) for i in ids if i is not None]


def lexical_leak(_ev: Evaluator | None, q: CheckQuery) -> CheckResult:
    answer = _ARTICLE.sub("", normalise(q.answer))
    if not answer:
        return CheckResult(False, {"reason": "empty answer"})
    leaked = f" {answer} " in f" {normalise(q.question)} "
    return CheckResult(not leaked, {"normalised_answer": answer, "answer_in_question": leaked})


def _reader_version(q: CheckQuery) -> str:
    return _VERSIONS["grounded_chain" if q.qtype == "reasoning" else "grounded"]


def _reading(data) -> tuple[str, list[dict]]:
    """(answer, steps) of a chain reader's JSON reply; a step written as a plain sentence is kept
    as ``{"step": ...}`` (it names no entity :func:`step_entity` could match)."""
    data = data if isinstance(data, dict) else {}
    steps = []
    for s in data.get("steps") or []:
        if isinstance(s, dict):
            steps.append({"description": str(s.get("description") or "").strip(), "is": str(s.get("is") or "").strip()})
        elif str(s).strip():
            steps.append({"step": str(s).strip()})
    return str(data.get("answer") or "").strip(), steps


def step_entity(answer: str, steps: list[dict]) -> dict | None:
    """The first step whose entity the answer only repeats: the answer's content words, all of
    them, are the entity's ("Tim Burstall" for a step "the director of Alvin Purple" is "Tim
    Burstall"); ``None`` when there is none, and for a refusal or an answer without content words."""
    words = content_words(answer)
    if not words or jd.is_refusal(answer):
        return None
    for step in steps:
        entity = content_words(step.get("is", ""))
        if entity and words <= entity:
            return step
    return None


def _with_steps(evidence: dict, reading: dict | None) -> dict:
    if reading is not None:
        evidence.update(reading)
    return evidence


def grounding(ev: Evaluator, q: CheckQuery) -> CheckResult:
    if not q.texts:
        return CheckResult(False, {"reason": "the query has no supporting texts"})
    answer, a_ids, reading = ev.read(q, q.texts, "grounding")
    label, reason, j_id = ev.verdict(q.question, q.answer, answer, "grounding")
    return CheckResult(label == "correct", _with_steps(
        {"answer": answer, "label": label, "reason": reason, "n_texts": len(q.texts),
         "call_ids": _calls(*a_ids, j_id), "prompt_version": _reader_version(q)}, reading))


def shortcut(ev: Evaluator, q: CheckQuery) -> CheckResult:
    if len(q.hop_texts) < 2:
        return CheckResult(False, {"reason": f"a reasoning query needs ≥ 2 hop texts, it has {len(q.hop_texts)}"})
    tried = []
    for i, text in enumerate(q.hop_texts):
        answer, a_ids, reading = ev.read(q, [text], "shortcut")
        label, reason, j_id = ev.verdict(q.question, q.answer, answer, "shortcut")
        tried.append(_with_steps({"hop": i + 1, "answer": answer, "label": label, "reason": reason,
                                  "call_ids": _calls(*a_ids, j_id)}, reading))
        if label == "correct":
            return CheckResult(False, {"shortcut_hop": i + 1, "hops": tried, "prompt_version": _reader_version(q)})
    return CheckResult(True, {"shortcut_hop": None, "hops": tried, "prompt_version": _reader_version(q)})


def parametric_leak(ev: Evaluator, q: CheckQuery) -> CheckResult:
    answer, a_id = ev.answer(prompts.closed_book_messages(q.question), "parametric_leak")
    label, reason, j_id = ev.verdict(q.question, q.answer, answer, "parametric_leak")
    return CheckResult(label != "correct", {"closed_book_answer": answer, "label": label, "reason": reason,
                                            "call_ids": _calls(a_id, j_id),
                                            "prompt_version": _VERSIONS["closed_book"]})


CheckFn = Callable[[Evaluator, CheckQuery], CheckResult]

CHECKS: dict[str, tuple[CheckFn, bool, tuple[str, ...]]] = {
    "lexical_leak": (lexical_leak, False, ("factual", "reasoning", "summary")),
    "grounding": (grounding, True, ("factual", "reasoning", "summary")),
    "shortcut": (shortcut, True, ("reasoning",)),
    "parametric_leak": (parametric_leak, True, ("factual", "reasoning", "summary")),
}


def applicable(qtype: str) -> list[str]:
    """The checks a query of this type goes through, in :data:`CHECK_ORDER`."""
    return [name for name in CHECK_ORDER if qtype in CHECKS[name][2]]


def run_check(name: str, ev: Evaluator | None, q: CheckQuery) -> CheckResult:
    try:
        fn, uses_llm, _types = CHECKS[name]
    except KeyError:
        raise KeyError(f"unknown check {name!r} (known: {', '.join(CHECKS)})") from None
    if uses_llm and ev is None:
        raise ValueError(f"check {name!r} needs an evaluator (it asks the judge model)")
    return fn(ev, q)


def decide(required: list[str], results: dict[str, bool]) -> str:
    """A query's status from its checks: 'rejected' when every required check is in and one
    failed, 'accepted' when all are in and passed, else 'pending'."""
    if any(name not in results for name in required):
        return "pending"
    return "accepted" if all(results[name] for name in required) else "rejected"
