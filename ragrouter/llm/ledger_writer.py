"""The ledger's writer thread: it commits queued ``llm_calls`` / ``llm_failures`` rows in
multi-row transactions (group commit; the modes and guarantees are in :mod:`ragrouter.llm.ledger`'s
"Ledger rows and durability"), and :meth:`_LedgerWriter.commit_with` commits them together with
a caller's own rows that link to them, in one transaction."""

from __future__ import annotations

import collections
import dataclasses
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Engine

from ragrouter.db import outage
from ragrouter.db.models import LLMCall, LLMFailure
from ragrouter.llm import spool
from ragrouter.llm.errors import GatewayError

log = logging.getLogger("ragrouter.llm.gateway")

WRITER_MAX_BATCH = 500
WRITER_MAX_QUEUE = 20_000
WRITE_RETRIES = 3
LINGER_S = 0.1  # async mode: how long the writer waits for more rows before a commit
LINGER_ROWS = 64  # ... unless this many are queued


@dataclasses.dataclass
class _Job:
    table: str  # "call" | "failure"
    row: dict
    request_hash: str
    seq: int = 0
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    final_id: int | None = None
    error: str | None = None


class _WriterOwner(Protocol):
    """What the writer needs of its gateway (:class:`ragrouter.llm.gateway.Gateway`): the
    connection it commits on, and the callbacks after each batch. A protocol, so this module
    never imports the gateway (the gateway imports the ledger, not the other way round)."""

    _db: Engine
    _db_lock: Any  # a lock or a null context
    outage_s: float

    def _after_write(self, batch: list[_Job]) -> None: ...

    def _refill_ids_if_low(self) -> None: ...


