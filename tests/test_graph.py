"""Knowledge graph construction and Personalized PageRank against networkx and exact solves."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from ragrouter.graph.kg import KnowledgeGraph, Triple
from ragrouter.graph.ppr import PPR, SOLVERS, PPRConvergenceError, top_nodes


# ---------------------------------------------------------------- helpers
def random_triples(seed: int, n: int = 300, m: int = 450, loops: int = 10, repeats: int = 40):
    """Random triples over n entity names with self-loops and repeated (parallel) pairs."""
    rng = np.random.default_rng(seed)
    names = [f"entity {i}" for i in range(n)]
    # a heavy-tailed choice of endpoints gives hubs, leaves and small components
    weights = 1.0 / (np.arange(n) + 5.0)
    weights /= weights.sum()
    triples = []
    for t in range(m):
        a, b = rng.choice(n, size=2, p=weights)
        triples.append((names[a], f"rel {rng.integers(25)}", names[b], f"chunk-{t % 97}"))
    for t in range(loops):
        a = int(rng.integers(n))
        triples.append((names[a], "is", names[a], f"chunk-loop-{t}"))
    for t in range(repeats):
        s, _, o, _ = triples[int(rng.integers(m))]
        triples.append((o, f"rel again {t % 3}", s, f"chunk-rep-{t}"))
    # entities seen only in a self-loop are isolated nodes of the simple graph
    triples.append(("lonely entity", "is", "lonely entity", "chunk-lonely"))
    return triples


def reference_graph(triples, extra_nodes=()):
    """networkx graph built independently from the raw triples (names as nodes)."""
    g = nx.Graph()
    g.add_nodes_from(extra_nodes)
    for s, _, o, *_ in triples:
        g.add_node(s)
        g.add_node(o)
        if s != o:
            g.add_edge(s, o)
    return g


def nx_scores(g, kg, personalization, alpha=0.85):
    pers = {kg.names[i]: w for i, w in personalization.items()}
    ref = nx.pagerank(g, alpha=alpha, personalization=pers, tol=1e-15, max_iter=100000)
    return np.array([ref[name] for name in kg.names])


def exact_ppr(adjacency: sp.sparray, p: np.ndarray, alpha: float) -> np.ndarray:
    """Dense linear solve of networkx's fixed point (directed rows = out-edges)."""
    w = adjacency.toarray().astype(float)
    n = w.shape[0]
    out = w.sum(axis=1)
    g = np.zeros((n, n))
    for i in range(n):
        g[:, i] = w[i] / out[i] if out[i] > 0 else p  # column i: where node i's mass goes
    return np.linalg.solve(np.eye(n) - alpha * g, (1 - alpha) * p)


def assert_same_ranking(ours: np.ndarray, ref: np.ndarray, k: int = 100, seeds=()):
    """Same top-k list, up to the order of nodes whose reference scores tie (1e-12)."""
    a = top_nodes(ours, k=k, min_score=1e-5, always=seeds)
    b = top_nodes(ref, k=k, min_score=1e-5, always=seeds)
    assert len(a) == len(b)
    np.testing.assert_allclose(ours[a], ref[b], rtol=0, atol=1e-8)
    for x, y in zip(a, b):
        if x != y:
            assert abs(ref[x] - ref[y]) < 1e-12, (x, y, ref[x], ref[y])


