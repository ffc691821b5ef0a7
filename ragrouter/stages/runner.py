"""Runs stages: pending units through a thread pool, one writer committing in batches.

Each unit's result rows are written in one transaction with its bookkeeping (the unit's
failure record is cleared in the same transaction). Model calls are committed to the
ledger by the gateway as they return, so a killed worker never pays for them twice. A
unit that raises is recorded in ``unit_failures`` with its reason and retried next run.

A stage given a ``deadline`` starts no unit after it (they stay pending; the units running then
finish), one unit per request slot, so it ends at most one unit's time late. Ctrl-C or SIGTERM
(:mod:`ragrouter.commands.interrupt`) in a stage writes the units that finished and the stage's
``stage_timings`` row before the interruption goes on up (``stage_report`` on the exception);
calls still in flight are not waited for.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from sqlalchemy import delete, func, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from tqdm import tqdm

from ragrouter.db import progress as progress_file
from ragrouter.db import models, outage
from ragrouter.llm import local_server, slots
from ragrouter.stages.base import Estimate, Scope, Stage, Unit
from ragrouter.stages.expect import active, expectations
from ragrouter.stages.leases import LeaseManager
from ragrouter.stages.services import Services
from ragrouter.stages.timing import StageWatch


@dataclass
class StageReport:
    stage: str
    pending: int = 0
    done: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    retaken: int = 0
    """Units this worker leased after another worker's lease expired (PostgreSQL)."""
    lost: int = 0
    """Units whose lease expired before this worker finished them (another completes them)."""
    work: int = 0
    """The work the finished units stand for (:func:`work_units`): what ``stage_timings`` records."""
    stopped: str | None = None
    """``deadline`` when units were left pending because the deadline passed."""


def work_units(stage, unit) -> int:
    """How much work one unit is, in the measure the stage's time scales with: a stage may
    say (``work_units(unit)``: the score stage's unit is a batch of runs, counted as its runs),
    else one. Dry runs and ``stage_timings`` count in this measure alike."""
    measure = getattr(stage, "work_units", None)
    return int(measure(unit)) if callable(measure) else 1


FLUSH_RETRIES = 5
PG_WRITE_LOCK_CLASS = 0x52475354  # 'RGST': two-int advisory locks, apart from the ledger's bigint claims


def _stage_lock_key(name: str) -> int:
    import zlib

    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def _is_transient(exc: BaseException) -> bool:
    """A PostgreSQL deadlock (40P01) or serialisation failure (40001): the batch's transaction
    was rolled back as a whole and can simply run again (several workers' batches insert the
    same entity names in different orders)."""
    code = getattr(getattr(exc, "orig", None), "sqlstate", None) or getattr(getattr(exc, "orig", None), "pgcode", None)
    return code in ("40P01", "40001")


def _short(exc: BaseException) -> str:
    text = f"{exc.__class__.__name__}: {exc}"
    return text.splitlines()[0][:1000] if text else exc.__class__.__name__


def record_failure(conn, stage: str, key: str, error: str) -> None:
    stmt = pg_insert(models.UnitFailure).values(stage=stage, unit_key=key, error=error, attempts=1)
    stmt = stmt.on_conflict_do_update(
        index_elements=["stage", "unit_key"],
        set_={"error": stmt.excluded.error, "attempts": models.UnitFailure.attempts + 1,
              "updated_at": func.now()})
    conn.execute(stmt)


def clear_failures(conn, stage: str, keys: list[str]) -> None:
    if keys:
        conn.execute(delete(models.UnitFailure).where(models.UnitFailure.stage == stage,
                                                      models.UnitFailure.unit_key.in_(keys)))


class _Late(Exception):
    """A unit whose turn came after the stage's deadline: left pending, not a failure."""


