"""Personalized PageRank over matrices built once per graph (paper eq. 8, docs/explanation/architecture.md §5).

``PPR(graph)`` does the per-graph work once; ``PPR.run(personalization)`` then costs only
sparse matrix-vector products, no Python loop over nodes or edges.

The result is the fixed point of networkx's iteration (``networkx.pagerank`` with the same
``alpha`` and ``personalization``): dangling nodes (no out-edges; in an undirected graph, the
isolated nodes) hand their mass back according to the personalization vector ``p``,

    pi = alpha * (A pi + (sum of pi over dangling nodes) p) + (1 - alpha) p,

with ``A`` the column-normalised adjacency. ``tol`` bounds the **L1 error** of the returned
vector. (networkx stops when one step changes the vector by less than ``len(G) * tol`` in L1,
which on a 200k-node graph is loose: compare with an explicit small tolerance.)

Solvers (registry ``SOLVERS``), both reaching that fixed point:

* ``"power"``: the iteration above started from ``p``. One step contracts L1 distances by
  ``alpha``, so stopping at ``alpha / (1 - alpha) * ||pi_k - pi_(k-1)||_1 <= tol`` bounds the
  error. Works for any adjacency, directed or weighted.
* ``"cg"`` (symmetric adjacency: undirected graphs; the default there). Isolated nodes have the
  closed form ``pi_i = c p_i`` with ``c = (1 - alpha) / (1 - alpha * p(isolated))``; the other
  nodes satisfy ``pi = c D^1/2 y`` with the symmetric positive definite system

      M y = D^-1/2 p,   M = I - alpha D^-1/2 W D^-1/2,   eigenvalues in [1 - alpha, 1 + alpha].

  Most of a knowledge graph is trees and chains. Once per graph and ``alpha``, independent
  sets of nodes of degree <= 2 are eliminated exactly, level by level (Gaussian elimination
  with a diagonal pivot block: a leaf only changes its parent's diagonal, a chain node joins
  its two neighbours; no degree ever grows, so there is no fill). On a MuSiQue-sized graph
  this leaves ~11% of the nodes. Conjugate gradients solve the remaining kernel (a Schur
  complement, whose eigenvalues stay within those of ``M``, so CG converges at least at rate
  (sqrt(k) - 1) / (sqrt(k) + 1) ~ 0.56 per step for alpha = 0.85, k = (1 + alpha) / (1 - alpha):
  about a third of the power iterations), then back substitution recovers the eliminated
  nodes. Error bound: ``D^1/2 M^-1 = (I - alpha W D^-1)^-1 D^1/2`` and ``W D^-1`` is
  column-stochastic, so a residual ``r`` leaves an L1 error of at most
  ``c * ||D^1/2 r||_1 / (1 - alpha)``; CG stops when that is <= ``tol`` (eliminated rows are
  solved exactly, so ``r`` lives on the kernel).

**One solve at a time per process** (``_SOLVE_LOCK``). A solve is a few milliseconds of
numpy and scipy calls that hold the GIL, with the interpreter loop between them. Solves that
arrive together (the answer stage's GraphRAG and HybridRAG units of many queries get their
query entities at about the same moment) would share the interpreter in 5 ms slices and all
finish after N × t; one at a time, the k-th finishes after k × t and its unit sends its next
request at once. Measured (``benchmarks/bench_answer.py --queries 80 --concurrency 64
--latency 1.0``, idle): 58 solves in flight at once left 30 of 64 request slots busy for 2 s,
and the stage ran at 91–92 % of ideal; with the lock, 95.5 %. Threads gain nothing from
running solves side by side under the GIL.

Vector operations use numpy ufuncs and ``numpy.einsum``, never BLAS: multi-threaded OpenBLAS
``ddot``/``daxpy`` on vectors of this size were 10-50x slower on a busy 2-core machine, and
limiting BLAS threads would be a process-wide side effect.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping

import numpy as np
import scipy.sparse as sp

__all__ = ["PPR", "PPRConvergenceError", "top_nodes", "SOLVERS"]


_SOLVE_LOCK = threading.Lock()  # one solve at a time per process (module docstring)


class PPRConvergenceError(RuntimeError):
    """Raised when a solver does not reach ``tol`` within ``max_iter`` iterations."""


class PPR:
    """Personalized PageRank on a fixed graph.

    ``graph`` is a ``KnowledgeGraph`` or a square scipy sparse adjacency matrix in networkx's
    convention (``W[i, j]`` = weight of the edge i -> j; symmetric for undirected graphs).
    ``method`` picks the default solver: ``"auto"`` (CG when ``W`` is symmetric, else power),
    ``"cg"`` or ``"power"``. ``prepare_alpha`` (symmetric graphs) runs the elimination for
    that damping factor now rather than on the first query; other alphas are prepared on
    first use and cached.
    """

    def __init__(self, graph, method: str = "auto", prepare_alpha: float | None = 0.85) -> None:
        w = getattr(graph, "adjacency", graph)
        if not sp.issparse(w) or w.ndim != 2 or w.shape[0] != w.shape[1]:
            raise TypeError("PPR: graph must be a KnowledgeGraph or a square scipy sparse matrix")
        if method not in ("auto", *SOLVERS):
            raise ValueError(f"PPR: unknown method {method!r}; choose auto, "
                             + ", ".join(SOLVERS))
        w = sp.csr_array(w, dtype=np.float64)
        w.sum_duplicates()
        w.eliminate_zeros()
        if w.nnz and (not np.all(np.isfinite(w.data)) or w.data.min() < 0):
            raise ValueError("PPR: edge weights must be finite and non-negative")
        self.n = w.shape[0]
        out_weight = np.asarray(w.sum(axis=1)).ravel()
        self.dangling = np.flatnonzero(out_weight == 0)
        inv = np.zeros(self.n)
        inv[out_weight > 0] = 1.0 / out_weight[out_weight > 0]
        # column-normalised transition matrix: (T @ x)[j] = sum_i x[i] * W[i, j] / out(i)
        self.transition = _compact(w.T @ sp.dia_array((inv, 0), shape=w.shape))
        self.symmetric = bool((w - w.T).count_nonzero() == 0)
        if method == "cg" and not self.symmetric:
            raise ValueError("PPR: method 'cg' needs a symmetric (undirected) adjacency")
        self.method = ("cg" if self.symmetric else "power") if method == "auto" else method
        self._factors: dict[float, _Factor] = {}
        if self.symmetric:
            self._conn = np.flatnonzero(out_weight > 0)
            self._degree = out_weight[self._conn]
            s = sp.dia_array((1.0 / np.sqrt(self._degree), 0), shape=(self._conn.size,) * 2)
            self._norm = sp.csr_array(s @ w[self._conn][:, self._conn] @ s)  # D^-1/2 W D^-1/2
            if prepare_alpha is not None:
                self._factor(_check_alpha(prepare_alpha))

    # ------------------------------------------------------------------ public
    def personalization_vector(self, personalization) -> np.ndarray:
        """A probability vector from a {node id: weight} mapping or a length-n array."""
        idx, val = self._sparse_personalization(personalization)
        p = np.zeros(self.n)
        p[idx] = val
        return p

    def run(self, personalization, alpha: float = 0.85, tol: float = 1e-10,
            max_iter: int = 1000, method: str | None = None) -> np.ndarray:
        """PPR scores (float64, length n, summing to 1) with L1 error at most ``tol``.

        ``personalization``: {node id: weight} or a length-n array (normalised here).
        ``max_iter``: iteration cap (power steps or CG steps); ``PPRConvergenceError`` beyond.
        ``method``: ``"cg"`` or ``"power"``; default: the one chosen at construction.
        """
        alpha = _check_alpha(alpha)
        if not tol > 0:
            raise ValueError(f"tol must be positive, got {tol}")
        method = self.method if method is None else method
        if method not in SOLVERS:
            raise ValueError(f"unknown PPR method {method!r}; choose " + ", ".join(SOLVERS))
        if method == "cg" and not self.symmetric:
            raise ValueError("PPR: method 'cg' needs a symmetric (undirected) adjacency")
        idx, val = self._sparse_personalization(personalization)
        with _SOLVE_LOCK:
            return SOLVERS[method](self, idx, val, alpha, float(tol), int(max_iter))

    def elimination_stats(self, alpha: float = 0.85) -> dict[str, int]:
        """Size of the CG kernel left after elimination (symmetric graphs only)."""
        if not self.symmetric:
            raise ValueError("PPR: no elimination for a directed graph")
        f = self._factor(_check_alpha(alpha))
        return {"connected_nodes": int(self._conn.size), "levels": len(f.levels),
                "kernel_nodes": f.k, "kernel_nnz": int(f.kernel.nnz)}

    @property
    def kernel_size(self) -> int:
        """Nodes left for CG at alpha = 0.85 (0 for directed graphs)."""
        return self.elimination_stats()["kernel_nodes"] if self.symmetric else 0

    # ------------------------------------------------------------------ internals
    def _sparse_personalization(self, personalization) -> tuple[np.ndarray, np.ndarray]:
        """(sorted node ids, weights summing to 1) of the nonzero personalization entries."""
        if isinstance(personalization, Mapping):
            try:
                idx = np.fromiter((int(k) for k in personalization), np.int64,
                                  len(personalization))
                val = np.fromiter((float(v) for v in personalization.values()), np.float64,
                                  len(personalization))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"personalization: node ids must be ints and weights numbers "
                                 f"({exc})") from None
            bad = (idx < 0) | (idx >= self.n)
            if bad.any():
                raise ValueError(f"personalization: node id {int(idx[bad][0])} out of range "
                                 f"[0, {self.n})")
        else:
            p = np.asarray(personalization, dtype=np.float64).ravel()
            if p.shape != (self.n,):
                raise ValueError(f"personalization: expected {self.n} entries, got {p.size}")
            idx = np.flatnonzero(p)
            val = p[idx]
        if not np.all(np.isfinite(val)) or (val.size and val.min() < 0):
            raise ValueError("personalization: weights must be finite and non-negative")
        total = float(val.sum())
        if not total > 0:
            raise ValueError("personalization: weights sum to zero")
        order = np.argsort(idx, kind="stable")
        idx, val = idx[order], val[order]
        if idx.size > 1 and np.any(idx[1:] == idx[:-1]):  # e.g. {1: a, np.int64(1): b}
            idx, inverse = np.unique(idx, return_inverse=True)
            val = np.bincount(inverse, weights=val)
        return idx, val / total

    def _factor(self, alpha: float) -> _Factor:
        f = self._factors.get(alpha)
        if f is None:
            f = self._factors[alpha] = _Factor(self._norm, self._degree, self._conn, self.n,
                                               alpha)
        return f

    def _power(self, idx, val, alpha: float, tol: float, max_iter: int) -> np.ndarray:
        """Power iteration from ``p`` with networkx's dangling rule."""
        p = np.zeros(self.n)
        p[idx] = val
        if alpha == 0.0:
            return p
        restart = (1.0 - alpha) * p
        dangling = self.dangling
        threshold = tol * (1.0 - alpha) / alpha
        x = p.copy()
        for _ in range(max_iter):
            new = self.transition @ x
            new *= alpha
            if dangling.size:
                new += (alpha * float(x[dangling].sum())) * p
            new += restart
            x -= new
            err = float(np.abs(x).sum())
            x = new
            if err <= threshold:
                return x
        raise PPRConvergenceError(f"power iteration did not reach tol={tol} in {max_iter} "
                                  "iterations")

    def _cg(self, idx, val, alpha: float, tol: float, max_iter: int) -> np.ndarray:
        """Closed form for isolated nodes, elimination + CG for the rest."""
        out = np.zeros(self.n)
        if alpha == 0.0:
            out[idx] = val
            return out
        f = self._factor(alpha)
        pos = f.position[idx]
        isolated = pos < 0
        c = (1.0 - alpha) / (1.0 - alpha * float(val[isolated].sum()))
        out[idx[isolated]] = c * val[isolated]
        if isolated.all():
            return out
        pos, val = pos[~isolated], val[~isolated]
        y = f.solve(pos, val * f.inv_sqrt_degree[pos], tol * (1.0 - alpha) / c, max_iter)
        y *= f.sqrt_degree
        y *= c
        out[f.node] = y
        return out