# ---------------------------------------------------------------- KnowledgeGraph
def test_from_triples_index_edges_and_triples():
    triples = [
        ("Paris", "capital of", "France", 1),
        ("France", "has capital", "Paris", 2),   # parallel, reversed: same edge
        ("Paris", "located in", "Europe", 1),
        ("Seine", "flows through", "Paris", 3),
        ("Europe", "is", "Europe", 4),            # self-loop: no edge
        ("Atlantis", "is", "Atlantis"),           # isolated node, no chunk id
    ]
    kg = KnowledgeGraph.from_triples(triples, nodes=["Zurich"])
    assert kg.names == ["Zurich", "Paris", "France", "Europe", "Seine", "Atlantis"]
    assert kg.node_id("Seine") == 4
    assert (kg.n_nodes, kg.n_edges, kg.n_triples) == (6, 3, 6)
    assert kg.relation_types == 5  # capital of, has capital, located in, flows through, is
    assert kg.neighbors(kg.node_id("Paris")).tolist() == [2, 3, 4]
    assert kg.neighbors(kg.node_id("Atlantis")).tolist() == []
    assert kg.degree.tolist() == [0, 3, 1, 1, 1, 0]
    assert kg.adjacency.diagonal().sum() == 0
    assert (kg.adjacency != kg.adjacency.T).nnz == 0
    assert kg.triple(5) == Triple("Atlantis", "is", "Atlantis", None)
    # induced subgraph triples: both parallel triples, the self-loop of Europe
    between = kg.triples_between([kg.node_id(x) for x in ("Paris", "France", "Europe")])
    assert between == [Triple("Paris", "capital of", "France", 1),
                       Triple("France", "has capital", "Paris", 2),
                       Triple("Paris", "located in", "Europe", 1),
                       Triple("Europe", "is", "Europe", 4)]
    assert kg.triples_between([kg.node_id("Seine")]) == []
    assert kg.triple_ids_between([]).tolist() == []
    with pytest.raises(KeyError, match="Narnia"):
        kg.node_id("Narnia")
    with pytest.raises(IndexError):
        kg.neighbors(6)
    with pytest.raises(IndexError):
        kg.triples_between([0, 99])


@pytest.mark.parametrize("bad, message", [
    ([("a", "r")], "triple #0"),
    ([("a", "r", "b"), ("a", "r", "")], "triple #1: object"),
    ([("a", "r", "b"), (None, "r", "b")], "triple #1: subject"),
    ([("a", 5, "b")], "triple #0: relation"),
    (["abc"], "triple #0"),
])
def test_from_triples_rejects_malformed_records(bad, message):
    with pytest.raises(ValueError, match=message):
        KnowledgeGraph.from_triples(bad)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_graph_matches_networkx_built_from_raw_triples(seed):
    triples = random_triples(seed)
    kg = KnowledgeGraph.from_triples(triples)
    ref = reference_graph(triples)
    g = kg.to_networkx(names=True)
    assert set(g.nodes) == set(ref.nodes)
    assert {frozenset(e) for e in g.edges} == {frozenset(e) for e in ref.edges}
    assert kg.n_edges == ref.number_of_edges()
    assert kg.relation_types == len({t[1] for t in triples})
    gi = kg.to_networkx()
    assert sorted(gi.nodes) == list(range(kg.n_nodes))
    assert gi.nodes[3]["name"] == kg.names[3]
    for i in range(0, kg.n_nodes, 17):
        assert set(kg.neighbors(i).tolist()) == set(gi.neighbors(i))
    # triples_between agrees with a brute-force scan over all triples
    rng = np.random.default_rng(seed)
    chosen = set(rng.choice(kg.n_nodes, size=60, replace=False).tolist())
    expect = [t for t in (Triple(*rec) for rec in triples)
              if kg.index[t.subject] in chosen and kg.index[t.object] in chosen]
    assert kg.triples_between(chosen) == expect


# ---------------------------------------------------------------- PPR vs networkx
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("method", ["cg", "power"])
def test_ppr_equals_networkx_pagerank(seed, method):
    triples = random_triples(seed, n=400, m=600)
    kg = KnowledgeGraph.from_triples(triples)
    g = kg.to_networkx()
    assert nx.number_connected_components(g) > 1
    assert any(d == 0 for _, d in g.degree)  # isolated (dangling) nodes exist
    rng = np.random.default_rng(100 + seed)
    seeds = rng.choice(kg.n_nodes, size=20, replace=False).tolist()
    pers = {s: float(rng.uniform(0.4, 1.0)) for s in seeds}
    pers[kg.node_id("lonely entity")] = 0.3  # mass on a dangling node
    ref = np.array(list(nx.pagerank(g, 0.85, personalization=pers, tol=1e-15,
                                    max_iter=100000).values()))
    ppr = PPR(kg)
    assert ppr.elimination_stats()["levels"] > 2
    ours = ppr.run(pers, alpha=0.85, tol=1e-10, method=method)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-9)
    assert ours.sum() == pytest.approx(1.0, abs=1e-9)
    assert_same_ranking(ours, ref, seeds=list(pers))


