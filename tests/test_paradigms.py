"""Tests of the RAG paradigms library (ragrouter/paradigms): RRF, the packer, both
retrievers (Algorithm 4), every IterativeRAG stop rule (Algorithm 3), the config hash, the
shared QueryContext, and an end-to-end run through the real Gateway against the fake
OpenAI-compatible endpoint."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import networkx as nx
import numpy as np
import pytest

from ragrouter.config import Config
from ragrouter.llm import tokens
from ragrouter.llm.backends import GatewayError
from ragrouter.llm.gateway import ChatResult
from ragrouter.paradigms import (
    PARADIGMS,
    CorpusIndex,
    QueryContext,
    build_context,
    config_hash,
    pack,
    paradigm_config,
    prompts,
    rrf_fuse,
)
from ragrouter.paradigms.context import format_context
from ragrouter.paradigms.paradigms import interleave, normalise_query, parse_evaluation
from ragrouter.paradigms.retrievers import GraphRetriever, parse_entities
from ragrouter.paradigms.settings import Settings

DIM = 16


# --------------------------------------------------------------------------- helpers


def make_config(**overrides) -> Config:
    """The default config with dotted-path overrides (``retrieval__top_k=5``)."""
    data = copy.deepcopy(Config.load(env={}).data)
    for dotted, value in overrides.items():
        node = data
        parts = dotted.split("__")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return Config(data, source="<test>")


def unit(*pairs: tuple[int, float]) -> np.ndarray:
    """A DIM-d vector with the given (axis, weight) entries, L2-normalised."""
    v = np.zeros(DIM, dtype=np.float32)
    for axis, w in pairs:
        v[axis] += w
    return v / np.linalg.norm(v)


def at_cos(c: float, axis: int = 0, other: int = 1) -> np.ndarray:
    """A unit vector whose cosine with e_axis is exactly ``c`` (rest along e_other)."""
    v = np.zeros(DIM, dtype=np.float64)
    v[axis] = c
    v[other] = np.sqrt(max(0.0, 1 - c * c))
    return v.astype(np.float32)


def hashed_vector(text: str, dim: int = DIM) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def purpose_of(messages: list[dict]) -> str:
    """Which of our prompts a request uses (by its system message)."""
    system = messages[0]["content"]
    for p in prompts.PROMPTS.values():
        if system == p.system:
            return p.name
    raise AssertionError(f"unknown prompt: {system[:60]!r}")


class ScriptedGateway:
    """Stand-in for :class:`ragrouter.llm.gateway.Gateway` with the same chat/embed signature.

    ``script[purpose]`` gives the reply for a prompt ('direct', 'generation', 'entities',
    'self_eval'): a value, a callable ``(messages) -> value``, or a list consumed in order;
    an Exception value is raised. Identical requests are served from a cache (same call_id,
    cached=True), like the real gateway. Tokens are cl100k counts of the message texts and
    the reply. ``vectors`` maps text → embedding (others: hashed random unit vectors)."""

    def __init__(self, script: dict | None = None, vectors: dict | None = None, delay_s: float = 0.0):
        self.script = dict(script or {})
        self.vectors = dict(vectors or {})
        self.delay_s = delay_s
        self.chats: list[dict] = []
        self.embeds: list[list[str]] = []
        self._cache: dict[str, ChatResult] = {}
        self._lock = threading.Lock()
        self._next = 100

    def _reply(self, purpose: str, messages):
        entry = self.script.get(purpose)
        if isinstance(entry, list):
            entry = entry.pop(0)
        if callable(entry):
            entry = entry(messages)
        if entry is None:
            raise AssertionError(f"no scripted reply for {purpose}")
        return entry

    def chat(self, backend_or_role, messages, *, temperature, max_tokens, json_schema=None, stage, phase,
             sample=0, timeout_s=None):
        purpose = purpose_of(messages)
        key = json.dumps([backend_or_role, messages, temperature, max_tokens, json_schema, sample], sort_keys=True)
        with self._lock:
            self.chats.append({"backend": backend_or_role, "purpose": purpose, "phase": phase, "stage": stage,
                               "temperature": temperature, "messages": messages, "schema": json_schema,
                               "timeout_s": timeout_s, "thread": threading.get_ident()})
            hit = self._cache.get(key)
        if hit is not None:
            self._log_result(hit)
            return dataclasses.replace(hit, cached=True)
        if self.delay_s:
            time.sleep(self.delay_s)
        with self._lock:
            reply = self._reply(purpose, messages)
        if isinstance(reply, Exception):
            raise reply
        text = reply if isinstance(reply, str) else json.dumps(reply)
        data = (json.loads(text) if isinstance(reply, str) else reply) if json_schema is not None else None
        with self._lock:
            self._next += 1
            result = ChatResult(text=text, data=data,
                                prompt_tokens=sum(tokens.count(m["content"]) for m in messages),
                                completion_tokens=tokens.count(text), cached=False, call_id=self._next,
                                latency_s=0.0)
            self._cache[key] = result
        self._log_result(result)
        return result

    def _log_result(self, result: ChatResult) -> None:
        """Add the call id and tokens to this thread's last log entry."""
        with self._lock:
            for entry in reversed(self.chats):
                if entry.get("thread") == threading.get_ident() and "call_id" not in entry:
                    entry.update(call_id=result.call_id, prompt_tokens=result.prompt_tokens,
                                 completion_tokens=result.completion_tokens)
                    break

    def embed(self, backend_or_role, texts, *, stage, phase):
        with self._lock:
            self.embeds.append(list(texts))
        return np.vstack([self.vectors.get(t, hashed_vector(t)) for t in texts]).astype(np.float32)

    def count(self, purpose: str) -> int:
        return sum(1 for c in self.chats if c["purpose"] == purpose)


def chunk_corpus():
    """Six chunks around the query direction e0 with known cosines."""
    sims = {1: 1.0, 2: 0.8, 3: 0.6, 4: 0.45, 5: 0.39, 6: 0.1}
    ids = list(sims)
    texts = [f"Passage {i} about topic {'abcdef'[i - 1]}." for i in ids]
    vecs = np.vstack([at_cos(sims[i], 0, 1 + i) for i in ids])
    return ids, texts, [tokens.count(t) for t in texts], vecs


def small_index(**extra) -> CorpusIndex:
    ids, texts, toks, vecs = chunk_corpus()
    return CorpusIndex(ids, texts, toks, vecs, **extra)


# --------------------------------------------------------------------------- RRF


def test_rrf_matches_hand_computed_values_and_breaks_ties_by_first_appearance():
    fused = rrf_fuse([[1, 2, 3], [3, 4, 1]], k=60)
    expected = {1: 1 / 61 + 1 / 63, 2: 1 / 62, 3: 1 / 63 + 1 / 61, 4: 1 / 62}
    assert [c for c, _ in fused] == [1, 3, 2, 4]  # 1 and 3 tie, 2 and 4 tie: first appearance wins
    for c, score in fused:
        assert score == pytest.approx(expected[c], abs=1e-15)


def test_rrf_deduplicates_within_and_across_lists():
    fused = rrf_fuse([[5, 7, 5, 9], [9, 9, 7]], k=60)
    ids = [c for c, _ in fused]
    assert sorted(ids) == [5, 7, 9] and len(ids) == len(set(ids))
    scores = dict(fused)
    # list 1 de-duplicated to [5, 7, 9]; list 2 to [9, 7]
    assert scores[5] == pytest.approx(1 / 61)
    assert scores[7] == pytest.approx(1 / 62 + 1 / 62)
    assert scores[9] == pytest.approx(1 / 63 + 1 / 61)
    assert ids == [9, 7, 5]


