"""No credit for an answer that adds nothing to the question (a rule over the judge's verdict).

A small judge calls an answer "correct" that only restates the question ("The information on
legal contingencies … correlates with the financial reserves set aside for these liabilities.",
"matches the gold answer exactly"). :func:`restates` finds such an answer without a model: its
content words (stemmed by snowball) are, but for at most :data:`MAX_NEW_SHARE` of them, words of
the question or of the vocabulary of generic non-answers (:data:`GENERIC`: "information",
"details", "depends", "relevant" …), and it shares none of the gold's own content — a content
word or a figure of the gold that the question does not already give. Such an answer cannot be
"correct": the rule makes the verdict "incomplete", the label of a non-answer (as a refusal is).
It is deterministic and cheap, and it never touches an answer that says something of its own or
that shares anything with the gold; a gold with no content of its own beyond the question (a
yes/no question) is left to the judge model.
"""

from __future__ import annotations

import functools
import re
import threading

import snowballstemmer

from ragrouter.evaluation.precision import figures
from ragrouter.evaluation.words import content_words

MAX_NEW_SHARE = 0.2
"""The share of an answer's content words that may come from neither the question nor
:data:`GENERIC` for it still to count as restating the question."""

GENERIC = frozenset("""
information informed detail details data document documents report reports record records context text
passage passages source sources section sections relevant related relevance regarding concerning concern
concerns aspect aspects important importance factor factors several various depend depends depending
according accordance described describes describe discussed discusses discuss mentioned mentions mention
provided provides provide given stated states state question questions asked asks ask answer answers
matches match matching correlate correlates correlated correlation correspond corresponds relate relates
relation relationship connection connected link linked associated association topic subject matter
respect case cases general overall specific particular certain way ways thing things part parts point
points issue issues area areas covered covers cover explained explains explain addressed addresses address
indicated indicates indicate shows show shown noted notes note outlined outlines reflects reflected
reflect considered consider consideration based basis exactly clearly directly indeed actually simply
give gives giving one ones
""".split())


_LOCAL = threading.local()


def _stemmer():
    """A stemmer per thread: a snowball stemmer keeps its word in itself, and the judge stage
    judges on several threads (one shared stemmer raised IndexError under load)."""
    if not hasattr(_LOCAL, "stemmer"):
        _LOCAL.stemmer = snowballstemmer.stemmer("english")
    return _LOCAL.stemmer


def _stems(text: str) -> set[str]:
    words = content_words(re.sub(r"[^\w\s'’-]", " ", text or ""))
    return set(_stemmer().stemWords(sorted(words)))


@functools.lru_cache(maxsize=1)
def _generic() -> frozenset[str]:
    return frozenset(snowballstemmer.stemmer("english").stemWords(sorted(GENERIC)))


_YES_NO = re.compile(r"^\W*(?:is|are|was|were|am|does|do|did|can|could|has|have|had|will|would|should|shall|may|"
                     r"might|must|isn't|aren't|wasn't|doesn't|don't|didn't)\b", re.I)


def restates(question: str, gold: str, answer: str) -> bool:
    """Whether ``answer`` only restates ``question`` (see the module docstring). A yes/no question
    is left to the judge: there the question stated as a fact ("Aspirin is an antiplatelet
    drug.") is an answer."""
    if _YES_NO.match(question or ""):
        return False
    a, q = _stems(answer), _stems(question)
    own, own_figures = _stems(gold) - q - _generic(), figures(gold) - figures(question)  # a generic word is no content
    if not a or not (own or own_figures) or a & own or own_figures & figures(answer):
        return False
    return len(a - q - _generic()) <= MAX_NEW_SHARE * len(a)


def apply_restatement(label: str, question: str, gold: str, answer: str) -> str:
    """"correct" becomes "incomplete" for an answer that only restates the question; every other
    label passes unchanged."""
    if label == "correct" and restates(question, gold, answer):
        return "incomplete"
    return label