def test_ppr_on_disconnected_graph_keeps_mass_in_seed_components():
    # two cliques, a path and isolated nodes; seeds only in the first clique and the path
    g = nx.disjoint_union_all([nx.complete_graph(6), nx.complete_graph(5), nx.path_graph(7),
                               nx.empty_graph(3)])
    kg = KnowledgeGraph.from_triples([(str(u), "r", str(v)) for u, v in g.edges],
                                     nodes=[str(i) for i in range(g.number_of_nodes())])
    pers = {0: 1.0, 2: 2.0, 11: 0.5, 12: 0.7}  # 11 is a path end, 12 its parent: both peeled
    ref = np.array(list(nx.pagerank(g, 0.85, personalization=pers, tol=1e-15,
                                    max_iter=10000).values()))
    ppr = PPR(kg)
    for method in SOLVERS:
        ours = ppr.run(pers, method=method)
        np.testing.assert_allclose(ours, ref, atol=1e-10)
        assert np.all(ours[6:11] == 0) and np.all(ours[18:] == 0)
    assert_same_ranking(ppr.run(pers), ref, seeds=list(pers))


@pytest.mark.parametrize("seed", [0, 1])
def test_ppr_directed_with_dangling_nodes_and_weights(seed):
    g = nx.gnp_random_graph(120, 0.03, seed=seed, directed=True)
    rng = np.random.default_rng(seed)
    for u, v in g.edges:
        g[u][v]["weight"] = float(rng.uniform(0.5, 2.0))
    dangling = [v for v in g if g.out_degree(v) == 0]
    assert dangling
    w = nx.to_scipy_sparse_array(g, nodelist=range(120), weight="weight")
    ppr = PPR(w)
    assert ppr.method == "power" and not ppr.symmetric
    pers = {int(v): float(rng.random()) + 0.1 for v in rng.choice(120, 8, replace=False)}
    pers[dangling[0]] = 0.5
    ref = np.array([nx.pagerank(g, 0.85, personalization=pers, tol=1e-15,
                                max_iter=10000)[v] for v in range(120)])
    ours = ppr.run(pers)
    np.testing.assert_allclose(ours, ref, atol=1e-9)
    p = ppr.personalization_vector(pers)
    np.testing.assert_allclose(ours, exact_ppr(w, p, 0.85), atol=1e-10)
    with pytest.raises(ValueError, match="symmetric"):
        ppr.run(pers, method="cg")


@pytest.mark.parametrize("method", ["cg", "power"])
@pytest.mark.parametrize("tol", [1e-4, 1e-7, 1e-10])
def test_ppr_tol_bounds_the_l1_error(method, tol):
    kg = KnowledgeGraph.from_triples(random_triples(7, n=250, m=420))
    p = np.zeros(kg.n_nodes)
    rng = np.random.default_rng(7)
    p[rng.choice(kg.n_nodes, 20, replace=False)] = rng.random(20)
    p[kg.node_id("lonely entity")] = 0.2
    p /= p.sum()
    for alpha in (0.5, 0.85, 0.95):
        exact = exact_ppr(kg.adjacency, p, alpha)
        ours = PPR(kg).run(p, alpha=alpha, tol=tol, method=method)
        assert np.abs(ours - exact).sum() <= tol
    assert np.abs(PPR(kg).run(p, alpha=0.85, tol=1e-10, method=method) - exact_ppr(
        kg.adjacency, p, 0.85)).max() < 1e-11


def test_ppr_tree_elimination_on_larger_kg_like_graph():
    """A 4,000-node graph with a deep tree, a long path and a random core:
    CG (with elimination) == power == nx."""
    rng = np.random.default_rng(11)
    n = 4000
    edges = [(int(rng.integers(0, i)), i) for i in range(1, 1500)]  # a random tree
    edges += [(i - 1, i) for i in range(1500, 2500)]                 # a long path
    edges += [tuple(rng.choice(np.arange(2500, 3600), 2, replace=False)) for _ in range(1800)]
    edges += [(int(rng.integers(0, 1500)), int(rng.integers(2500, 3600))) for _ in range(5)]
    kg = KnowledgeGraph.from_triples([(f"n{u}", "r", f"n{v}") for u, v in edges],
                                     nodes=[f"n{i}" for i in range(n)])
    ppr = PPR(kg)
    stats = ppr.elimination_stats()
    assert stats["levels"] > 5 and 0 < stats["kernel_nodes"] < n // 4
    g = kg.to_networkx(names=True)
    for q in range(3):
        seeds = rng.choice(n, 20, replace=False)
        pers = {int(s): float(rng.random()) + 0.01 for s in seeds}
        ref = nx_scores(g, kg, pers)
        cg = ppr.run(pers, method="cg")
        power = ppr.run(pers, method="power")
        np.testing.assert_allclose(cg, ref, atol=1e-10)
        np.testing.assert_allclose(power, ref, atol=1e-10)
        assert_same_ranking(cg, ref, seeds=list(pers))