def test_rrf_k_changes_the_order():
    # with k=0, rank 1 in one list beats ranks 2+2 (1 > 0.5+0.5 is false: equal -> tie by appearance)
    a, b = [1, 2], [3, 2]
    assert [c for c, _ in rrf_fuse([a, b], k=0)] == [1, 2, 3]
    assert [c for c, _ in rrf_fuse([a, b], k=60)] == [2, 1, 3]
    with pytest.raises(ValueError, match="rrf_k"):
        rrf_fuse([a], k=-1)


# --------------------------------------------------------------------------- packer


def test_pack_at_the_budget_edge_and_stops_instead_of_skipping():
    ids, counts = [10, 11, 12], [3, 4, 5]
    assert pack(ids, counts, 7) == [10, 11]  # 3 + 4 == 7 fits exactly
    assert pack(ids, counts, 6) == [10]
    assert pack(ids, counts, 12) == [10, 11, 12]
    assert pack(ids, counts, 2) == []
    # stop, not skip: chunk 12 (1 token) would fit after 11 is refused, but the sequence is truncated
    assert pack([10, 11, 12], [3, 5, 1], 4) == [10]
    assert pack([10, 10, 11], {10: 3, 11: 4}, 7) == [10, 11]  # duplicates taken once
    assert pack(ids, counts, 9, overhead=1) == [10, 11]  # 4 + 5 == 9
    assert pack(ids, counts, 8, overhead=1) == [10]
    with pytest.raises(ValueError, match="token counts"):
        pack(ids, [1, 2], 5)


def test_build_context_keeps_the_whole_formatted_text_within_the_budget():
    ids, texts, _, _ = chunk_corpus()
    text_of = dict(zip(ids, texts))
    full = build_context(ids, text_of, 10_000)
    assert full.chunk_ids == ids and full.tokens == tokens.count(full.text)
    assert full.text.startswith("[1] Passage 1") and "\n\n[2] Passage 2" in full.text
    previous = -1
    for budget in range(0, full.tokens + 1):
        ctx = build_context(ids, text_of, budget)
        assert ctx.tokens == tokens.count(ctx.text) <= budget
        n = len(ctx.chunk_ids)
        assert ctx.chunk_ids == ids[:n]  # always a prefix of the ranking
        if n < len(ids):  # maximal: one more passage would not fit
            assert tokens.count(format_context(texts[: n + 1])) > budget
        assert n >= previous
        previous = n
    assert build_context(ids, text_of, full.tokens).chunk_ids == ids
    # stop, not skip: a long second chunk blocks the short third one
    text_of2 = {1: "short one.", 2: "long " * 50, 3: "tiny."}
    budget = tokens.count(format_context(["short one.", "tiny."]))
    assert build_context([1, 2, 3], text_of2, budget).chunk_ids == [1]
    with pytest.raises(ValueError, match="token_budget"):
        build_context(ids, text_of, -1)


def _real_texts(n: int, seed: int) -> list[str]:
    """Token windows (as the chunker makes them: any start/end) of the test corpora."""
    import random
    from pathlib import Path

    data = Path(__file__).parent / "data"
    raw = [(data / f).read_text(encoding="utf-8")[:30000] for f in
           ("squality_slice.jsonl", "quality_example.jsonl", "cuad_contracts_slice.json", "musique_slice.json")]
    enc = tokens.encoding()
    rng = random.Random(seed)
    out = ["x", "  ", "\n\nfoo\n", "123", "[3] y", "'s", "...", "<|endoftext|>", "a\r\n"]
    while len(out) < n:
        ids = enc.encode(rng.choice(raw), disallowed_special=())
        a = rng.randrange(0, len(ids) - 200)
        out.append(enc.decode(ids[a:a + rng.randrange(1, 200)]))
    return out


def test_context_token_count_is_exact_on_real_text():
    from ragrouter.paradigms.context import Fact

    texts = _real_texts(300, seed=1)
    names = [" ".join(t.split())[:30] or "e" for t in texts]
    import random

    rng = random.Random(2)
    for _ in range(150):
        k = rng.randrange(1, 7)
        ids = rng.sample(range(len(texts)), k)
        text_of = {i: texts[i] for i in ids}
        facts = [Fact(rng.choice(names), rng.choice(names), rng.choice(names), rng.choice(ids))
                 for _ in range(rng.randrange(0, 6))]
        full = build_context(ids, text_of, 100_000, facts=facts)
        assert full.tokens == tokens.count(full.text)
        budget = rng.randrange(0, full.tokens + 1)
        ctx = build_context(ids, text_of, budget, facts=facts)
        assert ctx.tokens == tokens.count(ctx.text) <= budget


def test_build_context_lists_the_facts_of_the_packed_chunks_first():
    from ragrouter.paradigms.context import Fact

    ids, texts, _, _ = chunk_corpus()
    facts = [Fact("Alice", "knows", "Bob", 2), Fact("Bob", "lives in", "Paris", 1), Fact("Eve", "likes", "Tea", 6)]
    ctx = build_context([2, 1], dict(zip(ids, texts)), 10_000, facts=facts)
    assert ctx.text.startswith("Knowledge graph facts:\nAlice | knows | Bob\nBob | lives in | Paris\n\nPassages:\n[1] Passage 2")
    assert "Eve" not in ctx.text  # its chunk is not in the context
    assert ctx.tokens == tokens.count(ctx.text)
    small = build_context([2, 1], dict(zip(ids, texts)), ctx.tokens - 1, facts=facts)
    assert small.chunk_ids == [2] and small.tokens <= ctx.tokens - 1 and "Paris" not in small.text
    assert format_context([]) == ""


# --------------------------------------------------------------------------- naive retriever


def test_naive_retriever_keeps_top_k_with_similarity_at_least_the_threshold():
    index = small_index()
    gw = ScriptedGateway(vectors={"q": unit((0, 1.0))})
    qc = QueryContext("q", index, gw, make_config(retrieval__min_similarity=0.4))
    r = qc.dense("q")
    assert r.chunk_ids == (1, 2, 3, 4)  # 0.39 and 0.1 are below 0.4
    # the default for MiniLM is its measured 0.28: chunk 5 (0.39) passes, chunk 6 (0.1) does not
    assert QueryContext("q", index, gw, make_config()).dense("q").chunk_ids == (1, 2, 3, 4, 5)
    assert r.scores == pytest.approx((1.0, 0.8, 0.6, 0.45), abs=1e-6)
    r2 = QueryContext("q", index, gw, make_config(retrieval__top_k=2)).dense("q")
    assert r2.chunk_ids == (1, 2)
    r3 = QueryContext("q", index, gw, make_config(retrieval__min_similarity=0.7)).dense("q")
    assert r3.chunk_ids == (1, 2)


def test_naive_paradigm_packs_and_generates_from_context():
    index = small_index()
    gw = ScriptedGateway({"generation": "Topic a."}, vectors={"q": unit((0, 1.0))})
    two = tokens.count(format_context(["Passage 1 about topic a.", "Passage 2 about topic b."]))
    res = PARADIGMS["naive"].run("q", None, index, gw, "gen", make_config(retrieval__token_budget=two))
    assert res.answer == "Topic a."
    assert res.retrieved_chunk_ids == [1, 2]
    assert res.context_tokens == two and res.iterations == 0
    [call] = gw.chats
    assert call["purpose"] == "generation" and call["phase"] == "generation" and call["temperature"] == 0.3
    assert "[1] Passage 1 about topic a.\n\n[2] Passage 2 about topic b." in call["messages"][1]["content"]
    assert res.calls == [(101, "generation")]
    assert (res.ret_in, res.ret_out) == (0, 0)
    assert res.gen_in == sum(tokens.count(m["content"]) for m in call["messages"]) and res.gen_out == tokens.count("Topic a.")
    assert res.trace["context"]["chunks"] == 2 and res.trace["context_scores"] == pytest.approx([1.0, 0.8], abs=1e-6)


