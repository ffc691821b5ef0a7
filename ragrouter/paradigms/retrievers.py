"""The two retriever primitives (paper §3.1, App. B.2, Algorithm 4) in a dict registry.

Both return a :class:`~ragrouter.paradigms.results.Retrieval`: a ranked, de-duplicated list
of chunk ids with scores (no token budget applied — packing is the paradigm's job, so
HybridRAG can fuse the full lists), details for the run's trace, and the LLM calls made.

NaiveRetriever
    query vector → inner product over the L2-normalised chunk vectors (cosine) → top
    ``retrieval.top_k`` → keep similarity ≥ ``retrieval.min_similarity`` (per embedder model:
    a similarity scale is the embedder's, see ``configs/default.yaml``).

GraphRetriever (Algorithm 4)
    1. The LLM (the paradigm's generator backend, prompt ``entities``, extraction
       temperature/max tokens) lists the query's entities as JSON. Fallback to the whole
       query when the reply is unusable (empty / unparseable / off-schema — gateway reasons
       in :data:`UNUSABLE_REPLY`) or lists no entity. Transport failures (timeouts, HTTP
       errors after the gateway's retries) are raised, so the unit fails and is retried
       later instead of being stored with a degraded retrieval.
    2. The entities are embedded (gateway ``embedder`` role); each one's top
       ``retrieval.entity_top_k`` graph entities with similarity **>**
       ``retrieval.entity_min_similarity`` (τ_entity, per embedder model) are collected, max-pooled per entity; the top ``retrieval.seed_entities`` are the
       seeds (ties: lower entity position first).
    3. Personalized PageRank over the whole graph, damping ``retrieval.ppr_alpha``,
       personalisation by ``retrieval.seed_weighting``: ``similarity`` ∝ seed similarity
       (eq. 7); ``specificity`` ∝ seed similarity / the number of chunks the seed's triples
       come from (HippoRAG's node specificity, so a hub that every question names does not
       take the walk's restart mass). The trace's ``seed_weights`` lists every seed as
       ``[name, chunks, weight]`` (weights sum to 1).
    4. Nodes with score ≥ ``retrieval.ppr_min_score``, the top ``retrieval.ppr_max_nodes``
       of them, plus every seed.
    5. The triples of the induced subgraph, sorted by the larger of their endpoints'
       similarities, descending, cut to ``retrieval.max_triples``. An endpoint's similarity
       is its seed similarity when it is a seed (as in the paper); for a non-seed node, for
       which the paper leaves ``sim`` undefined, it is the same quantity computed directly —
       the largest cosine between the node's entity vector and any query entity vector — so
       every node is on one scale. Under ``specificity`` every node's similarity is divided by
       its chunk count here too: a hub's triples otherwise share its similarity and its PPR
       mass (the tie-break below), and fill the top of every query's list in index order
       (benchmarks/README.md, "Graph seeds that are not hubs": the restart weights alone left
       55 of 60 questions with the same top-5 chunks). Ties: higher max endpoint PPR score
       first, then triple order in the index (stable).
    6. The triples' source chunks in that order, de-duplicated; a chunk's score is the sort
       key of its first triple. The selected triples are kept as :class:`Fact` s for the
       context.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ragrouter.paradigms import prompts
from ragrouter.paradigms.context import Fact
from ragrouter.paradigms.results import CallUse, Retrieval
from ragrouter.paradigms.settings import Settings

UNUSABLE_REPLY = frozenset({"empty_content", "unparseable_json", "schema_mismatch"})


def _gateway_error_reason(exc: BaseException) -> str | None:
    """``exc.reason`` if ``exc`` is a gateway error (duck-typed, so test doubles work)."""
    return getattr(exc, "reason", None) if type(exc).__name__ == "GatewayError" else None


class NaiveRetriever:
    """Dense retrieval over the chunk vectors (see the module docstring)."""

    kind = "naive"

    def __init__(self, index, settings: Settings):
        self.index = index
        self.s = settings

    def retrieve(self, text: str, vector: np.ndarray) -> Retrieval:
        ids, scores = self.index.search_chunks(vector, self.s.top_k)
        keep = scores >= self.s.min_similarity
        kept_ids = tuple(int(i) for i in ids[keep])
        kept_scores = tuple(float(x) for x in scores[keep])
        details = {
            "kind": self.kind,
            "candidates": int(len(ids)),
            "kept": len(kept_ids),
            "best_score": round(float(scores[0]), 6) if len(scores) else None,
        }
        return Retrieval(kind=self.kind, query=text, chunk_ids=kept_ids, scores=kept_scores, details=details)


def parse_entities(data, text: str | None = None) -> list[str]:
    """Entity names from an extraction reply: ``{"entities": [...]}`` or a bare list; strings
    stripped, empties dropped, case-insensitive duplicates removed (first kept)."""
    items = data.get("entities") if isinstance(data, dict) else data
    if not isinstance(items, list):
        return []
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, str):
            continue
        name = " ".join(item.split())
        if name and name.casefold() not in seen:
            seen.add(name.casefold())
            out.append(name)
    return out


class GraphRetriever:
    """Knowledge-graph retrieval, Algorithm 4 (see the module docstring)."""

    kind = "graph"

    def __init__(self, index, settings: Settings):
        self.index = index
        self.s = settings

    # -- phase 1a: entities ------------------------------------------------------------
    def extract_entities(self, text: str, gateway, backend: str, stage: str) -> tuple[list[str], str, list[CallUse], str | None]:
        """(entities, source 'llm'|'fallback', calls, error reason)."""
        try:
            result = gateway.chat(
                backend, prompts.ENTITIES.messages(question=text),
                temperature=self.s.extract_temperature, max_tokens=self.s.extract_max_tokens,
                json_schema=prompts.ENTITIES_SCHEMA, stage=stage, phase="retrieval",
                timeout_s=self.s.extract_timeout_s,
            )
        except Exception as exc:
            reason = _gateway_error_reason(exc)
            if reason in UNUSABLE_REPLY:
                return [text], "fallback", [], reason
            raise
        calls = [CallUse.of(result, "retrieval", "entities")]
        entities = parse_entities(result.data)
        if not entities:
            return [text], "fallback", calls, "no_entities"
        return entities, "llm", calls, None

    # -- phase 1b: seeds ---------------------------------------------------------------
    def seeds(self, entity_vectors: np.ndarray) -> dict[int, float]:
        """Seed entity positions → similarity: top ``entity_top_k`` per query entity with
        sim > ``entity_min_similarity``, max-pooled, then the top ``seed_entities``."""
        pooled: dict[int, float] = {}
        if self.index.n_entities == 0 or len(entity_vectors) == 0:
            return pooled
        positions, sims = self.index.search_entities(entity_vectors, self.s.entity_top_k)
        for row_pos, row_sim in zip(positions, sims):
            for pos, sim in zip(row_pos, row_sim):
                if pos < 0 or not sim > self.s.entity_min_similarity:
                    continue
                pos, sim = int(pos), float(sim)
                if sim > pooled.get(pos, -np.inf):
                    pooled[pos] = sim
        top = sorted(pooled.items(), key=lambda kv: (-kv[1], kv[0]))[: self.s.seed_entities]
        return dict(top)

    # -- phase 2: the walk's restart vector ------------------------------------------------
    def personalization(self, seeds: dict[int, float]) -> dict[int, float]:
        """Seed position → PPR restart weight (summing to 1), by ``retrieval.seed_weighting``:
        ∝ similarity, or ∝ similarity / chunks (a node in no triple counts as one chunk)."""
        if self.s.seed_weighting == "specificity":
            counts = self.index.entity_chunk_counts
            raw = {pos: sim / max(int(counts[pos]), 1) for pos, sim in seeds.items()}
        else:
            raw = dict(seeds)
        z = sum(raw.values())
        return {pos: w / z for pos, w in raw.items()}

    # -- phases 2-3 --------------------------------------------------------------------
    def expand(self, seeds: dict[int, float], entity_vectors: np.ndarray) -> tuple[list[int], list[float], list[Fact], dict]:
        """PPR from the seeds, subgraph, sorted/capped triples → (chunk ids, scores, facts, details)."""
        personalization = self.personalization(seeds)
        scores = self.index.ppr(personalization, self.s.ppr_alpha, self.s.ppr_tol)
        nodes = [int(v) for v in self.index.top_nodes(scores, self.s.ppr_max_nodes, self.s.ppr_min_score,
                                                      always=list(seeds))]
        node_arr = np.asarray(sorted(nodes), dtype=np.int64)
        # similarity of every subgraph node: seed similarity for seeds, else max cosine to the query entities
        cos = self.index.entity_vectors[node_arr] @ np.asarray(entity_vectors, dtype=np.float32).T
        node_sim = cos.max(axis=1).astype(np.float64)
        for pos, sim in seeds.items():
            node_sim[np.searchsorted(node_arr, pos)] = sim
        if self.s.seed_weighting == "specificity":  # the triple order weighs nodes as the restart does
            node_sim /= np.maximum(self.index.entity_chunk_counts[node_arr], 1)
        tri = self.index.triples_between(node_arr)
        subj, obj = self.index.triple_subject[tri], self.index.triple_object[tri]
        sim_u = node_sim[np.searchsorted(node_arr, subj)]
        sim_v = node_sim[np.searchsorted(node_arr, obj)]
        ppr_max = np.maximum(scores[subj], scores[obj]) if len(tri) else np.zeros(0)
        key = np.maximum(sim_u, sim_v)
        order = np.lexsort((tri, -ppr_max, -key))[: self.s.max_triples]
        facts: list[Fact] = []
        chunk_ids: list[int] = []
        chunk_scores: list[float] = []
        seen: set[int] = set()
        for j in order:
            t = int(tri[j])
            fact = self.index.fact(t)
            facts.append(fact)
            if fact.chunk_id not in seen:
                seen.add(fact.chunk_id)
                chunk_ids.append(fact.chunk_id)
                chunk_scores.append(float(key[j]))
        counts = self.index.entity_chunk_counts
        details = {
            "seed_weights": [[self.index.entity_names[p], int(counts[p]), round(w, 6)]
                             for p, w in personalization.items()],
            "nodes": [self.index.entity_names[v] for v in nodes],
            "ppr_nodes": int(len(node_arr)),
            "ppr_nodes_above_min": int(np.count_nonzero(scores >= self.s.ppr_min_score)),
            "subgraph_triples": int(len(tri)),
            "triples": len(facts),
        }
        return chunk_ids, chunk_scores, facts, details

    def retrieve(self, text: str, gateway, backend: str, embed: Callable[[Sequence[str]], np.ndarray],
                 stage: str = "answer") -> Retrieval:
        entities, source, calls, error = self.extract_entities(text, gateway, backend, stage)
        vecs = embed(entities)
        seeds = self.seeds(vecs)
        details: dict = {"kind": self.kind, "entities": entities, "entity_source": source}
        if error:
            details["entity_error"] = error
        details["seeds"] = [[self.index.entity_names[p], round(s, 6)] for p, s in seeds.items()]
        details["seed_weighting"] = self.s.seed_weighting
        if not seeds:
            details.update({"seed_weights": [], "ppr_nodes": 0, "subgraph_triples": 0, "triples": 0})
            return Retrieval(kind=self.kind, query=text, chunk_ids=(), scores=(), details=details, calls=tuple(calls))
        chunk_ids, chunk_scores, facts, more = self.expand(seeds, vecs)
        details.update(more)
        details["chunks"] = len(chunk_ids)
        return Retrieval(kind=self.kind, query=text, chunk_ids=tuple(chunk_ids), scores=tuple(chunk_scores),
                         details=details, calls=tuple(calls), facts=tuple(facts))


RETRIEVERS: dict[str, type] = {"naive": NaiveRetriever, "graph": GraphRetriever}
