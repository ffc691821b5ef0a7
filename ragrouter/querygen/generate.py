"""Planning and interpreting one query-generation unit (paper Algorithm 2 phase 1).

A unit is (corpus, type, index) with type ``factual``, ``<k>-hop`` (reasoning) or
``summary``; its seed comes from ``querygen.seed``, the corpus, the type and the index
(:func:`unit_seed`), so the draw is reproducible and stored with the query. Factual chunks
and summary entities are drawn without replacement from one seeded order per corpus and
type (:func:`order_seed`; see :func:`plan_unit`).

The generator call of unit ``index`` uses gateway sample ``index × attempts + attempt``: two
units whose prompts coincide (the same chain walked twice) still get independent
temperature-0.7 generations instead of one cached reply stored twice.

:func:`plan_unit` draws the sources with that seed (a uniform chunk; a bridge-entity chain;
a PageRank-sampled entity and its ego-graph) and builds the generator's messages.
:func:`interpret` turns the generator's JSON into what the stage writes:

* a query with status ``pending`` (validation follows);
* a reasoning query with status ``rejected`` when the question names a bridge entity
  (reverse substitution failed). This is a *generated candidate that failed a check*, like
  those of Table 6, so it is stored with a failed ``bridge_leak`` check and counted by the
  validation views; it is not regenerated (a new sample would hide the generator's failure
  rate). A reasoning query that passes gets a passed ``bridge_leak`` row too;
* a **note** (no query) when there is nothing to ask: no chain / no eligible entity
  (:class:`~ragrouter.querygen.sampling.NoCandidate`), the summary's consistency check says
  the sources are homonyms, or ``querygen.attempts`` samples all came back unusable —
  unparseable, without a question or answer, or with a "question" that copies six words of
  the prompt's instructions (:func:`~ragrouter.querygen.checks.echoes`). Notes are rows of
  ``queries`` with origin ``querygen-note`` and status ``skipped`` (reason and detail in
  ``meta``): they mark the unit done, stay out of every view (views read origin
  ``generated``), and are never answered.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ragrouter.config import ConfigError
from ragrouter.querygen import checks, prompts
from ragrouter.querygen.sampling import CorpusGraph, NoCandidate, find_chain
from ragrouter.querygen.summaries import sample_summary

QUERY_ORIGIN = "generated"
REVIEWED_ORIGIN = "human-reviewed"  # a generated query whose status a reviewer decided (ragrouter.review.queries)
NOTE_ORIGIN = "querygen-note"
NOTE_STATUS = "skipped"
BASE_TYPES = ("factual", "reasoning", "summary")
STRATEGIES = ("one_prompt", "stepwise")
"""Reasoning generation strategies: one prompt doing all of reverse substitution, or its
steps one request each (:mod:`ragrouter.querygen.stepwise`)."""


# ---------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """The ``querygen`` section of the config, checked."""

    counts: dict[str, int]
    seed: int = 0
    temperature: float = 0.7
    max_tokens: int = 600
    attempts: int = 2
    reasoning_hops: dict[int, float] = field(default_factory=lambda: {2: 0.5, 3: 0.5})
    walk_unit: str = "auto"
    bridge_max_share: float = 0.5
    walk_attempts: int = 200
    max_chunks_per_hop: int = 2
    summary_min_sources: int = 2
    summary_max_sources: int = 4
    check_temperature: float = 0.1
    check_max_tokens: int = 300
    overlap_gate: bool = True
    strategy: str = "one_prompt"
    long_document_chunks: int = 3
    step_min_drawn: float = 0.6
    step_min_kept: float = 0.75
    link_embedding: bool = True
    link_thresholds: dict[str, float | None] = field(default_factory=dict)
    link_max_embedded: int = 5000

    @classmethod
    def from_config(cls, config) -> Settings:
        src = getattr(config, "source", "<config>")
        sec = config.section("querygen")

        def num(key, default, kind=float, low=None):
            value = sec.get(key, default)
            try:
                value = kind(value)
            except (TypeError, ValueError):
                raise ConfigError(f"{src}: setting 'querygen.{key}' must be a {kind.__name__} "
                                  f"(got {value!r})") from None
            if low is not None and value < low:
                raise ConfigError(f"{src}: setting 'querygen.{key}' must be ≥ {low} (got {value!r})")
            return value

        counts = sec.get("counts") or {}
        if not isinstance(counts, dict) or set(counts) - set(BASE_TYPES):
            raise ConfigError(f"{src}: setting 'querygen.counts' must map {', '.join(BASE_TYPES)} to integers "
                              f"(got {counts!r})")
        for k, v in counts.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError(f"{src}: setting 'querygen.counts.{k}' must be a non-negative integer (got {v!r})")
        hops = sec.get("reasoning_hops", {2: 0.5, 3: 0.5}) or {}
        try:
            hops = {int(k): float(v) for k, v in hops.items()}
        except (AttributeError, TypeError, ValueError):
            raise ConfigError(f"{src}: setting 'querygen.reasoning_hops' must map hop counts to shares "
                              f"(got {hops!r})") from None
        if not hops or any(k < 2 for k in hops) or any(v < 0 for v in hops.values()) or sum(hops.values()) <= 0:
            raise ConfigError(f"{src}: setting 'querygen.reasoning_hops' needs hop counts ≥ 2 with non-negative "
                              f"shares, not all zero (got {hops!r})")
        walk_unit = str(sec.get("walk_unit", "auto"))
        if walk_unit not in ("auto", "document", "chunk", "mixed"):
            raise ConfigError(f"{src}: setting 'querygen.walk_unit' must be auto, document, chunk or mixed "
                              f"(got {walk_unit!r})")
        strategy = str(sec.get("strategy", "one_prompt"))
        if strategy not in STRATEGIES:
            raise ConfigError(f"{src}: setting 'querygen.strategy' must be {' or '.join(STRATEGIES)} "
                              f"(got {strategy!r})")
        link = sec.get("linking") or {}
        if not isinstance(link, dict):
            raise ConfigError(f"{src}: setting 'querygen.linking' must be a mapping (got {link!r})")
        thresholds = link.get("thresholds") or {}
        if not isinstance(thresholds, dict) or any(
                v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not -1 <= v <= 1)
                for v in thresholds.values()):
            raise ConfigError(f"{src}: setting 'querygen.linking.thresholds' must map embedder models to a cosine "
                              f"in [-1, 1] or null (got {thresholds!r})")
        for key in ("step_min_drawn", "step_min_kept"):
            v = sec.get(key, 0.6)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ConfigError(f"{src}: setting 'querygen.{key}' must be a share in [0, 1] (got {v!r})")
        share = num("bridge_max_share", 0.5)
        if not 0 < share <= 1:
            raise ConfigError(f"{src}: setting 'querygen.bridge_max_share' must be in (0, 1] (got {share!r})")
        lo, hi = num("summary_min_sources", 2, int, 2), num("summary_max_sources", 4, int, 2)
        if hi < lo:
            raise ConfigError(f"{src}: setting 'querygen.summary_max_sources' ({hi}) is below "
                              f"'querygen.summary_min_sources' ({lo})")
        check_t = sec.get("check_temperature", None)
        if check_t is None:
            check_t = config.get("judge.temperature", 0.1)
        return cls(
            counts={t: int(counts.get(t, 0)) for t in BASE_TYPES},
            seed=num("seed", 0, int),
            temperature=num("temperature", 0.7, float, 0.0),
            max_tokens=num("max_tokens", 600, int, 1),
            attempts=num("attempts", 2, int, 1),
            reasoning_hops=dict(sorted(hops.items())),
            walk_unit=walk_unit,
            bridge_max_share=share,
            walk_attempts=num("walk_attempts", 200, int, 1),
            max_chunks_per_hop=num("max_chunks_per_hop", 2, int, 1),
            summary_min_sources=lo,
            summary_max_sources=hi,
            check_temperature=float(check_t),
            check_max_tokens=num("check_max_tokens", 300, int, 1),
            overlap_gate=bool(sec.get("overlap_gate", True)),
            strategy=strategy,
            long_document_chunks=num("long_document_chunks", 3, int, 1),
            step_min_drawn=float(sec.get("step_min_drawn", 0.6)),
            step_min_kept=float(sec.get("step_min_kept", 0.75)),
            link_embedding=bool(link.get("embedding", True)),
            link_thresholds={str(k): (None if v is None else float(v)) for k, v in thresholds.items()},
            link_max_embedded=int(link.get("max_embedded", 5000)),
        )

    def unit_counts(self) -> dict[str, int]:
        """Units per type: ``factual``, ``<k>-hop`` for each configured k, ``summary``."""
        out = {"factual": self.counts["factual"]}
        for k, n in split_counts(self.counts["reasoning"], self.reasoning_hops).items():
            out[f"{k}-hop"] = n
        out["summary"] = self.counts["summary"]
        return out

    @property
    def max_hops(self) -> int:
        return max((k for k, v in self.reasoning_hops.items() if v > 0), default=2)


def split_counts(n: int, shares: dict[int, float]) -> dict[int, int]:
    """``n`` split by ``shares`` with the largest-remainder method (ties: fewer hops first)."""
    total = sum(shares.values())
    exact = {k: n * v / total for k, v in shares.items()}
    out = {k: int(x) for k, x in exact.items()}
    left = n - sum(out.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - out[k]), k))[:left]:
        out[k] += 1
    return out


def parse_type(utype: str) -> tuple[str, int | None]:
    """(qtype, hops) of a unit type: factual → (factual, 1), '3-hop' → (reasoning, 3), summary → (summary, None)."""
    if utype == "factual":
        return "factual", 1
    if utype == "summary":
        return "summary", None
    if utype.endswith("-hop") and utype[:-4].isdigit() and int(utype[:-4]) >= 2:
        return "reasoning", int(utype[:-4])
    raise ValueError(f"unknown query unit type {utype!r} (factual, <k>-hop, summary)")


def unit_seed(base_seed: int, corpus: str, utype: str, index: int) -> int:
    """The seed of unit ``index`` of ``utype`` in ``corpus`` (31 bits, stored in queries.seed)."""
    digest = hashlib.sha256(f"{int(base_seed)}|{corpus}|{utype}|{int(index)}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def order_seed(base_seed: int, corpus: str, utype: str) -> int:
    """The seed of the per-corpus order that the units of one type draw from without replacement."""
    digest = hashlib.sha256(f"{int(base_seed)}|{corpus}|{utype}|order".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def external_id(utype: str, seed: int, model: str, strategy: str = "one_prompt") -> str:
    """``gen:<type>:<seed>:<model>``; a stepwise reasoning unit adds ``:stepwise``, so both
    strategies on the same chains (same seeds) are separate candidates."""
    suffix = f":{strategy}" if strategy != "one_prompt" and parse_type(utype)[0] == "reasoning" else ""
    return f"gen:{utype}:{seed}:{model}{suffix}"


# ---------------------------------------------------------------------- plans


@dataclass
class Plan:
    """What one unit asks the generator (or why it cannot ask anything)."""

    utype: str
    qtype: str
    hops: int | None
    seed: int
    messages: list[dict] | None = None
    schema: dict | None = None
    chunk_ids: list[int] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    bridges: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    note: tuple[str, str] | None = None
    """(reason, detail) when nothing can be asked."""
    hop_texts: list[str] = field(default_factory=list)
    """Reasoning: one text per hop (its chunks joined), in chain order."""
    bridge_forms: list[list[str]] = field(default_factory=list)
    """Reasoning: every surface form of each bridge (its linked names), to keep out of the question."""
    hop_facts: list[list[tuple[str, str, str, str, str]]] = field(default_factory=list)
    """Reasoning: the extracted triples of each hop's chunks (see :meth:`CorpusGraph.facts`): the
    stepwise strategy takes its answer and its descriptions from them."""


TextsOf = Callable[[list[int]], dict[int, str]]


def plan_unit(utype: str, seed: int, graph: CorpusGraph, texts_of: TextsOf,
              scores: Callable[[], dict[str, float]], s: Settings, index: int = 0,
              type_seed: int | None = None) -> Plan:
    """Draw the unit's sources and build the generator's messages.

    Factual chunks, reasoning chains and summary entities are drawn without replacement across
    the units of a type: ``type_seed`` (:func:`order_seed`) fixes one order per corpus and type —
    a uniform shuffle of the chunks, a hub-weighted order of every k-hop chain
    (:meth:`CorpusGraph.chain_order`), a PageRank-weighted order of the eligible entities — and
    unit ``index`` takes its position in it (cycling when the units outnumber the chunks or
    entities; a reasoning unit past the last chain is a note ``chains_used``: the same chain
    again would be a duplicate candidate, and on a 150-passage 2Wiki slice with 44 three-hop
    chains independent walks drew the same one for 3 of 8 units). Chains too many to enumerate
    (a large corpus) are drawn by independent walks.
    Without ``type_seed`` each unit draws independently with its own ``seed``, which also
    drives the chain walks and breaks ties among summary sources."""
    qtype, hops = parse_type(utype)
    rng = random.Random(seed)
    plan = Plan(utype, qtype, hops, seed, meta={"walk_unit": graph.walk_unit})
    if type_seed is not None:
        plan.meta.update(type_seed=type_seed, rank=index)
    if qtype == "reasoning":
        plan.meta["strategy"] = s.strategy
    try:
        if qtype == "factual":
            if not graph.chunks:
                raise NoCandidate("no_chunk", "the corpus has no chunks")
            ids = sorted(graph.chunks)
            if type_seed is None:
                cid = rng.choice(ids)
            else:
                random.Random(type_seed).shuffle(ids)
                cid = ids[index % len(ids)]
            text = texts_of([cid])[cid]
            plan.messages, plan.schema = prompts.factual_messages(text), prompts.QA_SCHEMA
            plan.chunk_ids = [cid]
            plan.meta.update(prompt_version=prompts.FACTUAL.version)
        elif qtype == "reasoning":
            order = graph.chain_order(hops, type_seed) if type_seed is not None else None
            if order is None:  # no order (too many chains to enumerate): an independent walk
                chain = find_chain(graph, hops, rng, attempts=s.walk_attempts)
            elif index < len(order):
                chain = order[index]
            elif order:
                raise NoCandidate("chains_used", f"all {len(order)} {hops}-hop chains of the corpus are taken by "
                                                 f"units 0–{len(order) - 1} of this type")
            else:
                chain = find_chain(graph, hops, rng, attempts=s.walk_attempts)  # raises no_chain, with the why
            groups = graph.chain_chunks(chain, s.max_chunks_per_hop)
            flat = [c for g in groups for c in g]
            texts = texts_of(flat)
            plan.hop_texts = ["\n".join(texts[c] for c in g) for g in groups]
            plan.messages = prompts.reasoning_messages(plan.hop_texts, list(chain.bridges))
            plan.schema = prompts.REASONING_SCHEMA
            plan.chunk_ids, plan.bridges = flat, list(chain.bridges)
            plan.bridge_forms = [graph.forms(b) for b in chain.bridges]
            plan.hop_facts = [graph.facts(g) for g in groups]
            plan.meta.update(prompt_version=prompts.REASONING.version, bridges=list(chain.bridges),
                             chain_units=list(chain.units), hop_chunk_ids=groups,
                             links=graph.link_evidence(chain))
        else:
            pick = sample_summary(graph, scores(), rng, s.summary_min_sources, s.summary_max_sources, rank=index,
                                  order_rng=None if type_seed is None else random.Random(type_seed))
            texts = texts_of(list(pick.chunk_ids))
            plan.messages = prompts.summary_messages(pick.entity, [texts[c] for c in pick.chunk_ids])
            plan.schema = prompts.SUMMARY_SCHEMA
            plan.chunk_ids = list(pick.chunk_ids)
            plan.meta.update(prompt_version=prompts.SUMMARY.version, entity=pick.entity,
                             pagerank=pick.pagerank, source_units=list(pick.units), eligible_entities=pick.eligible)
    except NoCandidate as exc:
        plan.note = (exc.reason, str(exc))
        return plan
    plan.doc_ids = graph.document_ids(plan.chunk_ids)
    return plan


# ---------------------------------------------------------------------- outcomes


@dataclass
class Outcome:
    """What the stage writes for a unit."""

    origin: str
    status: str
    question: str = ""
    answer: str = ""
    meta: dict = field(default_factory=dict)
    check: tuple[str, bool, dict] | None = None
    """(check name, passed, evidence) recorded at generation (reasoning: bridge_leak)."""
    more_checks: list[tuple[str, bool, dict]] = field(default_factory=list)
    """Further checks recorded at generation (the stepwise steps)."""


def _text(data: Any, key: str) -> str:
    value = data.get(key) if isinstance(data, dict) else None
    return value.strip() if isinstance(value, str) else ""


def note(plan: Plan, reason: str, detail: str, **extra) -> Outcome:
    return Outcome(NOTE_ORIGIN, NOTE_STATUS, meta={**plan.meta, "note": reason, "detail": detail, **extra})


def interpret(plan: Plan, data: Any) -> Outcome | None:
    """The outcome of one generator reply; ``None`` when the reply has no usable question or
    answer (the stage then asks again with the next sample index)."""
    question, answer = _text(data, "question"), _text(data, "answer")
    if plan.qtype == "summary":
        consistent = data.get("consistent") if isinstance(data, dict) else None
        if consistent is False:
            return note(plan, "inconsistent", _text(data, "reason") or "the sources name different entities",
                        question=question)
        if consistent is not True:
            return None
    if not question or not answer:
        return None
    if plan.messages and checks.echoes(question, plan.messages[0]["content"]):
        return None  # the "question" is a rule copied from the prompt
    meta = dict(plan.meta)
    if plan.qtype == "summary":
        meta["consistency_reason"] = _text(data, "reason")
    if plan.qtype == "reasoning":
        meta["reasoning"] = _text(data, "reasoning")
        forms = [f for fs in plan.bridge_forms for f in fs] or plan.bridges
        named = list(dict.fromkeys(checks.names_entities(question, forms)))
        evidence = {"bridges": plan.bridges, "named": named}
        if named:
            return Outcome(QUERY_ORIGIN, "rejected", question, answer, meta, (checks.BRIDGE_LEAK, False, evidence))
        return Outcome(QUERY_ORIGIN, "pending", question, answer, meta, (checks.BRIDGE_LEAK, True, evidence))
    return Outcome(QUERY_ORIGIN, "pending", question, answer, meta)