def test_llm_only_uses_the_direct_prompt_at_its_own_temperature():
    gw = ScriptedGateway({"direct": "Paris."})
    res = PARADIGMS["llm_only"].run("Capital of France?", None, small_index(), gw, "gen",
                                    make_config(paradigms__llm_only__temperature=0.7))
    assert res.answer == "Paris." and res.retrieved_chunk_ids == [] and res.context_tokens == 0
    [call] = gw.chats
    assert call["purpose"] == "direct" and call["temperature"] == 0.7 and call["phase"] == "generation"
    assert res.gen_out == tokens.count("Paris.") and res.ret_in == 0
    assert gw.embeds == []  # no retrieval, no embedding


# --------------------------------------------------------------------------- graph retriever

# Graph for the PPR tests: a chain A-B-C-D-E plus a hub H linked to A and to F, G.
GRAPH_ENTITIES = ["A", "B", "C", "D", "E", "H", "F", "G"]
GRAPH_TRIPLES = [("A", "r1", "B", 1), ("B", "r2", "C", 2), ("C", "r3", "D", 3), ("D", "r4", "E", 4),
                 ("H", "r5", "A", 5), ("H", "r6", "F", 6), ("F", "r7", "G", 6)]


def graph_index(entity_sims: dict[str, float], triples=GRAPH_TRIPLES, names=GRAPH_ENTITIES) -> CorpusIndex:
    """Entities whose cosine with the query-entity direction e0 is ``entity_sims`` (else 0)."""
    ids, texts, toks, vecs = chunk_corpus()
    evecs = np.vstack([at_cos(entity_sims.get(n, 0.0), 0, 8 + (k % 8)) for k, n in enumerate(names)])
    eid = {n: 1000 + k for k, n in enumerate(names)}
    tri = [(eid[s], r, eid[o], c) for s, r, o, c in triples]
    return CorpusIndex(ids, texts, toks, vecs, [eid[n] for n in names], names, evecs, tri)


def test_seed_selection_top_k_threshold_and_max_pooling():
    names = [f"n{i}" for i in range(30)]
    # query entity X = e0, query entity Y = e1; node n{i} has cos a_i with X and b_i with Y
    evecs = []
    for i in range(30):
        a = 0.95 - 0.02 * i  # 0.95 .. 0.37: n0..n27 above 0.4 for X (n28: 0.39, n29: 0.37)
        b = 0.85 if i == 25 else (0.41 if i == 26 else 0.0)
        rest = np.sqrt(max(0.0, 1 - a * a - b * b))
        v = np.zeros(DIM)
        v[0], v[1], v[2 + i % 10] = a, b, rest
        evecs.append(v)
    evecs = np.asarray(evecs, dtype=np.float32)
    ids, texts, toks, cvecs = chunk_corpus()
    index = CorpusIndex(ids, texts, toks, cvecs, list(range(30)), names, evecs, [])
    r = GraphRetriever(index, Settings.from_config(make_config()))
    both = np.vstack([unit((0, 1.0)), unit((1, 1.0))])
    seeds = r.seeds(both)
    # X alone contributes its top-20 (n0..n19, all > 0.4); Y contributes n25 (0.85) and n26 (0.41)
    # (n25's cosine with Y is 0.85 > its 0.45 with X: max pooling keeps 0.9); top-20 overall
    expected = {f"n{i}": 0.95 - 0.02 * i for i in range(20)}
    expected["n25"] = 0.85
    expected["n26"] = 0.41
    top20 = dict(sorted(expected.items(), key=lambda kv: -kv[1])[:20])
    got = {names[p]: s for p, s in seeds.items()}
    assert set(got) == set(top20)
    for n, s in top20.items():
        assert got[n] == pytest.approx(s, abs=1e-5)
    assert "n26" not in got  # 0.41 is not in the top 20 after pooling (n19 is 0.57)
    # entity_top_k per query entity: with X alone and entity_top_k=5 only n0..n4
    r5 = GraphRetriever(index, Settings.from_config(make_config(retrieval__entity_top_k=5)))
    assert {names[p] for p in r5.seeds(both[:1])} == {f"n{i}" for i in range(5)}
    # the threshold is strict and applies before pooling: n27 (0.41) in, n28 (0.39) out
    rall = GraphRetriever(index, Settings.from_config(make_config(retrieval__entity_top_k=30,
                                                                  retrieval__seed_entities=30)))
    got_all = {names[p] for p in rall.seeds(both[:1])}
    assert "n27" in got_all and "n28" not in got_all and "n29" not in got_all and len(got_all) == 28


def _reference_ppr(index: CorpusIndex, seeds: dict[int, float], alpha: float) -> np.ndarray:
    g = nx.Graph()
    g.add_nodes_from(range(index.n_entities))
    g.add_edges_from(zip(index.triple_subject.tolist(), index.triple_object.tolist()))
    z = sum(seeds.values())
    pr = nx.pagerank(g, alpha=alpha, personalization={n: seeds.get(n, 0.0) / z for n in g}, tol=1e-12,
                     max_iter=1000)
    return np.array([pr[n] for n in range(index.n_entities)])


def test_graph_retrieval_ppr_nodes_triples_order_and_chunks():
    index = graph_index({"A": 0.9, "C": 0.5})
    gw = ScriptedGateway({"entities": {"entities": ["Query entity"]}}, vectors={"Query entity": unit((0, 1.0))})
    cfg = make_config(retrieval__ppr_max_nodes=3)
    r = QueryContext("Who is A?", index, gw, cfg).graph("Who is A?", "gen")
    assert r.details["entities"] == ["Query entity"] and r.details["entity_source"] == "llm"
    assert [s for s, _ in r.details["seeds"]] == ["A", "C"]
    pos = {n: i for i, n in enumerate(GRAPH_ENTITIES)}
    ref = _reference_ppr(index, {pos["A"]: 0.9, pos["C"]: 0.5}, 0.85)
    top3 = {GRAPH_ENTITIES[i] for i in np.argsort(-ref)[:3]}
    expected_nodes = top3 | {"A", "C"}
    assert set(r.details["nodes"]) == expected_nodes
    # triples of the induced subgraph, sorted by max endpoint similarity
    facts = [(f.subject, f.object) for f in r.facts]
    induced = [(s, o) for s, _, o, _ in GRAPH_TRIPLES if s in expected_nodes and o in expected_nodes]
    assert sorted(facts) == sorted(induced)
    sim = {n: float(index.entity_vectors[pos[n]] @ unit((0, 1.0))) for n in GRAPH_ENTITIES}
    keys = [max(sim[s], sim[o]) for s, o in facts]
    assert keys == sorted(keys, reverse=True)
    assert r.chunk_ids == tuple(dict.fromkeys(f.chunk_id for f in r.facts))


def test_graph_triple_order_uses_the_cosine_of_non_seed_endpoints():
    # one seed (A, 0.9); D (0.7) is no seed (seed_entities=1) but its triples rank by its cosine
    # (the paper's order: seed_weighting similarity; specificity in tests/test_graph_seeds.py)
    index = graph_index({"A": 0.9, "D": 0.7})
    gw = ScriptedGateway({"entities": {"entities": ["x"]}}, vectors={"x": unit((0, 1.0))})
    cfg = make_config(retrieval__seed_entities=1, retrieval__seed_weighting="similarity")
    r = QueryContext("q", index, gw, cfg).graph("q", "gen")
    assert [s for s, _ in r.details["seeds"]] == ["A"]
    order = [(f.subject, f.object) for f in r.facts]
    # 0.9: A-B, H-A (tie on A's PPR score -> index order); 0.7: C-D before D-E (C has more PPR mass
    # than E); then the triples whose endpoints have cosine 0
    assert order[:4] == [("A", "B"), ("H", "A"), ("C", "D"), ("D", "E")]
    assert set(order[4:]) == {("B", "C"), ("H", "F"), ("F", "G")}
    assert r.chunk_ids[:4] == (1, 5, 3, 4)  # the source chunks of those four triples
    assert r.scores[:4] == pytest.approx((0.9, 0.9, 0.7, 0.7), abs=1e-5)


