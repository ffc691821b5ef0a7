"""Corpus stages: chunk → extract → embed → metrics (paper App. A.1, A.3, Algorithm 1).

Each stage's units and "done" test are SQL over the store, so any stage can be stopped and
re-run: it resumes where it stopped and repeats no model call.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Connection

from ragrouter.config import ConfigError
from ragrouter.corpus import indicators
from ragrouter.corpus.chunking import chunk_text
from ragrouter.db import models
from ragrouter.graph import extract as ex
from ragrouter.graph.kg import KnowledgeGraph
from ragrouter.llm import tokens
from ragrouter.stages import storeio
from ragrouter.stages.base import Estimate, Scope, Stage, Unit, register
from ragrouter.stages.expect import expectations


def _corpus_filter(conn: Connection, scope: Scope, alias: str = "d") -> tuple[str, dict]:
    if not scope.corpus:
        return "", {}
    ids = [cid for cid, _ in storeio.corpus_ids(conn, scope.corpus)]
    return f" AND {alias}.corpus_id = :corpus_id", {"corpus_id": ids[0]}


def stage_timeout(config, path: str) -> float | None:
    """A per-call timeout setting (seconds) for the gateway; ``None``: the backend's ``timeout_s``."""
    value = config.get(path, None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"{config.source}: setting '{path}' must be a positive number of seconds or null, "
                          f"got {value!r}")
    return float(value)


def _limit(scope: Scope) -> str:
    return f" LIMIT {int(scope.limit)}" if scope.limit else ""


class ChunkStage(Stage):
    name = "chunk"
    description = "cut documents into 512-token windows with 100 overlap (cl100k_base)"

    def _key(self, services_or_config) -> str:
        cfg = getattr(services_or_config, "config", services_or_config)
        return storeio.chunker_key(cfg)

    def counts(self, conn, scope):
        cond, params = _corpus_filter(conn, scope)
        key = self._key(scope.config)
        row = conn.execute(text(
            "SELECT COUNT(*), COUNT(DISTINCT c.document_id) FROM documents d LEFT JOIN chunks c "
            f"ON c.document_id = d.id AND c.chunker = :k WHERE 1=1{cond}"), {"k": key, **params}).one()
        expected = conn.execute(text(f"SELECT COUNT(*) FROM documents d WHERE 1=1{cond}"), params).scalar()
        return int(expected), int(row[1])

    def pending(self, conn, scope):
        cond, params = _corpus_filter(conn, scope)
        key = self._key(scope.config)
        rows = conn.execute(text(
            "SELECT d.id, d.corpus_id FROM documents d WHERE NOT EXISTS (SELECT 1 FROM chunks c "
            f"WHERE c.document_id = d.id AND c.chunker = :k){cond} ORDER BY d.id{_limit(scope)}"),
            {"k": key, **params}).all()
        return [Unit(f"doc:{r[0]}", {"document_id": int(r[0]), "corpus_id": int(r[1]), "chunker": key}) for r in rows]

    def compute(self, unit, services):
        with services.db_lock, services.engine.connect() as conn:
            title, body = conn.execute(text("SELECT title, text FROM documents WHERE id = :i"),
                                       {"i": unit.payload["document_id"]}).one()
        cfg = services.config
        return chunk_text(title or "", body, window=int(cfg.get("chunking.window")),
                          overlap=int(cfg.get("chunking.overlap")))

    def write(self, conn, unit, result):
        p = unit.payload
        rows = [{"document_id": p["document_id"], "corpus_id": p["corpus_id"], "chunker": p["chunker"],
                 "chunk_index": c.index, "text": c.text, "n_tokens": c.token_count,
                 "token_start": c.token_start, "token_end": c.token_end,
                 "char_start": c.char_start, "char_end": c.char_end} for c in result]
        for i in range(0, len(rows), 500):
            conn.execute(insert(models.Chunk).values(rows[i:i + 500]).on_conflict_do_nothing(
                index_elements=["document_id", "chunker", "chunk_index"]))


def _insert_rows(conn, model, conflict: list[str], rows: list[dict], per_statement: int = 1000) -> None:
    """Multi-row INSERT … ON CONFLICT DO NOTHING, ``per_statement`` rows a statement. (An
    executemany of one statement is executed row by row by the DuckDB driver: 20–50 ms a row.)"""
    for i in range(0, len(rows), per_statement):
        conn.execute(insert(model).values(rows[i:i + per_statement]).on_conflict_do_nothing(index_elements=conflict))


_SELECT_ENTITY_IDS = text("SELECT id, name FROM entities WHERE corpus_id = :c AND extractor = :x "
                          "AND name IN :names").bindparams(bindparam("names", expanding=True))