#: Solver registry: name -> function(ppr, node ids, weights, alpha, tol, max_iter) -> scores.
SOLVERS = {"power": PPR._power, "cg": PPR._cg}

#: Elimination: nodes of degree <= MAX_ELIM_DEGREE go, in independent sets, for at most
#: MAX_LEVELS levels, while a level removes at least MIN_LEVEL_FRACTION of what is left.
MAX_ELIM_DEGREE = 2
MAX_LEVELS = 64
MIN_LEVEL_FRACTION = 0.004


def _check_alpha(alpha) -> float:
    alpha = float(alpha)
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"alpha must be in [0, 1), got {alpha}")
    return alpha


class _Level:
    """One eliminated independent set: positions [start, end) of the layout.

    ``coupling`` (rows: the set, columns: positions < start) is M[I, R] / pivot, so that
    back substitution is ``y_I = rhs_I / pivot - coupling @ y_R`` and forward elimination
    ``rhs_R -= coupling.T @ rhs_I``.
    """

    __slots__ = ("start", "end", "coupling", "inv_pivot")

    def __init__(self, start, end, coupling, inv_pivot):
        self.start, self.end, self.coupling, self.inv_pivot = start, end, coupling, inv_pivot


class _Factor:
    """Partial elimination of M = I - alpha N (N = D^-1/2 W D^-1/2) for one alpha.

    Level by level, an independent set of nodes of degree <= 2 in the current Schur
    complement is eliminated: a block-diagonal pivot, so the new Schur complement is
    ``M_RR - M_RI diag(pivot)^-1 M_IR``. Degree-1 nodes are tree leaves (no fill); a degree-2
    node joins its two neighbours (its edges replaced by one). No degree ever grows. Degree-0
    nodes (the last node of a tree component) are solved directly. What is left (the kernel)
    goes to CG. The layout puts the kernel first, then the levels from the last eliminated
    to the first, so each level only couples to positions before its own.
    """

    def __init__(self, norm: sp.csr_array, degree: np.ndarray, conn: np.ndarray, n: int,
                 alpha: float) -> None:
        nc = norm.shape[0]
        cur = sp.csr_array(sp.eye_array(nc, format="csr") - alpha * norm)
        cur.sum_duplicates()
        ids = np.arange(nc)
        priority = np.random.default_rng(0).permutation(nc)  # fixed: deterministic levels
        raw_levels = []  # (eliminated compact ids, coupling with columns as compact ids, 1/piv)
        while len(raw_levels) < MAX_LEVELS and cur.shape[0] > 0:
            size = cur.shape[0]
            rows = np.repeat(np.arange(size), np.diff(cur.indptr))
            cols = cur.indices
            off = rows != cols
            deg = np.bincount(rows[off], minlength=size)
            chosen = _independent_set(deg <= MAX_ELIM_DEGREE, rows[off], cols[off],
                                      priority[ids])
            k = int(chosen.sum())
            if k == 0 or k < MIN_LEVEL_FRACTION * size:
                break
            elim, keep = np.flatnonzero(chosen), np.flatnonzero(~chosen)
            inv_pivot = 1.0 / cur.diagonal()[elim]
            m_ir = sp.csr_array(cur[elim][:, keep])
            coupling = sp.csr_array(sp.dia_array((inv_pivot, 0), shape=(k, k)) @ m_ir)
            cur = sp.csr_array(cur[keep][:, keep] - m_ir.T @ coupling)
            cur.sum_duplicates()
            coupling.sort_indices()
            raw_levels.append((ids[elim], coupling, ids[keep], inv_pivot))
            ids = ids[keep]
        # layout: kernel, then levels from the last eliminated to the first
        self.k = ids.size
        order = [ids] + [lv[0] for lv in reversed(raw_levels)]
        order = np.concatenate(order) if order else np.empty(0, dtype=np.int64)
        where = np.empty(nc, dtype=np.int64)
        where[order] = np.arange(nc)
        self.levels: list[_Level] = []
        for elim, coupling, keep, inv_pivot in raw_levels:
            start = int(where[elim[0]])
            cols = where[keep][coupling.indices]
            if cols.size and cols.max() >= start:
                raise AssertionError("elimination layout broken")
            m = _compact(sp.csr_array((coupling.data, cols, coupling.indptr),
                                      shape=(elim.size, max(start, 1))))
            self.levels.append(_Level(start, start + elim.size, m, inv_pivot))
        self.kernel = _compact(cur)  # kernel x kernel, positions 0..k-1
        self.node = conn[order]                       # layout position -> node id
        self.sqrt_degree = np.sqrt(degree[order])
        self.inv_sqrt_degree = 1.0 / self.sqrt_degree
        self.position = np.full(n, -1, dtype=np.int64)  # node id -> layout position (-1: isolated)
        self.position[self.node] = np.arange(nc)
        self.size = nc

    def solve(self, pos: np.ndarray, b: np.ndarray, target: float, max_iter: int) -> np.ndarray:
        """y (in layout order) with M y = e(pos) b; kernel residual r with
        ``sum(sqrt(deg) * |r|) <= target``."""
        rhs = np.zeros(self.size)
        rhs[pos] = b
        active = np.unique(pos)  # positions where rhs may be nonzero
        touched = []
        # forward elimination, first level first, only where rhs is nonzero
        for level in self.levels:
            here = active[(active >= level.start) & (active < level.end)]
            touched.append(here)
            if here.size == 0:
                continue
            rows = here - level.start
            m = level.coupling
            starts, ends = m.indptr[rows], m.indptr[rows + 1]
            lengths = ends - starts
            if lengths.sum() == 0:
                continue
            at = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) \
                + np.arange(int(lengths.sum()))
            cols = m.indices[at]
            np.subtract.at(rhs, cols, m.data[at] * np.repeat(rhs[here], lengths))
            active = np.union1d(active, cols)
        y = np.empty(self.size)
        if self.k:
            y[:self.k] = _cg_solve(self.kernel, rhs[:self.k], self.sqrt_degree[:self.k],
                                   target, max_iter)
        # back substitution, last eliminated level first
        for level, here in zip(reversed(self.levels), reversed(touched)):
            seg = y[level.start:level.end]
            if level.start:
                np.negative(level.coupling @ y[:level.start], out=seg)
            else:
                seg[:] = 0.0
            if here.size:
                rows = here - level.start
                seg[rows] += rhs[here] * level.inv_pivot[rows]
        return y