def test_graph_ppr_min_score_drops_unreachable_nodes_but_keeps_seeds():
    # F-G is disconnected from the seed's component once H is removed: zero PPR mass there
    triples = [t for t in GRAPH_TRIPLES if t[0] != "H"]
    index = graph_index({"A": 0.9, "G": 0.45}, triples=triples)
    gw = ScriptedGateway({"entities": {"entities": ["x"]}}, vectors={"x": unit((0, 1.0))})
    cfg = make_config(retrieval__seed_entities=1)  # only A is a seed
    r = QueryContext("q", index, gw, cfg).graph("q", "gen")
    assert [s for s, _ in r.details["seeds"]] == ["A"]
    assert set(r.details["nodes"]) == {"A", "B", "C", "D", "E"}  # F, G, H have PPR 0 < 1e-5
    cfg2 = make_config(retrieval__seed_entities=1, retrieval__ppr_min_score=0.2)
    r2 = QueryContext("q", index, gw, cfg2).graph("q", "gen")
    ref = _reference_ppr(index, {0: 1.0}, 0.85)
    assert set(r2.details["nodes"]) == {GRAPH_ENTITIES[i] for i in range(len(ref)) if ref[i] >= 0.2} | {"A"}
    # seeds are kept even outside the top-k: two seeds (A, G); the top-1 node is B (A's only
    # neighbour collects more mass than A itself); F (reached from G) is cut
    r3 = QueryContext("q", index, gw, make_config(retrieval__ppr_max_nodes=1)).graph("q", "gen")
    assert [s for s, _ in r3.details["seeds"]] == ["A", "G"]
    ref3 = _reference_ppr(index, {0: 0.9, GRAPH_ENTITIES.index("G"): 0.45}, 0.85)
    assert GRAPH_ENTITIES[int(np.argmax(ref3))] == "B"
    assert r3.details["nodes"] == ["B", "A", "G"]  # top-k by score, then the seeds not among them
    assert [(f.subject, f.object) for f in r3.facts] == [("A", "B")]
    assert r3.chunk_ids == (1,)


def test_graph_triples_cap_and_ordering():
    # a star: S linked to 12 leaves with decreasing similarity; cap 5 triples
    leaves = [f"L{i}" for i in range(12)]
    names = ["S"] + leaves
    triples = [("S", "rel", leaf, 1 + i % 6) for i, leaf in enumerate(leaves)]
    sims = {"S": 0.3} | {leaf: 0.95 - 0.05 * i for i, leaf in enumerate(leaves)}
    index = graph_index(sims, triples=triples, names=names)
    gw = ScriptedGateway({"entities": {"entities": ["x"]}}, vectors={"x": unit((0, 1.0))})
    r = QueryContext("q", index, gw, make_config(retrieval__max_triples=5)).graph("q", "gen")
    assert r.details["subgraph_triples"] == 12 and r.details["triples"] == 5
    assert [f.object for f in r.facts] == ["L0", "L1", "L2", "L3", "L4"]
    assert r.chunk_ids == (1, 2, 3, 4, 5)
    assert r.scores == pytest.approx((0.95, 0.9, 0.85, 0.8, 0.75), abs=1e-5)
    r500 = QueryContext("q", index, gw, make_config()).graph("q", "gen")
    assert len(r500.facts) == 12 and r500.chunk_ids == (1, 2, 3, 4, 5, 6)


def test_graph_whole_query_fallback():
    index = graph_index({"A": 0.9})
    q = "Who is A?"
    # the LLM lists no entity: the whole question is embedded and used
    gw = ScriptedGateway({"entities": {"entities": []}}, vectors={q: unit((0, 1.0))})
    r = QueryContext(q, index, gw, make_config()).graph(q, "gen")
    assert r.details["entities"] == [q] and r.details["entity_source"] == "fallback"
    assert r.details["entity_error"] == "no_entities" and len(r.calls) == 1
    assert [s for s, _ in r.details["seeds"]] == ["A"]
    # an unusable reply (the gateway's parse failure): fallback, no call recorded
    gw2 = ScriptedGateway({"entities": GatewayError("unparseable_json", "bad")}, vectors={q: unit((0, 1.0))})
    r2 = QueryContext(q, index, gw2, make_config()).graph(q, "gen")
    assert r2.details["entities"] == [q] and r2.details["entity_error"] == "unparseable_json" and r2.calls == ()
    # a transport failure is not papered over
    gw3 = ScriptedGateway({"entities": GatewayError("timeout", "slow")})
    with pytest.raises(GatewayError):
        QueryContext(q, index, gw3, make_config()).graph(q, "gen")
    assert parse_entities({"entities": [" Paris ", "paris", 3, "", "Eiffel  Tower"]}) == ["Paris", "Eiffel Tower"]
    assert parse_entities(["X"]) == ["X"] and parse_entities("X") == []


def test_graph_paradigm_context_is_triples_with_source_sentences():
    index = graph_index({"A": 0.9})
    gw = ScriptedGateway({"entities": {"entities": ["x"]}, "generation": "A knows B."},
                         vectors={"x": unit((0, 1.0)), "Who is A?": unit((0, 1.0))})
    res = PARADIGMS["graph"].run("Who is A?", None, index, gw, "gen", make_config())
    assert [c["purpose"] for c in gw.chats] == ["entities", "generation"]
    assert [p for _, p in res.calls] == ["retrieval", "generation"]
    content = gw.chats[1]["messages"][1]["content"]
    # triple 1 (A | r1 | B, chunk 1) and its source sentence: chunk 1 says "... topic a." (names A)
    assert content.startswith("Context:\nKnowledge graph facts and their source sentences:\n"
                              "[1] A | r1 | B\nPassage 1 about topic a.\n[2] H | r5 | A\n")
    assert res.retrieved_chunk_ids[0] == 1 and res.context_tokens == tokens.count(
        content.split("Context:\n", 1)[1].split("\n\nQuestion:", 1)[0])
    assert res.trace["empty_context"] is False and res.trace["context"]["empty"] is False
    assert res.trace["context"]["facts"] == 7 and res.trace["context"]["skipped_facts"] == 0
    ext = gw.chats[0]
    assert res.ret_in == sum(tokens.count(m["content"]) for m in ext["messages"]) and ext["temperature"] == 0.0
    assert ext["schema"] == prompts.ENTITIES_SCHEMA


def _sourced_fixture():
    """Three chunks of real sentences and four triples: the second triple's source sentence is long."""
    from ragrouter.paradigms.context import Fact

    long = ("Aspirin irreversibly inhibits cyclooxygenase, which " + "blocks the synthesis of prostaglandins and "
            * 20 + "thromboxanes.")
    texts = {
        1: "Melanoma is a skin cancer. It is often treated with surgery. Sunlight is a risk factor.",
        2: f"The weather was fine. {long} Nothing else happened.",
        3: "Insulin lowers blood glucose. The pancreas makes insulin.",
    }
    facts = [Fact("melanoma", "is treated with", "surgery", 1),
             Fact("aspirin", "inhibits", "cyclooxygenase", 2),
             Fact("pancreas", "makes", "insulin", 3),
             Fact("melanoma", "is a", "skin cancer", 1)]
    return texts, facts, long


