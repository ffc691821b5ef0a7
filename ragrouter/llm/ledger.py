"""The gateway's ledger: cache keys, the shared per-engine cache state and the writer thread
that commits ``llm_calls`` / ``llm_failures`` rows (used by :mod:`ragrouter.llm.gateway`).

Cache key
    sha256 of the canonical JSON of: key version, call kind (``chat``/``embedding``), the
    backend's *model* name, the messages (or embedding inputs), temperature, max_tokens, the
    response format (structured-output mode + JSON schema) and the sample index (chat), or the
    ``dimensions`` setting (embeddings). The backend *name*, the timeout, stage and phase are
    not in the key: the same model behind two backend names shares its cache, and a request
    asked by two stages is paid once. ``sample`` lets a caller ask the same thing k times
    (k different keys, e.g. repeated judging); everything else equal, only it changes the key.
    Embeddings are keyed per batch of ``batch_size`` inputs.

Ledger rows and durability
    A successful reply is one ``llm_calls`` row (messages as sent, params, response text,
    parsed JSON or float32 vector bytes, prompt/completion tokens with their source (and a
    reasoning model's ``reasoning_tokens``, already part of the completion tokens), latency
    of the successful attempt, attempts, stage, phase, worker_run_id). Unusable replies (empty,
    unparseable or schema-violating JSON) and requests that still fail after the retries are
    *not* cached: they become ``llm_failures`` rows (reason, attempts, the bad reply and its
    billed tokens when one arrived) and the next run asks again.

    All rows go through one writer thread per gateway that commits whatever is queued as one
    multi-row transaction (group commit). DuckDB commits cost 10–60 ms here, far more than a
    row, so committing each call on its own would cap a worker near 40 calls/s. Two modes:

    * ``sync`` (default on PostgreSQL): ``chat()`` returns after its row is committed; ids come
      from ``RETURNING``; a row another process inserted first is found and its id returned.
    * ``async`` (default on DuckDB, one process per file): ids are drawn ahead from the
      ``llm_calls_id_seq`` sequence, ``chat()`` returns as soon as the row is queued, and the
      result is served from memory until committed. The writer lingers up to ``LINGER_S``
      (0.1 s) for more rows, so a commit carries tens of rows. Guarantee: a row is committed
      within ``LINGER_S`` plus one commit of being queued (well under a second);
      :meth:`Gateway.flush` commits at once and blocks until every row queued before it is
      committed; :meth:`Gateway.close` (also run at interpreter exit and when an unclosed
      gateway is garbage-collected) flushes. A hard kill loses at most the rows of that window
      — those calls are paid again by the next run, nothing else is lost or corrupted. Callers
      that store ``call_id`` in their own rows must call ``flush()`` before committing them,
      so a unit never references an unwritten ledger row.

    Choose with ``Gateway(..., ledger_commit='sync'|'async')`` or the ``gateway.ledger_commit``
    setting.

    A lost store connection (PostgreSQL restarted) is waited for, up to
    ``worker.store_outage_s``, by the writer and by the look-up before every request
    (:mod:`ragrouter.db.outage`): the replies that arrive meanwhile wait in memory and are
    committed once the store is back. A batch that still cannot be committed (the store stayed
    away, a full disk) goes to the spool (:mod:`ragrouter.llm.spool`), which the next gateway
    on the store writes to the ledger before it sends anything.

Claims: a request is sent once across workers (PostgreSQL, sync mode)
    Two workers that need the same request at once (the query-entity call that GraphRAG and
    HybridRAG share, a judgment asked twice) would both miss the ledger and both pay. On
    PostgreSQL the gateway therefore *claims* a request before sending it: a session-level
    advisory lock on the request hash (``pg_try_advisory_lock``), taken on one connection
    per gateway and released once the reply's ledger row is committed. A worker that finds the
    request claimed waits (polling the ledger every 50-500 ms) and serves the stored reply
    when it appears; if the claim is released without a row (the sender failed for good) it
    claims and sends the request itself. A sender that dies loses its connection, PostgreSQL
    releases its locks at once, and a waiter sends the request again: that request is paid
    twice (the dead sender's reply was never stored) — a kill costs at most the requests it
    had in flight, at most its backends' concurrency. A restart of the server drops every
    claim too (a claim lost that way is not renewed). DuckDB needs no claims (one process per
    file; threads share the in-flight map). Async ledger mode on PostgreSQL would release the
    claim before the row is committed, so claims are used in sync mode only.

    On a DuckDB file the gateway opens its *own* connection to the same database (DuckDB shares
    one database instance between the connections of a process, with MVCC transactions), so
    its background commits never interleave with transactions on the store engine's single
    connection; one lock serialises the gateway's own use of its connection. It is closed by
    :meth:`Gateway.close` (the file lock is held until then). An in-memory DuckDB has no
    second connection: there the gateway uses the engine itself under
    :func:`ragrouter.db.engine.write_lock`, like every other user of that engine.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import logging
import threading
import time
import weakref
from concurrent.futures import Future
from typing import Any, Protocol

import numpy as np
from sqlalchemy import bindparam, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Engine

from ragrouter.db import outage
from ragrouter.db.engine import write_lock
from ragrouter.db.models import LLMCall, LLMFailure
from ragrouter.llm import spool, tokens
from ragrouter.llm.errors import GatewayError

log = logging.getLogger("ragrouter.llm.gateway")

CACHE_KEY_VERSION = 1
ID_BLOCK = 256
WRITER_MAX_BATCH = 500
WRITER_MAX_QUEUE = 20_000
WRITE_RETRIES = 3
LINGER_S = 0.1  # async mode: how long the writer waits for more rows before a commit
LINGER_ROWS = 64  # ... unless this many are queued


@dataclasses.dataclass
class _Record:
    """What a ledger row holds about a reply (shared by chat and embeddings)."""

    id: int | None
    text: str | None
    data: Any
    vectors: bytes | None
    prompt_tokens: int
    completion_tokens: int
    token_source: str
    latency_s: float
    attempts: int


# --------------------------------------------------------------------------- keys


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces, UTF-8 kept)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def request_hash(key: dict) -> str:
    """sha256 hex of the canonical JSON of a key made by :func:`chat_key`/:func:`embed_key`."""
    return hashlib.sha256(canonical_json(key).encode("utf-8")).hexdigest()


def chat_key(model: str, messages: list[dict], *, temperature: float, max_tokens: int,
             structured: str | None, json_schema: dict | None, sample: int = 0) -> dict:
    """The cache-key payload of a chat request (see the module docstring)."""
    return {
        "v": CACHE_KEY_VERSION,
        "kind": "chat",
        "model": model,
        "messages": messages,
        "temperature": float(temperature),
        "max_tokens": int(max_tokens),
        "response_format": None if json_schema is None else {"mode": structured, "schema": json_schema},
        "sample": int(sample),
    }


def embed_key(model: str, inputs: list[str], *, dimensions: int | None = None) -> dict:
    """The cache-key payload of one embedding batch."""
    return {"v": CACHE_KEY_VERSION, "kind": "embedding", "model": model, "inputs": inputs,
            "dimensions": dimensions}


# the prompt's text and tokens: one rule for the gateway, the ledger and every backend
message_tokens = tokens.message_tokens


# --------------------------------------------------------------------------- shared per engine

_SHARED: "weakref.WeakKeyDictionary[Engine, _Shared]" = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def _is_duckdb(engine: Engine) -> bool:
    return engine.dialect.name.startswith("duckdb")


def engine_lock(engine: Engine):
    """The process-wide lock serialising use of an engine's connection
    (:func:`ragrouter.db.engine.write_lock`); the gateway needs it only for an in-memory DuckDB."""
    return write_lock(engine)


def _gateway_connection(engine: Engine):
    """(engine for the gateway's own DB traffic, lock serialising it, whether we own it)."""
    if not _is_duckdb(engine):
        return engine, contextlib.nullcontext(), False
    database = engine.url.database
    if not database or database == ":memory:":
        return engine, engine_lock(engine), False
    from sqlalchemy import create_engine
    from sqlalchemy.pool import StaticPool

    # Same mode as the caller's engine: DuckDB refuses a second configuration of one file.
    connect_args = {"read_only": True} if getattr(engine, "ragrouter_read_only", False) else {}
    return create_engine(engine.url, poolclass=StaticPool, connect_args=connect_args), threading.RLock(), True


def _hash64(h: str) -> int:
    try:
        return int(h[:16], 16)
    except ValueError:
        return int.from_bytes(hashlib.sha256(h.encode()).digest()[:8], "big")


class _HashIndex:
    """Which request hashes the ledger may hold, kept in memory (DuckDB only: one process
    owns the file, so this process sees every insert). A miss needs no database round trip,
    which matters because a lookup would otherwise wait behind the writer's commits."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False
        self._arr = np.empty(0, dtype=np.uint64)
        self._new: set[int] = set()

    def ensure_loaded(self, engine: Engine, lock) -> None:
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            with lock, engine.connect() as conn:
                hashes = conn.execute(select(LLMCall.request_hash)).scalars().all()
            self._arr = np.unique(np.fromiter((_hash64(h) for h in hashes), dtype=np.uint64, count=len(hashes)))
            self._loaded = True

    def maybe(self, h: str) -> bool:
        v = _hash64(h)
        if v in self._new:
            return True
        i = int(np.searchsorted(self._arr, np.uint64(v)))
        return i < len(self._arr) and int(self._arr[i]) == v

    def add(self, h: str) -> None:
        self._new.add(_hash64(h))


class _Shared:
    """Cache state shared by every gateway of one engine in this process: replies queued but
    not yet committed, requests in flight, and (DuckDB) the hash index."""

    def __init__(self, engine: Engine) -> None:
        self.lock = threading.Lock()
        self.pending: dict[str, _Record] = {}
        self.inflight: dict[str, Future] = {}
        self.index = _HashIndex() if _is_duckdb(engine) else None


def _shared_for(engine: Engine) -> _Shared:
    with _REGISTRY_LOCK:
        shared = _SHARED.get(engine)
        if shared is None:
            shared = _SHARED[engine] = _Shared(engine)
        return shared


# --------------------------------------------------------------------------- ledger writer


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
            try:
                self._write(batch)
            except BaseException as exc:  # noqa: BLE001 - the writer must never die silently
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
            try:
                self._gw._refill_ids_if_low()
            except ReferenceError:
                return
            except Exception as exc:  # noqa: BLE001 - callers refill themselves when needed
                log.debug("id prefetch failed: %s", exc)

    def _write(self, batch: list[_Job]) -> None:
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
                ids = outage.retry(lambda: self._transaction(list(calls.values()), failures), "writing the ledger",
                                   self.outage_s, give_up=lambda: self.closing)
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

    def _transaction(self, calls: list[_Job], failures: list[dict]) -> dict[str, int]:
        ids: dict[str, int] = {}
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
        return ids


_LOOKUP = select(
    LLMCall.id, LLMCall.response, LLMCall.response_json, LLMCall.response_vectors, LLMCall.prompt_tokens,
    LLMCall.completion_tokens, LLMCall.token_source, LLMCall.latency_s, LLMCall.attempts,
).where(LLMCall.request_hash == bindparam("h"))

_INSERT_CALL = (
    pg_insert(LLMCall)
    .on_conflict_do_nothing(index_elements=["request_hash"])
    .returning(LLMCall.id, LLMCall.request_hash)
)


def lookup(db: Engine, lock, index: "_HashIndex | None", h: str, outage_s: float) -> _Record | None:
    """The ledger's record of request ``h``, or None; a lost store connection is waited for
    (db/outage.py), so no request is sent that could not be looked up first."""
    if index is not None:
        index.ensure_loaded(db, lock)
        if not index.maybe(h):
            return None

    def once():
        with lock, db.connect() as conn:
            return conn.execute(_LOOKUP, {"h": h}).first()

    row = outage.retry(once, "looking a request up in the ledger", outage_s)
    if row is None:
        return None
    return _Record(id=row[0], text=row[1], data=row[2], vectors=row[3], prompt_tokens=int(row[4]),
                   completion_tokens=int(row[5]), token_source=row[6], latency_s=float(row[7]),
                   attempts=int(row[8]))


class _IdBlock:
    """``llm_calls`` ids drawn ahead from its sequence, ``ID_BLOCK`` at a time (async mode:
    ``chat()`` returns before its row is committed, with the id the row will have)."""

    def __init__(self, db: Engine, lock, duck: bool) -> None:
        self._db, self._db_lock = db, lock
        self._ids: collections.deque[int] = collections.deque()
        self._lock = threading.Lock()
        self._used = False
        self._sql = text("SELECT nextval('llm_calls_id_seq') FROM range(:n)" if duck else
                         "SELECT nextval('llm_calls_id_seq') FROM generate_series(1, :n)")

    def next(self) -> int:
        with self._lock:
            self._used = True
            if not self._ids:
                self._refill(ID_BLOCK)
            return self._ids.popleft()

    def refill_if_low(self) -> None:
        """Top the block up in the writer's idle time (once ids are used at all)."""
        if not self._used:
            return
        with self._lock:
            if len(self._ids) < ID_BLOCK // 4:
                self._refill(ID_BLOCK)

    def _refill(self, n: int) -> None:  # the caller holds _lock
        with self._db_lock, self._db.begin() as conn:
            self._ids.extend(int(x) for x in conn.execute(self._sql, {"n": int(n)}).scalars())


def _shutdown(writer: _LedgerWriter, own_db: Engine | None) -> None:
    writer.stop()
    if own_db is not None:
        own_db.dispose()


class _Claims:
    """Advisory-lock claims on request hashes (PostgreSQL; see "Claims" above)."""

    POLL_MIN_S = 0.05
    POLL_MAX_S = 0.5

    def __init__(self, engine: Engine, outage_s: float = outage.DEFAULT_LIMIT_S) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._conn = None
        self.waits = 0
        self.outage_s = outage_s

    def _execute(self, sql: str, key: int, wait: bool = True):
        def once():
            with self._lock:
                stale_ok = self._conn is not None  # a session lost since its last use is replaced once, quietly
                while True:
                    if self._conn is None:
                        self._conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
                    try:
                        return self._conn.exec_driver_sql(sql, (key,)).scalar()
                    except Exception as exc:
                        conn, self._conn = self._conn, None  # the next try reconnects
                        with contextlib.suppress(Exception):
                            conn.invalidate()
                        if not (stale_ok and outage.is_disconnect(exc)):
                            raise
                        stale_ok = False

        return outage.retry(once, "claiming a request", self.outage_s) if wait else once()

    @staticmethod
    def key(h: str) -> int:
        v = _hash64(h)
        return v - (1 << 64) if v >= (1 << 63) else v

    def try_claim(self, h: str) -> bool:
        return bool(self._execute("SELECT pg_try_advisory_lock(%s)", self.key(h)))

    def release(self, h: str) -> None:
        try:
            self._execute("SELECT pg_advisory_unlock(%s)", self.key(h), wait=False)
        except Exception as exc:  # noqa: BLE001 - a lost session has released it anyway
            if not outage.is_disconnect(exc):
                log.warning("ledger claim: release failed (%s)", exc.__class__.__name__)

    def run_once(self, h: str, lookup, produce, sleep=time.sleep):
        """(record, cached): the stored reply, or ``produce()`` while holding the claim."""
        delay = self.POLL_MIN_S
        while True:
            try:
                claimed = self.try_claim(h)
            except outage.StoreUnavailable:
                raise  # the store is gone: nothing is sent that could not be looked up first
            except Exception as exc:  # noqa: BLE001 - claims are an optimisation: send unclaimed
                log.warning("ledger claim: %s; sending without a claim", exc.__class__.__name__)
                return produce(), False
            if claimed:
                try:
                    rec = lookup()  # the previous holder may have stored it just now
                    if rec is not None:
                        return rec, True
                    return produce(), False
                finally:
                    self.release(h)
            self.waits += 1
            sleep(delay)
            delay = min(self.POLL_MAX_S, delay * 2)
            rec = lookup()
            if rec is not None:
                return rec, True

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:  # closed, not pooled: its session ends with every claim it held
            with contextlib.suppress(Exception):
                conn.invalidate()
            with contextlib.suppress(Exception):
                conn.close()
