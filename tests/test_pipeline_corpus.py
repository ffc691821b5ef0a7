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