def test_source_sentences_are_the_chunk_sentences_naming_the_triple():
    from ragrouter.paradigms.context import SentenceSplitter, source_sentences

    texts, facts, long = _sourced_fixture()
    split = SentenceSplitter(texts)
    # both names in one sentence beat sentences naming one of them
    assert source_sentences(facts[3], split(1)) == ["Melanoma is a skin cancer."]
    assert source_sentences(facts[2], split(3)) == ["The pancreas makes insulin."]
    # "It is often treated with surgery." names only surgery, "Melanoma is a skin cancer." only melanoma
    assert source_sentences(facts[0], split(1)) == ["Melanoma is a skin cancer.", "It is often treated with surgery."]
    assert source_sentences(facts[1], split(2)) == [" ".join(long.split())]
    from ragrouter.paradigms.context import Fact

    assert source_sentences(Fact("zebra", "eats", "grass", 1), split(1)) == []  # named nowhere
    # whole words only: "a" is no mention inside "Melanoma"
    assert source_sentences(Fact("a", "r", "b", 3), split(3)) == []
    # the memo per triple returns what source_sentences computes
    assert [split.sources(f) for f in facts] == [source_sentences(f, split(f.chunk_id)) for f in facts]
    assert split.sources(facts[0]) is split.sources(facts[0])


def test_whole_word_search_equals_the_regex_it_replaces():
    import re

    from ragrouter.paradigms.context import _whole

    hay = ["the t-cell count", "t cell", "at cell", "cells", "t-cell", "x_t-cell", "(t-cell)", "t-cellé",
           "ét-cell", "t-cell t-cell", "no match", "t-cel", "a t-cell_b t-cell."]
    for name in ("t-cell", "cell", "t", "cell count", "é", "_b"):
        pat = re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)")
        for h in hay:
            assert _whole(h, name) == bool(pat.search(h)), (h, name)


def test_graph_context_fills_the_budget_greedily_with_later_triples():
    from ragrouter.paradigms.context import SOURCED_FACTS_HEADER, build_fact_context

    texts, facts, long = _sourced_fixture()
    full = build_fact_context(facts, texts, 100_000)
    assert [f.object for f in full.facts] == ["surgery", "cyclooxygenase", "insulin", "skin cancer"]
    assert full.tokens == tokens.count(full.text) and full.skipped == 0
    assert full.text.startswith(SOURCED_FACTS_HEADER + "\n[1] melanoma | is treated with | surgery\n"
                                "Melanoma is a skin cancer. It is often treated with surgery.\n[2] aspirin")
    # a sentence already in the context is not repeated: triple 4's only source is in block 1
    assert full.text.endswith("[4] melanoma | is a | skin cancer") and full.text.count("Melanoma is a skin cancer.") == 1
    assert full.sentences == 4 and full.chunk_ids == [1, 2, 3]
    # a budget too small for the long second block: it is skipped, the third and fourth still fill it
    first = build_fact_context(facts[:1], texts, 100_000)
    budget = first.tokens + 40
    ctx = build_fact_context(facts, texts, budget)
    assert [f.object for f in ctx.facts] == ["surgery", "insulin", "skin cancer"]
    assert ctx.skipped == 1 and ctx.chunk_ids == [1, 3]
    assert ctx.tokens == tokens.count(ctx.text) <= budget
    assert "[2] pancreas | makes | insulin\nThe pancreas makes insulin." in ctx.text and "aspirin" not in ctx.text
    # the old rule (stop at the first misfit) would have kept the first triple only
    assert ctx.tokens > first.tokens
    # every budget: exact count within it, and never a prefix-only stop when a later block fits
    for b in range(0, full.tokens + 1, 7):
        c = build_fact_context(facts, texts, b)
        assert c.tokens == (tokens.count(c.text) if c.text else 0) <= b
    assert build_fact_context(facts, texts, 5).text == ""  # nothing fits: empty context
    with pytest.raises(ValueError, match="token_budget"):
        build_fact_context(facts, texts, -1)


def test_empty_context_is_said_in_the_trace():
    # no entity clears the seed threshold: no triple, so GraphRAG's context is empty
    index = graph_index({"A": 0.3})
    gw = ScriptedGateway({"entities": {"entities": ["x"]}, "generation": "I cannot answer", "direct": "d"},
                         vectors={"x": unit((0, 1.0)), "q": unit((15, 1.0))})
    cfg = make_config()
    g = PARADIGMS["graph"].run("q", None, index, gw, "gen", cfg)
    assert g.trace["empty_context"] is True and g.trace["context"]["empty"] is True and g.context_tokens == 0
    assert "(no passages retrieved)" in gw.chats[-1]["messages"][1]["content"]
    n = PARADIGMS["naive"].run("q", None, index, gw, "gen", cfg)  # "q" is orthogonal to every chunk
    assert n.trace["empty_context"] is True and n.retrieved_chunk_ids == []
    assert "empty_context" not in PARADIGMS["llm_only"].run("q", None, index, gw, "gen", cfg).trace
    full = PARADIGMS["naive"].run("x", None, index, gw, "gen", cfg)
    assert full.trace["empty_context"] is False


def test_thresholds_are_per_embedder_model():
    from ragrouter.config import ConfigError

    cfg = make_config()
    assert cfg.backend(cfg.role("embedder"))["model"] == "all-MiniLM-L6-v2"
    table = cfg.get("retrieval.min_similarity")
    s = Settings.from_config(cfg)
    assert s.min_similarity == table["all-MiniLM-L6-v2"]
    assert s.entity_min_similarity == cfg.get("retrieval.entity_min_similarity")["all-MiniLM-L6-v2"]
    remote = make_config(roles__embedder="openai-embed")
    assert Settings.from_config(remote).min_similarity == 0.4 == Settings.from_config(remote).entity_min_similarity
    # an embedder model the map does not name gets its 'default'; a plain number applies to all
    other = make_config(backends__minilm__model="bge-small", retrieval__min_similarity={"default": 0.55})
    assert Settings.from_config(other).min_similarity == 0.55
    assert Settings.from_config(make_config(retrieval__min_similarity=0.7)).min_similarity == 0.7
    with pytest.raises(ConfigError, match="no value for embedder model 'bge-small'"):
        Settings.from_config(make_config(backends__minilm__model="bge-small",
                                         retrieval__entity_min_similarity={"x": 0.3}))
    with pytest.raises(ConfigError, match="retrieval.min_similarity.all-MiniLM-L6-v2"):
        Settings.from_config(make_config(retrieval__min_similarity={"all-MiniLM-L6-v2": 2}))
    # the seed threshold reaches GraphRetriever.seeds: A (0.5) is a seed under 0.45, not under 0.55
    index = graph_index({"A": 0.5})
    q = np.vstack([unit((0, 1.0))])
    assert GraphRetriever(index, Settings.from_config(make_config(retrieval__entity_min_similarity=0.45))).seeds(q)
    assert not GraphRetriever(index, Settings.from_config(make_config(retrieval__entity_min_similarity=0.55))).seeds(q)
    # and each threshold changes exactly the hashes of the paradigms that read it
    h = {n: config_hash(n, cfg) for n in PARADIGMS}
    ent = {n for n in PARADIGMS if config_hash(n, make_config(retrieval__entity_min_similarity=0.9)) != h[n]}
    assert ent == {"graph", "hybrid", "iterative"}
    chunk = {n for n in PARADIGMS if config_hash(n, make_config(retrieval__min_similarity=0.9)) != h[n]}
    assert chunk == {"naive", "hybrid", "iterative_naive"}