def _independent_set(cand: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                     priority: np.ndarray, passes: int = 6) -> np.ndarray:
    """A (nearly maximal) independent set of candidate nodes, Luby style.

    Each pass takes the available candidates whose priority is below that of every available
    neighbour, then drops their neighbours; ``rows``/``cols`` are the off-diagonal entries.
    """
    chosen = np.zeros(cand.size, dtype=bool)
    avail = cand.copy()
    for _ in range(passes):
        both = avail[rows] & avail[cols]
        beaten = np.zeros(cand.size, dtype=bool)
        beaten[rows[both & (priority[cols] < priority[rows])]] = True
        pick = avail & ~beaten
        if not pick.any():
            break
        chosen |= pick
        avail &= ~pick
        avail[cols[pick[rows]]] = False
        if not avail.any():
            break
    return chosen


def _cg_solve(matrix: sp.csr_array, b: np.ndarray, weights: np.ndarray, target: float,
              max_iter: int) -> np.ndarray:
    """Solve ``matrix @ y = b`` (SPD) by CG until sum(weights * |true residual|) <= target.

    The weighted L1 norm w(r) is bracketed by ``min(w) ||r||_2 <= w(r) <= ||w||_2 ||r||_2``
    and only computed when the bracket cannot decide and the last measured ratio
    w(r) / ||r||_2 predicts it may be close to the target.
    """
    w_min, w_norm = float(weights.min()), math.sqrt(_dot(weights, weights))
    y = np.zeros_like(b)
    r = b.copy()
    z = r.copy()
    rr = _dot(r, r)
    tmp = np.empty_like(b)
    ratio = 0.0

    def converged(res: np.ndarray, res2: float, exact: bool = False) -> bool:
        nonlocal ratio
        norm2 = math.sqrt(res2)
        if w_min * norm2 > target:
            return False
        if w_norm * norm2 <= target:
            return True
        if not exact and ratio * norm2 > 4.0 * target:
            return False
        np.abs(res, out=tmp)
        weighted = _dot(weights, tmp)
        ratio = weighted / norm2
        return weighted <= target

    iterations = 0
    for _attempt in range(3):
        while not converged(r, rr):
            if iterations >= max_iter:
                raise PPRConvergenceError(f"CG did not reach tol in {max_iter} iterations")
            az = matrix @ z
            step = rr / _dot(z, az)
            np.multiply(z, step, out=tmp)
            y += tmp
            np.multiply(az, step, out=tmp)
            r -= tmp
            rr_new = _dot(r, r)
            z *= rr_new / rr
            z += r
            rr = rr_new
            iterations += 1
        # the recursive residual drifts from the true one: check and restart if needed
        r = b - matrix @ y
        rr = _dot(r, r)
        if converged(r, rr, exact=True):
            return y
        z = r.copy()
    raise PPRConvergenceError("CG residual stalled above tol (floating-point limit); "
                              "use a larger tol or method='power'")


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.einsum("i,i->", a, b))