def test_ppr_edge_cases_and_errors():
    kg = KnowledgeGraph.from_triples([("a", "r", "b"), ("b", "r", "c"), ("d", "is", "d")])
    ppr = PPR(kg)
    # alpha = 0: the personalization itself
    np.testing.assert_allclose(ppr.run({0: 1, 2: 3}, alpha=0.0), [0.25, 0, 0.75, 0])
    # all mass on an isolated node stays there
    np.testing.assert_allclose(ppr.run({3: 1.0}), [0, 0, 0, 1.0])
    # array personalization equals dict personalization
    np.testing.assert_allclose(ppr.run(np.array([1.0, 0, 0, 0])), ppr.run({0: 5.0}))
    with pytest.raises(ValueError, match="alpha"):
        ppr.run({0: 1}, alpha=1.0)
    with pytest.raises(ValueError, match="out of range"):
        ppr.run({7: 1})
    with pytest.raises(ValueError, match="sum to zero"):
        ppr.run({0: 0.0})
    with pytest.raises(ValueError, match="non-negative"):
        ppr.run({0: -1.0, 1: 2.0})
    with pytest.raises(ValueError, match="expected 4 entries"):
        ppr.run(np.ones(3))
    with pytest.raises(ValueError, match="unknown PPR method"):
        ppr.run({0: 1}, method="magic")
    with pytest.raises(PPRConvergenceError):
        ppr.run({0: 1}, method="power", max_iter=2)
    with pytest.raises(TypeError):
        PPR(np.eye(3))


# ---------------------------------------------------------------- top_nodes
def test_top_nodes_threshold_order_ties_and_seeds():
    scores = np.array([0.3, 1e-6, 0.2, 0.2, 5e-5, 0.0, 0.25])
    assert top_nodes(scores, k=3).tolist() == [0, 6, 2]          # tie 2/3: lower id first
    assert top_nodes(scores, k=10).tolist() == [0, 6, 2, 3, 4]   # 1e-6 and 0 below 1e-5
    assert top_nodes(scores, k=2, always=[5, 0, 1]).tolist() == [0, 6, 5, 1]
    assert top_nodes(scores, k=0, always=[4]).tolist() == [4]
    assert top_nodes(scores, k=10, min_score=0.21).tolist() == [0, 6]
    big = np.random.default_rng(0).random(5000)
    assert top_nodes(big, k=100).tolist() == np.argsort(-big, kind="stable")[:100].tolist()
    with pytest.raises(ValueError, match="out of range"):
        top_nodes(scores, always=[9])


def test_ppr_solves_run_one_at_a_time_and_give_each_thread_its_own_result(monkeypatch):
    """PPR.run holds a process-wide lock around the solver (ppr.py's docstring: solves that
    share the GIL side by side all finish late). 8 threads on two graphs: never two solves at
    once, and every thread gets networkx's scores for its own seeds."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    import ragrouter.graph.ppr as ppr_mod

    graphs = [nx.gnm_random_graph(60, 150, seed=s) for s in (1, 2)]
    pprs = [PPR(sp.csr_array(nx.to_scipy_sparse_array(g, nodelist=range(60)))) for g in graphs]
    inside, peak, lock = [0], [0], threading.Lock()
    solver = ppr_mod.SOLVERS["cg"]

    def counting(*args):
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        time.sleep(0.01)  # long enough for the other threads to arrive
        try:
            return solver(*args)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setitem(ppr_mod.SOLVERS, "cg", counting)

    def one(i):
        g, p = graphs[i % 2], pprs[i % 2]
        seeds = {i: 1.0, (i * 7 + 3) % 60: 2.0}
        return i, p.run(seeds, alpha=0.85, tol=1e-12), g, seeds

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8)))
    assert peak[0] == 1
    for i, got, g, seeds in results:
        z = sum(seeds.values())
        want = nx.pagerank(g, alpha=0.85, personalization={n: seeds.get(n, 0.0) / z for n in g}, tol=1e-14,
                           max_iter=10_000)
        np.testing.assert_allclose(got, [want[n] for n in range(60)], atol=1e-9)
