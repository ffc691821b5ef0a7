"""Summary questions' sources: a PageRank-sampled entity and the sources of its ego-graph
(paper App. A.2, Algorithm 2 phase 1), over a :class:`~ragrouter.querygen.sampling.CorpusGraph`.

Summary entity
    Plain PageRank (:class:`~ragrouter.graph.ppr.PPR` with uniform personalisation,
    α = 0.85) over the undirected entity graph; an entity is drawn with probability ∝ its
    score among the entities whose *ego-graph sources* — the chunks of the triples that have
    the entity as subject or object — span at least ``min_sources`` distinct walk units.
    The summary units of a corpus draw *without replacement* (a PageRank-weighted order,
    :func:`~ragrouter.querygen.sampling.weighted_order`, and unit i takes its i-th entity), so they cover distinct
    entities; on a small graph independent draws kept landing on the same hub.
    The sources shown to the generator are the ``max_sources`` units with the most such
    triples (ties broken by the seeded draw), one chunk per unit (its chunk with the most).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ragrouter.graph.kg import KnowledgeGraph
from ragrouter.graph.ppr import PPR
from ragrouter.querygen.sampling import CorpusGraph, NoCandidate, weighted_order


@dataclass(frozen=True)
class SummaryPick:
    """A PageRank-sampled entity and the sources of its ego-graph."""

    entity: str
    pagerank: float
    units: tuple[int, ...]
    chunk_ids: tuple[int, ...]
    eligible: int
    """How many entities were eligible (≥ min_sources distinct sources)."""


def pagerank(graph: CorpusGraph, alpha: float = 0.85) -> dict[str, float]:
    """Plain PageRank of every entity (PPR with a uniform personalisation vector)."""
    kg = KnowledgeGraph.from_triples(graph.triples)
    if kg.n_nodes == 0:
        return {}
    scores = PPR(kg, prepare_alpha=None).run(np.full(kg.n_nodes, 1.0 / kg.n_nodes), alpha=alpha)
    return {name: float(scores[i]) for i, name in enumerate(kg.names)}


def max_distinct_sources(graph: CorpusGraph, units: Iterable[int]) -> list[int]:
    """A largest set of pairwise non-overlapping units among ``units`` (interval scheduling
    per document in chunk mode; every unit in document mode), in ascending order."""
    units = sorted(set(units))
    if graph.walk_unit == "document":
        return units
    picked: list[int] = []
    by_doc: dict[int, list[int]] = defaultdict(list)
    for u in units:
        by_doc[graph.chunks[u].document_id].append(u)
    for doc_units in by_doc.values():
        last_end = None
        for u in sorted(doc_units, key=lambda c: (graph.chunks[c].token_end, c)):
            if last_end is None or graph.chunks[u].token_start >= last_end:
                picked.append(u)
                last_end = graph.chunks[u].token_end
    return sorted(picked)


def ego_sources(graph: CorpusGraph, entity: str, rng: random.Random, max_sources: int,
                min_sources: int = 2) -> list[tuple[int, int]]:
    """(unit, chunk id) sources of an entity's ego-graph: the units with the most triples
    naming it (ties by ``rng``), pairwise non-overlapping, at most ``max_sources``; one chunk
    per unit, the one with the most such triples. Fewer than ``min_sources`` only when the
    entity has fewer distinct sources."""
    by_unit = graph.mentions.get(entity, {})
    units = sorted(by_unit)
    rng.shuffle(units)
    units.sort(key=lambda u: -sum(by_unit[u].values()))  # stable: ties keep the shuffled order
    picked: list[int] = []
    for u in units:
        if len(picked) >= max_sources:
            break
        if graph.compatible(u, picked):
            picked.append(u)
    if len(picked) < min(min_sources, max_sources):
        picked = max_distinct_sources(graph, units)[:max_sources]
    return [(u, max(by_unit[u], key=lambda c: (by_unit[u][c], -c))) for u in picked]


def summary_candidates(graph: CorpusGraph, min_sources: int = 2) -> list[str]:
    """Entities whose ego-graph spans at least ``min_sources`` distinct sources, sorted
    (computed once per graph and ``min_sources``)."""
    key = ("summary_candidates", min_sources)
    if key not in graph.memo:
        graph.memo[key] = sorted(e for e, by_unit in graph.mentions.items()
                                 if len(by_unit) >= min_sources
                                 and len(max_distinct_sources(graph, by_unit)) >= min_sources)
    return graph.memo[key]


def sample_summary(graph: CorpusGraph, scores: dict[str, float], rng: random.Random, min_sources: int = 2,
                   max_sources: int = 4, rank: int = 0, order_rng: random.Random | None = None) -> SummaryPick:
    """An entity ∝ PageRank among the eligible ones, then its ego-graph sources.

    Without ``order_rng`` the entity is one independent draw with ``rng``. With it, the
    eligible entities are put in a PageRank-weighted order drawn without replacement
    (:func:`~ragrouter.querygen.sampling.weighted_order`, one order per corpus and seed) and unit ``rank`` takes the
    entity at that position (cycling when there are more units than entities), so the
    summary units of a corpus cover distinct entities. ``rng`` breaks ties among sources."""
    if min_sources < 2 or max_sources < min_sources:
        raise ValueError(f"querygen summary sources: need 2 <= min_sources <= max_sources "
                         f"(got {min_sources}, {max_sources})")
    eligible = summary_candidates(graph, min_sources)
    weights = [scores.get(e, 0.0) for e in eligible]
    if not eligible or sum(weights) <= 0:
        raise NoCandidate("no_entity", f"no entity's ego-graph spans {min_sources} distinct {graph.walk_unit}s "
                                       f"({len(graph.mentions)} entities, {len(graph.units)} {graph.walk_unit}s)")
    if order_rng is None:
        entity = rng.choices(eligible, weights=weights, k=1)[0]
    else:
        order = weighted_order(eligible, weights, order_rng)
        entity = order[rank % len(order)]
    sources = ego_sources(graph, entity, rng, max_sources, min_sources)
    return SummaryPick(entity, scores[entity], tuple(u for u, _ in sources), tuple(c for _, c in sources),
                       len(eligible))