def test_timeouts_reach_every_gateway_call():
    index = graph_index({"A": 0.9})
    script = {"entities": {"entities": ["x"]}, "generation": "a", "direct": "d", "self_eval": ev(False, "")}
    cfg = make_config(generation__timeout_s=7.5, extraction__timeout_s=3.0)
    for name in PARADIGMS:
        gw = ScriptedGateway(dict(script), vectors={"x": unit((0, 1.0)), "q": unit((0, 1.0))})
        PARADIGMS[name].run("q", None, index, gw, "gen", cfg)
        assert gw.chats, name
        for call in gw.chats:
            assert call["timeout_s"] == (3.0 if call["purpose"] == "entities" else 7.5), (name, call["purpose"])
    gw = ScriptedGateway(dict(script), vectors={"x": unit((0, 1.0)), "q": unit((0, 1.0))})
    PARADIGMS["graph"].run("q", None, index, gw, "gen", make_config())
    assert {c["timeout_s"] for c in gw.chats} == {None}  # null: the backend's own timeout_s
    from ragrouter.config import ConfigError

    with pytest.raises(ConfigError, match="generation.timeout_s"):
        Settings.from_config(make_config(generation__timeout_s=0))


def test_judge_max_tokens_is_a_setting():
    from ragrouter.evaluation.stages import JudgeStage

    assert JudgeStage()._kwargs(make_config(), 0)["max_tokens"] == make_config().get("judge.max_tokens") == 300
    assert JudgeStage()._kwargs(make_config(judge__max_tokens=120), 1)["max_tokens"] == 120


def test_generation_timeout_stops_a_slow_endpoint_through_the_real_gateway(store):
    from ragrouter.corpus.stages import ExtractStage
    from ragrouter.llm.gateway import Gateway
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI(responder=lambda req: "Paris.", latency_s=0.6) as srv:
        data = copy.deepcopy(Config.load(env={}).data)
        data["backends"] = {"fake-gen": {"kind": "openai", "base_url": srv.base_url, "model": "fake-model",
                                         "concurrency": 2, "retries": 0, "timeout_s": 30}}
        data["roles"] = {k: "fake-gen" for k in ("extractor", "judge", "query_generator", "embedder")}
        data["roles"]["generators"] = ["fake-gen"]
        slow_ok = Config(data, source="<test>")
        data = copy.deepcopy(data)
        data["generation"]["timeout_s"] = 0.2
        data["extraction"]["timeout_s"] = 0.25
        strict = Config(data, source="<test>")
        with Gateway(slow_ok, store) as gw:  # the backend's 30 s: the 0.6 s reply arrives
            assert PARADIGMS["llm_only"].run("Capital?", None, small_index(), gw, "fake-gen", slow_ok).answer == "Paris."
        with Gateway(strict, store) as gw:  # generation.timeout_s = 0.2 s cuts the same (uncached) request
            with pytest.raises(GatewayError) as err:
                PARADIGMS["llm_only"].run("Capital of Spain?", None, small_index(), gw, "fake-gen", strict)
            assert err.value.reason == "timeout"

            class S:  # the extract stage hands extraction.timeout_s to the gateway call
                config = strict
            assert ExtractStage()._call_kwargs(S())["timeout_s"] == 0.25
            S.config = slow_ok
            assert ExtractStage()._call_kwargs(S())["timeout_s"] is None


def test_hybrid_fuses_both_lists():
    index = graph_index({"C": 0.9})
    q = "q"
    gw = ScriptedGateway({"entities": {"entities": ["x"]}, "generation": "ok"},
                         vectors={"x": unit((0, 1.0)), q: unit((0, 1.0))})
    qc = QueryContext(q, index, gw, make_config())
    naive, graph = qc.dense(q), qc.graph(q, "gen")
    res = PARADIGMS["hybrid"].run(q, qc, index, gw, "gen", make_config())
    fused = [c for c, _ in rrf_fuse([naive.chunk_ids, graph.chunk_ids], 60)]
    assert res.retrieved_chunk_ids == fused[: len(res.retrieved_chunk_ids)] and len(res.retrieved_chunk_ids) == len(fused)
    assert len(set(res.retrieved_chunk_ids)) == len(res.retrieved_chunk_ids)
    assert res.trace["retrieval"]["fused"] == len(fused)


# --------------------------------------------------------------------------- IterativeRAG


def ev(sufficient: bool, sub: str = "", reason: str = "r") -> dict:
    return {"sufficient": sufficient, "reason": reason, "sub_question": sub}


def iterative_setup(evals: list, base: str = "iterative_naive", **cfg):
    """IterativeRAG on the graph index; every sub-question finds different evidence (so no
    round repeats an earlier request): "sub 1?" points at e0 (chunks 1-4; entities A, C),
    "sub 2?" at chunk 6 and entity E, "sub 3?" at chunk 5 and entity H. The entity
    extractor returns the question itself as the one entity."""
    index = graph_index({"A": 0.9, "C": 0.6})
    vectors = {"Q?": unit((0, 1.0)), "sub 1?": unit((0, 1.0)), "sub 2?": unit((7, 1.0), (12, 1.0)),
               "sub 3?": unit((6, 1.0), (13, 1.0))}
    gw = ScriptedGateway({"direct": "I cannot answer", "self_eval": list(evals),
                          "generation": lambda m: f"answer {len(m[1]['content'])}",
                          "entities": lambda m: {"entities": [m[1]["content"].removeprefix("Question: ")]}},
                         vectors=vectors)
    res = PARADIGMS[base].run("Q?", None, index, gw, "gen", make_config(**cfg))
    return res, gw


def phases_match(res, gw):
    """The run lists every distinct ledger call the gateway served, with its phase, and
    sums their consumed tokens per phase."""
    distinct = {}
    for c in gw.chats:
        if "call_id" in c:
            distinct.setdefault(c["call_id"], c)
    assert sorted(res.calls) == sorted((cid, c["phase"]) for cid, c in distinct.items())
    for phase, (tin, tout) in {"retrieval": (res.ret_in, res.ret_out), "generation": (res.gen_in, res.gen_out)}.items():
        assert tin == sum(c["prompt_tokens"] for c in distinct.values() if c["phase"] == phase)
        assert tout == sum(c["completion_tokens"] for c in distinct.values() if c["phase"] == phase)


def test_iterative_stops_when_round_zero_is_sufficient():
    res, gw = iterative_setup([ev(True)])
    assert [c["purpose"] for c in gw.chats] == ["direct", "self_eval"]
    assert res.iterations == 0 and res.retrieved_chunk_ids == [] and res.context_tokens == 0
    assert res.answer == "I cannot answer" and res.trace["stop"] == "sufficient"
    assert [p for _, p in res.calls] == ["generation", "retrieval"]
    assert gw.chats[1]["temperature"] == 0.1 and gw.chats[0]["temperature"] == 0.3
    assert "Context:" not in gw.chats[1]["messages"][1]["content"]  # round 0 evaluates without context
    phases_match(res, gw)


def test_iterative_stops_when_there_is_no_sub_question():
    res, gw = iterative_setup([ev(False, "sub 1?"), ev(False, "")])
    assert [c["purpose"] for c in gw.chats] == ["direct", "self_eval", "generation", "self_eval"]
    assert res.iterations == 1 and res.trace["stop"] == "no_sub_question"
    assert res.trace["rounds"][1]["query"] == "sub 1?"
    assert res.answer.startswith("answer ") and res.retrieved_chunk_ids
    assert "Context:\n[1]" in gw.chats[3]["messages"][1]["content"]  # later rounds evaluate with context
    phases_match(res, gw)


def test_iterative_round_zero_without_sub_question_retrieves_with_the_question():
    res, gw = iterative_setup([ev(False, ""), ev(True)])
    assert res.trace["rounds"][1]["query"] == "Q?" and res.iterations == 1 and res.trace["stop"] == "sufficient"
    assert len(gw.chats) == 4


