"""Query generation and verify-then-filter validation (paper §3.2, App. A.2, Algorithm 2).

* :mod:`~ragrouter.querygen.sampling` — walk units, bridge-entity chains (random walk with an
  exhaustive fallback), PageRank-sampled entities and their ego-graph sources; pure functions.
* :mod:`~ragrouter.querygen.prompts` — the versioned generation and validation prompts.
* :mod:`~ragrouter.querygen.generate` — settings (``querygen`` config section), unit seeds,
  planning a unit and interpreting the generator's reply (query, rejected query, or note).
* :mod:`~ragrouter.querygen.checks` — the checks (``lexical_leak``, ``grounding``,
  ``shortcut``, ``parametric_leak``) in a dict registry, and the status decision.
* :mod:`~ragrouter.querygen.stages` — the ``querygen`` and ``validate`` stages (importing it
  registers them).
"""

from ragrouter.querygen.checks import CHECKS, CheckQuery, CheckResult, Evaluator, applicable, decide, run_check
from ragrouter.querygen.generate import Settings, external_id, interpret, plan_unit, split_counts, unit_seed
from ragrouter.querygen.sampling import (
    Chain,
    ChunkInfo,
    CorpusGraph,
    NoCandidate,
    choose_walk_unit,
    find_chain,
    iter_chains,
)
from ragrouter.querygen.summaries import SummaryPick, ego_sources, pagerank, sample_summary, summary_candidates

__all__ = [
    "CHECKS",
    "Chain",
    "CheckQuery",
    "CheckResult",
    "ChunkInfo",
    "CorpusGraph",
    "Evaluator",
    "NoCandidate",
    "Settings",
    "SummaryPick",
    "applicable",
    "choose_walk_unit",
    "decide",
    "ego_sources",
    "external_id",
    "find_chain",
    "interpret",
    "iter_chains",
    "pagerank",
    "plan_unit",
    "run_check",
    "sample_summary",
    "split_counts",
    "summary_candidates",
    "unit_seed",
]