class ExtractStage(Stage):
    name = "extract"
    description = "LLM triple extraction per chunk → entities and triples (the knowledge graph)"
    uses_llm = True

    def backend_name(self, services):
        return services.config.role("extractor")

    def _where(self, conn, scope, key):
        cond, params = _corpus_filter(conn, scope, "c")
        return (f"FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM chunk_extractions e WHERE e.chunk_id = c.id "
                f"AND e.extractor = :x){cond}", {"x": key, **params})

    def counts(self, conn, scope):
        key = storeio.extractor_key(scope.config)
        cond, params = _corpus_filter(conn, scope, "c")
        expected = conn.execute(text(f"SELECT COUNT(*) FROM chunks c WHERE 1=1{cond}"), params).scalar()
        done = conn.execute(text("SELECT COUNT(*) FROM chunk_extractions e JOIN chunks c ON c.id = e.chunk_id "
                                 f"WHERE e.extractor = :x{cond}"), {"x": key, **params}).scalar()
        return int(expected), int(done)

    def pending(self, conn, scope):
        key = storeio.extractor_key(scope.config)
        where, params = self._where(conn, scope, key)
        rows = conn.execute(text(f"SELECT c.id, c.corpus_id, c.text {where} ORDER BY c.id{_limit(scope)}"), params).all()
        return [Unit(f"chunk:{r[0]}:{key}", {"chunk_id": int(r[0]), "corpus_id": int(r[1]), "text": r[2],
                                            "extractor": key}) for r in rows]

    def _call_kwargs(self, services):
        cfg = services.config
        return dict(temperature=float(cfg.get("extraction.temperature")),
                    max_tokens=int(cfg.get("extraction.max_tokens")),
                    json_schema=ex.schema(cfg.get("extraction.max_triples", None)),
                    stage="extract", phase="construction",
                    timeout_s=stage_timeout(cfg, "extraction.timeout_s"))

    def compute(self, unit, services):
        res = services.gateway.chat("extractor", ex.messages(unit.payload["text"]), **self._call_kwargs(services))
        return {"triples": ex.clean_triples(res.data), "call_id": res.call_id}

    def write(self, conn, unit, result):
        self.write_batch(conn, [(unit, result)])

    def write_batch(self, conn, items):
        """Persist a batch of units' extractions in one go (the runner's transaction): one
        INSERT of every new entity name, one SELECT of their ids, one INSERT of the triples and
        one of the extraction rows for the whole batch, instead of 3–4 statements per chunk
        (issue 17: the writer capped extraction at ~8 chunks/s)."""
        by_owner: dict[tuple[int, str], set[str]] = {}
        for unit, result in items:
            p = unit.payload
            names = by_owner.setdefault((p["corpus_id"], p["extractor"]), set())
            for s_, _, o in result["triples"]:
                names.update((s_, o))
        ids: dict[tuple[int, str, str], int] = {}
        for (cid, extractor), names in by_owner.items():
            if not names:
                continue
            ordered = sorted(names)  # one global order: concurrent writers never deadlock
            _insert_rows(conn, models.Entity, ["corpus_id", "extractor", "name"],
                         [{"corpus_id": cid, "extractor": extractor, "name": n} for n in ordered])
            for i in range(0, len(ordered), 500):
                rows = conn.execute(_SELECT_ENTITY_IDS, {"c": cid, "x": extractor, "names": ordered[i:i + 500]}).all()
                ids.update({(cid, extractor, r[1]): int(r[0]) for r in rows})
        triples, done = [], []
        for unit, result in items:
            p = unit.payload
            cid, x = p["corpus_id"], p["extractor"]
            triples += [{"corpus_id": cid, "chunk_id": p["chunk_id"], "extractor": x,
                         "subject_id": ids[(cid, x, s_)], "relation": r, "object_id": ids[(cid, x, o)]}
                        for s_, r, o in result["triples"]]
            done.append({"chunk_id": p["chunk_id"], "extractor": x, "n_triples": len(result["triples"]),
                         "llm_call_id": result["call_id"]})
        _insert_rows(conn, models.Triple, ["chunk_id", "extractor", "subject_id", "relation", "object_id"], triples)
        _insert_rows(conn, models.ChunkExtraction, ["chunk_id", "extractor"], done)

    def estimate(self, conn, units, services):
        gw = services.gateway
        kw = self._call_kwargs(services)
        est = Estimate(stage=self.name, model=storeio.model_key(services.config, "extractor"))
        for unit in units:
            est.add_chat(gw, "extractor", ex.messages(unit.payload["text"]), **kw)
        return [est]

    def estimate_fresh(self, services, scope):
        """Extraction of the chunks the chunk stage has not made yet: documents are chunked
        in memory (cheap and deterministic: the same chunks the chunk stage will store)."""
        texts = _fresh_chunk_texts(services, scope)
        if not texts:
            return []
        gw = services.gateway
        kw = self._call_kwargs(services)
        est = Estimate(stage=self.name, model=storeio.model_key(services.config, "extractor"))
        for t in texts:
            est.add_chat(gw, "extractor", ex.messages(t), **kw)
        return [est]


