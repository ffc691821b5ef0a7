"""The gateway's ledger: cache keys, the shared per-engine cache state, look-ups, id blocks and
claims (used by :mod:`ragrouter.llm.gateway`); the writer thread that commits ``llm_calls`` /
``llm_failures`` rows is :mod:`ragrouter.llm.ledger_writer`.

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

Claims: a request is sent once across workers (PostgreSQL, both modes)
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
    file; threads share the in-flight map). In async mode ``chat()`` returns before the row is
    committed, so the claim is kept past it and released by the writer once the row's batch
    is committed (or spooled): a waiter never finds the claim free and the ledger still
    without the reply (released earlier, two workers paid for the same request).

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
from typing import Any

import numpy as np
from sqlalchemy import bindparam, select, text
from sqlalchemy.engine import Engine

from ragrouter.db import outage
from ragrouter.db.engine import write_lock
from ragrouter.db.models import LLMCall
from ragrouter.llm import tokens

log = logging.getLogger("ragrouter.llm.gateway")

CACHE_KEY_VERSION = 1
ID_BLOCK = 256


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
    finish_reason: str | None = None  # chat: why the reply ended (the endpoint's; stored in params)


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


_LOOKUP = select(
    LLMCall.id, LLMCall.response, LLMCall.response_json, LLMCall.response_vectors, LLMCall.prompt_tokens,
    LLMCall.completion_tokens, LLMCall.token_source, LLMCall.latency_s, LLMCall.attempts, LLMCall.params,
).where(LLMCall.request_hash == bindparam("h"))

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
                   attempts=int(row[8]), finish_reason=_finish_reason(row[9]))


def _finish_reason(params) -> str | None:
    """The ``finish_reason`` a chat row's params recorded (None: not recorded)."""
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            return None
    value = params.get("finish_reason") if isinstance(params, dict) else None
    return value if isinstance(value, str) else None


class _IdBlock:
    """``llm_calls`` ids drawn ahead from its sequence, ``ID_BLOCK`` at a time (async mode:
    ``chat()`` returns before its row is committed, with the id the row will have)."""

    def __init__(self, db: Engine, lock, duck: bool, outage_s: float = outage.DEFAULT_LIMIT_S) -> None:
        self._db, self._db_lock, self._outage_s = db, lock, outage_s
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
        def draw() -> list[int]:
            with self._db_lock, self._db.begin() as conn:
                return [int(x) for x in conn.execute(self._sql, {"n": int(n)}).scalars()]

        # a store that is away is waited for (a unit whose reply came meanwhile is not failed)
        self._ids.extend(outage.retry(draw, "drawing ids for the ledger's rows", self._outage_s))


def _shutdown(writer, own_db: Engine | None) -> None:
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
        self._held: set[str] = set()  # async mode: claims kept until their rows are written
        self._held_lock = threading.Lock()

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

    def hold(self, h: str) -> bool:
        """Keep the claim on ``h`` past :meth:`run_once` until :meth:`release_held` names it."""
        with self._held_lock:
            self._held.add(h)
        return True

    def release_held(self, hashes) -> None:
        """Release the held claims among ``hashes`` (their rows are written, or spooled)."""
        with self._held_lock:
            mine = [h for h in hashes if h in self._held]
            self._held.difference_update(mine)
        for h in mine:
            self.release(h)

    def run_once(self, h: str, lookup, produce, sleep=time.sleep, keep=None):
        """(record, cached): the stored reply, or ``produce()`` while holding the claim.
        ``keep(h)`` (async mode), called once ``produce()`` returned, says True when the caller
        releases the claim itself, later (once the reply's row is committed)."""
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
                kept = False
                try:
                    rec = lookup()  # the previous holder may have stored it just now
                    if rec is not None:
                        return rec, True
                    rec = produce()
                    kept = keep is not None and keep(h)
                    return rec, False
                finally:
                    if not kept:
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
