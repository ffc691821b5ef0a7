"""Ingest and the chunk stage through the runner: counts from the paper, idempotence."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from ragrouter.config import Config
from ragrouter.db.engine import write_lock
from ragrouter.ingest import loaders, store as ingest_store
from ragrouter.ingest.records import LoaderError
from ragrouter.stages import registry
from ragrouter.stages.base import Scope
from ragrouter.stages.runner import run_stage
from ragrouter.stages.services import Services

from tests.conftest import SHARED_DATA

MEDICAL = SHARED_DATA / "medical"


def _ingest_medical(engine):
    ds = loaders.load("graphrag-bench", [MEDICAL / "medical.json", MEDICAL / "medical_questions.json"])
    with write_lock(engine), engine.begin() as conn:
        return ingest_store.write_dataset(conn, "medical", "graphrag-bench", ds, [])


def test_medical_ingest_and_chunk_match_the_paper(store):
    rep = _ingest_medical(store)
    assert (rep.documents_new, rep.questions_new) == (1, 1896)
    again = _ingest_medical(store)
    assert (again.documents_new, again.questions_new) == (0, 0)
    with store.connect() as conn:
        assert conn.execute(text("SELECT n_tokens FROM documents")).scalar() == 221_495
        by_type = dict(conn.execute(text("SELECT qtype, COUNT(*) FROM queries GROUP BY qtype")).all())
    assert by_type == {"factual": 1098, "reasoning": 509, "summary": 289}

    config = Config.load()
    services = Services(config, store)
    scope = Scope(corpus="medical", config=config)
    stage = registry.all_stages()["chunk"]
    first = run_stage(stage, services, scope, progress=False)
    assert (first.pending, first.done, first.failed) == (1, 1, 0)
    second = run_stage(stage, services, scope, progress=False)
    assert second.pending == 0
    with store.connect() as conn:
        n, max_tokens, starts = conn.execute(text(
            "SELECT COUNT(*), MAX(n_tokens), MAX(token_start) FROM chunks")).one()
        assert (n, max_tokens) == (538, 512)
        assert starts == 537 * 412
        expected, done = stage.counts(conn, scope)
    assert (expected, done) == (1, 1)


def test_malformed_input_leaves_the_store_unchanged(store, tmp_path):
    bad = tmp_path / "corpus.json"
    bad.write_text('{"corpus_name": "X", "context": ""}')
    qs = tmp_path / "q.json"
    qs.write_text('[{"id": "q1", "source": "X", "question": "What?", "answer": "A", '
                  '"question_type": "Fact Retrieval", "evidence": [], "evidence_relations": []}]')
    with pytest.raises(LoaderError, match="corpus.json"):
        loaders.load("graphrag-bench", [bad, qs])
    with store.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM documents")).scalar() == 0


def _grow(engine, config, corpus_id: int, doc_id: int, start: int, n: int, seed: int) -> None:
    """Add chunks start..start+n-1 with random vectors and a chain of triples through them."""
    import numpy as np

    from ragrouter.stages import storeio
    from ragrouter.db import models

    rng = np.random.default_rng(seed)
    ext, emb = storeio.extractor_key(config), storeio.model_key(config, "embedder")
    with write_lock(engine), engine.begin() as conn:
        for i in range(start, start + n):
            cid = conn.execute(models.Chunk.__table__.insert().values(
                document_id=doc_id, corpus_id=corpus_id, chunker=storeio.chunker_key(config), chunk_index=i,
                text=f"chunk {i}", n_tokens=2, token_start=i, token_end=i + 1, char_start=i, char_end=i + 1,
            ).returning(models.Chunk.id)).scalar_one()
            v = rng.standard_normal(8).astype(np.float32)
            conn.execute(models.Vector.__table__.insert().values(
                owner_kind="chunk", owner_id=cid, embedder=emb, dim=8, data=(v / np.linalg.norm(v)).tobytes()))
            ents = []
            for name in (f"e{i}", f"e{i + 1}"):
                eid = conn.execute(text("SELECT id FROM entities WHERE corpus_id = :c AND name = :n"),
                                   {"c": corpus_id, "n": name}).scalar()
                if eid is None:
                    eid = conn.execute(models.Entity.__table__.insert().values(
                        corpus_id=corpus_id, extractor=ext, name=name).returning(models.Entity.id)).scalar_one()
                ents.append(eid)
            conn.execute(models.Triple.__table__.insert().values(
                corpus_id=corpus_id, chunk_id=cid, extractor=ext, subject_id=ents[0], relation="next",
                object_id=ents[1]))


def test_the_extractor_key_names_model_prompt_version_and_output_limit():
    from ragrouter.graph import extract
    from ragrouter.stages import storeio

    config = Config.load(env={})
    key = storeio.extractor_key(config)
    assert key == f"qwen2.5-coder-0.5b|{extract.PROMPT_VERSION}|mt4096"
    demo = Config.load(Path(__file__).resolve().parent.parent / "configs" / "demo.yaml", env={})
    assert storeio.extractor_key(demo).endswith("|mt300")  # the demo's capped replies are another graph
    assert "at most" not in extract.SYSTEM  # no cap on the number of triples (paper Fig. 8)


def test_a_grown_corpus_gets_fresh_indicators(store):
    from ragrouter.db import models

    config = Config.load(env={})
    with write_lock(store), store.begin() as conn:
        corpus_id = conn.execute(models.Corpus.__table__.insert().values(name="growing")
                                 .returning(models.Corpus.id)).scalar_one()
        doc_id = conn.execute(models.Document.__table__.insert().values(
            corpus_id=corpus_id, external_id="d1", title="", text="x", n_tokens=1).returning(models.Document.id)).scalar_one()
    _grow(store, config, corpus_id, doc_id, 0, 15, seed=1)
    services = Services(config, store)
    scope = Scope(corpus="growing", config=config)
    stage = registry.all_stages()["metrics"]

    def metrics():
        with store.connect() as conn:
            return {m: (v, var) for m, v, var in conn.execute(text(
                "SELECT metric, value, variant FROM corpus_metrics WHERE corpus_id = :c"), {"c": corpus_id}).all()}

    first = run_stage(stage, services, scope, progress=False)
    assert (first.pending, first.done, first.failed) == (1, 1, 0)
    before = metrics()
    assert before["nodes"][0] == 16 and before["edges"][0] == 15  # a chain e0 - e1 - ... - e15
    assert before["max_degree_centrality"][0] == pytest.approx(2 / 15)
    assert "|fp:" in before["nodes"][1]
    assert run_stage(stage, services, scope, progress=False).pending == 0  # nothing changed: nothing to do
    with store.connect() as conn:
        assert stage.counts(conn, scope) == (1, 1)

    _grow(store, config, corpus_id, doc_id, 15, 10, seed=2)  # 10 more chunks, vectors, triples
    with store.connect() as conn:
        assert stage.counts(conn, scope) == (1, 0)  # the stored indicators describe the old corpus
    again = run_stage(stage, services, scope, progress=False)
    assert (again.pending, again.done, again.failed) == (1, 1, 0)
    after = metrics()
    assert after["nodes"][0] == 26 and after["edges"][0] == 25
    assert after["max_degree_centrality"][0] == pytest.approx(2 / 25)
    assert after["dist_mean"][0] != before["dist_mean"][0]
    assert after["nodes"][1] != before["nodes"][1]  # a new fingerprint ...
    assert len({var for _, var in after.values()}) == 1  # ... and the stale indicators are gone
    with store.connect() as conn:
        n_rows = conn.execute(text("SELECT COUNT(*) FROM corpus_metrics WHERE corpus_id = :c"),
                              {"c": corpus_id}).scalar()
        profile = conn.execute(text("SELECT nodes FROM v_corpus_profile WHERE corpus_id = :c"),
                               {"c": corpus_id}).scalar()
    assert n_rows == len(after) and profile == 26
