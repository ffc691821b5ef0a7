"""Scale-out on a real PostgreSQL: several worker processes share a stage through leases."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from ragrouter.db import migrate

REPO = Path(__file__).resolve().parent.parent


def _setup(pg_url: str) -> int:
    engine = create_engine(pg_url)
    migrate.upgrade(engine)
    with engine.begin() as conn:
        cid = conn.execute(text("INSERT INTO corpora (name) VALUES ('touch') RETURNING id")).scalar()
    engine.dispose()
    return int(cid)


def _worker(pg_url, n, cid, log_dir, sleep_s, lease):
    return subprocess.Popen([sys.executable, "-m", "tests.support.touch_stage", pg_url, str(n), str(cid),
                             str(log_dir), str(sleep_s), str(lease)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _computed(log_dir: Path) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for path in log_dir.glob("computed-*.log"):
        counts.update(path.read_text().split())
    return counts


def _done_rows(pg_url: str, cid: int) -> list[str]:
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT metric FROM corpus_metrics WHERE corpus_id = :c AND variant = 'touch'"),
                            {"c": cid}).scalars().all()
    engine.dispose()
    return rows


def test_four_workers_do_every_unit_exactly_once(pg_url, tmp_path):
    cid = _setup(pg_url)
    procs = [_worker(pg_url, 300, cid, tmp_path, 0.01, 600) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    computed = _computed(tmp_path)
    assert len(computed) == 300 and set(computed.values()) == {1}, "a unit was computed twice"
    rows = _done_rows(pg_url, cid)
    assert len(rows) == 300 and len(set(rows)) == 300
    per_worker = [int(o[0].split("done=")[1].split()[0]) for o in outs]
    assert sum(per_worker) == 300 and sum(1 for d in per_worker if d > 0) >= 2


def test_killed_worker_units_are_retaken_after_lease_expiry(pg_url, tmp_path):
    cid = _setup(pg_url)
    lease = 3
    victim = _worker(pg_url, 120, cid, tmp_path, 0.05, lease)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(_computed(tmp_path).values()) < 10:
        time.sleep(0.05)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    killed_log = tmp_path / f"computed-{victim.pid}.log"
    computed_by_victim = set(killed_log.read_text().split()) if killed_log.exists() else set()
    committed_before = set(_done_rows(pg_url, cid))
    others = [_worker(pg_url, 120, cid, tmp_path, 0.01, lease) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in others]
    assert all(p.returncode == 0 for p in others), [o[1][-2000:] for o in outs]
    rows = _done_rows(pg_url, cid)
    assert sorted(rows) == [f"u{i:04d}" for i in range(120)], "a unit was lost or duplicated"
    retaken = sum(int(o[0].split("retaken=")[1].split()[0]) for o in outs)
    # Units the victim had leased but not committed were retaken once its lease expired;
    # each retake is a unit computed by the victim (or leased by it) and computed again.
    recomputed = {k for k, c in _computed(tmp_path).items() if c > 1}
    assert recomputed <= computed_by_victim - committed_before
    assert retaken >= len(recomputed) >= 0
    assert retaken > 0, "the victim held leases when it was killed; they must have been retaken"


def test_four_postgres_workers_never_send_the_same_request_twice(pg_url):
    """Four processes ask the same 24 requests at the same moment (each in its own order):
    the ledger claim makes every request go out once; the others wait for its row."""
    import json

    from tests.fake_openai import FakeOpenAI

    engine = create_engine(pg_url)
    migrate.upgrade(engine)
    engine.dispose()
    n = 24
    with FakeOpenAI(latency_s=0.3) as srv:
        start_at = time.time() + 4.0
        procs = [subprocess.Popen([sys.executable, "-m", "tests.support.claim_worker", pg_url, srv.base_url, str(n),
                                   str(start_at), str(seed)], cwd=REPO, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for seed in range(4)]
        outs = [p.communicate(timeout=120) for p in procs]
        assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
        sent = collections.Counter(r["body"]["messages"][0]["content"] for r in srv.requests if r["method"] == "POST")
    assert len(sent) == n and set(sent.values()) == {1}, f"sent more than once: {sent.most_common(3)}"
    results = [json.loads(o[0].strip().splitlines()[-1]) for o in outs]
    assert sum(r["http_requests"] for r in results) == n
    assert sum(r["claim_hits"] for r in results) > 0, "no worker waited for another's claim: the test proved nothing"
    assert all(r["texts"] == results[0]["texts"] for r in results) and len(results[0]["texts"]) == n
    engine = create_engine(pg_url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT COUNT(*), COUNT(DISTINCT request_hash) FROM llm_calls")).one()
    engine.dispose()
    assert tuple(rows) == (n, n)


def test_a_deadlocked_batch_is_written_again_whole(store):
    """Several PostgreSQL workers' batches can deadlock on shared rows (entity names inserted
    in different orders); the runner retries the rolled-back batch instead of dying."""
    from sqlalchemy.exc import OperationalError

    from ragrouter.config import Config
    from ragrouter.stages.base import Scope, Stage, Unit
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    class Deadlock(Exception):
        sqlstate = "40P01"

    class Flaky(Stage):
        name = "flaky"
        writes: list[str] = []
        fails = 1

        def counts(self, conn, scope):
            return 3, 0

        def pending(self, conn, scope):
            return [Unit(f"u{i}", i) for i in range(3)]

        def compute(self, unit, services):
            return unit.payload * 10

        def write(self, conn, unit, result):
            if self.fails:
                self.fails -= 1
                raise OperationalError("INSERT ...", {}, Deadlock("deadlock detected"))
            self.writes.append(unit.key)

    stage = Flaky()
    services = Services(Config.load(), store)
    try:
        rep = run_stage(stage, services, Scope(config=services.config), workers=2, progress=False)
    finally:
        services.finish()
    assert rep.done == 3 and rep.failed == 0 and sorted(stage.writes) == ["u0", "u1", "u2"]

    class Broken(Flaky):
        fails = 99

    with pytest.raises(OperationalError):
        services = Services(Config.load(), store)
        try:
            run_stage(Broken(), services, Scope(config=services.config), workers=2, progress=False)
        finally:
            services.finish()


def test_model_stages_keep_more_units_in_flight_than_slots_each_with_its_priority(store):
    """Call-level scheduling: a model stage runs concurrency × worker.threads_per_slot unit
    threads (6 units in flight on a backend with 2 slots: they all reach the barrier), and
    each unit's requests carry its weight and schedule position (llm/slots.py)."""
    import copy
    import threading

    from ragrouter.config import Config
    from ragrouter.llm import slots
    from ragrouter.stages.base import Scope, Stage, Unit
    from ragrouter.stages.runner import run_stage, stage_threads
    from ragrouter.stages.services import Services

    data = copy.deepcopy(Config.load().data)
    data["backends"]["two-slots"] = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                                     "concurrency": 2}
    data["worker"]["threads_per_slot"] = 3
    cfg = Config(data, source="<test>")
    barrier = threading.Barrier(6, timeout=30)

    class Multi(Stage):
        name = "multi"
        uses_llm = True
        seen: dict[str, tuple[int, int]] = {}

        def backend_name(self, services):
            return "two-slots"

        def counts(self, conn, scope):
            return 6, 0

        def pending(self, conn, scope):
            return [Unit(f"u{i}", i) for i in range(6)]

        def unit_weight(self, unit):
            return 10 - unit.payload

        def compute(self, unit, services):
            barrier.wait()  # broken (an error) unless all six units run at once
            self.seen[unit.key] = slots.current_key()
            return unit.payload

        def write(self, conn, unit, result):
            pass

    stage = Multi()
    services = Services(cfg, store)
    try:
        assert stage_threads(stage, services) == 6
        rep = run_stage(stage, services, Scope(config=cfg), progress=False)
    finally:
        services.finish()
    assert rep.done == 6 and rep.failed == 0, rep.errors
    assert stage.seen == {f"u{i}": (-(10 - i), i) for i in range(6)}
    assert slots.current_key() == (0, 1 << 62)  # nothing leaks out of the units' threads


