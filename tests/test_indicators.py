"""Corpus indicators against networkx, scikit-dimension and brute-force references."""

from __future__ import annotations

import math
import warnings

import networkx as nx
import numpy as np
import pytest
from scipy.spatial.distance import cdist
from scipy.stats import skew

from ragrouter.corpus import indicators as ind
from ragrouter.graph.kg import KnowledgeGraph


# ---------------------------------------------------------------- structural
def random_kg_triples(seed: int, n: int = 400, m: int = 900):
    """Triples with hubs, triangles, self-loops, repeated pairs and isolated entities."""
    rng = np.random.default_rng(seed)
    g = nx.powerlaw_cluster_graph(n // 2, 2, 0.4, seed=seed)        # many triangles + hubs
    triples = [(f"e{u}", f"r{rng.integers(40)}", f"e{v}") for u, v in g.edges]
    for _ in range(m - len(triples)):                               # sparse random part
        u, v = rng.integers(n // 2, n, size=2)
        triples.append((f"e{u}", f"r{rng.integers(40)}", f"e{v}"))  # includes u == v sometimes
    for t in rng.choice(len(triples), 50, replace=False):          # parallel/reversed repeats
        s, r, o = triples[t]
        triples.append((o, r + "'", s))
    triples += [("island", "is", "island"), ("e3", "same as", "e3")]
    return triples


def reference_nx(triples, extra_nodes=()):
    g = nx.Graph()
    g.add_nodes_from(extra_nodes)
    for s, _, o in triples:
        g.add_edge(s, o)
    g.remove_edges_from(list(nx.selfloop_edges(g)))
    return g


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_structural_indicators_equal_networkx(seed):
    triples = random_kg_triples(seed)
    extra = ["unused entity A", "unused entity B"]
    kg = KnowledgeGraph.from_triples(triples, nodes=extra)
    ref = reference_nx(triples, extra)
    assert any(u == v for u, _, v in triples)  # the input had self-loops
    got = ind.structural_indicators(kg)
    assert list(got) == list(ind.STRUCTURAL_METRICS)
    assert got["nodes"] == ref.number_of_nodes()
    assert got["edges"] == ref.number_of_edges()
    assert got["density"] == pytest.approx(nx.density(ref), rel=1e-12)
    assert got["relation_types"] == len({r for _, r, _ in triples})
    assert got["avg_degree"] == pytest.approx(
        sum(d for _, d in ref.degree) / ref.number_of_nodes(), rel=1e-12)
    assert got["max_degree_centrality"] == pytest.approx(max(nx.degree_centrality(ref).values()), rel=1e-12)
    assert got["max_degree_centrality"] > got["avg_degree"] / (ref.number_of_nodes() - 1)  # hubs
    assert got["components"] == nx.number_connected_components(ref)
    assert got["lcc_ratio"] == pytest.approx(
        len(max(nx.connected_components(ref), key=len)) / ref.number_of_nodes(), rel=1e-12)
    assert got["clustering"] == pytest.approx(nx.average_clustering(ref), rel=1e-12)
    assert got["clustering"] > 0.01
    # per node: triangles and local clustering, in the kg's node order
    tri = nx.triangles(ref)
    local = nx.clustering(ref)
    assert ind.triangle_counts(kg.adjacency).tolist() == [tri[name] for name in kg.names]
    np.testing.assert_allclose(ind.clustering_coefficients(kg.adjacency),
                               [local[name] for name in kg.names], rtol=1e-12, atol=0)


def test_structural_indicators_on_hand_made_graph():
    # triangle a-b-c with a pendant d on c, plus isolated e (via a self-loop)
    triples = [("a", "r1", "b"), ("b", "r2", "c"), ("c", "r1", "a"), ("c", "r3", "d"),
               ("a", "r1", "b"), ("e", "r4", "e")]
    got = ind.structural_indicators(KnowledgeGraph.from_triples(triples))
    assert got == {
        "nodes": 5, "edges": 4, "density": pytest.approx(2 * 4 / (5 * 4)),
        "relation_types": 4, "avg_degree": pytest.approx(8 / 5), "components": 2,
        "max_degree_centrality": pytest.approx(3 / 4),  # c: neighbours a, b, d of 4 others
        "lcc_ratio": pytest.approx(4 / 5),
        # C(a) = C(b) = 1, C(c) = 1 / 3 (1 of 3 neighbour pairs linked), d and e: 0
        "clustering": pytest.approx((1 + 1 + 1 / 3) / 5),
    }
    # a dense hub graph: every clustering coefficient of the complete graph is 1
    k6 = nx.complete_graph(6)
    assert ind.average_clustering(nx.to_scipy_sparse_array(k6)) == pytest.approx(1.0)
    assert ind.triangle_counts(nx.to_scipy_sparse_array(k6)).tolist() == [10] * 6


def test_structural_indicators_star_and_errors():
    star = nx.star_graph(50)  # hub of degree 50, no triangles
    a = nx.to_scipy_sparse_array(star)
    got = ind.structural_indicators(a)
    assert got["clustering"] == 0.0 and got["components"] == 1 and got["relation_types"] == 0
    assert got["lcc_ratio"] == 1.0
    assert got["max_degree_centrality"] == 1.0 == max(nx.degree_centrality(star).values())
    single = ind.structural_indicators(KnowledgeGraph.from_triples([("x", "is", "x")]))
    assert single["density"] == 0.0 and single["nodes"] == 1 and single["edges"] == 0
    one = nx.Graph()
    one.add_node("x")
    assert single["max_degree_centrality"] == max(nx.degree_centrality(one).values()) == 1.0
    with pytest.raises(TypeError, match="square scipy sparse"):
        ind.structural_indicators(np.ones((3, 3)))
    empty = ind.structural_indicators(KnowledgeGraph.from_triples([]))
    assert (empty["nodes"], empty["edges"], empty["components"]) == (0, 0, 0)
    assert math.isnan(empty["density"]) and math.isnan(empty["clustering"])
    assert math.isnan(empty["max_degree_centrality"])
    with pytest.raises(ValueError, match="no nodes"):
        ind.average_clustering(KnowledgeGraph.from_triples([]).adjacency)


# ---------------------------------------------------------------- semantic
def subspace_points(n: int, dim: int, ambient: int, seed: int) -> np.ndarray:
    """Gaussian points on a random ``dim``-dimensional linear subspace of R^ambient."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(ambient, dim)))
    return (rng.normal(size=(n, dim)) @ basis.T).astype(np.float32)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # skdim's unused y_
@pytest.mark.parametrize("dim, seed", [(5, 0), (5, 1), (3, 2), (9, 3)])
def test_twonn_recovers_dimension_and_matches_skdim(dim, seed):
    import skdim

    x = subspace_points(1500, dim, 50, seed)
    ours = ind.twonn_dimension(x)
    n = len(x)
    # known dimension; the MLE's standard error is about dim / sqrt(n)
    assert abs(ours - dim) < 5 * dim / math.sqrt(n)
    # scikit-dimension, plain estimator (nothing discarded, closed-form MLE), computes its
    # own distances; it reports the bias-corrected (N - 1) / sum(ln mu)
    ref = skdim.id.TwoNN(discard_fraction=0.0, method="mle").fit(x.astype(np.float64))
    assert ours * (n - 1) / n == pytest.approx(ref.dimension_, rel=1e-9)
    # and L2-normalised chunk-like vectors: a dim-subspace on the unit sphere is (dim-1)-d
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    ref_unit = skdim.id.TwoNN(discard_fraction=0.0, method="mle").fit(unit.astype(np.float64))
    assert ind.twonn_dimension(unit) * (n - 1) / n == pytest.approx(ref_unit.dimension_,
                                                                    rel=1e-9)


def brute_force_neighbors(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    d = cdist(x.astype(np.float64), x.astype(np.float64))
    np.fill_diagonal(d, np.inf)
    order = np.argsort(d, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(d, order, axis=1)


def test_twonn_drops_duplicates_like_the_plain_estimator():
    x = subspace_points(600, 4, 20, 5)
    x = np.concatenate([x, x[:25], x[100:101], x[100:101]])  # pairs and a triple of copies
    _, dist = brute_force_neighbors(x, 2)
    r1, r2 = dist[:, 0], dist[:, 1]
    keep = r1 > 0
    assert (~keep).sum() == 25 * 2 + 3
    expected = 1.0 / np.mean(np.log(r2[keep] / r1[keep]))
    assert ind.twonn_dimension(x) == pytest.approx(expected, rel=1e-9)
    # skdim drops the same points when given the same (r1, r2)
    import skdim

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = skdim.id.TwoNN(discard_fraction=0.0, method="mle", dist=True).fit(
            np.stack([r1, r2], axis=1))
    n_kept = int(keep.sum())
    assert expected * (n_kept - 1) / n_kept == pytest.approx(ref.dimension_, rel=1e-12)
    with pytest.raises(ValueError, match="duplicates"):
        ind.twonn_dimension(np.repeat(x[:1], 5, axis=0))


@pytest.mark.parametrize("seed", [0, 1])
def test_hubness_matches_brute_force_k_occurrence(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(700, 40)).astype(np.float32)       # high-dimensional: hubs appear
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    idx, _ = brute_force_neighbors(x, 10)
    counts = np.bincount(idx.ravel(), minlength=len(x))
    assert counts.sum() == 700 * 10
    np.testing.assert_array_equal(ind.k_occurrence(x, 10), counts)
    expected = skew(counts.astype(float))
    assert expected > 0.3
    assert ind.hubness(x) == pytest.approx(expected, rel=1e-12)
    assert ind.hubness(x, k=5) == pytest.approx(
        skew(np.bincount(brute_force_neighbors(x, 5)[0].ravel(), minlength=700)), rel=1e-12)


def test_nearest_neighbors_exclude_self_even_among_duplicates():
    rng = np.random.default_rng(3)
    base = rng.normal(size=(50, 8)).astype(np.float32)
    x = np.concatenate([base, np.repeat(base[:1], 15, axis=0)])  # 16 copies of point 0
    idx, dist = ind.nearest_neighbors(x, 10)
    rows = np.arange(len(x))[:, None]
    assert not (idx == rows).any()
    copies = [0] + list(range(50, 65))
    for i in copies:
        assert set(idx[i]) <= set(copies) - {i} and np.all(dist[i] == 0)
    ref_idx, ref_dist = brute_force_neighbors(x, 10)
    np.testing.assert_allclose(dist, ref_dist, atol=1e-12)
    np.testing.assert_array_equal(idx, ref_idx)  # ties (the copies) ordered by index


def test_centroid_distances_hand_made():
    # two orthogonal unit vectors: centroid (1/2, 1/2), cosine 1/sqrt(2) to both
    d = ind.centroid_distances(np.array([[1.0, 0.0], [0.0, 1.0]]))
    np.testing.assert_allclose(d, [1 - 1 / math.sqrt(2)] * 2)
    # e1, e1, e2: centroid (2/3, 1/3, 0), |c| = sqrt(5)/3 -> cosines 2/sqrt5, 2/sqrt5, 1/sqrt5
    v = np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0]], dtype=np.float32)
    d = ind.centroid_distances(v)
    expect = np.array([1 - 2 / math.sqrt(5), 1 - 2 / math.sqrt(5), 1 - 1 / math.sqrt(5)])
    np.testing.assert_allclose(d, expect, rtol=1e-12)
    # scaling a vector does not change its cosine distance (eq. 5 normalises)
    np.testing.assert_allclose(ind.centroid_distances(np.array([[2.0, 0], [0, 1.0]])),
                               ind.centroid_distances(np.array([[2.0, 0], [0, 1.0]]) * 3))
    with pytest.raises(ValueError, match="row\\) 1 is all zeros"):
        ind.centroid_distances(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="centroid is the zero vector"):
        ind.centroid_distances(np.array([[1.0, 0.0], [-1.0, 0.0]]))


def test_semantic_indicators_dict_and_consistency():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(400, 32)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    got = ind.semantic_indicators(x)
    assert list(got) == list(ind.SEMANTIC_METRICS)
    assert got["intrinsic_dim"] == pytest.approx(ind.twonn_dimension(x), rel=1e-12)
    assert got["hubness"] == pytest.approx(ind.hubness(x, 10), rel=1e-12)
    d = ind.centroid_distances(x)
    assert got["dist_mean"] == pytest.approx(d.mean())
    assert got["dist_std"] == pytest.approx(np.std(d))
    assert (got["dist_min"], got["dist_max"]) == (pytest.approx(d.min()), pytest.approx(d.max()))
    assert all(isinstance(v, float) for v in got.values())
    kg = KnowledgeGraph.from_triples(random_kg_triples(0))
    both = ind.corpus_indicators(kg, x)
    assert list(both) == list(ind.METRICS)
    assert set(ind.INDICATORS) == {"structural", "semantic"}
    assert ind.semantic(x) == got and ind.structural(kg) == ind.structural_indicators(kg)


def test_semantic_input_errors():
    with pytest.raises(ValueError, match="2-D"):
        ind.semantic_indicators(np.ones(30))
    # undefined metrics of tiny corpora are NaN, the others still computed
    tiny = ind.semantic_indicators(np.eye(10))  # 10 < k + 1; all neighbours equidistant
    assert math.isnan(tiny["hubness"]) and math.isnan(tiny["intrinsic_dim"])
    assert tiny["dist_mean"] == pytest.approx(1 - 1 / math.sqrt(10))
    few = np.random.default_rng(1).normal(size=(6, 3))
    got = ind.semantic_indicators(few)
    assert math.isnan(got["hubness"])
    assert got["intrinsic_dim"] == pytest.approx(ind.twonn_dimension(few), rel=1e-12)
    assert math.isnan(ind.semantic_indicators(few[:2])["intrinsic_dim"])
    with pytest.raises(ValueError, match="at least 11 vectors"):
        ind.hubness(np.eye(10))
    bad = np.random.default_rng(0).normal(size=(20, 4))
    bad[7, 2] = np.nan
    with pytest.raises(ValueError, match="row\\) 7 is not finite"):
        ind.semantic_indicators(bad)
    with pytest.raises(ValueError, match="k must be >= 1"):
        ind.k_occurrence(np.eye(5), 0)
    with pytest.raises(ValueError, match="give a graph"):
        ind.corpus_indicators()
    # perfectly regular configuration: every point occurs equally often -> hubness 0
    square = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]], dtype=np.float32)
    assert ind.hubness(square, k=2) == 0.0
