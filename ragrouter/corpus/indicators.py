"""Corpus indicators of paper App. A.3 (Tables 7-9): graph structure and embedding space.

Structural (on the undirected simple entity graph of a ``KnowledgeGraph``; Table 8):
    nodes, edges, density = 2|E| / (|V| (|V| - 1)), relation_types, avg_degree = 2|E| / |V|,
    max_degree_centrality = max_v k_v / (|V| - 1) (§3.3; networkx ``degree_centrality``, whose
    value for a one-node graph is 1), components, lcc_ratio = |V_LCC| / |V|, clustering = mean over *all* nodes of
    C_v = 2 T(v) / (k_v (k_v - 1)) with C_v = 0 when k_v < 2 (networkx ``average_clustering``).
    Triangles are counted with sparse products on a degree-ordered orientation of the edges
    (each node points to higher-ranked neighbours, so out-degrees stay below sqrt(2|E|)):
    no Python loop over nodes, and hubs do not blow up the work. (Paper Table 8 prints
    densities equal to |E| / (|V| (|V| - 1)), half of its own eq. 2; we follow eq. 2.)

Semantic (on an (n, d) matrix of chunk vectors, L2-normalised in practice; Table 9):
    intrinsic_dim: TwoNN (eq. 4), d = 1 / mean(ln(r2 / r1)) over Euclidean first/second
        nearest-neighbour distances. Points with r1 = 0 (exact duplicates) have no defined
        ratio and are dropped, as in scikit-dimension. This is the plain maximum-likelihood
        estimate N / sum(ln mu); ``skdim.id.TwoNN(discard_fraction=0, method="mle")`` returns
        the bias-corrected (N - 1) / sum(ln mu), i.e. ours * (N - 1) / N.
    hubness: skewness (eq. 6, population moments as ``scipy.stats.skew``) of the k-occurrence
        counts N_k(i) = #{j != i : i among the k nearest neighbours of j}, k = 10, self
        excluded. 0.0 when every point occurs equally often (no spread, no hubs).
    dist_mean/std/min/max: cosine distance of each vector to the centroid (eq. 5); the
        standard deviation is the population one (ddof = 0).

Nearest neighbours come from faiss (exact ``IndexFlatL2``, float32) with a few spare
candidates that are then re-ranked by exact float64 distances (ties: lower index first), so
results do not depend on float32 rounding. Unit vectors rank identically under Euclidean
and cosine distance.

``corpus_indicators(graph, vectors)`` returns one flat dict with the names in ``METRICS``;
``INDICATORS`` is the registry of indicator families (``structural`` / ``semantic`` are also
module-level aliases). The family functions return NaN for a metric that is undefined on a
tiny corpus (no graph nodes; fewer than k + 1 vectors for hubness) instead of failing; the
single-metric functions raise ``ValueError`` naming the problem.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

__all__ = [
    "INDICATORS", "METRICS", "STRUCTURAL_METRICS", "SEMANTIC_METRICS", "average_clustering",
    "centroid_distances", "clustering_coefficients", "corpus_indicators", "hubness",
    "max_degree_centrality",
    "k_occurrence", "nearest_neighbors", "semantic", "semantic_indicators", "structural",
    "structural_indicators", "triangle_counts", "twonn_dimension",
]

STRUCTURAL_METRICS = ("nodes", "edges", "density", "relation_types", "avg_degree",
                      "max_degree_centrality", "components", "lcc_ratio", "clustering")
SEMANTIC_METRICS = ("intrinsic_dim", "hubness", "dist_mean", "dist_std", "dist_min", "dist_max")
METRICS = STRUCTURAL_METRICS + SEMANTIC_METRICS

HUBNESS_K = 10
_SPARE_CANDIDATES = 8  # extra faiss candidates re-ranked in float64


# ============================================================ structural
def _simple_graph(adjacency) -> sp.csr_array:
    """Symmetric 0/1 CSR without diagonal from any square sparse adjacency."""
    if not sp.issparse(adjacency) or adjacency.ndim != 2 \
            or adjacency.shape[0] != adjacency.shape[1]:
        raise TypeError("adjacency must be a square scipy sparse matrix")
    a = sp.csr_array(adjacency, dtype=np.float64)
    a = a + a.T
    a.setdiag(0)
    a.eliminate_zeros()
    a.data[:] = 1.0
    a.sort_indices()
    return a


def triangle_counts(adjacency) -> np.ndarray:
    """Number of triangles through each node of the simple undirected graph."""
    a = _simple_graph(adjacency)
    n = a.shape[0]
    deg = np.diff(a.indptr)
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((np.arange(n), deg))] = np.arange(n)
    coo = sp.triu(a, k=1).tocoo()
    u, v = coo.row.astype(np.int64), coo.col.astype(np.int64)
    up = rank[u] < rank[v]
    src, dst = np.where(up, u, v), np.where(up, v, u)
    low = sp.csr_array((np.ones(src.size), (src, dst)), shape=(n, n))  # low rank -> high rank
    # triangle a < b < c (by rank) has edges a->b, b->c, a->c
    first = (low @ low).multiply(low)      # entry (a, c), summed over b
    middle = (low.T @ low).multiply(low)   # entry (b, c), summed over a
    tri = (np.asarray(first.sum(axis=1)).ravel()        # a
           + np.asarray(middle.sum(axis=1)).ravel()     # b
           + np.asarray(middle.sum(axis=0)).ravel())    # c
    return np.rint(tri).astype(np.int64)


def clustering_coefficients(adjacency) -> np.ndarray:
    """Local clustering coefficient of every node (0 for degree < 2), as networkx."""
    a = _simple_graph(adjacency)
    deg = np.diff(a.indptr).astype(np.float64)
    tri = triangle_counts(a).astype(np.float64)
    out = np.zeros(a.shape[0])
    ok = deg > 1
    out[ok] = 2.0 * tri[ok] / (deg[ok] * (deg[ok] - 1.0))
    return out


def average_clustering(adjacency) -> float:
    """Mean local clustering over all nodes (networkx ``average_clustering``)."""
    c = clustering_coefficients(adjacency)
    if c.size == 0:
        raise ValueError("average_clustering: the graph has no nodes")
    return float(c.mean())


def max_degree_centrality(adjacency) -> float:
    """Largest degree centrality k_v / (|V| - 1) of the simple undirected graph (paper §3.3),
    equal to ``max(networkx.degree_centrality(G).values())`` (1.0 for a single node, as there)."""
    a = _simple_graph(adjacency)
    n = a.shape[0]
    if n == 0:
        raise ValueError("max_degree_centrality: the graph has no nodes")
    if n == 1:
        return 1.0
    return float(np.diff(a.indptr).max() / (n - 1))


def structural_indicators(graph) -> dict[str, float]:
    """Table 8 metrics of a ``KnowledgeGraph`` (or a square sparse adjacency: then
    ``relation_types`` is 0). A graph without nodes (no triples) has 0 nodes, edges and
    components and NaN for the ratios."""
    adjacency = getattr(graph, "adjacency", graph)
    a = _simple_graph(adjacency)
    n = a.shape[0]
    if n == 0:
        nan = float("nan")
        return {"nodes": 0, "edges": 0, "density": nan, "relation_types": 0, "avg_degree": nan,
                "max_degree_centrality": nan, "components": 0, "lcc_ratio": nan, "clustering": nan}
    m = a.nnz // 2
    n_comp, labels = connected_components(a, directed=False)
    return {
        "nodes": int(n),
        "edges": int(m),
        "density": 2.0 * m / (n * (n - 1)) if n > 1 else 0.0,
        "relation_types": int(getattr(graph, "relation_types", 0)),
        "avg_degree": 2.0 * m / n,
        "max_degree_centrality": max_degree_centrality(a),
        "components": int(n_comp),
        "lcc_ratio": float(np.bincount(labels).max() / n),
        "clustering": average_clustering(a),
    }


# ============================================================ semantic
def _check_vectors(vectors, min_rows: int, what: str) -> np.ndarray:
    x = np.asarray(vectors)
    if x.ndim != 2:
        raise ValueError(f"{what}: expected a 2-D array (n, d) of vectors, got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"{what}: vectors must be numeric, got dtype {x.dtype}")
    if x.shape[0] < min_rows:
        raise ValueError(f"{what}: needs at least {min_rows} vectors, got {x.shape[0]}")
    if x.shape[1] < 1:
        raise ValueError(f"{what}: vectors have no dimensions")
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        raise ValueError(f"{what}: vector (row) {int(np.flatnonzero(bad)[0])} is not finite")
    return x


def nearest_neighbors(vectors, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest other points of every point: (indices, float64 Euclidean distances).

    faiss ``IndexFlatL2`` proposes ``k + 1 + spare`` candidates per point; the point itself is
    removed wherever it appears (duplicates may outrank it), and the rest are ordered by
    exact float64 distance, ties broken by index.
    """
    import faiss

    x = _check_vectors(vectors, k + 1, "nearest_neighbors")
    n = x.shape[0]
    x64 = np.ascontiguousarray(x, dtype=np.float64)
    x32 = np.ascontiguousarray(x, dtype=np.float32)
    cand = min(n, k + 1 + _SPARE_CANDIDATES)
    index = faiss.IndexFlatL2(x32.shape[1])
    index.add(x32)
    out_idx = np.empty((n, k), dtype=np.int64)
    out_dist = np.empty((n, k))
    faiss.omp_set_num_threads(os.cpu_count() or 1)  # per thread: this one may have searched with 1 (paradigms/index.py)
    _, all_ids = index.search(x32, cand)
    block = max(1, 2**22 // (cand * x.shape[1]))  # ~32 MB of float64 differences at a time
    for lo in range(0, n, block):
        hi = min(n, lo + block)
        ids = all_ids[lo:hi].astype(np.int64)
        rows = np.arange(lo, hi)
        self_hit = ids == rows[:, None]
        # drop self; where self is absent (many duplicates), drop the last candidate
        no_self = ~self_hit.any(axis=1)
        self_hit[no_self, -1] = True
        ids = ids[~self_hit].reshape(hi - lo, cand - 1)
        diff = x64[ids] - x64[lo:hi, None, :]
        dist = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
        order = np.lexsort((ids, dist), axis=1)[:, :k]
        out_idx[lo:hi] = np.take_along_axis(ids, order, axis=1)
        out_dist[lo:hi] = np.take_along_axis(dist, order, axis=1)
    return out_idx, out_dist


def twonn_dimension(vectors) -> float:
    """TwoNN intrinsic dimension (eq. 4): 1 / mean(ln(r2 / r1)), duplicates (r1 = 0) dropped."""
    _, dist = nearest_neighbors(_check_vectors(vectors, 3, "twonn_dimension"), 2)
    return _twonn(dist)


def _twonn(dist: np.ndarray) -> float:
    r1, r2 = dist[:, 0], dist[:, 1]
    keep = r1 > 0
    if keep.sum() < 2:
        raise ValueError("twonn_dimension: fewer than 2 points left after dropping duplicates "
                         "(r1 = 0)")
    mean_log = float(np.mean(np.log(r2[keep] / r1[keep])))
    if mean_log <= 0:
        raise ValueError("twonn_dimension: undefined, every point has r2 == r1 "
                         "(equidistant neighbours)")
    return 1.0 / mean_log


def k_occurrence(vectors, k: int = HUBNESS_K) -> np.ndarray:
    """N_k(i): how many other points have point i among their k nearest neighbours."""
    if k < 1:
        raise ValueError(f"k_occurrence: k must be >= 1, got {k}")
    x = _check_vectors(vectors, k + 1, f"k_occurrence (k={k})")
    idx, _ = nearest_neighbors(x, k)
    return np.bincount(idx.ravel(), minlength=x.shape[0])


def hubness(vectors, k: int = HUBNESS_K) -> float:
    """Skewness of the k-occurrence distribution (eq. 6); 0.0 when it has no spread."""
    return _skewness(k_occurrence(vectors, k))


def _skewness(counts: np.ndarray) -> float:
    from scipy.stats import skew  # deferred: scipy.stats is ~0.6 s of every run's start-up

    counts = counts.astype(np.float64)
    if np.all(counts == counts[0]):
        return 0.0
    return float(skew(counts))


def centroid_distances(vectors) -> np.ndarray:
    """Cosine distance of every vector to the centroid of all vectors (eq. 5)."""
    x = np.asarray(_check_vectors(vectors, 1, "centroid_distances"), dtype=np.float64)
    norms = np.linalg.norm(x, axis=1)
    if (norms == 0).any():
        raise ValueError(f"centroid_distances: vector (row) {int(np.flatnonzero(norms == 0)[0])}"
                         " is all zeros")
    centroid = x.mean(axis=0)
    c_norm = float(np.linalg.norm(centroid))
    if c_norm == 0:
        raise ValueError("centroid_distances: the centroid is the zero vector")
    return 1.0 - (x @ centroid) / (norms * c_norm)


def semantic_indicators(vectors, k: int = HUBNESS_K) -> dict[str, float]:
    """Table 9 metrics of an (n, d) matrix of chunk vectors.

    One neighbour search serves both TwoNN (its first two columns) and hubness. A metric that
    is undefined for this corpus is NaN rather than an error, so small corpora still get the
    others: hubness needs n > k; TwoNN needs 3 points and two non-duplicate ratios with
    r2 > r1 on average. Malformed input (not 2-D, non-finite, zero vectors) still raises.
    """
    if k < 1:
        raise ValueError(f"semantic_indicators: hubness k must be >= 1, got {k}")
    x = _check_vectors(vectors, 1, "semantic_indicators")
    n = x.shape[0]
    centroid = centroid_distances(x)
    intrinsic, hub = float("nan"), float("nan")
    if n >= 3:
        idx, dist = nearest_neighbors(x, max(k, 2) if n > max(k, 2) else 2)
        try:
            intrinsic = _twonn(dist)
        except ValueError:
            pass
        if n > k:
            hub = _skewness(np.bincount(idx[:, :k].ravel(), minlength=n))
    return {
        "intrinsic_dim": intrinsic,
        "hubness": hub,
        "dist_mean": float(centroid.mean()),
        "dist_std": float(centroid.std()),
        "dist_min": float(centroid.min()),
        "dist_max": float(centroid.max()),
    }


def corpus_indicators(graph=None, vectors=None, k: int = HUBNESS_K) -> dict[str, float]:
    """Structural metrics of ``graph`` and/or semantic metrics of ``vectors``, one dict."""
    if graph is None and vectors is None:
        raise ValueError("corpus_indicators: give a graph, vectors, or both")
    out: dict[str, float] = {}
    if graph is not None:
        out.update(structural_indicators(graph))
    if vectors is not None:
        out.update(semantic_indicators(vectors, k))
    return out


#: Registry of indicator families: name -> function returning {metric: value}.
INDICATORS = {"structural": structural_indicators, "semantic": semantic_indicators}

#: Short aliases (``indicators.structural(kg)``, ``indicators.semantic(vectors)``).
structural = structural_indicators
semantic = semantic_indicators