def run_stage(stage: Stage, services: Services, scope: Scope, *, workers: int | None = None,
              batch_size: int | None = None, progress: bool = True, deadline: float | None = None,
              label: str | None = None) -> StageReport:
    """Run every pending unit of ``stage`` for ``scope``; return what happened. ``deadline``
    (``time.monotonic()``): start no unit after it (see the module doc)."""
    started = time.monotonic()
    engine = services.engine
    report = StageReport(stage.name)
    outage_s = outage.limit_of(services.config)  # every statement below waits out a lost store (db/outage.py)

    def pending():
        with services.db_lock, engine.connect() as conn:
            return stage.pending(conn, scope)

    def finish() -> None:
        with services.db_lock, engine.begin() as conn:
            stage.finish(conn, services, scope)

    units = outage.retry(pending, f"reading the pending units of stage {stage.name}", outage_s)
    report.pending = len(units)
    progress_file.update(engine, stage.name, pending=report.pending, force=True)  # for `status` (DuckDB)
    if not units:
        outage.retry(finish, f"finishing stage {stage.name}", outage_s)
        report.seconds = time.monotonic() - started
        return report
    if deadline is not None and time.monotonic() >= deadline:  # not even its start (a model's load)
        report.stopped = "deadline"
        report.seconds = time.monotonic() - started
        return report
    # this process, its config and its stages: what the store's runs expect
    outage.retry(lambda: services.record_stage(stage.name), f"recording this worker's run of stage {stage.name}",
                 outage_s)
    gw = services.__dict__.get("gateway")
    calls_before = gw.stats().get("http_requests", 0) if gw is not None else 0
    free_cores(stage, services, scope)
    outage.retry(lambda: stage.prepare(services, scope), f"preparing stage {stage.name}", outage_s)
    # with a deadline, one unit per request slot: the units running when it passes end within a unit's time
    threads = workers or (stage_workers(stage, services) if deadline is not None else stage_threads(stage, services))
    workers = threads
    watch = StageWatch(services, stage.name, in_flight=threads) if getattr(stage, "uses_llm", False) else None
    batch_size = batch_size or int(services.config.get("worker.batch_size", 50))
    leases = None
    bar = tqdm(total=len(units), desc=label or stage.name, unit="unit", disable=not progress, dynamic_ncols=True)
    buffer: list[tuple[Unit, object, BaseException | None]] = []
    last_flush = time.monotonic()

    pg_write_key = _stage_lock_key(stage.name) if engine.dialect.name == "postgresql" else None
    write_batch = getattr(stage, "write_batch", None)

    def flush() -> None:
        nonlocal last_flush
        if not buffer:
            return
        gateway = services.__dict__.get("gateway")
        if gateway is not None and hasattr(gateway, "flush"):
            gateway.flush()  # ledger rows first: results link to them

        def write_buffer() -> int:
            for attempt in range(FLUSH_RETRIES):
                lost = 0
                try:
                    with services.db_lock, engine.begin() as conn:
                        if pg_write_key is not None:
                            # one stage's batches are written one worker at a time: they insert shared
                            # rows (entity names) in orders no single batch can make global, and
                            # deadlocked (4 extract workers on PostgreSQL); held until commit
                            conn.execute(text("SELECT pg_advisory_xact_lock(:a, :b)"),
                                         {"a": PG_WRITE_LOCK_CLASS, "b": pg_write_key})
                        held = None
                        if leases is not None:  # one UPDATE for the batch; units whose lease expired
                            held = leases.complete_many(  # were taken over by another worker
                                conn, [u.key for u, _, e in buffer if e is None],
                                [u.key for u, _, e in buffer if e is not None])
                        ok = []
                        for unit, result, exc in buffer:
                            if held is not None and unit.key not in held:
                                lost += 1
                            elif exc is None:
                                ok.append((unit, result))
                            else:
                                record_failure(conn, stage.name, unit.key, _short(exc))
                        if ok and callable(write_batch):
                            write_batch(conn, ok)  # the stage writes the batch's rows in one go
                        else:
                            for unit, result in ok:
                                stage.write(conn, unit, result)
                        clear_failures(conn, stage.name, [u.key for u, _ in ok])
                    return lost
                except Exception as exc:  # noqa: BLE001 - only a deadlock/serialisation failure is retried
                    if attempt == FLUSH_RETRIES - 1 or not _is_transient(exc):
                        raise
                    time.sleep(0.05 * (attempt + 1))  # another worker's batch holds rows ours needs: retry it whole
            return 0

        # a lost store connection is waited for, the batch written whole once it is back (db/outage.py)
        report.lost += outage.retry(write_buffer, f"writing a batch of stage {stage.name}", outage_s)
        buffer.clear()
        last_flush = time.monotonic()

    def tokens_postfix() -> dict:
        gw = services.__dict__.get("gateway")
        post = {"failed": report.failed}
        if gw is not None and hasattr(gw, "stats"):
            stats = gw.stats()
            post["tok"] = stats.get("billed_tokens", 0)
        return post

    leases = None
    if engine.dialect.name == "postgresql":
        leases = LeaseManager(engine, stage.name, int(services.config.get("worker.lease_seconds", 600)))
        leases.outage_s = outage_s
        leases.register([u.key for u in units], ordered=bool(getattr(stage, "ordered_units", False)))
    by_key = {u.key: u for u in units}
    queue = list(units) if leases is None else []

    def next_unit() -> Unit | None:
        if leases is None:
            return queue.pop(0) if queue else None
        if not queue:
            queue.extend(by_key[k] for k in leases.claim(max(1, workers)) if k in by_key)
        return queue.pop(0) if queue else None

    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix=stage.name)
    interrupted: BaseException | None = None
    running: dict[Future, Unit] = {}
    weigh = getattr(stage, "unit_weight", None)
    seq = iter(range(1 << 62))

    def compute(unit: Unit, n: int):
        if deadline is not None and time.monotonic() >= deadline:
            raise _Late()
        # call-level scheduling (llm/slots.py): this unit's requests wait for a backend slot
        # with the priority of its expected calls left
        with slots.unit_priority(int(weigh(unit)) if callable(weigh) else 1, n):
            return stage.compute(unit, services)

    def submit_next() -> bool:
        if deadline is not None and time.monotonic() >= deadline:
            report.stopped = "deadline"
            return False
        unit = next_unit()
        if unit is None:
            return False
        running[pool.submit(compute, unit, next(seq))] = unit
        return True

    def fill() -> None:
        for _ in range(max(1, workers) * 2 - len(running)):
            if not submit_next():
                break

    try:
        fill()
        while True:
            if not running:
                flush()  # our finished units first: other workers may be waiting for them
                if leases is None or report.stopped or not _wait_for_others(leases, fill, running):
                    break
            done, _ = wait(list(running), timeout=2.0, return_when=FIRST_COMPLETED)
            for fut in done:
                unit = running.pop(fut)
                exc = fut.exception()
                if isinstance(exc, _Late):  # its turn came after the deadline: still pending
                    report.stopped = "deadline"
                    if leases is not None:
                        leases.release([unit.key])
                    continue
                if exc is None:
                    buffer.append((unit, fut.result(), None))
                    report.done += 1
                    report.work += work_units(stage, unit)
                else:
                    if not isinstance(exc, Exception):
                        raise exc
                    buffer.append((unit, None, exc))
                    report.failed += 1
                    if len(report.errors) < 20:
                        report.errors.append(f"{unit.key}: {_short(exc)}")
                bar.update(1)
                submit_next()
            if done:
                bar.set_postfix(tokens_postfix(), refresh=False)
                progress_file.update(engine, stage.name, done=report.done, failed=report.failed,
                                     pending=report.pending)
            if len(buffer) >= batch_size or (buffer and time.monotonic() - last_flush > 5.0):
                flush()
                if watch is not None and report.done:
                    said = watch.check(report.done, report.pending - report.done - report.failed,
                                       time.monotonic() - started)
                    if said:
                        tqdm.write(said)
        flush()
    except BaseException as exc:
        interrupted = exc
        raise
    finally:
        # On Ctrl-C or SIGTERM: keep what finished, drop what did not (it stays pending).
        for fut in running:
            fut.cancel()
        if isinstance(interrupted, KeyboardInterrupt):
            _keep_on_interrupt(interrupted, report, flush, lambda: _record_timing(
                services, stage.name, report, calls_before), started)
        if leases is not None:
            leases.release([u.key for u in running.values()] + [u.key for u in queue])
            report.retaken = leases.retaken
            leases.close()
        bar.close()
        pool.shutdown(wait=not isinstance(interrupted, KeyboardInterrupt), cancel_futures=True)

    outage.retry(finish, f"finishing stage {stage.name}", outage_s)
    progress_file.update(engine, stage.name, done=report.done, failed=report.failed, pending=report.pending,
                    force=True)
    report.seconds = time.monotonic() - started
    outage.retry(lambda: _record_timing(services, stage.name, report, calls_before),
                 f"recording the time of stage {stage.name}", outage_s)
    return report