def test_extract_writes_a_batch_as_the_units_would_one_by_one(tmp_path):
    """The extract stage's batched writer (one INSERT per table for the runner's batch) stores
    exactly the entities, triples and extraction rows of unit-by-unit writes."""
    from ragrouter.corpus.stages import ExtractStage
    from ragrouter.db import engine as eng
    from ragrouter.stages.base import Unit

    items = [
        (Unit("chunk:1:x", {"chunk_id": 1, "corpus_id": 1, "text": "", "extractor": "x"}),
         {"triples": [("curie", "born in", "warsaw"), ("curie", "discovered", "polonium")], "call_id": 11}),
        (Unit("chunk:2:x", {"chunk_id": 2, "corpus_id": 1, "text": "", "extractor": "x"}),
         {"triples": [("polonium", "named after", "poland"), ("curie", "discovered", "polonium")], "call_id": 12}),
        (Unit("chunk:3:x", {"chunk_id": 3, "corpus_id": 1, "text": "", "extractor": "x"}),
         {"triples": [], "call_id": 13}),
    ]

    def store_with(write) -> dict:
        engine = eng.make_engine(f"duckdb:///{tmp_path}/{write}.duckdb")
        migrate.upgrade(engine)
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO corpora (id, name) VALUES (1, 'c')"))
            conn.execute(text("INSERT INTO documents (id, corpus_id, external_id, title, text) "
                              "VALUES (1, 1, 'd', '', 'text')"))
            for i in (1, 2, 3):
                conn.execute(text("INSERT INTO chunks (id, document_id, corpus_id, chunker, chunk_index, text, "
                                  "n_tokens, token_start, token_end, char_start, char_end) "
                                  "VALUES (:i, 1, 1, 'k', :i, 't', 1, 0, 1, 0, 1)"), {"i": i})
        stage = ExtractStage()
        with engine.begin() as conn:
            if write == "batch":
                stage.write_batch(conn, items[:2])
                stage.write_batch(conn, items[2:])
            else:
                for unit, result in items:
                    stage.write(conn, unit, result)
        with engine.connect() as conn:
            out = {
                "entities": sorted(conn.execute(text("SELECT name FROM entities")).scalars()),
                "triples": sorted(tuple(r) for r in conn.execute(text(
                    "SELECT t.chunk_id, s.name, t.relation, o.name FROM triples t "
                    "JOIN entities s ON s.id = t.subject_id JOIN entities o ON o.id = t.object_id")).all()),
                "extractions": sorted(tuple(r) for r in conn.execute(text(
                    "SELECT chunk_id, extractor, n_triples, llm_call_id FROM chunk_extractions")).all()),
            }
        engine.dispose()
        eng.dispose_all()
        return out

    batch, single = store_with("batch"), store_with("single")
    assert batch == single
    assert batch["entities"] == ["curie", "poland", "polonium", "warsaw"]
    assert len(batch["triples"]) == 4 and batch["extractions"][2] == (3, "x", 0, 13)
