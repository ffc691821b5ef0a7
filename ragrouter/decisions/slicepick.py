"""Which documents a slice for a budget keeps: those that carry the most questions per hour of
build, the questions of every type counted so that a type with few gains most.

The value of a slice is ``Σ over types log(1 + n_t)`` (``n_t``: its questions of type ``t``,
at most ``cap`` each): the first questions of a type are worth more than the fifty-first, so
the pick balances the types, and a document that adds questions of a scarce type wins over one
that adds more of a plentiful one. A question counts once every document it needs is kept
(its supporting documents and those holding its evidence), so a question over several
documents is kept when all of them are. Greedy: from the documents kept so far, add the set of
documents that completes some question and gains the most value per second — its build
seconds plus the answer seconds of the questions it completes (at most ``cap`` per type) —
while the whole stays within the budget; then the same for each cap of :func:`caps` and the
best value wins (more questions, then fewer seconds, break ties).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Pick:
    docs: list[int]
    """Stored positions of the documents kept, in the order they were added."""
    cap: int | None
    """Questions per type (None: every question the documents keep)."""
    counts: dict[str, int]
    """Questions kept per type, after the cap."""
    seconds: float
    """Expected seconds of the slice (fixed + build + answers) by the additive model."""
    value: float
    bundles: list[tuple[list[int], int]] = field(default_factory=list)
    """The documents added together (to complete a question over several), with the questions
    they completed, in the order they were added."""


def value(counts: dict[str, int]) -> float:
    return sum(math.log1p(n) for n in counts.values())


def caps(counts: dict[str, int]) -> list[int | None]:
    """The per-type caps tried: none, and 1, 2, 3, 5, 8, … below the largest type."""
    top = max(counts.values(), default=0)
    out: list[int | None] = [None]
    a, b = 1, 2
    while a < top:
        out.append(a)
        a, b = b, a + b
    return out


def _capped(counts: Counter, cap: int | None) -> dict[str, int]:
    return {t: (n if cap is None else min(n, cap)) for t, n in counts.items()}


def greedy(doc_seconds: list[float], need: list[frozenset[int] | None], qtypes: list[str], per_q: float,
           fixed_s: float, budget_s: float, cap: int | None, doc_chunks: list[int], min_chunks: int) -> Pick | None:
    """The greedy pick under one per-type ``cap`` (see the module doc); None when nothing fits."""
    groups: dict[frozenset[int], Counter] = {}
    for need_set, qtype in zip(need, qtypes):
        if need_set:
            groups.setdefault(need_set, Counter())[qtype] += 1
    chosen: set[int] = set()
    order: list[int] = []
    bundles: list[tuple[list[int], int]] = []
    counts: Counter = Counter()
    spent = fixed_s
    while True:
        now = _capped(counts, cap)
        base_value, base_n = value(now), sum(now.values())
        best = None
        for bundle in {g - chosen for g in groups if not g <= chosen}:
            after = chosen | bundle
            gained: Counter = Counter()
            for g, c in groups.items():
                if g <= after and not g <= chosen:
                    gained.update(c)
            capped = _capped(counts + gained, cap)
            extra = sum(capped.values()) - base_n
            cost = sum(doc_seconds[i] for i in bundle) + per_q * extra
            if spent + cost > budget_s:
                continue
            gain = value(capped) - base_value
            if gain <= 0:
                continue
            key = (gain / max(cost, 1e-9), extra, -len(bundle), [-i for i in sorted(bundle)])
            if best is None or key > best[0]:
                best = (key, bundle, gained, cost)
        if best is None:
            break
        _key, bundle, gained, cost = best
        order += sorted(bundle)
        bundles.append((sorted(bundle), sum(gained.values())))
        chosen |= bundle
        counts += gained
        spent += cost
    if not chosen:
        return None
    rest = sorted((i for i in range(len(doc_seconds)) if i not in chosen), key=lambda i: doc_seconds[i])
    while sum(doc_chunks[i] for i in chosen) < min_chunks and rest:  # the indicators need a few chunks
        i = rest.pop(0)
        if spent + doc_seconds[i] > budget_s:
            return None
        chosen.add(i)
        order.append(i)
        bundles.append(([i], 0))
        spent += doc_seconds[i]
    if sum(doc_chunks[i] for i in chosen) < min_chunks:
        return None
    final = _capped(counts, cap)
    return Pick(order, cap, final, spent, value(final), bundles)


def best_pick(doc_seconds: list[float], need: list[frozenset[int] | None], qtypes: list[str], per_q: float,
              fixed_s: float, budget_s: float, doc_chunks: list[int], min_chunks: int) -> Pick | None:
    """The best of :func:`greedy` over the caps of :func:`caps`."""
    totals: Counter = Counter(t for t, n in zip(qtypes, need) if n)
    best = None
    for cap in caps(dict(totals)):
        got = greedy(doc_seconds, need, qtypes, per_q, fixed_s, budget_s, cap, doc_chunks, min_chunks)
        if got is None:
            continue
        key = (round(got.value, 9), sum(got.counts.values()), -got.seconds)
        if best is None or key > best[0]:
            best = (key, got)
    return None if best is None else best[1]