def _fresh_chunk_texts(services, scope) -> list[str]:
    """The texts of the chunks the chunk stage will make (documents not chunked yet with
    today's chunker), chunked in memory in document order; ``scope.limit`` applies."""
    cfg = services.config
    key = storeio.chunker_key(cfg)
    with services.db_lock, services.engine.connect() as conn:
        cond, params = _corpus_filter(conn, scope)
        docs = conn.execute(text(
            "SELECT d.title, d.text FROM documents d WHERE NOT EXISTS (SELECT 1 FROM chunks c "
            f"WHERE c.document_id = d.id AND c.chunker = :k){cond} ORDER BY d.id"), {"k": key, **params}).all()
    out: list[str] = []
    for title, body in docs:
        for c in chunk_text(title or "", body, window=int(cfg.get("chunking.window")),
                            overlap=int(cfg.get("chunking.overlap"))):
            if scope.limit is not None and len(out) >= scope.limit:
                return out
            out.append(c.text)
    return out


class EmbedStage(Stage):
    name = "embed"
    description = "embed chunks and graph entities (L2-normalised vectors; FAISS indexes derive from them)"
    uses_llm = True
    KINDS = (("chunk", "chunks", "text"), ("entity", "entities", "name"))

    def backend_name(self, services):
        return services.config.role("embedder")

    def _sql(self, conn, scope, kind, table):
        cond, params = _corpus_filter(conn, scope, "o")
        return (f"FROM {table} o WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.owner_kind = :k "
                f"AND v.owner_id = o.id AND v.embedder = :e){cond}", params)

    def counts(self, conn, scope):
        emb = storeio.model_key(scope.config, "embedder")
        expected = done = 0
        for kind, table, _col in self.KINDS:
            cond, params = _corpus_filter(conn, scope, "o")
            expected += conn.execute(text(f"SELECT COUNT(*) FROM {table} o WHERE 1=1{cond}"), params).scalar()
            where, params = self._sql(conn, scope, kind, table)
            done_missing = conn.execute(text(f"SELECT COUNT(*) {where}"), {"k": kind, "e": emb, **params}).scalar()
            done -= done_missing
        return int(expected), int(expected + done)

    def pending(self, conn, scope):
        cfg = scope.config
        emb = storeio.model_key(cfg, "embedder")
        batch = int(cfg.backend(cfg.role("embedder")).get("batch_size", 32))
        units = []
        for kind, table, col in self.KINDS:
            where, params = self._sql(conn, scope, kind, table)
            rows = conn.execute(text(f"SELECT o.id, o.{col} {where} ORDER BY o.id{_limit(scope)}"),
                                {"k": kind, "e": emb, **params}).all()
            for i in range(0, len(rows), batch):
                part = rows[i:i + batch]
                units.append(Unit(f"{kind}:{part[0][0]}-{part[-1][0]}:{emb}",
                                  {"kind": kind, "ids": [int(r[0]) for r in part],
                                   "texts": [r[1] for r in part], "embedder": emb}))
        return units

    def compute(self, unit, services):
        return services.gateway.embed("embedder", unit.payload["texts"], stage="embed", phase=unit.payload["kind"])

    def write(self, conn, unit, result):
        p = unit.payload
        mat = np.ascontiguousarray(result, dtype=np.float32)
        rows = [{"owner_kind": p["kind"], "owner_id": oid, "embedder": p["embedder"], "dim": int(mat.shape[1]),
                 "data": mat[i].tobytes()} for i, oid in enumerate(p["ids"])]
        conn.execute(insert(models.Vector).values(rows).on_conflict_do_nothing(
            index_elements=["owner_kind", "owner_id", "embedder"]))

    def estimate(self, conn, units, services):
        est = Estimate(stage=self.name, model=storeio.model_key(services.config, "embedder"))
        for unit in units:
            est.calls += 1
            est.prompt_tokens += sum(tokens.count(t) for t in unit.payload["texts"])
        return [est]

    def estimate_fresh(self, services, scope):
        """Embedding of what earlier stages will make: the chunks the chunk stage has not made
        yet (chunked in memory) and the graph entities extraction will find in them and in the
        chunks not extracted yet (``Expectations.entities_per_chunk``: this store's extractions,
        else the ``dry_run.entities_per_chunk`` prior; a name counted at 4 tokens), in the
        backend's batches."""
        texts = _fresh_chunk_texts(services, scope)
        cfg = services.config
        extractor = storeio.extractor_key(cfg)
        with services.db_lock, services.engine.connect() as conn:
            cond, params = _corpus_filter(conn, scope)
            unextracted = conn.execute(text(
                "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE NOT EXISTS "
                f"(SELECT 1 FROM chunk_extractions x WHERE x.chunk_id = c.id AND x.extractor = :x){cond}"),
                {"x": extractor, **params}).scalar() or 0
        rate, _basis = expectations(services).entities_per_chunk(extractor)
        entities = round(rate * (len(texts) + int(unextracted)))
        if not texts and not entities:
            return []
        batch = int(cfg.backend(cfg.role("embedder")).get("batch_size", 32))
        est = Estimate(stage=self.name, model=storeio.model_key(cfg, "embedder"))
        est.calls = -(-len(texts) // batch) + -(-entities // batch)
        est.prompt_tokens = sum(tokens.count(t) for t in texts) + 4 * entities
        return [est]


class MetricsStage(Stage):
    """Corpus indicators, keyed by what they were computed from.

    The variant of every ``corpus_metrics`` row is ``extractor|embedder|fp:<fingerprint>``, the
    fingerprint being :func:`storeio.corpus_fingerprint` of the corpus' chunks, triples and chunk
    vectors. A corpus that grew (more chunks, triples or vectors) has a new fingerprint, so its
    unit is pending again; writing the fresh indicators removes the stale ones of the same
    extractor and embedder, so the store holds the indicators of what it now holds.
    """

    name = "metrics"
    description = "corpus indicators: graph structure (LCC, density, clustering, …) and embedding space (TwoNN, hubness, dispersion)"

    def _base(self, config) -> str:
        return f"{storeio.extractor_key(config)}|{storeio.model_key(config, 'embedder')}"

    def _variant(self, conn, config, corpus_id: int) -> str:
        fp = storeio.corpus_fingerprint(conn, corpus_id, storeio.extractor_key(config),
                                        storeio.model_key(config, "embedder"))
        return f"{self._base(config)}|fp:{fp}"

    @staticmethod
    def _have(conn, corpus_id: int, variant: str) -> bool:
        return bool(conn.execute(text("SELECT 1 FROM corpus_metrics WHERE corpus_id = :c AND variant = :v "
                                      "AND metric = 'hubness'"), {"c": corpus_id, "v": variant}).first())

    def counts(self, conn, scope):
        corpora = [cid for cid, _ in storeio.corpus_ids(conn, scope.corpus)]
        done = sum(self._have(conn, cid, self._variant(conn, scope.config, cid)) for cid in corpora)
        return len(corpora), done

    def pending(self, conn, scope):
        cfg = scope.config
        out = []
        for cid, name in storeio.corpus_ids(conn, scope.corpus):
            variant = self._variant(conn, cfg, cid)
            n_chunks = conn.execute(text("SELECT COUNT(*) FROM chunks WHERE corpus_id = :c"), {"c": cid}).scalar()
            if n_chunks and not self._have(conn, cid, variant):
                out.append(Unit(f"corpus:{name}:{variant}", {"corpus_id": cid, "variant": variant,
                                                            "base": self._base(cfg)}))
        return out

    def compute(self, unit, services):
        cfg = services.config
        cid = unit.payload["corpus_id"]
        with services.db_lock, services.engine.connect() as conn:
            triples = storeio.load_triples(conn, cid, storeio.extractor_key(cfg))
            _ids, vecs = storeio.load_vectors(conn, "chunk", None, storeio.model_key(cfg, "embedder"), cid)
        if len(vecs) < 3:
            raise RuntimeError(f"corpus {cid}: fewer than 3 chunk vectors — run the embed stage first")
        metrics = dict(indicators.structural(KnowledgeGraph.from_triples(triples)))
        metrics.update(indicators.semantic(vecs))
        return metrics

    def write(self, conn, unit, result):
        p = unit.payload
        stale = [v for (v,) in conn.execute(text("SELECT DISTINCT variant FROM corpus_metrics WHERE corpus_id = :c"),
                                            {"c": p["corpus_id"]}).all()
                 if v.startswith(p["base"] + "|fp:") and v != p["variant"]]
        for v in stale:
            conn.execute(text("DELETE FROM corpus_metrics WHERE corpus_id = :c AND variant = :v"),
                         {"c": p["corpus_id"], "v": v})
        rows = [{"corpus_id": unit.payload["corpus_id"], "metric": k, "variant": unit.payload["variant"],
                 "value": (None if v is None or (isinstance(v, float) and not np.isfinite(v)) else float(v))}
                for k, v in result.items()]
        stmt = insert(models.CorpusMetric).values(rows)
        conn.execute(stmt.on_conflict_do_update(index_elements=["corpus_id", "metric", "variant"],
                                                set_={"value": stmt.excluded.value}))


for _stage in (ChunkStage(), ExtractStage(), EmbedStage(), MetricsStage()):
    register(_stage)
