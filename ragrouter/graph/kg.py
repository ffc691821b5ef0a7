"""The corpus knowledge graph: entities as nodes, extracted triples as edges.

``KnowledgeGraph.from_triples`` turns (subject, relation, object[, chunk_id]) records, whose
entity names are already normalised, into

* a node index (entity name <-> int, in order of first appearance, after any ``nodes`` given);
* the **undirected simple graph** used by the corpus metrics and by Personalized PageRank:
  one edge per unordered pair of distinct entities, however many triples link them, and no
  self-loops (paper App. A: "all constructed graphs are represented as undirected graphs");
* every triple, kept as given (parallel triples and self-loops included), for retrieval:
  ``triples_between(nodes)`` returns the triples of the subgraph induced by a node set.

The adjacency is a ``scipy.sparse.csr_array`` (float64 ones, symmetric, sorted indices) built
once; building from 280k triples takes well under a second.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

__all__ = ["KnowledgeGraph", "Triple"]


class Triple(NamedTuple):
    """One extracted triple; ``chunk_id`` is the source chunk (``None`` when not given)."""

    subject: str
    relation: str
    object: str
    chunk_id: Hashable | None = None


class KnowledgeGraph:
    """Undirected simple entity graph plus the full list of triples behind its edges.

    Attributes (read-only by convention):
        names: node index -> entity name.
        index: entity name -> node index.
        adjacency: (n, n) symmetric CSR matrix of float64 ones, no diagonal.
        relations: distinct relation strings, in order of first appearance.
        triple_subject, triple_object, triple_relation: int arrays, one entry per triple
            (node ids, node ids, index into ``relations``).
        chunk_ids: per-triple source chunk id (``None`` when not given).
    """

    def __init__(
        self,
        names: list[str],
        triple_subject: np.ndarray,
        triple_relation: np.ndarray,
        triple_object: np.ndarray,
        relations: list[str],
        chunk_ids: list,
        index: dict[str, int] | None = None,
    ) -> None:
        self.names = names
        self.index = index if index is not None else {name: i for i, name in enumerate(names)}
        if len(self.index) != len(names):
            raise ValueError("KnowledgeGraph: node names must be unique")
        self.triple_subject = np.asarray(triple_subject, dtype=np.int64)
        self.triple_object = np.asarray(triple_object, dtype=np.int64)
        self.triple_relation = np.asarray(triple_relation, dtype=np.int64)
        self.relations = relations
        self.chunk_ids = chunk_ids
        n = len(names)
        if not (len(self.triple_subject) == len(self.triple_object) == len(self.triple_relation)
                == len(chunk_ids)):
            raise ValueError("KnowledgeGraph: triple arrays differ in length")
        for label, arr in (("subject", self.triple_subject), ("object", self.triple_object)):
            if arr.size and (arr.min() < 0 or arr.max() >= n):
                raise ValueError(f"KnowledgeGraph: triple {label} id out of range [0, {n})")
        self.adjacency = _simple_adjacency(self.triple_subject, self.triple_object, n)
        self._incidence: tuple[np.ndarray, np.ndarray] | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_triples(cls, triples: Iterable, nodes: Iterable[str] = ()) -> KnowledgeGraph:
        """Build the graph from (subject, relation, object[, chunk_id]) records.

        ``nodes`` optionally lists entity names to index first, in that order (e.g. the
        entity table's order, so node ids equal row positions); names may also be isolated.
        Raises ``ValueError`` naming the first malformed record.
        """
        index: dict[str, int] = {}
        names: list[str] = []
        for pos, name in enumerate(nodes):
            if not isinstance(name, str) or not name:
                raise ValueError(f"nodes[{pos}]: entity name must be a non-empty string, "
                                 f"got {name!r}")
            if name not in index:
                index[name] = len(names)
                names.append(name)
        rel_index: dict[str, int] = {}
        relations: list[str] = []
        subj: list[int] = []
        obj: list[int] = []
        rel: list[int] = []
        chunks: list = []
        for pos, record in enumerate(triples):
            if not isinstance(record, (tuple, list)) or len(record) not in (3, 4):
                raise ValueError(f"triple #{pos}: expected (subject, relation, object[, chunk_id]),"
                                 f" got {record!r}")
            s, r, o = record[0], record[1], record[2]
            if not isinstance(s, str) or not s:
                raise ValueError(f"triple #{pos}: subject must be a non-empty string, got {s!r}")
            if not isinstance(o, str) or not o:
                raise ValueError(f"triple #{pos}: object must be a non-empty string, got {o!r}")
            if not isinstance(r, str):
                raise ValueError(f"triple #{pos}: relation must be a string, got {r!r}")
            si = index.get(s)
            if si is None:
                si = index[s] = len(names)
                names.append(s)
            oi = index.get(o)
            if oi is None:
                oi = index[o] = len(names)
                names.append(o)
            ri = rel_index.get(r)
            if ri is None:
                ri = rel_index[r] = len(relations)
                relations.append(r)
            subj.append(si)
            obj.append(oi)
            rel.append(ri)
            chunks.append(record[3] if len(record) == 4 else None)
        return cls(names, np.array(subj, dtype=np.int64), np.array(rel, dtype=np.int64),
                   np.array(obj, dtype=np.int64), relations, chunks, index)

    # ------------------------------------------------------------------ sizes
    @property
    def n_nodes(self) -> int:
        """Number of entities (nodes), isolated ones included."""
        return len(self.names)

    @property
    def n_edges(self) -> int:
        """Number of undirected edges of the simple graph (no self-loops, no duplicates)."""
        return self.adjacency.nnz // 2

    @property
    def n_triples(self) -> int:
        """Number of triples kept for retrieval (all records, self-loops included)."""
        return len(self.chunk_ids)

    @property
    def relation_types(self) -> int:
        """Number of distinct relation strings over all triples (Table 8 "Rel. Types")."""
        return len(self.relations)

    @property
    def degree(self) -> np.ndarray:
        """Degree of every node in the simple graph (int64 array)."""
        return np.diff(self.adjacency.indptr).astype(np.int64)

    # ------------------------------------------------------------------ lookups
    def node_id(self, name: str) -> int:
        """Node id of an entity name; ``KeyError`` naming it when unknown."""
        try:
            return self.index[name]
        except KeyError:
            raise KeyError(f"unknown entity {name!r}") from None

    def neighbors(self, i: int) -> np.ndarray:
        """Sorted node ids adjacent to node ``i`` (self excluded)."""
        i = self._check_node(i)
        a = self.adjacency
        return a.indices[a.indptr[i]:a.indptr[i + 1]].astype(np.int64)

    def triple(self, t: int) -> Triple:
        """Triple number ``t`` with entity and relation names resolved."""
        return Triple(self.names[self.triple_subject[t]], self.relations[self.triple_relation[t]],
                      self.names[self.triple_object[t]], self.chunk_ids[t])

    def triple_ids_between(self, nodes: Iterable[int]) -> np.ndarray:
        """Ids (ascending) of the triples whose subject and object both lie in ``nodes``.

        Self-loop triples of a node in the set are included: their text is about that entity.
        """
        sel = np.unique(np.fromiter((int(v) for v in nodes), dtype=np.int64))
        if sel.size == 0:
            return np.empty(0, dtype=np.int64)
        if sel[0] < 0 or sel[-1] >= self.n_nodes:
            raise IndexError(f"node id out of range [0, {self.n_nodes}) in triples_between")
        indptr, tids = self._triple_incidence()
        starts, ends = indptr[sel], indptr[sel + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        if total == 0:
            return np.empty(0, dtype=np.int64)
        offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
        cand = tids[offsets + np.arange(total)]
        member = np.zeros(self.n_nodes, dtype=bool)
        member[sel] = True
        keep = member[self.triple_subject[cand]] & member[self.triple_object[cand]]
        return np.unique(cand[keep])

    def triples_between(self, nodes: Iterable[int]) -> list[Triple]:
        """The triples of the subgraph induced by ``nodes`` (see ``triple_ids_between``)."""
        return [self.triple(int(t)) for t in self.triple_ids_between(nodes)]

    def to_networkx(self, names: bool = False):
        """The simple undirected graph as ``networkx.Graph``.

        Nodes are the int ids 0..n-1 with a ``name`` attribute, or the entity names themselves
        when ``names=True``. Isolated nodes are included; no self-loops, no edge attributes.
        """
        import networkx as nx

        g = nx.Graph()
        labels = self.names if names else range(self.n_nodes)
        if names:
            g.add_nodes_from(labels)
        else:
            g.add_nodes_from((i, {"name": name}) for i, name in enumerate(self.names))
        coo = sp.triu(self.adjacency, k=1).tocoo()
        if names:
            g.add_edges_from((self.names[u], self.names[v])
                             for u, v in zip(coo.row.tolist(), coo.col.tolist()))
        else:
            g.add_edges_from(zip(coo.row.tolist(), coo.col.tolist()))
        return g

    # ------------------------------------------------------------------ internals
    def _check_node(self, i) -> int:
        i = int(i)
        if not 0 <= i < self.n_nodes:
            raise IndexError(f"node id {i} out of range [0, {self.n_nodes})")
        return i

    def _triple_incidence(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR (indptr, triple ids) of the triples touching each node, built on first use."""
        if self._incidence is None:
            t = np.arange(self.n_triples, dtype=np.int64)
            loop = self.triple_subject == self.triple_object
            ends = np.concatenate([self.triple_subject, self.triple_object[~loop]])
            tids = np.concatenate([t, t[~loop]])
            order = np.argsort(ends, kind="stable")
            counts = np.bincount(ends, minlength=self.n_nodes)
            indptr = np.zeros(self.n_nodes + 1, dtype=np.int64)
            np.cumsum(counts, out=indptr[1:])
            self._incidence = (indptr, tids[order])
        return self._incidence

    def __repr__(self) -> str:
        return (f"KnowledgeGraph(nodes={self.n_nodes}, edges={self.n_edges}, "
                f"triples={self.n_triples}, relation_types={self.relation_types})")


def _simple_adjacency(subj: np.ndarray, obj: np.ndarray, n: int) -> sp.csr_array:
    """Symmetric 0/1 CSR adjacency of the simple graph (self-loops and duplicates dropped)."""
    keep = subj != obj
    a = np.minimum(subj[keep], obj[keep])
    b = np.maximum(subj[keep], obj[keep])
    if a.size:
        key = np.unique(a * n + b)
        a, b = key // n, key % n
    rows = np.concatenate([a, b])
    cols = np.concatenate([b, a])
    idx_dtype = np.int32 if n < 2**31 - 1 and rows.size < 2**31 - 1 else np.int64
    m = sp.csr_array((np.ones(rows.size), (rows.astype(idx_dtype), cols.astype(idx_dtype))),
                     shape=(n, n))
    m.sort_indices()
    return m