def _keep_on_interrupt(exc: BaseException, report: StageReport, flush, record, started: float) -> None:
    """An interrupted stage: write the units that finished and its ``stage_timings`` row, and
    hang the report on the exception for the command's last line. A store that fails here
    leaves them (the units are done again next run) with one line."""
    try:
        flush()
        report.seconds = time.monotonic() - started
        record()
    except Exception as err:  # noqa: BLE001 - the store may be what failed; the interruption goes on
        print(f"{report.stage}: the units finished before the interruption were not all written ({_short(err)})",
              file=sys.stderr, flush=True)
    exc.stage_report = report  # type: ignore[attr-defined]


def _record_timing(services: Services, stage: str, report: StageReport, calls_before: int) -> None:
    """One ``stage_timings`` row: the wall seconds this worker spent on the units it finished
    and the model requests they made (what dry runs learn time from)."""
    if report.done <= 0:
        return
    gateway = services.__dict__.get("gateway")
    calls = (gateway.stats().get("http_requests", 0) - calls_before) if gateway is not None else 0
    with services.db_lock, services.engine.begin() as conn:
        conn.execute(models.StageTiming.__table__.insert().values(
            worker_run_id=services.worker_run_id, stage=stage, units=int(report.work),
            seconds=float(report.seconds), model_calls=int(max(0, calls))))


