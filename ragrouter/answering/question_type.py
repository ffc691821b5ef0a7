"""A question's type (factual / reasoning / summary) without a model call, for ``ask`` and ``serve``.

Two steps, measured by ``benchmarks/bench_query_type.py`` (its figures are in
:mod:`ragrouter.answering.type_reference`, ``MEASURED``):

1. **Cues** (:func:`rule_type`): wording that the benchmarks' types are defined by — asking
   for a summary, an overview, the main points, what holds across or throughout the texts →
   ``summary``; asking why, comparing two things, chaining a fact through another ("the
   company that was acquired …"), a condition ("if the buyer …") → ``reasoning``.
   A question with cues of both kinds, or of none, goes to step 2. On the shared corpora's
   typed questions (RAGRouter-Bench's four domains and GraphRAG-Bench novel) the cues fire on
   about a fifth of the questions and are right on 81 % (reasoning) and 93 % (summary) of them.
2. **Type centroids** in the sentence encoder's space (cosine): the store's labelled
   questions, blended with **reference centroids** of those shared corpora's typed questions
   (:mod:`ragrouter.answering.type_reference`, when the store's encoder is the one they were made
   with). A store's own centroid gets weight ``n / (n + BLEND_N0)`` for its ``n`` questions of
   the type: a store with three questions per type (the demo's) leans on the reference, which
   alone was right on 86 % of plain factual questions where the store's three were right on
   about half; a store with hundreds uses its own.
"""

from __future__ import annotations

import re

import numpy as np

from ragrouter.answering import type_reference as ref

TYPES = ("factual", "reasoning", "summary")
BLEND_N0 = 30

SUMMARY_CUES = re.compile(
    r"\b(summari[sz]e|summary|overview|outline|key (themes?|points|findings|ideas|aspects)|main (points|themes?|"
    r"findings|arguments|risks|ideas|topics|aspects)|in general|overall|across (the|these|all|different|various)|"
    r"throughout|recurring|broader|significance|what role does|what roles? do|themes?|various|"
    r"different (perspectives|aspects|ways)|how do the (various|different))\b", re.I)
REASONING_CUES = re.compile(
    r"\b(why|compare[sd]?|comparison|both|before or after|faster|slower|more than|less than|earlier than|later than|"
    r"older|younger|which of the two|relationship between|connection between|connected|link(s|ed)? between|chain|"
    r"if (the|a|an)|given (the|that)|in the document (where|that))\b", re.I)
CHAINED = re.compile(r"\b\w+ (that|which|who|whose) (was|were|is|are|had|has|did|does|later|first)\b", re.I)
"""A fact reached through another: "the company that was acquired", "the senator who had"."""


def rule_type(question: str) -> str | None:
    """The type the question's wording states (see the module doc), or None."""
    summary = bool(SUMMARY_CUES.search(question))
    reasoning = bool(REASONING_CUES.search(question)) or bool(CHAINED.search(question[12:]))
    if summary != reasoning:
        return "summary" if summary else "reasoning"
    return None


def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / (np.linalg.norm(v) + 1e-12)


def reference_centroids(encoder_name: str) -> dict[str, np.ndarray] | None:
    """The shared corpora's type centroids for ``encoder_name``, or None (another encoder)."""
    if str(encoder_name) != ref.ENCODER:
        return None
    return {t: np.asarray(v, dtype=np.float64) for t, v in ref.CENTROIDS.items()}


def store_centroids(rows: list[tuple[str, str]], encoder) -> dict[str, tuple[np.ndarray, int]]:
    """{type: (mean embedding, questions)} of ``rows`` = (type, question) pairs."""
    if not rows:
        return {}
    vecs = np.asarray(encoder.encode([r[1] for r in rows]), dtype=np.float64)
    out = {}
    for t in sorted({r[0] for r in rows}):
        mask = np.array([r[0] == t for r in rows])
        out[t] = (vecs[mask].mean(axis=0), int(mask.sum()))
    return out


def type_centroids(rows: list[tuple[str, str]], encoder) -> dict[str, np.ndarray]:
    """{query type: mean embedding} of ``rows`` = (query type, question) pairs: what the promoted
    router model carries (:mod:`ragrouter.answering.promotion`) to guess types as ``ask`` does."""
    return {t: c for t, (c, _n) in store_centroids(rows, encoder).items()}


def blend(store: dict[str, tuple[np.ndarray, int]], reference: dict[str, np.ndarray] | None,
          n0: int = BLEND_N0) -> dict[str, np.ndarray]:
    """Per type: ``w·store + (1 − w)·reference`` of unit centroids, ``w = n / (n + n0)``; a type
    only one side has takes that side's."""
    reference = reference or {}
    out = {}
    for t in sorted(set(store) | set(reference)):
        if t in store and t in reference:
            c, n = store[t]
            w = n / (n + n0)
            out[t] = w * _unit(c) + (1 - w) * _unit(reference[t])
        elif t in store:
            out[t] = _unit(store[t][0])
        else:
            out[t] = _unit(reference[t])
    return out


def nearest(centroids: dict[str, np.ndarray], vec) -> str:
    """The type whose centroid is most similar (cosine) to ``vec`` (ties: first by name)."""
    q = _unit(vec)
    best, best_sim = None, -2.0
    for t in sorted(centroids):
        sim = float(_unit(centroids[t]) @ q)
        if sim > best_sim:
            best, best_sim = t, sim
    return str(best)


def guess(question: str, vec, centroids: dict[str, np.ndarray]) -> tuple[str, str]:
    """(type, how): the cue's type (``"cue"``), else the nearest centroid (``"centroids"``)."""
    cue = rule_type(question)
    if cue is not None and (not centroids or cue in centroids):
        return cue, "cue"
    return nearest(centroids, vec), "centroids"


def measured(qtype: str, with_reference: bool) -> dict | None:
    """What ``benchmarks/bench_query_type.py`` measured of the guess for questions of ``qtype``:
    {"unseen": share right on an unseen corpus' typed questions, "heldout": on the held-out
    user-style questions}, or None where it was not measured."""
    got = ref.MEASURED.get("rules+blend" if with_reference else "rules+store", {})
    out = {k: v.get(qtype) for k, v in got.items() if v.get(qtype) is not None}
    return out or None
