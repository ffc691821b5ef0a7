"""Two ``run --until-decided`` workers on one cell: the worker that only waited (the other
answered and judged the batch it was about to run) must not save its older view of the cell
over the decision the other saved — the stored row, ``status`` and ``report`` say decided."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from ragrouter.decisions import sequential as sq
from tests.fake_openai import FakeOpenAI
from tests.test_decisions import _cfg, _store_with_questions, planted

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _prepare(engine, cfg) -> None:
    from ragrouter.stages import registry
    from ragrouter.stages.base import Scope
    from ragrouter.stages.runner import run_stage
    from ragrouter.stages.services import Services

    services = Services(cfg, engine)
    try:
        for name in ("chunk", "embed"):
            run_stage(registry.all_stages()[name], services, Scope(corpus="toy", config=cfg), progress=False)
    finally:
        services.finish()


def _worker(engine, cfg, out: dict, name: str) -> None:
    from ragrouter.decisions.driver import Budget, until_decided
    from ragrouter.stages.base import Scope
    from ragrouter.stages.services import Services

    services = Services(cfg, engine)
    try:
        out[name] = until_decided(services, Scope(corpus="toy", config=cfg), Budget(), progress=False)
    except BaseException as exc:  # noqa: BLE001 - the test reports it
        out[name] = exc
    finally:
        services.finish()


@pytest.mark.parametrize("kind", ["postgresql", "duckdb"])
def test_the_worker_that_waited_keeps_the_decision_the_other_saved(kind, request, monkeypatch):
    """Worker B replays the cell (nothing answered: batch 1 is next) and is held before it
    runs that batch; worker A then runs the whole sequence to a decision and saves it. B's
    batch is then answered already (by A): B runs no unit, and must end with the decision in
    the store, not save its own older, undecided view ("failed: 0 unit(s) failed") over it."""
    from ragrouter.stages import runner

    if kind == "postgresql":
        url = request.getfixturevalue("pg_url")
        from tests.conftest import _migrated

        gen = _migrated(url)
        engine_a = next(gen)
        request.addfinalizer(lambda: next(gen, None))
        engine_b = create_engine(url, future=True)  # its own pool and sessions, as another process has
        request.addfinalizer(engine_b.dispose)
    else:
        engine_a = engine_b = request.getfixturevalue("store")  # one process owns the file: two threads
    _store_with_questions(engine_a, 120)

    real_run_stage = runner.run_stage
    b_holds, a_done = threading.Event(), threading.Event()
    b_batches = []

    def run_stage(stage, services, scope, **kw):
        if threading.current_thread().name == "worker-b" and stage.name in ("answer", "judge"):
            if not b_batches:
                b_holds.set()
                assert a_done.wait(120), "worker A did not finish"
            b_batches.append((stage.name, list(scope.query_ids or [])))
        return real_run_stage(stage, services, scope, **kw)

    monkeypatch.setattr(runner, "run_stage", run_stage)
    with FakeOpenAI(responder=planted(0.8, 0.5, correlated=True), embedding_dim=16) as srv:
        cfg = _cfg(srv)
        _prepare(engine_a, cfg)
        out: dict = {}
        b = threading.Thread(target=_worker, args=(engine_b, cfg, out, "b"), name="worker-b")
        b.start()
        assert b_holds.wait(120), out.get("b")
        a = threading.Thread(target=_worker, args=(engine_a, cfg, out, "a"), name="worker-a")
        a.start()
        a.join(300)
        a_done.set()
        b.join(300)
        assert not a.is_alive() and not b.is_alive()

    assert not isinstance(out["a"], BaseException), out["a"]
    assert not isinstance(out["b"], BaseException), out["b"]
    (cell_a,), (cell_b,) = out["a"], out["b"]
    assert cell_a.state.state == sq.DECIDED and cell_a.state.leader == "naive" and cell_a.stop_reason == "decided"
    n = cell_a.state.n_queries
    assert 10 < n < 120, n  # more than B's one batch: B's view was older than A's decision
    assert [len(ids) for _, ids in b_batches[:1]] == [10]  # B was held before the first batch
    with engine_a.connect() as conn:
        row = conn.execute(text("SELECT state, winner, n_queries, n_runs, stop_reason FROM decision_cells")).one()
        answered = conn.execute(text("SELECT COUNT(DISTINCT query_id) FROM paradigm_runs")).scalar()
    # what status and report read: A's decision, not B's older view
    assert tuple(row) == ("decided", "naive", n, cell_a.runs, "decided")
    assert answered == n  # B answered nothing A had not
    # B ran its batch after A had answered it, then read the decision from the store
    assert (cell_b.state.state, cell_b.state.leader, cell_b.state.n_queries, cell_b.stop_reason) == \
        (sq.DECIDED, "naive", n, "decided")
