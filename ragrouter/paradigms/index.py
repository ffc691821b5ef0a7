"""The retrieval state of one corpus (:class:`CorpusIndex`), built once, shared read-only.

The answer stage loads chunks, vectors, entities and triples from the store and passes them
as plain arrays and lists; tests build small ones by hand. Everything here is read-only after
construction, so one index serves all worker threads (faiss ``IndexFlatIP.search`` and the
PPR power iteration do not mutate shared state).

Holds:
    * chunks: ids, texts, token counts, L2-normalised vectors in a faiss ``IndexFlatIP``;
    * entities: ids, names, L2-normalised vectors in a second ``IndexFlatIP``;
    * the knowledge graph (:class:`ragrouter.graph.kg.KnowledgeGraph`) built from the triples,
      each triple carrying its source chunk id, and a :class:`ragrouter.graph.ppr.PPR` over it;
    * per entity, the number of distinct chunks its triples come from (``entity_chunk_counts``,
      the node specificity of ``retrieval.seed_weighting: specificity``).

Vectors are re-normalised on load (inner product = cosine, as the paper specifies); a zero
vector stays zero (it matches nothing).
"""

from __future__ import annotations

from typing import Sequence

import faiss
import numpy as np

from ragrouter.graph.kg import KnowledgeGraph
from ragrouter.graph.ppr import PPR, top_nodes
from ragrouter.paradigms.context import Fact, PassageCounter, SentenceSplitter


def _normalised(name: str, vectors, rows: int) -> np.ndarray:
    arr = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if arr.ndim != 2 or arr.shape[0] != rows:
        raise ValueError(f"CorpusIndex: {name} must be a ({rows}, dim) array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        bad = int(np.argwhere(~np.isfinite(arr))[0][0])
        raise ValueError(f"CorpusIndex: {name} row {bad} is not finite")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return np.ascontiguousarray(np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0))


def _chunks_per_node(subject: np.ndarray, obj: np.ndarray, chunk: np.ndarray, n: int) -> np.ndarray:
    """Distinct source chunks of the triples that name each node (subject or object): the
    passages a node "appears in", HippoRAG's |P_i| behind its node specificity 1 / |P_i|."""
    if n == 0 or len(chunk) == 0:
        return np.zeros(n, dtype=np.int64)
    pairs = np.unique(np.stack([np.concatenate([subject, obj]), np.concatenate([chunk, chunk])], axis=1), axis=0)
    return np.bincount(pairs[:, 0], minlength=n).astype(np.int64)


