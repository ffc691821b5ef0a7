"""Estimates that learn from the first calls, a stage that says when it runs far from its
estimate, and a stage that starts nothing after its deadline (ragrouter/stages/timing.py,
ragrouter/stages/runner.py).

A user's `run` on a busy machine took 199 s a call where the estimate said 38.6 s, and four
such calls (fewer than dry_run.timing.history_min) left the estimate on the prior.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text

from ragrouter.stages import registry, timing
from ragrouter.stages.base import Scope
from ragrouter.stages.runner import dry_run, run_stage
from ragrouter.stages.services import Services
from ragrouter.stages.timing import StageWatch, Timing, wall_estimates
from tests.fake_openai import FakeOpenAI
from tests.test_stages_answer import fake_config, ingest, responder

LATENCY = 0.4
FAST = {"openai": {"overhead_s": 0.01, "prompt_tps": 1000000, "gen_tps": 1000000, "parallel": None}}


def _config(srv, **gen):
    cfg = fake_config(srv)
    cfg.data["dry_run"]["timing"]["priors"] = dict(FAST)  # the stated endpoint: ~10 ms a call
    cfg.data["backends"]["fake-gen"].update(gen)
    return cfg


def _extract_row(cfg, services, scope):
    stages = registry.all_stages()
    services.cache.clear()
    est = [e for e in dry_run([stages["extract"]], services, scope) if e.stage == "extract"]
    return wall_estimates(cfg, est, services)["stages"][0]


def test_a_slow_backends_first_calls_replace_the_prior_in_the_next_estimate(store):
    ingest(store)
    with FakeOpenAI(responder=responder, latency_s=LATENCY, embedding_dim=16) as srv:
        cfg = _config(srv, concurrency=1)
        services = Services(cfg, store)
        try:
            stages = registry.all_stages()
            run_stage(stages["chunk"], services, Scope(corpus="toy", config=cfg), progress=False)
            scope = Scope(corpus="toy", config=cfg)
            before = _extract_row(cfg, services, scope)
            assert before["time_basis"].startswith("stated:openai"), before
            calls = before["calls"]
            assert before["expected_wall_s"] < 0.2 * calls * LATENCY  # the prior: far too fast
            rep = run_stage(stages["extract"], services, Scope(corpus="toy", config=cfg, limit=4), progress=False)
            assert rep.done == 4
            after = _extract_row(cfg, services, scope)
        finally:
            services.finish()
    assert after["calls"] == calls - 4
    assert after["time_basis"].startswith("history-scaled:4("), after  # 4 < history_min (20): scaled, not fitted
    per_call = after["expected_wall_s"] / after["calls"]
    assert LATENCY * 0.8 <= per_call <= LATENCY * 2.0, after  # one call at a time: the calls' own latency
    t = Timing(store, cfg)
    one, basis = t.call_seconds("fake-model", 1, 100, 20)
    assert basis.startswith("history-scaled:4") and one == pytest.approx(LATENCY, rel=0.5)


def test_a_stage_far_from_its_estimate_says_its_new_time_left_once(store, capsys, monkeypatch):
    ingest(store)
    monkeypatch.setattr(StageWatch, "EVERY_S", 0.0)
    monkeypatch.setattr(StageWatch, "MIN_LEFT_S", 0.0)  # the fake's stage is over in seconds
    with FakeOpenAI(responder=responder, latency_s=LATENCY, embedding_dim=16) as srv:
        cfg = _config(srv, concurrency=1)
        cfg.data["worker"]["batch_size"] = 1  # a flush (and a look at the ledger) after every unit
        cfg.data["worker"]["threads_per_slot"] = 1  # one unit in flight
        services = Services(cfg, store)
        try:
            stages = registry.all_stages()
            run_stage(stages["chunk"], services, Scope(corpus="toy", config=cfg), progress=False)
            capsys.readouterr()
            rep = run_stage(stages["extract"], services, Scope(corpus="toy", config=cfg), progress=False)
        finally:
            services.finish()
    out = capsys.readouterr().out
    said = [ln for ln in out.splitlines() if ln.startswith("extract: its calls take")]
    assert len(said) == 1, out  # once
    ratio = float(said[0].split("take ")[1].split("×")[0])
    assert ratio >= 10, said  # ~0.4 s a call against the prior's ~0.01 s
    left = int(said[0].split("at this rate the ")[1].split(" unit")[0])
    # not before 3 units (and twice those in flight) have finished: the first carries the start
    assert 0 < left <= rep.pending - StageWatch.MIN_UNITS and "take about 0:00:0" in said[0], said


def test_a_stage_starts_no_unit_after_its_deadline(store):
    ingest(store)
    with FakeOpenAI(responder=responder, latency_s=LATENCY, embedding_dim=16) as srv:
        cfg = _config(srv, concurrency=2)
        services = Services(cfg, store)
        try:
            stages = registry.all_stages()
            run_stage(stages["chunk"], services, Scope(corpus="toy", config=cfg), progress=False)
            started = time.monotonic()
            deadline = started + 1.5 * LATENCY  # two rounds of two units start, no third
            rep = run_stage(stages["extract"], services, Scope(corpus="toy", config=cfg), progress=False,
                            deadline=deadline)
            took = time.monotonic() - started
        finally:
            services.finish()
    assert rep.stopped == "deadline" and rep.failed == 0
    assert 2 <= rep.done <= 4 < rep.pending, rep
    assert took <= (deadline - started) + LATENCY + 1.0  # one unit's time late at most (+ the writes)
    with store.connect() as conn:
        done = conn.execute(text("SELECT COUNT(*) FROM chunk_extractions")).scalar()
        row = conn.execute(text("SELECT units FROM stage_timings WHERE stage = 'extract'")).scalar()
        failures = conn.execute(text("SELECT COUNT(*) FROM unit_failures")).scalar()
    assert done == rep.done == row and failures == 0  # the rest stays pending, not failed


def test_other_work_scales_the_local_priors_and_is_said(store, monkeypatch):
    from ragrouter.config import Config

    cfg = Config.load(path="configs/demo.yaml", env={})
    idle_t = Timing(store, cfg, load=timing.cpuload.Load(cpus=2, others=0.0, window_s=0.5))
    busy_load = timing.cpuload.Load(cpus=2, others=2.0, window_s=0.5)
    busy_t = Timing(store, cfg, load=busy_load)
    idle, idle_basis = idle_t.call_seconds("qwen2.5-coder-0.5b", 10, 5000, 1000)
    busy, busy_basis = busy_t.call_seconds("qwen2.5-coder-0.5b", 10, 5000, 1000)
    factor = timing.cpuload.slowdown(busy_load)
    assert busy == pytest.approx(idle * factor) and factor > 1.5
    assert idle_basis == "prior:qwen2.5-coder-0.5b" and busy_basis == f"prior:qwen2.5-coder-0.5b,busy×{factor:.2g}"
    assert busy_t.unit_seconds("metrics", 1)[0] == pytest.approx(idle_t.unit_seconds("metrics", 1)[0] * factor)
    assert timing.load_line(busy_load).startswith(f"the cores are 100 % busy with other work: times ×{factor:.1f}")