def _compact(m) -> sp.csr_array:
    """CSR with sorted int32 indices when they fit (less memory traffic per product)."""
    m = sp.csr_array(m)
    m.sort_indices()
    if m.nnz < 2**31 - 1 and max(m.shape) < 2**31 - 1:
        m = sp.csr_array((m.data, m.indices.astype(np.int32), m.indptr.astype(np.int32)),
                         shape=m.shape)
    return m


def top_nodes(scores: np.ndarray, k: int = 100, min_score: float = 1e-5,
              always: Iterable[int] = ()) -> np.ndarray:
    """Node ids of the ``k`` highest scores that are >= ``min_score``, plus ``always``.

    The top nodes come first, by descending score (ties: lower id first); the ids in
    ``always`` (the seeds, Algorithm 4 line 28) not already among them follow in their order.
    """
    scores = np.asarray(scores)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    eligible = np.flatnonzero(scores >= min_score)
    if k == 0:
        eligible = eligible[:0]
    elif eligible.size > k:
        # partial selection, then an exact ordering of the survivors (ties kept for ordering)
        kth = scores[eligible[np.argpartition(-scores[eligible], k - 1)[:k]]].min()
        eligible = np.flatnonzero(scores >= max(kth, min_score))
    order = eligible[np.lexsort((eligible, -scores[eligible]))][:k]
    chosen = set(order.tolist())
    extra = []
    for v in always:
        v = int(v)
        if not 0 <= v < scores.size:
            raise ValueError(f"always: node id {v} out of range [0, {scores.size})")
        if v not in chosen:
            chosen.add(v)
            extra.append(v)
    return np.concatenate([order, np.array(extra, dtype=np.int64)]).astype(np.int64)