def test_iterative_stops_on_a_repeated_sub_question():
    res, gw = iterative_setup([ev(False, "sub 1?"), ev(False, "  SUB 1 ")])
    assert res.trace["stop"] == "repeated_sub_question" and res.iterations == 1 and len(gw.chats) == 4
    res2, gw2 = iterative_setup([ev(False, "sub 1?"), ev(False, "sub 2?"), ev(False, "q")])
    assert res2.trace["stop"] == "repeated_sub_question" and res2.iterations == 2 and len(gw2.chats) == 6
    assert normalise_query("  What's   X? ") == "what s x" and normalise_query("SUB 1") == normalise_query("sub 1?")


def test_iterative_stops_at_max_rounds_naive_and_graph():
    evals = [ev(False, "sub 1?"), ev(False, "sub 2?"), ev(False, "sub 3?"), ev(False, "sub 4?")]
    res, gw = iterative_setup(list(evals))
    assert res.iterations == 3 and res.trace["stop"] == "max_rounds"
    assert len(gw.chats) == 2 + 3 * 2 and gw.count("entities") == 0
    assert [r["query"] for r in res.trace["rounds"]] == ["Q?", "sub 1?", "sub 2?", "sub 3?"]
    phases_match(res, gw)
    res_g, gw_g = iterative_setup(list(evals), base="iterative")
    assert res_g.iterations == 3 and len(gw_g.chats) == 2 + 3 * 3 and gw_g.count("entities") == 3
    assert res_g.trace["base_retriever"] == "graph"
    phases_match(res_g, gw_g)
    res2, gw2 = iterative_setup(list(evals), paradigms__iterative__max_rounds=2)
    assert res2.iterations == 2 and len(gw2.chats) == 2 + 2 * 2 and res2.trace["stop"] == "max_rounds"
    res0, gw0 = iterative_setup(list(evals), paradigms__iterative__max_rounds=0)
    assert res0.iterations == 0 and len(gw0.chats) == 2 and res0.trace["stop"] == "max_rounds"


def test_iterative_unusable_evaluation_counts_as_insufficient_without_sub_question():
    res, gw = iterative_setup([GatewayError("schema_mismatch", "bad"), GatewayError("unparseable_json", "bad")])
    assert res.iterations == 1 and res.trace["stop"] == "no_sub_question"
    assert res.trace["rounds"][0]["eval"]["error"] == "schema_mismatch"
    assert [p for _, p in res.calls] == ["generation", "generation"]  # failed evaluations have no ledger row
    with pytest.raises(GatewayError):
        iterative_setup([GatewayError("server_error", "down")])


def test_iterative_context_accumulates_rounds_interleaved():
    assert interleave([(1, 2, 3), (4, 2, 5), (6,)]) == [1, 4, 6, 2, 3, 5]
    # chunk vectors: sub-question 2 points to chunk 6 (e0 is the query direction)
    index = small_index()
    vectors = {"Q?": unit((0, 1.0)), "sub 1?": unit((0, 1.0)), "sub 2?": unit((7, 1.0))}
    gw = ScriptedGateway({"direct": "?", "self_eval": [ev(False, "sub 1?"), ev(False, "sub 2?"), ev(True)],
                          "generation": "done"}, vectors=vectors)
    res = PARADIGMS["iterative_naive"].run("Q?", None, index, gw, "gen", make_config(retrieval__min_similarity=0.4))
    r2 = QueryContext("Q?", index, gw, make_config(retrieval__min_similarity=0.4)).dense("sub 2?")
    assert r2.chunk_ids == (6,)
    assert res.retrieved_chunk_ids == [1, 6, 2, 3, 4] and res.iterations == 2
    assert res.trace["rounds"][2]["new_chunks"] == 1
    assert "Passage 6" in gw.chats[-2]["messages"][1]["content"]
    assert "Question: Q?" in gw.chats[-2]["messages"][1]["content"]  # always the original question


def test_parse_evaluation_is_tolerant():
    assert parse_evaluation({"sufficient": "true", "sub_question": None}) == {"sufficient": True, "reason": "",
                                                                             "sub_question": ""}
    assert parse_evaluation({"sufficient": False, "sub_question": "None", "reason": "x"})["sub_question"] == ""
    assert parse_evaluation([1])["error"] == "not_an_object"


# --------------------------------------------------------------------------- config hash


def test_config_hash_tracks_hyperparameters_and_prompt_versions(monkeypatch):
    base = make_config()
    h = {n: config_hash(n, base) for n in PARADIGMS}
    assert len(set(h.values())) == len(h)
    assert h == {n: PARADIGMS[n].config_hash(base) for n in PARADIGMS}
    assert config_hash("naive", make_config()) == h["naive"]  # stable

    budget = {n: config_hash(n, make_config(retrieval__token_budget=4000)) for n in PARADIGMS}
    assert budget["llm_only"] == h["llm_only"]
    assert all(budget[n] != h[n] for n in PARADIGMS if n != "llm_only")
    rrf = {n: config_hash(n, make_config(retrieval__rrf_k=10)) for n in PARADIGMS}
    assert [n for n in PARADIGMS if rrf[n] != h[n]] == ["hybrid"]
    ppr = {n: config_hash(n, make_config(retrieval__ppr_alpha=0.5)) for n in PARADIGMS}
    assert {n for n in PARADIGMS if ppr[n] != h[n]} == {"graph", "hybrid", "iterative"}
    temp = {n: config_hash(n, make_config(paradigms__llm_only__temperature=0.2)) for n in PARADIGMS}
    assert [n for n in PARADIGMS if temp[n] != h[n]] == ["llm_only"]
    base_naive = {n: config_hash(n, make_config(paradigms__iterative__base_retriever="naive")) for n in PARADIGMS}
    assert [n for n in PARADIGMS if base_naive[n] != h[n]] == ["iterative"]
    assert paradigm_config("iterative", make_config(paradigms__iterative__base_retriever="naive"))["params"][
        "base_retriever"] == "naive"

    monkeypatch.setattr(prompts, "GENERATION", dataclasses.replace(prompts.GENERATION, version="gen-v999"))
    monkeypatch.setitem(prompts.PROMPTS, "generation", prompts.GENERATION)
    bumped = {n: config_hash(n, base) for n in PARADIGMS}
    assert bumped["llm_only"] == h["llm_only"]
    assert all(bumped[n] != h[n] for n in PARADIGMS if n != "llm_only")
    monkeypatch.setitem(prompts.PROMPTS, "self_eval", dataclasses.replace(prompts.SELF_EVAL, version="eval-v999"))
    assert {n for n in PARADIGMS if config_hash(n, base) != bumped[n]} == {"iterative", "iterative_naive"}


def test_bad_settings_raise_clear_errors():
    from ragrouter.config import ConfigError

    with pytest.raises(ConfigError, match="paradigms.iterative.base_retriever"):
        Settings.from_config(make_config(paradigms__iterative__base_retriever="bm25"))
    with pytest.raises(ConfigError, match="retrieval.top_k"):
        Settings.from_config(make_config(retrieval__top_k="many"))
    with pytest.raises(ConfigError, match="retrieval.ppr_alpha"):
        Settings.from_config(make_config(retrieval__ppr_alpha=1.5))
    with pytest.raises(KeyError, match="unknown paradigm"):
        config_hash("nope", make_config())


def test_corpus_index_rejects_inconsistent_input():
    ids, texts, toks, vecs = chunk_corpus()
    with pytest.raises(ValueError, match="token counts"):
        CorpusIndex(ids, texts, toks[:-1], vecs)
    with pytest.raises(ValueError, match="chunk_vectors"):
        CorpusIndex(ids, texts, toks, vecs[:-1])
    with pytest.raises(ValueError, match="triple #0 names entity id 9"):
        CorpusIndex(ids, texts, toks, vecs, [1], ["A"], vecs[:1], [(1, "r", 9, 1)])
    with pytest.raises(ValueError, match="triple #0 has source chunk 77"):
        CorpusIndex(ids, texts, toks, vecs, [1, 2], ["A", "B"], vecs[:2], [(1, "r", 2, 77)])