class _LedgerWriter:
    """One thread committing queued ledger rows in multi-row transactions."""

    def __init__(self, gateway: _WriterOwner, linger_s: float = 0.0):
        self._gw = weakref.proxy(gateway)
        self.linger_s = linger_s
        self.urgent = 0  # flushes waiting: commit now, do not linger
        self.engine = gateway._db
        self.lock = gateway._db_lock
        self.cond = threading.Condition()
        self.queue: collections.deque[_Job] = collections.deque()
        self.enqueued = 0
        self.written = 0
        self.errors: list[str] = []
        self.stopping = False
        self.closing = False  # the gateway closes: a lost store is not waited for, its rows are spooled
        self.outage_s = float(getattr(gateway, "outage_s", outage.DEFAULT_LIMIT_S))
        self.spooled = 0
        self.gone: outage.StoreUnavailable | None = None  # the outage a batch was spooled for
        self.thread = threading.Thread(target=self._run, name="ragrouter-ledger-writer", daemon=True)
        self.thread.start()

    def put(self, job: _Job) -> _Job:
        with self.cond:
            while len(self.queue) >= WRITER_MAX_QUEUE and self.thread.is_alive():
                self.cond.wait(0.1)
            if self.stopping and not self.thread.is_alive():
                raise GatewayError("ledger_write_failed", "the gateway is closed: its ledger writer has stopped")
            self.enqueued += 1
            job.seq = self.enqueued
            self.queue.append(job)
            self.cond.notify_all()
        return job

    def flush(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            target = self.enqueued
            self.urgent += 1
            self.cond.notify_all()
            try:
                while self.written < target and self.thread.is_alive():
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self.cond.wait(left if left is not None else 0.5)
                return self.written >= target
            finally:
                self.urgent -= 1

    def stop(self) -> None:
        """Commit what is queued, then end the thread."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        if threading.current_thread() is not self.thread:
            self.thread.join()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.queue and not self.stopping:
                    self.cond.wait()
                if not self.queue and self.stopping:
                    return
                if self.linger_s > 0:
                    # group commit: let a few more rows arrive, unless someone waits for these
                    until = time.monotonic() + self.linger_s
                    while (len(self.queue) < LINGER_ROWS and not self.stopping and not self.urgent
                           and (left := until - time.monotonic()) > 0):
                        self.cond.wait(left)
                batch = [self.queue.popleft() for _ in range(min(len(self.queue), WRITER_MAX_BATCH))]
                self.cond.notify_all()  # room in the queue
            if not batch:  # a commit_with took them while the thread lingered: no empty transaction
                continue
            try:
                self._commit(batch)
            except BaseException:  # noqa: BLE001 - the writer must never die (the rows are spooled)
                pass
            try:
                self._gw._refill_ids_if_low()
            except ReferenceError:
                return
            except Exception as exc:  # noqa: BLE001 - callers refill themselves when needed
                log.debug("id prefetch failed: %s", exc)

    def commit_with(self, fn: Callable[[Any], Any]) -> Any:
        """Commit every row queued so far and ``fn(conn)`` in one transaction, in the calling
        thread: a unit and the ledger rows it links to are written together (DESIGN §3), in one
        commit instead of a :meth:`flush` and a transaction of the caller's. A batch the
        writer thread is committing is waited for first (its rows may be the ones ``fn`` links
        to). Returns what ``fn`` returns. If ``fn`` fails, the rows are committed without it
        and its error is raised; if the rows cannot be committed they are spooled, as the
        writer thread's are, and the error is raised."""
        with self.cond:
            while self.written + len(self.queue) < self.enqueued and self.thread.is_alive():
                self.cond.wait(0.5)  # a batch is being committed by the thread
            batch = [self.queue.popleft() for _ in range(len(self.queue))]
            self.cond.notify_all()
        return self._commit(batch, fn)

    def _commit(self, batch: list[_Job], extra: Callable[[Any], Any] | None = None) -> Any:
        """Write ``batch`` (and ``extra(conn)`` in its transaction); on failure the rows go to the
        spool and the error is raised; the jobs are marked done either way."""
        failed = None
        try:
            if extra is not None:
                try:
                    return self._write(batch, extra)
                except outage.StoreUnavailable:
                    raise
                except Exception as exc:  # noqa: BLE001 - the caller's rows: the ledger's are written alone
                    failed = exc
            self._write(batch)
        except BaseException as exc:
            msg = f"ledger write failed: {exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            try:  # nothing paid for is dropped: the rows wait in the spool for the next run (spool.py)
                where = spool.keep(self.engine, [(job.table, job.row) for job in batch])
                self.spooled += len(batch)
                msg += f" (kept in {where})"
                if not isinstance(exc, outage.StoreUnavailable):  # an outage is the worker's last line
                    log.error("%s: %d row(s)", msg, len(batch))
            except Exception as spool_exc:  # noqa: BLE001 - a full or read-only disk as well
                log.error("%s (%d rows lost: the spool is not writable either: %s)", msg, len(batch),
                          getattr(spool_exc, "strerror", None) or spool_exc)
            for job in batch:
                job.error = msg
            if isinstance(exc, outage.StoreUnavailable):
                with self.cond:
                    self.gone = exc
            raise
        finally:
            try:
                self._gw._after_write(batch)
            except ReferenceError:
                pass
            for job in batch:
                job.done.set()
            with self.cond:
                self.written += len(batch)
                if any(j.error for j in batch):
                    self.errors.append(next(j.error for j in batch if j.error))
                self.cond.notify_all()
        if failed is not None:
            raise failed
        return None

    def _write(self, batch: list[_Job], extra: Callable[[Any], Any] | None = None) -> Any:
        calls: dict[str, _Job] = {}
        dupes: list[_Job] = []
        for job in batch:
            if job.table == "call":
                if job.request_hash in calls:
                    dupes.append(job)
                else:
                    calls[job.request_hash] = job
        failures = [job.row for job in batch if job.table == "failure"]
        delay = 0.1
        for attempt in range(WRITE_RETRIES):
            try:  # a lost connection is waited for (db/outage.py); other errors are retried twice
                ids, result = outage.retry(lambda: self._transaction(list(calls.values()), failures, extra),
                                           "writing the ledger", self.outage_s, give_up=lambda: self.closing)
                break
            except Exception as exc:  # noqa: BLE001 - retried, then reported
                if attempt == WRITE_RETRIES - 1 or isinstance(exc, outage.StoreUnavailable):
                    raise
                log.warning("ledger write attempt %d failed (%s); retrying", attempt + 1, exc.__class__.__name__)
                time.sleep(delay)
                delay *= 4
        for h, job in calls.items():
            job.final_id = ids.get(h)
            pre = job.row.get("id")
            if pre is not None and job.final_id is not None and job.final_id != pre:
                log.warning("ledger: request %s was stored by another process first; id %s is superseded by %s",
                            h[:12], pre, job.final_id)
        for job in dupes:
            job.final_id = ids.get(job.request_hash)
        return result

    def _transaction(self, calls: list[_Job], failures: list[dict], extra=None) -> tuple[dict[str, int], Any]:
        ids: dict[str, int] = {}
        result = None
        with self.lock, self.engine.begin() as conn:
            groups: dict[tuple, list[dict]] = {}
            for job in calls:
                groups.setdefault(tuple(sorted(job.row)), []).append(job.row)
            for rows in groups.values():
                # executemany of one cached statement: SQLAlchemy's "insertmanyvalues" turns it
                # into multi-row INSERTs without compiling every row (compiling a .values(rows)
                # statement cost ~2 ms of GIL time per row)
                for row_id, h in conn.execute(_INSERT_CALL, rows):
                    ids[h] = row_id
            missing = [job.request_hash for job in calls if job.request_hash not in ids]
            if missing:
                found = conn.execute(
                    select(LLMCall.id, LLMCall.request_hash).where(LLMCall.request_hash.in_(missing))
                ).all()
                ids.update({h: row_id for row_id, h in found})
            if failures:
                conn.execute(LLMFailure.__table__.insert(), failures)
            if extra is not None:
                result = extra(conn)
        return ids, result


_INSERT_CALL = (
    pg_insert(LLMCall)
    .on_conflict_do_nothing(index_elements=["request_hash"])
    .returning(LLMCall.id, LLMCall.request_hash)
)