class CorpusIndex:
    """Chunks, entities and graph of one corpus, ready for retrieval.

    Args:
        chunk_ids, chunk_texts, chunk_tokens: parallel lists (store ids, texts, cl100k counts).
        chunk_vectors: ``(n_chunks, dim)`` embeddings of the chunks.
        entity_ids, entity_names: parallel lists of the graph's entities (may be empty).
        entity_vectors: ``(n_entities, dim)`` embeddings of the entity names (same embedder).
        triples: ``(subject entity id, relation, object entity id, source chunk id)`` tuples.
        name: corpus name (for messages).
    """

    def __init__(
        self,
        chunk_ids: Sequence[int],
        chunk_texts: Sequence[str],
        chunk_tokens: Sequence[int],
        chunk_vectors,
        entity_ids: Sequence[int] = (),
        entity_names: Sequence[str] = (),
        entity_vectors=None,
        triples: Sequence[tuple[int, str, int, int]] = (),
        *,
        name: str = "corpus",
    ):
        self.name = name
        n = len(chunk_ids)
        if len(chunk_texts) != n or len(chunk_tokens) != n:
            raise ValueError(f"CorpusIndex {name}: {n} chunk ids, {len(chunk_texts)} texts, "
                             f"{len(chunk_tokens)} token counts (must be equal)")
        self.chunk_ids = np.asarray(chunk_ids, dtype=np.int64).reshape(-1)
        if len(set(self.chunk_ids.tolist())) != n:
            raise ValueError(f"CorpusIndex {name}: duplicate chunk ids")
        self.texts: dict[int, str] = dict(zip(self.chunk_ids.tolist(), chunk_texts))
        self.tokens: dict[int, int] = {int(c): int(t) for c, t in zip(self.chunk_ids.tolist(), chunk_tokens)}
        self.passage_counts = PassageCounter(self.texts)  # exact context-part token counts, cached
        self.sentences = SentenceSplitter(self.texts)  # sentences per chunk (GraphRAG's source sentences), cached
        vecs = _normalised("chunk_vectors", chunk_vectors, n) if n else np.zeros((0, 0), np.float32)
        if n == 0 and entity_vectors is not None and len(entity_ids):
            vecs = np.zeros((0, np.asarray(entity_vectors).shape[1]), np.float32)
        self.dim = int(vecs.shape[1])
        self.chunk_index = faiss.IndexFlatIP(self.dim)
        if n:
            self.chunk_index.add(vecs)

        # entities
        m = len(entity_ids)
        if len(entity_names) != m:
            raise ValueError(f"CorpusIndex {name}: {m} entity ids but {len(entity_names)} entity names")
        self.entity_ids = np.asarray(entity_ids, dtype=np.int64).reshape(-1)
        self.entity_names: list[str] = [str(x) for x in entity_names]
        self.entity_pos: dict[int, int] = {int(e): i for i, e in enumerate(self.entity_ids.tolist())}
        if len(self.entity_pos) != m:
            raise ValueError(f"CorpusIndex {name}: duplicate entity ids")
        if m:
            if entity_vectors is None:
                raise ValueError(f"CorpusIndex {name}: entity_vectors are required when entities are given")
            self.entity_vectors = _normalised("entity_vectors", entity_vectors, m)
            if self.entity_vectors.shape[1] != self.dim:
                raise ValueError(f"CorpusIndex {name}: entity vectors are {self.entity_vectors.shape[1]}-d, "
                                 f"chunk vectors {self.dim}-d (use one embedder for both)")
        else:
            self.entity_vectors = np.zeros((0, self.dim), dtype=np.float32)
        self.entity_index = faiss.IndexFlatIP(self.dim)
        if m:
            self.entity_index.add(self.entity_vectors)

        # the knowledge graph: node id == entity position (the entity names are indexed first)
        records = []
        for k, t in enumerate(triples):
            try:
                s_id, r, o_id, c_id = t
            except (TypeError, ValueError):
                raise ValueError(f"CorpusIndex {name}: triple #{k} must be (subject id, relation, object id, "
                                 f"chunk id), got {t!r}") from None
            for e_id in (s_id, o_id):
                if int(e_id) not in self.entity_pos:
                    raise ValueError(f"CorpusIndex {name}: triple #{k} names entity id {e_id}, which is not "
                                     "among the entities")
            if int(c_id) not in self.tokens:
                raise ValueError(f"CorpusIndex {name}: triple #{k} has source chunk {c_id}, which is not "
                                 "among the chunks")
            records.append((self.entity_names[self.entity_pos[int(s_id)]], str(r),
                            self.entity_names[self.entity_pos[int(o_id)]], int(c_id)))
        try:
            self.graph = KnowledgeGraph.from_triples(records, nodes=self.entity_names)
        except ValueError as exc:
            raise ValueError(f"CorpusIndex {name}: {exc}") from None
        if self.graph.n_nodes != m:
            raise ValueError(f"CorpusIndex {name}: entity names must be unique and non-empty "
                             f"({m} entities, {self.graph.n_nodes} distinct names)")
        self.triple_subject = self.graph.triple_subject
        self.triple_object = self.graph.triple_object
        self.triple_chunk = np.asarray([int(c) for c in self.graph.chunk_ids], dtype=np.int64)
        self.entity_chunk_counts = _chunks_per_node(self.triple_subject, self.triple_object, self.triple_chunk, m)
        self._ppr = PPR(self.graph) if m else None
        # Fact objects by triple id, made on first use: a GraphRAG run turns up to max_triples
        # triples into facts, and a frozen dataclass costs ~4 µs of GIL time to build
        self._facts: list[Fact | None] = [None] * len(self.triple_subject)
        if m:
            self.graph.triple_ids_between([0])  # build the lazy incidence index now, not in a worker thread

    # ------------------------------------------------------------------ sizes
    @property
    def n_chunks(self) -> int:
        return int(len(self.chunk_ids))

    @property
    def n_entities(self) -> int:
        return int(len(self.entity_ids))

    @property
    def n_triples(self) -> int:
        return int(len(self.triple_subject))

    # ------------------------------------------------------------------ dense search
    # Query-time searches are one or a few vectors, sent from many threads at once. faiss runs
    # each search as an OpenMP team of one thread per core, and the team size is per calling
    # thread (libgomp keeps it per thread: setting it once in the main thread does not reach
    # the worker threads), so every search sets it to 1 for its own thread. Measured on the
    # 2-core VM under load: a 3-vector search over 3,000 × 384 entities costs 11.6 ms of CPU
    # with the default team and 0.42 ms with one thread. Corpus-wide kNN (indicators) keeps
    # its teams: it runs in its own threads.
    def search_chunks(self, vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` chunks by inner product: (chunk ids, scores), best first."""
        k = min(int(k), self.n_chunks)
        if k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        q = np.ascontiguousarray(np.asarray(vector, dtype=np.float32).reshape(1, -1))
        if q.shape[1] != self.dim:
            raise ValueError(f"CorpusIndex {self.name}: query vector is {q.shape[1]}-d, chunks are {self.dim}-d")
        faiss.omp_set_num_threads(1)
        scores, pos = self.chunk_index.search(q, k)
        keep = pos[0] >= 0
        return self.chunk_ids[pos[0][keep]], scores[0][keep]

    def search_entities(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` entities per row of ``vectors``: (positions, similarities), each (n, k')."""
        k = min(int(k), self.n_entities)
        q = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim))
        if k <= 0 or len(q) == 0:
            return np.zeros((len(q), 0), np.int64), np.zeros((len(q), 0), np.float32)
        faiss.omp_set_num_threads(1)
        scores, pos = self.entity_index.search(q, k)
        return pos, scores

    # ------------------------------------------------------------------ graph
    def ppr(self, personalization: dict[int, float], alpha: float, tol: float | None = None) -> np.ndarray:
        """PPR scores over all entity positions (= graph nodes) for {position: weight}
        (normalised by :class:`ragrouter.graph.ppr.PPR`; ``tol=None``: its default)."""
        if self._ppr is None:
            raise ValueError(f"CorpusIndex {self.name}: the corpus has no knowledge graph (no entities)")
        if tol is None:
            return self._ppr.run(personalization, alpha=alpha)
        return self._ppr.run(personalization, alpha=alpha, tol=tol)

    def top_nodes(self, scores: np.ndarray, k: int, min_score: float, always: Sequence[int] = ()) -> np.ndarray:
        """Positions with score ≥ ``min_score``, the top ``k`` of them (by score), then ``always``."""
        return top_nodes(scores, k=k, min_score=min_score, always=always)

    def triples_between(self, nodes) -> np.ndarray:
        """Ids (ascending) of the triples whose subject and object are both in ``nodes``."""
        return self.graph.triple_ids_between(nodes)

    def fact(self, t: int) -> Fact:
        """Triple ``t`` as a context :class:`Fact` (names, relation, source chunk); one object per
        triple, shared by every query (facts are immutable)."""
        fact = self._facts[t]
        if fact is None:
            tr = self.graph.triple(int(t))
            fact = self._facts[t] = Fact(subject=tr.subject, relation=tr.relation, object=tr.object,
                                         chunk_id=int(tr.chunk_id))  # benign race: equal values
        return fact