# --------------------------------------------------------------------------- shared QueryContext


def _shared_run(parallel: bool):
    index = graph_index({"A": 0.9, "C": 0.6})
    q = "Q?"
    gw = ScriptedGateway({"entities": {"entities": ["x"]}, "generation": "g", "direct": "d",
                          "self_eval": lambda m: ev(False, "")},
                         vectors={q: unit((0, 1.0)), "x": unit((0, 1.0))}, delay_s=0.02 if parallel else 0.0)
    cfg = make_config()
    qc = QueryContext(q, index, gw, cfg)
    names = ["naive", "graph", "hybrid", "iterative", "iterative_naive"]
    if parallel:
        with ThreadPoolExecutor(len(names)) as pool:
            results = dict(zip(names, pool.map(lambda n: PARADIGMS[n].run(q, qc, index, gw, "gen", cfg), names)))
    else:
        results = {n: PARADIGMS[n].run(q, qc, index, gw, "gen", cfg) for n in names}
    return results, gw, qc


@pytest.mark.parametrize("parallel", [False, True])
def test_query_context_embeds_searches_and_extracts_once(parallel):
    results, gw, qc = _shared_run(parallel)
    assert sum(t.count("Q?") for t in gw.embeds) == 1
    assert gw.count("entities") == 1  # graph, hybrid and iterative (round 1 on the question) share it
    assert qc.computed["naive"] == 1 and qc.computed["graph"] == 1
    ext_id = next(cid for r in [results["graph"]] for cid, ph in r.calls if ph == "retrieval")
    for name in ("graph", "hybrid", "iterative"):
        assert (ext_id, "retrieval") in results[name].calls
    assert results["graph"].ret_in == results["hybrid"].ret_in > 0
    assert results["graph"].ret_out == results["hybrid"].ret_out > 0
    assert results["naive"].ret_in == 0
    assert results["iterative"].trace["rounds"][1]["query"] == "Q?"


def test_without_a_shared_context_each_paradigm_embeds_again():
    index = graph_index({"A": 0.9})
    gw = ScriptedGateway({"generation": "g"}, vectors={"Q?": unit((0, 1.0))})
    for _ in range(2):
        PARADIGMS["naive"].run("Q?", None, index, gw, "gen", make_config())
    assert sum(t.count("Q?") for t in gw.embeds) == 2
    # a stored query vector skips the embedding altogether
    PARADIGMS["naive"].run("Q?", unit((0, 1.0)), index, gw, "gen", make_config())
    assert sum(t.count("Q?") for t in gw.embeds) == 2
    qc = QueryContext("Q?", index, gw, make_config())
    with pytest.raises(ValueError, match="not 'other'"):
        PARADIGMS["naive"].run("other", qc, index, gw, "gen", make_config())


# --------------------------------------------------------------------------- real gateway


def test_all_paradigms_through_the_real_gateway_and_fake_endpoint(store):
    from sqlalchemy import select

    from ragrouter.db.models import LLMCall
    from ragrouter.llm.gateway import Gateway, engine_lock
    from tests.fake_openai import FakeOpenAI, fake_embedding

    def responder(req):
        system = req["messages"][0]["content"]
        if "named entities" in system:
            return {"entities": ["Paris"]}
        if "fully and correctly answers" in system:
            return {"sufficient": "Context:" in req["messages"][-1]["content"], "reason": "ok", "sub_question": ""}
        return "Paris is the capital of France."

    dim = 32
    q = "What is the capital of France?"
    chunk_texts = ["Paris is the capital of France.", "Lyon is a city.", "Bread is food."]
    with FakeOpenAI(responder=responder, embedding_dim=dim) as srv:
        data = copy.deepcopy(Config.load(env={}).data)
        data["backends"] = {
            "fake-gen": {"kind": "openai", "base_url": srv.base_url, "model": "fake-model", "concurrency": 4,
                         "retries": 0, "timeout_s": 10},
            "fake-embed": {"kind": "openai", "base_url": srv.base_url, "model": "fake-embed", "concurrency": 4,
                           "retries": 0, "timeout_s": 10},
        }
        data["roles"] = {k: "fake-gen" for k in ("extractor", "judge", "query_generator")}
        data["roles"]["generators"] = ["fake-gen"]
        data["roles"]["embedder"] = "fake-embed"
        cfg = Config(data, source="<test>")
        vec = lambda t: fake_embedding(t, dim)  # noqa: E731 - what the fake endpoint returns
        index = CorpusIndex(
            [1, 2, 3], chunk_texts, [tokens.count(t) for t in chunk_texts],
            np.vstack([vec(q), vec("lyon"), vec("bread")]),
            [10, 11], ["Paris", "France"], np.vstack([vec("Paris"), vec("France")]), [(10, "capital of", 11, 1)],
        )
        with Gateway(cfg, store) as gw:
            qc = QueryContext(q, index, gw, cfg)
            results = {n: PARADIGMS[n].run(q, qc, index, gw, "fake-gen", cfg) for n in PARADIGMS}
            gw.flush()
            with engine_lock(store), store.connect() as conn:
                ledger = dict(conn.execute(select(LLMCall.id, LLMCall.phase)).all())
        embeds = [r for r in srv.requests if r["path"] == "/v1/embeddings"]
    assert results["naive"].retrieved_chunk_ids == [1]
    assert results["graph"].retrieved_chunk_ids == [1]
    assert results["graph"].trace["retrieval"]["seeds"][0][0] == "Paris"
    assert results["hybrid"].retrieved_chunk_ids == [1]
    assert results["iterative"].iterations == 1 and results["iterative"].trace["stop"] == "sufficient"
    for name, res in results.items():
        assert res.answer == "Paris is the capital of France."
        assert all(ledger.get(cid) == phase for cid, phase in res.calls), name  # real ledger rows, same phase
        json.dumps(res.trace)  # the trace is stored as JSON
        n_gen = sum(1 for _, phase in res.calls if phase == "generation")  # iterative: direct + round 1
        assert n_gen == (2 if name.startswith("iterative") else 1), name
        assert res.gen_in > 0 and res.gen_out == n_gen * tokens.count(res.answer)
    assert results["graph"].ret_in == results["hybrid"].ret_in > 0
    # the query was embedded once for all paradigms; the entity names once
    assert sum(1 for r in embeds if q in r["body"]["input"]) == 1


def test_query_context_embedding_requests_do_not_depend_on_what_was_embedded_before():
    """One request per distinct list of texts, whatever was embedded before (a text of an
    earlier list is not served to a later one), so the requests are a function of the callers'
    lists only: the same ledger rows on one worker or four, in any order. The query's stored
    vector serves the query text alone."""
    index = graph_index({"A": 0.9})

    def requests(order, query_vector=None):
        sent = []

        def embed_fn(texts):
            sent.append(tuple(texts))
            return np.vstack([unit((0, 1.0 + len(t))) for t in texts])

        qc = QueryContext("Q?", index, ScriptedGateway({}), make_config(), query_vector=query_vector,
                          embed_fn=embed_fn)
        out = [qc.vectors(texts) for texts in order]
        return sent, out

    a, b = ["x", "y"], ["y", "z", "y"]
    sent, out = requests([a, b, ["y"], a])
    assert sent == [("x", "y"), ("y", "z"), ("y",)]  # ["y"] is its own request, a repeats nothing
    assert out[1].shape == (3, index.dim) and np.allclose(out[1][0], out[1][2])
    assert np.allclose(out[2][0], out[0][1])
    assert sorted(requests([["y"], b, a])[0]) == sorted(sent)  # the same set in another order
    sent, out = requests([["Q?"], ["Q?", "x"]], query_vector=unit((0, 1.0)))
    assert sent == [("Q?", "x")] and np.allclose(out[0][0], unit((0, 1.0)))