def _wait_for_others(leases, fill, running) -> bool:
    """Nothing left to claim now: while other workers hold leases (or units are pending), wait
    and claim again — a dead worker's units become claimable at once (its liveness lock is gone,
    stages/leases.py), a live one's when its lease expires, and the stage is complete only when
    none is left; says once what it waits for and until when. True when there is work again."""
    while leases.outstanding():
        leases.say_waiting(lambda line: print(line, file=sys.stderr, flush=True))  # for what, until when
        time.sleep(min(1.0, max(0.05, leases.lease_seconds / 10)))
        fill()
        if running:
            return True
    return False


def stage_local_models(stage: Stage, services: Services, scope: Scope) -> set[str]:
    """The local chat models (``kind: local``) whose servers ``stage`` calls: its role's
    backend, or for ``answer`` every generator of the scope."""
    config = services.config
    if not getattr(stage, "uses_llm", False):
        return set()
    if stage.name == "answer":
        names = list(scope.models) or list(config.generators())
    else:
        name = getattr(stage, "backend_name", None)
        try:
            names = [name(services) if callable(name) else name]
        except Exception:  # noqa: BLE001 - a role that is unset means no model work
            names = []
    models = set()
    for name in filter(None, names):
        try:
            spec = config.backend(name)
        except Exception:  # noqa: BLE001 - the stage reports an unknown backend itself
            continue
        if spec.get("kind") == "local":
            models.add(str(spec.get("model")))
    return models


def free_cores(stage: Stage, services: Services, scope: Scope) -> list[str]:
    """Stop the embedded servers this stage does not call (``worker.one_local_model``), so the
    cores are its own, and choose the automatic threads and poll of those it calls again for
    the other work on the machine now (a server whose choice changed restarts: one line says
    so); the names of the models stopped."""
    models = stage_local_models(stage, services, scope)
    stopped = local_server.stop_idle_except(models) if services.config.get("worker.one_local_model", True) else []
    for said in local_server.retune(models):
        print(f"{stage.name}: local model {said} (the other work on the machine changed)", file=sys.stderr,
              flush=True)
    return stopped


def stage_threads(stage: Stage, services: Services) -> int:
    """Unit threads for a stage: its backend's concurrency × ``worker.threads_per_slot`` for
    a model stage (more units in flight than request slots, so a slot frees between the calls
    of a multi-call unit and goes to the unit with most calls left: llm/slots.py), else the
    concurrency (1 without a backend)."""
    n = stage_workers(stage, services)
    if getattr(stage, "uses_llm", False):
        n *= max(1, int(services.config.get("worker.threads_per_slot", 1) or 1))
    return n


def stage_workers(stage: Stage, services: Services) -> int:
    """Threads for a stage: its model backend's concurrency, else 1."""
    backend = getattr(stage, "backend_name", None)
    if callable(backend):
        backend = backend(services)
    if backend:
        try:
            return int(services.config.backend(backend).get("concurrency", 1) or 1)
        except Exception:  # noqa: BLE001 - a role that is unset means no model work
            return 1
    return 1


def dry_run(stages: list[Stage], services: Services, scope: Scope) -> list[Estimate]:
    """What the pending work of ``stages`` would spend, minus what the cache holds.

    A stage with an ``estimate_fresh(services, scope)`` hook also estimates the units its
    inputs will make once the earlier stages ran (extraction of chunks not made yet, judging
    of runs not made yet), so a dry run on a freshly ingested corpus is not empty."""
    services.cache.pop(("dry-run-expectations",), None)  # read the store as it is now
    estimates: list[Estimate] = []
    future_runs = 0
    with active(expectations(services)):  # replies as expected, beside their caps
        for stage in stages:
            with services.db_lock, services.engine.connect() as conn:
                units = stage.pending(conn, scope)
            # The connection is closed first: cache look-ups use the store too.
            found = list(stage.estimate(None, units, services)) if units else []
            fresh = getattr(stage, "estimate_fresh", None)
            if callable(fresh):
                found = _merge(found + list(fresh(services, scope)))
            found = found or [Estimate(stage=stage.name, model="-")]
            # units of work (the time of stages without model calls): scoring also scores
            # the runs the answer stage is about to make
            found[0].units = sum(work_units(stage, u) for u in units) + (future_runs if stage.name == "score" else 0)
            if stage.name == "answer":
                future_runs = len(units)
            estimates.extend(found)
    return estimates


def _merge(estimates: list[Estimate]) -> list[Estimate]:
    out: dict[tuple[str, str], Estimate] = {}
    for e in estimates:
        m = out.setdefault((e.stage, e.model), Estimate(stage=e.stage, model=e.model))
        m.calls += e.calls
        m.cached_calls += e.cached_calls
        m.prompt_tokens += e.prompt_tokens
        m.completion_tokens += e.completion_tokens
        m.completion_cap += e.completion_cap
        m.basis = ",".join(sorted(set(filter(None, m.basis.split(",") + e.basis.split(",")))))
    return list(out.values())
