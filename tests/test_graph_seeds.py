"""Graph seeds that are not hubs (issue 30 item 2): ``retrieval.seed_weighting``.

* the chunks per node behind node specificity, and the restart vector of both weightings on a
  hub corpus, checked against networkx's pagerank with the same personalization vector;
* the trace field (``seed_weighting``, ``seed_weights``) in GraphRAG's and HybridRAG's traces and
  in the answer stage's stored trace;
* the config key: checked values, and the paradigm config hash (specificity: new runs beside the
  old ones; the paper's similarity: the hash runs had before the key existed);
* the person-centred corpus of ``benchmarks/bench_graph_seeds.py``: similarity weighting gives
  every question the hub's chunks, specificity the asked event's.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import networkx as nx
import numpy as np
import pytest

from ragrouter.config import Config, ConfigError
from ragrouter.paradigms import PARADIGMS, CorpusIndex, QueryContext, config_hash, paradigm_config
from ragrouter.paradigms.retrievers import GraphRetriever
from ragrouter.paradigms.settings import PAPER_SEED_WEIGHTING, SEED_WEIGHTINGS, Settings
from tests.test_paradigms import ScriptedGateway, at_cos, chunk_corpus, make_config, unit

# A hub H named in every chunk; A and E in one chunk each, B, C, D, F in two.
HUB_NAMES = ["H", "A", "B", "C", "D", "E", "F"]
HUB_TRIPLES = [("H", "a", "A", 1), ("A", "b", "B", 1), ("H", "c", "B", 2), ("H", "d", "C", 3), ("C", "e", "D", 3),
               ("H", "f", "C", 4), ("H", "g", "E", 5), ("E", "h", "F", 5), ("H", "i", "F", 6), ("D", "j", "F", 6)]
HUB_CHUNKS = {"H": 6, "A": 1, "B": 2, "C": 2, "D": 2, "E": 1, "F": 2}
SIMS = {"H": 0.9, "A": 0.6, "C": 0.5}  # cosine with the query entity (e0); the others 0


def hub_index(triples=HUB_TRIPLES, names=HUB_NAMES) -> CorpusIndex:
    ids, texts, toks, vecs = chunk_corpus()
    evecs = np.vstack([at_cos(SIMS.get(n, 0.0), 0, 8 + k % 8) for k, n in enumerate(names)])
    eid = {n: 500 + k for k, n in enumerate(names)}
    return CorpusIndex(ids, texts, toks, vecs, [eid[n] for n in names], names, evecs,
                       [(eid[s], r, eid[o], c) for s, r, o, c in triples])


def gateway() -> ScriptedGateway:
    return ScriptedGateway({"entities": {"entities": ["x"]}, "generation": "ok"}, vectors={"x": unit((0, 1.0))})


def networkx_ppr(index: CorpusIndex, personalization: dict[int, float]) -> np.ndarray:
    g = nx.Graph()
    g.add_nodes_from(range(index.n_entities))
    g.add_edges_from(zip(index.triple_subject.tolist(), index.triple_object.tolist()))
    pr = nx.pagerank(g, alpha=0.85, personalization={n: personalization.get(n, 0.0) for n in g}, tol=1e-13,
                     max_iter=2000)
    return np.array([pr[n] for n in range(index.n_entities)])


def test_chunks_per_node_counts_distinct_source_chunks_of_subject_and_object():
    index = hub_index()
    assert dict(zip(index.entity_names, index.entity_chunk_counts.tolist())) == HUB_CHUNKS
    # parallel triples of one chunk count once; an entity in no triple counts 0 (weighted as 1)
    extra = HUB_TRIPLES + [("A", "again", "H", 1), ("A", "self", "A", 1)]
    lone = hub_index(extra, HUB_NAMES + ["Z"])
    assert lone.entity_chunk_counts.tolist() == [HUB_CHUNKS[n] for n in HUB_NAMES] + [0]
    empty = CorpusIndex(*chunk_corpus())
    assert empty.entity_chunk_counts.shape == (0,)


@pytest.mark.parametrize("weighting, expected", [
    ("similarity", {"H": 0.45, "A": 0.30, "C": 0.25}),  # 0.9, 0.6, 0.5 over 2.0
    ("specificity", {"H": 0.15, "A": 0.60, "C": 0.25}),  # 0.9/6, 0.6/1, 0.5/2 over 1.0
])
def test_seed_weights_on_a_hub_corpus_match_networkx_pagerank(weighting, expected):
    index = hub_index()
    cfg = make_config(retrieval__seed_weighting=weighting, retrieval__ppr_max_nodes=3)
    r = QueryContext("q", index, gateway(), cfg).graph("q", "gen")
    assert r.details["seed_weighting"] == weighting
    got = {name: (chunks, w) for name, chunks, w in r.details["seed_weights"]}
    assert set(got) == set(expected)
    for name, w in expected.items():
        assert got[name] == (HUB_CHUNKS[name], pytest.approx(w, abs=1e-6))
    pos = {n: i for i, n in enumerate(HUB_NAMES)}
    vector = {pos[n]: w for n, w in expected.items()}
    ours = index.ppr(GraphRetriever(index, Settings.from_config(cfg)).personalization(
        {pos[n]: s for n, s in SIMS.items()}), 0.85, 1e-12)
    ref = networkx_ppr(index, vector)
    assert np.abs(ours - ref).sum() < 1e-9
    # the retrieval's nodes: networkx's top 3, then the seeds not among them
    top3 = [HUB_NAMES[i] for i in np.lexsort((np.arange(len(ref)), -ref))[:3]]
    assert r.details["nodes"] == top3 + [n for n in ("H", "A", "C") if n not in top3]


def test_specificity_moves_restart_mass_off_the_hub():
    index = hub_index()
    seeds = {0: 0.9, 1: 0.6, 3: 0.5}  # H, A, C
    by = {w: networkx_ppr(index, GraphRetriever(index, Settings.from_config(
        make_config(retrieval__seed_weighting=w))).personalization(seeds)) for w in SEED_WEIGHTINGS}
    assert by["specificity"][0] < by["similarity"][0]  # the hub's score falls
    assert by["specificity"][1] > by["similarity"][1]  # the one-chunk seed's rises
    # the hub keeps the mass its degree brings (it is still the top node here), not the restart's
    assert by["specificity"][0] - by["specificity"][1] < by["similarity"][0] - by["similarity"][1]


def test_specificity_orders_triples_by_similarity_over_chunks():
    # similarity: the hub's triples (0.9) come first; specificity: A's (0.6 / 1 chunk) before
    # C's (0.5 / 2) before the hub's (0.9 / 6), every node's similarity divided by its chunks
    index = hub_index()
    order = {}
    for w in SEED_WEIGHTINGS:
        r = QueryContext("q", index, gateway(), make_config(retrieval__seed_weighting=w)).graph("q", "gen")
        order[w] = [(f.subject, f.object) for f in r.facts]
        scores = dict(zip(r.chunk_ids, r.scores))
        assert list(r.scores) == sorted(r.scores, reverse=True)
    assert order["similarity"][:2] == [("H", "A"), ("H", "B")]
    assert order["specificity"][:3] == [("H", "A"), ("A", "B"), ("H", "C")]
    assert scores[1] == pytest.approx(0.6, abs=1e-5) and scores[3] == pytest.approx(0.25, abs=1e-5)


def test_seed_weights_in_the_graph_and_hybrid_traces():
    index = hub_index()
    cfg = make_config(retrieval__seed_weighting="specificity")
    g = PARADIGMS["graph"].run("Who is H?", None, index, gateway(), "gen", cfg)
    weights = g.trace["retrieval"]["seed_weights"]
    assert g.trace["retrieval"]["seed_weighting"] == "specificity"
    assert [name for name, _, _ in weights] == [name for name, _ in g.trace["retrieval"]["seeds"]]
    assert sum(w for _, _, w in weights) == pytest.approx(1.0, abs=1e-5)
    json.dumps(g.trace)  # JSON-able, as the answer stage stores it
    h = PARADIGMS["hybrid"].run("Who is H?", None, index, gateway(), "gen", cfg)
    assert h.trace["retrieval"]["graph"]["seed_weights"] == weights
    evals = [{"sufficient": False, "sub_question": "", "reason": "r"}, {"sufficient": True, "sub_question": "", "reason": "r"}]
    it = PARADIGMS["iterative"].run("Who is H?", None, index, ScriptedGateway(
        {"entities": {"entities": ["x"]}, "generation": "ok", "direct": "ok", "self_eval": evals},
        vectors={"x": unit((0, 1.0))}), "gen", cfg)
    assert it.trace["rounds"][1]["retrieval"]["seed_weights"] == weights
    # no seed: an empty list, the weighting still named
    none = PARADIGMS["graph"].run("q", None, hub_index(), ScriptedGateway(
        {"entities": {"entities": ["y"]}, "generation": "ok"}, vectors={"y": unit((5, 1.0))}), "gen", cfg)
    assert none.trace["retrieval"]["seed_weights"] == [] and none.trace["retrieval"]["seed_weighting"] == "specificity"


def test_config_key_values_default_and_errors():
    assert SEED_WEIGHTINGS == ("similarity", "specificity") and PAPER_SEED_WEIGHTING == "similarity"
    default = Config.load(env={})
    assert default.get("retrieval.seed_weighting") in SEED_WEIGHTINGS
    assert Settings.from_config(default).seed_weighting == default.get("retrieval.seed_weighting")
    with pytest.raises(ConfigError, match="retrieval.seed_weighting"):
        Settings.from_config(make_config(retrieval__seed_weighting="degree"))
    # a config without the key (a user's old full config merged elsewhere): the paper's weighting
    data = copy.deepcopy(default.data)
    del data["retrieval"]["seed_weighting"]
    assert Settings.from_config(Config(data, source="<test>")).seed_weighting == "similarity"


def test_config_hash_separates_specificity_runs_and_keeps_the_papers_hash():
    data = copy.deepcopy(Config.load(env={}).data)
    del data["retrieval"]["seed_weighting"]
    before_key = Config(data, source="<test>")  # what every run before the key was hashed with
    sim = make_config(retrieval__seed_weighting="similarity")
    spec = make_config(retrieval__seed_weighting="specificity")
    h_old, h_sim, h_spec = ({n: config_hash(n, c) for n in PARADIGMS} for c in (before_key, sim, spec))
    assert h_sim == h_old  # similarity-weighted runs made before the key are reused, not recomputed
    assert {n for n in PARADIGMS if h_spec[n] != h_sim[n]} == {"graph", "hybrid", "iterative"}
    assert "seed_weighting" not in paradigm_config("graph", sim)["params"]
    assert paradigm_config("hybrid", spec)["params"]["seed_weighting"] == "specificity"


def test_person_corpus_specificity_gives_each_question_its_own_chunks():
    from benchmarks.bench_graph_seeds import build_index, hashed_vectors, measure, person_corpus

    corpus = person_corpus(24)
    index = build_index(corpus, hashed_vectors)
    assert index.entity_chunk_counts[index.entity_names.index("maya")] == 24
    base = Settings.from_config(make_config())
    got = {w: measure(corpus, index, dataclasses.replace(base, seed_weighting=w), hashed_vectors, 5)
           for w in SEED_WEIGHTINGS}
    sim, spec = got["similarity"], got["specificity"]
    assert spec["hub_restart_mass"] < sim["hub_restart_mass"]
    assert spec["distinct_share"] > sim["distinct_share"] and spec["hit_at_k"] >= sim["hit_at_k"]


def test_answer_stage_stores_the_seed_weights_and_a_new_weighting_makes_new_runs(store):
    from tests.fake_openai import FakeOpenAI
    from tests.test_stages_answer import _json, fake_config, ingest, responder, rows, run

    def config(srv, weighting):
        data = copy.deepcopy(fake_config(srv).data)
        data["paradigms"]["enabled"] = ["graph", "hybrid"]
        data["retrieval"]["seed_weighting"] = weighting
        return Config(data, source="<test>")

    ingest(store)
    # the store's own count of distinct source chunks per entity name
    chunks_of = {}
    with FakeOpenAI(responder=responder, embedding_dim=32) as srv:
        run(store, config(srv, "similarity"), "chunk", "extract", "embed", "answer")
        first = rows(store, "SELECT id, paradigm, config_hash, trace FROM paradigm_runs ORDER BY id")
        for name, n in rows(store, "SELECT e.name, COUNT(DISTINCT t.chunk_id) FROM entities e JOIN triples t "
                                   "ON e.id IN (t.subject_id, t.object_id) GROUP BY e.name"):
            chunks_of[name] = n
        (again,), _ = run(store, config(srv, "specificity"), "answer")
        assert again.done == len(first) and again.failed == 0  # new runs, the old ones kept
        both = rows(store, "SELECT id, paradigm, config_hash, trace FROM paradigm_runs ORDER BY id")
    assert both[:len(first)] == first and len(both) == 2 * len(first)
    assert {r[2] for r in first}.isdisjoint({r[2] for r in both[len(first):]})
    seen = 0
    for rid, paradigm, _h, trace in both:
        ret = _json(trace)["retrieval"]
        ret = ret["graph"] if paradigm == "hybrid" else ret
        assert ret["seed_weighting"] == ("similarity" if rid <= first[-1][0] else "specificity")
        for name, chunks, weight in ret["seed_weights"]:
            assert chunks == chunks_of[name] and 0 < weight <= 1
            seen += 1
        if ret["seed_weights"]:
            assert sum(w for _, _, w in ret["seed_weights"]) == pytest.approx(1.0, abs=1e-5)
    assert seen > 0
    # the store's view for benchmarks/bench_graph_seeds.py --db: each accepted query with the
    # entities its latest graph run recorded
    from ragrouter.stages import storeio

    latest = {qid: _json(trace)["retrieval"]["entities"]
              for qid, trace in rows(store, "SELECT query_id, trace FROM paradigm_runs WHERE paradigm = 'graph' "
                                            "ORDER BY id")}
    got = storeio.graph_queries(store, "toy")
    accepted = rows(store, "SELECT id, question FROM queries WHERE status = 'accepted' ORDER BY id")
    assert [(q["id"], q["question"]) for q in got] == accepted and latest
    assert {q["id"]: q["entities"] for q in got if q["entities"] is not None} == latest
    assert all(q["unanswerable"] is False and isinstance(q["chunk_ids"], list) for q in got)


def test_the_benchmark_refuses_a_remote_embedder_with_one_line(tmp_path, capsys):
    """``bench_graph_seeds`` embeds in-process and makes no model call (``--db`` is read only):
    a config whose embedder is an HTTP endpoint gets one line naming it and status 2, before
    any store is opened or model loaded."""
    from benchmarks.bench_graph_seeds import main

    cfg = tmp_path / "remote.yaml"
    cfg.write_text("backends:\n  bge-remote:\n    kind: openai\n    model: bge-m3\n"
                   "    base_url: http://127.0.0.1:9/v1\nroles:\n  embedder: bge-remote\n")
    missing = tmp_path / "absent.duckdb"
    assert main(["--db", f"duckdb:///{missing}", "--store-corpus", "c", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'bge-remote'" in err[0] and "'openai'" in err[0] and "--hashed" in err[0]
    assert not missing.exists()
